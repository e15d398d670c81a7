"""Preflight's read-through, stage by stage: the CPU seconds each stage's input check takes on a
recipe (pivot.preflight's checks, run one after another in this process as a build runs them),
for bench/project_scale.py's model of the build's first step.

    python bench/bench_preflight.py --data ../shared/data --domains bio bio-multi \
        [--rounds 3] [--json bench/results/preflight-session12.json]

Per recipe: each stage's check CPU seconds (the median over the rounds), its counts (the plan's:
bitext lines, in-domain sentences, gold pairs ...), and the total; and the wall seconds of the
whole read-through as a build runs it (pivot.preflight.check, no cluster started), in one process
(``--workers 1``) and in two (a build with a cluster: ReadThrough's forked helper), alternated
round by round, with their counts compared.
"""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _measure import write_json  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def check_seconds(recipe_path: Path, data_root: Path) -> tuple[dict, dict]:
    """({stage: CPU seconds of its read-through checks}, the plan's counts) of one preflight."""
    from pivot import preflight, recipes
    from pivot.pipeline.graph import STAGES, order

    rec = recipes.load_recipe(recipe_path)
    plan = preflight.Plan(recipe_path=recipe_path, name=rec["name"], data_root=data_root, out_path=None,
                          work_dir=None, recipe=rec, lengths=preflight.LengthRule(rec["preprocess"]["max_tokens"]))
    seconds = {}
    for name in order():
        if STAGES[name].check is None:
            continue
        for run in STAGES[name].check(rec, data_root, plan):
            t0 = time.process_time()
            run()
            seconds[name] = seconds.get(name, 0.0) + time.process_time() - t0
    return seconds, dict(plan.counts)


def check_wall(recipe_path: Path, data_root: Path, workers: int) -> tuple[float, list]:
    """(wall seconds, the plan's counts in order) of preflight.check as a build of ``workers``
    runs it (without the outputs' checks and the cluster's start)."""
    from pivot import preflight

    t0 = time.perf_counter()
    plan = preflight.check(recipe_path, data_root, workers=workers)
    return time.perf_counter() - t0, list(plan.counts.items())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, type=Path)
    ap.add_argument("--domains", nargs="+", default=["bio", "bio-multi"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / "preflight.json")
    args = ap.parse_args()
    out = {"data": str(args.data), "rounds": args.rounds, "recipes": {}}
    for domain in args.domains:
        runs = [check_seconds(ROOT / "recipes" / f"{domain}.toml", args.data) for _ in range(args.rounds)]
        stages = sorted({s for r, _ in runs for s in r})
        cpu = {s: round(statistics.median(r.get(s, 0.0) for r, _ in runs), 3) for s in stages}
        walls = {1: [], 2: []}
        counts = set()
        for r in range(args.rounds):
            for workers in ((1, 2) if r % 2 == 0 else (2, 1)):
                wall, got = check_wall(ROOT / "recipes" / f"{domain}.toml", args.data, workers)
                walls[workers].append(wall)
                counts.add(repr(got))
        out["recipes"][domain] = {"check_cpu_s": cpu, "total_cpu_s": round(sum(cpu.values()), 3),
                                  "counts": runs[0][1],
                                  "read_through_wall_s": {"one process": [round(w, 3) for w in walls[1]],
                                                          "two processes": [round(w, 3) for w in walls[2]]},
                                  "counts_equal": len(counts) == 1}
        print(domain, json.dumps(out["recipes"][domain]), flush=True)
    write_json(args.json, out)


if __name__ == "__main__":
    main()
