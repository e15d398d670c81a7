"""What two workers can gain on this machine: one task alone vs two copies at once.

    python bench/bench_ceiling.py [--repeat 3]

Three kinds of work, each run in two separate processes (like two Dask workers): once alone,
then two copies at the same time. Throughput gain = 2 x (seconds alone) / (seconds of the
slower copy when two run). Two independent cores give 2.0 on every kind; where the cores share
memory bandwidth, work that streams arrays through memory gains less. The three kinds:

* cache-bound: arithmetic on a 32 KiB array that stays in the core's cache;
* memory-bound: a multiply streamed over 400 MB arrays (the bandwidth one core can draw);
* sort + gather: a stable argsort of 3M 64-bit keys and the gather of 8 float64 columns by it,
  the inner step of the build's merges (pivot.pipeline.translation).

The build's sharded stages mix these, so their speed-up at 2 workers is bounded by the mix.
Results: bench/results/ceiling.json (every repeat, the median gain per kind).
"""
import argparse
import json
import os
import statistics
import time
from multiprocessing import Pool
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).parent / "results"


def cache_bound(_):
    a = np.random.default_rng(0).random(4096)
    t = time.perf_counter()
    for _ in range(60_000):
        a = np.sqrt(a * 1.0000001 + 0.5)
    return time.perf_counter() - t


def memory_bound(_):
    a = np.random.default_rng(0).random(50_000_000)
    b = np.empty_like(a)
    t = time.perf_counter()
    for _ in range(12):
        np.multiply(a, 1.0000001, out=b)
        a, b = b, a
    return time.perf_counter() - t


def sort_gather(_):
    rng = np.random.default_rng(0)
    keys, cols = rng.integers(0, 2**63, 3_000_000, dtype=np.uint64), rng.random((3_000_000, 8))
    t = time.perf_counter()
    for _ in range(4):
        order = np.argsort(keys, kind="stable")
        _ = (cols[order], keys[order])  # the gather a merge does after its sort
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    out = {"cores": os.cpu_count(), "repeat": args.repeat, "kinds": {}}
    with Pool(2) as pool:
        for f in (cache_bound, memory_bound, sort_gather):
            runs = []
            for _ in range(args.repeat):
                alone = min(pool.apply(f, (0,)) for _ in range(2))
                both = max(pool.map(f, [0, 1]))
                runs.append({"alone_s": round(alone, 3), "two_at_once_s": round(both, 3),
                             "gain": round(2 * alone / both, 3)})
            gain = statistics.median(r["gain"] for r in runs)
            out["kinds"][f.__name__] = {"median_gain": gain, "runs": runs}
            print(f"{f.__name__}: two processes do x{gain:.2f} the work of one "
                  f"({', '.join(str(r['gain']) for r in runs)})", flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "ceiling.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
