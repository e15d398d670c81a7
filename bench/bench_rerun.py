"""Rerun the late part of a build on a copy of a finished work folder: wall, CPU and PSS by stage.

    python bench/bench_rerun.py --data ../shared/data --work-from WORK [--drop ppdb2 tagger lhs]
                                [--workers 2] [--parts 1] [--rounds 1] [--json OUT]

The work folder is copied with hard links (a stage replaces its outputs by rename, never in
place, so the copy leaves the original alone), the artifacts of the stages named by ``--drop``
are removed from the copy, and ``pivot build`` runs on it: those stages run again, every other
one is reused, and the database is written (the store step, after the last stage, is always
measured). Each round is a child process measured by bench/_measure.py: wall seconds, CPU
seconds of the whole process tree (the build, Dask's workers) charged to the stage the log
says is running, peak PSS summed over the tree. With ``--code DIR`` the build runs the package
found in DIR (another checkout) instead of this one, so that two versions can be alternated
on the same copy.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _measure import linked_copy, run_measured, store_seconds, write_json


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--domain", default="bio")
    ap.add_argument("--work-from", type=Path, required=True)
    ap.add_argument("--drop", nargs="*", default=[], help="stages to run again (their artifacts are removed)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--parts", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--code", type=Path, help="a checkout whose package the build runs (default: this one)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    env = dict(os.environ)
    if args.code:
        env["PYTHONPATH"] = str(args.code.resolve())
    tmp = Path(tempfile.mkdtemp(prefix="pivot-rerun-"))
    runs = []
    try:
        for r in range(args.rounds):
            work, out = tmp / f"work{r}", tmp / f"out{r}.db"
            linked_copy(args.work_from, work)
            for stage in args.drop:
                for d in list(work.glob(f"{stage}-*")) + list(work.glob(f"{stage}.*-*")):
                    shutil.rmtree(d)
            cmd = [sys.executable, "-m", "pivot", "build", "--domain", args.domain, "--data", args.data,
                   "--work", str(work), "--out", str(out), "--workers", str(args.workers), "--parts", str(args.parts)]
            figures = run_measured(cmd, tmp / f"round{r}.log", env=env)
            figures["store_s"] = store_seconds(tmp / f"round{r}.log")
            print(json.dumps({k: figures[k] for k in ("wall_s", "cpu_s", "loadavg_1min_before", "store_s",
                                                      "peak_pss_tree_gib", "cpu_s_by_stage")}), flush=True)
            runs.append(figures)
            shutil.rmtree(work)
            shutil.rmtree(out) if out.is_dir() else out.unlink()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        write_json(args.json, {"work_from": str(args.work_from), "drop": args.drop, "workers": args.workers,
                               "parts": args.parts, "code": str(args.code) if args.code else None, "runs": runs})


if __name__ == "__main__":
    main()
