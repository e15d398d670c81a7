"""Same inputs, same bytes: clean builds compared by the sha256 of every model's PPDB export.

    python bench/bench_determinism.py --data ../shared/data [--domain bio] [--workers 2 2 1] [--scale 4]
    python bench/bench_determinism.py --data ../shared/data --workers 2 1 1/1   # W/T: --threads T

Each build runs as a child process on its own fresh work directory, with the given
``--workers`` (one build per value; repeat a value for two builds at the same count). While it
runs, the resident set sizes of the child and every process under it (the Dask workers, any
tool) are summed from /proc every 0.2 s, so the peak is the peak of the whole build, not of its
largest process. Then every stored and combined model is exported with ``pivot export
--format ppdb`` and hashed, and the signatures are read from the databases. Results go to
``bench/results/determinism.json``.

--scale S builds the bio recipe with every bitext source listed S times (bench_scale.py's scaled
recipe: distinct copies, nothing deduplicated, the count floor times S, so S times the data and
what 1x keeps). The whole-build ratio of the workers counts is reported as the first build at
``--workers 1``'s wall over the first at a larger count (the issue's "same run" comparison), and
for every ``--workers 1`` build that follows one at another count (``--workers 2 1 2 1``: two
pairs, the spread of the ratio). Before and after each build a fixed single-threaded workload's
CPU seconds (``probe_s_before`` / ``_after``, _measure.speed_probe) say how fast the machine was.
``--no-memory`` runs each build with nothing reading /proc beside it (wall and CPU only): the
reader takes ~3% of the CPU (7.4-7.6 CPU s of a 4x build), which a ``--workers 2`` build that
keeps both cores busy pays in wall time and a ``--workers 1`` build, one core mostly idle, does not.

A value ``W/T`` builds with ``--workers W --threads T``; a bare ``W`` leaves ``--threads`` at its
default (0: every core), so a ``--workers 1`` build runs its in-process kernels (the aligner's
E-step and Viterbi, the pivot) on both cores of this machine, while a ``--workers 2`` build's tasks
run one thread each. ``1/1`` is the build on one core, the baseline of what workers alone gain.
The ratios compare builds of ``--workers 1`` at the default threads; a ``1/1`` build is reported as
``wall_ratio_one_core_over_W`` against the first build of W workers.
"""
import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _measure import db_meta, exports, run_measured, speed_probe, store_seconds  # noqa: E402
from bench_scale import scaled_recipe  # noqa: E402


def workers_threads(value: str) -> tuple[int, int | None]:
    """``W`` -> (W, None); ``W/T`` -> (W, T): a build's --workers and --threads."""
    workers, slash, threads = value.partition("/")
    try:
        return int(workers), (int(threads) if slash else None)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected W or W/T (whole numbers), got {value!r}") from None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--domain", default="bio")
    ap.add_argument("--workers", type=workers_threads, nargs="+", default=[(2, None), (2, None), (1, None)],
                    help="one clean build per value, W or W/T (--threads T) (default: 2 2 1)")
    ap.add_argument("--scale", type=int, default=1, help="the bio recipe's bitext this many times (bio only)")
    ap.add_argument("--json", default=str(Path(__file__).parent / "results" / "determinism.json"))
    ap.add_argument("--no-exports", action="store_true",
                    help="compare the signatures only (the exports of a large scale take minutes)")
    ap.add_argument("--no-memory", action="store_true",
                    help="wall and CPU only: no /proc reader beside the builds (it takes ~3%% of the "
                         "CPU, which a --workers 2 build that keeps both cores busy feels and a --workers 1 "
                         "build, a core mostly idle, does not)")
    ap.add_argument("--keep-work", type=Path, help="move the first build's work folder here (for bench_kill_worker.py)")
    args = ap.parse_args()

    if args.scale != 1 and args.domain != "bio":
        ap.error("--scale copies the bio recipe's bitext: use it with --domain bio")
    tmp = Path(tempfile.mkdtemp(prefix="pivot-determinism-"))
    recipe = ["--domain", args.domain] if args.scale == 1 else \
        ["--recipe", str(scaled_recipe(args.scale, tmp / f"bio-x{args.scale}.toml"))]
    builds = []
    try:
        for k, (workers, threads) in enumerate(args.workers):
            d = tmp / f"build{k}"
            d.mkdir()
            cmd = [sys.executable, "-m", "pivot", "build", *recipe, "--data", args.data,
                   "--work", str(d / "work"), "--out", str(d / "out.db"), "--workers", str(workers),
                   *(["--threads", str(threads)] if threads is not None else [])]
            probe_before = speed_probe()
            figures = run_measured(cmd, d / "build.log", memory=not args.no_memory)
            result = {"workers": workers, "threads": threads, **figures, "probe_s_before": probe_before, "probe_s_after": speed_probe(), "signature": db_meta(d / "out.db", "signature"),
                      "stage_seconds": db_meta(d / "out.db", "stage_seconds"), "store_s": store_seconds(d / "build.log"),
                      "export_sha256": None if args.no_exports else exports(d / "out.db", d)}
            print(json.dumps({k: v for k, v in result.items() if k != "export_sha256"}), flush=True)
            builds.append(result)
            if k == 0 and args.keep_work:
                shutil.move(str(d / "work"), str(args.keep_work))
            else:
                shutil.rmtree(d / "work")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    first = builds[0]
    walls, one_core = {}, None
    for b in builds:
        if b["threads"] is None:
            walls.setdefault(b["workers"], b["wall_s"])
        elif (b["workers"], b["threads"]) == (1, 1) and one_core is None:
            one_core = b["wall_s"]
    summary = {
        "domain": args.domain, "scale": args.scale, "builds": builds,
        **({f"wall_ratio_workers_1_over_{w}": round(walls[1] / walls[w], 3) for w in walls if w != 1}
           if 1 in walls else {}),
        **({f"wall_ratio_one_core_over_{w}": round(one_core / walls[w], 3) for w in walls if w != 1}
           if one_core is not None else {}),
        # each --workers 1 build against the build just before it (--workers 2 1 2 1: two pairs)
        "wall_ratios_paired": [{"workers": a["workers"], "threads": b["threads"],
                                "ratio": round(b["wall_s"] / a["wall_s"], 3)}
                               for a, b in zip(builds, builds[1:]) if b["workers"] == 1 and a["workers"] != 1],
        "all_exports_identical": None if args.no_exports else all(b["export_sha256"] == first["export_sha256"] for b in builds),
        "all_signatures_equal": all(b["signature"] == first["signature"] for b in builds),
    }
    print(json.dumps({k: v for k, v in summary.items() if k != "builds"}))
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
