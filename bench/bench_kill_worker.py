"""A Dask worker killed (SIGKILL) in the middle of the aligner or of the database write changes
nothing: the same signature and the same bytes of every model's export as a clean build.

    python bench/bench_kill_worker.py --data ../shared/data --work-from WORK --reference RESULT.json \
        [--during align write] [--parts 1 8] [--workers 2]

``--work-from``: the work folder of a finished clean build of the same code (e.g. one kept by
bench_determinism.py, or any ``pivot build --work``); ``--reference``: a bench_determinism.py
result of the same code (its first build's signature and per-model ``export --all`` sha256).

For ``align``: the work folder is copied with hard links (stage outputs are replaced by rename,
never written in place, so the copy leaves the original alone), every ``align.*`` artifact is
removed, and the build is run with ``--workers N``; once its log says
``align.<first language>`` is running, the first worker seen in the middle of a task (its CPU
time grew by 0.1 s between two samples 0.2 s apart) is killed. Dask runs its tasks again on the
other worker and on the nanny's replacement. The stages after the aligner are keyed by the links' content, so they are reused only if the links
came out byte-identical: the run's ``reused`` list says so, and the exports check it again.

For ``write``: every stage is reused from the copy and only the database is written, with
``--parts P``; after the log's last ``stage … reused`` line, the first worker seen in the middle
of a task (writing its part of the database) is killed.

Recorded per run: the killed pid, wall and CPU seconds, the stages rebuilt and reused, the
database's signature and every model's export sha256 (bench/_measure.py ``exports``), and
whether they equal the reference. Results: bench/results/kill_worker.json.
"""
import argparse
import json
import os
import re
import shutil
import signal
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _measure import cpu_seconds, dask_workers, exports, linked_copy, run_measured


def _signature(db: Path) -> str:
    from pivot.store.db import ParaphraseDB

    with ParaphraseDB(db) as pdb:
        return pdb.signature


def run_one(during: str, parts: int, args, tmp: Path, reference: dict) -> dict:
    work = tmp / f"work-{during}-{parts}"
    linked_copy(args.work_from, work)
    if during == "align":
        for d in work.glob("*align.*"):
            shutil.rmtree(d)
    out = tmp / f"out-{during}-{parts}.db"
    log = tmp / f"{during}-{parts}.log"
    cmd = [sys.executable, "-m", "pivot", "build", "--domain", args.domain, "--data", args.data, "--work", str(work),
           "--out", str(out), "--workers", str(args.workers), "--parts", str(parts)]
    state = {"t": None, "killed": None}

    def kill_one(proc, stage, elapsed):
        if state["killed"] is not None:
            return
        text = log.read_text(errors="replace")
        if "dask: <Client" not in text:
            return
        if during == "align":
            started = re.search(r"stage align\.\S+\s+running", text) is not None
        else:
            # every stage reused: the write follows the last "reused" line
            started = len(re.findall(r"stage \S+\s+reused", text)) >= state.setdefault("n_stages", _n_stages(work))
        if not started:
            return
        if state["t"] is None:
            state["t"] = elapsed
        # A worker in the middle of a task: its CPU time grew by 0.1 s or more since the last
        # sample (0.2 s ago), at least a second into the stage.
        busy = []
        for pid in dask_workers(proc.pid):
            now = cpu_seconds(pid)
            before = state.setdefault("cpu", {}).get(pid)
            state["cpu"][pid] = now
            if before is not None and now - before >= 0.1:
                busy.append(pid)
        if busy and elapsed - state["t"] >= 1.0:
            os.kill(busy[0], signal.SIGKILL)
            state["killed"] = busy[0]
            state["killed_at_s"] = round(elapsed, 1)
            state["killed_after_stage_start_s"] = round(elapsed - state["t"], 1)

    figures = run_measured(cmd, log, on_sample=kill_one)
    text = log.read_text(errors="replace")
    sha = exports(out, tmp)
    sig = _signature(out)
    shutil.rmtree(work)
    result = {"during": during, "parts": parts, "workers": args.workers, "killed_pid": state["killed"],
              "killed_at_s": state.get("killed_at_s"),
              "killed_after_stage_start_s": state.get("killed_after_stage_start_s"), **{k: figures[k] for k in ("wall_s", "cpu_s", "loadavg_1min_before",
                                                                                   "peak_pss_tree_gib")},
              "rebuilt": sorted(set(re.findall(r"stage (\S+)\s+running", text))),
              "reused": sorted(set(re.findall(r"stage (\S+)\s+reused", text))),
              "signature": sig, "signature_identical": sig == reference["signature"],
              "export_sha256": sha, "exports_identical": sha == reference["export_sha256"]}
    if out.is_dir():
        shutil.rmtree(out)
    else:
        out.unlink()
    return result


def _n_stages(work: Path) -> int:
    """Stages a build of this work folder reports (one DONE per finished stage artifact)."""
    return len({d.name.rsplit("-", 1)[0] for d in work.glob("*-*") if (d / "DONE").is_file()})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--domain", default="bio")
    ap.add_argument("--work-from", required=True, type=Path)
    ap.add_argument("--reference", required=True, type=Path)
    ap.add_argument("--during", nargs="+", choices=["align", "write"], default=["align", "write"])
    ap.add_argument("--parts", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", default=str(Path(__file__).parent / "results" / "kill_worker.json"))
    args = ap.parse_args()
    ref = json.loads(args.reference.read_text())["builds"][0]
    tmp = Path(tempfile.mkdtemp(prefix="pivot-killworker-"))
    runs = []
    try:
        for during in args.during:
            for parts in (args.parts if during == "write" else args.parts[:1]):
                r = run_one(during, parts, args, tmp, ref)
                print(json.dumps({k: v for k, v in r.items() if k != "export_sha256"}), flush=True)
                runs.append(r)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    summary = {"domain": args.domain, "reference": str(args.reference), "runs": runs,
               "all_identical": all(r["exports_identical"] and r["signature_identical"] and r["killed_pid"]
                                    for r in runs)}
    Path(args.json).write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({"all_identical": summary["all_identical"]}))


if __name__ == "__main__":
    main()
