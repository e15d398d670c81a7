"""PPDB 2.0's layer of a built database: the learned score against p(e2|e1), the relations, the fit.

    python bench/bench_ppdb2.py bio.db [--data DIR] [-o bench/results/ppdb2.json]

* Score: Spearman's rho with the PPDB 2.0 human ratings (``[ppdb2] ratings`` of the recipe the
  database records) of the learned score (``ppdb2``) and of General's p(e2|e1), on the pairs the
  database stores (each stored direction of a rated pair, as the build fitted), separately on
  the dev half (never seen by the fit) and the train half, split as the build split (the
  recorded seed and dev fraction, pivot.eval.gold.pair_key). Computed here from the database
  and the ratings file, not copied from the build's record (which the JSON shows beside it).
  p(e2|e1) of a pair General does not propose counts as 0. A 1,000-resample bootstrap of the
  dev rows gives an interval of the difference.
* Relations: the held-out evaluation the build recorded (meta "relations": per class precision,
  recall, F1; macro-F1 of the classifier, of the string-features-only classifier and of the
  majority class), and the relation shares over all stored pairs and the visible ones.
* The coefficients of both fits (per training standard deviation) and the selection tables.

The database is opened read-only; nothing is written but the JSON.
"""
import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import write_json  # noqa: E402

from pivot import recipes  # noqa: E402
from pivot.eval.gold import pair_key, read_gold  # noqa: E402
from pivot.hashes import unit_hash  # noqa: E402
from pivot.pipeline.ppdb2 import spearman  # noqa: E402
from pivot.store.db import ParaphraseDB  # noqa: E402
from pivot.store.write import HIDDEN_FORMS, RELATION_NAMES  # noqa: E402
from pivot.text import normalize_many  # noqa: E402


def rated_rows(db: ParaphraseDB, ratings_path, seed: int, dev_fraction: float):
    """(rating, ppdb2, p_general, is_dev) per stored direction of each rated pair (first rating)."""
    rated = read_gold(ratings_path, "ppdb-human")
    norm = normalize_many([t for a, b, _ in rated for t in (a, b)], "en")
    general = db.model_info(db.models[0])["column"]
    out, seen = [], set()
    for (_, _, y), a, b in zip(rated, norm[0::2], norm[1::2]):
        if a == b:
            continue
        ia, ib = db.phrase_id(a, normalize=False), db.phrase_id(b, normalize=False)
        if ia is None or ib is None:
            continue
        dev = unit_hash(pair_key(a, b), seed) < dev_fraction
        for x, z in ((ia, ib), (ib, ia)):
            row = db._conn.execute(f"SELECT ppdb2, {general} FROM pair WHERE e1 = ? AND e2 = ?", (x, z)).fetchone()
            if row is None or (x, z) in seen:
                continue
            seen.add((x, z))
            out.append((y, row[0], row[1] or 0.0, dev))
    return np.array(out, dtype=np.float64).reshape(-1, 4)


def bootstrap_delta(y, a, b, n_boot: int = 1000, seed: int = 0):
    """95% percentile interval of rho(a, y) - rho(b, y) over resampled rows."""
    rng = np.random.default_rng(seed)
    deltas = []
    for _ in range(n_boot):
        i = rng.integers(0, len(y), len(y))
        deltas.append(spearman(a[i], y[i]) - spearman(b[i], y[i]))
    lo, hi = np.nanpercentile(deltas, [2.5, 97.5])
    return [round(float(lo), 4), round(float(hi), 4)]


def relation_shares(db: ParaphraseDB) -> dict:
    out = {}
    for name, where in (("all", ""), ("visible", f"WHERE (form & {HIDDEN_FORMS}) = 0")):
        counts = dict(db._conn.execute(f"SELECT relation, count(*) FROM pair {where} GROUP BY relation"))
        total = sum(counts.values())
        out[name] = {RELATION_NAMES[k]: round(v / total, 4) for k, v in sorted(counts.items())}
        out[name]["n_pairs"] = total
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("db")
    ap.add_argument("--data", default=None, help="data root (default: $PIVOT_DATA)")
    ap.add_argument("-o", "--output", default=str(Path(__file__).resolve().parent / "results" / "ppdb2.json"))
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    db = ParaphraseDB(args.db)
    meta = db.meta.get("ppdb2") or {}
    if not meta.get("learned"):
        sys.exit(f"{args.db}: no learned score (meta ppdb2: {meta})")
    params = db.meta["recipe"]["ppdb2"]
    root = recipes.resolve_data_root(args.data)
    rows = rated_rows(db, root / params["ratings"], params["seed"], params["dev_fraction"])
    y, score, p_general, dev = rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3] > 0
    spearman_figures = {}
    for part, mask in (("dev", dev), ("train", ~dev), ("all", np.ones(len(y), bool))):
        spearman_figures[part] = {"n_rows": int(mask.sum()), "ppdb2": round(spearman(score[mask], y[mask]), 4),
                                  "p_general": round(spearman(p_general[mask], y[mask]), 4)}
    spearman_figures["dev"]["delta_ci95"] = bootstrap_delta(y[dev], score[dev], p_general[dev])
    rel = db.meta.get("relations") or {}
    ev = rel.get("eval", {})
    result = {
        "db": os.path.abspath(args.db), "signature": db.signature,
        "score": {"spearman": spearman_figures, "recorded_by_build": {k: meta.get(k) for k in ("train", "dev")},
                  "selection": meta.get("selection"), "coefficients": meta["model"]["coefficients"],
                  "intercept": meta["model"]["intercept"], "dropped": meta["model"]["dropped"],
                  "sizes": meta.get("sizes"), "size_pairs": meta.get("size_pairs")},
        "relations": {"macro_f1": {k: ev.get(k, {}).get("macro_f1") for k in ("full", "string_only", "majority")},
                      "full_minus_string_macro_f1": ev.get("full_minus_string_macro_f1"),
                      "per_class": {k: ev.get(k, {}).get("per_class") for k in ("full", "string_only", "majority")},
                      "majority_class": ev.get("majority_class"),
                      "n_train": rel.get("n_train"), "n_test": rel.get("n_test"),
                      "train_classes": rel.get("train_classes"), "test_classes": rel.get("test_classes"),
                      "split": rel.get("split"), "selection": rel.get("selection"),
                      "string_only_selection": rel.get("string_only_selection"),
                      "coefficients": rel.get("model", {}).get("coefficients"),
                      "shares": relation_shares(db)},
        "forms": db.meta.get("forms"), "stage_seconds": db.meta.get("stage_seconds"),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    s = spearman_figures
    print(f"Spearman on dev ({s['dev']['n_rows']} rows): ppdb2 {s['dev']['ppdb2']:.3f}, p(e2|e1) "
          f"{s['dev']['p_general']:.3f} (delta 95% {s['dev']['delta_ci95']}); train ({s['train']['n_rows']}, "
          f"in-sample): {s['train']['ppdb2']:.3f} vs {s['train']['p_general']:.3f}; 5-fold CV on train "
          f"{meta['selection']['cv_spearman']:.3f}")
    m = result["relations"]["macro_f1"]
    print(f"relations macro-F1 on held-out synsets: classifier {m['full']}, string-only {m['string_only']}, "
          f"majority {m['majority']}")
    write_json(args.output, result)


if __name__ == "__main__":
    main()
