"""The build's own memory per task of one Engine.map on a local cluster: its RSS (sampled every
50 ms) while N trivial tasks run on 2 workers, over N. A local cluster's scheduler lives in the
build's process, so each task's futures and scheduler records are held there until the map ends
(and glibc keeps the high-water mark for the next map).

    python bench/bench_task_memory.py --json bench/results/task-memory-session12.json

bench/project_scale.py grows the build's process in translation and pivot by this figure times
the tasks of their largest map.
"""
import argparse
import json
import os
import threading
import time
from pathlib import Path


def rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def trivial(i):
    return {"n": i}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, nargs="+", default=[500, 4000, 16000])
    ap.add_argument("--json", type=Path, required=True)
    args = ap.parse_args()
    from pivot.pipeline.engine import Engine

    out = {}
    with Engine(workers=2) as engine:
        engine.map(trivial, [(i,) for i in range(10)], name="warm")
        for n in args.tasks:
            base = rss()
            peak, stop = [base], threading.Event()

            def watch():
                while not stop.is_set():
                    peak[0] = max(peak[0], rss())
                    time.sleep(0.05)

            watcher = threading.Thread(target=watch)
            watcher.start()
            t0 = time.perf_counter()
            engine.map(trivial, [(i,) for i in range(n)], name=f"n{n}")
            wall = time.perf_counter() - t0
            stop.set()
            watcher.join()
            out[str(n)] = {"base_mib": round(base / 2**20, 1), "peak_mib": round(peak[0] / 2**20, 1),
                           "kib_per_task": round((peak[0] - base) / n / 1024, 2), "wall_s": round(wall, 2)}
            print(n, out[str(n)], flush=True)
    args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
