"""Whole-build wall time and peak RSS: `pivot build` in a child process on a fresh work dir.

    python bench/bench_build.py --data ../shared/data [--domain bio] [--work DIR] [--keep]

The build runs as a child so its peak resident set size is its own (getrusage of the
children). Per-stage seconds come from the database's meta. With --work pointing at an
existing work dir, finished stages are reused and the figure is a rebuild, not a build.
"""
import argparse
import json
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--domain", default="bio")
    ap.add_argument("--work", help="work dir (default: a fresh temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary work dir and database")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="pivot-bench-"))
    work = Path(args.work) if args.work else tmp / "work"
    out = tmp / f"{args.domain}.db"
    cmd = [sys.executable, "-m", "pivot", "-q", "build", "--domain", args.domain, "--data", args.data,
           "--work", str(work), "--out", str(out)]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    wall = time.perf_counter() - t0
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # Linux: KiB
    conn = sqlite3.connect(out)
    meta = {k: json.loads(v) for k, v in conn.execute("SELECT key, value FROM meta")}
    n_models = conn.execute("SELECT count(*) FROM model").fetchone()[0]
    conn.close()
    result = {
        "command": " ".join(cmd), "wall_s": round(wall, 1), "peak_rss_gib": round(peak_kib / 2**20, 2),
        "db_mib": round(out.stat().st_size / 2**20, 1), "models": n_models,
        "pairs": meta["pruning"]["n_pairs_out"], "stage_seconds": meta["stage_seconds"],
        "signature": meta["signature"],
    }
    print(json.dumps(result, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
