"""Word vectors from the build's in-domain text: PPMI + truncated SVD (a count-based embedding).

The distributional feature of the combination model (pivot.eval.features): two phrases that
occur in the same biological contexts get similar vectors, even when no bitext pivots them.
Method (the 2015 study "Improving distributional similarity with lessons learned from word
embeddings", with its recommended settings):

* co-occurrence counts C(w, c) of every vocabulary word w and every vocabulary word c at most
  ``window`` tokens away inside a sentence (unweighted, symmetric: (w, c) and (c, w) both
  count). Words rarer than ``min_count`` and the LM text's ``<oov>`` token are not in the
  vocabulary; they still occupy their position (a window does not reach across them);
* PPMI with context-distribution smoothing alpha (cds):

      PMI_a(w, c) = log( C(w, c) * Z / (#w * #c^a) ),   #w = sum_c C(w, c),  Z = sum_c #c^a
      PPMI(w, c) = max(PMI_a(w, c), 0)

  (= log P(w, c) / (P(w) P_a(c)) with P_a(c) = #c^a / Z; a = 0.75 dampens PMI's bias
  towards rare contexts);
* truncated SVD PPMI ~ U S V^T of rank ``dim`` (ARPACK, start vector from a seeded generator),
  word vectors W = U S^(1/2) (eigenvalue weighting p = 0.5), each scaled to unit length;
* a phrase's vector is the mean of its in-vocabulary words' unit vectors; a phrase with no
  in-vocabulary word has none (its pairs get the feature's missing indicator).

The vectors are cached (npz) under a key that hashes the text file's bytes and every parameter.
"""
from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pivot.errors import InputError

log = logging.getLogger("pivot")

OOV_TOKEN = "<oov>"
#: the settings of that study that this module uses; part of the cache key
DEFAULTS = {"window": 5, "min_count": 5, "cds": 0.75, "dim": 300, "eig": 0.5, "seed": 0}
#: bumped whenever the method changes what the vectors are, so a cached file is never stale
METHOD_VERSION = 2


def vocabulary(sentences, min_count: int) -> list[str]:
    """Words with at least min_count occurrences (not OOV_TOKEN), most frequent first, ties by text."""
    counts = Counter(t for s in sentences for t in s)
    counts.pop(OOV_TOKEN, None)
    return sorted((w for w, n in counts.items() if n >= min_count), key=lambda w: (-counts[w], w))


def cooccurrence(sentences, vocab: list[str], window: int):
    """The symmetric (V, V) count matrix C(w, c) of words at distance 1..window in a sentence (CSR)."""
    from scipy import sparse

    index = {w: i for i, w in enumerate(vocab)}
    ids, sent = [], []
    for j, s in enumerate(sentences):
        ids += [index.get(t, -1) for t in s]
        sent += [j] * len(s)
    ids, sent = np.asarray(ids, dtype=np.int64), np.asarray(sent, dtype=np.int64)
    v = len(vocab)
    total = sparse.csr_matrix((v, v), dtype=np.float64)
    for d in range(1, window + 1):
        a, b = ids[:-d], ids[d:]
        keep = (sent[:-d] == sent[d:]) & (a >= 0) & (b >= 0)
        a, b = a[keep], b[keep]
        ones = np.ones(2 * len(a))
        total = total + sparse.csr_matrix((ones, (np.concatenate([a, b]), np.concatenate([b, a]))), shape=(v, v))
    total.sum_duplicates()
    return total


def ppmi(counts, cds: float = 0.75):
    """PPMI_a of a co-occurrence matrix (CSR in, CSR out; see the module docstring)."""
    from scipy import sparse

    c = sparse.csr_matrix(counts, dtype=np.float64)
    n_w = np.asarray(c.sum(axis=1)).ravel()
    n_c_a = np.asarray(c.sum(axis=0)).ravel() ** cds
    z = n_c_a.sum()
    coo = c.tocoo()
    pmi = np.log(coo.data * z / (n_w[coo.row] * n_c_a[coo.col]))
    keep = pmi > 0
    return sparse.csr_matrix((pmi[keep], (coo.row[keep], coo.col[keep])), shape=c.shape)


def svd_vectors(matrix, dim: int, eig: float = 0.5, seed: int = 0) -> np.ndarray:
    """Rows of U S^eig of the rank-dim truncated SVD (singular values descending), unit length.

    ARPACK starts from a vector drawn from numpy's default_rng(seed), so the result is
    reproducible; the sign of each singular vector is fixed so that its largest-magnitude
    entry is positive (cosines do not depend on signs, stored vectors then do not either).
    """
    from scipy.sparse.linalg import svds

    k = min(dim, min(matrix.shape) - 1)
    if k < 1:
        raise InputError(f"too small a vocabulary ({min(matrix.shape)} words) for word vectors")
    v0 = np.random.default_rng(seed).standard_normal(min(matrix.shape))
    u, s, _ = svds(matrix.astype(np.float64, copy=False), k=k, v0=v0, solver="arpack")   # no second copy
    order = np.argsort(-s, kind="stable")
    u, s = u[:, order], s[order]
    flip = np.sign(u[np.abs(u).argmax(axis=0), np.arange(u.shape[1])])
    w = u * flip * s ** eig
    norm = np.linalg.norm(w, axis=1, keepdims=True)
    # a row outside the kept subspace is rounding noise (~1e-17), not a direction: it stays 0
    return np.divide(w, norm, out=np.zeros_like(w), where=norm > 1e-9 * norm.max())


@dataclass
class WordVectors:
    """Unit word vectors and the phrase cosine built on them."""

    vocab: list[str]
    vectors: np.ndarray          # (V, d), unit rows
    source: str = ""             # what they were trained on (for the report)
    params: dict | None = None

    def __post_init__(self):
        self._index = {w: i for i, w in enumerate(self.vocab)}

    def phrase_vector(self, phrase: str) -> np.ndarray | None:
        """Mean of the unit vectors of the phrase's in-vocabulary tokens; None when it has none."""
        rows = [self._index[t] for t in phrase.split() if t in self._index]
        return self.vectors[rows].mean(axis=0) if rows else None

    def cosine(self, pairs) -> tuple[np.ndarray, np.ndarray]:
        """(cos of the two phrase vectors, missing) per pair: missing = a phrase has no vector
        (cosine 0 there; a zero mean vector gives cosine 0 too)."""
        cache: dict[str, np.ndarray | None] = {}
        cos, missing = np.zeros(len(pairs)), np.zeros(len(pairs), dtype=bool)
        for i, (a, b) in enumerate(pairs):
            for t in (a, b):
                if t not in cache:
                    cache[t] = self.phrase_vector(t)
            u, v = cache[a], cache[b]
            if u is None or v is None:
                missing[i] = True
                continue
            nu, nv = np.linalg.norm(u), np.linalg.norm(v)
            cos[i] = float(u @ v / (nu * nv)) if nu > 0 and nv > 0 else 0.0
        return cos, missing


def train(sentences, **params) -> WordVectors:
    """PPMI-SVD word vectors of tokenised sentences (see the module docstring for the method)."""
    p = {**DEFAULTS, **params}
    vocab = vocabulary(sentences, p["min_count"])
    counts = cooccurrence(sentences, vocab, p["window"])
    # words that never co-occur with a vocabulary word have an all-zero row: no direction
    vecs = svd_vectors(ppmi(counts, p["cds"]), p["dim"], p["eig"], p["seed"])
    return WordVectors(vocab, vecs, params=p)


def in_domain_text(work) -> Path:
    """The in-domain LM text of a build's work dir (WORK/lmtext-*/in_domain.txt: normalised,
    one sentence a line, rare words as <oov>); refuses a dir holding none or several."""
    found = sorted(Path(work).glob("lmtext-*/in_domain.txt"))
    if len(found) != 1:
        what = "no" if not found else f"{len(found)} ({', '.join(str(f.parent.name) for f in found)})"
        raise InputError(f"the work dir has {what} lmtext-*/in_domain.txt: give the dir of one build", work)
    return found[0]


def vectors_for_text(path, cache_dir=None, **params) -> WordVectors:
    """train() on a text file (one tokenised sentence a line), cached under cache_dir by content."""
    p = {**DEFAULTS, **params}
    path = Path(path)
    data = path.read_bytes()
    key = hashlib.sha256(data + b"\0" + json.dumps({**p, "method": METHOD_VERSION}, sort_keys=True).encode()
                         ).hexdigest()[:16]
    source = f"{path.parent.name}/{path.name} (sha256 {hashlib.sha256(data).hexdigest()[:12]})"
    cached = None if cache_dir is None else Path(cache_dir) / f"ppmi-svd-{key}.npz"
    if cached is not None and cached.is_file():
        with np.load(cached, allow_pickle=False) as z:
            return WordVectors(z["vocab"].tolist(), z["vectors"].astype(np.float64), source, p)
    sentences = [line.split() for line in data.decode("utf-8").splitlines()]
    wv = train(sentences, **p)
    wv.source = source
    log.info("PPMI-SVD: %d words, %d dimensions from %s", len(wv.vocab), wv.vectors.shape[1], source)
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(".tmp.npz")
        np.savez(tmp, vocab=np.asarray(wv.vocab), vectors=wv.vectors.astype(np.float32))
        tmp.replace(cached)
    return wv
