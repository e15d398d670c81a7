"""Database write: wall time and memory of write_database on synthetic pairs the size of a real build.

    /usr/bin/time -v python bench/bench_write.py OUT.db [--pairs 5000000] [--models 8] [--seed 0]

Synthetic data (seeded): English phrases with ~25 paraphrases each, up to 3 pivots per pair
out of 1M foreign phrases, one General column scoring every pair and models-1 columns scoring
about 70 % of them. Prints the write's wall time and the process's peak RSS before and after
the write (the difference is the writer's own peak; /usr/bin/time -v reports the same peak).
The result is a valid database for bench/bench_lookup.py.
"""
import argparse
import json
import os
import resource
import time

import numpy as np

from pivot.store.write import write_database


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def synthetic(n_pairs: int, n_models: int, seed: int):
    rng = np.random.default_rng(seed)
    per_e1 = 25
    n_e1 = n_pairs // per_e1
    n_phrases = 2 * n_e1
    e1 = np.repeat(np.arange(n_e1, dtype=np.int32), per_e1)
    e2 = rng.integers(0, n_phrases, len(e1), dtype=np.int32)
    key = np.unique(e1.astype(np.int64) << 32 | e2)  # pairs must be distinct
    key = key[(key >> 32) != (key & 0xFFFFFFFF)]
    rng.shuffle(key)  # the writer sorts: do not hand it key order
    e1, e2 = (key >> 32).astype(np.int32), (key & 0xFFFFFFFF).astype(np.int32)
    n = len(e1)
    n_foreign = 1_000_000
    pivots = rng.integers(0, n_foreign, (n, 3), dtype=np.int32)
    n_piv = rng.integers(1, 6, n).astype(np.int32)
    pivots[np.arange(3)[None, :] >= n_piv[:, None]] = -1
    scores = rng.random((n, n_models))
    scores[:, 1:][rng.random((n, n_models - 1)) < 0.3] = 0.0
    used_f = np.unique(pivots[pivots >= 0])
    foreign = {f: f"fr:mot{f}" for f in used_f.tolist()}
    phrases = [f"phrase {i}" for i in range(n_phrases)]
    counts = rng.integers(1, 1000, n_phrases)
    models = [{"name": "general" if j == 0 else f"m{j}", "kind": "pivot", "description": "", "params": {}}
              for j in range(n_models)]
    return dict(phrases=phrases, phrase_counts=counts, e1=e1, e2=e2, n_pivots=n_piv, pivots=pivots,
                foreign=foreign, models=models, scores=scores,
                meta={"signature": "bench", "normalization": {"lang": "en"}})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--pairs", type=int, default=5_000_000)
    ap.add_argument("--models", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    data = synthetic(args.pairs, args.models, args.seed)
    rss_before = peak_rss_mb()
    t0 = time.perf_counter()
    write_database(args.out, **data)
    seconds = time.perf_counter() - t0
    print(json.dumps({"pairs": int(len(data["e1"])), "models": args.models, "write_s": round(seconds, 2),
                      "peak_rss_before_write_mb": round(rss_before), "peak_rss_mb": round(peak_rss_mb()),
                      "file_mb": round(os.path.getsize(args.out) / 2**20)}, indent=1))


if __name__ == "__main__":
    main()
