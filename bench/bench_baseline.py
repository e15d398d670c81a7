"""This code against an earlier commit: the same recipe built by both, in the same run.

    python bench/bench_baseline.py --data ../shared/data --domain bio-multi --baseline 565e552 \
        [--this HEAD] [--workers 2] [--rounds 1] [--json bench/results/baseline-bio-multi.json]

Both commits are checked out with ``git worktree add --detach`` into a scratch folder and their
Cython kernels compiled there (``setup.py build_ext --inplace``; the project's own checkout may
change while the builds run), so each side runs its own code on its own fresh work folder, as a child process whose whole tree (the build, the Dask
workers, any tool) is measured by bench/_measure.py's ``run_measured``: wall, CPU seconds, peak
RSS and PSS summed over the processes, by stage. Rounds alternate which side goes first (the
second build of a pair meets a warmer page cache). Reported: each build's figures and, per
round and as medians, this code's wall, CPU and PSS over the baseline's. The two databases are
not compared byte for byte: the baseline predates layers this code adds.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _measure import db_meta, run_measured, write_json  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def checkout(ref: str, where: Path) -> dict:
    """The tree of ``ref`` at ``where``, kernels compiled; its commit and compile seconds."""
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), ref],
                   check=True, capture_output=True)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=where, check=True,
                   capture_output=True)
    commit = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], check=True, capture_output=True,
                            text=True).stdout.strip()
    return {"commit": commit, "compile_s": round(time.perf_counter() - t0, 1)}


def build(tree: Path, domain: str, data: str, workers: int, d: Path) -> dict:
    d.mkdir(parents=True)
    cmd = [sys.executable, "-m", "pivot", "build", "--domain", domain, "--data", data,
           "--work", str(d / "work"), "--out", str(d / "out.db"), "--workers", str(workers)]
    figures = run_measured(cmd, d / "build.log", env={**os.environ, "PYTHONPATH": str(tree)}, cwd=tree)
    figures["signature"] = db_meta(d / "out.db", "signature")
    figures["db_bytes"] = (d / "out.db").stat().st_size
    shutil.rmtree(d / "work")
    (d / "out.db").unlink()
    return figures


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--domain", default="bio-multi")
    ap.add_argument("--baseline", required=True, help="the earlier commit (any git revision)")
    ap.add_argument("--this", default="HEAD", help="this code's commit (default: %(default)s)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    data = str(Path(args.data).resolve())
    out = args.json or ROOT / "bench" / "results" / f"baseline-{args.domain}.json"
    tmp = Path(tempfile.mkdtemp(prefix="pivot-baseline-"))
    trees = {"this": tmp / "this", "baseline": tmp / "baseline"}
    try:
        result = {"domain": args.domain, "workers": args.workers, "this": checkout(args.this, trees["this"]),
                  "baseline": checkout(args.baseline, trees["baseline"]), "rounds": []}
        for r in range(args.rounds):
            order = ("this", "baseline") if r % 2 == 0 else ("baseline", "this")
            rnd = {"order": list(order)}
            for side in order:
                rnd[side] = build(trees[side], args.domain, data, args.workers, tmp / f"r{r}-{side}")
                print(side, json.dumps({k: rnd[side][k] for k in ("wall_s", "cpu_s", "peak_pss_tree_gib",
                                                                  "loadavg_1min_before")}), flush=True)
            for k in ("wall_s", "cpu_s", "peak_pss_tree_gib"):
                rnd[f"{k}_ratio"] = round(rnd["this"][k] / rnd["baseline"][k], 3)
            result["rounds"].append(rnd)
            write_json(out, result)
        med = lambda xs: sorted(xs)[len(xs) // 2]
        result["median_ratio"] = {k: med([rnd[f"{k}_ratio"] for rnd in result["rounds"]])
                                  for k in ("wall_s", "cpu_s", "peak_pss_tree_gib")}
        write_json(out, result)
        print(json.dumps(result["median_ratio"]))
    finally:
        for tree in trees.values():
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True,
                           check=False)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
