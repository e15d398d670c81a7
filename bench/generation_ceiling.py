"""How precise must a rewrite selector be for iBLEU to pay on MSRP? The generation ceiling.

    python bench/generation_ceiling.py --db bio.db --work work/bio --data ../shared/data
        [--json bench/results/generation_ceiling.json]

iBLEU = 0.9 · BLEU(out, ref) − 0.1 · BLEU(out, src). A rewrite of source words that occur in
the reference removes matched reference n-grams, worth about 9 times what it gains against the
source; a rewrite of words that the reference does not hold (`harmless_label`) removes none and
only gains. Everything here runs on the MSRP **training** positives (2,753 pairs: sentence 1 the
source, sentence 2 the reference), with the database's lattices (General, k 8, the decoder's
filters), **one rewrite per changed sentence**, and outputs made by the decoder's own
true-casing and detokenisation:

1. **break-even precision** (oracle labels): for the sentences whose lattice holds both a
   harmless and a harmful option, half of all sentences are changed, a share p of them with a
   harmless option (the best by p(e2|e1)) and the rest with a harmful one (seeded draw), for p
   from 0.5 to 1; the p at which iBLEU meets the identity's is what any selector must reach;
2. **oracle frontier**: only harmless options, as many sentences as hold one;
3. **selectors** that see only what a decoder sees (the option's 15 rule-model features and 9
   context features, the training statistics cross-fitted in 5 folds): a logistic regression and
   gradient-boosted trees predicting *harmless* and *good* (rules.option_label), cross-validated
   by the same folds; each sentence's best-scored option, sentences ranked by that score, iBLEU
   and the selector's precision (share of harmless rewrites) at each share changed.
"""
import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
from _measure import write_json  # noqa: E402

from pivot.sentences import generation_eval as G  # noqa: E402
from pivot.sentences.msrp import read_msrp  # noqa: E402
from pivot.sentences.paraphrase import LanguageModel, Paraphraser, _cased_tokens, resolve_lm  # noqa: E402
from pivot.sentences.rewrite import Weights  # noqa: E402
from pivot.sentences.rules import (CONTEXT_FEATURES, FEATURES, _grams, fold_of, harmless_label,  # noqa: E402
                                   option_label, statistics_folds)
from pivot.store.db import ParaphraseDB  # noqa: E402

SHARES = [0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0]
PRECISIONS = [0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0]
FOLDS = 5


def options_table(pairs, lattices, table, cased, seed=0):
    """Every non-identity option with its features (statistics of the other folds) and labels."""
    rows = []
    for inside, stats in statistics_folds(pairs, lattices, seed, FOLDS):
        for i in inside:
            src, ref = pairs[i]
            words, grams = set(ref), _grams(ref)
            for opts in lattices[i]:
                for o in opts:
                    if not o.identity:
                        x = stats.features(table, src, o) + stats.context_features(src, o, cased[i])
                        rows.append((int(i), o, x, harmless_label(src, o.start, o.end, words),
                                     option_label(src, o.start, o.end, o.out, grams)))
    rows.sort(key=lambda r: (r[0], r[1].start, r[1].end, r[1].out))
    return rows


def one_edit(para, tokens, text, lattice, option) -> str:
    """The source with `option` its only rewrite, true-cased and detokenised like the decoder's."""
    only = [[o for o in opts if o.identity or o is option] for opts in lattice]
    return para.decode_tokens(tokens, 1, weights=Weights(lm=0.0, tm=0.0), source_text=text, lattice=only)[0].text


def frontier(src, ref, edits, order, harmless, shares=SHARES):
    """iBLEU when the first share of `order` (sentence indices) take their edit."""
    rows = []
    for share in shares:
        top = order[:int(round(share * len(src)))]
        chosen = set(top)
        outs = [edits[i] if i in chosen else src[i] for i in range(len(src))]
        rows.append({"share": share, "sentences": len(top), **G.score_system(outs, src, ref),
                     "precision": round(sum(harmless[i] for i in top) / max(len(top), 1), 4)})
    return rows


def classifier(kind, seed):
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if kind == "logistic":
        return make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=3000))
    return HistGradientBoostingClassifier(max_iter=200, learning_rate=0.05, random_state=seed)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--work")
    ap.add_argument("--data", default=os.environ.get("PIVOT_DATA", "../shared/data"))
    ap.add_argument("--json", default=os.path.join(HERE, "results", "generation_ceiling.json"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    t0 = time.perf_counter()
    db = ParaphraseDB(args.db)
    lm_path = resolve_lm(db, args.db, "general", None, args.work)
    para = Paraphraser(db, "general", LanguageModel(lm_path), require_change=True)
    gold = [p for p in read_msrp(os.path.join(args.data, "gold", "msrp", "msr_paraphrase_train.txt")) if p.label == 1]
    src, ref = [p.s1 for p in gold], [p.s2 for p in gold]
    toks = [para.normalize(s) for s in src]
    pairs = list(zip(toks, [para.normalize(r) for r in ref]))
    cased = [_cased_tokens(s, para.lang) for s in src]
    lattices = [para.lattice(t) for t in toks]
    rows = options_table(pairs, lattices, para.table, cased, args.seed)
    fold = fold_of(len(pairs), args.seed, FOLDS)
    sent = np.array([r[0] for r in rows])
    x = np.array([r[2] for r in rows])
    y = {"harmless": np.array([r[3] for r in rows], dtype=int), "good": np.array([r[4] for r in rows], dtype=int)}
    n = len(src)
    identity = G.score_system(src, src, ref)
    print("identity", identity, "options", len(rows), flush=True)

    # oracle options: per sentence the best harmless and the best harmful option by p(e2|e1)
    best_h, best_x = {}, {}
    for k, r in enumerate(rows):
        target = best_h if r[3] else best_x
        if r[0] not in target or r[1].logp > rows[target[r[0]]][1].logp:
            target[r[0]] = k
    edit = {}

    def edit_of(k):
        if k not in edit:
            i = rows[k][0]
            edit[k] = one_edit(para, toks[i], src[i], lattices[i], rows[k][1])
        return edit[k]

    rng = np.random.default_rng(args.seed)
    both = [i for i in range(n) if i in best_h and i in best_x]
    half = [int(i) for i in rng.permutation(both)[:int(round(0.5 * n))]]
    break_even = []
    for p in PRECISIONS:
        n_h = int(round(p * len(half)))
        outs = list(src)
        for j, i in enumerate(half):
            outs[i] = edit_of(best_h[i] if j < n_h else best_x[i])
        break_even.append({"precision": p, "sentences": len(half), **G.score_system(outs, src, ref)})
        print("break-even", break_even[-1], flush=True)
    target = identity["ibleu"]
    met = [k for k in range(1, len(break_even)) if break_even[k]["ibleu"] >= target > break_even[k - 1]["ibleu"]]
    needed = None
    if met:     # linear between the two precisions around the identity's iBLEU
        lo, hi = break_even[met[0] - 1], break_even[met[0]]
        needed = round(lo["precision"] + (hi["precision"] - lo["precision"]) * (target - lo["ibleu"])
                       / (hi["ibleu"] - lo["ibleu"]), 3)
    print("break-even precision", needed, flush=True)
    order_h = sorted(best_h, key=lambda i: (-rows[best_h[i]][1].logp, i))
    oracle = frontier(src, ref, {i: edit_of(best_h[i]) for i in order_h}, order_h,
                      {i: True for i in order_h}, [s for s in SHARES if s * n <= len(order_h)] + [len(order_h) / n])
    print("oracle", oracle[-1], flush=True)

    selectors = []
    for kind in ("logistic", "boosted trees"):
        prob = {}
        for label in ("harmless", "good"):
            p = np.zeros(len(rows))
            for f in range(FOLDS):
                train = fold[sent] != f
                model = classifier(kind, args.seed).fit(x[train], y[label][train])
                p[~train] = model.predict_proba(x[~train])[:, 1]
            prob[label] = p
        for by, score in (("harmless", prob["harmless"]), ("good", prob["good"]),
                              ("harmless + good", prob["harmless"] + prob["good"])):
            best = {}
            for k, s in enumerate(score):
                if sent[k] not in best or s > score[best[sent[k]]]:
                    best[sent[k]] = k
            order = sorted(best, key=lambda i: (-score[best[i]], i))
            edits = {i: edit_of(best[i]) for i in order}
            harmless = {i: bool(rows[best[i]][3]) for i in order}
            curve = frontier(src, ref, edits, order, harmless)
            selectors.append({"classifier": kind, "selects by": by, "frontier": curve})
            print(kind, by, [(r["share"], r["ibleu"], r["precision"]) for r in curve], flush=True)

    out = {"set": f"MSRP train positives ({n})", "db": os.path.abspath(args.db),
           "signature": db.meta.get("signature"),
           "lm": str(lm_path), "method": __doc__, "features": FEATURES + CONTEXT_FEATURES,
           "options": len(rows), "harmless_rate": round(float(y["harmless"].mean()), 4),
           "good_rate": round(float(y["good"].mean()), 4),
           "sentences_with_a_harmless_option": len(best_h), "sentences_with_both": len(both),
           "identity": identity, "break_even_precision": needed, "break_even": break_even,
           "oracle_harmless": oracle, "selectors": selectors,
           "seconds": round(time.perf_counter() - t0, 1)}
    write_json(args.json, out)


if __name__ == "__main__":
    main()
