"""How many gold pairs pivoting on a build's bitext can propose at all: coverage against pruning.

    python bench/coverage_ceiling.py WORK_DIR DB --domain bio --data ../shared/data
        [--json bench/results/coverage_ceiling.json]

The General model's p(e2|e1) = sum_f p(e2|f) p(f|e1) is recomputed for the pairs of every gold
set of the recipe's [eval] (as `pivot eval` reads them, the database's tuning pairs dropped) from
the build's *unpruned* merged phrase table (the ``e-*`` bundles of its ``translation-*`` stage:
every (e, f) with its count c(e, f) and p(f|e) = c(e, f) / sum_f' c(e, f')), with
p(e|f) = c(e, f) / sum_e' c(e', f) over the whole table (the pipeline normalises before pruning,
as PPDB does). Then the pipeline's pruning rules (pivot.pipeline.translation) are applied under
several settings, from the recipe's down to none:

    keep (e, f) iff p(f|e) >= a, p(e|f) >= b, rank of c(e, f) among f's English phrases < cap
    (ties: the smaller English key) and support(e) >= m;  store (e1, e2) iff p(e2|e1) >= floor

and a gold pair counts as proposed when either direction is stored. The recipe's own setting
must give the database's own coverage (checked: the script stops if it does not), which ties
this recomputation to the pipeline. For each setting the database's size is projected from a
seeded sample of English phrases (their pairs above the floor, times the phrases, times the
database's bytes per pair).
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from pivot.eval import evidence  # noqa: E402
from pivot.pipeline.bundle import open_bundle  # noqa: E402
from pivot.pipeline.corpus import Vocab  # noqa: E402
from pivot.recipes import load_recipe, recipe_path  # noqa: E402
from pivot.store.db import ParaphraseDB  # noqa: E402

#: (name, a = min p(f|e), b = min p(e|f), cap = max English phrases per f, m = min support, floor)
SETTINGS = [
    ("recipe", 1e-3, 1e-3, 100, 2, 1e-3),
    ("floor 1e-4", 1e-3, 1e-3, 100, 2, 1e-4),
    ("table 1e-4, no cap", 1e-4, 1e-4, None, 2, 1e-4),
    ("table 1e-5, no cap", 1e-5, 1e-5, None, 1, 1e-5),
    ("no pruning", 0.0, 0.0, None, 1, 0.0),
]


def load_table(translation: Path):
    """General's column of the unpruned merged table: e_key, f_key, c, p(f|e), support(e),
    and the English dictionary (key -> token ids)."""
    cols = {"e": [], "f": [], "c": [], "pfe": [], "sup": []}
    dict_key, dict_rows = [], []
    for path in sorted(translation.glob("e-*.arrays")):
        with open_bundle(path) as b:
            dict_key.append(b["e_key"])
            dict_rows.append(b["e_rows"])
            q = 0
            while f"q{q}_e_key" in b:
                cols["e"].append(b[f"q{q}_e_key"])
                cols["f"].append(b[f"q{q}_f_key"])
                cols["c"].append(b[f"q{q}_counts"][:, 0].copy())
                cols["pfe"].append(b[f"q{q}_p_fe"][:, 0].copy())
                cols["sup"].append(b[f"q{q}_e_count"])
                q += 1
    t = {k: np.concatenate(v) for k, v in cols.items()}
    ok = t["c"] > 0
    t = {k: v[ok] for k, v in t.items()}
    return t, np.concatenate(dict_key), np.concatenate(dict_rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("work", type=Path, help="the build's work dir (work/DOMAIN)")
    ap.add_argument("db", type=Path, help="the database built from it")
    ap.add_argument("--domain", default="bio")
    ap.add_argument("--data", required=True)
    ap.add_argument("--sample", type=int, default=3000, help="English phrases sampled for the size projection")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=HERE / "results" / "coverage_ceiling.json")
    args = ap.parse_args()
    t0 = time.time()

    translation = max(args.work.glob("translation-*/DONE"), key=lambda p: p.stat().st_mtime).parent
    encode = max(args.work.glob("encode-*/DONE"), key=lambda p: p.stat().st_mtime).parent
    vocab = Vocab.load(encode / "vocab.en")
    t, dict_key, dict_rows = load_table(translation)
    n_rows = len(t["c"])

    # p(e|f) over the whole table
    f_uniq, f_idx = np.unique(t["f"], return_inverse=True)
    e_uniq, e_idx = np.unique(t["e"], return_inverse=True)
    c_f = np.bincount(f_idx, weights=t["c"], minlength=len(f_uniq))
    pef = t["c"] / c_f[f_idx]
    by_count = np.lexsort((t["e"], -t["c"], f_idx))   # per f: largest c(e, f) first, ties: smaller e key

    def rank_among(mask):
        """Rank of c(e, f) among f's English phrases that pass mask (rule (b) after rule (a))."""
        o = by_count[mask[by_count]]
        starts = np.searchsorted(f_idx[o], np.arange(len(f_uniq)))
        rank = np.full(n_rows, n_rows, dtype=np.int64)
        rank[o] = np.arange(len(o)) - starts[f_idx[o]]
        return rank

    db = ParaphraseDB(args.db)
    rec = load_recipe(recipe_path(args.domain))
    lang = db.meta.get("normalization", {}).get("lang", "en")
    golds = evidence.recipe_golds(rec, Path(args.data), lang, evidence._tuning_keys(db))
    key_of = {tuple(int(x) for x in row if x >= 0): k for k, row in zip(dict_key, dict_rows)}
    e_pos = {k: i for i, k in enumerate(e_uniq)}

    def phrase_index(text):
        ids = []
        for w in text.split():
            if w not in vocab:
                return -1
            ids.append(vocab[w])
        k = key_of.get(tuple(ids))
        return -1 if k is None else e_pos.get(k, -1)

    n_stored = db._conn.execute("SELECT COUNT(*) FROM pair").fetchone()[0]
    bytes_per_pair = args.db.stat().st_size / max(1, n_stored)
    rng = np.random.default_rng(args.seed)
    sample = np.sort(rng.choice(len(e_uniq), size=min(args.sample, len(e_uniq)), replace=False))
    out = {"work": str(args.work), "translation": translation.name, "database": str(args.db),
           "signature": db.signature, "table_rows": int(n_rows), "english_phrases": int(len(e_uniq)),
           "bytes_per_pair": bytes_per_pair, "sample": len(sample), "seed": args.seed, "settings": [], "golds": {}}
    for name, a, b, cap, m, floor in SETTINGS:
        keep = (t["pfe"] >= a) & (pef >= b) & (t["sup"] >= m)
        if cap is not None:
            keep &= rank_among(keep) < cap
        A = sp.csr_matrix((np.where(keep, t["pfe"], 0.0), (e_idx, f_idx)), shape=(len(e_uniq), len(f_uniq)))
        B = sp.csr_matrix((np.where(keep, pef, 0.0), (e_idx, f_idx)), shape=(len(e_uniq), len(f_uniq)))
        A.eliminate_zeros()
        B.eliminate_zeros()
        # projected size: the sampled phrases' pairs p(e2|e1) >= floor (e2 != e1), scaled up
        P = (A[sample] @ B.T).tocoo()
        n_s = int(((P.data >= floor) & (P.data > 0) & (sample[P.row] != P.col)).sum())
        n_pairs = n_s * len(e_uniq) / len(sample)
        entry = {"name": name, "min_p_f_given_e": a, "min_p_e_given_f": b, "max_e_per_f": cap,
                 "min_phrase_count": m, "min_p_e2_given_e1": floor, "kept_entries": int(keep.sum()),
                 "general_pairs_projected": round(n_pairs),
                 # General's pairs only (the other models add some): a lower bound of the file
                 "db_gb_projected_general_only": n_pairs * bytes_per_pair / 1e9,
                 "golds": {}}
        for gname, g in golds.items():
            idx = np.array([[phrase_index(x), phrase_index(y)] for x, y in g.pairs], dtype=np.int64)
            ok = (idx >= 0).all(axis=1)
            fwd = np.zeros(len(idx))
            rev = np.zeros(len(idx))
            if ok.any():
                i, j = idx[ok, 0], idx[ok, 1]
                fwd[ok] = np.asarray(A[i].multiply(B[j]).sum(axis=1)).ravel()   # p(y|x)
                rev[ok] = np.asarray(A[j].multiply(B[i]).sum(axis=1)).ravel()   # p(x|y)
            stored = ((fwd >= floor) & (fwd > 0)) | ((rev >= floor) & (rev > 0))
            y = np.asarray(g.labels, dtype=bool)
            entry["golds"][gname] = {"pairs": len(g.pairs), "positives": int(y.sum()),
                                     "proposed": int(stored.sum()), "positives_proposed": int((stored & y).sum()),
                                     "both_phrases_in_table": int(ok.sum())}
            out["golds"].setdefault(gname, {"pairs": len(g.pairs), "positives": int(y.sum())})
        out["settings"].append(entry)
        print(f"{name:22s} kept {entry['kept_entries']:>10,}  General pairs ≈ {n_pairs:>14,.0f} "
              f"(≥ {entry['db_gb_projected_general_only']:.2f} GB)  " + "  ".join(
                  f"{gn}: {v['proposed']}/{v['pairs']} ({v['positives_proposed']}+)" for gn, v in entry["golds"].items()),
              flush=True)

    # the recipe's setting must reproduce the database's own General coverage
    from pivot.eval.evaluate import _symmetric_scores
    for gname, g in golds.items():
        s = _symmetric_scores(db, g.pairs, db.models[0])
        have = int((~np.isnan(s)).sum())
        got = out["settings"][0]["golds"][gname]["proposed"]
        out["golds"][gname]["database_general_proposed"] = have
        if have != got:
            sys.exit(f"{gname}: the recomputation proposes {got} pairs at the recipe's setting, the database {have}")
    out["seconds"] = round(time.time() - t0, 1)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.json} ({out['seconds']} s)")


if __name__ == "__main__":
    main()
