"""General + X logistic combination: exact predictions, coefficient recovery, fallbacks."""
import json
import math

import numpy as np
import pytest

from pivot.pipeline.combine import fit_combination
from pivot.store.combined import FLOOR_LOG_P, Combination, features


def test_features_by_hand():
    X = features([math.exp(-1), 0.5], [math.exp(-2), 0.0])
    assert X[0].tolist() == pytest.approx([1, -1, -2, 0])
    assert X[1].tolist() == pytest.approx([1, math.log(0.5), math.log(1e-10), 1])
    assert FLOOR_LOG_P == pytest.approx(-23.025850929940457)
    with pytest.raises(ValueError):
        features([2.0], [0.5])                    # not a probability


def test_predict_exact():
    c = Combination(params=np.array([1.0, 2.0, 0.5, -1.0]), bse=None, converged=True, n=0,
                    llf=0.0)
    # eta = 1 + 2*(-1) + 0.5*(-2) + 0 = -2        -> 1 / (1 + e^2)
    # eta = 1 + 2*(-1) + 0.5*ln(1e-10) - 1 = -2 - 11.512925... = -13.512925...
    p = c.predict([math.exp(-1), math.exp(-1)], [math.exp(-2), 0.0])
    assert p[0] == pytest.approx(1 / (1 + math.exp(2)), rel=1e-12)
    assert p[1] == pytest.approx(1 / (1 + math.exp(13.512925464970229)), rel=1e-9)


def _synthetic(n=20000, seed=7):
    rng = np.random.default_rng(seed)
    log_g = rng.uniform(-4, 0, n)
    log_x = rng.uniform(-4, 0, n)
    missing = rng.random(n) < 0.3
    p_x = np.where(missing, 0.0, np.exp(log_x))
    # eta = 2 + 0.8 log p_g + 0.6 log p_x (+ 14 - 0.6 * 23.03 = +0.18 for a missing p_x):
    # about 40% positives
    true = np.array([2.0, 0.8, 0.6, 14.0])
    X = features(np.exp(log_g), p_x)
    y = (rng.random(n) < 1 / (1 + np.exp(-(X @ true)))).astype(float)
    return np.exp(log_g), p_x, y, true


def test_recovers_known_coefficients():
    p_g, p_x, y, true = _synthetic()
    c = fit_combination(p_g, p_x, y)
    assert c.method == "mle" and c.converged and c.n == 20000 and c.dropped == []
    bse = np.array(c.bse)
    assert np.all(np.abs(c.params - true) < 3 * bse), (c.params, bse)
    # x_missing's coefficient is the missing group's offset MINUS 0.6 * log(1e-10): its
    # standard error is ~23x that of log_p_x, so 0.1 absolute is checked on the identified
    # quantity, the offset of a missing p_x: beta_3 + beta_2 * log(1e-10).
    assert np.all(np.abs(c.params[:3] - true[:3]) < 0.1)
    offset = c.params[3] + c.params[2] * FLOOR_LOG_P
    assert abs(offset - (true[3] + true[2] * FLOOR_LOG_P)) < 0.1
    meta = json.loads(json.dumps(c.to_meta()))
    assert meta["converged"] is True and set(meta["bse"]) == set(meta["params"])
    again = Combination.from_meta(meta)
    np.testing.assert_allclose(again.predict(p_g[:5], p_x[:5]), c.predict(p_g[:5], p_x[:5]))


def test_constant_column_is_dropped_and_recorded():
    p_g, p_x, y, _ = _synthetic(n=3000)
    p_x = np.where(p_x == 0, 0.01, p_x)           # X extracted every pair: x_missing all 0
    c = fit_combination(p_g, p_x, y)
    assert c.dropped == ["x_missing"] and c.params[3] == 0.0 and c.bse[3] is None


def test_separation_falls_back_and_says_so():
    p_g = np.linspace(0.01, 0.9, 200)
    p_x = np.linspace(0.9, 0.01, 200)
    y = (p_x > 0.5).astype(float)                # perfectly separated by log p_x
    c = fit_combination(p_g, p_x, y)
    assert c.method == "l2-fallback" and c.bse is None and c.converged
    assert "L2" in c.reason
    meta = c.to_meta()
    assert meta["method"] == "l2-fallback" and meta["reason"]
    pred = c.predict(p_g, p_x)
    assert np.all(pred[y == 1] > 0.5) and np.all(pred[y == 0] < 0.5)


def test_one_class_is_an_error():
    with pytest.raises(ValueError, match="one class"):
        fit_combination([0.1, 0.2], [0.1, 0.2], [1, 1])
    with pytest.raises(ValueError, match="0/1"):
        fit_combination([0.1, 0.2], [0.1, 0.2], [1, 2])


def test_portable_logit_is_statsmodels_logit():
    """The CPU-independent fit (pivot.pipeline.combine.portable_logit, its portable Newton and
    covariance) is statsmodels' maximum-likelihood logit: the same coefficients, standard errors
    and log-likelihood as sm.Logit's own Newton fit to 1e-9 (they differ only in rounding)."""
    import statsmodels.api as sm

    p_g, p_x, y, _ = _synthetic(n=3000, seed=5)
    X = features(p_g, p_x)
    ours = fit_combination(p_g, p_x, y)
    theirs = sm.Logit(y, X).fit(method="newton", disp=0)
    assert ours.method == "mle"
    np.testing.assert_allclose(ours.params, theirs.params, rtol=1e-9)
    np.testing.assert_allclose(ours.bse, theirs.bse, rtol=1e-9)
    assert ours.llf == pytest.approx(theirs.llf, rel=1e-12)
