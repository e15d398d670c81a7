"""Rerun some stages of a finished build on a hard-link copy of its work folder, every process
sampled by role (bench/measure_roles.py): each stage's wall seconds, the CPU seconds and the
largest RSS of the build's own process and of the workers in it.

    python bench/bench_stage_memory.py --data ../shared/data --domain bio --work-from WORK \
        --scratch DIR --stages translation pivot --workers 2 [--code CHECKOUT] --json OUT

The copy's artifacts of ``--stages`` are removed and the build runs up to the last of them
(``Build.run(until=...)``, no database): those stages run again, the ones before are reused.
``--code`` runs the package of another checkout (the code before a change), on a fresh copy;
``--reuse-merges`` keeps translation's merged partitions, so that of it only round 4 runs.
"""
import argparse
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _measure import linked_copy, write_json

_DONE = re.compile(r"stage (\S+)\s+done in ([0-9.]+) s")


def child(args) -> None:
    """The build up to the last stage asked, logging each stage's start and end."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s",
                        stream=sys.stdout)
    from pivot.pipeline.run import Build

    build = Build(args.domain, data=args.data, work=args.work, workers=args.workers, store=False, prestart=True)
    try:
        build.run(until=args.stages[-1])
    finally:
        build.engine.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--domain", default="bio")
    ap.add_argument("--work-from", type=Path, help="the finished work folder to copy")
    ap.add_argument("--scratch", type=Path, help="where the copy goes (on the work folder's file system)")
    ap.add_argument("--stages", nargs="+", default=["translation", "pivot"])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--reuse-merges", action="store_true",
                    help="keep translation's merged partitions (e-*, f-*): of that stage only round 4 "
                         "(assemble) runs, and the copy needs only the structure's space")
    ap.add_argument("--code", type=Path, help="a checkout whose package the build runs (default: this one)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    if not (args.work_from and args.scratch and args.json):
        ap.error("--work-from, --scratch and --json are needed")
    code = (args.code or Path(__file__).resolve().parent.parent).resolve()
    commit = subprocess.run(["git", "-C", str(code), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    load_before = os.getloadavg()[0]
    base = Path(tempfile.mkdtemp(prefix="stage-memory-", dir=args.scratch))
    try:
        work = linked_copy(args.work_from, base / "work")
        for stage in args.stages:
            for d in list(work.glob(f"{stage}-*")) + list(work.glob(f".{stage}-*.partial")):
                if stage == "translation" and args.reuse_merges and not d.name.startswith("."):
                    # the merges' outputs, as finished tasks of an interrupted run: only round 4 runs
                    partial = work / f".{d.name}.partial"
                    partial.mkdir()
                    for f in list(d.glob("e-*.arrays")) + list(d.glob("f-*.arrays")):
                        os.link(f, partial / f.name)
                shutil.rmtree(d)
        roles, log = base / "roles.json", base / "build.log"
        cmd = [sys.executable, str(Path(__file__).parent / "measure_roles.py"), str(roles), str(log),
               sys.executable, str(Path(__file__).resolve()), "--child", "--data", args.data, "--domain", args.domain,
               "--work", str(work), "--workers", str(args.workers), "--stages", *args.stages]
        subprocess.run(cmd, check=True, env={**os.environ, "PYTHONPATH": str(code)}, cwd=code,
                       stdout=subprocess.DEVNULL)
        measured = json.loads(roles.read_text())
        # each rerun stage's content key (the sha256 of its files): equal to the original's when
        # the stage wrote the same bytes
        content = {}
        for stage in args.stages:
            for origin, folder in (("rerun", work), ("original", args.work_from)):
                done = sorted(folder.glob(f"{stage}-*/DONE"))
                content.setdefault(stage, {})[origin] = json.loads(done[-1].read_text())["content"] if done else None
        walls = {m.group(1): float(m.group(2)) for m in _DONE.finditer(log.read_text(errors="replace"))}
        by_stage = {}
        for stage in args.stages:
            keys = (stage, f"after {stage}")
            peaks = {k: v for k, v in measured["peak_gib_by_stage_role"].items() if k.rsplit("|", 1)[0] in keys}
            cpu = {k: v for k, v in measured["cpu_s_by_stage_role"].items() if k.rsplit("|", 1)[0] in keys}
            by_stage[stage] = {
                "wall_s": walls.get(stage),
                "build_rss_gib": max((v["rss"] for k, v in peaks.items() if k.endswith("|build")), default=None),
                "worker_rss_gib": max((v["rss"] for k, v in peaks.items() if k.endswith("|worker")), default=None),
                "cpu_s_build": round(sum(v for k, v in cpu.items() if k.endswith("|build")), 1),
                "cpu_s_all": round(sum(cpu.values()), 1)}
        out = {"work_from": str(args.work_from), "domain": args.domain, "stages": args.stages, "content_keys": content,
           "reuse_merges": args.reuse_merges,
               "workers": args.workers, "code": str(code), "commit": commit, "loadavg_1min_before": load_before,
               "by_stage": by_stage,
               "measure_roles": {k: v for k, v in measured.items() if k != "timeline_every_5th"}}
        write_json(args.json, out)
        print(json.dumps({"by_stage": by_stage, "content_keys": content}, indent=1))
    finally:
        if (base / "build.log").is_file():   # kept beside the result (a failed run's only trace)
            shutil.copyfile(base / "build.log", args.json.with_suffix(".log"))
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
