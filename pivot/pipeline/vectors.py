"""Word vectors of the bitext's English for the relation classifier (pivot.pipeline.ppdb2).

Which relation holds between two phrases (synonym, hypernym, co-hyponym, unrelated) depends on
what they mean, which the pivots and the strings only partly tell; the contexts the phrases'
words occur in tell more (the distributional hypothesis). A count-based embedding, trained
once per build on the English side of the bitext (the encode stage's token ids, the text every
stored phrase comes from, so every phrase's words are in it), in the settings of Levy,
Goldberg and Dagan (TACL 2015) that pivot.eval.distributional uses:

* co-occurrence counts C(w, c) of the vocabulary words at distance 1..WINDOW inside a sentence,
  symmetric ((w, c) and (c, w) both count); the vocabulary: words with at least MIN_COUNT
  occurrences (the others keep their positions: a window does not reach across them);
* PPMI with context-distribution smoothing a = CDS:
  PPMI(w, c) = max(0, log(C(w, c) Z / (#w #c^a))), #w = sum_c C(w, c), Z = sum_c #c^a;
* the truncated SVD PPMI ~ U S V' of rank DIM (ARPACK from the start vector of
  numpy's default_rng(SEED); each singular vector's sign fixed by its largest entry), word
  vectors the rows of U S^(1/2) scaled to unit length (pivot.eval.distributional.svd_vectors);
* a phrase's vector: the mean of its vocabulary words' unit vectors (none when it has none).

Same inputs, same bytes: the counts are integers, and BLAS (which ARPACK calls) runs on one
thread while the vectors are trained (threadpoolctl): a build's main process and a Dask worker
(started with one BLAS thread) then sum in the same order, so ``--workers 1`` and ``--workers 2``
give the same vectors. The phrase vectors are kept as float32 (what the fit and the apply tasks
both read). On the bio build: 3.4M tokens, 15k words, a few CPU s. DIM 50, not 100: on the bio
build's relation split 100 coordinates scored 0.3 validation points more (0.390 against 0.387;
test 0.379 against 0.389) for twice the fits' and the apply tasks' vector cost.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

WINDOW = 2
DIM = 50
MIN_COUNT = 5
CDS = 0.75
SEED = 0


class EnglishShards:
    """The English token ids of the encode stage's shards, one shard at a time: iterating gives
    (ids, sentence) per shard, each token's sentence numbered across the shards. Read twice by
    :func:`train` (the counts, then the co-occurrences), never whole: a shard holds whole
    sentences, so no window crosses two, and the counts of the pieces add up to the text's."""

    def __init__(self, shard_paths):
        self.paths = [Path(p) for p in shard_paths]

    def __iter__(self):
        offset = 0
        for path in self.paths:
            with np.load(path, allow_pickle=False) as z:
                tokens, starts = z["e_tokens"].astype(np.int64), z["e_offsets"].astype(np.int64)
            lengths = np.diff(starts)
            yield tokens[starts[0]:starts[-1]], np.repeat(np.arange(offset, offset + len(lengths)), lengths)
            offset += len(lengths)


def cooccurrence(ids, sentence, word: np.ndarray, window: int = WINDOW):
    """The symmetric (V, V) CSR count matrix of the vocabulary words at distance 1..window in one
    sentence; ``word`` maps a token id to its vocabulary index (-1: not in the vocabulary)."""
    from scipy import sparse

    w = word[ids]
    v = int(word.max()) + 1 if len(word) and word.max() >= 0 else 0
    rows, cols = [], []
    for d in range(1, window + 1):
        a, b = w[:-d], w[d:]
        keep = (sentence[:-d] == sentence[d:]) & (a >= 0) & (b >= 0)
        rows += [a[keep], b[keep]]
        cols += [b[keep], a[keep]]
    r = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    c = np.concatenate(cols) if cols else np.zeros(0, np.int64)
    m = sparse.csr_matrix((np.ones(len(r)), (r, c)), shape=(v, v))
    m.sum_duplicates()
    return m


def train(pieces, n_tokens: int, *, dim: int = DIM, window: int = WINDOW, min_count: int = MIN_COUNT,
          cds: float = CDS, seed: int = SEED) -> np.ndarray:
    """(n_tokens, dim) float64 unit word vectors by token id (module docstring), from ``pieces``:
    a re-iterable of (ids, sentence) of whole sentences (:class:`EnglishShards`, or a list); a
    token outside the vocabulary, or with no co-occurrence, has a zero row. A vocabulary too
    small for dim singular vectors gets fewer (the columns beyond are zero); below 2 words, none.
    Memory: one piece and the (V, V) counts (integers summed piece by piece: exact, so the
    same matrix however the text is cut)."""
    # scipy's ARPACK (and the OpenBLAS it links) loaded before the limit, which only reaches
    # the libraries already loaded
    import scipy.sparse.linalg  # noqa: F401
    from threadpoolctl import threadpool_limits

    from pivot.eval.distributional import ppmi, svd_vectors

    counts = np.zeros(n_tokens, np.int64)
    for ids, _ in pieces:
        if len(ids):
            counts += np.bincount(ids, minlength=n_tokens)[:n_tokens]
    vocab = np.flatnonzero(counts >= min_count)
    word = np.full(n_tokens, -1, np.int64)
    word[vocab] = np.arange(len(vocab))
    out = np.zeros((n_tokens, dim))
    if len(vocab) < 3:
        return out
    cooc = None
    for ids, sentence in pieces:
        piece = cooccurrence(ids, sentence, word, window)
        cooc = piece if cooc is None else cooc + piece
    m = ppmi(cooc, cds)
    del cooc                    # the counts go before the SVD's own memory
    if m.nnz == 0:
        return out
    with threadpool_limits(limits=1, user_api="blas"):
        vec = svd_vectors(m, min(dim, len(vocab) - 1), seed=seed)
    out[vocab, :vec.shape[1]] = vec
    return out


#: Phrases phrase_vectors averages at a time: its (block, dim) float64 sums and their gathered
#: rows (bio's 813k phrases at once were ~0.5 GB of temporaries, the ppdb2 stage's peak).
PHRASE_BLOCK = 65_536


def phrase_vectors(e_rows: np.ndarray, words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(vectors, has): each phrase's mean of its words' vectors (rows of token ids, -1 padded),
    over the words with a (non-zero) vector, as float32; has: it has at least one (else zeros).
    The mean is summed word position after word position (a fixed order), PHRASE_BLOCK phrases
    at a time (a row's mean is its own: the same bytes however the rows are cut)."""
    known = np.zeros(len(words) + 1, bool)
    known[:-1] = np.any(words != 0, axis=1)
    vec = np.zeros((len(e_rows), words.shape[1]), np.float32)
    has = np.zeros(len(e_rows), bool)
    for a in range(0, len(e_rows), PHRASE_BLOCK):
        rows = np.asarray(e_rows[a:a + PHRASE_BLOCK], np.int64)
        tok = np.where(rows >= 0, rows, len(words))
        ok = known[tok]
        total = np.zeros((len(rows), words.shape[1]))
        for j in range(rows.shape[1]):
            sel = np.flatnonzero(ok[:, j])
            total[sel] += words[tok[sel, j]]
        n = ok.sum(axis=1)
        has[a:a + len(rows)] = n > 0
        total[n > 0] /= n[n > 0, None]
        vec[a:a + len(rows)] = total
    return vec, has
