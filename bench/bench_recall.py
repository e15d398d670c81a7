"""Recall against cost: a measured build, its database's size, lookup latency and gold coverage.

    python bench/bench_recall.py --data ../shared/data --label after [--domain bio] [--workers 2]
        [--python PATH] [--recipe FILE] [--keep DIR]

One clean build (a child process ``PATH -m pivot build``; ``--python`` runs another checkout's
interpreter, e.g. the previous code for a "before" figure) measured as bench_determinism does:
wall time and the peak resident set summed over the build's process tree (Dask workers
included). Then, on its database:

* pairs: rows of the pair table and each model's proposed pairs; the file's size;
* lookup: p50/p99 of ``ParaphraseDB.lookup`` over 10,000 seeded random phrases at k = 10 and
  20 (General and the last domain model), as bench_lookup.py times it, in wall-clock and in the
  thread's CPU time (on a busy machine the wall-clock tail is time spent waiting for a core),
  and the phrase with the most stored pairs (the longest range a lookup sorts);
* coverage: of the Bio-SimLex + Bio-SimVerb pairs (either direction), how many a model
  proposes at all (General; any stored model) — what a longer tail of pairs buys;
* the export sha256 of every model (``pivot export --format ppdb``).

Results go to ``bench/results/recall.json`` under the label (other labels are kept).
"""
import argparse
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _measure import db_meta, exports, run_measured  # noqa: E402


def lookup_times(db_path, model, k=None, n=10_000, seed=0):
    from pivot.store.db import ParaphraseDB

    texts = [r[0] for r in sqlite3.connect(db_path).execute("SELECT text FROM phrase ORDER BY id")]
    rng = np.random.default_rng(seed)
    sample = [texts[i] for i in rng.integers(0, len(texts), n)]
    with ParaphraseDB(db_path) as db:
        k = k or getattr(db, "default_k", 10)
        db.lookup(sample[0], k=k, model=model)  # warm
        times, cpu = np.empty(n), np.empty(n)
        for i, phrase in enumerate(sample):
            t0, c0 = time.perf_counter(), time.thread_time()
            db.lookup(phrase, k=k, model=model)
            times[i], cpu[i] = time.perf_counter() - t0, time.thread_time() - c0
        # The phrase with the most stored pairs: the longest range a lookup sorts.
        worst_id = sqlite3.connect(db_path).execute(
            "SELECT e1 FROM pair GROUP BY e1 ORDER BY COUNT(*) DESC LIMIT 1").fetchone()[0]
        worst = db._conn.execute("SELECT text FROM phrase WHERE id = ?", (worst_id,)).fetchone()[0]
        n_worst = sqlite3.connect(db_path).execute("SELECT COUNT(*) FROM pair WHERE e1 = ?", (worst_id,)).fetchone()[0]
        w = []
        for _ in range(200):
            c0 = time.thread_time()
            db.lookup(worst, k=k, model=model)
            w.append(time.thread_time() - c0)
    ms, cpu_ms = times * 1e3, cpu * 1e3
    # Wall-clock percentiles include the time the process waits for a core on a busy machine;
    # the CPU-time percentiles (this thread's) are the lookup's own work.
    return {"model": model, "k": k, "p50_ms": round(float(np.percentile(ms, 50)), 4),
            "p99_ms": round(float(np.percentile(ms, 99)), 4),
            "cpu_p50_ms": round(float(np.percentile(cpu_ms, 50)), 4),
            "cpu_p99_ms": round(float(np.percentile(cpu_ms, 99)), 4),
            "worst_phrase": worst, "worst_phrase_pairs": n_worst,
            "worst_phrase_cpu_median_ms": round(float(np.median(w)) * 1e3, 4)}


def coverage(db_path, data):
    """Gold pairs (Bio-SimLex + Bio-SimVerb) proposed in either direction, per model."""
    from pivot.eval.gold import read_gold
    from pivot.store.combined import symmetric_p
    from pivot.store.db import ParaphraseDB

    pairs = [p[:2] for g in ("gold/Bio-SimLex.txt", "gold/Bio-SimVerb.txt")
             for p in read_gold(Path(data) / g, "simlex")]
    out = {"n_gold_pairs": len(pairs)}
    with ParaphraseDB(db_path) as db:
        stored = db.stored_models
        any_model = np.zeros(len(pairs), bool)
        for m in stored:
            s = symmetric_p(db.scores(pairs, m), db.scores([(b, a) for a, b in pairs], m))
            out[m] = int((~np.isnan(s)).sum())
            any_model |= ~np.isnan(s)
        out["any_model"] = int(any_model.sum())
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--label", required=True, help="key of this run in the results file")
    ap.add_argument("--domain", default="bio")
    ap.add_argument("--recipe", help="a recipe file instead of --domain")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--python", default=sys.executable, help="interpreter that runs the build (default: this one)")
    ap.add_argument("--keep", type=Path, help="keep the work dir and database here (default: a temporary dir)")
    ap.add_argument("--json", default=str(Path(__file__).parent / "results" / "recall.json"))
    args = ap.parse_args()

    d = args.keep or Path(tempfile.mkdtemp(prefix="pivot-recall-"))
    d.mkdir(parents=True, exist_ok=True)
    db = d / "out.db"
    try:
        which = ["--recipe", args.recipe] if args.recipe else ["--domain", args.domain]
        cmd = [args.python, "-m", "pivot", "build", *which, "--data", args.data, "--work", str(d / "work"),
               "--out", str(db), "--workers", str(args.workers)]
        figures = run_measured(cmd, d / "build.log")
        with sqlite3.connect(db) as conn:
            n_rows = conn.execute("SELECT COUNT(*) FROM pair").fetchone()[0]
            per_model = dict(conn.execute("SELECT name, n_pairs FROM model WHERE kind != 'combined' ORDER BY id"))
        domain_models = [m for m in per_model if m != "general"]
        result = {
            "command": " ".join(map(str, cmd)), **figures,
            "signature": db_meta(db, "signature"), "pruning": db_meta(db, "pruning"),
            "db_bytes": os.path.getsize(db), "db_pair_rows": n_rows, "model_pairs": per_model,
            "lookup": [lookup_times(db, m, k) for m in ["general", *domain_models[-1:]] for k in (10, 20)],
            "coverage_bio_gold": coverage(db, args.data),
            "export_sha256": exports(db, d),
        }
    finally:
        if args.keep is None:
            shutil.rmtree(d, ignore_errors=True)
    print(json.dumps({k: v for k, v in result.items() if k not in ("export_sha256", "pruning")}, indent=1))
    path = Path(args.json)
    results = json.loads(path.read_text()) if path.is_file() else {}
    results[args.label] = result
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
