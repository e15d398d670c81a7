"""kill -9 a build in the middle, then rerun it: nothing left behind, same content.

    python bench/bench_kill.py --data ../shared/data [--stages extract translation store] [--workers 2]

For each stage named, a build on a fresh work directory is started as a child and sent SIGKILL
(the build process itself, not a worker: what a user's kill -9 or an OOM killer does) about
one second after its log says the stage is running. Then, checked and recorded:

* **orphans**: every process of the build's tree seen just before the kill (Dask's nanny and
  workers, an aligner) must be gone within 5 s (the workers ask the kernel for a parent-death
  signal; see pivot/pipeline/_dask_plugins.py);
* **no half database**: the output path must not exist (the database is written under a
  temporary name and renamed at the end);
* the stale temporary files the killed processes left (``.NAME.tmp-PID`` and kin) are listed;
* **resume**: the same command again must finish, sweep those files, and leave no temporary
  file anywhere under the work directory or beside the output;
* **same content**: the resumed database's `pivot export --format ppdb` sha256 for every model
  must equal those of clean builds of the same code (``--reference``: a bench_determinism
  result; kill.json was measured against determinism.json, the release before the per-model
  pruning).

Results: bench/results/kill.json.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _measure import _current_stage, descendants, exports, run_measured  # noqa: E402

RESULTS = Path(__file__).parent / "results"
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from pivot.locking import _TMP_PATTERNS  # noqa: E402


def temp_files(*roots):
    """Paths under roots whose names are one of the build's temporary-file patterns."""
    found = []
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in filenames + dirnames:
                if any(rx.match(name) for rx in _TMP_PATTERNS):
                    found.append(str(Path(dirpath) / name))
    return sorted(found)


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--domain", default="bio")
    ap.add_argument("--stages", nargs="*", default=["translation", "store"])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--reference", default=str(RESULTS / "determinism-final.json"),
                    help="bench_determinism results of clean builds of the same code (their exports)")
    args = ap.parse_args()
    reference = json.loads(Path(args.reference).read_text())["builds"][0]["export_sha256"]
    result = {"workers": args.workers, "runs": {}}
    for stage in args.stages:
        tmp = Path(tempfile.mkdtemp(prefix="pivot-kill-"))
        work, out, log = tmp / "work", tmp / "out.db", tmp / "build.log"
        cmd = [sys.executable, "-m", "pivot", "build", "--domain", args.domain, "--data", args.data,
               "--work", str(work), "--out", str(out), "--workers", str(args.workers)]
        with open(log, "w") as logf:
            proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT)
            state, seen_at = {}, None
            while proc.poll() is None:
                now = _current_stage(log, state)
                if now == stage and seen_at is None:
                    seen_at = time.perf_counter()
                if seen_at is not None and time.perf_counter() - seen_at > 1.0:
                    break
                time.sleep(0.1)
            if proc.poll() is not None:
                raise SystemExit(f"the build ended before stage {stage} was killed; see {log}")
            tree = descendants(proc.pid)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        deadline = time.time() + 5
        while time.time() < deadline and any(alive(p) for p in tree[1:]):
            time.sleep(0.1)
        orphans = [p for p in tree[1:] if alive(p)]
        for p in orphans:             # do not leave them running whatever the verdict
            os.kill(p, signal.SIGKILL)
        left_after_kill = temp_files(work, tmp)
        half_database = out.exists()
        figures = run_measured(cmd, tmp / "resume.log")
        left_after_resume = temp_files(work, tmp)
        shas = exports(out, tmp)
        run = {"killed_in": stage, "processes_in_tree": len(tree), "orphans_after_5s": len(orphans),
               "database_exists_after_kill": half_database, "temp_files_after_kill": len(left_after_kill),
               "temp_files_after_resume": left_after_resume, "resume": figures,
               "stages_reused": sum(1 for line in (tmp / "resume.log").read_text().splitlines()
                                    if " reused" in line and "stage " in line),
               "exports_identical": shas == reference}
        result["runs"][stage] = run
        print(stage, json.dumps({k: v for k, v in run.items() if k != "resume"}), flush=True)
        shutil.rmtree(tmp)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "kill.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
