"""The pivot on hand-computed tables, each pruning rule alone, and a seeded random table
checked against scipy.sparse and brute force.

The hand table (3 English phrases e0 e1 e2, 2 foreign f0 f1; support = General counts):

            f0   f1   | row sum      p(f|e):  e0: f0 .5   f1 .5
    e0       2    2   |   4                   e1: f0 1
    e1       6    .   |   6                   e2: f0 .25  f1 .75
    e2       2    6   |   8          p(e|f):  f0: e0 .2  e1 .6  e2 .2
    col sum 10    8                           f1: e0 .25 e2 .75

    P(e1|e0) = .6 * .5                 = .3
    P(e2|e0) = .2 * .5   + .75 * .5    = .475     pivots f1 (.375), f0 (.1)
    P(e0|e1) = .2 * 1                  = .2
    P(e2|e1) = .2 * 1                  = .2
    P(e0|e2) = .2 * .25  + .25 * .75   = .2375    pivots f1 (.1875), f0 (.05)
    P(e1|e2) = .6 * .25                = .15
    (P(e0|e0) = .225 would be the diagonal: never output.)

Values are compared with a tolerance of 1e-15 (absolute): the decimal fractions above are
not exact in binary.
"""
import numpy as np
import pytest
import scipy.sparse as sp

from pivot.pipeline.extract import PhraseTable
from pivot.pipeline.pivoting import (DEFAULT_MAX_E_PER_F, DEFAULT_MIN_P_E2_GIVEN_E1, DEFAULT_MIN_P_E_GIVEN_F,
                                     DEFAULT_MIN_P_F_GIVEN_E, DEFAULT_MIN_PHRASE_COUNT, DEFAULT_TOP_N, Paraphrases,
                                     pivot_paraphrases, prune)

NO_PRUNING = dict(min_p_f_given_e=0.0, min_p_e_given_f=0.0, max_e_per_f=0, top_n=0)
TOL = 1e-15


def make_table(n_e, n_f, pairs, support, counts=None) -> PhraseTable:
    """A PhraseTable from (e, f) pairs (sorted here) with support and optional count columns."""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    order = np.lexsort((pairs[:, 1], pairs[:, 0]))
    support = np.asarray(support, dtype=np.int64)[order]
    counts = support[:, None].astype(float) if counts is None else np.asarray(counts, float)[order]
    e_id, f_id = pairs[order, 0].astype(np.int32), pairs[order, 1].astype(np.int32)
    return PhraseTable(
        e_phrases=np.arange(n_e, dtype=np.int32)[:, None], f_phrases=np.arange(n_f, dtype=np.int32)[:, None],
        e_id=e_id, f_id=f_id, counts=np.ascontiguousarray(counts), support=support,
        e_count=np.bincount(e_id, weights=support, minlength=n_e).astype(np.int64))


HAND_PAIRS = [(0, 0), (0, 1), (1, 0), (2, 0), (2, 1)]
HAND_SUPPORT = [2, 2, 6, 2, 6]


def hand_table(counts=None):
    return make_table(3, 2, HAND_PAIRS, HAND_SUPPORT, counts)


def as_dict(para: Paraphrases, k=0):
    return {(int(a), int(b)): float(v) for a, b, v in zip(para.e1, para.e2, para.p[:, k])}


def assert_pairs(para, expected, k=0):
    got = as_dict(para, k)
    assert set(got) == set(expected)
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, abs=TOL), key


def test_hand_table_unpruned():
    para = pivot_paraphrases(hand_table(), **NO_PRUNING)
    assert_pairs(para, {(0, 1): .3, (0, 2): .475, (1, 0): .2, (1, 2): .2, (2, 0): .2375, (2, 1): .15})
    # Sorted by (e1, e2), no diagonal.
    assert para.e1.tolist() == [0, 0, 1, 1, 2, 2] and para.e2.tolist() == [1, 2, 0, 2, 0, 1]
    assert (para.e1 != para.e2).all()
    assert para.n_pivots.tolist() == [1, 2, 1, 1, 2, 1]
    assert para.pivots.tolist() == [[0, -1, -1], [1, 0, -1], [0, -1, -1],
                                    [0, -1, -1], [1, 0, -1], [0, -1, -1]]
    assert para.e1.dtype == np.int32 and para.e2.dtype == np.int32 and para.p.dtype == np.float64
    assert para.n_pivots.dtype == np.int32 and para.pivots.dtype == np.int32
    assert para.p.shape == (6, 1) and para.pivots.shape == (6, 3)


def test_floor_on_p_f_given_e():
    # ps(f0|e2) = .25 < .3: (e2, f0) goes. Kept values are NOT renormalised:
    # P(e2|e0) = p(e2|f1) p(f1|e0) = .75 * .5; P(e0|e2) = p(e0|f1) p(f1|e2) = .25 * .75.
    para = pivot_paraphrases(hand_table(), **{**NO_PRUNING, "min_p_f_given_e": 0.3})
    assert_pairs(para, {(0, 1): .3, (0, 2): .375, (1, 0): .2, (2, 0): .1875})
    assert para.meta["n_after_floors"] == 4


def test_floor_on_p_e_given_f():
    # ps(e0|f0) = ps(e2|f0) = .2 < .21: (e0, f0) and (e2, f0) go; f0 keeps only e1.
    para = pivot_paraphrases(hand_table(), **{**NO_PRUNING, "min_p_e_given_f": 0.21})
    assert_pairs(para, {(0, 2): .375, (2, 0): .1875})
    assert para.n_pivots.tolist() == [1, 1] and para.pivots[:, 0].tolist() == [1, 1]


def test_floors_are_inclusive():
    # ps(f0|e2) = .25 exactly: a floor of .25 keeps it.
    para = pivot_paraphrases(hand_table(), **{**NO_PRUNING, "min_p_f_given_e": 0.25})
    assert len(para) == 6


def test_cap_per_foreign_phrase_breaks_ties_by_smaller_e():
    # f0 has e1 (support 6), e0 and e2 (support 2 each): a cap of 2 keeps e1 and, of the
    # tied pair, e0 (smaller id). f1 has two phrases: untouched.
    para = pivot_paraphrases(hand_table(), **{**NO_PRUNING, "max_e_per_f": 2})
    assert_pairs(para, {(0, 1): .3, (0, 2): .375, (1, 0): .2, (2, 0): .1875})
    s = prune(hand_table(), min_p_f_given_e=0, min_p_e_given_f=0, max_e_per_f=2)
    assert s.kept.tolist() == [0, 1, 2, 4]  # pair (e2, f0) = index 3 dropped
    # A cap of 1: f0 keeps e1, f1 keeps e2 (support 6 > 2): no shared pivot is left.
    assert len(pivot_paraphrases(hand_table(), **{**NO_PRUNING, "max_e_per_f": 1})) == 0


def test_cap_ranks_each_model_on_its_own_counts():
    # Model 1 ranks f0's phrases by its own counts: e0 (100) and e2 (3) beat e1 (1), where
    # General (support 2, 6, 2) keeps e1 and e0. Pairs by index: 0 (e0,f0), 1 (e0,f1),
    # 2 (e1,f0), 3 (e2,f0), 4 (e2,f1). The structure is the union; each model its own part.
    counts = np.column_stack([HAND_SUPPORT, [100, 2, 1, 3, 6]])
    s = prune(hand_table(counts), min_p_f_given_e=0, min_p_e_given_f=0, max_e_per_f=2)
    assert s.kept.tolist() == [0, 1, 2, 3, 4]
    assert s.keep_csr[:, 0].tolist() == [True, True, True, False, True]
    assert s.keep_csr[:, 1].tolist() == [True, True, False, True, True]
    assert s.stats["n_kept_by_model"] == [4, 4]
    # Model 1 on its own pruned table: p1(f|e): e0: f0 100/102, f1 2/102; e2: f0 3/9, f1 6/9;
    # p1(e|f) after the cap (normalised over the full column, e1's count included):
    # f0: e0 100/104, e2 3/104; f1: e0 2/8, e2 6/8. So
    #   P1(e2|e0) = 3/104 * 100/102 + 6/8 * 2/102       P1(e0|e2) = 100/104 * 3/9 + 2/8 * 6/9
    # and e1 has no paraphrase under model 1 (its only entry was cut), while General keeps
    # P0(e1|e0) = 6/10 * 2/4 (General's cap dropped (e2, f0) instead).
    para = pivot_paraphrases(hand_table(counts), **{**NO_PRUNING, "max_e_per_f": 2})
    assert_pairs(para, {(0, 2): 3 / 104 * 100 / 102 + 6 / 8 * 2 / 102, (2, 0): 100 / 104 * 3 / 9 + 2 / 8 * 6 / 9,
                        (0, 1): 0.0, (1, 0): 0.0}, k=1)
    assert_pairs(para, {(0, 1): .3, (0, 2): .375, (1, 0): .2, (2, 0): .1875}, k=0)


def test_top_n_with_tie_break():
    # top_n=1 under the General model: row e0 keeps e2 (.475 > .3); row e1 has a tie
    # (.2, .2) and keeps the smaller e2 id, e0; row e2 keeps e0 (.2375 > .15).
    para = pivot_paraphrases(hand_table(), **{**NO_PRUNING, "top_n": 1})
    assert_pairs(para, {(0, 2): .475, (1, 0): .2, (2, 0): .2375})
    para = pivot_paraphrases(hand_table(), **{**NO_PRUNING, "top_n": 2})
    assert len(para) == 6


# Model 1: (e0, f1) weighs 0, so   p1(f|e): e0: f0 1, f1 0;  e1: f0 1;  e2: f0 .25, f1 .75
#                                  p1(e|f): f0: e0 .2, e1 .6, e2 .2;  f1: e0 0, e2 1
#   P1(e1|e0) = .6   P1(e2|e0) = .2   P1(e0|e1) = .2   P1(e2|e1) = .2
#   P1(e0|e2) = .2 * .25 + 0 * .75 = .05               P1(e1|e2) = .6 * .25 = .15
K2_COUNTS = np.column_stack([HAND_SUPPORT, [2, 0, 6, 2, 6]])


def test_two_models_in_one_pass():
    para = pivot_paraphrases(hand_table(K2_COUNTS), **NO_PRUNING)
    assert para.p.shape == (6, 2)
    assert_pairs(para, {(0, 1): .3, (0, 2): .475, (1, 0): .2, (1, 2): .2, (2, 0): .2375, (2, 1): .15}, k=0)
    assert_pairs(para, {(0, 1): .6, (0, 2): .2, (1, 0): .2, (1, 2): .2, (2, 0): .05, (2, 1): .15}, k=1)
    # n_pivots counts the kept shared foreign phrases, whatever a model weighs them.
    assert para.n_pivots.tolist() == [1, 2, 1, 1, 2, 1]


def test_top_n_keeps_the_union_over_models():
    # top_n=1: row e0 keeps e2 (General's best) and e1 (model 1's best); row e2 keeps e0
    # (General) and e1 (model 1: .15 > .05); row e1 is tied under both models: e0.
    para = pivot_paraphrases(hand_table(K2_COUNTS), **{**NO_PRUNING, "top_n": 1})
    assert list(zip(para.e1.tolist(), para.e2.tolist())) == [(0, 1), (0, 2), (1, 0), (2, 0), (2, 1)]
    np.testing.assert_allclose(para.p, [[.3, .6], [.475, .2], [.2, .2], [.2375, .05], [.15, .15]],
                               rtol=0, atol=TOL)


def test_a_model_with_zero_counts_gives_zero_not_nan():
    # Model 1 sees no sentence: every 0/0 normalisation gives 0, every P_1 is 0.0.
    counts = np.column_stack([HAND_SUPPORT, np.zeros(5)])
    para = pivot_paraphrases(hand_table(counts), **NO_PRUNING)
    assert len(para) == 6 and (para.p[:, 1] == 0.0).all()
    # top_n ranks only nonzero values: model 1 adds nothing to the union.
    para = pivot_paraphrases(hand_table(counts), **{**NO_PRUNING, "top_n": 1})
    assert list(zip(para.e1.tolist(), para.e2.tolist())) == [(0, 2), (1, 0), (2, 0)]


def test_normalisation_uses_the_full_table():
    # A pruned entry still counts in the denominators: with min_p_e_given_f=.21 the pair
    # (e0, f0) is gone, yet p(f1|e0) stays 2 / 4 = .5, not 2 / 2.
    para = pivot_paraphrases(hand_table(), **{**NO_PRUNING, "min_p_e_given_f": 0.21})
    assert as_dict(para)[(0, 2)] == pytest.approx(.75 * .5, abs=TOL)


def test_three_pivots_ranked_by_contribution_with_ties_to_smaller_f():
    # e0 and e1 share f0..f3 (e2 dilutes f3). p(f|e0) = 1/4 each, and
    #   p(e1|f0) = 1/2   p(e1|f1) = 3/4   p(e1|f2) = 1/2   p(e1|f3) = 1/(1+1+2) = 1/4,
    # so the contributions to P(e1|e0) are .125, .1875, .125, .0625: the top 3 are f1, then
    # f0 and f2, tied, smaller id first; f3 is left out.
    pairs = [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (1, 2), (1, 3), (2, 3)]
    support = [1, 1, 1, 1, 1, 3, 1, 1, 2]
    para = pivot_paraphrases(make_table(3, 4, pairs, support), **NO_PRUNING)
    i = list(zip(para.e1.tolist(), para.e2.tolist())).index((0, 1))
    assert para.n_pivots[i] == 4
    assert para.pivots[i].tolist() == [1, 0, 2]
    assert para.p[i, 0] == pytest.approx(.125 + .1875 + .125 + .0625, abs=TOL)


def test_empty_and_trivial_tables():
    empty = make_table(0, 0, np.zeros((0, 2)), [])
    para = pivot_paraphrases(empty)
    assert len(para) == 0 and para.p.shape == (0, 1) and para.pivots.shape == (0, 3)
    one = make_table(1, 1, [(0, 0)], [5])
    assert len(pivot_paraphrases(one, **NO_PRUNING)) == 0  # only the diagonal


def test_refuses_unsorted_tables_and_bad_parameters():
    t = hand_table()
    t.e_id = t.e_id[::-1].copy()
    with pytest.raises(ValueError, match="sorted"):
        pivot_paraphrases(t)
    with pytest.raises(ValueError, match="top_n"):
        pivot_paraphrases(hand_table(), top_n=-1)
    with pytest.raises(ValueError, match="n_threads"):
        pivot_paraphrases(hand_table(), n_threads=-2)


def test_save_load_round_trip(tmp_path):
    para = pivot_paraphrases(hand_table(K2_COUNTS), **NO_PRUNING)
    para.save(tmp_path / "p.npz")
    back = Paraphrases.load(tmp_path / "p.npz")
    for name in ("e1", "e2", "p", "n_pivots", "pivots"):
        a, b = getattr(para, name), getattr(back, name)
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    assert back.meta == para.meta and back.meta["top_n"] == 0


def test_defaults_are_the_documented_constants():
    assert (DEFAULT_MIN_P_F_GIVEN_E, DEFAULT_MIN_P_E_GIVEN_F, DEFAULT_MAX_E_PER_F, DEFAULT_TOP_N,
            DEFAULT_MIN_PHRASE_COUNT, DEFAULT_MIN_P_E2_GIVEN_E1) == (0.001, 0.001, 100, 0, 1, 0.0)
    para = pivot_paraphrases(hand_table())
    assert para.meta["min_p_f_given_e"] == DEFAULT_MIN_P_F_GIVEN_E and para.meta["top_n"] == DEFAULT_TOP_N
    assert para.meta["min_p_e2_given_e1"] == DEFAULT_MIN_P_E2_GIVEN_E1


def test_floor_on_p_e2_given_e1_is_per_model_and_inclusive():
    # General: .3 .475 .2 .2 .2375 .15; model 1 (K2_COUNTS): .6 .2 .2 .2 .05 .15 (see above).
    # A floor of .2 keeps the values >= .2 of each model (.2 = 2/10 * 1 is exact in binary
    # and equal to the literal .2); below it a model's value becomes 0, and (e2, e1), below
    # the floor under both models, is not stored at all.
    para = pivot_paraphrases(hand_table(K2_COUNTS), **{**NO_PRUNING, "min_p_e2_given_e1": 0.2})
    assert list(zip(para.e1.tolist(), para.e2.tolist())) == [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0)]
    np.testing.assert_allclose(para.p, [[.3, .6], [.475, .2], [.2, .2], [.2, .2], [.2375, 0.0]], rtol=0, atol=TOL)
    assert para.p[4, 1] == 0.0 and para.meta["min_p_e2_given_e1"] == 0.2
    # Just above .2, the .2 values go too.
    para = pivot_paraphrases(hand_table(K2_COUNTS), **{**NO_PRUNING, "min_p_e2_given_e1": np.nextafter(0.2, 1)})
    assert as_dict(para, 0) == pytest.approx({(0, 1): .3, (0, 2): .475, (2, 0): .2375}, abs=TOL)
    assert as_dict(para, 1) == pytest.approx({(0, 1): .6, (0, 2): 0.0, (2, 0): 0.0}, abs=TOL)
    with pytest.raises(ValueError, match="min_p_e2_given_e1"):
        pivot_paraphrases(hand_table(), min_p_e2_given_e1=-0.1)


def test_floor_and_top_n_together_rank_what_survives_the_floor():
    # Floor .23 leaves General's row e0 with .3 and .475 and model 1's with .6; top_n=1 then
    # keeps (e0, e2) (General's best) and (e0, e1) (model 1's best; a kept pair carries every
    # model's value above the floor); row e1 has nothing above .23, row e2 General's .2375.
    para = pivot_paraphrases(hand_table(K2_COUNTS), **{**NO_PRUNING, "min_p_e2_given_e1": 0.23, "top_n": 1})
    assert list(zip(para.e1.tolist(), para.e2.tolist())) == [(0, 1), (0, 2), (2, 0)]
    np.testing.assert_allclose(para.p, [[.3, .6], [.475, 0.0], [.2375, 0.0]], rtol=0, atol=TOL)


# ------------------------------------------------------------------ a seeded random table


def random_table(seed=0, n_e=1500, n_f=900, n_draws=20000, k=3):
    rng = np.random.default_rng(seed)
    # Zipf-like phrase frequencies give a few high-degree pivots for the cap to bite on.
    e = np.minimum(rng.zipf(1.4, n_draws) - 1, n_e - 1)
    f = np.where(rng.random(n_draws) < 0.5, (e * 7 + rng.integers(0, 3, n_draws)) % n_f,
                 np.minimum(rng.zipf(1.3, n_draws) - 1, n_f - 1))
    keys, support = np.unique(e * n_f + f, return_counts=True)
    pairs = np.column_stack([keys // n_f, keys % n_f])
    cols = [support.astype(float)]
    for j in range(1, k):
        cols.append(support * (rng.uniform(0, 2, len(support)) if j % 2 else rng.random(len(support)) < 0.4))
    return make_table(n_e, n_f, pairs, support, np.column_stack(cols))


def tie_heavy_table(seed=5, n_e=300, n_f=120, n_pairs=2500):
    # Support 1 everywhere and few distinct degrees: many P values tie exactly.
    rng = np.random.default_rng(seed)
    keys = np.unique(rng.integers(0, n_e, 3 * n_pairs) * n_f + rng.integers(0, n_f, 3 * n_pairs))
    keys = np.sort(rng.choice(keys, n_pairs, replace=False))
    pairs = np.column_stack([keys // n_f, keys % n_f])
    support = np.ones(len(keys), np.int64)
    return make_table(n_e, n_f, pairs, support, np.column_stack([support, support * (keys % 3 == 0)]))


RANDOM_PRUNING = dict(min_p_f_given_e=0.01, min_p_e_given_f=0.005, max_e_per_f=15)


def scipy_products(table, s):
    """P_k = R_k @ K_k^T without its diagonal, on the kept structure, one model at a time."""
    out = []
    for k in range(table.counts.shape[1]):
        c = table.counts[:, k]
        rs = np.bincount(table.e_id, weights=c, minlength=table.n_e)
        cs = np.bincount(table.f_id, weights=c, minlength=table.n_f)
        kept = s.kept[s.keep_csr[:, k]]  # model k's own pruned entries
        e, f = table.e_id[kept], table.f_id[kept]
        with np.errstate(invalid="ignore", divide="ignore"):
            r = np.where(rs[e] > 0, c[kept] / rs[e], 0.0)
            q = np.where(cs[f] > 0, c[kept] / cs[f], 0.0)
        R = sp.csr_matrix((r, (e, f)), shape=(table.n_e, table.n_f))
        Kc = sp.csr_matrix((q, (e, f)), shape=(table.n_e, table.n_f))
        P = (R @ Kc.T).tolil()
        P.setdiag(0)
        P = P.tocsr()
        P.eliminate_zeros()
        out.append(P)
    return out


def test_random_table_threads_give_identical_bits():
    table = random_table()
    assert table.n_pairs > 2000
    runs = [pivot_paraphrases(table, **RANDOM_PRUNING, top_n=5, n_threads=n) for n in (1, 2, 3)]
    runs += [pivot_paraphrases(table, **RANDOM_PRUNING, top_n=0, n_threads=n) for n in (1, 2)]
    runs += [pivot_paraphrases(table, **RANDOM_PRUNING, min_p_e2_given_e1=1e-3, n_threads=n) for n in (1, 3)]
    for a, b in ((runs[0], runs[1]), (runs[0], runs[2]), (runs[3], runs[4]), (runs[5], runs[6])):
        for name in ("e1", "e2", "p", "n_pivots", "pivots"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert len(runs[3]) > len(runs[5]) > 1000 and len(runs[3]) > len(runs[0]) > 1000
    # The floor keeps exactly the pairs of the unfloored run with some p_k >= 1e-3.
    keep = (runs[3].p >= 1e-3).any(axis=1)
    np.testing.assert_array_equal(runs[5].e1, runs[3].e1[keep])
    np.testing.assert_array_equal(runs[5].p, np.where(runs[3].p[keep] >= 1e-3, runs[3].p[keep], 0.0))


def test_random_table_agrees_with_scipy():
    table = random_table(seed=1)
    s = prune(table, **{k: v for k, v in RANDOM_PRUNING.items()})
    para = pivot_paraphrases(table, **RANDOM_PRUNING, top_n=0, n_threads=2)
    mats = scipy_products(table, s)
    for k, S in enumerate(mats):
        mine = sp.csr_matrix((para.p[:, k], (para.e1, para.e2)), shape=S.shape)
        diff = (S - mine).tocsr()
        assert diff.nnz == 0 or np.abs(diff.data).max() <= 1e-12, k
    # Exactly the pairs with a nonzero value under some model are output.
    union = sum((m != 0).astype(np.int8) for m in mats).tocoo()
    assert set(zip(union.row.tolist(), union.col.tolist())) == set(zip(para.e1.tolist(), para.e2.tolist()))


def brute_force_keep(table, min_p_f_given_e, min_p_e_given_f, max_e_per_f, min_phrase_count=1):
    """Rules (a) and (b) for each model, pair by pair: {k: set of kept pair indices}."""
    nobs = table.observations()
    out = {}
    for k in range(table.counts.shape[1]):
        c = table.counts[:, k]
        rs = np.bincount(table.e_id, weights=c, minlength=table.n_e)
        cs = np.bincount(table.f_id, weights=c, minlength=table.n_f)
        survivors = [i for i in range(table.n_pairs)
                     if c[i] > 0 and c[i] / rs[table.e_id[i]] >= min_p_f_given_e
                     and c[i] / cs[table.f_id[i]] >= min_p_e_given_f and nobs[table.e_id[i], k] >= min_phrase_count]
        by_f = {}
        for i in survivors:
            by_f.setdefault(int(table.f_id[i]), []).append(i)
        want = set()
        for f, idx in by_f.items():
            idx.sort(key=lambda i: (-c[i], table.e_id[i]))
            want.update(idx[:max_e_per_f] if max_e_per_f else idx)
        out[k] = (want, len(survivors))
    return out


@pytest.mark.parametrize("table_fn", [lambda: random_table(seed=2), lambda: tie_heavy_table(seed=6)])
@pytest.mark.parametrize("min_phrase_count", [1, 3])
def test_random_table_pruning_matches_the_rules(table_fn, min_phrase_count):
    table = table_fn()
    s = prune(table, **RANDOM_PRUNING, min_phrase_count=min_phrase_count)
    want = brute_force_keep(table, **RANDOM_PRUNING, min_phrase_count=min_phrase_count)
    union = set()
    for k, (kept_k, n_survivors) in want.items():
        assert set(s.kept[s.keep_csr[:, k]].tolist()) == kept_k, k
        assert set(s.csc_pair[s.keep_csc[:, k]].tolist()) == kept_k, k
        assert len(kept_k) < n_survivors  # the cap bites for every model
        union |= kept_k
    assert set(s.kept.tolist()) == union
    # Models really differ: no model's kept set is General's.
    assert all(want[k][0] != want[0][0] for k in want if k)


def test_a_models_column_does_not_depend_on_the_other_models():
    # Pruned on its own counts, model 2 gives the same bits alone as beside models 0 and 1.
    table = random_table(seed=8)
    both = pivot_paraphrases(table, **RANDOM_PRUNING, min_p_e2_given_e1=1e-3, n_threads=2)
    alone_table = make_table(table.n_e, table.n_f, np.column_stack([table.e_id, table.f_id]), table.support,
                             table.counts[:, 2:3])
    alone = pivot_paraphrases(alone_table, **RANDOM_PRUNING, min_p_e2_given_e1=1e-3, n_threads=2)
    nz = both.p[:, 2] != 0
    assert nz.sum() > 500 and len(alone) == nz.sum()
    np.testing.assert_array_equal(alone.e1, both.e1[nz])
    np.testing.assert_array_equal(alone.e2, both.e2[nz])
    assert alone.p[:, 0].tobytes() == both.p[nz, 2].tobytes()


@pytest.mark.parametrize("table_fn,top_n", [(lambda: random_table(seed=3), 4), (tie_heavy_table, 2)])
def test_random_table_top_n_n_pivots_and_pivots_by_brute_force(table_fn, top_n):
    table = table_fn()
    s = prune(table, **RANDOM_PRUNING)
    para = pivot_paraphrases(table, **RANDOM_PRUNING, top_n=top_n, n_threads=2)
    full = pivot_paraphrases(table, **RANDOM_PRUNING, top_n=0, n_threads=1)
    # Rule (c): rank < top_n among the row's nonzero values under some model.
    want = set()
    for e1 in np.unique(full.e1):
        rows = np.flatnonzero(full.e1 == e1)
        for k in range(table.counts.shape[1]):
            nz = rows[full.p[rows, k] != 0]
            ranked = sorted(nz, key=lambda i: (-full.p[i, k], full.e2[i]))
            want.update((int(e1), int(full.e2[i])) for i in ranked[:top_n])
    assert set(zip(para.e1.tolist(), para.e2.tolist())) == want
    # n_pivots and pivots from the kept entries directly.
    fs_of = {}
    for i in s.kept:
        fs_of.setdefault(int(table.e_id[i]), {})[int(table.f_id[i])] = i
    # Model 0's contributions: an entry model 0 does not keep contributes 0.
    c0 = table.counts[:, 0].copy()
    c0_keep = np.zeros(table.n_pairs, bool)
    c0_keep[s.kept[s.keep_csr[:, 0]]] = True
    rs = np.bincount(table.e_id, weights=c0, minlength=table.n_e)
    cs = np.bincount(table.f_id, weights=c0, minlength=table.n_f)
    for e1, e2, n_piv, piv in zip(full.e1.tolist(), full.e2.tolist(), full.n_pivots.tolist(),
                                  full.pivots.tolist()):
        shared = sorted(set(fs_of[e1]) & set(fs_of[e2]))
        assert n_piv == len(shared)
        contrib = [(c0[fs_of[e2][f]] / cs[f] * c0_keep[fs_of[e2][f]]) * (c0[fs_of[e1][f]] / rs[e1] * c0_keep[fs_of[e1][f]])
                   for f in shared]
        best = sorted(range(len(shared)), key=lambda j: (-contrib[j], shared[j]))[:3]
        assert piv == [shared[j] for j in best] + [-1] * (3 - len(best))


@pytest.mark.parametrize("top_n", [0, 3])
def test_many_small_waves_give_the_same_result(top_n):
    # The kernel runs rows in waves of about equal work; force hundreds of tiny waves (and
    # waves of a single row) and compare with one big wave, at 1 and 3 threads.
    from pivot._native import _counts
    from pivot.pipeline.pivoting import translation_probabilities

    table = random_table(seed=4)
    s = prune(table, **RANDOM_PRUNING)
    p_fe, p_ef = translation_probabilities(table, s, n_threads=1)
    args = (s.row_ptr, s.row_f, p_fe, s.col_ptr, s.col_e, p_ef, top_n)
    ref = _counts.pivot_product(*args, 1, wave_work=1 << 40)
    assert len(ref[0]) > 1000
    for n_threads, wave_work in ((1, 1), (3, 1), (3, 50), (2, 997)):
        got = _counts.pivot_product(*args, n_threads, wave_work=wave_work)
        for a, b in zip(ref, got):
            np.testing.assert_array_equal(a, b)


def test_refuses_negative_or_nan_counts():
    for bad in (-1.0, np.nan):
        counts = np.column_stack([HAND_SUPPORT, [1.0, bad, 1.0, 1.0, 1.0]])
        with pytest.raises(ValueError, match="finite and >= 0"):
            pivot_paraphrases(hand_table(counts))


def test_kernel_refuses_broken_layouts():
    # The kernel trusts its indices in the hot loop, so it checks them once up front.
    from pivot._native import _counts
    from pivot.pipeline.pivoting import translation_probabilities

    s = prune(hand_table(), min_p_f_given_e=0, min_p_e_given_f=0, max_e_per_f=0)
    p_fe, p_ef = translation_probabilities(hand_table(), s, n_threads=1)
    bad_f = s.row_f.copy()
    bad_f[0] = 7  # no such foreign phrase
    with pytest.raises(ValueError, match="layout"):
        _counts.pivot_product(s.row_ptr, bad_f, p_fe, s.col_ptr, s.col_e, p_ef, 0, 1)
    bad_ptr = s.col_ptr[::-1].copy()
    with pytest.raises(ValueError, match="layout"):
        _counts.pivot_product(s.row_ptr, s.row_f, p_fe, bad_ptr, s.col_e, p_ef, 0, 1)


@pytest.mark.parametrize("top_n", [0, 3])
def test_a_range_with_its_own_row_ptr_gives_the_same_rows(top_n):
    # row_base: a task's row_ptr holds its rows lo..hi - 1 only (hi - lo + 1 offsets from 0, and
    # row_f/p_fe its entries alone); the rows' pairs are those of the whole row_ptr over lo..hi.
    from pivot._native import _counts
    from pivot.pipeline.pivoting import translation_probabilities

    table = random_table(seed=4)
    s = prune(table, **RANDOM_PRUNING)
    p_fe, p_ef = translation_probabilities(table, s, n_threads=1)
    n_e = len(s.row_ptr) - 1
    for lo, hi in ((0, n_e), (0, 1), (3, 40), (n_e // 2, n_e), (n_e, n_e)):
        a0, a1 = int(s.row_ptr[lo]), int(s.row_ptr[hi])
        want = _counts.pivot_product(s.row_ptr, s.row_f, p_fe, s.col_ptr, s.col_e, p_ef, top_n, 2, 50, lo, hi)
        local = np.ascontiguousarray(s.row_ptr[lo:hi + 1] - a0)
        got = _counts.pivot_product(local, np.ascontiguousarray(s.row_f[a0:a1]), np.ascontiguousarray(p_fe[a0:a1]),
                                    s.col_ptr, s.col_e, p_ef, top_n, 2, 50, lo, hi, 0.0, lo, n_e)
        for a, b in zip(want, got):
            np.testing.assert_array_equal(a, b)
        if lo < hi and a1 > a0:
            assert len(want[0]) > 0 and set(want[0].tolist()) <= set(range(lo, hi))
    # the rows must lie within row_ptr's, and n_e cover them
    local = np.ascontiguousarray(s.row_ptr[3:41] - s.row_ptr[3])
    args = (local, np.ascontiguousarray(s.row_f[s.row_ptr[3]:s.row_ptr[40]]),
            np.ascontiguousarray(p_fe[s.row_ptr[3]:s.row_ptr[40]]), s.col_ptr, s.col_e, p_ef, top_n, 1, 0)
    with pytest.raises(ValueError, match="row range"):
        _counts.pivot_product(*args, 2, 40, 0.0, 3, n_e)
    with pytest.raises(ValueError, match="English ids"):
        _counts.pivot_product(*args, 3, 40, 0.0, 3, 20)
