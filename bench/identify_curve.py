"""What the database adds to paraphrase identification, against the size of the pivot bitext.

    python bench/identify_curve.py --data ../shared/data --dbs A.db B.db ...
        [--json bench/results/identify_curve.json]

For each database (a build of any recipe; its bitext size is read from its meta table): the
MSRP **training** pairs only (4,076; the test set is not read), string features alone and string
+ the database's General block (`pivot identify`'s features), under the nested cross-validation
of `bench_sentences.py --identify-cv` (outer stratified 5-fold with seeds 100 and 101, the same
10 folds for every database; inside, the classifier's own 5-fold C search). Reported per
database: the gain of every outer fold (paired: the same fold, with and without the block), its
mean and standard deviation, and how many train pairs get at least one paraphrase link that
aligns a content word. A least-squares line of the mean gain against log2(sentence pairs) gives
the bitext size at which the gain would reach +1 point, if the trend held; the same line through
each outer fold's gains shows how far the slope moves with the folds.
"""
import argparse
import math
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
from _measure import write_json  # noqa: E402

from pivot.sentences.identify import DB_FEATURES, ParaphraseAligner, featurize, make_classifier  # noqa: E402
from pivot.sentences.msrp import read_msrp  # noqa: E402
from pivot.store.db import ParaphraseDB  # noqa: E402

SEEDS = (100, 101)


def fold_accuracies(x, y):
    """Accuracy of every outer fold (5 folds for each seed of SEEDS, in that order)."""
    from sklearn.model_selection import StratifiedKFold

    acc = []
    for seed in SEEDS:
        for train, test in StratifiedKFold(5, shuffle=True, random_state=seed).split(x, y):
            clf = make_classifier("logreg", 0).fit(x[train], y[train])
            acc.append(float((clf.predict(x[test]) == y[test]).mean()))
    return np.array(acc)


def sentence_pairs(db) -> int:
    """Sentence pairs the build kept, over its pivot languages (meta corpus_stats)."""
    return sum(int(lang["total"]["kept"]) for lang in db.meta["corpus_stats"].values())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dbs", nargs="+", required=True)
    ap.add_argument("--model", default="general")
    ap.add_argument("--data", default=os.environ.get("PIVOT_DATA", "../shared/data"))
    ap.add_argument("--json", default=os.path.join(HERE, "results", "identify_curve.json"))
    args = ap.parse_args()
    train = read_msrp(os.path.join(args.data, "gold", "msrp", "msr_paraphrase_train.txt"))
    y = np.array([p.label for p in train])
    xs, _ = featurize(train, None)
    base = fold_accuracies(xs, y)
    print("string only", round(100 * base.mean(), 2), flush=True)
    rows = []
    for path in args.dbs:
        t0 = time.perf_counter()
        with ParaphraseDB(path) as db:
            _, xd = featurize(train, ParaphraseAligner(db, args.model))
            acc = fold_accuracies(np.hstack([xs, xd]), y)
            gain = 100 * (acc - base)
            linked = xd[:, DB_FEATURES.index("para_aligned_words")] > 0
            rows.append({"db": os.path.abspath(path), "signature": db.meta.get("signature"),
                         "pivot_languages": len(db.meta["corpus_stats"]), "sentence_pairs": sentence_pairs(db),
                         "accuracy": round(float(100 * acc.mean()), 3), "gain": round(float(gain.mean()), 3),
                         "gain_sd": round(float(gain.std(ddof=1)), 3), "fold_gains": [round(float(g), 3) for g in gain],
                         "pairs_with_a_content_link": round(float(linked.mean()), 4),
                         "seconds": round(time.perf_counter() - t0, 1)})
        print({k: v for k, v in rows[-1].items() if k not in ("fold_gains", "signature")}, flush=True)
    fit = None
    if len({r["sentence_pairs"] for r in rows}) > 1:
        lx = np.array([math.log2(r["sentence_pairs"]) for r in rows])
        slope, icept = np.polyfit(lx, np.array([r["gain"] for r in rows]), 1)
        # the same line through each outer fold's gains: how much the slope moves with the folds
        per_fold = [float(np.polyfit(lx, np.array([r["fold_gains"][k] for r in rows]), 1)[0])
                    for k in range(len(base))]
        fit = {"gain_per_doubling": round(float(slope), 3), "intercept": round(float(icept), 3),
               "sentence_pairs_for_plus_1": (round(2 ** ((1 - icept) / slope)) if slope > 0 else None),
               "fold_slopes": [round(b, 3) for b in per_fold],
               "fold_slope_sd": round(float(np.std(per_fold, ddof=1)), 3)}
        print("fit", fit, flush=True)
    out = {"set": f"MSRP train pairs only ({len(train)})", "method": __doc__, "model": args.model,
           "string_only": {"accuracy": round(float(100 * base.mean()), 3),
                           "fold_accuracies": [round(float(100 * a), 3) for a in base]},
           "databases": rows, "log2_fit": fit}
    write_json(args.json, out)


if __name__ == "__main__":
    main()
