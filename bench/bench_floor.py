"""How many pairs each candidate floor on p(e2|e1) keeps: the data for choosing min_p_e2_given_e1.

    python bench/bench_floor.py WORK_DIR [--floors 0 1e-4 3e-4 1e-3 3e-3 1e-2] [--db DB]

Reads the pivot structure of the newest finished ``translation-*`` artifact of a build's work
directory (each model already pruned on its own counts) and runs the pivot product over all
English rows with the smallest candidate floor and no top-N, in row ranges of equal work (memory:
one range's output). For every candidate floor it reports the pairs stored (a pair is stored when
some model's p_k(e2|e1) reaches the floor), each model's pairs, the phrases with at least one
paraphrase, and the largest number of pairs of one phrase (the rows a lookup sorts, worst case).
Since sum over e2 of p_k(e2|e1) <= 1, a floor t bounds a phrase's pairs per model by 1/t.
With ``--db`` (a built database), the database size is projected at its bytes per stored pair.
Results go to ``bench/results/floor.json``.
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _measure import bytes_per_pair, newest_stage, write_json  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("work", type=Path)
    ap.add_argument("--floors", type=float, nargs="+", default=[0.0, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2])
    ap.add_argument("--db", type=Path, help="a database built from this work dir, for bytes per pair")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tasks", type=int, default=32, help="row ranges (bounds the memory of one pass)")
    ap.add_argument("--json", default=str(Path(__file__).parent / "results" / "floor.json"))
    args = ap.parse_args()

    from pivot._native import _counts
    from pivot.pipeline.pivoting import load_structure, row_ranges

    translation = newest_stage(args.work, "translation")
    z = load_structure(translation / "structure")
    floors = sorted(args.floors)
    K = z["p_fe"].shape[1]
    n_pairs = np.zeros(len(floors), np.int64)
    per_model = np.zeros((len(floors), K), np.int64)
    phrases = np.zeros(len(floors), np.int64)
    max_row = np.zeros(len(floors), np.int64)
    t0 = time.perf_counter()
    ranges = row_ranges(np.asarray(z["row_ptr"]), np.asarray(z["col_ptr"]), np.asarray(z["row_f"]), args.tasks)
    for lo, hi in ranges:
        e1, _, p, _, _ = _counts.pivot_product(z["row_ptr"], z["row_f"], z["p_fe"], z["col_ptr"], z["col_e"],
                                               z["p_ef"], 0, args.threads, 0, lo, hi, floors[0])
        best = p.max(axis=1) if len(p) else np.zeros(0)
        for i, t in enumerate(floors):
            keep = best >= t if t > 0 else best > 0
            n_pairs[i] += int(keep.sum())
            per_model[i] += ((p >= t) & (p > 0)).sum(axis=0)
            rows = np.bincount(e1[keep] - lo, minlength=hi - lo) if keep.any() else np.zeros(1, np.int64)
            phrases[i] += int((rows > 0).sum())
            max_row[i] = max(max_row[i], int(rows.max()))
        del e1, p, best
    per_pair = bytes_per_pair(args.db) if args.db else None
    out = {"translation": str(translation), "n_models": K, "seconds": round(time.perf_counter() - t0, 1),
           "bytes_per_pair": round(per_pair, 1) if per_pair else None,
           "floors": [{"floor": t, "pairs": int(n), "pairs_by_model": m.tolist(), "phrases_with_pairs": int(ph),
                       "max_pairs_of_a_phrase": int(mr),
                       "db_gib_projected": round(n * per_pair / 2**30, 2) if per_pair else None}
                      for t, n, m, ph, mr in zip(floors, n_pairs, per_model, phrases, max_row)]}
    print(json.dumps(out, indent=1))
    write_json(args.json, out)


if __name__ == "__main__":
    main()
