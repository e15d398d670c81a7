"""Speed of the well-formedness labels: PhraseForms.from_texts over N phrases, pair_labels over M pairs.

Phrases are random 1-5 token sequences drawn from a Zipf-like vocabulary that mixes function
words, punctuation and content words (content words get 1-3 lemmas), the shape of a database's
phrase table; pairs are uniform random (e1, e2). No data needed: the lemmatizer is synthetic, so
the time is the module's own (WordNet's morphology adds its per-distinct-token cost on a build).

    python bench/bench_wellformed.py                       # 1M phrases, 5M pairs
    python bench/bench_wellformed.py --phrases 100000 --pairs 500000
    python bench/bench_wellformed.py --db bio.db --data DIR   # a real phrase table and every stored pair,
                                                              # WordNet's lemmas (read-only)
"""
import argparse
import hashlib
import json
import os
import sqlite3
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _measure import write_json  # noqa: E402

from pivot.pipeline import wellformed as wf  # noqa: E402


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


def from_database(path):
    """(phrase texts by index, e1 index array, e2 index array) of a built database, read-only."""
    conn = sqlite3.connect(f"file:{os.path.abspath(path)}?mode=ro", uri=True)
    ids, texts = [], []
    for i, t in conn.execute("SELECT id, text FROM phrase ORDER BY id"):
        ids.append(i)
        texts.append(t)
    ids = np.asarray(ids, dtype=np.int64)
    e1, e2 = [], []
    for a, b in conn.execute("SELECT e1, e2 FROM pair"):
        e1.append(a)
        e2.append(b)
    conn.close()
    return texts, np.searchsorted(ids, e1), np.searchsorted(ids, e2)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--phrases", type=int, default=1_000_000)
    ap.add_argument("--pairs", type=int, default=5_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--db", default=None, help="label a built database's phrases and stored pairs instead")
    ap.add_argument("--data", default=os.environ.get("PIVOT_DATA"), help="data root (WordNet) for --db")
    ap.add_argument("-o", "--out", default=None, help="write the figures as JSON here")
    args = ap.parse_args(argv)
    extra = {}
    if args.db:
        if not args.data:
            ap.error("--db needs --data DIR or PIVOT_DATA (WordNet)")
        t0 = time.perf_counter()
        texts, e1, e2 = from_database(args.db)
        extra["read_s"] = round(time.perf_counter() - t0, 3)
        t0 = time.perf_counter()
        lemmatizer = wf.wordnet_lemmatizer(args.data)
        extra["wordnet_load_s"] = round(time.perf_counter() - t0, 3)
        args.pairs = len(e1)
    else:
        texts, lemmatizer = synthetic(args.phrases)
        rng = np.random.default_rng(1)
        e1 = rng.integers(0, len(texts), size=args.pairs)
        e2 = rng.integers(0, len(texts), size=args.pairs)
    t0 = time.perf_counter()
    forms = wf.PhraseForms.from_texts(texts, lemmatizer)
    t_forms = time.perf_counter() - t0
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        labels = forms.pair_labels(e1, e2)
        times.append(time.perf_counter() - t0)
    share = {name: round(float(((labels & bit) != 0).mean()), 4) for bit, name in wf.NAMES.items()}
    share["hidden"] = round(float(((labels & wf.HIDDEN) != 0).mean()), 4)
    extra["labels_sha256"] = hashlib.sha256(labels.tobytes()).hexdigest()   # same inputs -> same bytes
    out = {"source": os.path.abspath(args.db) if args.db else "synthetic", **extra,
           "phrases": len(texts), "distinct_tokens": len(forms.vocab), "pairs": args.pairs,
           "from_texts_s": round(t_forms, 3), "pair_labels_s": [round(t, 3) for t in times],
           "pairs_per_s_best": round(args.pairs / min(times)), "flag_share": share,
           "load_average_1min": round(os.getloadavg()[0], 2)}   # the machine is shared: context for the times
    print(json.dumps(out, indent=1))
    if args.out:
        write_json(args.out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
