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

    def save(self, path) -> None:
        """Write the table as one uncompressed ``.npz`` (memory-mappable members)."""
        with open(Path(path), "wb") as fh:
            np.savez(fh, **{name: getattr(self, name) for name in _TABLE_FIELDS})

    @classmethod
    def load(cls, path) -> "PhraseTable":
        with np.load(Path(path), allow_pickle=False) as z:
            missing = [name for name in _TABLE_FIELDS if name not in z.files]
            if missing:
                raise ValueError(f"{path}: not a phrase table (missing {', '.join(missing)})")
            return cls(**{name: z[name] for name in _TABLE_FIELDS})


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
    parts = _counts.extract_phrase_table(e_tokens, e_offsets, f_tokens, f_offsets, link_e, link_f,
                                         link_offsets, weights, int(max_len))
    return PhraseTable(*parts)
