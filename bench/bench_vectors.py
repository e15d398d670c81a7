"""The ppdb2 stage's word vectors on a finished work folder: where the CPU goes, one task against tasks.

    python bench/bench_vectors.py WORK [--workers 1] [-o bench/results/vectors.json]

WORK: a work folder with the encode, translation and pivot stages done (the phrases stored are
the pivot parts' e1 and e2, as the stage finds them). Three measurements, in this process unless
said otherwise:

* the one-task path's steps (pivot.pipeline.vectors.train's, timed one by one): reading the
  shards, the occurrences, the co-occurrences per shard, their running sum, the PPMI, the SVD,
  the phrase means; then pivot.pipeline.ppdb2.vectors_task whole (its file is the reference);
* the stage's job (pivot.pipeline.ppdb2._vectors_job) on ``--workers`` (1: in this process; N:
  a local cluster of N workers): each step's CPU summed over its tasks and its longest task;
* the sha256 of both files (the job's must be the one task's).

Nothing is written into WORK: the phrases' token rows, the two files and the job's scratch
files go to a temporary folder, removed at the end. CPU seconds are process time; on a shared
machine they still grow a little with the load (caches), so compare runs made together.
"""
import argparse
import hashlib
import json
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import write_json  # noqa: E402


def stage_dirs(work: Path) -> dict:
    return {p.name.rsplit("-", 1)[0]: p for p in work.iterdir() if p.is_dir() and (p / "DONE").is_file()}


def one_task_steps(shards, n_tokens: int, tokens: np.ndarray) -> dict:
    """CPU seconds of train's steps and phrase_vectors, each timed alone (train's own code order)."""
    import scipy.sparse.linalg  # noqa: F401  (imported before the clock starts, as in a warm worker)
    from threadpoolctl import threadpool_limits

    from pivot.eval.distributional import ppmi, svd_vectors
    from pivot.pipeline import vectors as V

    cpu = {}

    def tick(name, t0):
        cpu[name] = round(cpu.get(name, 0.0) + time.process_time() - t0, 3)
        return time.process_time()

    c = time.process_time()
    pieces = list(V.EnglishShards(shards))
    c = tick("read_shards", c)
    counts = V.unigram_counts(pieces, n_tokens)
    vocab = np.flatnonzero(counts >= V.MIN_COUNT)
    word = V.word_index(vocab, n_tokens)
    c = tick("occurrences", c)
    cooc = None
    for ids, sentence in pieces:
        piece = V.cooccurrence(ids, sentence, word)
        c = tick("cooccurrences_per_shard", c)
        cooc = piece if cooc is None else cooc + piece
        c = tick("running_sum", c)
    m = ppmi(cooc, V.CDS)
    c = tick("ppmi", c)
    with threadpool_limits(limits=1, user_api="blas"):
        vec = svd_vectors(m, min(V.DIM, len(vocab) - 1), seed=V.SEED)
    c = tick("svd", c)
    words = np.zeros((n_tokens, V.DIM))
    words[vocab, :vec.shape[1]] = vec
    c = time.process_time()
    V.phrase_vectors(tokens, words)
    tick("phrase_means", c)
    return {"tokens": int(counts.sum()), "token_ids": n_tokens, "vocab": int(len(vocab)),
            "cooc_nnz": int(cooc.nnz), "ppmi_nnz": int(m.nnz), "cpu_s": cpu}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("work", type=Path)
    ap.add_argument("--workers", type=int, default=1, help="the job's workers (default: %(default)s)")
    ap.add_argument("-o", "--output", type=Path, default=None, help="results JSON (default: stdout only)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    from pivot.pipeline import ppdb2 as P, pivoting, translation
    from pivot.pipeline.bundle import save_bundle
    from pivot.pipeline.corpus import Vocab
    from pivot.pipeline.encode import read_shards
    from pivot.pipeline.engine import Engine

    d = stage_dirs(args.work)
    n_tokens = len(Vocab.load(d["encode"] / "vocab.en").tokens)
    shards = [str(d["encode"] / s["file"]) for s in read_shards(d["encode"])["shards"]]
    table = P.PairTable.read(pivoting.part_paths(d["pivot"]))
    e_rows, _ = translation.english_phrases(d["translation"])
    tokens = np.asarray(e_rows[table.used_phrases(len(e_rows))], np.int32)
    del e_rows
    scratch = Path(tempfile.mkdtemp(prefix="pivot-bench-vectors-"))
    try:
        save_bundle(scratch / "tokens.arrays", tokens=tokens)
        steps = one_task_steps(shards, n_tokens, tokens)
        t0 = time.process_time()
        P.vectors_task(shards, n_tokens, scratch / "tokens.arrays", scratch / "one.arrays")
        one_cpu = round(time.process_time() - t0, 3)
        (scratch / "job").mkdir()
        t0 = time.perf_counter()
        with Engine(workers=args.workers) as engine:
            job = engine.run(P._vectors_job(shards, n_tokens, scratch / "tokens.arrays",
                                            scratch / "job" / ".vectors.arrays"))[0]
        job_wall = round(time.perf_counter() - t0, 2)

        def sha(p):
            return hashlib.sha256(p.read_bytes()).hexdigest()
        one_sha, job_sha = sha(scratch / "one.arrays"), sha(scratch / "job" / ".vectors.arrays")
    finally:
        shutil.rmtree(scratch)
    result = {"work": str(args.work), "shards": len(shards), "phrases": int(len(tokens)), **steps,
              "one_task_cpu_s": one_cpu,
              "job": {"workers": args.workers, "wall_s": job_wall, "tasks": job["tasks"],
                      "cpu_s": job["cpu_seconds"], "cpu_s_total": round(sum(job["cpu_seconds"].values()), 3),
                      "longest_task_cpu_s": job["longest_task_cpu_seconds"], "svd_cpu_s": job["svd_cpu_seconds"]},
              "sha256_one_task": one_sha, "sha256_job": job_sha, "identical": one_sha == job_sha}
    print(json.dumps(result, indent=1))
    if args.output:
        write_json(args.output, result)


if __name__ == "__main__":
    main()
