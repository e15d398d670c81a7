"""The pruning rules (pivot.pipeline.pruning.keep_entries) by hand, two models.

Entries (f group, English key; counts, p(f|e), p(e|f) of models 0 | 1; e_ok):

    0: f0 e3   c 2 | 1   p_fe .5  | .5   p_ef .4 | .2   ok
    1: f0 e1   c 2 | 0   p_fe .5  | .5   p_ef .4 | 0    ok
    2: f0 e2   c 1 | 4   p_fe .05 | .5   p_ef .2 | .8   ok
    3: f1 e1   c 3 | 1   p_fe .5  | .5   p_ef 1  | .5   ok
    4: f1 e2   c 0 | 1   p_fe .5  | .5   p_ef 0  | .5   ok for model 0 only

Rule (a) at p(f|e) >= .1, p(e|f) >= .2: model 0 loses 2 (p_fe .05) and 4 (c 0); model 1 loses
1 (c 0) and 4 (e_ok). Rule (b), cap 1: f0's survivors under model 0 are entries 0 and 1, tied
at c 2: the smaller English key (1, entry 1) stays; under model 1 entries 0 (c 1) and 2 (c 4):
entry 2 stays. f1 holds one survivor per model.
"""
import numpy as np

from pivot.pipeline.pruning import keep_entries

COUNTS = np.array([[2, 1], [2, 0], [1, 4], [3, 1], [0, 1]], dtype=float)
P_FE = np.array([[.5, .5], [.5, .5], [.05, .5], [.5, .5], [.5, .5]])
P_EF = np.array([[.4, .2], [.4, 0], [.2, .8], [1, .5], [0, .5]])
E_OK = np.array([[1, 1], [1, 1], [1, 1], [1, 1], [1, 0]], dtype=bool)
F_GROUP = np.array([0, 0, 0, 1, 1])
E_KEY = np.array([3, 1, 2, 1, 2])


def rules(cap):
    keep, after = keep_entries(COUNTS, P_FE, P_EF, E_OK, F_GROUP, E_KEY, min_p_f_given_e=0.1,
                               min_p_e_given_f=0.2, max_e_per_f=cap)
    return keep.T.astype(int).tolist(), after.astype(int).tolist()


def test_rule_a_alone_and_no_cap():
    # cap 0 means no cap; cap 2 leaves every column's (at most 2) survivors
    for cap in (0, 2):
        assert rules(cap) == ([[1, 1, 0, 1, 0], [1, 0, 1, 1, 0]], [1, 1, 1, 1, 0])


def test_rule_b_largest_count_then_smaller_key():
    keep, after = rules(1)
    assert keep == [[0, 1, 0, 1, 0], [0, 0, 1, 1, 0]]
    assert after == [1, 1, 1, 1, 0]          # after rule (a) only


def test_the_order_of_the_entries_does_not_matter():
    order = np.array([4, 2, 0, 3, 1])
    keep, after = keep_entries(COUNTS[order], P_FE[order], P_EF[order], E_OK[order], F_GROUP[order],
                               E_KEY[order], min_p_f_given_e=0.1, min_p_e_given_f=0.2, max_e_per_f=1)
    back = np.empty_like(order)
    back[order] = np.arange(len(order))
    assert keep[back].T.astype(int).tolist() == [[0, 1, 0, 1, 0], [0, 0, 1, 1, 0]]
    assert after[back].astype(int).tolist() == [1, 1, 1, 1, 0]
