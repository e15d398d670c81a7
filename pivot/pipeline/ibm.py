"""A deterministic word aligner: fast_align-style IBM Model 2 with a diagonal prior, trained by EM.

Replaces eflomal where reproducibility matters: eflomal samples and seeds itself from the OS,
so two runs differ; this aligner has no randomness at all, and its multi-threaded E-step
accumulates expected counts as integers, so the model and the links are the same to the bit
for any number of threads.

The model (one direction; source e = e_1..e_n plus NULL e_0, target f = f_1..f_m):

    p(f, a | e) = prod_{i=1..m} p(a_i | i, m, n) * t(f_i | e_{a_i})

    p(a_i = 0 | i, m, n) = p_null                                   (NULL)
    p(a_i = j | i, m, n) = (1 - p_null) * exp(-tension * h(i, j)) / Z_i     j = 1..n
    h(i, j) = |i/m - j/n|,   Z_i = sum_{j'=1..n} exp(-tension * h(i, j'))

i.e. IBM Model 2 whose distortion is a fixed "diagonal" prior (link probability decays with
distance from the diagonal of the m x n matrix). ``tension`` is fixed (not re-estimated, unlike
the optimised variant), and with ``tension = 0`` the prior is uniform and the model is IBM
Model 1 with a NULL probability p_null.

EM. The E-step computes the link posteriors

    p(a_i = j | e, f) = p(a_i = j) t(f_i | e_j) / sum_j' p(a_i = j') t(f_i | e_j')

and the expected counts c(e, f) = sum over the corpus of the posteriors of links joining e and
f; the M-step sets t(f | e) = c(e, f) / sum_f' c(e, f'). Counts are fixed point: each
posterior adds round(p * 2^32) to an int64 (so a count is exact to 2^-33 per addition and
integer sums do not depend on their order); the M-step divides in float64.

The t-table is sparse: CSR over source words (row n_src_vocab is NULL), holding only the
(source, target) pairs that co-occur in some sentence pair, each row's target ids sorted (so a
lookup is a binary search). Start: t uniform over each row, t(f | e) = 1 / |{f' co-occurring
with e}|. Memory: 12 bytes a pair for (col, prob) plus 8 for the counts during training.

Out of core and on a cluster: pivot.pipeline.ibm_shards trains and applies this model by shards
of sentence pairs held on disk, as engine tasks, and gives the same model and links to the bit
as :func:`fit` and :func:`align_both` on the whole corpus: the table rows are sorted sets, the
counts integer sums, and everything after the model is per sentence.

Links are ragged arrays as everywhere in pivot (see pivot.pipeline.links): the links of sentence
s are ``link_e[a:b], link_f[a:b]`` with ``a, b = link_offsets[s], link_offsets[s + 1]``, sorted,
0-based, (english position i, foreign position j) -- Pharaoh ``i-j``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pivot._native import _align
from pivot.atomic import save_npz
from pivot.pipeline.links import format_pharaoh, symmetrize

# t(f | e) used by viterbi for a (source, target) pair missing from the table (or whose
# probability fell to 0): small enough that any seen pair wins, large enough that an unseen
# word still links by the diagonal prior rather than always to NULL (p_null * floor would
# otherwise tie with every real position).
UNKNOWN_PROB = 1e-7

# The E-step looks every (target word, source word) pair up by binary search in the
# source word's row. When the indices of all sentence pairs fit in this many bytes
# (4 * sum_s (n_s + 1) m_s), they are stored and every iteration reads them: same
# arithmetic, same results, several times faster on large vocabularies. The table is then
# built with them (_align.cooccurrence_indexed: about half the time of building it and
# searching them) when its 8 bytes a link fit as well; else the first iteration searches.
INDEX_CACHE_BYTES = 768 * 2 ** 20

# Fixed-point unit of the expected counts (2^32 = a posterior of 1).
COUNT_SCALE = float(2 ** 32)


@dataclass
class Model:
    """A trained translation table t(tgt | src) with its alignment prior.

    ``row_ptr`` (int64, n_src_vocab + 2), ``col`` (int32, target ids) and ``prob`` (float64)
    are CSR over source words: t(col[k] | r) = prob[k] for k in row_ptr[r]:row_ptr[r + 1];
    row n_src_vocab is the NULL word. ``p_null`` and ``tension`` define the prior (module
    docstring). ``log_likelihood`` holds log p(tgt | src) of the training corpus under the
    table at the start of each EM iteration.
    """
    row_ptr: np.ndarray
    col: np.ndarray
    prob: np.ndarray
    p_null: float
    tension: float
    n_tgt_vocab: int
    log_likelihood: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def n_src_vocab(self):
        return len(self.row_ptr) - 2

    def t(self, src, tgt):
        """t(tgt | src) (src = n_src_vocab or None for NULL); 0.0 for a pair not in the table."""
        r = self.n_src_vocab if src is None else int(src)
        a, b = int(self.row_ptr[r]), int(self.row_ptr[r + 1])
        k = a + int(np.searchsorted(self.col[a:b], tgt))
        return float(self.prob[k]) if k < b and self.col[k] == tgt else 0.0

    def save(self, path):
        """Write the model as an uncompressed .npz (arrays plus p_null, tension, n_tgt_vocab), atomically."""
        save_npz(path, row_ptr=self.row_ptr, col=self.col, prob=self.prob,
                 p_null=np.float64(self.p_null), tension=np.float64(self.tension),
                 n_tgt_vocab=np.int64(self.n_tgt_vocab),
                 log_likelihood=np.asarray(self.log_likelihood, dtype=np.float64))

    @classmethod
    def load(cls, path):
        """Read a model written by :meth:`save`."""
        with np.load(Path(path), allow_pickle=False) as z:
            model = cls(row_ptr=z["row_ptr"].astype(np.int64, copy=False),
                        col=z["col"].astype(np.int32, copy=False),
                        prob=z["prob"].astype(np.float64, copy=False),
                        p_null=float(z["p_null"]), tension=float(z["tension"]),
                        n_tgt_vocab=int(z["n_tgt_vocab"]),
                        log_likelihood=z["log_likelihood"])
        _check_model(model)
        return model


# ----------------------------------------------------------------------------- validation

def _ragged(tokens, offsets, n_vocab, name):
    """Validated contiguous (int32 tokens, int64 offsets); ids in [0, n_vocab) if n_vocab given."""
    tokens = np.ascontiguousarray(tokens)
    offsets = np.ascontiguousarray(offsets)
    if tokens.ndim != 1 or offsets.ndim != 1 or len(offsets) < 1:
        raise ValueError(f"{name}: tokens and offsets must be 1-d, offsets of length n + 1")
    if not np.issubdtype(tokens.dtype, np.integer) or not np.issubdtype(offsets.dtype, np.integer):
        raise ValueError(f"{name}: tokens and offsets must be integer arrays")
    offsets = offsets.astype(np.int64, copy=False)
    if offsets[0] != 0 or offsets[-1] != len(tokens) or np.any(np.diff(offsets) < 0):
        raise ValueError(f"{name}: offsets must start at 0, never decrease and end at "
                         f"len(tokens) = {len(tokens)}")
    if len(tokens):
        lo, hi = int(tokens.min()), int(tokens.max())
        if lo < 0 or (n_vocab is not None and hi >= n_vocab) or hi > np.iinfo(np.int32).max:
            raise ValueError(f"{name}: token ids must lie in [0, {n_vocab}), got [{lo}, {hi}]")
    return tokens.astype(np.int32, copy=False), offsets


def _corpus(src_tokens, src_offsets, tgt_tokens, tgt_offsets, n_src_vocab, n_tgt_vocab):
    src_tokens, src_offsets = _ragged(src_tokens, src_offsets, n_src_vocab, "source")
    tgt_tokens, tgt_offsets = _ragged(tgt_tokens, tgt_offsets, n_tgt_vocab, "target")
    if len(src_offsets) != len(tgt_offsets):
        raise ValueError(f"{len(src_offsets) - 1} source and {len(tgt_offsets) - 1} "
                         "target sentences")
    return src_tokens, src_offsets, tgt_tokens, tgt_offsets


def _max_len(offsets):
    return int(np.diff(offsets).max()) if len(offsets) > 1 else 0


def _check_prior(p_null, tension):
    if not 0.0 <= p_null < 1.0:
        raise ValueError(f"p_null must lie in [0, 1), got {p_null}")
    if not (tension >= 0.0 and np.isfinite(tension)):
        raise ValueError(f"tension must be finite and >= 0, got {tension}")


def _check_model(model):
    rp, col, prob = model.row_ptr, model.col, model.prob
    if (rp.dtype != np.int64 or col.dtype != np.int32 or prob.dtype != np.float64
            or len(rp) < 2 or rp[0] != 0 or rp[-1] != len(col) or len(col) != len(prob)
            or np.any(np.diff(rp) < 0)):
        raise ValueError("malformed model: row_ptr int64 (n_src_vocab + 2, from 0 to len(col)), "
                         "col int32 and prob float64 of equal length")
    _check_prior(model.p_null, model.tension)


def _threads(n_threads):
    n_threads = int(n_threads)
    if n_threads < 1:
        raise ValueError(f"n_threads must be >= 1, got {n_threads}")
    return n_threads


def _team(n_threads, n_items, grain=64):
    """Threads worth starting for ``n_items`` sentences handed out ``grain`` at a time.

    The kernels schedule sentences in blocks of 64 (256 for symmetrisation), so a smaller
    batch keeps the other threads idle; starting them anyway costs more than the batch on
    a busy machine (many small chunks). Results never depend on the thread count.
    """
    return max(1, min(int(n_threads), -(-int(n_items) // grain)))


# ----------------------------------------------------------------------------- training

def cooccurrence(src_tokens, src_offsets, tgt_tokens, tgt_offsets, n_src_vocab, n_tgt_vocab):
    """The t-table's structure: (row_ptr int64 [n_src_vocab + 2], col int32).

    Row e < n_src_vocab: the sorted unique target ids that share a sentence pair with e;
    row n_src_vocab (NULL): every target id that occurs.
    """
    s, so, t, to = _corpus(src_tokens, src_offsets, tgt_tokens, tgt_offsets,
                           n_src_vocab, n_tgt_vocab)
    return _align.cooccurrence_csr(s, so, t, to, int(n_src_vocab), int(n_tgt_vocab))


def expected_counts(model, src_tokens, src_offsets, tgt_tokens, tgt_offsets, n_threads=1):
    """One E-step: (counts int64 aligned with model.col, in units of 2^-32; log-likelihood).

    counts[k] = round-per-link sum of p(a_i = j | e, f) * 2^32 over the links joining row r's
    source word and col[k]. Every target word spreads a posterior mass of 1 over its n + 1
    candidates, so counts.sum() / 2^32 equals the number of target tokens up to rounding
    (at most (n + 1) / 2 units of 2^-32 per target word). Pairs missing from the model get
    no count (use a model trained on, or built for, this corpus).
    """
    _check_model(model)
    s, so, t, to = _corpus(src_tokens, src_offsets, tgt_tokens, tgt_offsets,
                           model.n_src_vocab, model.n_tgt_vocab)
    counts = np.zeros(len(model.col), dtype=np.int64)
    loglik = np.zeros(len(so) - 1, dtype=np.float64)
    _align.e_step(s, so, t, to, model.row_ptr, model.col, model.prob, counts, loglik,
                  float(model.p_null), float(model.tension), _max_len(so), _threads(n_threads))
    return counts, float(loglik.sum())   # numpy sums a fixed array in a fixed order


def fit(src_tokens, src_offsets, tgt_tokens, tgt_offsets, n_src_vocab, n_tgt_vocab, *,
        iterations=5, p_null=0.08, tension=4.0, n_threads=1):
    """Learn t(tgt | src) by EM under the diagonal-prior IBM Model 2 (module docstring).

    The corpus is ragged int32 token arrays: sentence pair s is
    ``src_tokens[src_offsets[s]:src_offsets[s+1]]`` and the same for tgt (offsets int64, length
    n + 1; empty sentences are allowed and contribute nothing). Source ids lie in
    [0, n_src_vocab), target ids in [0, n_tgt_vocab). The NULL word is added internally.

    t starts uniform over the target words co-occurring with each source word (and over all
    target words for NULL); each of ``iterations`` EM rounds is one E-step (threaded over
    sentence pairs) and one M-step. ``p_null`` and ``tension`` are fixed, not re-estimated.
    The result is the same to the bit for any ``n_threads``.
    """
    _check_prior(float(p_null), float(tension))
    n_threads = _threads(n_threads)
    if int(iterations) < 0:
        raise ValueError(f"iterations must be >= 0, got {iterations}")
    s, so, t, to = _corpus(src_tokens, src_offsets, tgt_tokens, tgt_offsets,
                           n_src_vocab, n_tgt_vocab)
    if len(t) >= 2 ** 31:
        raise ValueError("more than 2^31 target tokens: the fixed-point counts could overflow")
    cells = (np.diff(so) + 1) * np.diff(to)           # (n_s + 1) m_s lookups a sentence
    cache = cache_offsets = None
    first = 2                                          # the first iteration's cache mode
    n_cells = int(cells.sum())
    if int(iterations) > 1 and 12 * n_cells <= INDEX_CACHE_BYTES:
        # the table and every lookup's index at once (fewer than 2^31 entries: at most one a lookup)
        row_ptr, col, cache = _align.cooccurrence_indexed(s, so, t, to, int(n_src_vocab), int(n_tgt_vocab))
    else:
        row_ptr, col = _align.cooccurrence_csr(s, so, t, to, int(n_src_vocab), int(n_tgt_vocab))
        if int(iterations) > 1 and 4 * n_cells <= INDEX_CACHE_BYTES:
            cache, first = np.empty(n_cells, dtype=np.int32), 1     # searched and stored by the first
    if cache is not None:
        cache_offsets = np.zeros(len(cells) + 1, dtype=np.int64)
        np.cumsum(cells, out=cache_offsets[1:])
    # Uniform start: t(f | e) = 1 / (row length).
    sizes = np.diff(row_ptr)
    prob = np.repeat(1.0 / np.maximum(sizes, 1), sizes).astype(np.float64)
    counts = np.empty(len(col), dtype=np.int64)
    loglik = np.empty(len(so) - 1, dtype=np.float64)
    history = []
    max_len = _max_len(so)
    for it in range(int(iterations)):
        counts.fill(0)
        mode = 0 if cache is None else (first if it == 0 else 2)
        _align.e_step(s, so, t, to, row_ptr, col, prob, counts, loglik,
                      float(p_null), float(tension), max_len, n_threads,
                      cache, cache_offsets, mode)
        history.append(float(loglik.sum()))
        _align.m_step(row_ptr, counts, prob, n_threads)
    return Model(row_ptr=row_ptr, col=col, prob=prob, p_null=float(p_null),
                 tension=float(tension), n_tgt_vocab=int(n_tgt_vocab),
                 log_likelihood=np.asarray(history))


def _chunk_corpus(chunk, n_src_vocab, n_tgt_vocab, k):
    """Validated (src, src_offsets, tgt, tgt_offsets) of chunk ``k`` (a 4-tuple)."""
    try:
        s, so, t, to = chunk
    except (TypeError, ValueError):
        raise ValueError(f"chunk {k}: expected (src_tokens, src_offsets, tgt_tokens, "
                         "tgt_offsets)") from None
    try:
        return _corpus(s, so, t, to, n_src_vocab, n_tgt_vocab)
    except ValueError as exc:
        raise ValueError(f"chunk {k}: {exc}") from None


# ----------------------------------------------------------------------------- alignment

def viterbi_positions(model, src_tokens, src_offsets, tgt_tokens, tgt_offsets, n_threads=1):
    """For each target token, its Viterbi source position (0-based within the sentence; -1 NULL).

    a_i = argmax_{j in 0..n} p(a_i = j | i, m, n) t(f_i | e_j) (the prior of the model's
    p_null and tension), with t = UNKNOWN_PROB for a pair missing from the table or whose
    probability is below it. Ties go to NULL, then to the leftmost source position. Source
    ids outside the model's vocabulary count as unknown words; ids must be >= 0.
    """
    _check_model(model)
    s, so, t, to = _corpus(src_tokens, src_offsets, tgt_tokens, tgt_offsets, None, None)
    out = np.empty(len(t), dtype=np.int32)
    _align.viterbi_argmax(s, so, t, to, model.row_ptr, model.col, model.prob, out,
                          float(model.p_null), float(model.tension), UNKNOWN_PROB,
                          _max_len(so), _team(_threads(n_threads), len(so) - 1))
    return out, to


def viterbi(model, src_tokens, src_offsets, tgt_tokens, tgt_offsets, n_threads=1):
    """Viterbi links (link_src int32, link_tgt int32, link_offsets int64) of a corpus.

    One link (source position, target position) per target word not aligned to NULL (see
    :func:`viterbi_positions` for the argmax, the floor UNKNOWN_PROB = 1e-7 for unknown pairs
    and the tie rule). Links of sentence s are ``link_*[link_offsets[s]:link_offsets[s+1]]``,
    sorted by (source, target) position.
    """
    return links_of_positions(*viterbi_positions(model, src_tokens, src_offsets, tgt_tokens, tgt_offsets,
                                                 n_threads))


def links_of_positions(a, to):
    """Ragged links (link_src int32, link_tgt int32, link_offsets int64), sorted by (source,
    target) position, of each target word's Viterbi source position ``a`` (-1: NULL, no link);
    ``to``: the target sentences' offsets."""
    n_sent = len(to) - 1
    sent = np.repeat(np.arange(n_sent, dtype=np.int64), np.diff(to))
    tgt_pos = (np.arange(len(a), dtype=np.int64) - to[sent]).astype(np.int32)
    keep = a >= 0
    sent, src_pos, tgt_pos = sent[keep], a[keep], tgt_pos[keep]
    order = np.lexsort((tgt_pos, src_pos, sent))
    offsets = np.zeros(n_sent + 1, dtype=np.int64)
    np.cumsum(np.bincount(sent, minlength=n_sent), out=offsets[1:])
    return (src_pos[order].astype(np.int32), tgt_pos[order].astype(np.int32), offsets)


def symmetrize_links(fwd, rev, e_lengths, f_lengths, n_threads=1):
    """grow-diag-final-and of two ragged link sets in the (english i, foreign j) convention.

    ``fwd`` and ``rev`` are (link_e, link_f, link_offsets), sorted and unique per sentence
    (as :func:`viterbi` returns them). The procedure is exactly the one pinned in
    ``pivot.pipeline.links.grow_diag_final_and`` (row-major scan, neighbour order sides then
    diagonals, FINAL-AND forward then reverse), run natively and threaded over sentences.
    """
    fe, ff, fo = (np.ascontiguousarray(x) for x in fwd)
    re_, rf, ro = (np.ascontiguousarray(x) for x in rev)
    e_lengths = np.ascontiguousarray(e_lengths, dtype=np.int64)
    f_lengths = np.ascontiguousarray(f_lengths, dtype=np.int64)
    n_sent = len(e_lengths)
    if not (len(fo) == len(ro) == n_sent + 1 == len(f_lengths) + 1):
        raise ValueError("link offsets and sentence lengths disagree on the number of sentences")
    for e, f, o, name in ((fe, ff, fo, "forward"), (re_, rf, ro, "reverse")):
        sent = np.repeat(np.arange(n_sent), np.diff(o))
        if len(e) != o[-1] or len(f) != o[-1] or np.any(e < 0) or np.any(f < 0) \
                or np.any(e >= e_lengths[sent]) or np.any(f >= f_lengths[sent]):
            raise ValueError(f"{name} links outside their sentence")
    fe, ff, re_, rf = (x.astype(np.int32, copy=False) for x in (fe, ff, re_, rf))
    fo, ro = fo.astype(np.int64, copy=False), ro.astype(np.int64, copy=False)
    cap = len(fe) + len(re_)
    out_e = np.empty(cap, dtype=np.int32)
    out_f = np.empty(cap, dtype=np.int32)
    count = np.zeros(n_sent, dtype=np.int64)
    max_cells = int((e_lengths * f_lengths).max()) if n_sent else 0
    max_len = int(max(e_lengths.max(), f_lengths.max())) if n_sent else 0
    _align.grow_diag_final_and(fe, ff, fo, re_, rf, ro, e_lengths, f_lengths, out_e, out_f,
                               count, max_cells, max_len,
                               _team(_threads(n_threads), n_sent, 256))
    # Compact: sentence s wrote count[s] links starting at fo[s] + ro[s].
    start = fo[:-1] + ro[:-1]
    offsets = np.zeros(n_sent + 1, dtype=np.int64)
    np.cumsum(count, out=offsets[1:])
    sent = np.repeat(np.arange(n_sent, dtype=np.int64), count)
    src = start[sent] + (np.arange(offsets[-1], dtype=np.int64) - offsets[sent])
    return out_e[src], out_f[src], offsets


def align_both(e_tokens, e_offsets, f_tokens, f_offsets, n_e_vocab, n_f_vocab, *,
               iterations=5, p_null=0.08, tension=4.0, n_threads=1, symmetrizer="native"):
    """Fit both directions, take their Viterbi links, symmetrise with grow-diag-final-and.

    Forward = English->foreign model (source English: each foreign word linked to at most one
    English word); reverse = foreign->English (each English word to at most one foreign word);
    the same convention as pivot's eflomal stage. Returns (link_e, link_f, link_offsets), 0-based
    (english i, foreign j), sorted. ``symmetrizer="native"`` runs the threaded kernel,
    ``"python"`` pivot.pipeline.links.symmetrize, the eflomal path's (identical links, slower).
    """
    kw = dict(iterations=iterations, p_null=p_null, tension=tension, n_threads=n_threads)
    e_tokens, e_offsets, f_tokens, f_offsets = _corpus(e_tokens, e_offsets, f_tokens, f_offsets,
                                                       n_e_vocab, n_f_vocab)
    forward = fit(e_tokens, e_offsets, f_tokens, f_offsets, n_e_vocab, n_f_vocab, **kw)
    fwd = viterbi(forward, e_tokens, e_offsets, f_tokens, f_offsets, n_threads)
    del forward
    reverse = fit(f_tokens, f_offsets, e_tokens, e_offsets, n_f_vocab, n_e_vocab, **kw)
    rev = _english_first(*viterbi(reverse, f_tokens, f_offsets, e_tokens, e_offsets, n_threads))
    del reverse
    e_len, f_len = np.diff(e_offsets), np.diff(f_offsets)
    if symmetrizer == "native":
        return symmetrize_links(fwd, rev, e_len, f_len, n_threads)
    if symmetrizer != "python":
        raise ValueError(f"symmetrizer must be 'native' or 'python', got {symmetrizer!r}")
    return symmetrize(format_pharaoh(*fwd), format_pharaoh(*rev), e_len, f_len)


def _english_first(rf, re_, ro):
    """Reverse-model links come as (foreign, english); re-sort them by (english, foreign)."""
    sent = np.repeat(np.arange(len(ro) - 1), np.diff(ro))
    order = np.lexsort((rf, re_, sent))
    return re_[order], rf[order], ro


# ----------------------------------------------------------------------------- evaluation

def aer(links, sure, possible):
    """Alignment error rate (the 2003 comparison of statistical alignment models) with precision and recall: (aer, precision, recall).

    ``links`` A, ``sure`` S and ``possible`` P are collections of (sentence, i, j); P is taken
    as P | S (sure links are possible by definition).

        precision = |A & P| / |A|,  recall = |A & S| / |S|,
        AER = 1 - (|A & S| + |A & P|) / (|A| + |S|)

    An empty A has precision 1 by convention; an empty S recall 1.
    """
    a, s = set(links), set(sure)
    p = set(possible) | s
    a_s, a_p = len(a & s), len(a & p)
    precision = a_p / len(a) if a else 1.0
    recall = a_s / len(s) if s else 1.0
    error = 1.0 - (a_s + a_p) / (len(a) + len(s)) if (a or s) else 0.0
    return error, precision, recall
