"""The corpus stage's two steps on a cluster, their CPU apart: every chunk task, then the join.

    python bench/bench_corpus_chunks.py --data ../shared/data [--domain bio] [--scale 4] --json OUT

Runs normalise_chunk for every chunk of chunk_plan, then join_chunks, in this process, for each
pivot language of the recipe (``--scale S``: bench_scale.py's recipe of every source listed S
times), and reports their CPU seconds and the join's share: the part of the stage a language
runs in one task on a cluster (bench/project_scale.py counts it with the chunks' tasks).
"""
import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_scale import scaled_recipe  # noqa: E402

from pivot import recipes  # noqa: E402
from pivot.pipeline import corpus  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, type=Path)
    ap.add_argument("--domain", default="bio")
    ap.add_argument("--scale", type=int, default=1)
    ap.add_argument("--json", required=True, type=Path)
    args = ap.parse_args()
    out = {"domain": args.domain, "scale": args.scale, "languages": {}}
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        path = scaled_recipe(args.scale, scratch / "recipe.toml") if args.scale > 1 else \
            recipes.recipe_path(args.domain, None)
        rec = recipes.load_recipe(path)
        preprocess = corpus.sample_params(rec["preprocess"])
        for spec in rec["bitext"]:
            lang, sources = spec["lang"], spec["sources"]
            d = scratch / lang
            (d / "out").mkdir(parents=True)
            plan = corpus.chunk_plan(sources, lang, args.data)
            stems = [str(d / f"chunk-{j}") for j in range(len(plan))]
            t = time.process_time()
            for (k, r, lines, _), stem in zip(plan, stems):
                corpus.normalise_chunk(sources, lang, args.data, k, r, lines, stem, **preprocess)
            chunks = time.process_time() - t
            t = time.process_time()
            meta = corpus.join_chunks(sources, lang, args.data, stems, d / "out", **preprocess)
            join = time.process_time() - t
            out["languages"][lang] = {"chunks": len(plan), "pairs": meta["n_pairs"], "chunk_cpu_s": round(chunks, 2),
                                      "join_cpu_s": round(join, 3), "join_share": round(join / (chunks + join), 4)}
            print(lang, out["languages"][lang], flush=True)
    args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
