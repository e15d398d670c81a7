"""How many gold pairs pivoting on a build's bitext can propose at all: coverage against pruning.

    python bench/coverage_ceiling.py WORK_DIR DB --domain bio --data ../shared/data
        [--json bench/results/coverage_ceiling.json]

The General model's p(e2|e1) is recomputed for the pairs of every gold set of the recipe's
[eval] (as `pivot eval` reads them, the database's tuning pairs dropped) from the build's
*unpruned* merged phrase table under several settings of the pipeline's pruning rules, from
the recipe's down to none (pivot.eval.ceiling has the rules); a gold pair counts as proposed
when either direction is stored. The recipe's own setting
must give the database's own coverage (checked: the script stops if it does not), which ties
this recomputation to the pipeline. For each setting the database's size is projected from a
seeded sample of English phrases (their pairs above the floor, times the phrases, times the
database's bytes per pair).
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from _measure import bytes_per_pair, newest_stage, write_json  # noqa: E402

from pivot.eval import evidence  # noqa: E402
from pivot.eval.ceiling import Pruning, UnprunedTable  # noqa: E402
from pivot.eval.evaluate import _symmetric_scores  # noqa: E402
from pivot.pipeline.corpus import Vocab  # noqa: E402
from pivot.recipes import load_recipe, recipe_path  # noqa: E402
from pivot.store.db import ParaphraseDB  # noqa: E402


def recipe_setting(db) -> Pruning:
    """The database's own pruning (its meta table's record of the build's pruning)."""
    pv = db.meta["pruning"]
    return Pruning(pv["min_p_f_given_e"], pv["min_p_e_given_f"], pv["max_e_per_f"] or None,
                   pv["min_phrase_count"], pv["min_p_e2_given_e1"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("work", type=Path, help="the build's work dir (work/DOMAIN)")
    ap.add_argument("db", type=Path, help="the database built from it")
    ap.add_argument("--domain", default="bio", help="the recipe whose [eval] gold sets are counted")
    ap.add_argument("--data", required=True)
    ap.add_argument("--sample", type=int, default=3000, help="English phrases sampled for the size projection")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=HERE / "results" / "coverage_ceiling.json")
    args = ap.parse_args()
    t0 = time.time()

    if not args.db.is_file():
        sys.exit(f"{args.db}: no such database")
    translation, encode = newest_stage(args.work, "translation"), newest_stage(args.work, "encode")
    vocab = Vocab.load(encode / "vocab.en")
    table = UnprunedTable.from_translation(translation)
    key_of = {tuple(int(x) for x in row if x >= 0): k for k, row in zip(table.dict_key, table.dict_rows)}

    def key(text):
        ids = tuple(vocab[w] if w in vocab else -1 for w in text.split())
        return key_of.get(ids, np.iinfo(np.uint64).max)

    db = ParaphraseDB(args.db)
    lang = db.meta.get("normalization", {}).get("lang", "en")
    golds = evidence.recipe_golds(load_recipe(recipe_path(args.domain)), Path(args.data), lang,
                                  evidence._tuning_keys(db))
    rows = {name: table.row_of(np.array([[key(x), key(y)] for x, y in g.pairs], dtype=np.uint64).ravel()
                               ).reshape(-1, 2) for name, g in golds.items()}
    own = recipe_setting(db)
    settings = [("the recipe's", own),
                ("floor 1e-4", Pruning(own.min_p_f_given_e, own.min_p_e_given_f, own.max_e_per_f,
                                       own.min_phrase_count, 1e-4)),
                ("table 1e-4, no cap", Pruning(1e-4, 1e-4, None, own.min_phrase_count, 1e-4)),
                ("table 1e-5, no cap", Pruning(1e-5, 1e-5, None, 1, 1e-5)),
                ("no pruning", Pruning(0.0, 0.0, None, 1, 0.0))]
    per_pair = bytes_per_pair(args.db)
    sample = np.sort(np.random.default_rng(args.seed).choice(len(table.e_uniq), size=min(args.sample, len(table.e_uniq)),
                                                             replace=False))
    out = {"work": str(args.work), "translation": translation.name, "database": str(args.db),
           "signature": db.signature, "table_rows": len(table), "english_phrases": int(len(table.e_uniq)),
           "bytes_per_pair": per_pair, "sample": len(sample), "seed": args.seed, "settings": [], "golds": {}}
    for name, s in settings:
        mats = table.matrices(s)
        n_pairs = table.projected_pairs(s, sample, mats)
        entry = {"name": name, **s.__dict__, "kept_entries": int(mats[0].nnz),
                 "general_pairs_projected": round(n_pairs),
                 # General's pairs only (the other models add some): a lower bound of the file
                 "db_gb_projected_general_only": n_pairs * per_pair / 1e9, "golds": {}}
        for gname, g in golds.items():
            stored = table.proposed(rows[gname], s, mats)
            y = np.asarray(g.labels, dtype=bool)
            entry["golds"][gname] = {"pairs": len(g.pairs), "positives": int(y.sum()),
                                     "proposed": int(stored.sum()), "positives_proposed": int((stored & y).sum()),
                                     "both_phrases_in_table": int((rows[gname] >= 0).all(axis=1).sum())}
        out["settings"].append(entry)
        print(f"{name:22s} kept {entry['kept_entries']:>10,}  General pairs ≈ {n_pairs:>14,.0f} "
              f"(≥ {entry['db_gb_projected_general_only']:.2f} GB)  " + "  ".join(
                  f"{gn}: {v['proposed']}/{v['pairs']} ({v['positives_proposed']}+)" for gn, v in entry["golds"].items()),
              flush=True)

    # the recipe's setting must reproduce the database's own General coverage
    for gname, g in golds.items():
        have = int((~np.isnan(_symmetric_scores(db, g.pairs, db.models[0]))).sum())
        got = out["settings"][0]["golds"][gname]["proposed"]
        out["golds"][gname] = {"pairs": len(g.pairs), "positives": int(np.sum(g.labels)),
                               "database_general_proposed": have}
        if have != got:
            sys.exit(f"{gname}: the recomputation proposes {got} pairs at the recipe's setting, the database {have}")
    out["seconds"] = round(time.time() - t0, 1)
    write_json(args.json, out)


if __name__ == "__main__":
    main()
