"""A fitted General + X combination, as the database stores and applies it.

The fit lives in ``pivot.pipeline.combine``; this is the read side (features and prediction),
so a lookup of a combined model needs no pipeline code:

    x = [1, log p_general(e2|e1), log p_X(e2|e1), x_missing]
    P(good | x) = 1 / (1 + exp(-beta . x))      (natural logs; p = 0 -> log 1e-10, x_missing = 1)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

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
    log_g = np.where(missing_g, FLOOR_LOG_P, np.log(np.where(missing_g, 1.0, p_general)))
    log_x = np.where(missing_x, FLOOR_LOG_P, np.log(np.where(missing_x, 1.0, p_x)))
    return np.column_stack([np.ones(len(p_x)), log_g, log_x, missing_x.astype(np.float64)])


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
        eta = features(p_general, p_x) @ self.params
        return 1.0 / (1.0 + np.exp(-eta))

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
