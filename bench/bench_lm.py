"""Benchmark: pivot's modified Kneser-Ney estimator against kenlm's lmplz on the in-domain text.

    python bench/bench_lm.py --data ../shared/data [--order 5] [--json out.json]
    python bench/bench_lm.py --text in_domain.txt [--order 5]

Text: the first column of every CoNLL file ``mono/bio-ner/*/*.tsv`` (blank line ends a
sentence), lowercased, duplicate sentences dropped (first occurrence kept): ~159k sentences,
~4.4M tokens; or, with ``--text``, a file of one sentence a line (tokens split on white
space), e.g. the pipeline's ``lmtext-*/in_domain.txt``. Each estimator runs in a child
process so its peak RSS (ru_maxrss of the child) is its own:

* ``pivot``: ``lm.estimate_arpa`` on the list of token lists (the child is forked from the
  parent holding the list, so its peak includes the list);
* ``pivot_file``: ``lm.estimate_arpa_file`` on the text written one sentence a line (a
  spawned child: nothing inherited), whose ARPA must be byte-identical to ``pivot``'s;
* ``lmplz``: the same sentences on stdin, the same order and the same
  ``--discount_fallback``; skipped when not installed (scripts/install_lmplz.sh).

Prints wall seconds, peak RSS, n-gram counts, ratio = ours / lmplz (target <= 3) and the
largest |log10 p| and |log10 backoff| difference over all n-grams of the two ARPA files.
"""
import argparse
import filecmp
import glob
import json
import multiprocessing as mp
import os
import resource
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

from pivot.pipeline import lm  # noqa: E402


def read_bio_sentences(data_dir):
    """Lowercased, deduplicated token lists from mono/bio-ner/*/*.tsv (first column)."""
    paths = sorted(glob.glob(os.path.join(data_dir, "mono", "bio-ner", "*", "*.tsv")))
    if not paths:
        raise SystemExit(f"no CoNLL files under {data_dir}/mono/bio-ner")
    seen, sentences, current = set(), [], []

    def flush():
        if current:
            key = " ".join(current)
            if key not in seen:
                seen.add(key)
                sentences.append(list(current))
            current.clear()

    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                token = line.split("\t", 1)[0].strip()
                if not token:
                    flush()
                else:
                    current.append(token.lower())
        flush()
    return sentences


def read_text_sentences(path):
    """Token lists of a text file of one sentence a line (as the pipeline's lm stage reads it)."""
    with open(path, encoding="utf-8") as f:
        return [line.split() for line in f]


def _child(which, sentences, arpa_path, order, queue):
    """Run one estimator; report (seconds, peak RSS MiB, n-gram counts) to the parent."""
    t0 = time.perf_counter()
    if which == "pivot":
        stats = lm.estimate_arpa(sentences, arpa_path, order)
    elif which == "pivot_file":
        stats = lm.estimate_arpa_file(sentences, arpa_path, order)   # sentences: a path
    else:
        stats = lm.estimate_with_lmplz(sentences, arpa_path, order, memory="4G")
    seconds = time.perf_counter() - t0
    self_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # lmplz itself
    queue.put((seconds, max(self_kib, kids_kib) / 1024.0, list(stats.ngram_counts)))


def run_child(which, sentences, arpa_path, order):
    # fork: the child inherits the sentence list without pickling it, and its
    # ru_maxrss starts from the parent's footprint (reported as such). The file
    # estimator gets a path: a spawned child, whose peak is its own.
    ctx = mp.get_context("spawn" if which == "pivot_file" else "fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(which, sentences, arpa_path, order, queue))
    proc.start()
    result = queue.get()
    proc.join()
    if proc.exitcode != 0:
        raise SystemExit(f"{which} estimator failed (exit {proc.exitcode})")
    return result


def compare_arpa(path_a, path_b):
    """Largest |difference| of log10 p and of log10 backoff over the n-grams both files hold."""
    a, b = lm.read_arpa(path_a), lm.read_arpa(path_b)
    max_prob = max_backoff = 0.0
    mismatched = 0
    for n in a:
        keys_a, keys_b = set(a[n]), set(b.get(n, {}))
        mismatched += len(keys_a ^ keys_b)
        common = keys_a & keys_b
        pa = np.array([a[n][k] for k in common])
        pb = np.array([b[n][k] for k in common])
        if len(common):
            max_prob = max(max_prob, float(np.abs(pa[:, 0] - pb[:, 0]).max()))
            max_backoff = max(max_backoff, float(np.abs(pa[:, 1] - pb[:, 1]).max()))
    return max_prob, max_backoff, mismatched


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=os.environ.get("PIVOT_DATA", "../shared/data"),
                        help="data directory (default: %(default)s)")
    parser.add_argument("--text", help="a text file of one sentence a line instead of the CoNLL files")
    parser.add_argument("--order", type=int, default=5, help="n-gram order (default: %(default)s)")
    parser.add_argument("--json", help="also write the results as JSON to this path")
    parser.add_argument("--no-lmplz", action="store_true", help="skip lmplz even when installed")
    parser.add_argument("--no-compare", action="store_true", help="skip the ARPA comparison")
    args = parser.parse_args(argv)

    print(f"# {' '.join(sys.argv)}", file=sys.stderr)
    t0 = time.perf_counter()
    sentences = read_text_sentences(args.text) if args.text else read_bio_sentences(args.data)
    n_tokens = sum(map(len, sentences))
    print(f"read {len(sentences)} sentences, {n_tokens} tokens in "
          f"{time.perf_counter() - t0:.1f} s", file=sys.stderr)
    parent_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0

    result = {"order": args.order, "text": args.text or "mono/bio-ner/*/*.tsv (lowercased, deduplicated)",
              "sentences": len(sentences), "tokens": n_tokens, "parent_rss_mib": round(parent_rss, 1)}
    with tempfile.TemporaryDirectory() as tmp:
        ours_path = os.path.join(tmp, "pivot.arpa")
        sec, rss, counts = run_child("pivot", sentences, ours_path, args.order)
        result["pivot"] = {"seconds": round(sec, 2), "peak_rss_mib": round(rss, 1),
                           "ngrams": counts, "arpa_mib": round(os.path.getsize(ours_path) / 2**20, 1)}
        text_path = os.path.join(tmp, "text.txt")
        with open(text_path, "w", encoding="utf-8") as f:
            for sentence in sentences:
                f.write(" ".join(sentence) + "\n")
        file_path = os.path.join(tmp, "pivot_file.arpa")
        sec, rss, counts = run_child("pivot_file", text_path, file_path, args.order)
        result["pivot_file"] = {"seconds": round(sec, 2), "peak_rss_mib": round(rss, 1), "ngrams": counts,
                                "arpa_identical": filecmp.cmp(ours_path, file_path, shallow=False)}
        os.unlink(file_path)
        lmplz = None if args.no_lmplz else lm.find_lmplz()
        if lmplz:
            theirs_path = os.path.join(tmp, "lmplz.arpa")
            sec, rss, counts = run_child("lmplz", sentences, theirs_path, args.order)
            result["lmplz"] = {"seconds": round(sec, 2), "peak_rss_mib": round(rss, 1),
                               "ngrams": counts, "path": lmplz}
            result["ratio_pivot_over_lmplz"] = round(result["pivot"]["seconds"] / sec, 2)
            if not args.no_compare:
                dp, db, mismatched = compare_arpa(ours_path, theirs_path)
                result["max_abs_diff_log10_prob"] = dp
                result["max_abs_diff_log10_backoff"] = db
                result["ngrams_in_only_one"] = mismatched

    print(f"\n{'estimator':<10} {'wall s':>8} {'peak RSS MiB':>13}  n-grams per order")
    for name in ("pivot", "pivot_file", "lmplz"):
        if name in result:
            r = result[name]
            print(f"{name:<10} {r['seconds']:>8.2f} {r['peak_rss_mib']:>13.0f}  {r['ngrams']}")
    print(f"(parent process holding the sentences: {parent_rss:.0f} MiB; the pivot and lmplz "
          "children are forked from it, pivot_file is spawned)")
    print(f"pivot_file ARPA byte-identical to pivot's: {result['pivot_file']['arpa_identical']}")
    if "ratio_pivot_over_lmplz" in result:
        print(f"ratio pivot / lmplz wall time: {result['ratio_pivot_over_lmplz']:.2f} (target <= 3)")
    if "max_abs_diff_log10_prob" in result:
        print(f"max |log10 p difference|: {result['max_abs_diff_log10_prob']:.2e}, "
              f"max |log10 backoff difference|: {result['max_abs_diff_log10_backoff']:.2e}, "
              f"n-grams in only one file: {result['ngrams_in_only_one']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return result


if __name__ == "__main__":
    main()
