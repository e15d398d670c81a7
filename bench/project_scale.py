"""Project the build to PPDB scale (100M sentence pairs) on N nodes from the measured curves.

    python bench/project_scale.py [--sentences 100e6] [--languages 20] [--cores 2] [--nodes 1 8 32 128]

Reads bench/results/scale.json (1x..8x copies of the bio bitext, --workers 1 vs 2) and
bench/results/scale-multi.json (bio-multi: 4x the sentence pairs, 165 languages, real growth of
the vocabulary), writes bench/results/projection.json and prints the Markdown table of
docs/scaling.md. The model, stated so that it can be argued with:

* every stage's seconds follow t(s) = a * s**b, fitted by least squares on log-log over the
  copies (s = sentence pairs / those of 1x);
* **align** runs one language at a time per node, on all of the node's cores (the EM kernel is
  threaded); at the target the pairs are split evenly over ``--languages`` languages, so a
  language takes t_align(s / L) and the languages are spread over the nodes;
* **extract, translation, pivot** are Dask tasks: their work in core-seconds is the
  ``--workers 1`` time of 1x scaled by their fitted exponent, divided over N * cores at the
  parallel efficiency measured between 1 and 2 workers;
* every other stage (corpus, encode, LM text and LMs, scores, weights, combine, the database
  write) streams in the build's own process: its seconds do not shrink with nodes (Amdahl);
* copies repeat the same phrases, so they cannot show how the **distinct** pairs grow; the
  database rows, the write and the one unsharded memory peak (assembling the pruned pivot
  structure) are scaled from bio to bio-multi, the only measured pair of real corpora
  (exponent of rows per sentence pair), an extrapolation over 65x that the table marks.
"""
import argparse
import json
import math
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
SHARDED = ("extract", "translation", "pivot")


def fit_power(xs, ys):
    """Least-squares a, b of y = a * x**b on log-log axes."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    b = sum((x - mx) * (y - my) for x, y in zip(lx, ly)) / sum((x - mx) ** 2 for x in lx)
    return math.exp(my - b * mx), b


def stage_group(name):
    if name.startswith("align."):
        return "align"
    if name in SHARDED:
        return "sharded"
    return "serial"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sentences", type=float, default=100e6)
    ap.add_argument("--languages", type=int, default=20, help="pivot languages the target bitext is spread over")
    ap.add_argument("--cores", type=int, default=2, help="cores per node")
    ap.add_argument("--nodes", type=int, nargs="*", default=[1, 8, 32, 128])
    args = ap.parse_args()

    scale = json.loads((RESULTS / "scale.json").read_text())
    multi = json.loads((RESULTS / "scale-multi.json").read_text())
    builds = {int(s): b for s, b in scale["scales"].items()}
    if len(builds) < 2 or "workers" not in scale:
        raise SystemExit("bench/results/scale.json needs >= 2 scales and the --compare-workers run")
    scales = sorted(builds)
    n1 = builds[1]["n_sentences"]
    s_target = args.sentences / n1

    # Seconds per group at each scale: align.*, the sharded stages, and the in-process rest.
    groups = {}
    for s in scales:
        b = builds[s]
        secs = dict(b["stage_seconds"], store=b["store_s"])
        for name, t in secs.items():
            groups.setdefault(stage_group(name), {}).setdefault(s, 0.0)
            groups[stage_group(name)][s] += t
    fits = {g: fit_power(scales, [groups[g][s] for s in scales]) for g in groups}

    w = scale["workers"]
    efficiency = w["speedup_extract_pivot"] / 2          # measured on 2 workers
    sharded_core_s = w["1"]["extract_pivot_s"] * s_target ** fits["sharded"][1]

    # Real growth: distinct pairs and the assemble peak, bio -> bio-multi.
    r_sent = multi["n_sentences"] / n1
    b_pairs = math.log(multi["n_pairs"] / builds[1]["n_pairs"]) / math.log(r_sent)
    pairs_target = builds[1]["n_pairs"] * s_target ** b_pairs
    b_peak = math.log(multi["peak_rss_tree_gib"] / builds[1]["peak_rss_tree_gib"]) / math.log(r_sent)
    peak_target = builds[1]["peak_rss_tree_gib"] * s_target ** b_peak
    store_per_pair = builds[1]["store_s"] / builds[1]["n_pairs"]
    # The serial group at the target: its fitted curve over the copies, plus the write of the
    # distinct pairs the copies could not show (the copies' store seconds are replaced).
    serial_wo_store = {s: groups["serial"][s] - builds[s]["store_s"] for s in scales}
    a_sr, b_sr = fit_power(scales, [serial_wo_store[s] for s in scales])
    serial_target = a_sr * s_target ** b_sr + store_per_pair * pairs_target

    a_al, b_al = fits["align"]
    per_language = a_al * (s_target / args.languages) ** b_al     # one language on one node
    rows = []
    for n in args.nodes:
        align_wall = math.ceil(args.languages / n) * per_language
        sharded_wall = sharded_core_s / (n * args.cores * efficiency)
        rows.append({"nodes": n, "align_h": align_wall / 3600, "sharded_h": sharded_wall / 3600,
                     "serial_h": serial_target / 3600,
                     "total_h": (align_wall + sharded_wall + serial_target) / 3600})
    out = {"target_sentences": args.sentences, "scale_vs_bio": round(s_target, 1), "languages": args.languages,
           "cores_per_node": args.cores,
           "fits": {g: {"a": round(a, 3), "b": round(b, 3)} for g, (a, b) in fits.items()},
           "serial_without_store_fit": {"a": round(a_sr, 3), "b": round(b_sr, 3)},
           "parallel_efficiency_2_workers": round(efficiency, 3),
           "pairs_exponent_bio_to_multi": round(b_pairs, 3), "pairs_projected": round(pairs_target),
           "assemble_peak_exponent_bio_to_multi": round(b_peak, 3), "assemble_peak_gib_projected": round(peak_target, 1),
           "rows": [{k: round(v, 2) for k, v in r.items()} for r in rows]}
    (RESULTS / "projection.json").write_text(json.dumps(out, indent=1) + "\n")

    print(f"Target: {args.sentences:,.0f} sentence pairs = {s_target:.0f}x bio, over {args.languages} "
          f"pivot languages; nodes of {args.cores} cores.\n")
    print("| nodes | align (h) | extract + translation + pivot (h) | in-process stages (h) | total (h) |")
    print("|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['nodes']} | {r['align_h']:.1f} | {r['sharded_h']:.1f} | {r['serial_h']:.1f} | {r['total_h']:.1f} |")
    print(f"\nFitted exponents over the copies: align {fits['align'][1]:.2f}, sharded {fits['sharded'][1]:.2f}, "
          f"in-process {b_sr:.2f} (without the write); parallel efficiency at 2 workers {efficiency:.2f}.")
    print(f"Distinct pairs grow as sentences^{b_pairs:.2f} (bio -> bio-multi): about {pairs_target / 1e6:,.0f}M "
          f"pairs at the target; the assemble peak as sentences^{b_peak:.2f}: about {peak_target:,.0f} GiB "
          f"on the node that assembles (extrapolated {s_target / r_sent:.0f}x beyond bio-multi).")


if __name__ == "__main__":
    main()
