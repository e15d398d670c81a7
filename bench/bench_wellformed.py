"""Speed of the well-formedness labels: PhraseForms.from_texts over N phrases, pair_labels over M pairs.

Phrases are random 1-5 token sequences drawn from a Zipf-like vocabulary that mixes function
words, punctuation and content words (content words get 1-3 lemmas), the shape of a database's
phrase table; pairs are uniform random (e1, e2). No data needed: the lemmatizer is synthetic, so
the time is the module's own (WordNet's morphology adds its per-distinct-token cost on a build).

    python bench/bench_wellformed.py                       # 1M phrases, 5M pairs
    python bench/bench_wellformed.py --phrases 100000 --pairs 500000
"""
import argparse
import json
import sys
import time

import numpy as np

from pivot.pipeline import wellformed as wf


def synthetic(n_phrases, seed=0, n_content=200_000):
    rng = np.random.default_rng(seed)
    function = sorted(wf.FUNCTION_WORDS)
    punct = [",", ".", "(", ")", "-", ";", ":", "'", '"', "/"]
    content = [f"w{i}" for i in range(n_content)]
    words = function + punct + content
    # Zipf-like weights: function words and punctuation frequent, content words a long tail.
    weights = np.concatenate([np.full(len(function), 30.0), np.full(len(punct), 20.0),
                              1.0 / np.arange(1, n_content + 1) ** 0.8 * 50])
    weights /= weights.sum()
    lengths = rng.integers(1, 6, size=n_phrases)
    draws = rng.choice(len(words), size=int(lengths.sum()), p=weights)
    texts, seen, pos = [], set(), 0
    for n in lengths.tolist():
        t = " ".join(words[i] for i in draws[pos:pos + n])
        pos += n
        if t not in seen:
            seen.add(t)
            texts.append(t)

    def lemmatizer(token):   # content words: 1-3 lemmas, shared between neighbours (w10 ~ w11)
        k = int(token[1:])
        return frozenset({token, f"l{k // 2}", f"m{k // 3}"} if k % 4 == 0 else {token, f"l{k // 2}"})

    return texts, lemmatizer


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--phrases", type=int, default=1_000_000)
    ap.add_argument("--pairs", type=int, default=5_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("-o", "--out", default=None, help="write the figures as JSON here")
    args = ap.parse_args(argv)
    texts, lemmatizer = synthetic(args.phrases)
    t0 = time.perf_counter()
    forms = wf.PhraseForms.from_texts(texts, lemmatizer)
    t_forms = time.perf_counter() - t0
    rng = np.random.default_rng(1)
    e1 = rng.integers(0, len(texts), size=args.pairs)
    e2 = rng.integers(0, len(texts), size=args.pairs)
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        labels = forms.pair_labels(e1, e2)
        times.append(time.perf_counter() - t0)
    share = {name: float(((labels & bit) != 0).mean()) for bit, name in wf.NAMES.items()}
    out = {"phrases": len(texts), "distinct_tokens": len(forms.vocab), "pairs": args.pairs,
           "from_texts_s": round(t_forms, 3), "pair_labels_s": [round(t, 3) for t in times],
           "pairs_per_s_best": round(args.pairs / min(times)), "flag_share": share}
    print(json.dumps(out, indent=1))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(out, fh, indent=1)
            fh.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
