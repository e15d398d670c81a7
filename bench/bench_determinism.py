"""Same inputs, same bytes: clean builds compared by the sha256 of every model's PPDB export.

    python bench/bench_determinism.py --data ../shared/data [--domain bio] [--workers 2 2 1]

Each build runs as a child process on its own fresh work directory, with the given
``--workers`` (one build per value; repeat a value for two builds at the same count). While it
runs, the resident set sizes of the child and every process under it (the Dask workers, any
tool) are summed from /proc every 0.2 s, so the peak is the peak of the whole build, not of its
largest process. Then every stored and combined model is exported with ``pivot export
--format ppdb`` and hashed, and the signatures are read from the databases. Results go to
``bench/results/determinism.json``.
"""
import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _measure import db_meta, exports, run_measured, store_seconds  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--domain", default="bio")
    ap.add_argument("--workers", type=int, nargs="+", default=[2, 2, 1],
                    help="one clean build per value (default: %(default)s)")
    ap.add_argument("--json", default=str(Path(__file__).parent / "results" / "determinism.json"))
    ap.add_argument("--keep-work", type=Path, help="move the first build's work folder here (for bench_kill_worker.py)")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="pivot-determinism-"))
    builds = []
    try:
        for k, workers in enumerate(args.workers):
            d = tmp / f"build{k}"
            d.mkdir()
            cmd = [sys.executable, "-m", "pivot", "build", "--domain", args.domain, "--data", args.data,
                   "--work", str(d / "work"), "--out", str(d / "out.db"), "--workers", str(workers)]
            figures = run_measured(cmd, d / "build.log")
            result = {"workers": workers, **figures, "signature": db_meta(d / "out.db", "signature"),
                      "stage_seconds": db_meta(d / "out.db", "stage_seconds"), "store_s": store_seconds(d / "build.log"),
                      "export_sha256": exports(d / "out.db", d)}
            print(json.dumps({k: v for k, v in result.items() if k != "export_sha256"}), flush=True)
            builds.append(result)
            if k == 0 and args.keep_work:
                shutil.move(str(d / "work"), str(args.keep_work))
            else:
                shutil.rmtree(d / "work")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    first = builds[0]
    summary = {
        "domain": args.domain, "builds": builds,
        "all_exports_identical": all(b["export_sha256"] == first["export_sha256"] for b in builds),
        "all_signatures_equal": all(b["signature"] == first["signature"] for b in builds),
    }
    print(json.dumps({k: v for k, v in summary.items() if k != "builds"}))
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
