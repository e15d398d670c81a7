"""Scaling of the build: 1x, 2x, 4x, 8x the bio bitext, workers 1 vs 2, a killed worker, bio-multi.

    python bench/bench_scale.py --data ../shared/data [--scales 1 2 4 8] [--workers 2]
                                [--compare-workers] [--kill-worker] [--multi]

Scale s builds the bio recipe with every bitext source listed s times under distinct names and
``dedup = false``, so the copies are distinct sentence pairs that nothing deduplicates (the LM
texts do not grow: the in-domain text is fixed and the general sample has its size), and with
``min_phrase_count`` times s, so that the pruning keeps what 1x keeps. Each build
is a child process on a fresh work directory; the RSS of its whole process tree (the build, the
Dask workers, any tool) is summed every 0.2 s and attributed to the stage the log says is
running. Reported per build: wall time, CPU seconds of the tree, the load before it started,
peak summed RSS overall and per stage, the stage times and the database write's seconds;
across scales: the peak RSS ratio (largest / smallest) and the fitted exponent b of
wall = a * scale^b and of cpu = a * scale^b.

--compare-workers rebuilds the extract, translation and pivot stages of the 1x build (of the
scale --compare-at names: its work directory is kept like 1x's) with
``--workers 1`` and ``--workers 2`` (the earlier stages reused; ``--threads 1``, so the
in-process run uses one core) and compares their seconds, in all and per stage: one discarded
warm-up build, then ``--repeat`` rounds (default 3) alternating which goes first; the medians,
the range and every round's ratio are kept.
--kill-worker kills one Dask worker (SIGKILL) while the 1x build extracts and checks that every
database has the content (bench/_measure.py content_sha256: every stored row and the
combination fits) of the undisturbed build.
--multi builds recipes/bio-multi.toml. Results: bench/results/scale.json (and scale-multi.json).
"""
import argparse
import json
import math
import os
import shutil
import signal
import sys
import tempfile
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _measure import content_sha256, dask_workers, db_meta, run_measured, store_seconds  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).parent / "results"
SHARDED = ("extract", "translation", "pivot")


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(type(v))


def dump_recipe(rec: dict) -> str:
    """A recipe dict as TOML (tables and arrays of tables one level deep: all recipes need)."""
    lines = [f"{k} = {toml_value(v)}" for k, v in rec.items() if not isinstance(v, (dict, list)) or
             (isinstance(v, list) and not all(isinstance(x, dict) for x in v))]
    for k, v in rec.items():
        if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for item in v:
                lines.append(f"\n[[{k}]]")
                lines += [f"{kk} = {toml_value(vv)}" for kk, vv in item.items()]
        elif isinstance(v, dict):
            lines.append(f"\n[{k}]")
            lines += [f"{kk} = {toml_value(vv)}" for kk, vv in v.items()]
    return "\n".join(lines) + "\n"


def scaled_recipe(scale: int, out: Path) -> Path:
    rec = tomllib.loads((ROOT / "recipes" / "bio.toml").read_text())
    rec["name"] = f"bio-x{scale}"
    for block in rec["bitext"]:
        block["sources"] = [{**src, "name": f"{src['name']}-copy{c}"} for c in range(scale) for src in block["sources"]]
    rec.setdefault("preprocess", {})["dedup"] = False
    # Copies multiply every count by the scale: with the count floor scaled alike, every
    # pruning decision (the probability floors are ratios) is the one of 1x, so the scales
    # differ in the amount of data only, not in what the database keeps.
    rec.setdefault("pivot", {})["min_phrase_count"] = rec["pivot"].get("min_phrase_count", 2) * scale
    rec["domain"]["report_in_domain_sources"] = [f"{n}-copy{c}" for c in range(scale)
                                                 for n in rec["domain"]["report_in_domain_sources"]]
    out.write_text(dump_recipe(rec))
    return out


def build_cmd(recipe, data, work, out, workers):
    return [sys.executable, "-m", "pivot", "build", "--recipe", str(recipe), "--data", data, "--work", str(work),
            "--out", str(out), "--workers", str(workers)]


def summarize(db: Path, figures: dict, log: Path) -> dict:
    meta_seconds = db_meta(db, "stage_seconds")
    return {**figures, "stage_seconds": meta_seconds, "store_s": store_seconds(log), "n_pairs": db_meta(db, "pruning")["n_pairs_out"],
            "n_sentences": db_meta(db, "shards")["n_sentences"], "db_bytes": db.stat().st_size}


def fit_exponent(scales, walls) -> float:
    xs, ys = [math.log(s) for s in scales], [math.log(w) for w in walls]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--scales", type=int, nargs="*", default=[1, 2, 4, 8])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--compare-workers", action="store_true")
    ap.add_argument("--repeat", type=int, default=3, help="rounds of --compare-workers (median reported)")
    ap.add_argument("--compare-at", type=int, default=1,
                    help="the scale --compare-workers rebuilds (1: results under 'workers', else 'workers_xS')")
    ap.add_argument("--kill-worker", action="store_true")
    ap.add_argument("--multi", action="store_true")
    ap.add_argument("--tmp", default=None, help="scratch folder (default: a new temporary one)")
    args = ap.parse_args()
    data = str(Path(args.data).resolve())
    tmp = Path(args.tmp or tempfile.mkdtemp(prefix="pivot-scale-"))
    tmp.mkdir(parents=True, exist_ok=True)
    RESULTS.mkdir(exist_ok=True)
    out_json = RESULTS / "scale.json"
    result = json.loads(out_json.read_text()) if out_json.is_file() else {}
    result["machine"] = {"cores": os.cpu_count(), "workers": args.workers}

    def save():
        out_json.write_text(json.dumps(result, indent=1) + "\n")

    builds = result.setdefault("scales", {})
    for scale in args.scales:
        d = tmp / f"x{scale}"
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir()
        recipe = scaled_recipe(scale, d / "recipe.toml")
        figures = run_measured(build_cmd(recipe, data, d / "work", d / "out.db", args.workers), d / "build.log")
        builds[str(scale)] = summarize(d / "out.db", figures, d / "build.log")
        print(scale, json.dumps({k: builds[str(scale)][k] for k in ("wall_s", "peak_rss_tree_gib", "n_sentences")}),
              flush=True)
        if scale in (1, args.compare_at):
            # 1x (and the --compare-at scale) keep their work directories: --compare-workers and
            # --kill-worker rebuild from them (also in a later run of this script) and compare
            # with this content.
            builds[str(scale)]["content_sha256"] = content_sha256(d / "out.db")
        else:
            shutil.rmtree(d / "work")
        save()
    done = sorted(int(s) for s in builds)
    if len(done) >= 2:
        peaks = [builds[str(s)]["peak_rss_tree_gib"] for s in done]
        result["peak_rss_ratio_max_over_min"] = round(max(peaks) / min(peaks), 3)
        result["time_exponent"] = round(fit_exponent(done, [builds[str(s)]["wall_s"] for s in done]), 3)
        # CPU seconds of the whole tree: the exponent that contention on a shared machine
        # cannot bend (wall times are only comparable when every loadavg_1min_before is low).
        if all("cpu_s" in builds[str(s)] for s in done):
            result["cpu_time_exponent"] = round(fit_exponent(done, [builds[str(s)]["cpu_s"] for s in done]), 3)
        save()

    base = tmp / f"x{args.compare_at}"
    if args.compare_workers:
        runs = {"1": [], "2": []}

        def rebuild(workers, tag):
            for stage_dir in list((base / "work").glob("*")):
                if stage_dir.name.split("-")[0].lstrip(".") in SHARDED:
                    shutil.rmtree(stage_dir)
            # --threads 1: the in-process run then uses one core (its pivot kernel would
            # otherwise thread over both), so the ratio is one core against two workers.
            db, log = base / f"w{workers}.db", base / f"w{workers}-{tag}.log"
            figures = run_measured(build_cmd(base / "recipe.toml", data, base / "work", db, workers)
                                   + ["--threads", "1"], log)
            secs = db_meta(db, "stage_seconds")
            return {**figures, "extract_pivot_s": round(sum(secs.get(s, 0) for s in SHARDED), 2),
                    "stage_seconds": secs, "store_s": store_seconds(log), "content_sha256": content_sha256(db)}

        # A discarded warm-up build first (the first build after the machine was busy with
        # something else runs slower), then rounds that alternate which count goes first.
        rebuild(2, "warmup")
        for r in range(args.repeat):
            for workers in ((1, 2) if r % 2 == 0 else (2, 1)):
                runs[str(workers)].append(rebuild(workers, f"r{r}"))
                print("workers", workers, "round", r, runs[str(workers)][-1]["extract_pivot_s"], flush=True)
        med = lambda xs: sorted(xs)[len(xs) // 2] if len(xs) % 2 else sum(sorted(xs)[len(xs) // 2 - 1:len(xs) // 2 + 1]) / 2
        comp = {"repeat": args.repeat, "runs": runs}
        for w in ("1", "2"):
            xs = [r["extract_pivot_s"] for r in runs[w]]
            comp[w] = {"extract_pivot_s_median": round(med(xs), 2), "extract_pivot_s_min": min(xs),
                       "extract_pivot_s_max": max(xs),
                       "stage_seconds_median": {s: round(med([r["stage_seconds"][s] for r in runs[w]]), 2)
                                                for s in SHARDED}}
        comp["speedup_extract_pivot"] = round(comp["1"]["extract_pivot_s_median"] / comp["2"]["extract_pivot_s_median"], 3)
        comp["speedup_per_round"] = [round(a["extract_pivot_s"] / b["extract_pivot_s"], 3)
                                     for a, b in zip(runs["1"], runs["2"])]
        comp["speedup_by_stage"] = {s: round(comp["1"]["stage_seconds_median"][s] / comp["2"]["stage_seconds_median"][s], 3)
                                    for s in SHARDED}
        shas = {r["content_sha256"] for w in ("1", "2") for r in runs[w]}
        comp["content_identical"] = shas == {builds[str(args.compare_at)]["content_sha256"]}
        comp["work_dir"] = str(base / "work")
        comp["scale"] = args.compare_at
        result["workers" if args.compare_at == 1 else f"workers_x{args.compare_at}"] = comp
        save()

    base = tmp / "x1"
    if args.kill_worker:
        for stage_dir in list((base / "work").glob("*")):
            if stage_dir.name.split("-")[0].lstrip(".") in SHARDED:
                shutil.rmtree(stage_dir)
        killed = []

        extract_seen = []

        def kill_one(proc, stage, elapsed):
            # Mid-task: two seconds into extract, when the cluster is up (its log line is
            # written before the first task) and the workers hold shards.
            if killed or stage != "extract":
                return
            if not extract_seen:
                extract_seen.append(elapsed)
            if elapsed - extract_seen[0] < 2.0 or "dask: <Client" not in (base / "killed.log").read_text():
                return
            workers = dask_workers(proc.pid)
            if workers:
                os.kill(workers[0], signal.SIGKILL)
                killed.append(workers[0])

        figures = run_measured(build_cmd(base / "recipe.toml", data, base / "work", base / "killed.db", 2),
                               base / "killed.log", on_sample=kill_one)
        sha = content_sha256(base / "killed.db")
        result["killed_worker"] = {**figures, "killed_pid": killed[0] if killed else None,
                                   "content_identical": sha == builds["1"]["content_sha256"]}
        print("killed", result["killed_worker"]["killed_pid"], result["killed_worker"]["content_identical"], flush=True)
        save()

    if args.multi:
        d = tmp / "multi"
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir()
        figures = run_measured([sys.executable, "-m", "pivot", "build", "--domain", "bio-multi", "--data", data,
                                "--work", str(d / "work"), "--out", str(d / "out.db"), "--workers", str(args.workers)],
                               d / "build.log")
        multi = {**summarize(d / "out.db", figures, d / "build.log"),
                 "pivot_languages": len(db_meta(d / "out.db", "pivot_languages"))}
        (RESULTS / "scale-multi.json").write_text(json.dumps(multi, indent=1) + "\n")
        print("multi", json.dumps({k: multi[k] for k in ("wall_s", "peak_rss_tree_gib", "n_sentences", "n_pairs")}))
    if not args.tmp:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
