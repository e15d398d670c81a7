"""Evaluation: AP, trapezoid, PR points, bootstrap, the candidate protocol, report and figures.

Every expected number below is worked out by hand in the comment beside it.
"""
import math
import warnings

import matplotlib.image
import numpy as np
import pytest

from pivot.store.db import ParaphraseDB
from pivot.store.write import write_database
from pivot.errors import InputError
from pivot.eval.evaluate import (
    average_precision, bootstrap_ap, bootstrap_replicates, evaluate_db, paired_bootstrap_delta,
    pr_curve, precision_at_recall, trapezoid_auc, wilson_interval, write_report,
)
from pivot.eval.plots import DPI, FIGSIZE, _step_points, figure_models, plot_paper_figures

TOL = 1e-4

# ------------------------------------------------------------------------------ metrics


# Golden (STYLE.md). Ranked: .8(+) .4(-) .35(+) .1(-).
#   thresholds .8: TP1 FP0 → (R .5, P 1); .4: TP1 FP1 → (.5, .5); .35: TP2 FP1 → (1, 2/3); .1: (1, .5)
#   AP = .5·1 + 0·.5 + .5·2/3 + 0·.5 = .83333
#   trapezoid from (0, 1): .5·(1+1)/2 + 0 + .5·(.5+2/3)/2 + 0 = .5 + .29167 = .79167
# Tie case: labels [1, 1,0,1, 1], scores [.9, .7,.7,.7, .2]; 4 positives, the .7 group is one threshold.
#   .9: TP1 FP0 → (.25, 1); .7: TP3 FP1 → (.75, .75); .2: TP4 FP1 → (1, .8)
#   AP = .25·1 + .5·.75 + .25·.8 = .825
#   (ordering the tie positives first would give (1+1+1+.8)/4 = .95, negatives first .80417)
#   trapezoid: .25·(1+1)/2 + .5·(1+.75)/2 + .25·(.75+.8)/2 = .25 + .4375 + .19375 = .88125
# Missing ranks last: labels [1,0,1,0], scores [.5, nan, nan, .2]; NaNs tie below .2.
#   .5: (R .5, P 1); .2: TP1 FP1 → (.5, .5); missing group: TP2 FP2 → (1, .5)
#   AP = .5·1 + 0 + .5·.5 = .75;  trapezoid .5·1 + 0 + .5·(.5+.5)/2 = .75
# Top threshold negative: labels [0,1], scores [.9,.1]: (.0, 0) then (1, .5).
#   AP = 1·.5 = .5; trapezoid starts at (0, P_first = 0): 1·(0+.5)/2 = .25 (sklearn's auc: .75)
CASES = [
    ("golden", [0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8], 0.83333, 0.79167),
    ("tie", [1, 1, 0, 1, 1], [0.9, 0.7, 0.7, 0.7, 0.2], 0.825, 0.88125),
    ("missing-last", [1, 0, 1, 0], [0.5, np.nan, np.nan, 0.2], 0.75, 0.75),
    ("top-negative", [0, 1], [0.9, 0.1], 0.5, 0.25),
]


@pytest.mark.parametrize("name,labels,scores,ap,trap", CASES, ids=[c[0] for c in CASES])
def test_ap_and_trapezoid_by_hand(name, labels, scores, ap, trap):
    assert average_precision(labels, scores) == pytest.approx(ap, abs=TOL)
    assert trapezoid_auc(labels, scores) == pytest.approx(trap, abs=TOL)
    # Input order must not matter (ties included): reverse both lists.
    assert average_precision(labels[::-1], scores[::-1]) == average_precision(labels, scores)


def test_pr_curve_points_by_hand():
    p, r, t = pr_curve([1, 1, 0, 1, 1], [0.9, 0.7, 0.7, 0.7, 0.2])
    assert p.tolist() == [1.0, 0.75, 0.8] and r.tolist() == [0.25, 0.75, 1.0] and t.tolist() == [0.9, 0.7, 0.2]
    # Missing group is the last point, threshold NaN (see CASES "missing-last").
    p, r, t = pr_curve([1, 0, 1, 0], [0.5, np.nan, np.nan, 0.2])
    assert p.tolist() == [1.0, 0.5, 0.5] and r.tolist() == [0.5, 0.5, 1.0]
    assert t[:2].tolist() == [0.5, 0.2] and math.isnan(t[2])


def test_missing_ranks_below_every_real_score():
    # A NaN must rank below even a score of 0 (and negative scores): labels [1, 0], scores [nan, -3].
    # -3 first: (R 0, P 0); missing: (R 1, P .5) → AP = .5. If NaN ranked first AP would be 1.
    assert average_precision([1, 0], [np.nan, -3.0]) == pytest.approx(0.5, abs=1e-12)


def test_matches_the_definition_on_random_ties_and_missing():
    # Oracle straight from the definition: for each distinct threshold t (NaN = -inf), the
    # candidates with score >= t are retrieved; AP = Σ ΔR·P.
    rng = np.random.default_rng(7)
    for _ in range(50):
        n = int(rng.integers(2, 30))
        y = rng.integers(0, 2, n)
        y[0] = 1
        s = rng.integers(0, 5, n).astype(float)
        s[rng.random(n) < 0.2] = np.nan
        if np.isnan(s).all():
            s[0] = 1.0
        key = np.where(np.isnan(s), -np.inf, s)
        ap, r_prev = 0.0, 0.0
        for t in sorted(set(key.tolist()), reverse=True):
            hit = key >= t
            r = y[hit].sum() / y.sum()
            ap += (r - r_prev) * y[hit].mean()
            r_prev = r
        assert average_precision(y, s) == pytest.approx(ap, abs=1e-12)


def test_precision_at_recall_by_hand():
    # Golden points (R, P): (.5, 1), (.5, .5), (1, 2/3), (1, .5).
    # level .1 and .5: best P at R >= level is 1; .6 and 1.0: 2/3.
    got = precision_at_recall([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8], (0.1, 0.5, 0.6, 1.0))
    assert got == pytest.approx([1.0, 1.0, 2 / 3, 2 / 3], abs=1e-12)
    # 3 of 10 positives reach recall 0.3 exactly despite float noise: positives at ranks 1..3,
    # then 3 negatives, then the other 7 positives. P at R=.3 is 3/3 = 1; at R=.4 (rank 7) 4/7.
    y = [1, 1, 1, 0, 0, 0] + [1] * 7
    s = list(range(len(y), 0, -1))
    assert precision_at_recall(y, s, (0.3, 0.4)) == pytest.approx([1.0, 10 / 13], abs=1e-12)
    # (at R >= .4 the best is the last point: 10 positives / 13 retrieved = .769 > 4/7)


@pytest.mark.parametrize("labels,scores,message", [
    ([0, 0, 0], [0.1, 0.2, 0.3], "no positive labels among the 3 candidates"),
    ([1, 0], [np.nan, np.nan], "every one of the 2 scores is missing"),
    ([], [], "no candidates"),
    ([1, 2], [0.1, 0.2], "labels must be 0 or 1"),
    ([1, 0], [0.1], "differ in length"),
    ([1, 0], [np.inf, 0.1], "use NaN"),
])
def test_metrics_refuse_undefined_input(labels, scores, message):
    for fn in (average_precision, trapezoid_auc, pr_curve, precision_at_recall):
        with pytest.raises(ValueError, match=message):
            fn(labels, scores)


def test_wilson_interval():
    # 0 of 10: lower 0, upper = (z²/n)/(1 + z²/n) = .38415/1.38415 = .27753
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.27753, abs=TOL)
    # 5 of 6 against statsmodels' implementation of the same formula.
    from statsmodels.stats.proportion import proportion_confint

    assert wilson_interval(5, 6) == pytest.approx(proportion_confint(5, 6, method="wilson"), abs=1e-9)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


# ------------------------------------------------------------------------------ bootstrap

Y40 = np.array([1, 0, 1, 1, 0, 0, 1, 0] * 5)
S40 = np.r_[np.linspace(1.0, 0.05, 36), [np.nan] * 4]


def test_bootstrap_is_deterministic_and_brackets_the_estimate():
    a = bootstrap_ap(Y40, S40, n_boot=500, seed=0)
    assert a == bootstrap_ap(Y40, S40, n_boot=500, seed=0)
    assert a != bootstrap_ap(Y40, S40, n_boot=500, seed=1)
    ap = average_precision(Y40, S40)
    assert a[0] < ap < a[1] and a[1] - a[0] > 0.05


def test_bootstrap_equals_resampling_the_list():
    # The weighted shortcut must equal AP of the explicitly resampled candidate list:
    # same generator calls (n small, so one block of all resamples).
    n_boot, seed, n = 50, 3, len(Y40)
    draws = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    want = [average_precision(Y40[d], S40[d]) if Y40[d].any() else np.nan for d in draws]
    assert bootstrap_replicates(Y40, S40, n_boot, seed) == pytest.approx(want, abs=1e-12, nan_ok=True)


def test_paired_delta_of_identical_models_is_exactly_zero():
    d = paired_bootstrap_delta(Y40, S40, S40.copy(), n_boot=200)
    assert (d.abs, d.abs_ci, d.rel_pct, d.rel_pct_ci) == (0.0, (0.0, 0.0), 0.0, (0.0, 0.0))


def test_paired_delta_of_a_better_model():
    # Perfect ranking (positives first): AP 1. Δ > 0 on every resample with a positive.
    better = np.where(Y40 == 1, 2.0, 1.0)
    d = paired_bootstrap_delta(Y40, S40, better, n_boot=200)
    ap = average_precision(Y40, S40)
    assert d.abs == pytest.approx(1 - ap, abs=1e-12)
    assert d.rel_pct == pytest.approx(100 * (1 - ap) / ap, abs=1e-9)
    assert 0 < d.abs_ci[0] <= d.abs <= d.abs_ci[1]


# ------------------------------------------------------------------------------ evaluate_db

# Phrases and directed scores; model columns: general, ml-x, general+ml-x, ml-none (proposes nothing).
PHRASES = ["treat", "cure", "handle", "heal", "cell", "tissue", "gene", "protein", "house"]
PAIRS = [  # (e1, e2, general, ml-x, general+ml-x, ml-none)
    (0, 1, 0.5, 0.6, 0.9, 0.0),   # treat → cure
    (1, 0, 0.3, 0.7, 0.6, 0.0),   # cure → treat
    (0, 2, 0.4, 0.0, 0.2, 0.0),   # treat → handle (ml-x: absent)
    (3, 1, 0.2, 0.5, 0.8, 0.0),   # heal → cure (gold asks cure–heal: only the reverse exists)
    (4, 5, 0.45, 0.4, 0.3, 0.0),  # cell → tissue
    (6, 7, 0.1, 0.3, 0.35, 0.0),  # gene → protein
    (8, 4, 0.3, 0.2, 0.1, 0.0),   # house → cell (not gold)
]
MODELS = [{"name": n, "kind": k, "description": "", "params": {}} for n, k in
          [("general", "pivot"), ("ml-x", "pivot"), ("general+ml-x", "pivot"), ("ml-none", "pivot")]]
# (general+ml-x is stored like a pivot model here: the evaluation only reads scores; a real
# combined model's scores are computed from its coefficients, see tests/test_db.py.)
GOLD = [("treat", "cure", 9.0), ("treat", "handle", 3.0), ("cure", "heal", 8.5),
        ("Cell", "tissue", 2.0), ("gene", "protein", 7.5), ("house", "gene", 9.9)]
LABELS = [1, 0, 1, 0, 1, 1]
# Candidates: the five gold pairs general proposes (house–gene is not): coverage 5/6.
# Symmetric scores (max of both directions):
#   general: treat–cure max(.5,.3)=.5 (+), treat–handle .4 (-), cure–heal .2 (+), cell–tissue .45 (-), gene–protein .1 (+)
#     ranked .5+ .45- .4- .2+ .1+ → P at positives 1/1, 2/4, 3/5 → AP = (1 + .5 + .6)/3 = .7
#     trapezoid: (0,1) (1/3,1) (1/3,.5) (1/3,1/3) (2/3,.5) (1,.6):
#       1/3·1 + 1/3·(1/3+.5)/2 + 1/3·(.5+.6)/2 = .33333 + .13889 + .18333 = .65556
#   ml-x: treat–cure .7 (+), treat–handle NaN (-), cure–heal .5 (+), cell–tissue .4 (-), gene–protein .3 (+)
#     ranked .7+ .5+ .4- .3+ NaN- → AP = (1 + 1 + 3/4)/3 = .91667; Δ = +.21667, +30.95 %
#   general+ml-x: .9+ .8+ .35+ .3- .2- → AP = 1
AP_GENERAL, AP_ML, TRAP_GENERAL = 2.1 / 3, 2.75 / 3, 1 / 3 + (5 / 6) / 6 + 1.1 / 6


def _write(path, meta=None):
    e1, e2 = (np.array([p[i] for p in PAIRS], dtype=np.int32) for i in (0, 1))
    write_database(
        path, phrases=PHRASES, phrase_counts=np.ones(len(PHRASES), dtype=np.int64), e1=e1, e2=e2,
        n_pivots=np.ones(len(PAIRS), dtype=np.int64),
        pivots=np.array([[0, -1, -1]] * len(PAIRS)), foreign={0: "fr:x"}, models=MODELS,
        scores=np.array([p[2:] for p in PAIRS]),
        meta={"signature": "sig-test", "normalization": {"lang": "en"}, **(meta or {})},
    )
    return path


@pytest.fixture
def db(tmp_path):
    with ParaphraseDB(_write(tmp_path / "t.db")) as handle:
        yield handle


def test_evaluate_db_by_hand(db):
    res = evaluate_db(db, GOLD, LABELS, models=["ml-x", "general+ml-x"], name="bio", n_boot=200)
    assert res.baseline == "general" and list(res.models) == ["general", "ml-x", "general+ml-x"]
    assert res.candidates == [("treat", "cure"), ("treat", "handle"), ("cure", "heal"),
                              ("cell", "tissue"), ("gene", "protein")]
    assert res.labels.tolist() == [1, 0, 1, 0, 1]
    assert (res.n_gold, res.n_candidates, res.n_positive, res.n_gold_positive) == (6, 5, 3, 4)
    assert res.coverage == pytest.approx(5 / 6)
    assert res.scores["general"].tolist() == [0.5, 0.4, 0.2, 0.45, 0.1]

    gen, ml, comb = res.models["general"], res.models["ml-x"], res.models["general+ml-x"]
    assert gen.ap == pytest.approx(AP_GENERAL, abs=1e-12)
    assert gen.trapezoid == pytest.approx(TRAP_GENERAL, abs=1e-12) and TRAP_GENERAL == pytest.approx(0.65556, abs=TOL)
    assert ml.ap == pytest.approx(AP_ML, abs=1e-12) and comb.ap == pytest.approx(1.0, abs=1e-12)
    assert gen.delta is None
    assert ml.delta.abs == pytest.approx(AP_ML - AP_GENERAL, abs=1e-12)
    assert ml.delta.rel_pct == pytest.approx(30.952, abs=1e-3)
    # Coverage per model: general proposes 5 of 6 gold pairs, ml-x 4 (not treat–handle).
    assert (gen.n_proposed, ml.n_proposed) == (5, 4) and ml.coverage == pytest.approx(4 / 6)
    # ml-x points (R, P): (1/3,1) (2/3,1) (2/3,2/3) (1,3/4) (1,3/5) → P at R >= .7 is 3/4.
    assert ml.precision_at_recall[0.7] == pytest.approx(0.75) and ml.precision_at_recall[0.5] == 1.0
    for r in (gen, ml):
        assert r.ap_ci[0] <= r.ap <= r.ap_ci[1]
    # Resamples that draw none of the positives (candidates 0, 2, 4) have no AP; all 200 come
    # from one block of generator draws (5 candidates): count them the direct way.
    draws = np.random.default_rng(0).integers(0, 5, size=(200, 5))
    assert res.n_boot_dropped == int((~np.isin(draws, [0, 2, 4]).any(axis=1)).sum()) > 0


def test_labels_from_gold_binarize(db):
    # binarize at 7: 9→1, 3→0, 8.5→1, 2→0, 7.5→1, 9.9→1, i.e. LABELS; labels=None reads the third field.
    from pivot.eval.gold import binarize

    res = evaluate_db(db, binarize(GOLD, 7.0), models=[], n_boot=20)
    assert res.labels.tolist() == [1, 0, 1, 0, 1]
    assert res.models["general"].ap == pytest.approx(AP_GENERAL, abs=1e-12)


def test_evaluate_db_drops_repeated_pairs(db):
    # cure–treat repeats treat–cure (unordered) with a conflicting label: dropped, AP unchanged.
    res = evaluate_db(db, GOLD + [("cure", "treat", 1.0)], LABELS + [0], models=[], n_boot=20)
    assert (res.n_duplicates, res.n_label_conflicts, res.n_gold) == (1, 1, 6)
    assert res.models["general"].ap == pytest.approx(AP_GENERAL, abs=1e-12)


def test_model_proposing_no_candidate_gets_no_number(db):
    with pytest.warns(RuntimeWarning, match="'ml-none' proposes none of the 5 candidates"):
        res = evaluate_db(db, GOLD, LABELS, n_boot=20)
    r = res.models["ml-none"]
    assert r.ap is None and r.ap_ci is None and r.delta is None and "proposes none" in r.note


def test_evaluate_db_errors(db):
    with pytest.raises(ValueError, match="none of the 5 candidates .* is labelled positive"):
        evaluate_db(db, GOLD, [0, 0, 0, 0, 0, 1], models=[], n_boot=20)
    with pytest.raises(InputError, match="6 gold pairs but 5 labels"):
        evaluate_db(db, GOLD, LABELS[:5], n_boot=20)
    with pytest.raises(InputError, match="unknown model 'nope'"):
        evaluate_db(db, GOLD, LABELS, models=["nope"], n_boot=20)
    with pytest.raises(ValueError, match="proposes none of the 1 gold pairs"):
        evaluate_db(db, [("house", "gene")], [1], models=[], n_boot=20)


def test_refuses_test_pairs_seen_in_tuning(tmp_path):
    # The DB's tuning pairs hold cure→treat: the gold's treat–cure is the same unordered pair.
    path = _write(tmp_path / "tuned.db", meta={"combination": {"tuning_pairs": [["cure", "treat", 1]]}})
    with ParaphraseDB(path) as db:
        with pytest.raises(InputError) as err:
            evaluate_db(db, GOLD, LABELS, models=[], n_boot=20)
        assert "cure" in str(err.value) and "treat" in str(err.value)
        # Without the overlapping pair the evaluation runs.
        res = evaluate_db(db, GOLD[1:], LABELS[1:], models=[], n_boot=20)
        assert res.n_excluded_checked == 1
    # An explicit exclude list is checked too.
    with ParaphraseDB(_write(tmp_path / "plain.db")) as db:
        with pytest.raises(InputError, match="protein"):
            evaluate_db(db, GOLD, LABELS, models=[], exclude=[("Protein", "gene")], n_boot=20)


def test_report_has_the_table_rows(db, tmp_path):
    res = evaluate_db(db, GOLD, LABELS, models=["ml-x"], name="bio", n_boot=200,
                      info={"gold": "Bio-SimLex.txt", "threshold": ">= 7"})
    fig = tmp_path / "figs" / "pr-combined.png"
    out = write_report(tmp_path / "report.md", {"bio": res}, db, figures=[fig])
    text = out.read_text()
    assert "Signature: `sig-test`" in text and "## bio" in text and "threshold: >= 7" in text
    # general: AP 70.0, trapezoid 65.6, coverage 5/6 = 83.3 %; ml-x: AP 91.7, Δ +21.7, +31.0 %, 4/6 = 66.7 %
    assert "| general | 70.0 [" in text and "| – | – | 65.6 | 83.3% [" in text and "| 5 / 5 |" in text
    assert "| ml-x | 91.7 [" in text and "| +21.7 [" in text and "| +31.0 [" in text and "66.7% [" in text
    assert "](figs/pr-combined.png)" in text


# ------------------------------------------------------------------------------ figures


def test_steps_post_area_is_the_ap():
    # Steps-post from (x_i, y_i) to x_{i+1} holds y_i: area Σ (x_i − x_{i+1})·y_i must equal AP.
    for _, labels, scores, ap, _ in CASES:
        p, r, _ = pr_curve(labels, scores)
        x, y = _step_points(p, r)
        area = sum((x[i] - x[i + 1]) * y[i] for i in range(len(x) - 1))
        assert area == pytest.approx(ap, abs=TOL)


def test_figure_models():
    names = ["general", "ml-1", "general+ml-1", "ml-cp", "general+ml-cp"]
    assert figure_models(names, "subsampled") == ["general", "ml-1", "ml-cp"]
    assert figure_models(names, "combined") == ["general", "general+ml-1", "general+ml-cp"]
    with pytest.raises(ValueError):
        figure_models(names, "other")


def test_paper_figures_are_pngs_of_the_expected_size(db, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # ml-none proposes nothing: left out of plots
        bio = evaluate_db(db, GOLD, LABELS, name="bio", n_boot=20)
        control = evaluate_db(db, GOLD[:3], LABELS[:3], name="control", n_boot=20)
    paths = plot_paper_figures({"bio": bio, "control": control}, tmp_path / "figs")
    assert set(paths) == {"subsampled", "combined"}
    for path in paths.values():
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        img = matplotlib.image.imread(path)
        assert img.shape[:2] == (round(FIGSIZE[1] * DPI), round(FIGSIZE[0] * DPI)) == (450, 1000)
