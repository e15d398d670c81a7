"""Benchmark: sentence-level uses of a paraphrase database (pivot.sentences).

    python bench/bench_sentences.py --db bio.db --work work/bio --data ../shared/data \
        [--tune] [--tune-n 400] [--generation] [--identify] [--align]

--tune        grid search of the decoder's weights (LM weight, identity bias, reverse-score
              weight, forced change) for iBLEU on the MSRP TRAIN positives (or the first --tune-n)
              (sentence 1 -> sentence 2 as the reference), model General with the general LM;
              writes bench/results/sentences_tuning.json: the best setting overall and the best
              among the settings that change at least half of the sentences.
--generation  MSRP TEST positives (sentence 1 -> sentence 2 as the reference): sacrebleu BLEU
              and iBLEU (alpha 0.9) of the identity, the naive top-1 substitution, and the decoder
              with General and a domain model (--domain-model, default ml-weighted-ppl); share of
              outputs differing from the source; sentences/s (one process, a fresh lookup
              cache, LM loading excluded and reported apart); example outputs.
              Writes bench/results/sentences_generation.json.
--tune-rules  the rule model (pivot.sentences.rules) and its weights and gate, tuned on the MSRP
              TRAIN positives with cross-fitted log-odds: bench/results/sentences_rules_tuning.json,
              the model to --rules-out (derived from MSRP: keep it outside the repository);
              --generation --rules FILE adds the rule-model decoder rows.
--identify-cv nested CV on the MSRP TRAIN pairs of string-only vs string+DB for DB settings
              (sentences_identify_cv.json): how --identify-model was chosen.
--identify    `pivot identify` on MSRP train/test (DB blocks of --identify-model, default
              general): bench/results/sentences_identify.json;
              with --identify-models M1 M2 ... the same for each model's DB features
              (sentences_identify_models.json).
--align       `pivot align-eval` for ibm2 and eflomal (3 runs): bench/results/sentences_align.json.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from pivot.sentences import generation_eval as G  # noqa: E402
from pivot.sentences.msrp import read_msrp  # noqa: E402
from pivot.sentences.paraphrase import (DEFAULT_WEIGHTS, LanguageModel, Paraphraser,  # noqa: E402
                                        resolve_lm)
from pivot.sentences.rewrite import Weights  # noqa: E402
from pivot.locking import cores  # noqa: E402
from pivot.store.db import ParaphraseDB  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
GRID = {"lm": [0.1, 0.25, 0.5, 1.0], "identity": [-1.0, 0.0, 0.5, 1.0, 2.0], "tm_rev": [0.0, 1.0],
        "require_change": [False, True]}


def _write(name, data):
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, name)
    with open(path, "w") as fh:
        json.dump(data, fh, indent=2)
        fh.write("\n")
    print("wrote", path, flush=True)


def _positives(data, split):
    pairs = read_msrp(os.path.join(data, "gold", "msrp", f"msr_paraphrase_{split}.txt"))
    pos = [p for p in pairs if p.label == 1]
    return [p.s1 for p in pos], [p.s2 for p in pos]


def _lm(db, args, model):
    path = resolve_lm(db, args.db, model, None, args.work)
    t0 = time.perf_counter()
    lm = LanguageModel(path)
    return lm, str(path), round(time.perf_counter() - t0, 2)


def tune(args, db):
    src, ref = _positives(args.data, "train")
    if args.tune_n:
        src, ref = src[:args.tune_n], ref[:args.tune_n]
    grid = json.loads(args.grid) if args.grid else GRID
    lm, lm_path, _ = _lm(db, args, "general")
    para = Paraphraser(db, "general", lm)
    t0 = time.perf_counter()
    res = G.tune(para, src, ref, grid)
    changed = [r for r in res["grid"] if r["changed"] >= 0.5]
    out = {"set": f"MSRP train positives, first {len(src)}", "model": "general", "lm": lm_path,
           "grid": grid, "seconds": round(time.perf_counter() - t0, 1),
           "identity": G.score_system(src, src, ref),
           "best": res["best"],
           "best_changed_at_least_half": max(changed, key=lambda r: r["ibleu"]) if changed else None,
           "all": res["grid"]}
    print("best", json.dumps(out["best"]), "\nbest (>= 50% changed)", json.dumps(out["best_changed_at_least_half"]),
          "\nidentity", json.dumps(out["identity"]), flush=True)
    _write("sentences_tuning.json", out)


RULE_GRID = {"rule": [1.0, 4.0], "lm": [0.0, 0.25, 0.5], "tm": [0.0, 1.0]}
GATE_SHARES = [0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.52, 0.55, 0.6, 0.7, 0.8, 1.0]


def tune_rules(args, db):
    """The rule model and its decoder setting, tuned on the MSRP TRAIN positives only.

    1. lattices of every train positive (General, k 8, the default filters);
    2. every option's rule log-odds cross-fitted (5 folds: a pair's values come from a model that
       never saw it, pivot.sentences.rules.cross_fit);
    3. for each weight setting of RULE_GRID, the forced-change decode of every sentence and its
       gate margin (mean log-odds of its replaced spans); a gate that changes the top share s of
       the sentences is the margin at that share; iBLEU for each share of GATE_SHARES;
    4. the constrained choice: the best iBLEU among settings changing >= 52% of the train sentences
       (2 points of headroom so that >= 50% holds on new text); the unconstrained best beside it;
    5. the rule model fitted on all train positives, saved with the constrained weights and gate
       to --rules-out (derived from MSRP: kept outside the repository).
    """
    import itertools

    from pivot.sentences.rules import RuleModel, cross_fit

    src, ref = _positives(args.data, "train")
    if args.tune_n:
        src, ref = src[:args.tune_n], ref[:args.tune_n]
    lm, lm_path, _ = _lm(db, args, "general")
    para = Paraphraser(db, "general", lm)
    t0 = time.perf_counter()
    toks = [para.normalize(s) for s in src]
    pairs = list(zip(toks, [para.normalize(r) for r in ref]))
    lattices = [para.lattice(t) for t in toks]
    annotated = cross_fit(pairs, lattices, para.table, seed=0)
    t_fit = time.perf_counter() - t0
    identity = G.score_system(src, src, ref)
    rows = []
    keys = list(RULE_GRID)
    para.require_change = True
    for values in itertools.product(*(RULE_GRID[k] for k in keys)):
        w = Weights(identity=0.0, **dict(zip(keys, values)))
        forced, margins = [], []
        for s, t, lat in zip(src, toks, annotated):
            hyp = para.decode_tokens(t, 1, weights=w, source_text=s, lattice=lat)[0] if t else None
            if hyp is None or not hyp.replaced:
                forced.append(s)
                margins.append(-float("inf"))
                continue
            forced.append(hyp.text)
            margins.append(hyp.features["rule"] / len(hyp.replaced))     # = gate_margin of its options
        order = sorted(range(len(src)), key=lambda i: -margins[i])
        for share in GATE_SHARES:
            n_top = max(1, int(round(share * len(src))))
            gate = margins[order[n_top - 1]]
            outs = [forced[i] if margins[i] >= gate else src[i] for i in range(len(src))]
            rows.append({"weights": dict(zip(keys, values)), "share": share, "gate": gate,
                         **G.score_system(outs, src, ref)})
        print(rows[-8], flush=True)
    ok = [r for r in rows if r["changed"] >= 0.52]
    best_constrained = max(ok, key=lambda r: r["ibleu"])
    best = max(rows, key=lambda r: r["ibleu"])
    model = RuleModel().fit(pairs, lattices, para.table, seed=0)
    model.weights = Weights(identity=0.0, **best_constrained["weights"])
    model.gate = best_constrained["gate"]
    if args.rules_out:
        model.save(args.rules_out)
        print("wrote", args.rules_out, flush=True)
    out = {"set": f"MSRP train positives ({len(src)})", "model": "general", "lm": lm_path,
           "method": tune_rules.__doc__, "grid": RULE_GRID, "gate_shares": GATE_SHARES,
           "seconds": {"lattices+cross_fit": round(t_fit, 1), "total": round(time.perf_counter() - t0, 1)},
           "identity": identity, "best_changed_at_least_52pc": best_constrained, "best": best,
           "classifier": {"features": model.to_json()["features"], "coef": [round(c, 4) for c in model.coef],
                          "intercept": round(model.intercept, 4), "good_rate": model.rule0},
           "all": rows}
    print("identity", identity, "\nconstrained", best_constrained, "\nbest", best, flush=True)
    _write("sentences_rules_tuning.json", out)


def generation(args, db):
    src, ref = _positives(args.data, "test")
    if args.gen_n:
        src, ref = src[:args.gen_n], ref[:args.gen_n]
    weights = DEFAULT_WEIGHTS
    if args.weights:
        from pivot.sentences.paraphrase import load_weights

        weights = load_weights(args.weights)
    best = None
    tuning = os.path.join(RESULTS, "sentences_tuning.json")
    if os.path.exists(tuning):
        w = json.load(open(tuning))["best"]["weights"]
        best = Weights(**{k: v for k, v in w.items() if k != "require_change"})
    out = {"set": f"MSRP test positives ({len(src)}), sentence 1 -> sentence 2",
           "bleu": "sacrebleu corpus BLEU, 13a, lowercase; iBLEU = 0.9 BLEU(out, ref) - 0.1 BLEU(out, src)",
           "weights": weights.__dict__, "systems": {}, "examples": []}
    out["systems"]["identity"] = G.score_system(src, src, ref)
    print("identity", out["systems"]["identity"], flush=True)
    outputs = {}
    for model in ["general", args.domain_model]:
        lm, lm_path, lm_s = _lm(db, args, model)
        if model == "general":
            p = Paraphraser(db, model, lm, weights=weights)
            naive, secs = G.timed(G.run_naive, p, src)
            out["systems"]["naive top-1 (general)"] = G.score_system(naive, src, ref, secs)
            print("naive", out["systems"]["naive top-1 (general)"], flush=True)
            outputs["naive"] = naive
        settings = [("tuned defaults", weights, False), ("tuned, --force-change", weights, True)]
        if best is not None:
            settings.append(("max-iBLEU weights", best, False))
        for label, w, forced in settings:
            p = Paraphraser(db, model, lm, weights=w, require_change=forced)   # fresh lookup cache
            hyp, secs = G.timed(G.run_decoder, p, src)
            name = f"decoder {model}, {label}"
            out["systems"][name] = {**G.score_system(hyp, src, ref, secs), "lm": lm_path, "lm_load_s": lm_s}
            print(name, out["systems"][name], flush=True)
            outputs[name] = hyp
    if args.rules:
        from pivot.sentences.rules import RuleModel

        rules = RuleModel.load(args.rules)
        tuned = json.load(open(os.path.join(RESULTS, "sentences_rules_tuning.json")))
        lm, lm_path, lm_s = _lm(db, args, "general")
        for label, gate in (("gate for >= 50% changed (tuned on train)", rules.gate),
                            ("max-iBLEU gate (tuned on train)", tuned["best"]["gate"])):
            w = Weights(identity=0.0, **tuned["best"]["weights"]) if "max" in label else rules.weights
            p = Paraphraser(db, "general", lm, weights=w, rules=rules, gate=gate)
            hyp, secs = G.timed(G.run_decoder, p, src)
            name = f"decoder general + rule model, {label}"
            out["systems"][name] = {**G.score_system(hyp, src, ref, secs), "gate": gate, "weights": w.__dict__,
                                    "lm": lm_path, "lm_load_s": lm_s}
            print(name, out["systems"][name], flush=True)
            outputs[name] = hyp
    keys = list(outputs)
    # Examples go to stdout only: the results file keeps no corpus text (MSRP stays in the data
    # root), just which test positive each example is and which systems changed it.
    for i in range(0, len(src), max(len(src) // 8, 1))[:8]:
        print(json.dumps({"test_positive": i, "source": src[i], "reference": ref[i],
                          **{k: outputs[k][i] for k in keys}}, ensure_ascii=False), flush=True)
        out["examples"].append({"test_positive": i, "changed": {k: outputs[k][i] != src[i] for k in keys}})
    _write("sentences_generation.json", out)


def identify(args, db):
    from pivot.sentences.identify import evaluate

    m = os.path.join(args.data, "gold", "msrp")
    train = read_msrp(os.path.join(m, "msr_paraphrase_train.txt"))
    test = read_msrp(os.path.join(m, "msr_paraphrase_test.txt"))
    res, _ = evaluate(db, train, test, model=args.identify_model, n_boot=1000, seed=0)
    for k in ("majority_baseline", "string_only", "string+db", "db_minus_string"):
        print(k, json.dumps(res[k]), flush=True)
    _write("sentences_identify.json", res)
    if args.identify_models:
        rows = {}
        for model in args.identify_models:
            r, _ = evaluate(db, train, test, model=model, n_boot=1000, seed=0)
            rows[model] = {"string_only": r["string_only"], "string+db": r["string+db"],
                           "db_minus_string": r["db_minus_string"], "seconds": r["seconds"]}
            print(model, json.dumps({k: rows[model][k]["accuracy"] for k in ("string_only", "string+db")}),
                  json.dumps(r["db_minus_string"]), flush=True)
        _write("sentences_identify_models.json", rows)


def identify_cv(args, db):
    """Choose the DB features without the test set: for each setting (a comma list of models),
    the accuracy of string-only and string+DB under nested cross-validation on the train pairs
    (outer StratifiedKFold 5, seeds 100 and 101; inside, make_classifier's own 5-fold C search)."""
    import numpy as np
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    from pivot.sentences.identify import ParaphraseAligner, featurize, make_classifier

    train = read_msrp(os.path.join(args.data, "gold", "msrp", "msr_paraphrase_train.txt"))
    y = np.array([p.label for p in train])

    def cv(x):
        return float(np.mean([cross_val_score(make_classifier("logreg", 0), x, y,
                                              cv=StratifiedKFold(5, shuffle=True, random_state=100 + r)).mean()
                              for r in range(2)]))
    xs, _ = featurize(train, None)
    rows = {"string_only": cv(xs)}
    print("string_only", rows["string_only"], flush=True)
    for setting in args.identify_cv:
        _, xd = featurize(train, [ParaphraseAligner(db, m) for m in setting.split(",")])
        acc = cv(np.hstack([xs, xd]))
        rows[setting] = {"accuracy": acc, "minus_string_only": acc - rows["string_only"]}
        print(setting, rows[setting], flush=True)
    _write("sentences_identify_cv.json", {"set": "MSRP train pairs only (4,076)", "method": identify_cv.__doc__,
                                          "results": rows})


def align(args):
    from pivot.sentences.align_eval import eval_eflomal, eval_ibm2, load_sets

    en, fr, n_gold, sure, possible = load_sets(args.data)
    res = {"gold_pairs": n_gold, "training_pairs": len(en)}
    res["ibm2"] = eval_ibm2(en, fr, n_gold, sure, possible, threads=args.threads)
    print("ibm2", res["ibm2"], flush=True)
    res["eflomal"] = eval_eflomal(en, fr, n_gold, sure, possible, runs=3)
    print("eflomal", {k: v for k, v in res["eflomal"].items() if k != "runs"}, flush=True)
    _write("sentences_align.json", res)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", required=False)
    ap.add_argument("--work", help="the build's work dir (its LMs)")
    ap.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))
    ap.add_argument("--tune", action="store_true")
    ap.add_argument("--tune-n", type=int, default=0, help="first N train positives only (0: all 2,753)")
    ap.add_argument("--grid", help="JSON grid replacing the default one, e.g. '{\"lm\": [0.5, 1], \"identity\": [1, 2]}'")
    ap.add_argument("--tune-rules", action="store_true",
                    help="fit the rule model and tune its weights and gate on the MSRP train positives")
    ap.add_argument("--rules-out", help="where --tune-rules saves the rule model (outside the repository)")
    ap.add_argument("--rules", help="rule model for --generation (the file --tune-rules wrote)")
    ap.add_argument("--generation", action="store_true")
    ap.add_argument("--gen-n", type=int, default=0, help="first N test positives only (0: all)")
    ap.add_argument("--weights", help="decoder weights JSON (default: pivot's defaults)")
    ap.add_argument("--domain-model", default="ml-weighted-ppl")
    ap.add_argument("--identify", action="store_true")
    ap.add_argument("--identify-model", default="general",
                    help="DB feature blocks of --identify (chosen by --identify-cv on the train pairs)")
    ap.add_argument("--identify-cv", nargs="*", default=[],
                    help="nested CV on the MSRP TRAIN pairs only (outer 5-fold x 2 seeds, the usual inner C "
                         "search) of string-only vs string+DB for these DB settings: sentences_identify_cv.json")
    ap.add_argument("--identify-models", nargs="*", default=[],
                    help="also compare these models' DB features (sentences_identify_models.json)")
    ap.add_argument("--align", action="store_true")
    ap.add_argument("--threads", type=int, default=cores())
    args = ap.parse_args()
    if args.align:
        align(args)
    if args.tune or args.tune_rules or args.generation or args.identify or args.identify_cv:
        with ParaphraseDB(args.db) as db:
            if args.tune:
                tune(args, db)
            if args.tune_rules:
                tune_rules(args, db)
            if args.generation:
                generation(args, db)
            if args.identify_cv:
                identify_cv(args, db)
            if args.identify:
                identify(args, db)


if __name__ == "__main__":
    main()
