"""The coverage ceiling's pivot recomputation (pivot.eval.ceiling), worked out by hand."""
import numpy as np
import pytest

from pivot.eval.ceiling import Pruning, UnprunedTable

# English phrases 0, 1, 2 (keys 10, 11, 12), foreign 0, 1 (keys 20, 21); rows (e, f, c):
#   (10, 20, 3)  (11, 20, 1)  (11, 21, 2)  (12, 21, 2)  and a zero-count row that is no row
# c(e): 3, 3, 2 -> p(f|e): e10 f20 1; e11 f20 1/3, f21 2/3; e12 f21 1
# c(f): 4, 4    -> p(e|f): f20 e10 .75, e11 .25; f21 e11 .5, e12 .5
ROWS = dict(e_key=[10, 11, 11, 12, 12], f_key=[20, 20, 21, 21, 20], c=[3.0, 1.0, 2.0, 2.0, 0.0],
            p_fe=[1.0, 1 / 3, 2 / 3, 1.0, 0.0], support=[3, 3, 3, 2, 2])
NONE = Pruning(0.0, 0.0, None, 1, 0.0)


def table():
    return UnprunedTable(**ROWS)


def test_no_pruning_by_hand():
    t = table()
    assert len(t) == 4 and t.p_ef.tolist() == pytest.approx([0.75, 0.25, 0.5, 0.5])
    rows = t.row_of(np.array([10, 11, 11, 12, 10, 12, 99]))
    assert rows.tolist() == [0, 1, 1, 2, 0, 2, -1]
    pairs = np.array([[0, 1], [1, 2], [0, 2], [0, -1]])
    fwd, rev = t.pair_scores(pairs, NONE)
    # p(11|10) = 1 * .25; p(12|11) = 2/3 * .5; 10 and 12 share no pivot; an unknown phrase: 0
    assert fwd.tolist() == pytest.approx([0.25, 1 / 3, 0.0, 0.0])
    # p(10|11) = 1/3 * .75; p(11|12) = 1 * .5
    assert rev.tolist() == pytest.approx([0.25, 0.5, 0.0, 0.0])
    assert t.proposed(pairs, NONE).tolist() == [True, True, False, False]
    # floor .3: (0, 1) has .25 both ways -> not stored; (1, 2) has 1/3 and .5
    assert t.proposed(pairs, Pruning(0.0, 0.0, None, 1, 0.3)).tolist() == [False, True, False, False]


def test_each_rule_by_hand():
    t = table()
    pairs = np.array([[0, 1], [1, 2]])
    # cap 1 per f: f20 keeps e10 (c 3), f21 keeps e11 (c 2 ties e12's; the smaller key)
    assert t.kept(Pruning(0.0, 0.0, 1, 1, 0.0)).tolist() == [True, False, True, False]
    assert t.proposed(pairs, Pruning(0.0, 0.0, 1, 1, 0.0)).tolist() == [False, False]
    # p(e|f) >= .3 drops (11, 20) only: 10 and 11 lose their one shared pivot
    assert t.kept(Pruning(0.0, 0.3, None, 1, 0.0)).tolist() == [True, False, True, True]
    assert t.proposed(pairs, Pruning(0.0, 0.3, None, 1, 0.0)).tolist() == [False, True]
    # p(f|e) >= .5 drops (11, 20) too; support >= 3 drops e12's row
    assert t.kept(Pruning(0.5, 0.0, None, 1, 0.0)).tolist() == [True, False, True, True]
    assert t.kept(Pruning(0.0, 0.0, None, 3, 0.0)).tolist() == [True, True, True, False]
    assert t.proposed(pairs, Pruning(0.0, 0.0, None, 3, 0.0)).tolist() == [True, False]
    # the cap applies among the rows rule (a) kept: without e11's row at f21, e12 is f21's first
    assert t.kept(Pruning(0.0, 0.0, 1, 1, 0.0)).tolist() != t.kept(Pruning(0.7, 0.0, 1, 1, 0.0)).tolist()
    assert t.kept(Pruning(0.7, 0.0, 1, 1, 0.0)).tolist() == [True, False, False, True]


def test_projected_pairs_counts_the_sample_and_scales():
    t = table()
    # no pruning: e10 -> {e11}; e11 -> {e10, e12}; e12 -> {e11}: 4 pairs over 3 phrases
    assert t.projected_pairs(NONE, np.array([0, 1, 2])) == pytest.approx(4.0)
    assert t.projected_pairs(NONE, np.array([1])) == pytest.approx(2 * 3)      # 2 pairs, 3 phrases / 1
