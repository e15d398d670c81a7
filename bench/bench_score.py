"""Benchmark: the Moore-Lewis pass against a bare kenlm scoring loop over the same sentences.

    python bench/bench_score.py [--data ../shared/data] [--n 200000] [--repeats 3]

Sentences: the English side of Tatoeba fr-en then de-en (the first --n lines), normalised with
pivot.corpus. LMs: two backoff trigram ARPA files estimated here with absolute discounting
(D = 0.7, normalised backoff weights), the in-domain one on the OpenStax biology sentences,
the general one on every other Tatoeba sentence. Any valid ARPA would do: the point is the
per-sentence overhead of :func:`pivot.score.moore_lewis` over ``model.score``.

Prints the best-of-repeats wall times and ratio = bare / moore_lewis (>= 0.8 is the target;
the bare loop scores both LMs, as the pass does).
"""
import argparse
import math
import os
import sys
import tempfile
import time
import zipfile
from collections import Counter, defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import kenlm  # noqa: E402

from pivot import corpus, mono  # noqa: E402
from pivot.score import moore_lewis  # noqa: E402

D = 0.7


def write_backoff_arpa(sentences, path, order=3):
    """A backoff n-gram ARPA with absolute discounting; backoffs make each p(.|h) sum to 1."""
    counts = [Counter() for _ in range(order + 1)]
    for s in sentences:
        words = ["<s>"] + s.split() + ["</s>"]
        for i in range(len(words)):
            for n in range(1, order + 1):
                if i + n <= len(words):
                    gram = tuple(words[i:i + n])
                    if gram != ("<s>",):
                        counts[n][gram] += 1
    total = sum(counts[1].values())
    # unigrams: discounted, the freed mass goes to <unk>
    logp = [dict() for _ in range(order + 1)]
    for g, c in counts[1].items():
        logp[1][g] = math.log10((c - D) / total)
    logp[1][("<unk>",)] = math.log10(D * len(counts[1]) / total)
    logp[1][("<s>",)] = -99.0
    ctx_total = [defaultdict(int) for _ in range(order + 1)]
    ctx_types = [defaultdict(int) for _ in range(order + 1)]
    for n in range(2, order + 1):
        for g, c in counts[n].items():
            ctx_total[n][g[:-1]] += c
            ctx_types[n][g[:-1]] += 1
        for g, c in counts[n].items():
            logp[n][g] = math.log10((c - D) / ctx_total[n][g[:-1]])
    backoff = [dict() for _ in range(order + 1)]
    for n in range(2, order + 1):
        seen_lower = defaultdict(float)
        seen_higher = defaultdict(float)
        for g in counts[n]:
            seen_higher[g[:-1]] += 10 ** logp[n][g]
            seen_lower[g[:-1]] += 10 ** _prob(logp, backoff, g[1:])
        for h in ctx_total[n]:
            backoff[n - 1][h] = math.log10(max(1e-12, 1 - seen_higher[h]) / max(1e-12, 1 - seen_lower[h]))
    with open(path, "w") as out:
        out.write("\\data\\\n")
        for n in range(1, order + 1):
            out.write(f"ngram {n}={len(logp[n])}\n")
        for n in range(1, order + 1):
            out.write(f"\n\\{n}-grams:\n")
            for g, lp in logp[n].items():
                bo = backoff[n].get(g) if n < order else None
                out.write(f"{lp:.6f}\t{' '.join(g)}" + (f"\t{bo:.6f}" if bo is not None else "") + "\n")
        out.write("\n\\end\\\n")


def _prob(logp, backoff, gram):
    """log10 p(gram[-1] | gram[:-1]) under the (partially built) backoff model."""
    n = len(gram)
    if gram in logp[n]:
        return logp[n][gram]
    if n == 1:
        return logp[1][("<unk>",)]
    return backoff[n - 1].get(gram[:-1], 0.0) + _prob(logp, backoff, gram[1:])


def tatoeba_english(data_root, n):
    out = []
    for rel, member in (("bitext/tatoeba-fr-en/fra-eng.zip", "fra-eng/fra.txt"),
                        ("bitext/tatoeba-de-en/deu-eng.zip", "deu.txt")):
        with zipfile.ZipFile(os.path.join(data_root, rel)) as zf:
            for line in zf.read(member).decode("utf-8").split("\n"):
                if line.strip():
                    out.append(line.split("\t")[0])
    return corpus.normalize_many(out[:n], "en")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=os.environ.get("PIVOT_DATA", os.path.join(here, "..", "..", "shared", "data")))
    ap.add_argument("--n", type=int, default=200_000, help="sentences to score (%(default)s)")
    ap.add_argument("--repeats", type=int, default=9, help="best of (%(default)s)")
    args = ap.parse_args()

    sentences = tatoeba_english(args.data, args.n)
    bio = mono.in_domain_text(args.data, {"openstax": ["mono/openstax/openstax-biology-md.tar.gz"]})
    with tempfile.TemporaryDirectory() as tmp:
        tgt_path, gen_path = os.path.join(tmp, "tgt.arpa"), os.path.join(tmp, "gen.arpa")
        write_backoff_arpa(bio, tgt_path)
        write_backoff_arpa(sentences[::2], gen_path)
        lm_tgt, lm_gen = kenlm.Model(tgt_path), kenlm.Model(gen_path)

    bare, ours = [], []
    for _ in range(args.repeats):
        t = time.perf_counter()
        _a = [lm_tgt.score(s) for s in sentences]
        _b = [lm_gen.score(s) for s in sentences]
        bare.append(time.perf_counter() - t)
        t = time.perf_counter()
        ml = moore_lewis(sentences, lm_tgt, lm_gen)
        ours.append(time.perf_counter() - t)
    ratio = min(bare) / min(ours)
    print(f"sentences={len(sentences)} words={int(ml.n_words.sum())} "
          f"sigma: min={ml.sigma.min():.3f} median={float(sorted(ml.sigma)[len(ml.sigma) // 2]):.3f} "
          f"max={ml.sigma.max():.3f}")
    print(f"bare loop (2 LMs) {min(bare):.3f} s   moore_lewis {min(ours):.3f} s   ratio {ratio:.3f}")
    return 0 if ratio >= 0.8 else 1


if __name__ == "__main__":
    sys.exit(main())
