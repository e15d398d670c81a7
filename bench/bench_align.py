"""Benchmark: pivot's deterministic IBM Model 2 aligner (pivot.pipeline.ibm) against eflomal, by AER.

    python bench/bench_align.py --data ../shared/data [--threads 2] [--json out.json]

Gold: the English-French Hansards word-alignment test set (``gold/hansards-align``: 447
sentence pairs, already tokenised; ``test.wa.nonullalign`` lines ``sent e_pos f_pos S|P``,
1-based). Training text: those 447 pairs plus every pair of the Tatoeba fr-en bitext
(``bitext/tatoeba-fr-en/fra-eng.zip``, member ``fra-eng/fra.txt``, ``english<TAB>french``),
all lowercased. The gold sentences are split on whitespace only (their tokenisation defines
the gold positions); the Tatoeba sentences with a simple regular-expression tokeniser
(words, apostrophe-clitics kept with their side -- English ``it 's``, French ``c' est`` --
and every other punctuation mark alone), close to the gold's own style.

Both aligners see the same sentences and are symmetrised by grow-diag-final-and; the AER
counts only the 447 gold pairs. Also reported: each direction of ours alone, seconds per EM
iteration and sentence pairs per second, peak RSS of each aligner (ours run in a child
process; eflomal is a child program), and the native versus the align stage's Python
grow-diag-final-and on the whole bitext. Writes bench/results/align_aer.json.

Stage mode, the in-memory align stage against the chunked, out-of-core one on a saved corpus
folder (``Bitext.save``: bitext.en, bitext.<lang>, meta.json):

    python bench/bench_align.py --stage-corpus DIR [--concat 1 4] [--chunk 50000] [--threads 2]

For each concatenation factor c (the corpus written c times over into a temporary folder
under $TMPDIR, removed afterwards) it runs, each in a fresh Python process, (a) the old path
(``Bitext.load`` + ``align_bitext(method="ibm2")`` + ``np.savez`` of the links) and (b)
``align_corpus(chunk_sentences=..., n_threads=...)``, and reports wall seconds, user and
system CPU seconds and peak RSS (``wait4``'s ru_maxrss, as ``/usr/bin/time -v``), and
whether (b)'s links are byte-identical to (a)'s. Writes bench/results/align_stage.json.
"""
import argparse
import json
import multiprocessing as mp
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

from pivot.locking import cores  # noqa: E402
from pivot.pipeline import ibm  # noqa: E402

from pivot.pipeline import align as align_stage  # noqa: E402
from pivot.pipeline import links  # noqa: E402
from pivot.sentences.align_eval import EN_TOKEN, FR_TOKEN, encode, read_gold, read_tatoeba, score  # noqa: E402

# The gold and Tatoeba readers, the encoder and the AER scoring are `pivot align-eval`'s own.


def run_ours(queue, en, fr, threads, iterations):
    """Child process: fit both directions, time everything, report links and peak RSS."""
    e_tok, e_off, n_e = encode(en)
    f_tok, f_off, n_f = encode(fr)
    out = {"threads": threads, "iterations": iterations}
    t0 = time.perf_counter()
    fwd_model = ibm.fit(e_tok, e_off, f_tok, f_off, n_e, n_f, iterations=0)
    out["cooccurrence_pairs_fwd"] = int(len(fwd_model.col))
    out["table_build_s"] = round(time.perf_counter() - t0, 3)
    del fwd_model
    t0 = time.perf_counter()
    fwd_model = ibm.fit(e_tok, e_off, f_tok, f_off, n_e, n_f, iterations=iterations,
                        n_threads=threads)
    fit_fwd = time.perf_counter() - t0
    t0 = time.perf_counter()
    fwd = ibm.viterbi(fwd_model, e_tok, e_off, f_tok, f_off, n_threads=threads)
    vit_fwd = time.perf_counter() - t0
    del fwd_model
    t0 = time.perf_counter()
    rev_model = ibm.fit(f_tok, f_off, e_tok, e_off, n_f, n_e, iterations=iterations,
                        n_threads=threads)
    fit_rev = time.perf_counter() - t0
    t0 = time.perf_counter()
    rf, re_, ro = ibm.viterbi(rev_model, f_tok, f_off, e_tok, e_off, n_threads=threads)
    vit_rev = time.perf_counter() - t0
    del rev_model
    sent = np.repeat(np.arange(len(ro) - 1), np.diff(ro))
    order = np.lexsort((rf, re_, sent))
    rev = (re_[order], rf[order], ro)
    e_len, f_len = np.diff(e_off), np.diff(f_off)
    t0 = time.perf_counter()
    sym = ibm.symmetrize_links(fwd, rev, e_len, f_len, n_threads=threads)
    out["gdfa_native_s"] = round(time.perf_counter() - t0, 3)
    t0 = time.perf_counter()
    sym_py = links.symmetrize(links.format_pharaoh(*fwd), links.format_pharaoh(*rev), e_len, f_len)
    out["gdfa_python_s"] = round(time.perf_counter() - t0, 3)
    out["gdfa_native_equals_python"] = all(np.array_equal(a, b) for a, b in zip(sym, sym_py))
    n = len(e_off) - 1
    table_s = out["table_build_s"]
    out["fit_fwd_s"], out["fit_rev_s"] = round(fit_fwd, 3), round(fit_rev, 3)
    out["viterbi_fwd_s"], out["viterbi_rev_s"] = round(vit_fwd, 3), round(vit_rev, 3)
    # What align_both costs: both fits, both Viterbi passes, native symmetrisation.
    out["aligner_s"] = round(fit_fwd + fit_rev + vit_fwd + vit_rev + out["gdfa_native_s"], 3)
    # mean over the iterations: the first searches the table, the later ones read the
    # stored indices (ibm.INDEX_CACHE_BYTES)
    per_iter = (fit_fwd - table_s) / max(iterations, 1)
    out["seconds_per_iteration_fwd"] = round(per_iter, 3)
    out["sentence_pairs_per_second_per_iteration"] = round(n / per_iter, 0)
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    queue.put((out, [np.asarray(x) for x in fwd], [np.asarray(x) for x in rev],
               [np.asarray(x) for x in sym]))


STAGE_OLD = """
import sys, numpy as np
from pivot.pipeline.corpus import Bitext
from pivot.pipeline import align
corpus, out, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
links = align.align_bitext(Bitext.load(corpus), out, method="ibm2", n_threads=threads)
np.savez(out + "/links.npz", link_e=links[0], link_f=links[1], link_offsets=links[2])
"""

STAGE_NEW = """
import sys
from pivot.pipeline import align
align.align_corpus(sys.argv[1], sys.argv[2], chunk_sentences=int(sys.argv[4]),
                   n_threads=int(sys.argv[3]))
"""


def _measured(code, *argv):
    """Run ``python -c code argv`` in a fresh process: wall s, user s, sys s, peak RSS MB."""
    env = dict(os.environ)
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code, *map(str, argv)], env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"child failed with exit code {proc.returncode}")
    return {"wall_s": round(wall, 2), "user_s": round(usage.ru_utime, 2),
            "sys_s": round(usage.ru_stime, 2), "peak_rss_mb": round(usage.ru_maxrss / 1024, 1)}


def _concat_corpus(src, dst, times):
    """Write corpus folder ``src`` ``times`` times over into ``dst`` (streamed copy)."""
    meta = json.loads(open(os.path.join(src, "meta.json"), encoding="utf-8").read())
    os.makedirs(dst)
    for name in ("bitext.en", f"bitext.{meta['lang']}"):
        with open(os.path.join(dst, name), "wb") as out:
            for _ in range(times):
                with open(os.path.join(src, name), "rb") as fh:
                    shutil.copyfileobj(fh, out, 1 << 20)
    np.save(os.path.join(dst, "origin.npy"), np.tile(np.load(os.path.join(src, "origin.npy")),
                                                     times))
    meta["n_pairs"] *= times
    with open(os.path.join(dst, "meta.json"), "w", encoding="utf-8") as fh:
        json.dump(meta, fh)


def stage_bench(args):
    from pivot.pipeline import align

    results = {"corpus": os.path.abspath(args.stage_corpus), "chunk_sentences": args.chunk,
               "threads": args.threads, "runs": []}
    for times in args.concat:
        with tempfile.TemporaryDirectory(prefix="pivot-align-bench-") as work:
            corpus = args.stage_corpus
            if times != 1:
                corpus = os.path.join(work, f"corpus.x{times}")
                _concat_corpus(args.stage_corpus, corpus, times)
            old_dir, new_dir = os.path.join(work, "old"), os.path.join(work, "new")
            os.makedirs(old_dir)
            run = {"concat": times}
            run["in_memory"] = _measured(STAGE_OLD, corpus, old_dir, args.threads)
            print(f"x{times} in-memory", json.dumps(run["in_memory"]), flush=True)
            run["chunked"] = _measured(STAGE_NEW, corpus, new_dir, args.threads, args.chunk)
            print(f"x{times} chunked  ", json.dumps(run["chunked"]), flush=True)
            with np.load(os.path.join(old_dir, "links.npz")) as z:
                ref = [z["link_e"], z["link_f"], z["link_offsets"]]
            got = align.read_links(new_dir)
            run["n_pairs"] = len(ref[2]) - 1
            run["n_links"] = len(ref[0])
            run["byte_identical"] = all(a.dtype == b.dtype and a.tobytes() == b.tobytes()
                                        for a, b in zip(ref, got))
            print(f"x{times} {run['n_pairs']} pairs, {run['n_links']} links, byte-identical: "
                  f"{run['byte_identical']}", flush=True)
            results["runs"].append(run)
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as fh:
        json.dump(results, fh, indent=2)
        fh.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                    "shared", "data"))
    ap.add_argument("--threads", type=int, default=cores())
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--no-eflomal", action="store_true")
    ap.add_argument("--json", default=None,
                    help="output (default bench/results/align_aer.json, or align_stage.json "
                         "with --stage-corpus)")
    ap.add_argument("--stage-corpus", metavar="DIR",
                    help="benchmark the align stage (in-memory vs chunked) on this corpus folder")
    ap.add_argument("--concat", type=int, nargs="+", default=[1],
                    help="with --stage-corpus: also on the corpus repeated this many times")
    ap.add_argument("--chunk", type=int, default=50000,
                    help="with --stage-corpus: chunk_sentences of align_corpus")
    args = ap.parse_args()
    if args.json is None:
        args.json = os.path.join(os.path.dirname(__file__), "results",
                                 "align_stage.json" if args.stage_corpus else "align_aer.json")
    if args.stage_corpus:
        stage_bench(args)
        return

    gold_en, gold_fr, sure, possible = read_gold(os.path.join(args.data, "gold", "hansards-align"))
    tat_en, tat_fr = read_tatoeba(os.path.join(args.data, "bitext", "tatoeba-fr-en",
                                               "fra-eng.zip"))
    en, fr = gold_en + tat_en, gold_fr + tat_fr
    n_gold = len(gold_en)
    result = {"gold_pairs": n_gold, "training_pairs": len(en),
              "english_tokens": sum(map(len, en)), "french_tokens": sum(map(len, fr)),
              "sure_links": len(sure), "possible_links_incl_sure": len(sure | possible),
              "tokenisation": "gold: whitespace; tatoeba: lowercased, regex "
                              f"en {EN_TOKEN.pattern!r}, fr {FR_TOKEN.pattern!r}"}
    print(f"{len(en)} training pairs ({n_gold} gold), {result['english_tokens']} English / "
          f"{result['french_tokens']} French tokens", flush=True)

    ctx = mp.get_context("fork")
    q = ctx.Queue()
    t0 = time.perf_counter()
    p = ctx.Process(target=run_ours, args=(q, en, fr, args.threads, args.iterations))
    p.start()
    ours, fwd, rev, sym = q.get()
    p.join()
    # wall_s: the whole child (vocabulary encoding, table timing run, both symmetrisers too)
    ours["wall_s"] = round(time.perf_counter() - t0, 3)
    ours["gdfa"] = score(sym, sure, possible, n_gold)
    ours["forward_en_to_fr"] = score(fwd, sure, possible, n_gold)
    ours["reverse_fr_to_en"] = score(rev, sure, possible, n_gold)
    result["ibm2_diagonal"] = ours
    print("ours   ", json.dumps(ours), flush=True)

    if not args.no_eflomal:
        en_lines, fr_lines = [" ".join(s) for s in en], [" ".join(s) for s in fr]
        with tempfile.TemporaryDirectory() as work:
            t0 = time.perf_counter()
            fwd_lines, rev_lines = align_stage.run_eflomal(en_lines, fr_lines, work)
            t_run = time.perf_counter() - t0
        e_len = [len(s) for s in en]
        f_len = [len(s) for s in fr]
        ef = links.parse_pharaoh(fwd_lines, e_len, f_len)
        er = links.parse_pharaoh(rev_lines, e_len, f_len)
        esym = links.symmetrize(fwd_lines, rev_lines, e_len, f_len)
        eflomal = {"wall_s": round(t_run, 3), "model": 3, "length": 1.0,
                   "peak_rss_mb_children": round(
                       resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
                   "gdfa": score(esym, sure, possible, n_gold),
                   "forward_en_to_fr": score(ef, sure, possible, n_gold),
                   "reverse_fr_to_en": score(er, sure, possible, n_gold),
                   "note": "peak RSS of children is the max over this process's children, "
                           "which includes our aligner's child process"}
        result["eflomal"] = eflomal
        print("eflomal", json.dumps(eflomal), flush=True)

    print(f"\n{'':22s}{'AER':>8s}{'prec':>8s}{'recall':>8s}{'align s':>9s}")
    for name, key in (("ibm2_diagonal", "aligner_s"), ("eflomal", "wall_s")):
        if name in result:
            r = result[name]
            g = r["gdfa"]
            print(f"{name + ' gdfa':22s}{g['aer']:8.4f}{g['precision']:8.4f}"
                  f"{g['recall']:8.4f}{r[key]:9.2f}")
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as fh:
        json.dump(result, fh, indent=2)
        fh.write("\n")


if __name__ == "__main__":
    main()
