"""This code against an earlier commit: the same recipe built by both, in the same run.

    python bench/bench_baseline.py --data ../shared/data --domain bio-multi --baseline 565e552 \
        [--this HEAD] [--workers 2] [--rounds 1] [--json bench/results/baseline-bio-multi.json]

Both commits are checked out with ``git worktree add --detach`` into a scratch folder and their
Cython kernels compiled there (``setup.py build_ext --inplace``; the project's own checkout may
change while the builds run), so each side runs its own code on its own fresh work folder, as a child process whose whole tree (the build, the Dask
workers, any tool) is measured by bench/_measure.py's ``run_measured``: wall, CPU seconds, peak
RSS and PSS summed over the processes, by stage. Rounds alternate which side goes first (the
second build of a pair meets a warmer page cache). Reported: each build's figures and, per
round and as medians, this code's wall, CPU and PSS over the baseline's. The two databases are
not compared byte for byte: the baseline predates layers this code adds.

``--also-without-layer`` adds a third build to each round: this code with the recipe's PPDB 2.0
layer off (``[ppdb2] learn = false, wordnet = false, lhs = "x"``, written beside the builds from
the tree's recipes/DOMAIN.toml): the work the baseline does (no learned score, relations or
tagger), so that the cluster's gain is read apart from the layer's cost. Its database differs
(no score, no relations, [X] labels); its ratios to the baseline are the ``*_ratio_without_layer``.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _measure import db_meta, run_measured, write_json  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def checkout(ref: str, where: Path) -> dict:
    """The tree of ``ref`` at ``where``, kernels compiled; its commit and compile seconds."""
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), ref],
                   check=True, capture_output=True)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=where, check=True,
                   capture_output=True)
    commit = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], check=True, capture_output=True,
                            text=True).stdout.strip()
    return {"commit": commit, "compile_s": round(time.perf_counter() - t0, 1)}


def without_layer(tree: Path, domain: str, where: Path) -> Path:
    """recipes/DOMAIN.toml of ``tree`` with its [ppdb2] layer off, written at ``where`` (the
    recipe's [ppdb2] keys set, or the section added: the defaults learn)."""
    text = (tree / "recipes" / f"{domain}.toml").read_text()
    off = {"learn": "false", "wordnet": "false", "lhs": '"x"'}
    head, section, rest = text.partition("\n[ppdb2]\n")
    if section:
        body, nxt, tail = rest.partition("\n[")
        for key, value in off.items():
            body, n = re.subn(rf"^{key}\s*=[^#\n]*", f"{key} = {value} ", body, count=1, flags=re.MULTILINE)
            if n != 1:
                body = f"{key} = {value}\n" + body
        text = head + section + body + nxt + tail
    else:
        text += "\n[ppdb2]\n" + "".join(f"{key} = {value}\n" for key, value in off.items())
    where.write_text(text)
    return where


def build(tree: Path, domain: str, data: str, workers: int, d: Path, recipe: Path | None = None) -> dict:
    d.mkdir(parents=True)
    what = ["--recipe", str(recipe)] if recipe else ["--domain", domain]
    cmd = [sys.executable, "-m", "pivot", "build", *what, "--data", data,
           "--work", str(d / "work"), "--out", str(d / "out.db"), "--workers", str(workers)]
    figures = run_measured(cmd, d / "build.log", env={**os.environ, "PYTHONPATH": str(tree)}, cwd=tree)
    figures["signature"] = db_meta(d / "out.db", "signature")
    figures["db_bytes"] = (d / "out.db").stat().st_size
    shutil.rmtree(d / "work")
    (d / "out.db").unlink()
    return figures


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--domain", default="bio-multi")
    ap.add_argument("--baseline", required=True, help="the earlier commit (any git revision)")
    ap.add_argument("--this", default="HEAD", help="this code's commit (default: %(default)s)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--also-without-layer", action="store_true",
                    help="a third build a round: this code with the recipe's [ppdb2] layer off")
    args = ap.parse_args()
    data = str(Path(args.data).resolve())
    out = args.json or ROOT / "bench" / "results" / f"baseline-{args.domain}.json"
    tmp = Path(tempfile.mkdtemp(prefix="pivot-baseline-"))
    trees = {"this": tmp / "this", "baseline": tmp / "baseline"}
    try:
        result = {"domain": args.domain, "workers": args.workers, "this": checkout(args.this, trees["this"]),
                  "baseline": checkout(args.baseline, trees["baseline"]), "rounds": []}
        sides = ("this", "baseline")
        recipe = {}
        if args.also_without_layer:
            sides += ("this_without_layer",)
            trees["this_without_layer"] = trees["this"]
            recipe["this_without_layer"] = without_layer(trees["this"], args.domain, tmp / f"{args.domain}-without-layer.toml")
        for r in range(args.rounds):
            order = sides if r % 2 == 0 else sides[::-1]
            rnd = {"order": list(order)}
            for side in order:
                rnd[side] = build(trees[side], args.domain, data, args.workers, tmp / f"r{r}-{side}", recipe.get(side))
                print(side, json.dumps({k: rnd[side][k] for k in ("wall_s", "cpu_s", "peak_pss_tree_gib",
                                                                  "loadavg_1min_before")}), flush=True)
            for k in ("wall_s", "cpu_s", "peak_pss_tree_gib"):
                rnd[f"{k}_ratio"] = round(rnd["this"][k] / rnd["baseline"][k], 3)
                if args.also_without_layer:
                    rnd[f"{k}_ratio_without_layer"] = round(rnd["this_without_layer"][k] / rnd["baseline"][k], 3)
            result["rounds"].append(rnd)
            write_json(out, result)
        med = lambda xs: sorted(xs)[len(xs) // 2]
        result["median_ratio"] = {k: med([rnd[f"{k}_ratio"] for rnd in result["rounds"]])
                                  for k in ("wall_s", "cpu_s", "peak_pss_tree_gib")}
        if args.also_without_layer:
            result["median_ratio_without_layer"] = {
                k: med([rnd[f"{k}_ratio_without_layer"] for rnd in result["rounds"]])
                for k in ("wall_s", "cpu_s", "peak_pss_tree_gib")}
            result["recipe_without_layer"] = recipe["this_without_layer"].read_text()
        write_json(out, result)
        print(json.dumps(result["median_ratio"]))
    finally:
        for tree in set(trees.values()):
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True,
                           check=False)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
