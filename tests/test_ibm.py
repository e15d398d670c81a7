"""Tests of pivot.pipeline.ibm, the deterministic fast_align-style IBM Model 2 aligner.

Toy vocabularies: source a=0, b=1; target x=0, y=1. Expected values are traced by hand in
the comments (notation of pivot/pipeline/ibm.py: t(f | e), prior p(a_i = j), posteriors, counts c).
"""
import math
from fractions import Fraction

import numpy as np
import pytest

from pivot._native import _align
from pivot.pipeline import ibm, ibm_shards
from pivot.pipeline.bundle import open_bundle, save_bundle
from pivot.pipeline.engine import Engine


def ragged(sentences):
    """(int32 tokens, int64 offsets) of a list of id lists."""
    offsets = np.zeros(len(sentences) + 1, dtype=np.int64)
    np.cumsum([len(s) for s in sentences], out=offsets[1:])
    tokens = np.array([t for s in sentences for t in s], dtype=np.int32)
    return tokens, offsets


# s0: "a b" -> "x y";  s1: "a" -> "x"
SRC = ragged([[0, 1], [0]])
TGT = ragged([[0, 1], [0]])
NULL = None


def test_cooccurrence_table():
    row_ptr, col = ibm.cooccurrence(*SRC, *TGT, 2, 2)
    # a: {x, y}; b: {x, y}; NULL: every target word {x, y}
    assert row_ptr.tolist() == [0, 2, 4, 6]
    assert col.tolist() == [0, 1, 0, 1, 0, 1]
    assert row_ptr.dtype == np.int64 and col.dtype == np.int32


def test_one_iteration_model1_no_null():
    # tension = 0: uniform prior over the n real words; p_null = 0: NULL never used. So this is
    # IBM Model 1 from the uniform start t = 1/2 (each row has 2 co-occurring targets).
    # s0, f = x: p(a=a) t(x|a) = 1/2 * 1/2 = 1/4, same for b -> posteriors 1/2, 1/2; same for y.
    # s1, f = x: only a -> posterior 1.
    # c(a,x) = 1/2 + 1 = 3/2, c(a,y) = 1/2, c(b,x) = 1/2, c(b,y) = 1/2.
    # t(x|a) = (3/2) / 2 = 3/4, t(y|a) = 1/4, t(x|b) = t(y|b) = 1/2; NULL has no mass, stays 1/2.
    # All posteriors are dyadic, so the fixed-point counts and the t values are exact.
    m = ibm.fit(*SRC, *TGT, 2, 2, iterations=1, p_null=0.0, tension=0.0)
    assert m.t(0, 0) == 0.75
    assert m.t(0, 1) == 0.25
    assert m.t(1, 0) == 0.5
    assert m.t(1, 1) == 0.5
    assert m.t(NULL, 0) == 0.5
    # log-likelihood of the uniform start: s0: 2 * log(1/2), s1: log(1/2)
    assert m.log_likelihood.tolist() == [3 * math.log(0.5)]


def test_one_iteration_with_null():
    # tension = 0, p_null = 0.2; start t = 1/2 everywhere.
    # s0 (n = 2), f = x: NULL 0.2 * 1/2 = 0.1; a 0.4 * 1/2 = 0.2; b 0.2; Z = 0.5
    #   -> posteriors NULL 0.2, a 0.4, b 0.4; the same for f = y.
    # s1 (n = 1), f = x: NULL 0.1; a 0.8 * 1/2 = 0.4; Z = 0.5 -> NULL 0.2, a 0.8.
    # c(a,x) = 0.4 + 0.8 = 1.2, c(a,y) = 0.4       -> t(x|a) = 1.2/1.6 = 3/4, t(y|a) = 1/4
    # c(b,x) = c(b,y) = 0.4                        -> t(x|b) = t(y|b) = 1/2
    # c(NULL,x) = 0.2 + 0.2 = 0.4, c(NULL,y) = 0.2 -> t(x|NULL) = 2/3, t(y|NULL) = 1/3
    m = ibm.fit(*SRC, *TGT, 2, 2, iterations=1, p_null=0.2, tension=0.0)
    # Fixed point: each posterior is rounded to a multiple of 2^-32, so agreement is to ~1e-9.
    assert m.t(0, 0) == pytest.approx(0.75, abs=1e-9)
    assert m.t(0, 1) == pytest.approx(0.25, abs=1e-9)
    assert m.t(1, 0) == pytest.approx(0.5, abs=1e-9)
    assert m.t(NULL, 0) == pytest.approx(2 / 3, abs=1e-9)
    assert m.t(NULL, 1) == pytest.approx(1 / 3, abs=1e-9)
    # Exactly: c(a,x) = round(0.4 * 2^32) + round(0.8 * 2^32) = 1717986918 + 3435973837,
    # c(a,y) = 1717986918, and the M-step divides the int64 counts in float64.
    assert m.t(0, 0) == 5153960755 / (5153960755 + 1717986918)


def test_one_iteration_diagonal_prior():
    # s0 only, tension = 1, p_null = 0, m = n = 2. h(i, j) = |i/m - j/n| (1-based):
    #   i = 1: h(1,1) = 0, h(1,2) = 1/2 -> p(a_1 = 1) = q = 1 / (1 + e^{-1/2}), p(a_1 = 2) = 1 - q
    #   i = 2: h(2,1) = 1/2, h(2,2) = 0 -> p(a_2 = 1) = 1 - q, p(a_2 = 2) = q
    # t starts at 1/2 everywhere, so posteriors = prior:
    #   c(a,x) = q, c(a,y) = 1 - q, c(b,x) = 1 - q, c(b,y) = q, each row sums to 1,
    #   t(x|a) = q = 0.62245933..., t(y|a) = 1 - q, t(x|b) = 1 - q, t(y|b) = q.
    src, tgt = ragged([[0, 1]]), ragged([[0, 1]])
    m = ibm.fit(*src, *tgt, 2, 2, iterations=1, p_null=0.0, tension=1.0)
    q = 1.0 / (1.0 + math.exp(-0.5))
    assert m.t(0, 0) == pytest.approx(q, abs=1e-9)
    assert m.t(0, 1) == pytest.approx(1 - q, abs=1e-9)
    assert m.t(1, 0) == pytest.approx(1 - q, abs=1e-9)
    assert m.t(1, 1) == pytest.approx(q, abs=1e-9)


def random_corpus(n_sent=300, vocab=40, seed=7):
    rng = np.random.RandomState(seed)
    src, tgt = [], []
    for _ in range(n_sent):
        n = rng.randint(0, 12)
        e = rng.randint(0, vocab, size=n).tolist()
        # a noisy "translation": word w -> (3 w + 1) mod vocab, shuffled a little, plus noise
        f = [(3 * w + 1) % vocab for w in e if rng.rand() < 0.9] + \
            rng.randint(0, vocab, size=rng.randint(0, 3)).tolist()
        if len(f) > 2 and rng.rand() < 0.3:
            f[0], f[1] = f[1], f[0]
        src.append(e)
        tgt.append(f)
    return ragged(src), ragged(tgt), vocab


def test_threads_give_identical_bytes():
    (s, so), (t, to), v = random_corpus()
    one = ibm.fit(s, so, t, to, v, v, iterations=4, n_threads=1)
    two = ibm.fit(s, so, t, to, v, v, iterations=4, n_threads=2)
    assert one.prob.tobytes() == two.prob.tobytes()
    assert one.col.tobytes() == two.col.tobytes()
    assert one.log_likelihood.tobytes() == two.log_likelihood.tobytes()
    links1 = ibm.viterbi(one, s, so, t, to, n_threads=1)
    links2 = ibm.viterbi(two, s, so, t, to, n_threads=2)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(links1, links2))
    both1 = ibm.align_both(s, so, t, to, v, v, iterations=3, n_threads=1)
    both2 = ibm.align_both(s, so, t, to, v, v, iterations=3, n_threads=2)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(both1, both2))


def test_em_increases_likelihood():
    (s, so), (t, to), v = random_corpus()
    m = ibm.fit(s, so, t, to, v, v, iterations=5)
    assert np.all(np.diff(m.log_likelihood) > 0)


def test_posteriors_normalise():
    # Every target word spreads a posterior mass of exactly 1 over its n + 1 candidates; in
    # fixed point each of the n + 1 roundings is off by at most 1/2 unit.
    (s, so), (t, to), v = random_corpus()
    m = ibm.fit(s, so, t, to, v, v, iterations=2)
    counts, _ = ibm.expected_counts(m, s, so, t, to)
    slack = int(((np.diff(so) + 1) * np.diff(to)).sum()) // 2 + 1
    assert abs(int(counts.sum()) - len(t) * 2 ** 32) <= slack
    # per sentence pair, on a one-sentence corpus
    for k in range(5):
        a, b, c, d = so[k], so[k + 1], to[k], to[k + 1]
        one, _ = ibm.expected_counts(m, s[a:b], [0, b - a], t[c:d], [0, d - c])
        assert abs(int(one.sum()) - (d - c) * 2 ** 32) <= (b - a + 1) * (d - c)


def test_viterbi_obvious():
    # "a b" -> "x y", "a" -> "x", "b" -> "y": after EM t(x|a) and t(y|b) dominate.
    src = ragged([[0, 1], [0], [1], [0, 1]])
    tgt = ragged([[0, 1], [0], [1], [1, 0]])
    m = ibm.fit(*src, *tgt, 2, 2, iterations=5, tension=0.0)
    e, f, off = ibm.viterbi(m, *src, *tgt)
    links = [list(zip(e[off[k]:off[k + 1]].tolist(), f[off[k]:off[k + 1]].tolist()))
             for k in range(4)]
    assert links == [[(0, 0), (1, 1)], [(0, 0)], [(0, 0)], [(0, 1), (1, 0)]]
    assert e.dtype == np.int32 and f.dtype == np.int32 and off.dtype == np.int64


def test_viterbi_unknown_words_follow_the_diagonal():
    # Words never seen in training: every t is the floor, so the diagonal prior decides
    # (p_null * floor < (1 - p_null) * prior * floor whenever the best prior > p_null).
    m = ibm.fit(*SRC, *TGT, 2, 2, iterations=1)
    src, tgt = ragged([[5, 6, 7]]), ragged([[9, 8, 9]])
    e, f, off = ibm.viterbi(m, *src, *tgt)
    assert list(zip(e.tolist(), f.tolist())) == [(0, 0), (1, 1), (2, 2)]


def test_align_both_native_equals_project_symmetrize():
    (s, so), (t, to), v = random_corpus(n_sent=200)
    native = ibm.align_both(s, so, t, to, v, v, iterations=3, symmetrizer="native")
    python = ibm.align_both(s, so, t, to, v, v, iterations=3, symmetrizer="python")
    assert all(np.array_equal(a, b) for a, b in zip(native, python))


def test_native_gdfa_matches_reference_on_random_links():
    from pivot.pipeline.links import grow_diag_final_and
    rng = np.random.RandomState(3)
    fwd_l, rev_l, le_l, lf_l = [], [], [], []
    for _ in range(500):
        le, lf = rng.randint(1, 8), rng.randint(1, 8)
        cells = [(i, j) for i in range(le) for j in range(lf)]
        fwd = sorted({cells[k] for k in rng.randint(0, len(cells), size=rng.randint(0, 8))})
        rev = sorted({cells[k] for k in rng.randint(0, len(cells), size=rng.randint(0, 8))})
        fwd_l.append(fwd), rev_l.append(rev), le_l.append(le), lf_l.append(lf)

    def pack(sets):
        off = np.zeros(len(sets) + 1, dtype=np.int64)
        np.cumsum([len(x) for x in sets], out=off[1:])
        e = np.array([i for x in sets for i, _ in x], dtype=np.int32)
        f = np.array([j for x in sets for _, j in x], dtype=np.int32)
        return e, f, off

    e, f, off = ibm.symmetrize_links(pack(fwd_l), pack(rev_l), le_l, lf_l, n_threads=2)
    for k in range(500):
        got = list(zip(e[off[k]:off[k + 1]].tolist(), f[off[k]:off[k + 1]].tolist()))
        assert got == grow_diag_final_and(fwd_l[k], rev_l[k], le_l[k], lf_l[k])
    # the reference docstring example
    e, f, off = ibm.symmetrize_links(pack([[(0, 0), (1, 1)]]), pack([[(0, 0), (1, 0)]]), [2], [2])
    assert list(zip(e.tolist(), f.tolist())) == [(0, 0), (1, 0), (1, 1)]


def test_save_load_roundtrip(tmp_path):
    m = ibm.fit(*SRC, *TGT, 2, 2, iterations=2)
    m.save(tmp_path / "m.npz")
    back = ibm.Model.load(tmp_path / "m.npz")
    assert back.row_ptr.tobytes() == m.row_ptr.tobytes()
    assert back.col.tobytes() == m.col.tobytes()
    assert back.prob.tobytes() == m.prob.tobytes()
    assert (back.p_null, back.tension, back.n_tgt_vocab) == (m.p_null, m.tension, 2)


def test_empty_sentences_and_validation():
    src, tgt = ragged([[0], [], [1]]), ragged([[], [0], [1]])
    m = ibm.fit(*src, *tgt, 2, 2, iterations=2)
    e, f, off = ibm.viterbi(m, *src, *tgt)
    assert off.tolist()[0] == 0 and len(off) == 4 and off[1] == 0 and off[2] == 0
    with pytest.raises(ValueError):
        ibm.fit(*SRC, *TGT, 1, 2)                           # source id 1 >= n_src_vocab
    with pytest.raises(ValueError):
        ibm.fit(SRC[0], np.array([0, 1, 2]), *TGT, 2, 2)    # offsets do not end at len(tokens)
    with pytest.raises(ValueError):
        ibm.fit(*SRC, *TGT, 2, 2, p_null=1.0)
    with pytest.raises(ValueError):
        ibm.fit(*SRC, *TGT, 2, 2, n_threads=0)


def test_aer_hand_example():
    # A = {(0,0,0), (0,1,0)}, S = {(0,0,0)}, P = {(0,0,0), (0,1,1)}
    # |A & S| = 1, |A & P| = 1 (only (0,0,0)), |A| = 2, |S| = 1
    # AER = 1 - (1 + 1) / (2 + 1) = 1/3, precision = 1/2, recall = 1/1
    err, prec, rec = ibm.aer({(0, 0, 0), (0, 1, 0)}, {(0, 0, 0)}, {(0, 0, 0), (0, 1, 1)})
    assert err == pytest.approx(1 / 3)
    assert (prec, rec) == (0.5, 1.0)
    # perfect sure-only answer: AER 0
    assert ibm.aer({(0, 0, 0)}, {(0, 0, 0)}, {(0, 0, 0), (0, 1, 1)}) == (0.0, 1.0, 1.0)


@pytest.mark.parametrize("threads", [1, 2])
def test_index_cache_changes_nothing(monkeypatch, threads):
    # Iterations 2.. read the table indices stored by iteration 1 instead of searching again;
    # the arithmetic is the same, so the bytes must be too (one thread adds plainly, two
    # atomically).
    (s, so), (t, to), v = random_corpus()
    cached = ibm.fit(s, so, t, to, v, v, iterations=4, n_threads=threads)
    monkeypatch.setattr(ibm, "INDEX_CACHE_BYTES", 0)
    searched = ibm.fit(s, so, t, to, v, v, iterations=4, n_threads=threads)
    assert cached.prob.tobytes() == searched.prob.tobytes()
    assert cached.log_likelihood.tobytes() == searched.log_likelihood.tobytes()


def searched_indices(s, so, t, to, row_ptr, col) -> np.ndarray:
    """The table indices the first E-step searches and stores (cache_mode 1), every lookup's."""
    cells = (np.diff(so) + 1) * np.diff(to)
    offsets = np.zeros(len(cells) + 1, np.int64)
    np.cumsum(cells, out=offsets[1:])
    cache = np.full(int(offsets[-1]), -7, np.int32)
    _align.e_step(s, so, t, to, row_ptr, col, np.full(len(col), 0.5), np.zeros(len(col), np.int64),
                  np.zeros(len(so) - 1), 0.1, 4.0, ibm._max_len(so), 1, cache, offsets, 1)
    return cache


def test_stored_indices_are_the_table_positions():
    # The first E-step stores, per sentence, (n + 1) m table indices, row-major by target
    # position (slot n is NULL), found by a binary search of each cell's row.
    # Reference: each cell's row searched on its own (numpy's searchsorted), -1 where absent.
    (s, so), (t, to), v = random_corpus(n_sent=200, vocab=25, seed=3)
    s, so, t, to = (np.ascontiguousarray(x) for x in (s, so, t, to))
    row_ptr, col = ibm.cooccurrence(s, so, t, to, v, v)
    # the NULL row of this corpus (every cell present), and one made sparser (some absent)
    for null, absent in ((col[row_ptr[v]:], False), (col[row_ptr[v]:][::2], True)):
        rp = row_ptr.copy()
        rp[v + 1] = rp[v] + len(null)
        cl = np.concatenate([col[:row_ptr[v]], null]).astype(np.int32)
        cache = searched_indices(s, so, t, to, rp, cl)
        want = []
        for k in range(len(so) - 1):
            rows = [*s[so[k]:so[k + 1]], v]
            for f in t[to[k]:to[k + 1]]:
                for r in rows:
                    lo, hi = rp[r], rp[r + 1]
                    at = lo + int(np.searchsorted(cl[lo:hi], f))
                    want.append(at if at < hi and cl[at] == f else -1)
        assert cache.tolist() == want
        assert (-1 in want) == absent and len(want) > 1000


def test_cooccurrence_indexed_is_the_table_and_the_first_search():
    # One pass gives what cooccurrence_csr and the first E-step's search (cache_mode 1) give
    # apart, on a corpus with empty sentences on either side and repeated words.
    (s, so), (t, to), v = random_corpus(n_sent=300, vocab=30, seed=11)
    s, so, t, to = (np.ascontiguousarray(x) for x in (s, so, t, to))
    assert (np.diff(so) == 0).any() and (np.diff(to) == 0).any()
    row_ptr, col, index = _align.cooccurrence_indexed(s, so, t, to, v, v + 5)
    want_ptr, want_col = _align.cooccurrence_csr(s, so, t, to, v, v + 5)
    assert row_ptr.tolist() == want_ptr.tolist() and col.tolist() == want_col.tolist()
    searched = searched_indices(s, so, t, to, row_ptr, col)
    assert index.dtype == np.int32 and index.tolist() == searched.tolist()
    # an empty corpus: the NULL row and every other row empty
    empty = np.zeros(1, np.int64)
    got = _align.cooccurrence_indexed(np.zeros(0, np.int32), empty, np.zeros(0, np.int32), empty, 3, 4)
    assert [a.tolist() for a in got] == [[0, 0, 0, 0, 0], [], []]


def test_fit_searching_first_equals_the_indexed_table(monkeypatch):
    # Between 4 and 12 bytes a lookup of INDEX_CACHE_BYTES the first iteration searches and
    # stores the indices (no room for the indexed table's links): the same model.
    (s, so), (t, to), v = random_corpus()
    indexed = ibm.fit(s, so, t, to, v, v, iterations=3)
    cells = int(((np.diff(so) + 1) * np.diff(to)).sum())
    monkeypatch.setattr(ibm, "INDEX_CACHE_BYTES", 4 * cells)
    monkeypatch.setattr(_align, "cooccurrence_indexed", None)         # must not be called
    searched = ibm.fit(s, so, t, to, v, v, iterations=3)
    assert indexed.prob.tobytes() == searched.prob.tobytes()
    assert indexed.log_likelihood.tobytes() == searched.log_likelihood.tobytes()


def test_fixed_point_rounds_halves_away_from_zero():
    # The E-step adds round(p * 2^32), halves up (p >= 0). Reference: exact rationals,
    # floor(p * 2^32 + 1/2), at exact halves, a unit of the last place either side of them,
    # the largest double below 1/2 (whose + 0.5 in floats rounds up to 1), and 0 and 1.
    half = 0.5 / 2 ** 32
    values = [0.0, 1.0, half, np.nextafter(half, 0), np.nextafter(half, 1), 2.5 / 2 ** 32,
              np.nextafter(2.5 / 2 ** 32, 0), 0.49999999999999994 / 2 ** 32, 0.4, 0.8, 1 / 3,
              np.nextafter(1.0, 0), 123456.5 / 2 ** 32]
    got = _align.fixed_point(np.array(values, np.float64))
    want = [math.floor(Fraction(x) * 2 ** 32 + Fraction(1, 2)) for x in values]
    assert got.tolist() == want
    assert want[2:5] == [1, 0, 1] and want[5:8] == [3, 2, 0]


# ----------------------------------------------------------------------------- training by shards

def split_chunks(s, so, t, to, size):
    """Chunk-local ragged arrays of consecutive runs of ``size`` sentence pairs."""
    chunks = []
    n = len(so) - 1
    for a in range(0, n, size):
        b = min(a + size, n)
        chunks.append((s[so[a]:so[b]], so[a:b + 1] - so[a], t[to[a]:to[b]], to[a:b + 1] - to[a]))
    return chunks


def write_shards(folder, chunks):
    """The chunks as shard files (English = source side here): their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for k, (e, eo, f, fo) in enumerate(chunks):
        paths.append(folder / f"enc-{k:05d}.arrays")
        save_bundle(paths[-1], e_tokens=e, e_offsets=eo, f_tokens=f, f_offsets=fo)
    return paths


@pytest.mark.parametrize("size", [1, 3, 17, 1000])
def test_cooccurrence_builder_any_split(size):
    (s, so), (t, to), v = random_corpus()
    whole = ibm.cooccurrence(s, so, t, to, v, v)
    builder = _align.CooccurrenceBuilder(v, v)
    for chunk in split_chunks(s, so, t, to, size):
        builder.add(*chunk)
    rp, col = builder.finish()
    assert rp.tobytes() == whole[0].tobytes() and col.tobytes() == whole[1].tobytes()
    with pytest.raises(RuntimeError):
        builder.finish()


def test_union_sorted_merges_two_sorted_sets():
    u = _align.union_sorted
    k = lambda *v: np.array(v, dtype=np.int64)
    # by hand: {1, 4, 9} ∪ {2, 4, 10, 11} = {1, 2, 4, 9, 10, 11} (4 once); then empty and equal sides
    assert u(k(1, 4, 9), k(2, 4, 10, 11)).tolist() == [1, 2, 4, 9, 10, 11]
    assert u(k(), k(3, 5)).tolist() == [3, 5] and u(k(3, 5), k()).tolist() == [3, 5]
    assert u(k(), k()).tolist() == [] and u(k(7), k(7)).tolist() == [7]
    assert u(k(1 << 40 | 3), k(5, 1 << 40 | 3)).tolist() == [5, 1 << 40 | 3]  # table keys: row << 32 | col
    rng = np.random.default_rng(3)
    for _ in range(50):
        a, b = (np.unique(rng.integers(0, 60, rng.integers(0, 40))).astype(np.int64) for _ in range(2))
        got = u(a, b)
        assert got.dtype == np.int64 and got.tolist() == sorted(set(a.tolist()) | set(b.tolist()))


@pytest.mark.parametrize("size,threads,cached", [(1, 1, False), (1, 2, True), (7, 1, True), (7, 2, False),
                                                 (1000, 1, True), (1000, 2, False)])
def test_fit_sharded_equals_fit(tmp_path, monkeypatch, size, threads, cached):
    """The model trained by shard tasks is fit's to the bit: the same table (the union of the
    shards' tables), the same probabilities (integer counts added in any grouping)."""
    # shards of one sentence: 60 of them (some sentences are empty: shards with empty tables)
    (s, so), (t, to), v = random_corpus(n_sent=60 if size == 1 else 300)
    whole = ibm.fit(s, so, t, to, v, v, iterations=4, n_threads=1)
    shards = write_shards(tmp_path / "shards", split_chunks(s, so, t, to, size))
    # tiny blocks: a shard's cached indices pass through memory in several pieces
    monkeypatch.setattr(ibm_shards, "INDEX_CACHE_BLOCK_BYTES", 100)
    modes = []
    real = ibm_shards._e_step_cached
    monkeypatch.setattr(ibm_shards, "_e_step_cached", lambda *a: modes.append(a[-1]) or real(*a))
    got, table = ibm_shards.fit_sharded(Engine(workers=1), shards, False, v, v, tmp_path / "scratch", iterations=4,
                                        n_threads=threads, index_cache=cached)
    for name in ("row_ptr", "col", "prob"):
        assert getattr(got, name).tobytes() == getattr(whole, name).tobytes(), name
    assert got.log_likelihood == pytest.approx(whole.log_likelihood, rel=1e-12)
    # the co-occurrence tasks stored the indices with the tables: iterations 1-4 read them
    assert modes == ([2] * 4 * len(shards) if cached else [])
    # the t-table handed to the tasks: named by its 4 M-steps, the model's probabilities
    assert table.name == "t-fwd-04.npy"
    assert np.load(table).tobytes() == whole.prob.tobytes()
    # each shard's entries' positions in the model's table, int32 (below 2^31 entries)
    assert all(np.load(tmp_path / "scratch" / f"positions-fwd-{k:05d}.npy").dtype == np.int32
               for k in range(len(shards)))
    # what is left for the Viterbi tasks: the table, the shards' tables, their positions in it
    # and their stored indices
    left = sorted(p.name for p in (tmp_path / "scratch").iterdir())
    assert left == sorted([table.name, "keys-fwd.npy", "rowptr-fwd.npy", "col-fwd.npy"]
                          + [f"cooc-fwd-{k:05d}.arrays" for k in range(len(shards))]
                          + [f"positions-fwd-{k:05d}.npy" for k in range(len(shards))]
                          + ([f"index-fwd-{k:05d}.bin" for k in range(len(shards))] if cached else []))


def test_fit_sharded_searches_where_a_table_has_no_indices(tmp_path, monkeypatch):
    # A shard's table on disk without its stored indices (a shard of 2^31 lookups or more):
    # here shard 0's table is built without them, so its first E-step searches and stores them
    # (cache_mode 1) while the other shards read theirs; the same model as fit's.
    (s, so), (t, to), v = random_corpus(n_sent=300)
    whole = ibm.fit(s, so, t, to, v, v, iterations=3, n_threads=1)
    shards = write_shards(tmp_path / "shards", split_chunks(s, so, t, to, 100))
    real_cooc = ibm_shards.cooccurrence_task
    monkeypatch.setattr(ibm_shards, "cooccurrence_task",
                        lambda *a: real_cooc(*a[:6], a[6] and a[1] != 0))
    modes = []
    real = ibm_shards._e_step_cached
    monkeypatch.setattr(ibm_shards, "_e_step_cached", lambda *a: modes.append(a[-1]) or real(*a))
    got, _ = ibm_shards.fit_sharded(Engine(workers=1), shards, False, v, v, tmp_path / "scratch", iterations=3)
    assert got.prob.tobytes() == whole.prob.tobytes()
    assert modes == [1, 2, 2] + [2] * 6
    # shard 0's indices, written by its first E-step, are the bytes the table would have stored
    s0, so0, t0, to0 = ibm_shards.load_shard(shards[0], False)
    _, _, index = _align.cooccurrence_indexed(s0, so0.astype(np.int64), t0, to0.astype(np.int64), v, v)
    assert (tmp_path / "scratch" / "index-fwd-00000.bin").read_bytes() == index.tobytes()


def test_fit_sharded_reverse_trains_foreign_to_english(tmp_path):
    (s, so), (t, to), v = random_corpus(n_sent=80)
    whole = ibm.fit(t, to, s, so, v, v, iterations=3)
    shards = write_shards(tmp_path / "shards", split_chunks(s, so, t, to, 30))
    got, table = ibm_shards.fit_sharded(Engine(workers=1), shards, True, v, v, tmp_path / "scratch", iterations=3)
    assert got.prob.tobytes() == whole.prob.tobytes() and got.col.tobytes() == whole.col.tobytes()
    assert table.name == "t-rev-03.npy"


def test_e_step_task_finds_its_output(tmp_path):
    """A task whose output exists (a rerun after its worker died) returns the stored result."""
    (s, so), (t, to), v = random_corpus(n_sent=40)
    shards = write_shards(tmp_path / "shards", split_chunks(s, so, t, to, 20))
    scratch = tmp_path / "scratch"
    _, table = ibm_shards.fit_sharded(Engine(workers=1), shards, False, v, v, scratch, iterations=0)
    args = (str(shards[1]), 1, False, str(scratch), str(table), 0.08, 4.0, 1, False)
    first = ibm_shards.e_step_task(*args)
    out = scratch / "counts-fwd-00-00001.arrays"   # the E-step under the uniform table (0 M-steps)
    stamp = out.stat().st_mtime_ns
    assert ibm_shards.e_step_task(*args) == first and out.stat().st_mtime_ns == stamp


@pytest.mark.parametrize("size", [1, 7, 1000])
@pytest.mark.parametrize("threads", [1, 2])
def test_align_both_sharded_equals_align_both(tmp_path, monkeypatch, size, threads):
    (s, so), (t, to), v = random_corpus(n_sent=50 if size == 1 else 200)
    # the E-steps store their indices and the Viterbi tasks read them back, in blocks of a few sentences
    monkeypatch.setattr(ibm_shards, "INDEX_CACHE_BLOCK_BYTES", 100)
    whole = ibm.align_both(s, so, t, to, v, v, iterations=3, n_threads=1)
    chunks = split_chunks(s, so, t, to, size)
    shards = write_shards(tmp_path / "shards", chunks)
    out = [tmp_path / f"links-{k:05d}.arrays" for k in range(len(chunks))]
    done = ibm_shards.align_both_sharded(Engine(workers=1), shards, v, v, out, tmp_path / "scratch",
                                         iterations=3, n_threads=threads)
    assert done == [len(c[1]) - 1 for c in chunks]
    parts = []
    for path, chunk in zip(out, chunks):
        with open_bundle(path) as z:
            parts.append((z["link_e"], z["link_f"], z["link_offsets"]))
        assert parts[-1][2][0] == 0 and len(parts[-1][2]) == len(chunk[1]) and parts[-1][2].dtype == np.int64
    offsets, base = [0], 0
    for _, _, off in parts:
        offsets.extend((off[1:] + base).tolist())
        base += int(off[-1])
    assert np.concatenate([p[0] for p in parts]).tobytes() == whole[0].tobytes()
    assert np.concatenate([p[1] for p in parts]).tobytes() == whole[1].tobytes()
    assert np.array(offsets, dtype=np.int64).tobytes() == whole[2].tobytes()


def test_fit_sharded_rejects_bad_shards(tmp_path):
    (s, so), (t, to), v = random_corpus(n_sent=10)
    shards = write_shards(tmp_path / "shards", [(s, so, t, to)])
    with pytest.raises(ValueError, match="chunk 0: source: token ids must lie in"):
        ibm_shards.fit_sharded(Engine(workers=1), shards, False, 2, v, tmp_path / "scratch")   # source id >= 2


def test_fit_sharded_two_threads_on_small_shards(tmp_path, monkeypatch):
    # _team runs a shard smaller than a scheduling block on one thread; force both threads
    # onto every shard to check the bytes do not depend on that either.
    (s, so), (t, to), v = random_corpus(n_sent=90)
    whole = ibm.fit(s, so, t, to, v, v, iterations=3)
    monkeypatch.setattr(ibm, "_team", lambda n_threads, n_items, grain=64: n_threads)
    shards = write_shards(tmp_path / "shards", split_chunks(s, so, t, to, 9))
    got, _ = ibm_shards.fit_sharded(Engine(workers=1), shards, False, v, v, tmp_path / "scratch", iterations=3,
                                    n_threads=2)
    assert got.prob.tobytes() == whole.prob.tobytes()
    links = ibm.viterbi(got, s, so, t, to, n_threads=2)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(links, ibm.viterbi(whole, s, so, t, to)))




def test_fit_job_holds_no_table_while_its_tasks_run(tmp_path):
    """A build runs every language's two directions side by side, each job waiting for its
    tasks most of the time: while it waits (at each yield) its frame holds no array of the
    table's size (the row pointers, columns and probabilities are in scratch files between the
    M-steps), and the model it returns is fit's to the bit."""
    (s, so), (t, to), v = random_corpus(n_sent=200)
    whole = ibm.fit(s, so, t, to, v, v, iterations=3)
    assert len(whole.col) > v + 2  # the table is larger than its row pointers (v + 2 of them)
    shards = write_shards(tmp_path / "shards", split_chunks(s, so, t, to, 30))
    job = ibm_shards.fit_job(shards, False, v, v, tmp_path / "scratch", iterations=3)
    engine, value, batches = Engine(workers=1), None, []
    try:
        while True:
            batch = job.send(value)
            held = {name: x.size for name, x in job.gi_frame.f_locals.items()
                    if isinstance(x, np.ndarray) and x.size >= len(whole.col)}
            assert held == {}, (batch.name, held)
            batches.append(batch.name)
            value = engine.map(batch.fn, batch.arg_tuples, name=batch.name, quiet=True)
    except StopIteration as stop:
        got, _ = stop.value
    assert batches == ["align-fwd-cooc", "align-fwd-em1", "align-fwd-em2", "align-fwd-em3"]
    for name in ("row_ptr", "col", "prob"):
        assert getattr(got, name).tobytes() == getattr(whole, name).tobytes(), name
