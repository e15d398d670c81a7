"""What a thread's allocations leave resident once freed (pivot.pipeline.engine.Aside's cost).

Makes and frees, six times, 500k rows of int32 token ids and the texts of 200k of them (the
shape of the ppdb2 stage's writing of its phrases' rows and texts), in the main thread or in
a thread of its own, then malloc_trim(0); prints this process's PSS (MiB) at each point.
glibc gives a thread an arena of its own, whose free top malloc_trim does not shrink: run it
with MALLOC_ARENA_MAX=1 (one arena for every thread) to see the difference go.

Usage: python bench/bench_thread_arena.py main|thread
"""
import ctypes
import sys
import threading

import numpy as np


def pss() -> float:
    with open("/proc/self/smaps_rollup") as fh:
        return next(int(line.split()[1]) / 1024 for line in fh if line.startswith("Pss:"))


def work() -> None:
    for k in range(6):
        rows = np.random.default_rng(k).integers(0, 1000, size=(500_000, 5)).astype(np.int32)
        texts = [" ".join(map(str, r)) for r in rows[:200_000].tolist()]
        blob = "\n".join(texts).encode()
        del rows, texts, blob


def main(where: str) -> None:
    start = pss()
    if where == "main":
        work()
    else:
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
    made = pss()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    print(f"{where}: start {start:.1f} MiB, after the work {made:.1f}, after malloc_trim {pss():.1f}")


if __name__ == "__main__":
    main(sys.argv[1])
