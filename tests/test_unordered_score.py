"""One score for unordered pairs, shared by the combination's fit and the evaluation.

The hand case: coefficients const 0, log_p_general 1, log_p_x 1, x_missing 0, so
eta = ln p_g + ln p_x and score = sigmoid(ln(p_g * p_x)) = x / (1 + x) with x = p_g * p_x.
Pair (treat, cure):  p_g(cure|treat) = .5, p_g(treat|cure) = .1,
                     p_x(cure|treat) = .05, p_x(treat|cure) = .4.
  fit's convention, each model's better direction: p_g = .5, p_x = .4, x = .2 → .2/1.2 = .166667
  the old evaluation, max over directions of the combined prediction:
     forward x = .5·.05 = .025 → .025/1.025 = .024390; reverse x = .1·.4 = .04 → .04/1.04 = .038462
     max = .038462: a different number, from features (.1, .4) or (.5, .05) the fit never saw.
"""
import numpy as np
import pytest

from pivot.eval.evaluate import _symmetric_scores
from pivot.pipeline.combine import fit_combination, fit_combination_unordered
from pivot.store.combined import Combination, symmetric_p, unordered_features, unordered_score
from pivot.store.db import ParaphraseDB
from pivot.store.write import write_database

FIT = {"model": "logit", "method": "mle", "features": ["const", "log_p_general", "log_p_x", "x_missing"],
       "params": {"const": 0.0, "log_p_general": 1.0, "log_p_x": 1.0, "x_missing": 0.0},
       "bse": None, "converged": True, "n": 10, "n_positive": 5, "llf": -1.0, "dropped": [],
       "reason": None, "floor_p": 1e-10}


def test_symmetric_p_by_hand():
    # max of the two directions; 0 and NaN are "not proposed"; NaN only when both are.
    out = symmetric_p([0.5, 0.0, np.nan, 0.0], [0.1, 0.3, 0.2, np.nan])
    assert out[:3].tolist() == [0.5, 0.3, 0.2] and np.isnan(out[3])


def test_unordered_score_hand_case():
    fit = Combination.from_meta(FIT)
    got = unordered_score(fit, [0.5], [0.1], [0.05], [0.4])
    assert got[0] == pytest.approx(0.2 / 1.2, abs=1e-12)            # .166667
    old = max(fit.predict([0.5], [0.05])[0], fit.predict([0.1], [0.4])[0])
    assert old == pytest.approx(0.04 / 1.04, abs=1e-12)              # .038462, the defect
    # X proposes neither direction: p_x -> floor 1e-10, x_missing = 1 (coefficient 0 here):
    #   x = .5 · 1e-10 → score 5e-11. General proposes neither: NaN (not ranked by a combination).
    got = unordered_score(fit, [0.5, np.nan], [0.0, 0.0], [np.nan, 0.3], [0.0, 0.3])
    assert got[0] == pytest.approx(5e-11, rel=1e-9) and np.isnan(got[1])
    assert unordered_features([0.5], [0.1], [np.nan], [0.0])[0, 3] == 1.0


def test_fit_and_evaluation_share_the_features():
    # Fitting from both directions equals fitting on symmetric_p by hand, and the fitted
    # model's unordered_score equals its predict on those same symmetric probabilities.
    rng = np.random.default_rng(3)
    n = 60
    g_f, g_r, x_f, x_r = (rng.uniform(0.01, 0.9, n) for _ in range(4))
    x_f[rng.random(n) < 0.3] = 0.0
    x_r[rng.random(n) < 0.3] = 0.0
    y = (rng.random(n) < 0.5).astype(float)
    a = fit_combination_unordered(g_f, g_r, x_f, x_r, y)
    b = fit_combination(np.fmax(g_f, g_r), np.fmax(x_f, x_r), y)
    assert np.allclose(a.params, b.params, atol=1e-10)
    pred = a.predict(np.fmax(g_f, g_r), np.fmax(x_f, x_r))
    assert np.allclose(unordered_score(a, g_f, g_r, x_f, x_r), pred, atol=1e-14)


def test_build_directed_scores_feed_the_shared_convention():
    # pivot.pipeline.combine.directed_scores (the build's fit input) gives both directions, which
    # the build hands to fit_combination_unordered: symmetric_p of them is each model's
    # better direction, 0 (NaN there) where neither is stored.
    from pivot.pipeline.combine import directed_scores

    class Para:
        e1 = np.array([0, 1, 0], dtype=np.int64)
        e2 = np.array([1, 0, 2], dtype=np.int64)
        p = np.array([[0.5, 0.05], [0.1, 0.4], [0.3, 0.0]])

    fwd, rev = directed_scores(Para, [(0, 1), (2, 0), (1, 2)])
    # (0,1): p(1|0) row 0, p(0|1) row 1; (2,0): p(0|2) absent, p(2|0) row 2; (1,2): neither.
    assert fwd.tolist() == [[0.5, 0.05], [0.0, 0.0], [0.0, 0.0]]
    assert rev.tolist() == [[0.1, 0.4], [0.3, 0.0], [0.0, 0.0]]
    assert np.nan_to_num(symmetric_p(fwd[:, 0], rev[:, 0])).tolist() == [0.5, 0.3, 0.0]
    assert np.nan_to_num(symmetric_p(fwd[:, 1], rev[:, 1])).tolist() == [0.4, 0.0, 0.0]


def test_evaluation_scores_a_combined_model_like_its_fit(tmp_path):
    # Database: treat(0) cure(1). Rows treat→cure (p_g .5, p_x .05), cure→treat (.1, .4).
    models = [{"name": "general", "kind": "pivot", "description": "", "params": {}},
              {"name": "dom", "kind": "pivot", "description": "", "params": {}},
              {"name": "general+dom", "kind": "combined", "description": "",
               "params": {"base": "general", "other": "dom", "fit": FIT}}]
    path = write_database(tmp_path / "u.db", phrases=["treat", "cure"], phrase_counts=np.array([3, 3]),
                          e1=np.array([0, 1], dtype=np.int32), e2=np.array([1, 0], dtype=np.int32),
                          n_pivots=np.array([1, 1]), pivots=np.array([[0, -1, -1], [0, -1, -1]]),
                          foreign={0: "fr:x"}, models=models, scores=np.array([[0.5, 0.05], [0.1, 0.4]]),
                          meta={"signature": "s", "normalization": {"lang": "en"}})
    with ParaphraseDB(path) as db:
        for pair in (("treat", "cure"), ("cure", "treat")):   # either order: one unordered pair
            got = _symmetric_scores(db, [pair], "general+dom")
            assert got[0] == pytest.approx(0.2 / 1.2, abs=1e-12)
        assert _symmetric_scores(db, [("treat", "cure")], "dom")[0] == 0.4
