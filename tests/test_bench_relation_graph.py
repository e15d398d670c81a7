"""The graph features of bench/bench_relation_graph.py, on a six-phrase graph whose sums are
worked out by hand in the comments."""
import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

_PATH = Path(__file__).resolve().parent.parent / "bench" / "bench_relation_graph.py"
sys.path.insert(0, str(_PATH.parent))
_spec = importlib.util.spec_from_file_location("bench_relation_graph", _PATH)
rg = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rg)

FE, RE, EXCL, OTHER = 1, 2, 3, 4
# paraphrase edges p(x|e): 0 -> 1 (0.5), 0 -> 2 (0.25), 3 -> 4 (0.8); phrase 5 has none
W = rg.paraphrase_matrix([0, 0, 3], [1, 2, 4], [0.5, 0.25, 0.8], 6)
# labelled training-side pairs: 1 < 4 (Forward), 2 | 4 (Exclusion), (4, 2) OtherRelated (its own label)
A, B, Y = [1, 2, 4], [4, 4, 2], [FE, EXCL, OTHER]


def test_labelled_pairs_add_converses_only_where_unlabelled():
    # (1, 4) Forward gives (4, 1) Reverse; (2, 4) and (4, 2) each keep their own label
    a, b, y = rg.labelled_pairs(A, B, Y)
    assert list(zip(a.tolist(), b.tolist(), y.tolist())) == [(1, 4, FE), (2, 4, EXCL), (4, 1, RE), (4, 2, OTHER)]


def test_transfer_mass_both_directions():
    L = rg.label_matrices(*rg.labelled_pairs(A, B, Y), 6)
    t = rg.transfer_mass(W, L, [0, 3, 5], [3, 0, 0])
    # (0, 3): x in {1 (0.5), 2 (0.25)}, y = 4 (0.8): (1, 4) Forward 0.5 * 0.8 = 0.4, (2, 4) Exclusion 0.25 * 0.8 = 0.2
    # (3, 0): x = 4, y in {1, 2}: (4, 1) Reverse 0.4, (4, 2) OtherRelated 0.2
    # (5, 0): phrase 5 has no paraphrase: nothing
    assert t.ravel().tolist() == pytest.approx([0, 0.4, 0, 0.2, 0, 0] + [0, 0, 0.4, 0, 0.2, 0] + [0] * 6)


def test_role_shares():
    L = rg.label_matrices(*rg.labelled_pairs(A, B, Y), 6)
    r = rg.role_shares(W, L, [0, 3, 5])
    # phrase 1's pairs: (1, 4) Forward -> shares e_FE; 2's: (2, 4) Exclusion; 4's: (4, 1) Reverse, (4, 2) Other -> 1/2 each
    # R(0) = 0.5 e_FE + 0.25 e_EXCL, coverage 0.75; R(3) = 0.8 (e_RE + e_OTHER) / 2, coverage 0.8
    assert r.ravel().tolist() == pytest.approx([0, 0.5, 0, 0.25, 0, 0, 0.75] + [0, 0, 0.4, 0, 0.4, 0, 0.8] + [0] * 7)


def test_neighbour_inclusion():
    # 0 -> 1 (0.6), 0 -> 2 (0.2), 1 -> 0 (0.5), 1 -> 3 (0.5)
    w = rg.paraphrase_matrix([0, 0, 1, 1], [1, 2, 0, 3], [0.6, 0.2, 0.5, 0.5], 4)
    inc = rg.neighbour_inclusion(w, [0, 3], [1, 0])
    # (0, 1): N(1) + 1 = {0, 1, 3} holds 0.6 of 0's 0.8 -> 0.75; N(0) + 0 = {0, 1, 2} holds 0.5 of 1's 1.0 -> 0.5
    # (3, 0): 3 has no paraphrase -> 0; N(3) + 3 = {3} holds none of 0's mass -> 0
    assert inc.ravel().tolist() == pytest.approx([0.75, 0.5, 0.25, 0, 0, 0])


def test_graph_features_out_of_fold():
    a, b, y = rg.labelled_pairs(A, B, Y)
    fold = np.array([0, 1, 2, 0, 1, -1])          # phrase 5 in no labelled pair
    # row 0: (0, 3) in folds (0, 0): every labelled pair readable (phrases 1, 2, 4 in folds 1, 2, 1), scale 1
    # row 1: (0, 3) as if in folds (0, 2): phrase 2 is out with (2, 4) and (4, 2): 2 of 4 pairs readable, scale 2:
    #        T = 2 * (0, 0.4, 0, 0, 0, 0); R(0) = 0.5 e_FE, coverage 0.5; R(3): 4's only pair (4, 1) Reverse -> 0.8 e_RE
    f = rg.graph_features(W, (a, b, y, fold), [0, 0], [3, 3], np.array([0, 0]), np.array([0, 2]), n_folds=3)
    tr = f["transfer"]
    assert tr[0].tolist() == pytest.approx([0, math.log(41), 0, math.log(21), 0, 0, 0, 2 / 3, 0, 1 / 3, 0, 0, 1])
    assert tr[1].tolist() == pytest.approx([0, math.log(81), 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1])
    assert f["roles"][1].tolist() == pytest.approx([0, 0.5, 0, 0, 0, 0, 0.5, 0, 0, 0.8, 0, 0, 0, 0.8])
    # test rows (no folds) read every labelled pair, as row 0 does
    t = rg.graph_features(W, (a, b, y, fold), [0], [3])
    assert t["transfer"][0].tolist() == pytest.approx(tr[0].tolist())
    assert t["roles"][0].tolist() == pytest.approx(f["roles"][0].tolist())


def test_knn_votes():
    q = np.array([[1.0, 0.0]])
    keys = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]])
    y = np.array([FE, EXCL, EXCL])
    # k = 2 of all: similarities 1.0 (Forward) and 0.6 (Exclusion): shares 1 / 1.6 and 0.6 / 1.6, max 1, mean 0.8
    v = rg.knn_votes(q, keys, y, np.ones(3, bool), k=2)
    assert v.ravel().tolist() == pytest.approx([0, 0.625, 0, 0.375, 0, 0, 1.0, 0.8])
    # the first key unreadable: 0.6 and 0.0, both Exclusion: share 1, max 0.6, mean 0.3
    v = rg.knn_votes(q, keys, y, np.array([False, True, True]), k=2)
    assert v.ravel().tolist() == pytest.approx([0, 0, 0, 1.0, 0, 0, 0.6, 0.3])
    # nothing readable: zeros
    assert rg.knn_votes(q, keys, y, np.zeros(3, bool), k=2).ravel().tolist() == [0.0] * 8


def test_knn_features_out_of_fold():
    vec = np.array([[1.0, 0.0], [2.0, 0.0], [0.0, 1.0], [0.0, 3.0]])      # unit rows: e_x, e_x, e_y, e_y
    a, b, y = rg.labelled_pairs([1], [3], [FE])                          # (1, 3) Forward and (3, 1) Reverse
    fold = np.array([0, 1, 0, 1])
    # (0, 2) against (1, 3): (cos 1 + cos 1) / 2 = 1; against (3, 1): (0 + 0) / 2 = 0 -> Forward 1, max 1, mean 0.5
    f = rg.knn_features(vec, (a, b, y, fold), [0, 0], [2, 2], np.array([0, 0]), np.array([0, 1]))
    assert f[0].tolist() == pytest.approx([0, 1, 0, 0, 0, 0, 1, 0.5])
    # folds (0, 1): both labelled phrases are in fold 1, nothing readable
    assert f[1].tolist() == [0.0] * 8
    # a test row (no folds) reads both
    assert rg.knn_features(vec, (a, b, y, fold), [0], [2])[0].tolist() == pytest.approx([0, 1, 0, 0, 0, 0, 1, 0.5])


def test_converse_rows():
    names = ["logp[g]", "logp_rev[g]", "missing[g]", "missing_rev[g]", "logp_min[g]", "log1p_count_e1", "log1p_count_e2",
             "fwd_gt_rev", "vec_e1[0]", "vec_e2[0]", "tr_share[1]", "tr_share[2]", "tr_share[3]", "role_e1[1]",
             "role_e2[1]", "nb_incl_12", "nb_incl_21", "nb_incl_diff"]
    x = np.array([[-1.0, -2.0, 0, 1, -2.0, 3.0, 4.0, 1, 0.5, -0.5, 0.7, 0.1, 0.2, 0.3, 0.4, 0.9, 0.6, 0.3]])
    # directions exchanged; the converse's fwd_gt_rev = [logp_rev > logp] = [-2 > -1] = 0;
    # logp_min and tr_share[3] (Exclusion, symmetric) kept; the inclusion difference negated
    assert rg.converse_rows(names, x, "g").ravel().tolist() == pytest.approx(
        [-2.0, -1.0, 1, 0, -2.0, 4.0, 3.0, 0, -0.5, 0.5, 0.1, 0.7, 0.2, 0.4, 0.3, 0.6, 0.9, -0.3])


def test_converse_model_symmetrises():
    class Fixed:
        def probabilities(self, names, x):
            # class scores by the first column: a row with logp > logp_rev says Forward 0.7, else Reverse 0.7
            fwd = x[:, 0] > x[:, 1]
            p = np.full((len(x), 6), 0.06)
            p[fwd, 1], p[~fwd, 2] = 0.7, 0.7
            return p

    m = rg.ConverseModel(Fixed(), "g")
    # (e1, e2) reads Forward 0.7; its converse reads Reverse 0.7, which is Forward of (e1, e2): the mean keeps 0.7
    p = m.probabilities(["logp[g]", "logp_rev[g]"], np.array([[-1.0, -2.0]]))
    assert p.ravel().tolist() == pytest.approx([0.06, 0.7, 0.06, 0.06, 0.06, 0.06])


def test_knn_offset():
    vec = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    a, b, y = rg.labelled_pairs([2], [3], [FE])           # offset of (2, 3): (0, 1) - (1, 0) -> (-1, 1) / sqrt 2
    fold = np.array([0, 0, 1, 1, 0])
    # (0, 1) has the same offset: cosine 1 with (2, 3) (Forward), -1 with its converse (3, 2): weight 0
    # -> Forward share 1, max 1, mean 0; (0, 4): offset (1/sqrt2 - 1, 1/sqrt2) against (-1, 1)/sqrt2
    f = rg.knn_features(vec, (a, b, y, fold), [0, 0], [1, 4], offset=True)
    assert f[0].tolist() == pytest.approx([0, 1, 0, 0, 0, 0, 1, 0])
    d = np.array([2 ** -0.5 - 1, 2 ** -0.5])
    c = float(d @ np.array([-1, 1]) / np.linalg.norm(d) / 2 ** 0.5)
    assert f[1].tolist() == pytest.approx([0, 1, 0, 0, 0, 0, c, 0])
