"""A bio build on an external cluster, as a user's cluster runs: its exports against a reference.

    python bench/bench_external.py --data ../shared/data --reference bench/results/determinism-session6.json \
        [--domain bio] [--workers 2] [--json bench/results/external-cluster.json]

`dask scheduler` and ``--workers`` `dask worker` commands (one process of one thread each, each
in a scratch folder of its own) are started on 127.0.0.1; `pivot build --scheduler` sends its
tasks to them. The three kinds of process run under one measuring parent (this script, run
again with ``--inner``), so bench/_measure.py's ``run_measured`` sums the RSS, PSS and CPU of
the whole cluster, not of the build alone. Then every model is exported (``export --all``) and
compared by sha256, with the signature, against the first build of the reference results file
(bench_determinism.py's, on the same code).
"""
import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _measure import db_meta, exports, run_measured, store_seconds, write_json  # noqa: E402

START_TIMEOUT = 60


def inner(args) -> None:
    """Scheduler, workers, build: children of this process; the cluster stopped after the build."""
    tmp = Path(args.inner)
    dask = str(Path(sys.executable).parent / "dask")
    scheduler_file = tmp / "scheduler.json"
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                               "--scheduler-file", str(scheduler_file)], stdout=open(tmp / "scheduler.log", "wb"),
                              stderr=subprocess.STDOUT, cwd=tmp)]
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not scheduler_file.is_file() or not scheduler_file.stat().st_size:
            if time.monotonic() > deadline or procs[0].poll() is not None:
                sys.exit("the scheduler did not start: see scheduler.log")
            time.sleep(0.2)
        address = json.loads(scheduler_file.read_text())["address"]
        for k in range(args.workers):
            scratch = tmp / f"worker-{k}"
            scratch.mkdir()
            procs.append(subprocess.Popen([dask, "worker", "--scheduler-file", str(scheduler_file),
                                           "--host", "127.0.0.1", "--nworkers", "1", "--nthreads", "1",
                                           "--no-dashboard", "--local-directory", str(scratch), "--name", f"w{k}"],
                                          stdout=open(tmp / f"worker-{k}.log", "wb"), stderr=subprocess.STDOUT,
                                          cwd=scratch))
        from distributed import Client
        with Client(address, timeout=START_TIMEOUT) as client:
            client.wait_for_workers(args.workers, timeout=START_TIMEOUT)
        print(f"cluster up at {address} with {args.workers} workers", flush=True)
        build = subprocess.run([sys.executable, "-m", "pivot", "build", "--domain", args.domain, "--data", args.data,
                                "--work", str(tmp / "work"), "--out", str(tmp / "out.db"), "--scheduler", address], check=False)
        if build.returncode:
            sys.exit(build.returncode)
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--reference", type=Path, help="a bench_determinism.py results file of the same code")
    ap.add_argument("--domain", default="bio")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "external-cluster.json")
    ap.add_argument("--inner", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inner:
        return inner(args)
    if args.reference is None:
        ap.error("--reference is required")
    reference = json.loads(args.reference.read_text())["builds"][0]
    tmp = Path(tempfile.mkdtemp(prefix="pivot-external-"))
    figures = run_measured([sys.executable, __file__, "--inner", str(tmp), "--data", str(Path(args.data).resolve()),
                            "--domain", args.domain, "--workers", str(args.workers)], tmp / "build.log")
    db = tmp / "out.db"
    result = {"domain": args.domain, "cluster": f"dask scheduler + {args.workers} dask worker commands on 127.0.0.1",
              **figures, "signature": db_meta(db, "signature"), "store_s": store_seconds(tmp / "build.log"),
              "export_sha256": exports(db, tmp), "reference": str(args.reference)}
    result["signature_equal"] = result["signature"] == reference["signature"]
    result["exports_identical"] = result["export_sha256"] == reference["export_sha256"]
    write_json(args.json, result)
    print(json.dumps({k: result[k] for k in ("wall_s", "cpu_s", "peak_pss_tree_gib", "signature_equal",
                                             "exports_identical")}))
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
