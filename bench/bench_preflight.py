"""Preflight's read-through, stage by stage: the CPU seconds each stage's input check takes on a
recipe (pivot.preflight's checks, run one after another in this process as a build runs them),
for bench/project_scale.py's model of the build's first step.

    python bench/bench_preflight.py --data ../shared/data --domains bio bio-multi \
        [--rounds 3] [--json bench/results/preflight-session12.json]

Per recipe: each stage's check CPU seconds (the median over the rounds), its counts (the plan's:
bitext lines, in-domain sentences, gold pairs ...), and the total.
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
        out["recipes"][domain] = {"check_cpu_s": cpu, "total_cpu_s": round(sum(cpu.values()), 3),
                                  "counts": runs[0][1]}
        print(domain, json.dumps(out["recipes"][domain]), flush=True)
    write_json(args.json, out)


if __name__ == "__main__":
    main()
