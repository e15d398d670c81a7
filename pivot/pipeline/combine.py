"""General + X: a binary logistic regression over the general and a domain model's p(e2|e1).

The paper combines the p(e2|e1) of the General model with that of each domain model X by binary
logistic regression fitted on 1,000 labelled in-domain pairs. Features of a pair (e1, e2):

    x = [1, log p_general(e2|e1), log p_X(e2|e1), x_missing]
    P(good | x) = 1 / (1 + exp(-beta . x))

* Natural logs (PPDB's -logp scores are natural logs too).
* A pair that model X never extracted (p_X = 0 or missing, common for the subsampled models,
  which see a fraction of the bitext) gets log p_X = log(1e-10) = FLOOR_LOG_P and
  x_missing = 1, so the fit learns its own offset for "X has no opinion" instead of treating
  the floor as a real, tiny probability. The same floor and indicator serve p_general (every
  candidate is extracted by General in the paper's setup, so its indicator is usually all 0
  and is then dropped, see below).
* A feature column that is constant over the tuning pairs (e.g. x_missing when X extracted
  every tuning pair) makes the design singular; it is dropped before fitting and recorded in
  ``dropped`` (its coefficient is 0 in predictions).
* Perfect or quasi-perfect separation, or a fit that does not converge, is never silent: the
  fit falls back to an L2-penalised logit (Newton's method on
  log-likelihood - 1/2 * ridge_alpha * n * sum_j beta_j^2, constant not penalised) and records ``method = "l2-fallback"`` and the
  reason in the meta; standard errors are then not available (None).
"""
from __future__ import annotations

import warnings

import numpy as np

from pivot.store.combined import FEATURE_NAMES, Combination, features, unordered_features


def fit_combination(p_general, p_x, labels, ridge_alpha=1e-3, maxiter=100):
    """Fit P(good | pair) on labelled pairs (labels 0/1) with statsmodels Logit.

    p_general, p_x: one probability per pair and model. For unordered gold pairs these must be
    each model's better direction, pivot.store.combined.symmetric_p, which is what the
    evaluation scores with (pivot.store.combined.unordered_score); prefer
    :func:`fit_combination_unordered`, which takes both directions and cannot get this wrong.

    Constant feature columns are dropped; separation, a singular design or non-convergence
    switch to the recorded L2 fallback (see the module docstring). Raises ValueError when the
    labels hold one class only (no regression can be fitted then).
    """
    return _fit_design(features(p_general, p_x), labels, ridge_alpha, maxiter)


def fit_combination_unordered(p_general_fwd, p_general_rev, p_x_fwd, p_x_rev, labels,
                              ridge_alpha=1e-3, maxiter=100):
    """fit_combination on unordered pairs, from both directions of both models.

    The features are pivot.store.combined.unordered_features, the same function that
    unordered_score (the evaluation's score of a combined model) applies the fit with.
    """
    X = unordered_features(p_general_fwd, p_general_rev, p_x_fwd, p_x_rev)
    return _fit_design(X, labels, ridge_alpha, maxiter)


def _fit_design(X, labels, ridge_alpha, maxiter):
    """The logit (or its recorded L2 fallback) on a design matrix over FEATURE_NAMES."""
    import statsmodels.api as sm
    from statsmodels.tools.sm_exceptions import (ConvergenceWarning, PerfectSeparationError,
                                                 PerfectSeparationWarning)

    y = np.asarray(labels, dtype=np.float64)
    if y.shape != (X.shape[0],) or not np.all((y == 0) | (y == 1)):
        raise ValueError("labels must be a 0/1 vector with one label per pair")
    n_pos = int(y.sum())
    if n_pos == 0 or n_pos == len(y):
        raise ValueError(f"labels hold one class only ({n_pos} positive of {len(y)}): "
                         "a logistic regression needs both good and bad pairs")
    # keep the constant and every non-constant column
    keep = [0] + [j for j in range(1, X.shape[1]) if np.ptp(X[:, j]) > 0]
    dropped = [FEATURE_NAMES[j] for j in range(X.shape[1]) if j not in keep]
    Xk = X[:, keep]

    reason = None
    result = None
    if np.linalg.matrix_rank(Xk) < Xk.shape[1]:
        reason = "singular design (collinear features)"
    else:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                result = sm.Logit(y, Xk).fit(method="newton", maxiter=maxiter, disp=0)
            except (PerfectSeparationError, np.linalg.LinAlgError) as exc:
                reason = f"{type(exc).__name__}: {exc}"
        for w in caught:
            if issubclass(w.category, (PerfectSeparationWarning, ConvergenceWarning)):
                reason = f"{w.category.__name__}: {w.message}"
        if result is not None and reason is None:
            converged = bool(result.mle_retvals.get("converged", False))
            bse = np.asarray(result.bse)
            if not converged:
                reason = "maximum likelihood did not converge"
            elif not np.all(np.isfinite(bse)):
                reason = "non-finite standard errors (quasi-separation)"
    params = np.zeros(X.shape[1])
    if reason is None:
        params[keep] = result.params
        bse_full = [None] * X.shape[1]
        for j, b in zip(keep, np.asarray(result.bse)):
            bse_full[j] = float(b)
        return Combination(params=params, bse=bse_full, converged=True, n=len(y),
                           llf=float(result.llf), method="mle", dropped=dropped, n_positive=n_pos)
    # L2 fallback: penalise every coefficient but the constant
    alpha = np.full(Xk.shape[1], ridge_alpha * len(y))
    alpha[0] = 0.0
    # statsmodels' Logit.fit_regularized offers L1 only and GLM's elastic net reports no
    # convergence; the penalised Newton below is exact and says whether it converged.
    model = sm.Logit(y, Xk)
    fit = _ridge_logit(Xk, y, alpha, maxiter=maxiter)
    params[keep] = fit["params"]
    llf = float(model.loglike(fit["params"]))
    return Combination(params=params, bse=None, converged=fit["converged"], n=len(y), llf=llf,
                       method="l2-fallback", dropped=dropped,
                       reason=f"{reason}; refitted with an L2 penalty alpha={ridge_alpha} per "
                              "observation on the non-constant coefficients",
                       n_positive=n_pos)


def _ridge_logit(X, y, alpha, maxiter=100, tol=1e-10):
    """Newton's method for max  sum log-likelihood - 1/2 sum alpha_j beta_j^2  (strictly concave
    for alpha_j > 0 on every non-constant column, so it converges even under separation)."""
    beta = np.zeros(X.shape[1])
    for iteration in range(maxiter):
        eta = X @ beta
        mu = 1.0 / (1.0 + np.exp(-eta))
        grad = X.T @ (y - mu) - alpha * beta
        hess = (X * (mu * (1 - mu))[:, None]).T @ X + np.diag(alpha)
        step = np.linalg.solve(hess + 1e-12 * np.eye(len(beta)), grad)
        beta = beta + step
        if np.max(np.abs(step)) < tol:
            return {"params": beta, "converged": True, "iterations": iteration + 1}
    return {"params": beta, "converged": False, "iterations": maxiter}
