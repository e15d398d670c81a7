"""Database write: wall time and memory of write_database on synthetic pairs the size of a real build.

    /usr/bin/time -v python bench/bench_write.py OUT.db [--pairs 5000000] [--models 8] [--seed 0]

Synthetic data (seeded): English phrases with ~25 paraphrases each, up to 3 pivots per pair
out of 1M foreign phrases, one General column scoring every pair and models-1 columns scoring
about 70 % of them. Prints the write's wall time and the process's peak RSS before and after
the write (the difference is the writer's own peak; /usr/bin/time -v reports the same peak).
The result is a valid database for bench/bench_lookup.py.

On the bio build (a database in parts, `pivot build --parts N`):

    python bench/bench_write.py --bio WORK --results bench/results/write_parts.json [--configs 1x1,4x1,1x2,4x2]

WORK is a hard-link copy of a finished bio build's work folder (every stage is reused, only the
database is written). For each parts x workers configuration, one `pivot build` as a child: its
wall time, CPU seconds, the database write's seconds (from the log), the peak RSS and PSS summed
over the build's process tree (the build and its Dask workers), the signature and every
model's export sha256 (--parts 1 and N must agree). Then the single file joined from the
4-part folder inside SQLite (ATTACH, INSERT ... SELECT in key order), timed: what writing parts
always and joining them would cost instead of the one-writer file. Results are keyed by
configuration; a rerun skips those done.
"""
import argparse
import hashlib
import json
import os
import resource
import time
from pathlib import Path

import numpy as np

from pivot.store.write import write_database


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def synthetic(n_pairs: int, n_models: int, seed: int):
    rng = np.random.default_rng(seed)
    per_e1 = 25
    n_e1 = n_pairs // per_e1
    n_phrases = 2 * n_e1
    e1 = np.repeat(np.arange(n_e1, dtype=np.int32), per_e1)
    e2 = rng.integers(0, n_phrases, len(e1), dtype=np.int32)
    key = np.unique(e1.astype(np.int64) << 32 | e2)  # pairs must be distinct
    key = key[(key >> 32) != (key & 0xFFFFFFFF)]
    rng.shuffle(key)  # the writer sorts: do not hand it key order
    e1, e2 = (key >> 32).astype(np.int32), (key & 0xFFFFFFFF).astype(np.int32)
    n = len(e1)
    n_foreign = 1_000_000
    pivots = rng.integers(0, n_foreign, (n, 3), dtype=np.int32)
    n_piv = rng.integers(1, 6, n).astype(np.int32)
    pivots[np.arange(3)[None, :] >= n_piv[:, None]] = -1
    scores = rng.random((n, n_models))
    scores[:, 1:][rng.random((n, n_models - 1)) < 0.3] = 0.0
    used_f = np.unique(pivots[pivots >= 0])
    foreign = {f: f"fr:mot{f}" for f in used_f.tolist()}
    phrases = [f"phrase {i}" for i in range(n_phrases)]
    counts = rng.integers(1, 1000, n_phrases)
    models = [{"name": "general" if j == 0 else f"m{j}", "kind": "pivot", "description": "", "params": {}}
              for j in range(n_models)]
    return dict(phrases=phrases, phrase_counts=counts, e1=e1, e2=e2, n_pivots=n_piv, pivots=pivots,
                foreign=foreign, models=models, scores=scores,
                meta={"signature": "bench", "normalization": {"lang": "en"}})


def join_parts(folder, out) -> float:
    """Write the single file of a database in parts by joining its parts inside SQLite (ATTACH,
    INSERT ... SELECT in key order); returns the seconds. The prototype this benchmark times."""
    import sqlite3

    from pivot.store.parts import MANIFEST
    from pivot.store.write import begin_load, check_models, finish_load

    folder = Path(folder)
    m = json.loads((folder / MANIFEST).read_text())
    t0 = time.perf_counter()
    out = Path(out)
    out.unlink(missing_ok=True)
    stored, _ = check_models(m["models"])
    n_piv = sum(c.startswith("pivot") for c in m["pair_columns"])
    conn = sqlite3.connect(out.resolve().as_uri(), uri=True, isolation_level=None)
    ro = "?mode=ro"  # the folder is only read
    shards = m["index"]["shards"]
    # (SQLite attaches at most 10 files: this prototype joins up to 5 parts)
    for j, shard in enumerate(shards):
        conn.execute(f"ATTACH DATABASE ? AS s{j}", ((folder / shard["file"]).resolve().as_uri() + ro,))
    for k, part in enumerate(m["parts"]):
        conn.execute(f"ATTACH DATABASE ? AS p{k}", ((folder / part["file"]).resolve().as_uri() + ro,))
    begin_load(conn, len(stored), n_piv)
    every = " UNION ALL ".join(f"SELECT id, text, n_words, count, lhs FROM s{j}.phrase" for j in range(len(shards)))
    conn.execute(f"INSERT INTO main.phrase SELECT * FROM ({every}) ORDER BY id")
    # the foreign phrases: each part holds those its pairs name
    every = " UNION ".join(f"SELECT id, text FROM p{k}.foreign_phrase" for k in range(len(m["parts"])))
    conn.execute(f"INSERT INTO main.foreign_phrase SELECT * FROM ({every}) ORDER BY id")
    for k in range(len(m["parts"])):  # consecutive e1 ranges: appended in key order
        conn.execute(f"INSERT INTO main.pair SELECT * FROM p{k}.pair ORDER BY e1, e2")
    conn.execute("COMMIT")
    for j in range(len(shards)):
        conn.execute(f"DETACH DATABASE s{j}")
    for k in range(len(m["parts"])):
        conn.execute(f"DETACH DATABASE p{k}")
    conn.execute("BEGIN")
    counts = {x["name"]: x["n_pairs"] for x in m["models"]}
    finish_load(conn, m["models"], [counts[x["name"]] for x in stored], m["n_pairs"],
                {k: v for k, v in m["meta"].items() if k not in ("schema_version", "default_model")})
    conn.close()
    return time.perf_counter() - t0


def bio(args):
    import os as _os
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from _measure import content_sha256, run_measured, store_seconds

    from pivot.store.db import ParaphraseDB
    from pivot.store.export import export_ppdb

    results = json.loads(Path(args.results).read_text()) if Path(args.results).is_file() else {}
    work = Path(args.bio).resolve()
    out_dir = work.parent
    for config in args.configs.split(","):
        parts, workers = (int(x) for x in config.split("x"))
        name = f"parts{parts}-workers{workers}"
        if name in results:
            continue
        out = out_dir / f"bench-{name}{'.db' if parts == 1 else ''}"
        log = out_dir / f"bench-{name}.log"
        cmd = [sys.executable, "-m", "pivot", "build", "--domain", "bio", "--work", str(work), "--out", str(out),
               "--parts", str(parts), "--workers", str(workers)]
        r = run_measured(cmd, log, env={**_os.environ})
        r["store_s"] = store_seconds(log)
        r["command"] = " ".join(cmd[2:])
        with ParaphraseDB(out) as db:
            r["signature"] = db.signature
            r["exports_sha256"] = {}
            # every model's export (--all), for the configurations of --exports-at workers
            for model in db.models if workers in args.exports_at else []:
                h = hashlib.sha256()

                class Sink:
                    def write(self, b):
                        h.update(b)

                export_ppdb(db, Sink(), model, show_all=True)
                r["exports_sha256"][model] = h.hexdigest()
        r["bytes"] = (sum(f.stat().st_size for f in out.iterdir()) if out.is_dir() else out.stat().st_size)
        if parts > 1:
            joined = out_dir / f"bench-{name}-joined.db"
            r["join_s"] = round(join_parts(out, joined), 2)
            r["joined_content_sha256"] = content_sha256(joined)
            joined.unlink()
        else:
            r["content_sha256"] = content_sha256(out)
        results[name] = r
        Path(args.results).write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
        print(name, json.dumps({k: r[k] for k in ("wall_s", "cpu_s", "store_s", "peak_rss_tree_gib",
                                                   "peak_pss_tree_gib", "loadavg_1min_before")}), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?")
    ap.add_argument("--bio", metavar="WORK", help="time the database write of the bio build in WORK (see above)")
    ap.add_argument("--results", default="bench/results/write_parts.json")
    ap.add_argument("--configs", default="1x1,4x1,1x2,4x2", help="PARTSxWORKERS, comma-separated")
    ap.add_argument("--exports-at", type=lambda t: [int(x) for x in t.split(",")], default=[2],
                    help="export every model (sha256) for the configurations with these worker counts")
    ap.add_argument("--pairs", type=int, default=5_000_000)
    ap.add_argument("--models", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.bio:
        return bio(args)
    data = synthetic(args.pairs, args.models, args.seed)
    rss_before = peak_rss_mb()
    t0 = time.perf_counter()
    write_database(args.out, **data)
    seconds = time.perf_counter() - t0
    print(json.dumps({"pairs": int(len(data["e1"])), "models": args.models, "write_s": round(seconds, 2),
                      "peak_rss_before_write_mb": round(rss_before), "peak_rss_mb": round(peak_rss_mb()),
                      "file_mb": round(os.path.getsize(args.out) / 2**20)}, indent=1))


if __name__ == "__main__":
    main()
