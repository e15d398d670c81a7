"""Benchmark: the align stage of the bio recipe by shards (pivot.pipeline.ibm_shards), --workers 1 against 2.

    python bench/bench_align_sharded.py --data ../shared/data --base BASE_WORK [--workers 1 2] [--rounds 1]
        [--main-code DIR [--main-workers 1 2]] [--aer W] [--tmp DIR] [--json bench/results/align_sharded.json]

BASE_WORK is the work directory of a finished bio build (its ``corpus.*`` and ``align.*``
folders). Each run gets a fresh work directory holding hard links to BASE_WORK's corpus folders
(so the corpus stages are reused, not rebuilt) and runs, in a child process, only the corpus and
align stages of the bio recipe (``Build("bio").run(until="align")``) with ``--workers W``: a local
cluster of W single-threaded worker processes, started while preflight reads the inputs, as in
a build (W = 1: every task in the child's own process, its kernels on every core). Measured:
``align_s``, the wall seconds of ``bitexts`` (the corpus stages are reused; the languages' align
stages run side by side, so their own timers overlap: each is kept too), the child's wall and
CPU seconds and the peak RSS summed over its process tree (bench/_measure.py); checked: every file of each align folder
(links-NNNNN.npz, links.json) is byte-identical to BASE_WORK's, and so is the stage's content key.

``--main-code DIR``: also run the same with the code of another checkout (its ``pivot``
package and compiled kernels first on PYTHONPATH) with ``--main-workers`` (default 1), e.g.
the main branch before the aligner was sharded (its align ran in the build's process whatever
--workers says), or this branch before a change.

``--aer W``: also align `pivot align-eval`'s training set (the 447 Hansards gold pairs and
Tatoeba fr-en) by shards on W workers (:func:`pivot.pipeline.ibm_shards.align_both_sharded`,
shards cut as the align stage cuts them) and score the gold pairs: the AER of the sharded
aligner itself (`pivot align-eval` runs the in-memory one; both gave 0.221 before).

``--rounds`` repeats the whole set, alternating the order of the variants, so that the load of
other programs falls on each alike. Writes the JSON (one entry per run and a summary: the
median align seconds per variant).
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from _measure import run_measured, write_json  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, logging, sys, time
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s", stream=sys.stdout)
from pivot.pipeline.run import Build
data, work, out, workers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
pipe = Build("bio", data=data, work=work, out=out, workers=workers, prestart=True, quiet=True)
try:
    t0 = time.perf_counter()
    pipe.run(until="align")
    seconds = time.perf_counter() - t0
finally:
    pipe.engine.close()
import pivot
print("RESULT " + json.dumps({"pivot": pivot.__file__, "timings": pipe.wd.timings, "contents": pipe.wd.contents,
                              "built": pipe.wd.built, "bitexts_s": round(seconds, 2)}), flush=True)
"""


def same_files(a: Path, b: Path) -> bool:
    """The two folders hold the same file names with the same bytes (DONE aside: it names the run)."""
    names = sorted(p.name for p in a.iterdir() if p.name != "DONE")
    if names != sorted(p.name for p in b.iterdir() if p.name != "DONE"):
        return False
    return all((a / n).read_bytes() == (b / n).read_bytes() for n in names)


def run_once(code: Path, data: Path, base: Path, tmp: Path, workers: int, tag: str) -> dict:
    work = tmp / f"work-{tag}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    for corpus in sorted(base.glob("corpus.*-*")):
        shutil.copytree(corpus, work / corpus.name, copy_function=os.link)
    env = {**os.environ, "PYTHONPATH": str(code)}
    log = tmp / f"{tag}.log"
    # The child runs in tmp: `python -c` puts its working folder first on sys.path, and a
    # checkout's own folder there would shadow the code PYTHONPATH names.
    measured = run_measured([sys.executable, "-c", CHILD, str(data), str(work), str(tmp / "unused.db"), str(workers)],
                            log, env=env, cwd=tmp)
    result = next(json.loads(line[len("RESULT "):]) for line in log.read_text().splitlines()
                  if line.startswith("RESULT "))
    out = {"code": str(code), "workers": workers, **measured, **result, "align": {}}
    for lang_dir in sorted(work.glob("align.*-*")):
        lang = lang_dir.name.split("-")[0]
        ref = base / lang_dir.name
        ref_content = json.loads((ref / "DONE").read_text())["content"] if (ref / "DONE").is_file() else None
        out["align"][lang] = {"seconds": result["timings"].get(lang), "content": result["contents"].get(lang),
                              "same_folder_name_as_base": ref.is_dir(),
                              "same_content_key_as_base": result["contents"].get(lang) == ref_content,
                              "same_bytes_as_base": ref.is_dir() and same_files(lang_dir, ref)}
    # The align stages' wall: the languages' stages run side by side (their seconds overlap);
    # the corpus stages before them are reused (hard links), a fraction of a second.
    out["align_s"] = result["bitexts_s"]
    shutil.rmtree(work, ignore_errors=True)
    return out


def sharded_aer(data: Path, workers: int, tmp: Path) -> dict:
    """AER on the Hansards gold of the aligner run by shards on ``workers`` workers."""
    import time


    from pivot.pipeline import ibm_shards
    from pivot.pipeline.align import concat_links, shard_cuts
    from pivot.pipeline.bundle import save_bundle
    from pivot.pipeline.engine import Engine
    from pivot.sentences.align_eval import encode, load_sets, score

    en, fr, n_gold, sure, possible = load_sets(data)
    e_tok, e_off, n_e = encode(en)
    f_tok, f_off, n_f = encode(fr)
    scratch = tmp / "aer"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    shards = []
    cuts = shard_cuts(e_off, f_off, ibm_shards.SHARD_CELLS)
    for j, (a, b) in enumerate(zip(cuts, cuts[1:])):
        shards.append(scratch / f"enc-{j:05d}.arrays")
        save_bundle(shards[-1], e_tokens=e_tok[e_off[a]:e_off[b]], e_offsets=e_off[a:b + 1] - e_off[a],
                    f_tokens=f_tok[f_off[a]:f_off[b]], f_offsets=f_off[a:b + 1] - f_off[a])
    parts = [scratch / f"links-{j:05d}.arrays" for j in range(len(shards))]
    with Engine(workers=workers) as engine:
        engine.map(abs, [(0,)], name="start")        # the cluster's start is not the aligner's time
        t0 = time.perf_counter()
        ibm_shards.align_both_sharded(engine, shards, n_e, n_f, parts, scratch / "work", n_threads=1)
        seconds = time.perf_counter() - t0
    links = concat_links(parts)
    shutil.rmtree(scratch, ignore_errors=True)
    return {"workers": workers, "shards": len(shards), "training_pairs": len(en), "gold_pairs": n_gold,
            **score(links, sure, possible, n_gold),
            "seconds": round(seconds, 2)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, type=Path)
    ap.add_argument("--base", required=True, type=Path, help="work directory of a finished bio build")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--aer", type=int, metavar="W", help="also the AER on the Hansards gold, aligned by shards on W workers")
    ap.add_argument("--main-code", type=Path, help="another checkout to run the same with")
    ap.add_argument("--main-workers", type=int, nargs="+", default=[1], help="its --workers (default 1)")
    ap.add_argument("--tmp", type=Path, help="where the work directories go (default: a temporary folder)")
    ap.add_argument("--json", type=Path, default=REPO / "bench" / "results" / "align_sharded.json")
    args = ap.parse_args(argv)
    if not list(args.base.glob("align.*-*/DONE")):
        sys.exit(f"{args.base}: no finished align.* stage (the work directory of a bio build is needed)")
    tmp = (args.tmp or Path(tempfile.mkdtemp(prefix="pivot-align-sharded-"))).resolve()
    tmp.mkdir(parents=True, exist_ok=True)
    variants = [(REPO, w, f"sharded-w{w}") for w in args.workers]
    if args.main_code:
        variants += [(args.main_code.resolve(), w, f"main-w{w}") for w in args.main_workers]
    runs = []
    for r in range(args.rounds):
        for code, workers, name in (variants if r % 2 == 0 else variants[::-1]):
            print(f"round {r}: {name}", flush=True)
            res = run_once(code, args.data.resolve(), args.base.resolve(), tmp, workers, f"{name}-r{r}")
            runs.append({"variant": name, "round": r, **res})
            print(f"  align {res['align_s']} s " + json.dumps({k: {x: v[x] for x in ('seconds', 'same_bytes_as_base')}
                                                                for k, v in res["align"].items()}), flush=True)
    summary = {}
    for _, _, name in variants:
        mine = [x for x in runs if x["variant"] == name]
        summary[name] = {"align_s_median": round(statistics.median(x["align_s"] for x in mine), 2),
                         "align_s": [x["align_s"] for x in mine],
                         "cpu_s": [x.get("cpu_s") for x in mine],
                         "loadavg_1min_before": [x.get("loadavg_1min_before") for x in mine],
                         "by_language_median": {lang: round(statistics.median(x["align"][lang]["seconds"] for x in mine), 2)
                                                for lang in mine[0]["align"]},
                         "peak_rss_tree_gib_max": max(x["peak_rss_tree_gib"] for x in mine),
                         "all_bytes_as_base": all(v["same_bytes_as_base"] and v["same_content_key_as_base"]
                                                  for x in mine for v in x["align"].values())}
    if "sharded-w1" in summary and "sharded-w2" in summary:
        summary["speedup_w2_over_w1"] = round(summary["sharded-w1"]["align_s_median"]
                                              / summary["sharded-w2"]["align_s_median"], 3)
        # per round (the two runs of a round are neighbours in time: they share its load)
        summary["speedup_w2_over_w1_by_round"] = [
            round(a["align_s"] / b["align_s"], 3) for r in range(args.rounds)
            for a in runs if a["variant"] == "sharded-w1" and a["round"] == r
            for b in runs if b["variant"] == "sharded-w2" and b["round"] == r]
    out = {"command": " ".join(sys.argv), "base": str(args.base), "summary": summary, "runs": runs}
    if args.aer:
        out["aer_sharded"] = sharded_aer(args.data.resolve(), args.aer, tmp)
        print(f"AER (sharded, {args.aer} workers): {out['aer_sharded']}", flush=True)
    write_json(args.json, out)
    if not args.tmp:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
