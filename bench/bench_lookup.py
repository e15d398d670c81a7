"""Lookup latency: p50/p99 of ParaphraseDB.lookup over random phrases of a built database.

    python bench/bench_lookup.py bio.db [--n 10000] [--k 10] [--model general] [--all] [--seed 0]

Phrases are drawn (seeded) from the database's phrase table, so every lookup finds its phrase
(one that is only ever a paraphrase has no answers: `with_answers` counts the others); each
timing covers normalisation (Moses tokenisation), the phrase index, sorting the phrase's rows
of the pair table by the model's column, and the k best rows' text, reverse pair and pivots.
Target: p99 < 1 ms. A database in parts (a folder, `pivot build --parts N`) is timed the same
way: its phrases are drawn from the shards of its phrase index; each shard and each part is
opened (its sha256 checked) once before the timed lookups: `open_ms` times the folder, each
shard and each part.
"""
import argparse
import json
import sqlite3
import time
from pathlib import Path

import numpy as np

from pivot.store.db import ParaphraseDB


def lookup_latency(db_path, *, n: int = 10_000, k: int = 10, model: str | None = None, seed: int = 0,
                   show_all: bool = False) -> dict:
    """p50/p99/max milliseconds of n lookups of seeded random phrases of the database (model
    None: the database's default)."""
    if Path(db_path).is_dir():  # a database in parts: the phrases of every shard of its index, by id
        shards = json.loads((Path(db_path) / "manifest.json").read_text())["index"]["shards"]
        rows = sorted(r for s in shards for r in sqlite3.connect(Path(db_path) / s["file"]).execute(
            "SELECT id, text FROM phrase"))
        texts = [t for _, t in rows]
    else:
        texts = [r[0] for r in sqlite3.connect(db_path).execute("SELECT text FROM phrase ORDER BY id")]
    rng = np.random.default_rng(seed)
    sample = [texts[i] for i in rng.integers(0, len(texts), n)]
    t0 = time.perf_counter()
    db = ParaphraseDB(db_path)
    open_ms = {"folder" if db.manifest else "file": round((time.perf_counter() - t0) * 1e3, 2)}
    if db.manifest is not None:  # each shard and part opened (and checked) once, before the timed lookups
        for j in range(len(db.manifest.shards)):
            t0 = time.perf_counter()
            db._shard(j)
            open_ms[f"shard {j}"] = round((time.perf_counter() - t0) * 1e3, 2)
        for k in range(len(db.manifest.parts)):
            t0 = time.perf_counter()
            db._part(k)
            open_ms[f"part {k}"] = round((time.perf_counter() - t0) * 1e3, 2)
    model = model or db.default_model
    db.lookup(sample[0], k=k, model=model, all=show_all)  # warm: imports, tokenizer, page cache
    times = np.empty(n)
    hits = 0
    for i, phrase in enumerate(sample):
        t0 = time.perf_counter()
        hits += bool(db.lookup(phrase, k=k, model=model, all=show_all))
        times[i] = time.perf_counter() - t0
    ms = times * 1e3
    return {"db": str(db_path), "parts": len(db.manifest.parts) if db.manifest else 1, "open_ms": open_ms,
            "model": model, "all": show_all, "n": n, "k": k, "with_answers": hits,
            "p50_ms": round(float(np.percentile(ms, 50)), 4),
            "p99_ms": round(float(np.percentile(ms, 99)), 4),
            "max_ms": round(float(ms.max()), 4)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("db")
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--model", default=None, help="default: the database's default model")
    ap.add_argument("--all", action="store_true", help="also the pairs a lookup hides by default")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(json.dumps(lookup_latency(args.db, n=args.n, k=args.k, model=args.model, seed=args.seed,
                                    show_all=args.all), indent=1))


if __name__ == "__main__":
    main()
