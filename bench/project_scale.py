"""Project the build to PPDB scale (100M sentence pairs) on N nodes from measured per-stage curves.

    python bench/project_scale.py --build bench/results/determinism-session5.json \
        [--sentences 100e6] [--languages 20] [--cores 2] [--nodes 1 8 32 128]

Inputs (all measured by the benchmark scripts, kept in bench/results/):

* ``--build``: a bench_determinism.py result of this code with a ``--workers 1`` build. Its
  ``cpu_s_by_stage`` (CPU seconds of the process tree, sampled every 0.2 s and charged to the
  stage the log says is running; in one process the stages run one after another, so the
  split is clean) is each stage's cost at 1x, bio: 374k sentence pairs;
* scale.json: the bio bitext at 1x..8x (copies), whose stage seconds give each bitext-bound
  stage's growth (the fitted exponent of its seconds over the copies), and whose
  ``workers_x4`` block gives the parallel efficiency of two workers against one on the sharded
  stages (4x the bitext, median of 3 alternating rounds);
* scale-multi.json: bio-multi (4.1x the sentence pairs, 165 languages): how the *distinct*
  paraphrase pairs grow with the sentences (copies add none), the law of every stage whose
  work is the pairs.

The model, stated so that it can be argued with:

* **growth**: a stage that reads the bitext grows as the copies measured it (corpus, align,
  encode, score, weights, extract: about linearly; lmtext and lm less, as the in-domain text
  fixes the LMs' size); translation merges the extracted phrase-pair occurrences, which grow as
  the bitext (linear; the copies' exponent, 0.35, would be too kind: copies repeat pairs); lhs
  labels the distinct phrases, at most as many as the tokens (linear, an upper bound); the
  stages whose work is the distinct paraphrase pairs (pivot, ppdb2, the database write) grow as
  they do, sentences^b with b from bio -> bio-multi (about 1.4, faster than the bitext: pivoting
  is quadratic in a foreign phrase's degree); preflight reads every input (linear); the
  tagger, the combination's fit and the ppdb2 fit (its share of the ppdb2 stage's CPU at 1x,
  ``--fit-seconds``, from the build's log line "ppdb2: fitted in") are constant.
* **where it runs** (this code): tasks on every worker of every node at the measured
  efficiency: align (by shard), score (by LM and range), extract, translation, pivot, the
  ppdb2 labels and apply, the database write with ``--parts`` (a part per key range, written
  by the workers: at this size one file is not a sensible output); the corpus stage one task
  per language (at most ``--languages`` at once); in the build's own process, one core:
  preflight, encode, lmtext, weights, lhs, the ppdb2 fit, the combination.
* **critical path**: the stages run as soon as what they need is done, so the aligner and the
  LM branch (lmtext, lm, score) overlap; ppdb2, lhs and combine overlap; the rest follow one
  another.
"""
import argparse
import json
import math
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
#: Each stage's growth law and where it runs at the target (see the docstring).
BITEXT, PAIRS, CONSTANT, LINEAR = "bitext (copies)", "distinct pairs", "constant", "linear"
STAGES = {
    "start": (LINEAR, "process"),        # preflight reads every input
    "corpus": (BITEXT, "languages"),
    "align": (BITEXT, "tasks"),
    "encode": (BITEXT, "process"),
    "lmtext": (BITEXT, "process"),
    "lm": (BITEXT, "process"),
    "score": (BITEXT, "tasks"),
    "weights": (BITEXT, "process"),
    "extract": (BITEXT, "tasks"),
    "translation": (LINEAR, "tasks"),
    "pivot": (PAIRS, "tasks"),
    "ppdb2": (PAIRS, "tasks"),           # its fit is split off as a constant (ppdb2-fit)
    "ppdb2-fit": (CONSTANT, "process"),
    "tagger": (CONSTANT, "process"),
    "lhs": (LINEAR, "process"),
    "combine": (CONSTANT, "process"),
    "store": (PAIRS, "tasks"),
}
OVERLAP = [("align",), ("lmtext", "lm", "score")]       # side by side: the longer counts
TOGETHER = [("ppdb2", "ppdb2-fit"), ("lhs", "tagger"), ("combine",)]


def fit_power(xs, ys):
    """Least-squares a, b of y = a * x**b on log-log axes."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    b = sum((x - mx) * (y - my) for x, y in zip(lx, ly)) / sum((x - mx) ** 2 for x in lx)
    return math.exp(my - b * mx), b


def stage_of(key: str) -> str | None:
    """The stage family of a cpu_s_by_stage key ("align.fr" -> "align"; "after X" -> X)."""
    key = key.removeprefix("after ")
    name = key.split(".")[0]
    return name if name in STAGES else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", type=Path, required=True, help="a bench_determinism.py result with a --workers 1 build")
    ap.add_argument("--fit-seconds", type=float, default=0.0,
                    help="the ppdb2 fit's seconds at 1x (its log line 'ppdb2: fitted in'): constant, not grown")
    ap.add_argument("--sentences", type=float, default=100e6)
    ap.add_argument("--languages", type=int, default=20, help="pivot languages the target bitext is spread over")
    ap.add_argument("--cores", type=int, default=2, help="cores per node")
    ap.add_argument("--nodes", type=int, nargs="*", default=[1, 8, 32, 128])
    ap.add_argument("--json", type=Path, default=RESULTS / "projection.json")
    args = ap.parse_args()

    det = json.loads(args.build.read_text())
    one = next(b for b in det["builds"] if b["workers"] == 1)
    if "cpu_s_by_stage" not in one:
        raise SystemExit(f"{args.build}: its --workers 1 build has no cpu_s_by_stage (bench/_measure.py records it)")
    cpu1: dict[str, float] = {}
    for key, sec in one["cpu_s_by_stage"].items():
        name = stage_of(key)
        if name is not None:
            cpu1[name] = cpu1.get(name, 0.0) + sec
    fit_share = min(args.fit_seconds, cpu1.get("ppdb2", 0.0))
    cpu1["ppdb2-fit"] = fit_share
    cpu1["ppdb2"] = cpu1.get("ppdb2", 0.0) - fit_share

    scale = json.loads((RESULTS / "scale.json").read_text())
    multi = json.loads((RESULTS / "scale-multi.json").read_text())
    builds = {int(s): b for s, b in scale["scales"].items()}
    n1 = builds[1]["n_sentences"]
    s_target = args.sentences / n1
    copies = sorted(builds)
    exponents = {}
    for name in ("corpus", "align", "encode", "lmtext", "lm", "score", "weights", "extract"):
        ys = [sum(v for k, v in builds[s]["stage_seconds"].items() if k.split(".")[0] == name) for s in copies]
        exponents[name] = round(min(1.0, fit_power(copies, ys)[1]), 3) if all(ys) else 1.0
    r_sent = multi["n_sentences"] / n1
    b_pairs = math.log(multi["n_pairs"] / builds[1]["n_pairs"]) / math.log(r_sent)
    w = scale["workers_x4"]
    efficiency = w["speedup_extract_pivot"] / 2

    def grown(name):
        law = STAGES[name][0]
        if law == CONSTANT:
            return cpu1.get(name, 0.0)
        b = 1.0 if law == LINEAR else b_pairs if law == PAIRS else exponents[name]
        return cpu1.get(name, 0.0) * s_target ** b

    target_cpu = {name: grown(name) for name in STAGES}
    rows = []
    for n in args.nodes:
        slots = n * args.cores

        def seconds(name, slots=slots):
            where = STAGES[name][1]
            if where == "tasks":
                return target_cpu[name] / (slots * efficiency)
            if where == "languages":
                return target_cpu[name] / min(args.languages, slots)
            return target_cpu[name]

        wall = seconds("start") + seconds("corpus")
        wall += max(sum(seconds(s) for s in chain) for chain in OVERLAP)
        for name in ("encode", "weights", "extract", "translation", "pivot"):
            wall += seconds(name)
        wall += max(sum(seconds(s) for s in group) for group in TOGETHER)
        wall += seconds("store")
        serial = sum(seconds(s) for s in STAGES if STAGES[s][1] == "process")
        rows.append({"nodes": n, "total_h": wall / 3600, "in_process_h": serial / 3600,
                     "tasks_h": sum(seconds(s) for s in STAGES if STAGES[s][1] != "process") / 3600})

    out = {"build": str(args.build), "target_sentences": args.sentences, "scale_vs_bio": round(s_target, 1),
           "languages": args.languages, "cores_per_node": args.cores,
           "cpu_s_1x_workers1": {k: round(v, 1) for k, v in cpu1.items()},
           "growth_exponents_over_copies": exponents, "pairs_exponent_bio_to_multi": round(b_pairs, 3),
           "parallel_efficiency_2_workers": round(efficiency, 3),
           "cpu_h_at_target": {k: round(v / 3600, 2) for k, v in target_cpu.items()},
           "rows": [{k: round(v, 2) for k, v in r.items()} for r in rows],
           "largest_one_process_rss_gib_1x": {
               f"workers {b['workers']}": max((b.get("peak_one_process_rss_gib_by_stage") or {"?": None}).values())
               for b in det["builds"]}}
    args.json.write_text(json.dumps(out, indent=1) + "\n")

    print(f"Target: {args.sentences:,.0f} sentence pairs = {s_target:.0f}x bio, over {args.languages} pivot "
          f"languages; nodes of {args.cores} cores; distinct pairs grow as sentences^{b_pairs:.2f}.\n")
    print("| nodes | total (h) | of it in the build's process (h) | tasks (h) |")
    print("|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['nodes']} | {r['total_h']:.2f} | {r['in_process_h']:.2f} | {r['tasks_h']:.2f} |")
    print("\nCPU hours at the target by stage:", json.dumps(out["cpu_h_at_target"]))


if __name__ == "__main__":
    main()
