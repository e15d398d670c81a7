"""A fitted General + X combination, as the database stores and applies it.

The fit lives in ``pivot.pipeline.combine``; this is the read side (features and prediction),
so a lookup of a combined model needs no pipeline code:

    x = [1, log p_general(e2|e1), log p_X(e2|e1), x_missing]
    P(good | x) = 1 / (1 + exp(-beta . x))      (natural logs; p = 0 -> log 1e-10, x_missing = 1)

Unordered pairs (gold similarity pairs have no direction). The regression is fitted on one
probability per model and pair, each model's better direction:

    p_M(a, b) = max(p_M(b|a), p_M(a|b))                                  (symmetric_p)
    score(a, b) = P(good | [1, log p_general(a, b), log p_X(a, b), x_missing])   (unordered_score)

and :func:`unordered_score` is the one function that turns directed probabilities into the
score of an unordered pair, for the fit's features (pivot.pipeline.combine) and for the
evaluation alike. Taking instead the maximum over directions of the *combined* prediction,
max(P(good | x(b|a)), P(good | x(a|b))), mixes General's better direction with X's other
one whenever they disagree, and scores pairs on features the fit never saw.

The logs, the product x . beta and the logistic are pivot.portable's (IEEE basic operations in a
fixed order), not numpy's log/exp loops and BLAS, which round differently on different CPUs: a
combined model's scores, and so the order of its exported pairs, are the same bits on every
machine that fits or reads it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from pivot import portable

FLOOR_P = 1e-10
FLOOR_LOG_P = math.log(FLOOR_P)      # -23.0259
FEATURE_NAMES = ("const", "log_p_general", "log_p_x", "x_missing")


def features(p_general, p_x):
    """The design matrix [1, log p_general, log p_X, x_missing] (float64, shape (n, 4)).

    p <= 0 or NaN means "not extracted": log p = log(1e-10) and, for X, x_missing = 1.
    """
    p_general = np.asarray(p_general, dtype=np.float64)
    p_x = np.asarray(p_x, dtype=np.float64)
    if p_general.shape != p_x.shape or p_general.ndim != 1:
        raise ValueError(f"p_general {p_general.shape} and p_x {p_x.shape} must be equal 1-d")
    if np.any(p_general > 1 + 1e-9) or np.any(p_x > 1 + 1e-9):
        raise ValueError("probabilities above 1: pass p(e2|e1), not scores or log probabilities")
    missing_g = ~(p_general > 0)             # True for 0 and NaN
    missing_x = ~(p_x > 0)
    log_g = np.where(missing_g, FLOOR_LOG_P, portable.log(np.where(missing_g, 1.0, p_general)))
    log_x = np.where(missing_x, FLOOR_LOG_P, portable.log(np.where(missing_x, 1.0, p_x)))
    return np.column_stack([np.ones(len(p_x)), log_g, log_x, missing_x.astype(np.float64)])


def symmetric_p(p_fwd, p_rev):
    """max(p(e2|e1), p(e1|e2)) per pair: a model's probability of an unordered pair.

    0 or NaN means "that direction is not proposed"; the result is NaN when neither is
    (never 0, so "not proposed" stays distinguishable from a tiny probability).
    """
    f = np.asarray(p_fwd, dtype=np.float64)
    r = np.asarray(p_rev, dtype=np.float64)
    if f.shape != r.shape:
        raise ValueError(f"p_fwd {f.shape} and p_rev {r.shape} differ in shape")
    with np.errstate(invalid="ignore"):
        f = np.where(f > 0, f, np.nan)
        r = np.where(r > 0, r, np.nan)
    return np.fmax(f, r)  # fmax ignores a NaN side; NaN only when both are


def unordered_features(p_general_fwd, p_general_rev, p_x_fwd, p_x_rev):
    """The design matrix of unordered pairs: features(symmetric_p(General), symmetric_p(X)).

    The fit (pivot.pipeline.combine.fit_combination_unordered) and every score of an unordered
    pair (:func:`unordered_score`) build their features here, so they cannot disagree.
    """
    g = np.nan_to_num(symmetric_p(p_general_fwd, p_general_rev))  # NaN -> 0 -> floor
    x = np.nan_to_num(symmetric_p(p_x_fwd, p_x_rev))              # NaN -> 0 -> floor, x_missing = 1
    return features(g, x)


def unordered_score(fit, p_general_fwd, p_general_rev, p_x_fwd, p_x_rev):
    """Score of unordered pairs under a General + X combination, with the fit's own features.

    = 1 / (1 + exp(-unordered_features(...) . params)), NaN where General proposes neither
    direction (a combination ranks General's pairs only: its tuning candidates were those).
    """
    general_missing = np.isnan(symmetric_p(p_general_fwd, p_general_rev))
    eta = portable.dot(unordered_features(p_general_fwd, p_general_rev, p_x_fwd, p_x_rev), fit.params)
    out = portable.logistic(eta)
    out[general_missing] = np.nan
    return out


@dataclass
class Combination:
    """A fitted General + X combination. ``params``/``bse`` are over all FEATURE_NAMES;
    a dropped column has param 0 and bse None. ``bse`` is None for the L2 fallback."""
    params: np.ndarray
    bse: list | None
    converged: bool
    n: int
    llf: float
    names: tuple = FEATURE_NAMES
    method: str = "mle"
    dropped: list = field(default_factory=list)
    reason: str | None = None
    n_positive: int = 0

    def predict(self, p_general, p_x):
        """P(good) = 1 / (1 + exp(-x . params)) for each pair."""
        return portable.logistic(portable.dot(features(p_general, p_x), self.params))

    def to_meta(self):
        """JSON-able description: coefficients, standard errors, convergence, how it was fit."""
        return {
            "model": "logit", "method": self.method, "features": list(self.names),
            "params": {k: float(v) for k, v in zip(self.names, self.params)},
            "bse": None if self.bse is None else dict(zip(self.names, self.bse)),
            "converged": bool(self.converged), "n": int(self.n),
            "n_positive": int(self.n_positive), "llf": float(self.llf),
            "dropped": list(self.dropped), "reason": self.reason,
            "floor_p": FLOOR_P,
        }

    @classmethod
    def from_meta(cls, meta):
        names = tuple(meta["features"])
        bse = meta["bse"]
        return cls(params=np.array([meta["params"][k] for k in names]),
                   bse=None if bse is None else [bse[k] for k in names],
                   converged=meta["converged"], n=meta["n"], llf=meta["llf"], names=names,
                   method=meta["method"], dropped=list(meta["dropped"]), reason=meta["reason"],
                   n_positive=meta.get("n_positive", 0))
