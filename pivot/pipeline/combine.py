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
* The same bits on every CPU: the fit is statsmodels' Logit with its Newton iteration, on a
  subclass (:func:`portable_logit`) whose logistic cdf, log-likelihood, score and Hessian are
  computed with pivot.portable (exp and log from IEEE basic operations, sums by math.fsum, the
  design times the coefficients column by column) and whose Newton step and covariance solve
  their 3x3-4x4 systems by pivot.portable.solve, instead of numpy's exp/log loops (one per SIMD
  width) and BLAS/LAPACK (one kernel per CPU). With numpy's and BLAS' own, 49 of the 58
  coefficients, standard errors and log-likelihoods of the bio build's seven fits moved (by up
  to 87,000 ulp, relative 1e-11) between an AVX-512 Xeon's default loops and kernels and its
  AVX2 ones (NPY_DISABLE_CPU_FEATURES=X86_V4, OPENBLAS_CORETYPE=Haswell).
"""
from __future__ import annotations

import functools
import warnings

import numpy as np

from pivot import portable
from pivot.pipeline.stage import Stage
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
                result = portable_logit()(y, Xk).fit(
                    method=PORTABLE_NEWTON, maxiter=maxiter, disp=0,
                    extra_fit_funcs={PORTABLE_NEWTON: _fit_newton_portable}, cov_params_func=_inverse_hessian)
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
    model = portable_logit()(y, Xk)
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
        # the same portable score and Hessian as the MLE (see the module docstring)
        mu = portable.logistic(portable.dot(X, beta))
        grad = _score(X, y, mu) - alpha * beta
        hess = -_hessian(X, mu) + np.diag(alpha)
        step = portable.solve(hess + 1e-12 * np.eye(len(beta)), grad)
        beta = beta + step
        if np.max(np.abs(step)) < tol:
            return {"params": beta, "converged": True, "iterations": iteration + 1}
    return {"params": beta, "converged": False, "iterations": maxiter}


# ------------------------------------------------------------- the fit, the same on every CPU

#: The name the portable Newton iteration is registered under in statsmodels' fit.
PORTABLE_NEWTON = "newton-portable"


def _score(X, y, mu):
    """sum_i (y_i - mu_i) x_i: each column's products summed by math.fsum (correctly rounded)."""
    r = y - mu
    return np.array([portable.fsum(r * X[:, j]) for j in range(X.shape[1])])


def _hessian(X, mu):
    """-sum_i mu_i (1 - mu_i) x_i x_i^T, entry (j, k) = -fsum((w x_j) x_k) for j <= k, mirrored
    (exactly symmetric, as Newton's solve and the covariance expect)."""
    w = mu * (1.0 - mu)
    k = X.shape[1]
    H = np.zeros((k, k))
    for a in range(k):
        wa = w * X[:, a]
        for b in range(a, k):
            H[a, b] = H[b, a] = -portable.fsum(wa * X[:, b])
    return H


@functools.cache
def portable_logit():
    """statsmodels' Logit with the same bits on every CPU (a subclass, built on first use so that
    importing this module does not import statsmodels).

    Overrides what the Newton fit, its convergence check, llf and the standard errors evaluate:
    the linear predictor (pivot.portable.dot instead of np.dot), the cdf (pivot.portable.logistic
    instead of np.exp), loglike/loglikeobs (pivot.portable.log, math.fsum), score and hessian
    (math.fsum per entry instead of np.dot). ``predict`` with ``which`` other than "mean" and
    "linear" is statsmodels' own (not used by the combination).
    """
    import statsmodels.api as sm

    class PortableLogit(sm.Logit):
        def cdf(self, X):
            return portable.logistic(X)

        def pdf(self, X):
            e = portable.exp(-np.asarray(X, dtype=np.float64))
            return e / ((1.0 + e) * (1.0 + e))

        def predict(self, params, exog=None, which="mean", offset=None):
            if which not in ("mean", "linear"):
                return super().predict(params, exog=exog, which=which, offset=offset)
            if offset is None and exog is None and hasattr(self, "offset"):
                offset = self.offset
            linpred = portable.dot(self.exog if exog is None else exog, params)
            if offset is not None:
                linpred = linpred + offset
            return self.cdf(linpred) if which == "mean" else linpred

        def loglikeobs(self, params):
            q = 2 * self.endog - 1
            return portable.log(self.cdf(q * self.predict(params, which="linear")))

        def loglike(self, params):
            return portable.fsum(self.loglikeobs(params))

        def score(self, params):
            return _score(self.exog, self.endog, self.predict(params))

        def hessian(self, params):
            return _hessian(self.exog, self.predict(params))

    return PortableLogit


def _fit_newton_portable(f, score, start_params, fargs, kwargs, disp=True, maxiter=100, callback=None,
                         retall=False, full_output=True, hess=None, ridge_factor=1e-10):
    """statsmodels.base.optimizer._fit_newton (0.14-0.15) step for step, its np.linalg.solve
    replaced by pivot.portable.solve: the same ridge of 1e-10 on the Hessian's diagonal, the same
    stopping rule (every |change| <= tol, 1e-8 by default), the same retvals."""
    tol = kwargs.setdefault("tol", 1e-8)
    ridge_factor = kwargs.setdefault("ridge_factor", ridge_factor)
    iterations = 0
    oldparams = np.inf
    newparams = np.asarray(start_params, dtype=np.float64)
    history = [oldparams, newparams]
    while iterations < maxiter and np.any(np.abs(newparams - oldparams) > tol):
        H = np.array(hess(newparams), dtype=np.float64)
        if ridge_factor != 0:
            H[np.diag_indices(H.shape[0])] += ridge_factor
        oldparams = newparams
        newparams = oldparams - portable.solve(H, score(oldparams))
        history.append(newparams)
        if callback is not None:
            callback(newparams)
        iterations += 1
    warnflag = int(iterations == maxiter)
    if not full_output:
        return newparams, None
    retvals = {"fopt": f(newparams, *fargs), "iterations": iterations, "score": score(newparams),
               "Hessian": hess(newparams), "warnflag": warnflag, "converged": not warnflag}
    if retall:
        retvals["allvecs"] = history
    return newparams, retvals


def _inverse_hessian(model, xopt, retvals):
    """The normalized covariance statsmodels' fit takes after Newton, inv(Hessian) / nobs, where
    the Hessian is that of -loglike / nobs: by pivot.portable.inv instead of LAPACK."""
    return portable.inv(retvals["Hessian"]) / model.endog.shape[0]


# ------------------------------------------------------------------------------ the stage


def stage_params(recipe) -> dict:
    # a phrase's key hashes its token ids padded to extract's width: the gold phrases' need it
    return {**recipe["combine"], "max_phrase_len": recipe["extract"]["max_phrase_len"]}


def stage_data(params, data_root) -> list:
    from pivot.recipes import DATA_ENV
    from pivot.errors import InputError

    gold_files = [data_root / g for g in params["gold"]]
    for g in gold_files:
        if not g.is_file():
            raise InputError(f"gold file missing; the data root is set by --data DIR or {DATA_ENV}", g)
    return gold_files


def run_stage(context) -> None:
    """For every domain model X, a logistic regression over (p_general, p_X) fitted on the
    tuning part of the labelled in-domain pairs; scores every pair General proposes."""
    import json
    import logging

    from pivot.errors import InputError
    from pivot.eval import gold
    from pivot.pipeline import pivoting
    from pivot.pipeline.weights import read_models
    from pivot.store.combined import symmetric_p

    comb, models = context.params, read_models(context.dir("weights"))
    pairs = [p for g in comb["gold"] for p in gold.read_gold(context.data_root / g, comb["format"])]
    labelled = gold.binarize(pairs, comb["threshold"])
    tune, test = gold.tuning_test_split(labelled, n_tune=comb["n_tune"], seed=comb["seed"])
    ids = phrase_ids(context.dir("encode"), context.dir("translation"), [t for p in tune for t in p[:2]],
                     comb["max_phrase_len"])
    fwd, rev = directed_scores(pivoting.Paraphrases.iter_parts(context.dir("pivot")),
                               [(ids.get(a), ids.get(b)) for a, b, _ in tune])
    labels = np.array([p[2] for p in tune], dtype=np.float64)
    # The paper's candidates: pairs General extracted (either direction: gold pairs are unordered).
    candidate = ~np.isnan(symmetric_p(fwd[:, 0], rev[:, 0]))
    n_candidates, n_good = int(candidate.sum()), int(labels[candidate].sum())
    if n_good in (0, n_candidates):
        # Preflight checked the tuning pairs hold both classes; which of them the bitext made
        # pairs of only the built table says.
        raise InputError(
            f"[combine]: {n_candidates} of the {len(tune)} tuning pairs are pairs of the General model, "
            f"{n_good} of them good: fitting the combination needs good and bad pairs among them; "
            "add gold pairs whose phrases the bitext holds, or build without [combine]", context.recipe_file)
    g_f, g_r = fwd[candidate, 0], rev[candidate, 0]
    fitted = {}
    for k, model in enumerate(models[1:], start=1):
        # The evaluation scores a combination with the same unordered features.
        c = fit_combination_unordered(g_f, g_r, fwd[candidate, k], rev[candidate, k], labels[candidate])
        fitted[f"general+{model['name']}"] = c.to_meta()
        logging.getLogger("pivot").info("general+%s: %s", model["name"],
                                        json.dumps(fitted[f"general+{model['name']}"], default=str)[:400])
    (context.tmp / "combination.json").write_text(json.dumps({
        "gold": comb["gold"], "format": comb["format"], "threshold": comb["threshold"],
        "n_tune_requested": comb["n_tune"], "seed": comb["seed"],
        "n_gold": len(labelled), "n_tuning": len(tune), "n_test": len(test),
        "n_tuning_candidates": int(candidate.sum()),
        "n_tuning_candidates_positive": int(labels[candidate].sum()),
        "tuning_pairs": [[a, b, int(y)] for a, b, y in tune],
        "test_pairs": [[a, b, int(y)] for a, b, y in test],
        "models": fitted,
    }, indent=1, default=str))


def phrase_ids(encode_dir, translation_dir, texts, width: int) -> dict[str, int]:
    """English phrase id of each normalised text that the paraphrase table holds (``width``:
    extract's max_phrase_len, to which a phrase's token ids are padded before they are hashed)."""
    from pivot.pipeline.corpus import Vocab
    from pivot.pipeline.extract import phrase_keys
    from pivot.pipeline.translation import phrase_keys as table_keys
    from pivot.text import normalize_many

    vocab = Vocab.load(encode_dir / "vocab.en")
    table = table_keys(translation_dir)
    texts = list(dict.fromkeys(texts))
    found, rows = [], []
    for text, norm in zip(texts, normalize_many(texts, "en")):
        toks = norm.split()
        if 0 < len(toks) <= width and all(t in vocab for t in toks):
            found.append(text)
            rows.append([vocab[t] for t in toks] + [-1] * (width - len(toks)))
    if not found:
        return {}
    keys = phrase_keys(np.array(rows, dtype=np.int32))
    pos = np.minimum(np.searchsorted(table, keys), max(len(table) - 1, 0))
    hit = (table[pos] == keys) if len(table) else np.zeros(len(keys), bool)
    return {t: int(i) for t, i, h in zip(found, pos.tolist(), hit.tolist()) if h}


def directed_scores(para, id_pairs) -> tuple[np.ndarray, np.ndarray]:
    """(p(b|a), p(a|b)) per model for each pair (a, b) of phrase ids: two (n, K) arrays, 0 where
    the table lacks that direction or an id is None.

    Gold similarity pairs are unordered: the combination is fitted on both directions
    (pivot.pipeline.combine.fit_combination_unordered), as the evaluation scores it
    (pivot.store.combined.unordered_score). ``para`` is the table or an iterable of its row
    ranges (a pair lies in the one range that holds its first phrase).
    """
    from pivot.store.db import find_pairs

    a = np.array([-1 if x is None or y is None else x for x, y in id_pairs], dtype=np.int64)
    b = np.array([-1 if x is None or y is None else y for x, y in id_pairs], dtype=np.int64)
    fwd = rev = None
    for part in ([para] if hasattr(para, "e1") else para):
        if fwd is None:
            fwd, rev = np.zeros((len(id_pairs), part.p.shape[1])), np.zeros((len(id_pairs), part.p.shape[1]))
        for out, row in ((fwd, find_pairs(part.e1, part.e2, a, b)), (rev, find_pairs(part.e1, part.e2, b, a))):
            found = row >= 0
            out[found] = part.p[row[found]]
    return fwd, rev


def stage_check(recipe, data_root, plan) -> list:
    """Preflight of the tuning gold: its files parse and hold pairs, the tuning part both
    classes (checked whenever the recipe names them, with domain models or without)."""
    from pivot.errors import InputError
    from pivot.eval.gold import check_gold
    from pivot.recipes import DATA_ENV

    comb = recipe.get("combine")
    if not comb:
        return []
    files = [data_root / g for g in comb["gold"]]
    for g in files:
        if not g.is_file():
            raise InputError(f"[combine] gold file missing; the data root is set by --data DIR or {DATA_ENV}", g)
        plan.add_input(g, "gold")
    tuning = comb if recipe.get("domain") else None    # the combination is fitted only with domain models
    return [lambda: plan.count("gold pairs", check_gold(files, comb["format"], "[combine] gold", tuning))]


STAGE = Stage("combine", 3, ("pivot", "encode", "translation", "weights"), ("combine", "extract.max_phrase_len"), stage_params,
              ("combination.json",), run_stage, "one", "logistic regression of General + each domain model",
              data=stage_data, when=lambda recipe: recipe.get("combine") and recipe.get("domain"), check=stage_check)
