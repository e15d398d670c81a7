"""Phrase-pair extraction: consistent phrase pairs with weighted counts for every model at once.

The counting is the standard one of phrase-based MT (Moses'
``phrase-extract``): an English span [e1, e2] of at most ``max_len`` words and the minimal
foreign span [f1, f2] covering its alignment links form a pair when no word of [f1, f2] links
outside [e1, e2]; the foreign span may then grow over unaligned foreign words at either edge
(still at most ``max_len`` words). Spans without a link are skipped.

Each extracted instance in sentence s adds ``weights[s, k]`` to ``counts[pair, k]`` for every
model k (column 0 is the General model, all ones) and 1 to the integer ``support`` — Thrax's
fork keeps the same float-next-to-integer pair of counts. The loop is the Cython kernel
:func:`pivot._counts.extract_phrase_table`; this module validates inputs and holds the result.

>>> import numpy as np
>>> t = extract_phrase_pairs(
...     np.array([0, 1], np.int32), np.array([0, 2]),        # English "0 1"
...     np.array([5, 6], np.int32), np.array([0, 2]),        # foreign "5 6"
...     np.array([0, 1], np.int32), np.array([1, 0], np.int32), np.array([0, 2]),  # crossing
...     np.ones((1, 1)))
>>> [(t.e_phrase(e), t.f_phrase(f)) for e, f in zip(t.e_id, t.f_id)]
[((0,), (6,)), ((0, 1), (5, 6)), ((1,), (5,))]
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pivot._native import _counts
from pivot.pipeline.stage import Stage

#: Longest phrase (in words, either side) extracted by default, as in Moses and PPDB.
DEFAULT_MAX_LEN = 5
#: Longest phrase the packed keys can hold (two 64-bit words of three 21-bit tokens).
MAX_PHRASE_LEN = _counts.MAX_PHRASE_LEN
#: Largest token id the packed keys can hold.
MAX_TOKEN_ID = _counts.MAX_TOKEN_ID


@dataclass
class PhraseTable:
    """Extracted phrase pairs with one weighted count column per model.

    Phrase ids follow the lexicographic order of the token-id tuples (a phrase sorts before
    its extensions), so equal inputs give equal tables. Pairs are unique and sorted by
    (e_id, f_id).
    """

    e_phrases: np.ndarray  # (n_e, max_len) int32 token ids, right-padded with -1; row i is phrase i
    f_phrases: np.ndarray  # (n_f, max_len) int32, the same for foreign phrases
    e_id: np.ndarray  # (n_pairs,) int32
    f_id: np.ndarray  # (n_pairs,) int32
    counts: np.ndarray  # (n_pairs, K) float64: sum of weights[s, k] over the pair's instances
    support: np.ndarray  # (n_pairs,) int64: number of extracted instances
    e_count: np.ndarray  # (n_e,) int64: support of each English phrase (sum over its pairs)
    # (n_e, K) int64: n_k(e), the extractions of e that model k counts at all (weight > 0):
    # the number of alignments model k's distribution of e rests on, for its own
    # minimum-count rule. None: every model counts every extraction (n_k(e) = e_count).
    e_nobs: np.ndarray | None = None

    def e_phrase(self, i) -> tuple[int, ...]:
        """Token ids of English phrase i, padding dropped."""
        row = self.e_phrases[int(i)]
        return tuple(row[row >= 0].tolist())

    def f_phrase(self, i) -> tuple[int, ...]:
        """Token ids of foreign phrase i, padding dropped."""
        row = self.f_phrases[int(i)]
        return tuple(row[row >= 0].tolist())

    @property
    def n_e(self) -> int:
        return int(self.e_phrases.shape[0])

    @property
    def n_f(self) -> int:
        return int(self.f_phrases.shape[0])

    @property
    def n_pairs(self) -> int:
        return int(self.e_id.shape[0])

    @property
    def n_models(self) -> int:
        return int(self.counts.shape[1])

    def observations(self) -> np.ndarray:
        """(n_e, K) int64 n_k(e): ``e_nobs``, or ``e_count`` for every model when it is None."""
        if self.e_nobs is not None:
            return np.asarray(self.e_nobs, dtype=np.int64)
        return np.repeat(np.asarray(self.e_count, dtype=np.int64)[:, None], self.n_models, axis=1)

    def save(self, path) -> None:
        """Write the table as one uncompressed ``.npz`` (memory-mappable members)."""
        arrays = {name: getattr(self, name) for name in _TABLE_FIELDS}
        if self.e_nobs is not None:
            arrays["e_nobs"] = self.e_nobs
        with open(Path(path), "wb") as fh:
            np.savez(fh, **arrays)

    @classmethod
    def load(cls, path) -> "PhraseTable":
        with np.load(Path(path), allow_pickle=False) as z:
            missing = [name for name in _TABLE_FIELDS if name not in z.files]
            if missing:
                raise ValueError(f"{path}: not a phrase table (missing {', '.join(missing)})")
            return cls(**{name: z[name] for name in _TABLE_FIELDS},
                       e_nobs=z["e_nobs"] if "e_nobs" in z.files else None)


_TABLE_FIELDS = ("e_phrases", "f_phrases", "e_id", "f_id", "counts", "support", "e_count")


def _as(name: str, a, dtype) -> np.ndarray:
    """A C-contiguous array of dtype; refuses lossy conversions (floats to ids, say)."""
    arr = np.asarray(a)
    if arr.dtype != dtype and not np.can_cast(arr.dtype, dtype, casting="same_kind"):
        raise TypeError(f"{name}: expected {np.dtype(dtype).name}, got {arr.dtype.name}")
    if arr.dtype != dtype:
        converted = arr.astype(dtype)
        if arr.size and not np.array_equal(converted, arr):
            raise ValueError(f"{name}: values do not fit {np.dtype(dtype).name}")
        arr = converted
    return np.ascontiguousarray(arr)


def _check_offsets(name: str, offsets: np.ndarray, n_items: int, n: int) -> None:
    if offsets.ndim != 1 or offsets.shape[0] != n + 1:
        raise ValueError(f"{name}: expected {n + 1} offsets, got shape {offsets.shape}")
    if offsets[0] != 0 or offsets[-1] != n_items:
        raise ValueError(f"{name}: must start at 0 and end at {n_items}, "
                         f"got {offsets[0]}..{offsets[-1]}")
    steps = np.diff(offsets)
    if (steps < 0).any():
        raise ValueError(f"{name}: decreasing at sentence {int(np.argmax(steps < 0))}")


def extract_phrase_pairs(e_tokens, e_offsets, f_tokens, f_offsets, link_e, link_f, link_offsets,
                         weights, max_len: int = DEFAULT_MAX_LEN) -> PhraseTable:
    """Extract consistent phrase pairs and their weighted counts under every model.

    Sentence s is ``e_tokens[e_offsets[s]:e_offsets[s+1]]`` (likewise the foreign side); its
    links are ``(link_e[i], link_f[i])`` for i in ``[link_offsets[s], link_offsets[s+1])``,
    0-based positions within the sentence. ``weights`` is (n, K): column k weights every
    instance of sentence s under model k. Token ids must be in ``0..MAX_TOKEN_ID`` and
    ``max_len`` in ``1..MAX_PHRASE_LEN``. A link outside its sentence raises ValueError naming
    the sentence.

    Memory: about 40 bytes per extracted instance while sorting (a 200k-sentence bitext of
    ~12 words gives a few million instances), then the table itself.
    """
    e_tokens = _as("e_tokens", e_tokens, np.int32)
    f_tokens = _as("f_tokens", f_tokens, np.int32)
    e_offsets = _as("e_offsets", e_offsets, np.int64)
    f_offsets = _as("f_offsets", f_offsets, np.int64)
    link_e = _as("link_e", link_e, np.int32)
    link_f = _as("link_f", link_f, np.int32)
    link_offsets = _as("link_offsets", link_offsets, np.int64)
    weights = _as("weights", weights, np.float64)
    if e_offsets.ndim != 1 or e_offsets.shape[0] < 1:
        raise ValueError("e_offsets: expected a 1-d array of n + 1 offsets")
    n = e_offsets.shape[0] - 1
    _check_offsets("e_offsets", e_offsets, e_tokens.shape[0], n)
    _check_offsets("f_offsets", f_offsets, f_tokens.shape[0], n)
    _check_offsets("link_offsets", link_offsets, link_e.shape[0], n)
    if link_f.shape != link_e.shape:
        raise ValueError(f"link_e and link_f differ in length ({link_e.shape} vs {link_f.shape})")
    if weights.ndim != 2 or weights.shape[0] != n or weights.shape[1] < 1:
        raise ValueError(f"weights: expected shape ({n}, K >= 1), got {weights.shape}")
    if not np.isfinite(weights).all() or (weights < 0).any():
        raise ValueError("weights must be finite and >= 0")
    if not 1 <= int(max_len) <= MAX_PHRASE_LEN:
        raise ValueError(f"max_len must be in 1..{MAX_PHRASE_LEN}, got {max_len}")
    # Observation counts n_k(e) for each model's own minimum-count rule: the kernel also counts
    # the indicator 1[w_k(s) > 0] for every column that is not already 0/1 (for a 0/1 column
    # c_k(e,f) is that count). Sums of 1.0 are exact integers in float64 below 2^53.
    K = weights.shape[1]
    observed = (weights > 0).astype(np.float64)
    extra = [k for k in range(K) if not np.array_equal(weights[:, k], observed[:, k])]
    w_all = np.ascontiguousarray(np.hstack([weights, observed[:, extra]])) if extra else weights
    e_phrases, f_phrases, e_id, f_id, counts, support, e_count = _counts.extract_phrase_table(
        e_tokens, e_offsets, f_tokens, f_offsets, link_e, link_f, link_offsets, w_all, int(max_len))
    obs = counts.copy() if not extra else counts[:, :K].copy()
    for j, k in enumerate(extra):
        obs[:, k] = counts[:, K + j]
    counts = np.ascontiguousarray(counts[:, :K]) if extra else counts
    n_e = e_phrases.shape[0]
    e_nobs = np.empty((n_e, K), dtype=np.int64)
    for k in range(K):
        e_nobs[:, k] = np.rint(np.bincount(e_id, weights=obs[:, k], minlength=n_e)).astype(np.int64)
    return PhraseTable(e_phrases, f_phrases, e_id, f_id, counts, support, e_count, e_nobs)


# ------------------------------------------------------------------------------ sharded extraction
#
# The build cuts the bitext into shards of sentence pairs and extracts each shard on its own
# (pivot.pipeline.translation merges them). A phrase is known across shards by a 64-bit key
# hashed from its global token ids; a shard's pairs are split into P partitions by e key range
# (partition_of), so merging partition p reads part p of every shard and nothing else.
# Inside a shard the kernel runs on shard-local token ids (dense, < 2^21 for any shard of
# realistic size), so the global vocabularies may hold up to 2^31 ids.

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def _splitmix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on a uint64 array (wrapping arithmetic)."""
    z = z + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


def phrase_keys(rows: np.ndarray) -> np.ndarray:
    """64-bit key of each phrase row (int token ids, -1 padded): a hash chained over the columns.

    The same tokens give the same key on every machine (integer arithmetic only). Two
    different phrases could share a key (odds about n^2 / 2^65: 1e-7 for 2M phrases); the
    merge compares the token rows behind every key and stops with an error if they differ.
    """
    rows = np.asarray(rows)
    h = np.full(rows.shape[0], 0x243F6A8885A308D3, dtype=np.uint64)
    for c in range(rows.shape[1]):
        h = _splitmix(h ^ (rows[:, c].astype(np.int64) + 1).astype(np.uint64))
    return h


def partition_of(keys: np.ndarray, n_parts: int) -> np.ndarray:
    """Partition of each key: P equal ranges of the key space, so partitions are key-ordered."""
    return ((keys >> np.uint64(32)) * np.uint64(n_parts) >> np.uint64(32)).astype(np.int64)


def _whole_pair_links(e_offsets, f_offsets, link_e, link_f, link_offsets, whole, max_len):
    """Links that make a whole sentence pair its only consistent phrase pair (term lists).

    Every English word is linked to every foreign word, so no shorter English span has a
    consistent foreign span: the term pair (e, f) is extracted once, when both sides fit
    max_len, and nothing else. Pairs not marked ``whole`` keep their alignment links.
    """
    n = len(e_offsets) - 1
    le, lf = np.diff(e_offsets), np.diff(f_offsets)
    n_links = np.diff(link_offsets)
    full = whole.astype(bool) & (le <= max_len) & (lf <= max_len) & (le > 0) & (lf > 0)
    new_n = np.where(whole.astype(bool), np.where(full, le * lf, 0), n_links)
    new_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(new_n, out=new_offsets[1:])
    out_e = np.empty(new_offsets[-1], dtype=np.int32)
    out_f = np.empty(new_offsets[-1], dtype=np.int32)
    for s in range(n):
        a, b = new_offsets[s], new_offsets[s + 1]
        if b == a:
            continue
        if whole[s]:
            grid_e, grid_f = np.divmod(np.arange(b - a, dtype=np.int32), np.int32(lf[s]))
            out_e[a:b], out_f[a:b] = grid_e, grid_f
        else:
            out_e[a:b] = link_e[link_offsets[s]:link_offsets[s + 1]]
            out_f[a:b] = link_f[link_offsets[s]:link_offsets[s + 1]]
    return out_e, out_f, new_offsets


def _local_ids(tokens: np.ndarray, what: str, shard: str):
    """(global ids of the shard's types, shard-local token array) for the 21-bit kernel."""
    types, local = np.unique(tokens, return_inverse=True)
    if len(types) > MAX_TOKEN_ID + 1:
        raise ValueError(f"{shard}: {len(types)} distinct {what} tokens in one shard exceeds "
                         f"{MAX_TOKEN_ID + 1}; use smaller shards ([extract] shard_sentences)")
    return types, local.astype(np.int32).reshape(-1)


def _to_global(rows: np.ndarray, types: np.ndarray) -> np.ndarray:
    out = np.full(rows.shape, -1, dtype=np.int32)
    mask = rows >= 0
    out[mask] = types[rows[mask]]
    return out


def extract_shard(shard_path, weights_path, start: int, max_len: int, n_parts: int, out_path) -> dict:
    """Round 1 of the sharded count: extract one shard, write its pairs split into partitions.

    Reads the shard's arrays (see pivot.pipeline.encode) and rows [start, start + n) of the
    weight matrix; writes ``out_path`` (one bundle, see pivot.pipeline.bundle) holding, for each partition p of the English
    key range, ``p{p}_e_key``, ``p{p}_f_key`` (uint64, sorted by (e, f)), ``p{p}_counts``
    (float64, one column per model), ``p{p}_support`` (int64) and the token rows behind the
    keys (``p{p}_e_rows`` for the partition's English phrases, with their per-model
    observation counts ``p{p}_e_nobs``, see :class:`PhraseTable`; ``q{p}_f_rows``/``q{p}_f_key``
    for foreign phrases of foreign key range p). Idempotent: an existing output is kept.
    """
    from pivot.pipeline.bundle import save_bundle

    out_path = Path(out_path)
    if out_path.is_file():
        return {"shard": str(shard_path), "reused": True}
    with np.load(shard_path) as z:
        a = {k: z[k] for k in z.files}
    n = len(a["e_offsets"]) - 1
    weights = np.load(weights_path, mmap_mode="r")
    w = np.ascontiguousarray(weights[start:start + n], dtype=np.float64)
    del weights
    link_e, link_f, link_offsets = a["link_e"], a["link_f"], a["link_offsets"]
    if "whole" in a and a["whole"].any():
        link_e, link_f, link_offsets = _whole_pair_links(a["e_offsets"], a["f_offsets"], link_e, link_f,
                                                         link_offsets, a["whole"], max_len)
    e_types, e_local = _local_ids(a["e_tokens"], "English", str(shard_path))
    f_types, f_local = _local_ids(a["f_tokens"], "foreign", str(shard_path))
    table = extract_phrase_pairs(e_local, a["e_offsets"], f_local, a["f_offsets"], link_e, link_f,
                                 link_offsets, w, max_len=max_len)
    del a, e_local, f_local, w
    e_rows = _to_global(table.e_phrases, e_types)
    f_rows = _to_global(table.f_phrases, f_types)
    e_key_of, f_key_of = phrase_keys(e_rows), phrase_keys(f_rows)
    e_key, f_key = e_key_of[table.e_id], f_key_of[table.f_id]
    order = np.lexsort((f_key, e_key))
    e_key, f_key = e_key[order], f_key[order]
    counts, support = table.counts[order], table.support[order]
    part = partition_of(e_key, n_parts)
    bounds = np.searchsorted(part, np.arange(n_parts + 1))
    e_part = partition_of(e_key_of, n_parts)
    f_part = partition_of(f_key_of, n_parts)
    arrays = {}
    for p in range(n_parts):
        sl = slice(bounds[p], bounds[p + 1])
        arrays[f"p{p}_e_key"], arrays[f"p{p}_f_key"] = e_key[sl], f_key[sl]
        arrays[f"p{p}_counts"], arrays[f"p{p}_support"] = counts[sl], support[sl]
        mine = np.flatnonzero(e_part == p)
        arrays[f"p{p}_e_dict_key"], arrays[f"p{p}_e_rows"] = e_key_of[mine], e_rows[mine]
        arrays[f"p{p}_e_nobs"] = table.e_nobs[mine]
        mine = np.flatnonzero(f_part == p)
        arrays[f"q{p}_f_dict_key"], arrays[f"q{p}_f_rows"] = f_key_of[mine], f_rows[mine]
    save_bundle(out_path, **arrays)
    return {"shard": str(shard_path), "reused": False, "n_sentences": n, "n_pairs": int(len(e_key)),
            "n_e": int(len(e_rows)), "n_f": int(len(f_rows))}


def stage_params(recipe) -> dict:
    return {"max_phrase_len": recipe["extract"]["max_phrase_len"]}


def n_parts(n_sentences: int) -> int:
    """Partitions of the phrase-key range for the merges: a merge task holds about 1/n_parts of
    all shards' partial counts, so this grows with the corpus (about 50k sentence pairs a
    partition, at least 8 so that a few workers share the merges evenly). It follows the data,
    never the number of workers; the database does not depend on it."""
    return max(8, -(-n_sentences // 50_000))


def run_stage(context) -> None:
    """Round 1: every shard's phrase pairs, counted under every model, split by e key range."""
    import json

    from pivot.pipeline.encode import read_shards

    encode_dir, tmp = context.dir("encode"), context.tmp
    shards = read_shards(encode_dir)
    parts = n_parts(int(shards["n_sentences"]))
    weights = context.dir("weights") / "weights.npy"
    tasks = [(encode_dir / sh["file"], weights, sh["start"], context.params["max_phrase_len"], parts,
              tmp / f"x-{i:05d}.arrays") for i, sh in enumerate(shards["shards"])]
    done = context.engine.map(extract_shard, tasks, name="extract",
                              cost=[sh.get("english_tokens", sh["n"]) for sh in shards["shards"]])
    (tmp / "extract.json").write_text(json.dumps({"n_parts": parts, "n_shards": len(tasks),
                                                  "n_pairs_in_shards": sum(d.get("n_pairs", 0) for d in done)}))


STAGE = Stage("extract", 4, ("encode", "weights"), ("extract.max_phrase_len",), stage_params,
              ("x-*.arrays", "extract.json"), run_stage, "one per shard (Dask)",
              "phrase pairs counted under every model, split by English key range")
