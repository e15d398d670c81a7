"""Same inputs, same bytes: clean builds compared by the sha256 of every model's PPDB export.

    python bench/bench_determinism.py --data ../shared/data [--domain bio] [--threads 2 1]

Each build runs as a child process on its own fresh work directory, with the given
``--threads`` (one build per value; repeat a value for two builds at the same count). While it
runs, the resident set sizes of the child and every process under it (the aligner, LM tools)
are summed from /proc every 0.2 s, so the peak is the peak of the whole build, not of its
largest process. Then every stored and combined model is exported with ``pivot export
--format ppdb`` and hashed, and the signatures are read from the databases. Results go to
``bench/results/determinism.json``.
"""
import argparse
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")


def tree_rss(root_pid: int) -> int:
    """Sum of RSS (bytes) of root_pid and all its descendants, read from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            pid, ppid = int(entry.name), int(fields[1])
            with open(f"/proc/{entry.name}/statm") as fh:
                rss[pid] = int(fh.read().split()[1]) * PAGE
        except (OSError, IndexError, ValueError):
            continue  # the process ended while we looked
        children.setdefault(ppid, []).append(pid)
    total, stack = 0, [root_pid]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total


def run_measured(cmd, log_path) -> dict:
    """Run cmd; wall seconds and peak summed RSS of its process tree."""
    t0 = time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, tree_rss(proc.pid))
            time.sleep(0.2)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}); see {log_path}")
    return {"wall_s": round(time.perf_counter() - t0, 1), "peak_rss_tree_gib": round(peak / 2**30, 3)}


def exports(db_path: Path, out_dir: Path) -> dict:
    """sha256 of `pivot export --format ppdb` for every model of the database."""
    with sqlite3.connect(db_path) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM model ORDER BY id")]
    out = {}
    for name in names:
        target = out_dir / f"{name}.ppdb"
        subprocess.run([sys.executable, "-m", "pivot", "export", str(db_path), "--format", "ppdb",
                        "--model", name, "-o", str(target)], check=True, capture_output=True)
        out[name] = hashlib.sha256(target.read_bytes()).hexdigest()
    return out


def signature(db_path: Path) -> str:
    with sqlite3.connect(db_path) as conn:
        return json.loads(conn.execute("SELECT value FROM meta WHERE key = 'signature'").fetchone()[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--domain", default="bio")
    ap.add_argument("--threads", type=int, nargs="+", default=[2, 2, 1],
                    help="one clean build per value (default: %(default)s)")
    ap.add_argument("--json", default=str(Path(__file__).parent / "results" / "determinism.json"))
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="pivot-determinism-"))
    builds = []
    try:
        for k, threads in enumerate(args.threads):
            d = tmp / f"build{k}"
            d.mkdir()
            cmd = [sys.executable, "-m", "pivot", "build", "--domain", args.domain, "--data", args.data,
                   "--work", str(d / "work"), "--out", str(d / "out.db"), "--threads", str(threads)]
            figures = run_measured(cmd, d / "build.log")
            result = {"threads": threads, **figures, "signature": signature(d / "out.db"),
                      "export_sha256": exports(d / "out.db", d)}
            print(json.dumps({k: v for k, v in result.items() if k != "export_sha256"}), flush=True)
            builds.append(result)
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
