"""Export rate and lookup latency of a built database (issue 22: export >= 500k lines/s, lookup p99 < 1 ms).

    python bench/bench_export.py bio.db [--runs 2] [--lookups 10000] [--tmp DIR] [--json bench/results/export.json]
    python bench/bench_export.py bio.db --before CHECKOUT --before-db OLD.db   # + another checkout's export

Each export is the command a user runs, `python -m pivot -q export DB ... -o FILE`, as a child
process of this checkout (interpreter start-up included), in three configurations:

* ``default``: the default model (the learned score), the hidden forms left out;
* ``general-all``: every pair of General with ``--all``, what the export wrote before issue 22
  (General's pairs, nothing hidden): the like-for-like with the ``before`` figure;
* ``equivalence-m``: ``--relation Equivalence --size m``, the file nlpaug reads.

Per run: lines, bytes, sha256 of the file, wall and CPU seconds (user + system of the child:
the scan threads' too, so CPU can exceed wall), the peak RSS of the largest child so far
(getrusage's: a run after a larger one reports the larger), the 1-minute load average before it
(others' jobs share the 2 cores: wall grows with it, CPU much less), lines per wall second. The
runs of one configuration must give the same sha256 (same bytes), or the script fails.

``--before CHECKOUT --before-db OLD.db`` also times the export of another source tree (e.g. the
main branch before issue 22, whose export formats each line in Python) on its own database, as
`python -m pivot -q export OLD.db --model general -o FILE` with PYTHONPATH=CHECKOUT; its commit is
recorded (``--before-commit`` names it for a tree that is no git checkout, such as
`git archive 565e552 | tar -x -C DIR` with the built kernels copied in). Lookups: bench_lookup.lookup_latency over --lookups seeded random phrases, k = 10, for
the default model and for General.
"""
import argparse
import hashlib
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _measure import write_json  # noqa: E402
from bench_lookup import lookup_latency  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CONFIGS = {
    "default": [],
    "general-all": ["--model", "general", "--all"],
    "equivalence-m": ["--relation", "Equivalence", "--size", "m"],
}


def _sha256_and_lines(path: Path) -> tuple[str, int, int]:
    h, lines, size = hashlib.sha256(), 0, 0
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 24), b""):
            h.update(block)
            lines += block.count(b"\n")
            size += len(block)
    return h.hexdigest(), lines, size


def time_export(checkout: Path, db: Path, args: list[str], tmp: Path, name: str) -> dict:
    """One `pivot export` of `checkout`'s code, measured; the output file is removed after.

    Wall time from start to exit (no sampling loop beside it: on 2 cores a poller costs the
    export CPU, and its period rounds a 3 s run up by up to 7%); CPU and peak RSS from the
    kernel's accounting of the finished child (getrusage)."""
    out = tmp / f"{name}.ppdb"
    # -P: the current folder is not put first on sys.path, so PYTHONPATH's checkout is the pivot run.
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    cmd = [sys.executable, "-P", "-m", "pivot", "-q", "export", str(db), *args, "-o", str(out)]
    load = os.getloadavg()[0]
    usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    usage1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
    cpu = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime)
    sha, lines, size = _sha256_and_lines(out)
    out.unlink()
    return {"args": args, "lines": lines, "bytes": size, "sha256": sha, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "loadavg_1min_before": round(load, 2), "peak_rss_gib": round(usage1.ru_maxrss / 2**20, 3),
            "lines_per_s": round(lines / wall)}


def commit_of(checkout: Path) -> str:
    return subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("db", type=Path, help="a schema-3 database (pivot build)")
    ap.add_argument("--runs", type=int, default=2, help="exports per configuration")
    ap.add_argument("--lookups", type=int, default=10_000, help="random phrases looked up per model")
    ap.add_argument("--before", type=Path, help="another checkout whose export is timed too (e.g. main's)")
    ap.add_argument("--before-db", type=Path, help="the database --before exports (its own schema)")
    ap.add_argument("--before-commit", help="the commit --before holds, when it is no git checkout "
                                            "(e.g. a `git archive` of it)")
    ap.add_argument("--tmp", type=Path, help="folder for the exported files (default: a temporary folder)")
    ap.add_argument("--json", type=Path, default=REPO / "bench" / "results" / "export.json")
    args = ap.parse_args()
    if (args.before is None) != (args.before_db is None):
        ap.error("--before and --before-db go together")

    with sqlite3.connect(f"file:{args.db}?mode=ro", uri=True) as conn:
        signature = json.loads(conn.execute("SELECT value FROM meta WHERE key = 'signature'").fetchone()[0])
        n_pairs = conn.execute("SELECT count(*) FROM pair").fetchone()[0]
    result = {"db": str(args.db), "signature": signature, "n_pairs": n_pairs, "commit": commit_of(REPO), "exports": {}}
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        tmp = Path(tmp)
        # This checkout's exports first, then its lookups, then the (long) before: on a shared
        # machine the quiet minute a run starts in goes to the figures that need it.
        for name, extra in CONFIGS.items():
            runs = [time_export(REPO, args.db, extra, tmp, name) for _ in range(args.runs)]
            if len({r["sha256"] for r in runs}) != 1:
                sys.exit(f"{name}: the runs wrote different bytes: {[r['sha256'] for r in runs]}")
            best = min(runs, key=lambda r: r["wall_s"])
            result["exports"][name] = {"runs": runs, "same_bytes": True, "best_lines_per_s": best["lines_per_s"]}
            print(f"{name}: {best['lines']:,} lines, best {best['wall_s']} s wall / {best['cpu_s']} s CPU "
                  f"({best['lines_per_s']:,} lines/s), load {best['loadavg_1min_before']}", flush=True)
        result["lookups"] = [lookup_latency(args.db, n=args.lookups),
                             lookup_latency(args.db, n=args.lookups, model="general")]
        for r in result["lookups"]:
            print(f"lookup {r['model']}: p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms", flush=True)
        if args.before is not None:
            run = time_export(args.before, args.before_db, ["--model", "general"], tmp, "before")
            result["before"] = {"checkout": str(args.before), "commit": args.before_commit or commit_of(args.before),
                                "db": str(args.before_db), **run}
            print(f"before: {run['lines']:,} lines in {run['wall_s']} s ({run['lines_per_s']:,} lines/s)", flush=True)
    write_json(args.json, result)


if __name__ == "__main__":
    main()
