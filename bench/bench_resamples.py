"""Spread of the headline APs over resamples of the training bitext.

    python bench/bench_resamples.py --data ../shared/data --tmp DIR [--seeds 3] [--fraction 0.8]
        [--workers 2] [--reference DB --view-work WORK] [--reuse] [--markdown-only]

For each seed s = 1..N the recipe (``recipes/bio.toml`` or ``--recipe``) is written again with
``[preprocess] sample_fraction = F`` and ``sample_seed = s``: its corpus stage keeps a
normalised sentence pair iff blake2b(s, english TAB foreign) / 2^64 < F
(pivot.pipeline.corpus.sample_keeper), so each resample is the same on every run and machine and
the seeds' resamples are independent. Each is built as a child process (``pivot build --recipe
... --workers W``, measured as bench_determinism measures a build) into ``DIR/work-sS``, which is
deleted once the database ``DIR/dbs/<name>-sS.db`` is written, and evaluated as the project
reports (docs/results.md): ``pivot eval DB --domain bio --data ... --ontology-gold test --work
VIEW --json ...``, which chooses the combination ★ on the ontology gold's dev part (in-bitext
view, full-set AP) and scores General and ★ on every gold set under both protocols, with the
paired bootstrap (1000 resamples, seed 0) for the intervals and Δ.

The in-bitext view of the ontology gold comes from the English bitext of the build whose work
dir is VIEW. ``--view-work`` fixes one for every database (the full bitext's build: every
database is then scored on the same gold pairs, and only the training bitext moves); without
it each resample's own work dir gives its view (evaluated before that dir is deleted).
``--reference DB`` (a database of the full bitext) is evaluated the same way and reported
beside the spread; it needs ``--view-work``.

Writes ``bench/results/resamples.json`` (per seed: the chosen ★, and per gold set and protocol
General's AP, ★'s AP, Δ = AP(★) − AP(General) absolute and relative, each with its bootstrap
interval, and General's coverage; then mean, sd (ddof = 1), min and max over the seeds; the
reference's figures) and ``docs/resamples.md`` (generated from the same numbers).
"""
import argparse
import json
import shlex
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _measure import db_meta, run_measured  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PROTOCOLS = ("full-set", "candidate")
#: The per-seed figures summarised over the seeds (fractions; Δ rel in per cent).
METRICS = ("general_ap", "star_ap", "delta_abs", "delta_rel_pct", "general_coverage")


def resample_recipe(text: str, fraction: float, seed: int) -> str:
    """The recipe with the resample's two keys at the top of its [preprocess] table."""
    header = "[preprocess]\n"
    if text.count(header) != 1:
        sys.exit("the recipe needs exactly one [preprocess] table to add the resample keys to")
    return text.replace(header, f"{header}sample_fraction = {fraction!r}\nsample_seed = {seed}\n")


def evaluate(python, db: Path, view: Path, data: str, domain: str, out_json: Path, log: Path) -> dict:
    cmd = [python, "-m", "pivot", "eval", str(db), "--domain", domain, "--data", data,
           "--ontology-gold", "test", "--work", str(view), "--json", str(out_json), "-q"]
    with open(log, "w") as fh:
        done = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}); see {log}")
    return json.loads(out_json.read_text(encoding="utf-8"))


def headline(ev: dict) -> dict:
    """The Headline table's figures of one evaluation: per gold set and protocol, General, ★, Δ."""
    star = ev["selection"].get("combination")
    out = {}
    for gold, protos in ev["golds"].items():
        for proto in PROTOCOLS:
            res = protos.get(proto)
            if not res:
                continue
            g, s = res["headline"]["general"], res["headline"]["star_figures"]
            out[f"{gold} / {proto}"] = {
                "n": res["n"], "n_positive": res["n_positive"],
                "general_ap": g["ap"], "general_ap_ci": g["ap_ci"],
                "general_proposed": g["n_proposed"], "general_coverage": g["coverage"],
                "star": star, "star_ap": s["ap"] if s else None, "star_ap_ci": s["ap_ci"] if s else None,
                "delta_abs": s["delta_abs"] if s else None, "delta_abs_ci": s["delta_abs_ci"] if s else None,
                "delta_rel_pct": s["delta_rel_pct"] if s else None,
                "delta_rel_pct_ci": s["delta_rel_pct_ci"] if s else None}
    return out


def spread(values: list) -> dict | None:
    values = [v for v in values if v is not None]
    if len(values) < 2:
        return None
    return {"mean": statistics.fmean(values), "sd": statistics.stdev(values),  # ddof = 1
            "min": min(values), "max": max(values), "n": len(values)}


def bitext_size(db: Path) -> dict:
    stats = db_meta(db, "corpus_stats")
    return {lang: {k: s["total"].get(k) for k in ("kept", "sampled_out")} for lang, s in stats.items()}


# ------------------------------------------------------------------------------ markdown


def _x(v, digits=1):
    return "–" if v is None else f"{100 * v:.{digits}f}"


def _cell(text: str) -> str:
    """Text for a Markdown table cell: a '|' (a signature's separator) escaped."""
    return text.replace("|", "\\|")


def _signed(v):
    return "–" if v is None else f"{100 * v:+.1f}"


def _ci(ci, sign=""):
    return "" if ci is None else f" [{100 * ci[0]:{sign}.1f}, {100 * ci[1]:{sign}.1f}]"


def _rel(v, ci=None):
    return "–" if v is None else f"{v:+.1f}" + ("" if ci is None else f" [{ci[0]:+.1f}, {ci[1]:+.1f}]")


def _spread(s, scale=100.0, sign=""):
    if s is None:
        return "–"
    f = f"{sign}.1f"
    return (f"{scale * s['mean']:{f}} ± {scale * s['sd']:.1f} "
            f"[{scale * s['min']:{f}}, {scale * s['max']:{f}}]")


def _sizes(figures) -> str:
    """n (positive) of a gold set over the resamples: one value, or the range (a candidate set
    is the union of a database's own proposals, so it differs between databases)."""
    def span(values):
        return str(values[0]) if min(values) == max(values) else f"{min(values)}–{max(values)}"
    return f"{span([f['n'] for f in figures])} ({span([f['n_positive'] for f in figures])})"


def markdown(result: dict) -> str:
    runs, ref = result["resamples"], result.get("reference")
    rows = list(runs[0]["headline"])
    out = [
        "# Spread over bitext resamples", "",
        "Generated by `bench/bench_resamples.py` (do not edit by hand; the numbers are in "
        "`bench/results/resamples.json`):  ",
        f"`{result['command']}`", "",
        f"Each resample keeps a sentence pair of the `{result['recipe_name']}` recipe's bitext iff "
        f"blake2b(seed, english TAB foreign) / 2^64 < {result['fraction']!r} (`[preprocess] "
        f"sample_fraction`, `sample_seed`; after the length filters and deduplication), seeds "
        f"{', '.join(str(r['seed']) for r in runs)}; everything else is the recipe's. Each resample "
        "is built and evaluated as docs/results.md is: `pivot eval DB --domain bio --ontology-gold "
        "test --work VIEW`, the combination ★ chosen per database on the ontology gold's dev part "
        "(in-bitext view, full-set AP), General and ★ scored on the test parts and the recipe's gold "
        "sets, 95% intervals from the paired bootstrap over gold pairs (1000 resamples, seed 0; "
        "without the rival and the feature models, which change neither the choice nor these figures). "
        + ("The in-bitext view is the full bitext's for every database (`--view-work`): all are "
           "scored on the same gold pairs. " if result["view_work"] else
           "The in-bitext view is each resample's own bitext, so the in-bitext gold sets differ "
           "between resamples. ")
        + "AP and Δ abs ×100, Δ rel in % of General's AP, coverage = share of a gold set's pairs "
        "(full-set) or candidates that General proposes, in %; a candidate set is the union of the "
        "database's own top-20 proposals, so its size differs between databases. Spread = mean ± sd (ddof 1) "
        "[min, max] over the resamples. A resample holds "
        f"{100 * result['fraction']:.0f}% of the pairs, so its mean need not equal the full bitext's "
        "figure; the sd says how much a figure moves with the training bitext, to set beside the "
        "bootstrap intervals, which say how much it moves with the gold pairs.", "",
        "★ is the combination General+X with the best dev AP, ties broken by the larger name "
        "(pivot.eval.evidence.select_on_dev); *tied* counts the combinations that share ★'s dev AP.", "",
        "| bitext | sentence pairs kept | ★ (chosen on dev) | dev AP ×100: ★, General | tied | signature |",
        "|---|---|---|---|---|---|"]
    for label, r in [(f"seed {r['seed']}", r) for r in runs] + ([("full", ref)] if ref else []):
        kept = " + ".join(f"{v['kept']} {lang}" for lang, v in r["bitext"].items())
        dev = r["selection"].get("dev AP", {})
        star = r["star"]
        tied = sum(1 for m, v in dev.items() if "+" in m and star and v == dev.get(star))
        out.append(f"| {label} | {kept} | {star} | {_x(dev.get(star))}, {_x(dev.get('general'))} | "
                   f"{tied} of {sum(1 for m in dev if '+' in m)} | `{_cell(r['signature'])}` |")
    out += ["", "## Spread over the resamples", "",
            "| gold / protocol | n (positive) | General AP | ★ AP | Δ abs ×100 | Δ rel % | General coverage %"
            + (" | full bitext: General AP, ★ AP, Δ rel % |" if ref else " |"),
            "|---|---|---|---|---|---|---|" + ("---|" if ref else "")]
    for row in rows:
        s = result["spread"][row]
        line = (f"| {row} | {_sizes([r['headline'][row] for r in runs if row in r['headline']])} | "
                f"{_spread(s['general_ap'])} | "
                f"{_spread(s['star_ap'])} | {_spread(s['delta_abs'], sign='+')} | "
                f"{_spread(s['delta_rel_pct'], scale=1.0, sign='+')} | {_spread(s['general_coverage'])} |")
        if ref:
            f = ref["headline"].get(row)
            line += (" – |" if f is None else
                     f" {_x(f['general_ap'])}, {_x(f['star_ap'])}, {_rel(f['delta_rel_pct'])} |")
        out.append(line)
    out += ["", "## Per resample", "",
            "| gold / protocol | bitext | n (positive) | General AP [95% CI] | ★ AP [95% CI] | "
            "Δ abs ×100 [95% CI] | Δ rel % [95% CI] | General proposes |", "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        for label, r in [(f"seed {r['seed']}", r) for r in runs] + ([("full", ref)] if ref else []):
            f = r["headline"].get(row)
            if f is None:
                continue
            out.append(f"| {row} | {label} | {f['n']} ({f['n_positive']}) | "
                       f"{_x(f['general_ap'])}{_ci(f['general_ap_ci'])} | "
                       f"{_x(f['star_ap'])}{_ci(f['star_ap_ci'])} | "
                       f"{_signed(f['delta_abs'])}{_ci(f['delta_abs_ci'], '+')} | "
                       f"{_rel(f['delta_rel_pct'], f['delta_rel_pct_ci'])} | "
                       f"{f['general_proposed']} of {f['n']} |")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------ main


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help="data root (read only)")
    ap.add_argument("--tmp", type=Path,
                    help="work dirs (deleted after each build), logs, and the databases under dbs/")
    ap.add_argument("--recipe", type=Path, default=ROOT / "recipes" / "bio.toml")
    ap.add_argument("--domain", default="bio", help="pivot eval --domain (the recipe's gold sets)")
    ap.add_argument("--seeds", type=int, default=3, help="resample seeds 1..N (default: %(default)s)")
    ap.add_argument("--fraction", type=float, default=0.8, help="sample_fraction (default: %(default)s)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--view-work", type=Path, default=None,
                    help="work dir whose corpus.*/bitext.en give every database's in-bitext view "
                         "(default: each resample's own)")
    ap.add_argument("--reference", type=Path, default=None, help="a database of the full bitext")
    ap.add_argument("--reuse", action="store_true", help="evaluate a resample's database already in dbs/")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / "resamples.json")
    ap.add_argument("--md", type=Path, default=ROOT / "docs" / "resamples.md")
    ap.add_argument("--markdown-only", action="store_true",
                    help="only write --md again from the results in --json (no build, no evaluation)")
    args = ap.parse_args()
    if args.markdown_only:
        args.md.write_text(markdown(json.loads(args.json.read_text(encoding="utf-8"))), encoding="utf-8")
        return
    if args.data is None or args.tmp is None:
        sys.exit("--data and --tmp are needed to build and evaluate")
    if args.seeds < 2:
        sys.exit("--seeds: at least 2 resamples for a standard deviation")
    if not 0 < args.fraction < 1:
        sys.exit("--fraction: a resample keeps a fraction strictly between 0 and 1")
    if args.reference is not None and args.view_work is None:
        sys.exit("--reference needs --view-work: the in-bitext view of the reference's own build")
    command = "python bench/bench_resamples.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])

    tmp = args.tmp.resolve()
    (tmp / "dbs").mkdir(parents=True, exist_ok=True)
    (tmp / "logs").mkdir(exist_ok=True)
    text = args.recipe.read_text(encoding="utf-8")
    name = args.recipe.stem
    runs = []
    for seed in range(1, args.seeds + 1):
        recipe = tmp / f"{name}-s{seed}.toml"
        recipe.write_text(resample_recipe(text, args.fraction, seed), encoding="utf-8")
        work, db = tmp / f"work-s{seed}", tmp / "dbs" / f"{name}-s{seed}.db"
        build = None
        if not (args.reuse and db.is_file()):
            cmd = [args.python, "-m", "pivot", "build", "--recipe", str(recipe), "--data", args.data,
                   "--work", str(work), "--out", str(db), "--workers", str(args.workers)]
            build = run_measured(cmd, tmp / "logs" / f"build-s{seed}.log")
            print(json.dumps({"seed": seed, **{k: v for k, v in build.items() if k != "peak_rss_tree_gib_by_stage"}}),
                  flush=True)
        view = args.view_work or work
        if args.view_work is not None:
            shutil.rmtree(work, ignore_errors=True)
        elif not view.is_dir():
            sys.exit(f"{view}: no work dir for the in-bitext view of seed {seed} (run without --reuse)")
        ev = evaluate(args.python, db, view, args.data, args.domain, tmp / f"eval-s{seed}.json",
                      tmp / "logs" / f"eval-s{seed}.log")
        shutil.rmtree(work, ignore_errors=True)
        runs.append({"seed": seed, "database": str(db), "signature": ev["signature"], "bitext": bitext_size(db),
                     "star": ev["selection"].get("combination"), "selection": ev["selection"],
                     "build": build, "headline": headline(ev)})
        print(json.dumps({"seed": seed, "star": runs[-1]["star"], "bitext": runs[-1]["bitext"]}), flush=True)

    reference = None
    if args.reference is not None:
        ev = evaluate(args.python, args.reference, args.view_work, args.data, args.domain, tmp / "eval-full.json",
                      tmp / "logs" / "eval-full.log")
        reference = {"database": str(args.reference), "signature": ev["signature"],
                     "bitext": bitext_size(args.reference), "star": ev["selection"].get("combination"),
                     "selection": ev["selection"], "headline": headline(ev)}

    rows = list(runs[0]["headline"])
    result = {
        "command": command, "recipe": str(args.recipe), "recipe_name": name, "fraction": args.fraction,
        "seeds": [r["seed"] for r in runs], "view_work": str(args.view_work) if args.view_work else None,
        "units": "AP, Δ abs and coverage as fractions; Δ rel in % of General's AP; sd with ddof = 1",
        "resamples": runs,
        "spread": {row: {m: spread([r["headline"][row][m] for r in runs if row in r["headline"]]) for m in METRICS}
                   for row in rows},
        "reference": reference,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    args.md.write_text(markdown(result), encoding="utf-8")
    print(f"wrote {args.json} and {args.md}")


if __name__ == "__main__":
    main()
