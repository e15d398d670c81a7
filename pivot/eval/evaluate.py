"""Evaluation: precision/recall of a model's ranking of gold paraphrase pairs (paper §4, Table 3).

The protocol (the paper's §4): the *candidates* are the gold pairs the General model
extracts; every model ranks all candidates by its score, a candidate the model did not extract
ranking last; the result is a precision-recall curve and its area. The headline number is
average precision (AP, the step-wise area under the PR curve, ×100 like the paper's "AUC"); the
trapezoid area is reported beside it, labelled as such. Intervals come from a seeded bootstrap
over candidates; differences to General from a *paired* bootstrap (the same resamples for both).

Conventions, each tested in tests/test_evaluate.py:

* **Ties.** Candidates with equal scores form one threshold (they enter the ranking together),
  as in scikit-learn's ``precision_recall_curve``/``average_precision_score``: the result does not
  depend on the order of tied items.
* **Missing scores.** NaN means "the model does not propose this pair". Missing candidates rank
  below every real score and tie among themselves, i.e. they form one last threshold. So every
  candidate is ranked and the curve always ends at recall 1.
* **AP** = Σ_k (R_k − R_{k−1}) · P_k over the thresholds k (R_0 = 0): for untied scores, the mean
  of the precision at the rank of each positive.
* **Trapezoid** area joins the PR points in threshold order by straight lines, starting at
  (recall 0, precision of the first threshold). scikit-learn's ``auc(recall, precision)`` starts at
  (0, 1) instead; the two agree whenever the top threshold holds only positives.
* **Precision at recall r** is interpolated: the highest precision at any threshold whose recall
  is ≥ r (compared with a 1e-9 slack, so 3/10 counts as reaching 0.3).

Golden check (STYLE.md): labels [0,0,1,1], scores [0.1,0.4,0.35,0.8] → AP 0.8333, trapezoid 0.7917.
"""
from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pivot import outputs
from pivot.errors import InputError

#: recall levels of `precision_at_recall` (exact decimal literals: no arange drift).
RECALL_LEVELS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
#: two-sided 95% normal quantile, for the Wilson interval.
Z95 = 1.959963984540054
_RECALL_SLACK = 1e-9
# Bootstrap resamples are processed in blocks of about this many (resample × candidate) cells.
_BLOCK_CELLS = 1_000_000

# ------------------------------------------------------------------------------ ranking core


@dataclass(frozen=True)
class _Ranking:
    """Candidates sorted best first, and where each threshold (group of tied scores) ends."""

    order: np.ndarray       # candidate indices, best first (missing last)
    y_sorted: np.ndarray    # labels in that order (int64 0/1)
    ends: np.ndarray        # index (in sorted order) of the last candidate of each threshold
    thresholds: np.ndarray  # the score of each threshold, NaN for the missing group


def _validate(labels, scores) -> tuple[np.ndarray, np.ndarray]:
    """labels as int64 0/1 and scores as float64; ValueError saying what is wrong."""
    y = np.asarray(labels)
    s = np.asarray(scores, dtype=np.float64)
    if y.ndim != 1 or s.ndim != 1:
        raise ValueError(f"labels and scores must be 1-d (got shapes {y.shape} and {s.shape})")
    if len(y) != len(s):
        raise ValueError(f"labels ({len(y)}) and scores ({len(s)}) differ in length")
    if len(y) == 0:
        raise ValueError("no candidates: precision and recall are undefined on an empty set")
    if y.dtype == bool:
        y = y.astype(np.int64)
    bad = ~np.isin(y, (0, 1))
    if bad.any():
        raise ValueError(f"labels must be 0 or 1; got {y[bad][0]!r} at position {int(np.flatnonzero(bad)[0])}")
    y = y.astype(np.int64)
    if np.isinf(s).any():
        raise ValueError("scores hold ±inf; use NaN for a pair the model does not propose")
    if y.sum() == 0:
        raise ValueError(f"no positive labels among the {len(y)} candidates: recall and AP are undefined")
    if np.isnan(s).all():
        raise ValueError(
            f"every one of the {len(s)} scores is missing (NaN): the model proposes none of the "
            "candidates, so its ranking is arbitrary and AP would only be the positive rate")
    return y, s


def _rank(labels, scores) -> _Ranking:
    y, s = _validate(labels, scores)
    missing = np.isnan(s)
    key = np.where(missing, 0.0, s)
    # lexsort: last key is primary. Present before missing, then score descending; a stable
    # sort keeps input order inside a tie, which the grouping below makes irrelevant.
    order = np.lexsort((-key, missing))
    k_sorted, m_sorted = key[order], missing[order]
    change = (k_sorted[1:] != k_sorted[:-1]) | (m_sorted[1:] != m_sorted[:-1])
    ends = np.r_[np.flatnonzero(change), len(order) - 1]
    thresholds = np.where(m_sorted[ends], np.nan, k_sorted[ends])
    return _Ranking(order, y[order], ends, thresholds)


def _curves(rk: _Ranking, weights: np.ndarray):
    """Per resample (rows of `weights`, in sorted order): TP, and TP+FP at each threshold.

    A weight w_i is how many times candidate i was drawn (1 for the plain estimate), so
    a resample's duplicates tie with each other exactly as they would in a resampled list.
    """
    tp = np.cumsum(weights * rk.y_sorted, axis=1)[:, rk.ends]
    n_pred = np.cumsum(weights, axis=1)[:, rk.ends]
    return tp, n_pred


def _ap_rows(rk: _Ranking, weights: np.ndarray) -> np.ndarray:
    """AP = Σ_k (R_k − R_{k−1}) P_k per row of weights; NaN for a row without positives."""
    tp, n_pred = _curves(rk, weights)
    precision = np.divide(tp, n_pred, out=np.zeros(tp.shape), where=n_pred > 0)
    d_tp = np.diff(tp, axis=1, prepend=0)  # = n_pos · (R_k − R_{k−1})
    n_pos = tp[:, -1].astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n_pos > 0, (d_tp * precision).sum(axis=1) / n_pos, np.nan)


# ------------------------------------------------------------------------------ metrics


def pr_curve(labels, scores) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(precision, recall, thresholds): one point per distinct score, best threshold first.

    Unlike scikit-learn the arrays run from the highest threshold down (recall non-decreasing)
    and no artificial (recall 0, precision 1) point is appended. The missing-score group, if
    any, is the last point, with threshold NaN; the last recall is always 1.

    >>> p, r, t = pr_curve([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
    >>> p.round(4).tolist(), r.tolist(), t.tolist()
    ([1.0, 0.5, 0.6667, 0.5], [0.5, 0.5, 1.0, 1.0], [0.8, 0.4, 0.35, 0.1])
    """
    rk = _rank(labels, scores)
    tp, n_pred = _curves(rk, np.ones((1, len(rk.order)), dtype=np.int64))
    tp, n_pred = tp[0], n_pred[0]
    return tp / n_pred, tp / tp[-1], rk.thresholds


def average_precision(labels, scores) -> float:
    """Step-wise area under the PR curve: Σ_k (R_k − R_{k−1}) P_k (as sklearn's average_precision_score).

    >>> round(average_precision([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]), 4)
    0.8333
    """
    rk = _rank(labels, scores)
    return float(_ap_rows(rk, np.ones((1, len(rk.order)), dtype=np.int64))[0])


def trapezoid_auc(labels, scores) -> float:
    """Trapezoid area under the PR curve, from (recall 0, precision of the first threshold).

    Points in threshold order, straight lines between them (see the module docstring).
    Golden case: points (0, 1), (.5, 1), (.5, .5), (1, 2/3), (1, .5):
    area = .5·(1+1)/2 + 0 + .5·(.5+2/3)/2 + 0 = .5 + .29167 = .79167.

    >>> round(trapezoid_auc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]), 4)
    0.7917
    """
    precision, recall, _ = pr_curve(labels, scores)
    r = np.r_[0.0, recall]
    p = np.r_[precision[0], precision]
    return float(np.sum(np.diff(r) * (p[1:] + p[:-1]) / 2))


def precision_at_recall(labels, scores, levels=RECALL_LEVELS) -> np.ndarray:
    """Interpolated precision: for each level r, the highest precision at any recall ≥ r.

    >>> precision_at_recall([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8], (0.5, 0.6, 1.0)).round(4).tolist()
    [1.0, 0.6667, 0.6667]
    """
    precision, recall, _ = pr_curve(labels, scores)
    levels = np.asarray(levels, dtype=np.float64)
    if ((levels < 0) | (levels > 1)).any():
        raise ValueError(f"recall levels must lie in [0, 1]; got {levels.tolist()}")
    # Running maximum from the right: best precision at recall ≥ recall[k].
    best_from = np.maximum.accumulate(precision[::-1])[::-1]
    first = np.searchsorted(recall, levels - _RECALL_SLACK, side="left")
    return best_from[first]  # recall[-1] = 1, so `first` is always a valid index


def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of the proportion k/n (95% by default).

    centre = (p̂ + z²/2n) / (1 + z²/n), half-width = z/(1 + z²/n) · √(p̂(1−p̂)/n + z²/4n²).
    """
    if n <= 0 or not 0 <= k <= n:
        raise ValueError(f"Wilson interval needs 0 <= k <= n and n > 0 (got k={k}, n={n})")
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


# ------------------------------------------------------------------------------ bootstrap


def bootstrap_replicates(labels, scores, n_boot: int = 1000, seed: int = 0) -> np.ndarray:
    """AP of `n_boot` resamples of the candidates (drawn with replacement, seeded).

    The resamples depend only on (number of candidates, n_boot, seed), so two models scored
    on the same candidates get the *same* resamples: their replicates are paired.
    A resample that draws no positive has no AP and gives NaN.
    """
    if n_boot < 1:
        raise ValueError(f"n_boot must be at least 1 (got {n_boot})")
    rk = _rank(labels, scores)
    n = len(rk.order)
    rng = np.random.default_rng(seed)
    block = max(1, min(n_boot, _BLOCK_CELLS // n))
    out = np.empty(n_boot)
    done = 0
    while done < n_boot:
        b = min(block, n_boot - done)
        draws = rng.integers(0, n, size=(b, n))
        # Draw counts per candidate, row by row: offset each row's draws by row·n.
        counts = np.bincount((draws + (np.arange(b) * n)[:, None]).ravel(), minlength=b * n).reshape(b, n)
        out[done:done + b] = _ap_rows(rk, counts[:, rk.order])
        done += b
    return out


def _percentile_interval(replicates: np.ndarray, level: float, what: str) -> tuple[float, float]:
    """Percentile interval of the replicates that have a value (a resample without positives has none)."""
    valid = replicates[~np.isnan(replicates)]
    if len(valid) == 0:
        raise ValueError(f"no bootstrap resample of {what} had a positive: the interval is undefined")
    alpha = (1 - level) / 2
    lo, hi = np.percentile(valid, [100 * alpha, 100 * (1 - alpha)])
    return float(lo), float(hi)


def _warn_dropped(replicates: np.ndarray, stacklevel: int = 3) -> int:
    n_drop = int(np.isnan(replicates).sum())
    if n_drop:
        warnings.warn(f"{n_drop} of {len(replicates)} bootstrap resamples drew no positive and were "
                      "left out of the intervals", RuntimeWarning, stacklevel=stacklevel)
    return n_drop


def bootstrap_ap(labels, scores, n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval (95% by default) of AP, resampling candidates with replacement.

    Resamples that draw no positive have no AP: they are left out, with a RuntimeWarning.
    """
    reps = bootstrap_replicates(labels, scores, n_boot, seed)
    _warn_dropped(reps)
    return _percentile_interval(reps, level, "AP")


@dataclass(frozen=True)
class Delta:
    """AP(other) − AP(base), absolute and relative (%), with paired-bootstrap percentile intervals."""

    abs: float
    abs_ci: tuple[float, float]
    rel_pct: float
    rel_pct_ci: tuple[float, float]


def _delta(ap_base, ap_other, reps_base, reps_other, level) -> Delta:
    d_abs = reps_other - reps_base
    with np.errstate(invalid="ignore", divide="ignore"):
        d_rel = 100 * d_abs / reps_base
    return Delta(ap_other - ap_base, _percentile_interval(d_abs, level, "ΔAP"),
                 100 * (ap_other - ap_base) / ap_base, _percentile_interval(d_rel, level, "ΔAP %"))


def paired_bootstrap_delta(labels, scores_base, scores_other, n_boot: int = 1000, seed: int = 0,
                           level: float = 0.95) -> Delta:
    """Δ = AP(other) − AP(base) on the same candidates, interval from the same resamples for both."""
    reps_b = bootstrap_replicates(labels, scores_base, n_boot, seed)
    reps_o = bootstrap_replicates(labels, scores_other, n_boot, seed)
    _warn_dropped(reps_b)  # the same resamples lack positives for both models
    return _delta(average_precision(labels, scores_base), average_precision(labels, scores_other),
                  reps_b, reps_o, level)


# ------------------------------------------------------------------------------ the protocol


@dataclass
class ModelResult:
    """One model on one gold set. Areas are fractions (the report prints them ×100)."""

    model: str
    n_proposed: int                       # candidates this model scores (the rest rank last)
    ap: float | None                      # None when the model proposes no candidate
    ap_ci: tuple[float, float] | None
    trapezoid: float | None
    precision_at_recall: dict[float, float]
    precision: np.ndarray                 # the PR curve, best threshold first (see pr_curve)
    recall: np.ndarray
    thresholds: np.ndarray
    delta: Delta | None                   # vs the baseline (None for the baseline itself)
    coverage: float                       # gold pairs this model proposes / all gold pairs
    coverage_ci: tuple[float, float]      # Wilson 95%
    note: str = ""


@dataclass
class EvalResult:
    """All models on one gold set, with what is needed to rebuild every number."""

    name: str
    baseline: str
    n_gold: int                 # distinct gold pairs after normalisation
    n_gold_positive: int
    n_candidates: int           # gold pairs the baseline proposes
    n_positive: int             # positives among the candidates
    coverage: float             # n_candidates / n_gold
    coverage_ci: tuple[float, float]
    candidates: list[tuple[str, str]]
    labels: np.ndarray
    scores: dict[str, np.ndarray]
    models: dict[str, ModelResult]
    n_boot: int
    seed: int
    n_boot_dropped: int = 0     # resamples without a positive (no AP), left out of every interval
    n_duplicates: int = 0       # gold pairs dropped as repeats (same unordered normalised pair)
    n_label_conflicts: int = 0  # of which with a label different from the first occurrence
    n_excluded_checked: int = 0  # tuning pairs checked for overlap
    info: dict = field(default_factory=dict)
    signature: str = ""


def _tuning_pairs(db) -> list:
    """The pairs a regression of the database was fitted on: the General+X combinations' tuning
    pairs and the learned score's training pairs (PPDB 2.0 ratings' train part)."""
    return (list((db.meta.get("combination") or {}).get("tuning_pairs") or [])
            + [list(p) + [None] for p in (db.meta.get("ppdb2") or {}).get("train_pairs") or []])


def _symmetric_scores(db, pairs, model, cache: dict | None = None) -> np.ndarray:
    """A model's score of unordered pairs; NaN where it proposes neither direction.

    Gold pairs carry no direction, while the database stores directed probabilities. A stored
    model scores (a, b) by max(p(b|a), p(a|b)); a General + X combination by its regression
    over *each model's* better direction (pivot.store.combined.unordered_score): the features
    its fit was tuned on, not the maximum over directions of the combined prediction.
    Pairs must already be normalised. cache: {model: (fwd, rev)} reused across calls on the
    same pairs (a combination needs General's directions, which every other one shares).
    """
    from pivot.store.combined import Combination, symmetric_p, unordered_score

    cache = {} if cache is None else cache

    def directed(name):
        if name not in cache:
            cache[name] = (db.scores(pairs, name, normalize=False),
                           db.scores([(b, a) for a, b in pairs], name, normalize=False))
        return cache[name]

    info = db.model_info(model)
    if info["kind"] == "learned":
        # a score on any scale (not a probability, may be <= 0): the better direction, NaN where
        # neither is stored
        fwd, rev = directed(model)
        with np.errstate(invalid="ignore"):
            return np.fmax(fwd, rev)
    if info["kind"] == "combined":
        params = info["params"]
        fit = Combination.from_meta(params["fit"])
        (g_f, g_r), (x_f, x_r) = directed(params["base"]), directed(params["other"])
        return unordered_score(fit, g_f, g_r, x_f, x_r)
    return symmetric_p(*directed(model))


def evaluate_db(db, gold_pairs, labels=None, models=None, *, exclude=None, name: str = "gold",
                n_boot: int = 1000, seed: int = 0, levels=RECALL_LEVELS, info: dict | None = None
                ) -> EvalResult:
    """Evaluate the models of a paraphrase database on labelled gold pairs (paper §4).

    db: a ParaphraseDB or its path. gold_pairs: (e1, e2, ...) tuples; labels: 0/1 per gold
    pair, or None to take the third field of each pair (the output of pivot.eval.gold.binarize).
    models: names to evaluate (default all); the database's first model (General) is the
    baseline and is always evaluated. exclude: pairs that must not be tested (the regression's
    tuning pairs); the pairs in the database's meta["combination"]["tuning_pairs"] are always
    added, and any overlap raises InputError naming up to 10 pairs. info: free-form facts
    for the report (gold file, binarisation threshold, split).

    Steps: normalise both phrases like the corpus; drop repeated pairs (unordered, keyed by
    pivot.eval.gold.pair_key; the first occurrence wins); candidates = pairs the baseline proposes in either direction; every model
    scores each candidate as an unordered pair (_symmetric_scores: a stored model by the better
    of its two directions, a combination by its regression over each model's better direction;
    NaN = not proposed = ranks last).
    """
    from pivot.store.db import ParaphraseDB
    from pivot.eval.gold import assert_disjoint, pair_key

    if not isinstance(db, ParaphraseDB):
        db = ParaphraseDB(db)
    labels = np.asarray([p[2] for p in gold_pairs] if labels is None else labels)
    if len(labels) != len(gold_pairs):
        raise InputError(f"{len(gold_pairs)} gold pairs but {len(labels)} labels", (info or {}).get("path"))
    _validate(labels, np.zeros(len(labels)))  # labels are 0/1 and hold a positive

    baseline = db.models[0]
    wanted = list(db.models) if models is None else list(models)
    for m in wanted:
        db.model_info(m)  # InputError naming the models the database has
    wanted = [baseline] + [m for m in wanted if m != baseline]

    # Normalise and deduplicate (unordered pairs).
    pairs, kept_labels, first_label = [], [], {}
    n_dup = n_conflict = 0
    for pair, label in zip(gold_pairs, labels.tolist()):
        a, b = db.normalize(pair[0]), db.normalize(pair[1])
        key = pair_key(a, b)
        if key in first_label:
            n_dup += 1
            n_conflict += first_label[key] != label
            continue
        first_label[key] = label
        pairs.append((a, b))
        kept_labels.append(label)
    y_all = np.asarray(kept_labels, dtype=np.int64)

    # Gold hygiene: no test pair may have been seen by the regression.
    tuning = [tuple(p[:2]) for p in _tuning_pairs(db)] + [tuple(p[:2]) for p in (exclude or [])]
    if tuning:
        # assert_disjoint compares unordered pairs and names up to 10 of the overlap.
        try:
            assert_disjoint([(db.normalize(a), db.normalize(b)) for a, b in tuning], pairs)
        except ValueError as exc:
            raise InputError(f"gold set {name!r} overlaps the regression's tuning pairs, so its "
                             f"numbers would be optimistic: {exc}") from exc

    gen_all = _symmetric_scores(db, pairs, baseline)
    is_cand = ~np.isnan(gen_all)
    cand_idx = np.flatnonzero(is_cand)
    candidates = [pairs[i] for i in cand_idx]
    y = y_all[cand_idx]
    n_gold, n_cand = len(pairs), len(candidates)
    if n_cand == 0:
        raise ValueError(f"gold set {name!r}: the baseline model {baseline!r} proposes none of the "
                         f"{n_gold} gold pairs, so there is nothing to rank")
    if y.sum() == 0:
        raise ValueError(f"gold set {name!r}: none of the {n_cand} candidates (gold pairs that "
                         f"{baseline!r} proposes) is labelled positive: AP is undefined")

    scores = {baseline: gen_all[cand_idx]}
    cache: dict = {}
    for m in wanted[1:]:
        scores[m] = _symmetric_scores(db, candidates, m, cache)

    results: dict[str, ModelResult] = {}
    reps_base = bootstrap_replicates(y, scores[baseline], n_boot, seed)
    ap_base = average_precision(y, scores[baseline])
    # Resamples are shared by all models, so the same ones lack positives for every model.
    n_boot_dropped = int(np.isnan(reps_base).sum())
    for m in wanted:
        s = scores[m]
        n_prop = int((~np.isnan(s)).sum())
        cov_ci = wilson_interval(n_prop, n_gold)
        if n_prop == 0:
            msg = f"{m!r} proposes none of the {n_cand} candidates: no AP (its ranking would be arbitrary)"
            warnings.warn(f"gold set {name!r}: {msg}", RuntimeWarning, stacklevel=2)
            empty = np.empty(0)
            results[m] = ModelResult(m, 0, None, None, None, {}, empty, empty, empty, None,
                                     0.0, cov_ci, note=msg)
            continue
        reps = reps_base if m == baseline else bootstrap_replicates(y, s, n_boot, seed)
        ap = average_precision(y, s)
        precision, recall, thresholds = pr_curve(y, s)
        par = precision_at_recall(y, s, levels)
        results[m] = ModelResult(
            model=m, n_proposed=n_prop, ap=ap, ap_ci=_percentile_interval(reps, 0.95, f"AP of {m}"),
            trapezoid=trapezoid_auc(y, s),
            precision_at_recall={float(lv): float(v) for lv, v in zip(levels, par)},
            precision=precision, recall=recall, thresholds=thresholds,
            delta=None if m == baseline else _delta(ap_base, ap, reps_base, reps, 0.95),
            coverage=n_prop / n_gold, coverage_ci=cov_ci,
        )

    return EvalResult(
        name=name, baseline=baseline, n_gold=n_gold, n_gold_positive=int(y_all.sum()),
        n_candidates=n_cand, n_positive=int(y.sum()), coverage=n_cand / n_gold,
        coverage_ci=wilson_interval(n_cand, n_gold), candidates=candidates, labels=y,
        scores=scores, models=results, n_boot=n_boot, seed=seed, n_boot_dropped=n_boot_dropped,
        n_duplicates=n_dup,
        n_label_conflicts=n_conflict, n_excluded_checked=len(tuning), info=dict(info or {}),
        signature=db.signature,
    )


# ------------------------------------------------------------------------------ report


def _x100(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.1f}"


def _ci100(ci) -> str:
    return "" if ci is None else f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def _signed100(v: float, ci) -> str:
    return f"{100 * v:+.1f} [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]"


def table_rows(res: EvalResult) -> list[str]:
    """The Table-3-style Markdown table of one gold set, header included."""
    rows = [
        "| model | AP×100 [95% CI] | Δ abs ×100 [95% CI] | Δ rel % [95% CI] | trapezoid×100 | coverage [95% CI] | proposed / candidates |",
        "|---|---|---|---|---|---|---|",
    ]
    for m, r in res.models.items():
        if r.delta is None:
            d_abs = d_rel = "–"
        else:
            d_abs = _signed100(r.delta.abs, r.delta.abs_ci)
            d_rel = f"{r.delta.rel_pct:+.1f} [{r.delta.rel_pct_ci[0]:+.1f}, {r.delta.rel_pct_ci[1]:+.1f}]"
        cov = f"{100 * r.coverage:.1f}%{_ci100(r.coverage_ci)}"
        rows.append(f"| {m} | {_x100(r.ap)}{_ci100(r.ap_ci)} | {d_abs} | {d_rel} | {_x100(r.trapezoid)} | "
                    f"{cov} | {r.n_proposed} / {res.n_candidates} |")
    return rows


def write_report(path_md, results: dict[str, EvalResult], db, figures=()) -> Path:
    """Write the evaluation as Markdown: per gold set a Table-3-style table and its settings.

    results maps a gold-set name to its EvalResult; figures are image paths (linked relative
    to the report); db is the ParaphraseDB (or path) evaluated, for its signature.
    """
    from pivot.store.db import ParaphraseDB

    path_md = Path(path_md)
    if not isinstance(db, ParaphraseDB):
        db = ParaphraseDB(db)
    out = [
        "# Evaluation", "",
        f"Database: `{db.path}`  ",
        f"Signature: `{db.signature}`", "",
        "Headline: average precision (AP, step-wise area under the precision-recall curve) ×100, "
        "the paper's \"AUC\". The trapezoid area is given for comparison, labelled as such. "
        "Candidates: the gold pairs the baseline (General) model proposes, in either direction; "
        "a model scores a pair by the better of its two directions, and a candidate it does not "
        "propose ranks last. Coverage: gold pairs the model proposes / all gold pairs (Wilson 95% "
        "interval). AP intervals: percentile bootstrap over candidates; Δ: AP(model) − AP(baseline) "
        "with a paired bootstrap (the same resamples for both).", "",
    ]
    for gold_name, res in results.items():
        out += [f"## {gold_name}", ""]
        settings = [
            f"gold pairs: {res.n_gold} distinct ({res.n_gold_positive} positive)"
            + (f"; {res.n_duplicates} repeats dropped ({res.n_label_conflicts} with a conflicting label)"
               if res.n_duplicates else ""),
            f"candidates (proposed by {res.baseline}): {res.n_candidates}, {res.n_positive} positive; "
            f"coverage {100 * res.coverage:.1f}%{_ci100(res.coverage_ci)}",
            f"bootstrap: {res.n_boot} resamples of the candidates, seed {res.seed}, 95% percentile intervals"
            + (f"; {res.n_boot_dropped} resamples without a positive left out" if res.n_boot_dropped else ""),
            (f"tuning pairs checked for overlap with the test pairs: {res.n_excluded_checked}, none overlap"
             if res.n_excluded_checked else "tuning pairs: none recorded in the database or given"),
        ]
        settings += [f"{k}: {v}" for k, v in sorted(res.info.items())]
        if res.signature and res.signature != db.signature:
            settings.append(f"evaluated database signature: `{res.signature}`")
        out += [f"- {s}" for s in settings] + [""]
        out += table_rows(res) + [""]
        notes = [f"{m}: {r.note}" for m, r in res.models.items() if r.note]
        if notes:
            out += [f"- note: {n}" for n in notes] + [""]
        levels = next((list(r.precision_at_recall) for r in res.models.values() if r.precision_at_recall), [])
        if levels:
            out += ["Interpolated precision ×100 at recall:", "",
                    "| model | " + " | ".join(f"R={lv:g}" for lv in levels) + " |",
                    "|---|" + "---|" * len(levels)]
            for m, r in res.models.items():
                if r.precision_at_recall:
                    out.append(f"| {m} | " + " | ".join(f"{100 * r.precision_at_recall[lv]:.1f}" for lv in levels) + " |")
            out.append("")
    figures = list(figures.values()) if isinstance(figures, dict) else list(figures)
    if figures:
        out += ["## Figures", ""]
        for fig in figures:
            rel = os.path.relpath(Path(fig).resolve(), path_md.resolve().parent)
            out += [f"![{Path(fig).stem}]({Path(rel).as_posix()})", ""]
    outputs.write_text(path_md, "\n".join(out))
    return path_md
