"""Benchmark: the Moore-Lewis pass against a bare kenlm scoring loop over the same sentences.

    python bench/bench_score.py --work work/bio [--repeats 5] [--json OUT]

Uses a finished build's artifacts: the in-domain LM and one general LM (binary if the build
binarised them, else ARPA) and the bitext's English side. The bare loop scores every sentence
with both models (`model.score(s, bos=True, eos=True)`), the least any Moore-Lewis pass must
do; `pivot.pipeline.score.moore_lewis` adds the word counts and the entropy arithmetic. Prints the
best-of-repeats wall times and ratio = bare / moore_lewis (target >= 0.8).
"""
import argparse
import glob
import json
import time
from pathlib import Path

from pivot.pipeline.score import load_lm, moore_lewis


def one(path_glob: str) -> Path:
    found = sorted(glob.glob(path_glob))
    if not found:
        raise SystemExit(f"no {path_glob}: run `pivot build` with this work dir first")
    return Path(found[-1])


def lm_file(lm_dir: Path, name: str) -> str:
    binary = lm_dir / f"{name}.binary"
    return str(binary if binary.is_file() else lm_dir / f"{name}.arpa")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True, help="a build's work dir (e.g. work/bio)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()

    work = Path(args.work)
    lm_dir = one(str(work / "lm-*"))
    sentences = []
    for corpus_dir in sorted(work.glob("corpus.*-*")):
        sentences += (corpus_dir / "bitext.en").read_text(encoding="utf-8").splitlines()
    tgt, gen = load_lm(lm_file(lm_dir, "in_domain")), load_lm(lm_file(lm_dir, "general.0"))

    def bare():
        return [(tgt.score(s, bos=True, eos=True), gen.score(s, bos=True, eos=True)) for s in sentences]

    def pass_():
        return moore_lewis(sentences, tgt, gen)

    best = {}
    for name, fn in (("bare", bare), ("moore_lewis", pass_)) * args.repeats:
        t0 = time.perf_counter()
        fn()
        best[name] = min(best.get(name, float("inf")), time.perf_counter() - t0)
    n_words = sum(len(s.split()) for s in sentences)
    result = {"sentences": len(sentences), "words": n_words, "lm_dir": str(lm_dir),
              "bare_s": round(best["bare"], 3), "moore_lewis_s": round(best["moore_lewis"], 3),
              "ratio_bare_over_pass": round(best["bare"] / best["moore_lewis"], 3),
              "words_per_s_pass": round(2 * n_words / best["moore_lewis"])}
    print(json.dumps(result, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
