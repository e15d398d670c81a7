"""Project the build to PPDB scale (100M sentence pairs) on N nodes from the measured curves.

    python bench/project_scale.py [--sentences 100e6] [--languages 20] [--cores 2] [--nodes 1 8 32 128]

Inputs (all measured by the benchmark scripts, kept in bench/results/):

* determinism-bundles.json: the clean bio build of this release's final code (quiet machine);
  the seconds of every stage that runs in the build's own process or aligns, the database
  write's seconds and its peak;
* scale.json: the bio bitext at 1x..8x (copies). Its wall times were taken on a machine shared
  with other builds, so the growth is read from ``cpu_s`` (user + system seconds of the whole
  process tree, which contention does not inflate): the fitted exponent of cpu_s over the
  copies is the check that no stage grows faster than the bitext. Its ``workers`` blocks
  (``workers``: 1x, ``workers_xS``: S times the bitext) give the extract + translation + pivot
  seconds at --workers 1 and 2; the largest S measured is used (fixed costs weigh least there);
* scale-multi.json: bio-multi (4.1x the sentence pairs, 165 languages), the only measured pair
  of real corpora of different sizes: how the *distinct* pairs grow, which copies cannot show.

The model, stated so that it can be argued with:

* every stage that reads the bitext grows linearly with it (exponent 1: the copies' CPU
  exponent is below 1, because the LM stages are fixed by the in-domain text);
* **align** runs one language at a time per node, on all of the node's cores (the EM kernel is
  threaded); at the target the pairs are split evenly over ``--languages`` languages and the
  languages are spread over the nodes;
* **extract, translation, pivot** are Dask tasks: the ``--workers 1`` seconds, scaled, divided
  over N * cores at the parallel efficiency measured between 1 and 2 workers;
* corpus, encode, scores, weights stream in the build's own process (Amdahl: nodes do not
  help them); the LM stages are constant; the database write grows with the distinct pairs,
  projected bio -> bio-multi, and so does its memory (it holds the pruned pairs' rows: the one
  step whose memory is not bounded by a shard or a key range): an extrapolation far beyond
  the measured range, marked as such.
"""
import argparse
import json
import math
import statistics
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
SHARDED = ("extract", "translation", "pivot")
CONSTANT = ("lmtext", "lm", "combine")


def fit_power(xs, ys):
    """Least-squares a, b of y = a * x**b on log-log axes."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    b = sum((x - mx) * (y - my) for x, y in zip(lx, ly)) / sum((x - mx) ** 2 for x in lx)
    return math.exp(my - b * mx), b


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sentences", type=float, default=100e6)
    ap.add_argument("--languages", type=int, default=20, help="pivot languages the target bitext is spread over")
    ap.add_argument("--cores", type=int, default=2, help="cores per node")
    ap.add_argument("--nodes", type=int, nargs="*", default=[1, 8, 32, 128])
    args = ap.parse_args()

    det = json.loads((RESULTS / "determinism-bundles.json").read_text())["builds"]
    scale = json.loads((RESULTS / "scale.json").read_text())
    multi = json.loads((RESULTS / "scale-multi.json").read_text())
    builds = {int(s): b for s, b in scale["scales"].items()}
    if len(builds) < 2 or "workers" not in scale:
        raise SystemExit("bench/results/scale.json needs >= 2 scales and the --compare-workers run")
    scales = sorted(builds)
    n1 = builds[1]["n_sentences"]
    s_target = args.sentences / n1

    # Quiet seconds per stage at 1x: the median of the three clean builds.
    names = sorted(set().union(*(b["stage_seconds"] for b in det)))
    quiet = {k: statistics.median(b["stage_seconds"].get(k, 0.0) for b in det) for k in names}
    align_1x = sum(v for k, v in quiet.items() if k.startswith("align."))
    streamed_1x = sum(v for k, v in quiet.items()
                      if not k.startswith("align.") and k not in SHARDED and k not in CONSTANT)
    constant = sum(quiet.get(k, 0.0) for k in CONSTANT)
    with_cpu = [s for s in scales if "cpu_s" in builds[s]]
    _, b_cpu = fit_power(with_cpu, [builds[s]["cpu_s"] for s in with_cpu])

    compared = {1: scale["workers"], **{int(k[len("workers_x"):]): v for k, v in scale.items()
                                        if k.startswith("workers_x") and k[len("workers_x"):].isdigit()}}
    at = max(compared)
    w = compared[at]
    efficiency = w["speedup_extract_pivot"] / 2
    sharded_core_s = w["1"]["extract_pivot_s_median"] / at * s_target
    store_1x = statistics.median(b["store_s"] for b in det)

    r_sent = multi["n_sentences"] / n1
    b_pairs = math.log(multi["n_pairs"] / builds[1]["n_pairs"]) / math.log(r_sent)
    pairs_target = builds[1]["n_pairs"] * s_target ** b_pairs
    # The database write's peak (the build process holding the pruned pairs' rows).
    store_peak = lambda b: b["peak_rss_tree_gib_by_stage"]["store"]
    bio_store_peak = statistics.median(store_peak(b) for b in det)
    b_peak = math.log(store_peak(multi) / bio_store_peak) / math.log(r_sent)
    peak_target = bio_store_peak * s_target ** b_peak
    serial = streamed_1x * s_target + constant + store_1x * pairs_target / builds[1]["n_pairs"]

    per_language = align_1x * s_target / args.languages
    rows = []
    for n in args.nodes:
        align_wall = math.ceil(args.languages / n) * per_language
        sharded_wall = sharded_core_s / (n * args.cores * efficiency)
        rows.append({"nodes": n, "align_h": align_wall / 3600, "sharded_h": sharded_wall / 3600,
                     "in_process_h": serial / 3600, "total_h": (align_wall + sharded_wall + serial) / 3600})
    out = {"target_sentences": args.sentences, "scale_vs_bio": round(s_target, 1), "languages": args.languages,
           "cores_per_node": args.cores, "quiet_1x_seconds": {"align": round(align_1x, 1),
           "streamed_in_process": round(streamed_1x, 1), "constant": round(constant, 1), "store": store_1x,
           "sharded_workers1": round(w["1"]["extract_pivot_s_median"] / at, 2)},
           "workers_compared_at_scale": at,
           "cpu_exponent_over_copies": round(b_cpu, 3), "parallel_efficiency_2_workers": round(efficiency, 3),
           "pairs_exponent_bio_to_multi": round(b_pairs, 3), "pairs_projected": round(pairs_target),
           "store_peak_exponent_bio_to_multi": round(b_peak, 3),
           "store_peak_gib_projected": round(peak_target, 1),
           "rows": [{k: round(v, 2) for k, v in r.items()} for r in rows]}
    (RESULTS / "projection.json").write_text(json.dumps(out, indent=1) + "\n")

    print(f"Target: {args.sentences:,.0f} sentence pairs = {s_target:.0f}x bio, over {args.languages} "
          f"pivot languages; nodes of {args.cores} cores.\n")
    print("| nodes | align (h) | extract + translation + pivot (h) | in-process stages (h) | total (h) |")
    print("|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['nodes']} | {r['align_h']:.1f} | {r['sharded_h']:.1f} | {r['in_process_h']:.1f} | {r['total_h']:.1f} |")
    print(f"\nCPU-seconds exponent over the copies: {b_cpu:.2f}; parallel efficiency at 2 workers {efficiency:.2f} "
          f"(measured at {at}x).")
    print(f"Distinct pairs grow as sentences^{b_pairs:.2f} (bio -> bio-multi): about {pairs_target / 1e6:,.0f}M "
          f"pairs at the target; the database write's peak as sentences^{b_peak:.2f}: about {peak_target:,.0f} GiB "
          f"in the build's process (extrapolated {s_target / r_sent:.0f}x beyond bio-multi).")


if __name__ == "__main__":
    main()
