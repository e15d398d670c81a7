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
both read). The stage runs the training and the means as tasks (:func:`train_job`,
:func:`means_job`). bio: 3.4M tokens,
15.5k words, 0.45M phrases, 2.6-3.0 CPU s; bio-multi: 18.2M tokens, 56k words, 2.4M phrases,
15.7 CPU s in 61 tasks (counts 6.0, PPMI and SVD 4.0, phrase means 4.0, then a join of the means'
blocks, 1.7, since written in place by the means' tasks), the longest the SVD's 4.0 (one task: 13.5 CPU s, the phrase vectors written once). DIM 50, not 100: on the bio
build's relation split 100 coordinates scored 0.3 validation points more (0.390 against 0.387;
test 0.379 against 0.389) for twice the fits' and the apply tasks' vector cost.
"""
from __future__ import annotations

import os
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


def unigram_counts(pieces, n_tokens: int) -> np.ndarray:
    """(n_tokens,) int64 occurrences of each token id in ``pieces`` ((ids, sentence) pairs)."""
    counts = np.zeros(n_tokens, np.int64)
    for ids, _ in pieces:
        if len(ids):
            counts += np.bincount(ids, minlength=n_tokens)[:n_tokens]
    return counts


def word_index(vocab: np.ndarray, n_tokens: int) -> np.ndarray:
    """(n_tokens,) int64: a token id's row of the vocabulary ``vocab`` (ascending ids), -1 if none."""
    word = np.full(n_tokens, -1, np.int64)
    word[vocab] = np.arange(len(vocab))
    return word


def summed(pieces, shape) -> "scipy.sparse.csr_matrix":
    """The sum of the count matrices ``pieces`` (COO triplets (rows, cols, counts) or CSR
    matrices) as one canonical CSR matrix of ``shape`` (float64; indices sorted, no duplicate).
    The counts are integers far below 2^53, so every order of summation gives the same values,
    and a canonical matrix of the same values has the same arrays: the PPMI and the SVD that
    follow see the bytes of any other cut of the text."""
    from scipy import sparse

    rows, cols, data = [], [], []
    for piece in pieces:
        if sparse.issparse(piece):
            piece = piece.tocoo()
            piece = (piece.row, piece.col, piece.data)
        rows.append(np.asarray(piece[0], np.int64))
        cols.append(np.asarray(piece[1], np.int64))
        data.append(np.asarray(piece[2], np.float64))
    if not rows:
        return sparse.csr_matrix(shape, dtype=np.float64)
    m = sparse.csr_matrix((np.concatenate(data), (np.concatenate(rows), np.concatenate(cols))), shape=shape)
    m.sum_duplicates()
    return m


def vocabulary_vectors(m, n_words: int, *, dim: int = DIM, seed: int = SEED) -> np.ndarray:
    """(n_words, dim) float64 unit vectors of the vocabulary's words from their PPMI matrix ``m``
    (None: no vectors, zeros): the rows of U S^(1/2) of its rank-min(dim, V-1) truncated SVD
    (pivot.eval.distributional.svd_vectors), the columns beyond zero. BLAS (which ARPACK calls)
    on one thread: the same sums in a build's main process and in a worker."""
    # scipy's ARPACK (and the OpenBLAS it links) loaded before the limit, which only reaches
    # the libraries already loaded
    import scipy.sparse.linalg  # noqa: F401
    from threadpoolctl import threadpool_limits

    from pivot.eval.distributional import svd_vectors

    out = np.zeros((n_words, dim))
    if n_words < 3 or m is None or m.nnz == 0:
        return out
    with threadpool_limits(limits=1, user_api="blas"):
        vec = svd_vectors(m, min(dim, n_words - 1), seed=seed)
    out[:, :vec.shape[1]] = vec
    return out


def svd_words(m, vocab: np.ndarray, n_tokens: int, *, dim: int = DIM, seed: int = SEED) -> np.ndarray:
    """(n_tokens, dim) float64 unit word vectors by token id: vocabulary_vectors of the
    vocabulary's PPMI matrix ``m`` (rows and columns: ``vocab``'s words) in their token ids'
    rows, zero rows elsewhere."""
    out = np.zeros((n_tokens, dim))
    out[vocab] = vocabulary_vectors(m, len(vocab), dim=dim, seed=seed)
    return out


def train(pieces, n_tokens: int, *, dim: int = DIM, window: int = WINDOW, min_count: int = MIN_COUNT,
          cds: float = CDS, seed: int = SEED) -> np.ndarray:
    """(n_tokens, dim) float64 unit word vectors by token id (module docstring), from ``pieces``:
    a re-iterable of (ids, sentence) of whole sentences (:class:`EnglishShards`, or a list); a
    token outside the vocabulary, or with no co-occurrence, has a zero row. A vocabulary too
    small for dim singular vectors gets fewer (the columns beyond are zero); below 3 words, none.
    Memory: one piece and the (V, V) counts (integers summed piece by piece: exact, so the
    same matrix however the text is cut). In one process: the stage runs the same steps as
    tasks (:func:`job`), to the same bytes."""
    from pivot.eval.distributional import ppmi

    counts = unigram_counts(pieces, n_tokens)
    vocab = np.flatnonzero(counts >= min_count)
    word = word_index(vocab, n_tokens)
    if len(vocab) < 3:
        return np.zeros((n_tokens, dim))
    cooc = None
    for ids, sentence in pieces:
        piece = cooccurrence(ids, sentence, word, window)
        cooc = piece if cooc is None else cooc + piece
    m = ppmi(cooc, cds)
    del cooc                    # the counts go before the SVD's own memory
    return svd_words(m, vocab, n_tokens, dim=dim, seed=seed)


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


# --- The stage's vectors as tasks (train_job, means_job: pivot.pipeline.ppdb2._build_job) -------
#
# The training needs the encode stage's shards alone, the means the stored phrases' rows too: two
# jobs, the stage starts the training at its own start and the means once the rows are written
# (they wait for the training's Signal, pivot.pipeline.engine), and :func:`job` runs both.
# What grows with the text runs as tasks: the tokens' occurrences and the co-occurrence counts
# per group of encode shards, the groups' counts summed per range of the vocabulary's rows, the
# phrases' means per block of phrases. The PPMI and its SVD are one task: their size is the
# vocabulary's (V rows, the PPMI's non-zeros), not the text's (bio -> bio-multi: 5.3x the tokens,
# 3.6x the words, 3.2x the non-zeros, 4.0x the SVD's CPU). Every step is exact or a function of
# its rows alone (summed, phrase_vectors), so the file is the bytes of train + phrase_vectors in
# one process (the one-task path, pivot.pipeline.ppdb2.vectors_task), however the text and the
# phrases are cut and whichever process runs what.

#: Encode shards per task of the counts (count_task, cooccurrence_task): 8 shards of the default
#: 250k English tokens, 2M tokens, ~0.2 CPU s of co-occurrences and ~40 MB of a shard's
#: temporaries at a time (bio-multi: 26 tasks, 4.4 CPU s, the longest 0.5).
SHARDS_PER_TASK = 8
#: English tokens whose co-occurrence counts one sum task adds up (sum_task): the vocabulary's
#: rows are cut into ceil(tokens / SUM_TOKENS) ranges of about equal occurrences, a task each,
#: so that no task reads every group's counts whole (bio: one range; bio-multi, 18.2M tokens:
#: two, 0.9 + 0.45 CPU s; one range was 1.4 CPU s).
SUM_TOKENS = 1 << 24


def _scratch(out_path, name: str) -> Path:
    """A scratch file of the job beside its output (removed when the output is written)."""
    out_path = Path(out_path)
    return out_path.parent / f"{out_path.stem}-{name}.arrays"


def _cpu(t0: float) -> float:
    import time

    return round(time.process_time() - t0, 3)


def count_task(shard_paths, n_tokens: int, out_path) -> dict:
    """The occurrences of the token ids in the English of ``shard_paths`` (a task): ``ids`` (the
    ids that occur, ascending) and their counts ``n``, written to ``out_path``."""
    import time

    from pivot.pipeline.bundle import save_bundle

    if Path(out_path).is_file():
        return {"reused": True}
    t0 = time.process_time()
    counts = unigram_counts(EnglishShards(shard_paths), n_tokens)
    ids = np.flatnonzero(counts)
    save_bundle(out_path, ids=ids, n=counts[ids])
    return {"reused": False, "cpu_seconds": _cpu(t0)}


def vocabulary(count_paths, n_tokens: int, min_count: int = MIN_COUNT) -> tuple[np.ndarray, np.ndarray]:
    """(vocab, occurrences): the token ids with at least min_count occurrences in the groups'
    counts (count_task's files, added in their order: integers, exact), ascending, and the
    occurrences of every id."""
    from pivot.pipeline.bundle import open_bundle

    counts = np.zeros(n_tokens, np.int64)
    for path in count_paths:
        with open_bundle(path) as z:
            counts[z["ids"]] += z["n"]           # a group's ids are distinct: no lost update
    return np.flatnonzero(counts >= min_count), counts


def row_cuts(mass: np.ndarray, n_ranges: int) -> np.ndarray:
    """The n_ranges + 1 bounds (int64, 0 first, len(mass) last) of ranges of rows holding about
    equal shares of ``mass`` (a row's occurrences): range k is rows cuts[k]:cuts[k + 1]. A
    frequent word's row holds more counts than a rare word's, so equal counts of rows would
    give the first ranges (the frequent words') most of the work."""
    cum = np.cumsum(mass, dtype=np.float64)
    total = cum[-1] if len(cum) else 0.0
    inner = np.searchsorted(cum, total * np.arange(1, n_ranges) / n_ranges, side="right")
    return np.concatenate([[0], np.minimum(inner, len(mass)), [len(mass)]]).astype(np.int64)


def cooccurrence_task(shard_paths, vocab_path, n_tokens: int, out_path) -> dict:
    """The co-occurrence counts of the vocabulary words (``vocab`` of ``vocab_path``) in the
    English of ``shard_paths`` (a task): the (V, V) CSR matrix (cooccurrence per shard, summed)
    as ``ptr``, ``cols``, ``counts``, written to ``out_path``. A shard holds whole sentences, so no
    window crosses two shards: the groups' counts add up to the whole text's."""
    import time

    from pivot.pipeline.bundle import open_bundle, save_bundle

    if Path(out_path).is_file():
        return {"reused": True}
    t0 = time.process_time()
    with open_bundle(vocab_path) as z:
        vocab = z["vocab"]
    word = word_index(vocab, n_tokens)
    m = None
    for ids, sentence in EnglishShards(shard_paths):
        # a canonical CSR plus another is one (scipy's sorted merge): the group's, canonical
        piece = cooccurrence(ids, sentence, word)
        m = piece if m is None else m + piece
    if m is None:
        m = summed([], (len(vocab),) * 2)
    save_bundle(out_path, ptr=m.indptr.astype(np.int64), cols=m.indices, counts=m.data)
    return {"reused": False, "cpu_seconds": _cpu(t0), "nnz": int(m.nnz)}


def sum_task(cooc_paths, vocab_path, k: int, out_path) -> dict:
    """Range k of the vocabulary's rows (``cuts`` of ``vocab_path``) of the groups' co-occurrence
    counts (cooccurrence_task's files), summed (a task): the rows' CSR (``ptr`` from 0,
    ``cols``, ``counts``; canonical) written to ``out_path``. Each group's file is read only in the
    range's rows (through a map that goes with the read), and added to the running sum as it is
    read (exact integer counts: the sum of any order, canonical: the same arrays): the task holds
    the range's sum and one group's rows. (Every group's rows at once, as COO triplets and their
    CSR, grew with the number of groups, the text: 0.97 GiB in one task on bio-multi's 26
    groups, the ppdb2 workers' peak.)"""
    import time

    from pivot.pipeline.bundle import open_bundle, save_bundle

    if Path(out_path).is_file():
        return {"reused": True}
    t0 = time.process_time()
    with open_bundle(vocab_path) as z:
        n_words, cuts = len(z["vocab"]), z["cuts"]
    a, b = int(cuts[k]), int(cuts[k + 1])
    m = summed([], (b - a, n_words))
    for path in cooc_paths:
        with open_bundle(path) as z:
            ptr = z.take("ptr", slice(a, b + 1))
            rows = np.repeat(np.arange(b - a), np.diff(ptr))
            piece = summed([(rows, z.take("cols", slice(ptr[0], ptr[-1])), z.take("counts", slice(ptr[0], ptr[-1])))],
                           (b - a, n_words))
        del rows, ptr
        m = summed([m, piece], (b - a, n_words))
        del piece
    save_bundle(out_path, ptr=m.indptr.astype(np.int64), cols=m.indices, counts=m.data)
    return {"reused": False, "cpu_seconds": _cpu(t0), "nnz": int(m.nnz)}


def svd_task(sum_paths, vocab_path, out_path) -> dict:
    """The word vectors (a task): the ranges' counts (sum_task's files, in row order) stacked
    into the (V, V) counts, their PPMI and its SVD (vocabulary_vectors), written to ``out_path``
    as ``words`` ((V, DIM) float64, a row per vocabulary word: train's rows of their token ids;
    a row per token id would be the size of every id of the text, the rare ones too). No
    ranges: fewer than 3 words, no vectors (zeros), as train gives."""
    import time

    from scipy import sparse

    from pivot.eval.distributional import ppmi
    from pivot.pipeline.bundle import open_bundle, save_bundle

    if Path(out_path).is_file():
        return {"reused": True}
    t0 = time.process_time()
    with open_bundle(vocab_path) as z:
        vocab = z["vocab"]
    ptrs, cols, counts, at = [np.zeros(1, np.int64)], [], [], 0
    for path in sum_paths:
        with open_bundle(path) as z:
            ptrs.append(z["ptr"][1:] + at)
            cols.append(z["cols"])
            counts.append(z["counts"])
        at += len(cols[-1])
    m = None
    if sum_paths:
        # the ranges' rows one after another: the rows' canonical CSR is the whole's
        cooc = sparse.csr_matrix((np.concatenate(counts), np.concatenate(cols), np.concatenate(ptrs)),
                                 shape=(len(vocab),) * 2)
        del ptrs, cols, counts
        m = ppmi(cooc, CDS)
        del cooc
    t1 = time.process_time()
    words = vocabulary_vectors(m, len(vocab))
    del m
    save_bundle(out_path, words=words)
    return {"reused": False, "cpu_seconds": _cpu(t0), "svd_cpu_seconds": _cpu(t1),
            "words": int(np.any(words != 0, axis=1).sum()), "dim": int(words.shape[1])}


def vocabulary_rows(tokens: np.ndarray, vocab: np.ndarray) -> np.ndarray:
    """Token rows (-1 padded) as rows of the vocabulary ``vocab`` (ascending ids), -1 for a token
    outside it: phrase_vectors over the vocabulary's vectors then adds the same rows in the same
    order as over train's rows by token id (a token outside has a zero row there, is not known)."""
    pos = np.searchsorted(vocab, tokens)
    inside = (tokens >= 0) & (pos < len(vocab))
    inside[inside] = vocab[pos[inside]] == tokens[inside]
    return np.where(inside, pos, -1)


def phrase_task(tokens_path, a: int, n: int, vocab_path, words_path, out_path) -> dict:
    """Rows a:a+n of the phrases' token rows (``tokens`` of ``tokens_path``): their mean vectors
    (phrase_vectors of the vocabulary's vectors, ``words`` of ``words_path``, by vocabulary_rows)
    written in place as rows a:a+n of ``vec`` and ``vec_has`` of ``out_path`` (a bundle the job
    allocated: write_rows; a task, and a row's mean is its own, so the blocks make up the
    whole's bytes)."""
    import time

    from pivot.pipeline.bundle import open_bundle, write_rows

    t0 = time.process_time()
    with open_bundle(tokens_path) as z:
        tokens = z.take("tokens", slice(a, a + n))
    with open_bundle(vocab_path) as z:
        vocab = z["vocab"]
    with open_bundle(words_path) as z:
        words = z["words"]
    vec, has = phrase_vectors(vocabulary_rows(tokens, vocab), words)
    write_rows(out_path, "vec", a, vec)
    write_rows(out_path, "vec_has", a, has)
    return {"reused": False, "cpu_seconds": _cpu(t0)}


def job(shard_paths, n_tokens: int, tokens_path, out_path, phrase_block: int):
    """A job of pivot.pipeline.engine.Engine.run: the stored phrases' vectors (``tokens`` of
    ``tokens_path``: their token rows) trained on the English of ``shard_paths``, written to
    ``out_path`` as ``vec`` and ``vec_has``, the bytes of train + phrase_vectors in one process:
    :func:`train_job` then :func:`means_job`, side by side (the means wait for the training's
    signal). Returns what means_job returns. (The stage runs the two apart: the training from
    its start, the means once the phrases' rows are written, pivot.pipeline.ppdb2._build_job.)"""
    from pivot.pipeline.engine import Signal, Together

    trained = Signal()
    _, done = yield Together(train_job(shard_paths, n_tokens, out_path, trained),
                             means_job(tokens_path, out_path, phrase_block, trained))
    return done


def train_job(shard_paths, n_tokens: int, out_path, trained):
    """A job of Engine.run: the word vectors of the English of ``shard_paths``, to scratch files
    beside ``out_path`` (its ``vocab`` and ``words``), for :func:`means_job`, which it gives
    what it did through the Signal ``trained`` (Set as its last step; ``{"reused": True}`` when
    ``out_path`` is written already). Steps (each a batch of tasks but the SVD): the occurrences
    per group of SHARDS_PER_TASK shards; here, their sum and the vocabulary (and the ranges of
    its rows); the co-occurrence counts per group; their sums per range of rows; the PPMI and
    SVD (one task). Needs the encode stage's shards alone, not the phrases: the stage starts it
    at its own start."""
    import time

    from pivot.pipeline.bundle import save_bundle
    from pivot.pipeline.engine import Batch, Set

    t0 = time.perf_counter()
    out_path = Path(out_path)
    if out_path.is_file():
        yield Set(trained, {"reused": True})
        return
    shard_paths = [str(p) for p in shard_paths]
    groups = [shard_paths[a:a + SHARDS_PER_TASK] for a in range(0, len(shard_paths), SHARDS_PER_TASK)]
    count_paths = [_scratch(out_path, f"counts-{g:04d}") for g in range(len(groups))]
    cooc_paths = [_scratch(out_path, f"cooc-{g:04d}") for g in range(len(groups))]
    vocab_path, words_path = _scratch(out_path, "vocab"), _scratch(out_path, "words")
    steps = ("occurrences", "cooccurrences", "sums", "ppmi_svd", "phrases")
    cpu, longest = dict.fromkeys(steps, 0.0), dict.fromkeys(steps, 0.0)

    def add(step, done):
        seconds = [d.get("cpu_seconds", 0.0) for d in done]
        cpu[step] = round(cpu[step] + sum(seconds), 3)
        longest[step] = max([longest[step], *seconds])

    add("occurrences", (yield Batch(count_task, [(g, n_tokens, p) for g, p in zip(groups, count_paths)],
                                    name="ppdb2-vectors-counts", quiet=True)))
    vocab, counts = vocabulary(count_paths, n_tokens)
    n_ranges = max(1, -(-int(counts.sum()) // SUM_TOKENS))
    cuts = row_cuts(counts[vocab], n_ranges)
    del counts
    save_bundle(vocab_path, vocab=vocab, cuts=cuts)
    sum_paths = [_scratch(out_path, f"sum-{k:04d}") for k in range(n_ranges)] if len(vocab) >= 3 else []
    if sum_paths:
        add("cooccurrences", (yield Batch(cooccurrence_task, [(g, str(vocab_path), n_tokens, str(p))
                                                              for g, p in zip(groups, cooc_paths)],
                                          name="ppdb2-vectors-cooc", quiet=True)))
        add("sums", (yield Batch(sum_task, [(list(map(str, cooc_paths)), str(vocab_path), k, str(p))
                                            for k, p in enumerate(sum_paths)], name="ppdb2-vectors-sum", quiet=True)))
    trained_svd, = yield Batch(svd_task, [(list(map(str, sum_paths)), str(vocab_path), str(words_path))],
                               name="ppdb2-vectors-svd", quiet=True)
    add("ppmi_svd", [trained_svd])
    yield Set(trained, {"reused": False, "t0": t0, "vocab_path": str(vocab_path), "words_path": str(words_path),
                        "scratch": [str(p) for p in (*count_paths, *cooc_paths, *sum_paths, vocab_path, words_path)],
                        "words": trained_svd.get("words"), "vocab": int(len(vocab)),
                        "tasks": {"counts": 2 * len(groups) if sum_paths else len(groups), "sums": len(sum_paths),
                                  "svd": 1},
                        "cpu_seconds": cpu, "longest_task_cpu_seconds": longest,
                        "svd_cpu_seconds": trained_svd.get("svd_cpu_seconds")})


def means_job(tokens_path, out_path, phrase_block: int, trained):
    """A job of Engine.run: the stored phrases' means (``tokens`` of ``tokens_path``: their token
    rows) of the word vectors train_job gives through the Signal ``trained`` (waited for once
    this job's own input, ``tokens_path``, is there: the job starts when it is written), per
    ``phrase_block`` phrases, each task writing its rows into the one file (allocated here,
    renamed to ``out_path`` when every block is in); the training's scratch files go then.
    Returns what the two did, with each step's CPU seconds in the tasks and ``seconds``, the wall
    time from the training's start."""
    import time

    from pivot.pipeline.bundle import allocate_bundle, open_bundle
    from pivot.pipeline.engine import Batch, Wait

    out_path = Path(out_path)
    if out_path.is_file():
        return {"reused": True}
    done = yield Wait(trained)
    if done["reused"]:                  # written meanwhile (never by this stage, which runs both)
        return {"reused": True}
    with open_bundle(tokens_path) as z:
        n_phrases = z.shape("tokens")[0]
    with open_bundle(done["words_path"]) as z:
        dim = z.shape("words")[1]
    # the phrases' means per block, each task writing its rows in place into one file allocated
    # here (no task joins the blocks: at PPDB scale that join alone copied every vector on one core)
    starts = range(0, n_phrases, phrase_block)
    filling = _scratch(out_path, "filling")
    allocate_bundle(filling, vec=(np.float32, (n_phrases, dim)), vec_has=(bool, (n_phrases,)))
    means = yield Batch(phrase_task, [(str(tokens_path), a, min(phrase_block, n_phrases - a), done["vocab_path"],
                                       done["words_path"], str(filling)) for a in starts],
                        name="ppdb2-vectors-phrases", quiet=True)
    os.replace(filling, out_path)
    for path in done["scratch"]:
        Path(path).unlink(missing_ok=True)
    cpu, longest = dict(done["cpu_seconds"]), dict(done["longest_task_cpu_seconds"])
    seconds = [d.get("cpu_seconds", 0.0) for d in means]
    cpu["phrases"] = round(cpu["phrases"] + sum(seconds), 3)
    longest["phrases"] = max([longest["phrases"], *seconds])
    return {"reused": False, "words": done["words"], "dim": dim, "vocab": done["vocab"],
            "tasks": {**done["tasks"], "means": len(starts)}, "cpu_seconds": cpu, "longest_task_cpu_seconds": longest,
            "svd_cpu_seconds": done["svd_cpu_seconds"], "seconds": time.perf_counter() - done["t0"]}
