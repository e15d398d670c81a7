"""A database in parts: a folder of SQLite files, one per range of English phrase ids.

``pivot build --parts N`` writes ``OUT`` as a folder::

    OUT/manifest.json      format, signature, meta, the models (with their total pair counts), per
                           phrase-index shard its file, sha256, bytes and phrase count, and per
                           part: file name, e1 id range [lo, hi), first and last phrase (id,
                           text), sha256, bytes and row counts
    OUT/phrases-0000.db .. the phrase index in N shards: every stored English phrase (the single
                           file's `phrase` rows, with the text index and the search's FTS5
                           index) in the shard crc32(UTF-8 text) mod N says: the text -> id
                           map a lookup routes by
    OUT/part-0000.db ...   one schema-3 database per range: the pairs whose e1 lies in the range, the
                           phrase and foreign rows they name, the models (pair counts of this part),
                           the meta (the build's, plus "part": its index and range), and `reverse`

The ranges are cut on the order the store already uses, the e1 id (the pairs' primary key), so
reading the parts in turn reads the table in key order, and an export of the folder is the
export of the single file byte for byte. They are balanced by pair count: part k starts at the
first e1 whose preceding pairs reach k/N of the table (a phrase's pairs are never split).

Phrase ids are ranks of token-id keys, not of texts, so a phrase's text does not say its range:
a lookup hashes the text to its index shard (zlib's CRC-32, the same on every platform, unlike
Python's hash()), finds the id there (one probe of the shard's text index), the part by a
binary search on the ranges' starts, and then reads that part only. ``reverse`` holds, for each
pair (a, b) of the part whose reverse (b, a) lies in another part, that reverse row's model
columns (keyed (b, a), as in `pair`): p(e1|e2) of a lookup is then read from the same file.

Written by the build's workers at once (pivot.pipeline.engine), in three rounds of tasks:

1. the texts: one task per block of TEXT_BLOCK stored phrase ids (and its share of the foreign
   ids) writes ``texts-b.db``, the block's `phrase` rows with each text's shard, and its
   `foreign_phrase` rows;
2. one task per index shard copies its phrases from every block's file, in id order, and builds
   the text index and the FTS5 index (``phrases-j.db``); beside them, one task per part writes
   the pairs of its range with their texts (copied from the blocks), models and meta
   (``part-k.pairs.db``);
3. one task per part: the part itself, a copy of its round-2 file with `reverse` filled inside
   SQLite from the other parts' round-2 files.

Every copy is made inside SQLite (ATTACH, INSERT ... SELECT; no Python value per row), and the
build's own process only surveys the pairs and cuts the ranges: no step holds or writes every
phrase in one process (the phrase index of a PPDB-scale build has hundreds of millions of
texts; its one-file version was the write's longest step on one core). Every file is written
under a temporary name and renamed when complete, all of them inside a temporary sibling folder
``.OUT.parts-KEY`` renamed to ``OUT`` at the end: a reader never sees half a database, and an
interrupted write resumes with the files it finished (KEY hashes everything the parts hold).
"""
from __future__ import annotations

import bisect
import hashlib
import json
import logging
import os
import shutil
import time
import zlib
from pathlib import Path

import numpy as np

from pivot.atomic import atomic_path
from pivot.atomic import write_text as write_text_atomic
from pivot.errors import InputError
from pivot.store.write import (FTS_SQL, FTS_TABLE, TEXT_BLOCK, IdSet, PairChunk, SurveyFold, TextBlock,
                               _chunks_from, _distinct, _insert_columns, _integers, _mark, _writing, begin_load, check_models,
                               fill_text_file, finish_load, full_meta, insert_pairs, model_column, survey_chunk,
                               survey_chunks, text_blocks, write_id_bits)

MANIFEST = "manifest.json"
FORMAT = "pivot-parts"
#: 2: the phrase index in shards by text hash (1 was one phrases.db, written by the build's process)
FORMAT_VERSION = 2
#: How a phrase's text names its index shard (the manifest records it).
SHARD_HASH = "zlib.crc32(UTF-8 text) % n_shards"
log = logging.getLogger("pivot")

#: What a reader says of a folder whose manifest or parts do not agree.
BROKEN = "a damaged database in parts"


def part_name(k: int) -> str:
    return f"part-{k:04d}.db"


def index_name(j: int) -> str:
    return f"phrases-{j:04d}.db"


def shard_of(text: str, n_shards: int) -> int:
    """The phrase-index shard of an English phrase (SHARD_HASH)."""
    return zlib.crc32(text.encode("utf-8")) % n_shards


def sha256_file(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class TableE1:
    """The e1 column of the table (the chunks in key order), read where asked: the e1 of row r,
    and the rows whose e1 is below x. Built from the survey's rows and first and last e1 of each
    chunk; a chunk is opened (its e1 a memory map, for the build's StoreChunks) only for a row in
    it or an x inside its e1 span. It replaces an array of the pairs of every English id (8
    bytes an id, 2 GB at the target's 252M phrases, and 44 more as a Python list) in the build's
    process: cutting N parts asks N - 1 rows and 2N counts."""

    def __init__(self, chunks, chunk_rows: list, chunk_e1: list):
        self.chunks, self.rows = chunks, [int(r) for r in chunk_rows]
        self.spans = chunk_e1
        self.starts = np.concatenate(([0], np.cumsum(self.rows, dtype=np.int64)))
        self.total = int(self.starts[-1])
        spans = [s for s in chunk_e1 if s is not None]
        self.end = int(spans[-1][1]) + 1 if spans else 0   # the largest e1 + 1 (0: no pair)

    def _e1(self, j: int) -> np.ndarray:
        return _integers(next(_chunks_from(self.chunks, j)).e1)

    def at(self, r: int) -> int:
        """The e1 of row r (0 <= r < total) of the table."""
        j = int(np.searchsorted(self.starts, r, side="right")) - 1
        return int(self._e1(j)[r - int(self.starts[j])])

    def rows_below(self, x: int) -> int:
        """The rows whose e1 < x."""
        n = 0
        for j, span in enumerate(self.spans):
            if span is None or span[0] >= x:
                continue
            n += self.rows[j] if span[1] < x else int(np.searchsorted(self._e1(j), x, side="left"))
        return n


def cut_ranges(table, n_parts: int) -> list[tuple[int, int]]:
    """e1 id ranges [lo, hi) of ``n_parts`` parts covering 0..(largest e1 + 1), balanced by pairs.

    ``table``: a :class:`TableE1` (its total, end, at and rows_below).
    With c[i] the pairs whose e1 <= i and T their total, part k >= 1 starts after the first id i
    with c[i] >= ceil(k T / N): every part holds at least its share, ends at a phrase boundary,
    and each has a pair (else InputError: too many parts). That first i is the e1 of row
    ceil(k T / N) - 1 of the table in key order (c[i] >= t exactly when the rows 0..t-1 all have
    e1 <= i), so the cut reads N - 1 rows, not a count per id.
    """
    total = table.total
    starts = [0]
    for k in range(1, n_parts):
        target = (k * total + n_parts - 1) // n_parts
        starts.append(table.at(target - 1) + 1 if target > 0 else 0)
    starts.append(table.end)
    before = {x: table.rows_below(x) for x in set(starts)}  # pairs whose e1 is below id x
    if total == 0 or any(before[b] <= before[a] for a, b in zip(starts[:-1], starts[1:])):
        raise InputError(f"--parts {n_parts}: the table has {total:,} pairs, too few first phrases to give "
                         "every part a pair; ask for fewer parts")
    return list(zip(starts[:-1], starts[1:]))


def _reverse_sql(n_stored: int) -> str:
    probs = "".join(f"p_{j} REAL, " for j in range(n_stored))
    return (f"CREATE TABLE reverse (e1 INTEGER NOT NULL, e2 INTEGER NOT NULL, {probs}ppdb2 REAL NOT NULL, "
            "PRIMARY KEY (e1, e2)) WITHOUT ROWID")


def _read_only(path) -> str:
    """A read-only URI of a file to ATTACH (percent-encoded: a "#" or "?" in a name is part of it)."""
    return Path(path).resolve().as_uri() + "?mode=ro"


def _pairs_name(k: int) -> str:
    return f"part-{k:04d}.pairs.db"


def _reused(done: Path, path: Path, key: str) -> dict | None:
    """The record of a file an interrupted write finished under the same key, else None."""
    if done.is_file() and path.is_file():
        record = json.loads(done.read_text())
        if record.get("key") == key:
            return record
    return None


def write_text_block(folder, block: TextBlock, n_shards: int, phrases, phrase_counts, lhs, foreign,
                     key: str) -> dict:
    """Round 1: ``folder/texts-b.db``, the block's `phrase` rows (id, text, n_words, count, lhs)
    with each text's index shard, and its `foreign_phrase` rows; returns the phrases per shard.

    A task of the build's engine: ``phrases``, ``lhs`` and ``foreign`` are functions of a block's
    ids (or mappings), ``phrase_counts`` a function or an array by id (Survey.phrase_rows)."""
    folder = Path(folder)
    path = folder / block.file
    done = path.with_suffix(".json")
    old = _reused(done, path, key)
    if old is not None:
        return old
    per_shard = np.zeros(n_shards, np.int64)

    def shard(text: str) -> int:
        j = shard_of(text, n_shards)
        per_shard[j] += 1
        return j
    with atomic_path(path) as tmp:
        with _writing(tmp, path, fresh=True) as conn:
            fill_text_file(conn, block.ids, block.f_ids, phrases, phrase_counts, lhs, foreign, shard=shard)
    record = {"per_shard": per_shard.tolist(), "key": key}
    write_text_atomic(done, json.dumps(record))
    return record


def write_index_shard(folder, j: int, n_shards: int, block_files: list[str], signature, key: str) -> dict:
    """Round 2: ``folder/phrases-j.db``, the English phrases whose text hashes to shard j, copied
    from every block's file in id order, with the unique text index, the search's FTS5 index and
    ANALYZE's statistics; returns its record (file, sha256, bytes, n_phrases)."""
    folder = Path(folder)
    path = folder / index_name(j)
    done = path.with_suffix(".json")
    old = _reused(done, path, key)
    if old is not None and old.get("bytes") == path.stat().st_size:
        return old
    with atomic_path(path) as tmp:
        with _writing(tmp, path, fresh=True) as conn:
            conn.executescript("""
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE phrase (
    id INTEGER PRIMARY KEY, text TEXT NOT NULL, n_words INTEGER NOT NULL, count INTEGER NOT NULL,
    lhs TEXT NOT NULL);
""")
            for name in block_files:  # in id order: every insert appends to the b-tree
                # one at a time, outside a transaction (ATTACH is refused inside one)
                conn.execute("ATTACH DATABASE ? AS blk", (_read_only(folder / name),))
                conn.execute("INSERT INTO main.phrase SELECT id, text, n_words, count, lhs FROM blk.phrase "
                             "WHERE shard = ? ORDER BY id", (j,))
                conn.execute("DETACH DATABASE blk")
            conn.execute("BEGIN")
            conn.executemany("INSERT INTO meta VALUES (?, ?)", ((k, json.dumps(v, sort_keys=True)) for k, v in
                                                                {"signature": signature,
                                                                 "role": "a shard of the phrase index of a "
                                                                         "database in parts",
                                                                 "format": FORMAT,
                                                                 "shard": {"index": j, "n_shards": n_shards,
                                                                           "hash": SHARD_HASH}}.items()))
            conn.execute("CREATE UNIQUE INDEX phrase_text ON phrase(text)")
            conn.execute(FTS_SQL)
            conn.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('rebuild')")
            conn.execute("COMMIT")
            conn.execute("ANALYZE")
            n = conn.execute("SELECT count(*) FROM phrase").fetchone()[0]
    record = {"file": index_name(j), "n_phrases": n, "sha256": sha256_file(path), "bytes": path.stat().st_size,
              "key": key}
    write_text_atomic(done, json.dumps(record, indent=1, sort_keys=True))
    return record


def write_part_pairs(folder, k: int, lo: int, hi: int, chunks, blocks: list[tuple], models: list[dict],
                     meta: dict, n_piv_cols: int, key: str, batch_rows: int = 200_000) -> dict:
    """Round 2 of part k: the pairs with lo <= e1 < hi, their phrase and foreign rows, the models
    and meta, as ``folder/part-k.pairs.db``; returns its counts.

    A task of the build's engine: it reads the chunks (the e1 column of each, and every column
    of its own rows only: the build hands them over as memory maps), the texts from the texts
    round's files (``blocks``: TextBlock.ranges of each). A file already written under the same
    ``key`` (an interrupted write) is kept.
    """
    folder = Path(folder)
    path, done = folder / _pairs_name(k), folder / f"part-{k:04d}.pairs.json"
    old = _reused(done, path, key)
    if old is not None:
        return old
    stored, _ = check_models(models)
    n_stored = len(stored)
    n_pairs, n = np.zeros(n_stored, np.int64), 0
    # the ids the part's pairs use, as bits (an eighth of a byte a vocabulary id: its e2 and
    # pivots range over the whole vocabulary, so a byte an id here was n_e + n_f bytes a task)
    used, used_f = np.zeros(0, np.uint8), np.zeros(0, np.uint8)
    first = last = None
    with atomic_path(path) as tmp:
        tmp.unlink(missing_ok=True)
        with _writing(tmp, path) as conn:
            # (the temporary id tables below hold every id the part uses: in a temporary file,
            # behind SQLite's default cache of the temporary database, by begin_load's temp_store)
            begin_load(conn, n_stored, n_piv_cols)
            conn.execute(_reverse_sql(n_stored))  # filled in round 3 (add_reverse)
            for c in chunks():
                e1 = _integers(c.e1)
                a, b = int(np.searchsorted(e1, lo)), int(np.searchsorted(e1, hi))  # chunks are sorted by e1
                # a block of rows at a time (the same rows in the same order: the same bytes),
                # so that a chunk's converted columns are never held whole
                for x in range(a, b, batch_rows):
                    sl = slice(x, min(x + batch_rows, b))
                    sub = PairChunk(e1[sl], _integers(c.e2[sl]), c.n_pivots[sl], c.pivots[sl], c.p[sl],
                                    **{f: None if getattr(c, f, None) is None else getattr(c, f)[sl]
                                       for f in ("form", "ppdb2", "rel")})
                    insert_pairs(conn, sub, n_piv_cols, n_stored, batch_rows)
                    n_pairs += (np.asarray(sub.p, np.float64) > 0).sum(axis=0)
                    used = _mark(used, _distinct(sub.e1, sub.e2))
                    used_f = _mark(used_f, _distinct(_integers(sub.pivots)))
                if b > a:
                    n += b - a
                    first = int(e1[a]) if first is None else first
                    last = int(e1[b - 1])
            used, used_f = IdSet(used), IdSet(used_f)
            for name, ids in (("used_e", used), ("used_f", used_f)):
                conn.execute(f"CREATE TEMP TABLE {name} (id INTEGER PRIMARY KEY)")
                for x in range(0, len(ids), TEXT_BLOCK):
                    _insert_columns(conn, f"temp.{name}", [ids[x:x + TEXT_BLOCK]])
            conn.execute("COMMIT")
            # The texts the part's pairs name, copied from the blocks in id order (the blocks'
            # ranges ascend), each ATTACHed in turn outside a transaction.
            for name, (e_lo, e_hi), (f_lo, f_hi) in blocks:
                conn.execute("ATTACH DATABASE ? AS blk", (_read_only(folder / name),))
                conn.execute("INSERT INTO main.phrase SELECT p.id, p.text, p.n_words, p.count, p.lhs "
                             "FROM temp.used_e u JOIN blk.phrase p ON p.id = u.id "
                             "WHERE u.id >= ? AND u.id < ? ORDER BY u.id", (e_lo, e_hi))
                conn.execute("INSERT INTO main.foreign_phrase SELECT f.id, f.text "
                             "FROM temp.used_f u JOIN blk.foreign_phrase f ON f.id = u.id "
                             "WHERE u.id >= ? AND u.id < ? ORDER BY u.id", (f_lo, f_hi))
                conn.execute("DETACH DATABASE blk")
            texts = dict(conn.execute("SELECT id, text FROM main.phrase WHERE id IN (?, ?)", (first, last)))
            conn.execute("BEGIN")
            part_meta = {**meta, "part": {"index": k, "e1_range": [lo, hi], "format": FORMAT}}
            finish_load(conn, models, n_pairs.tolist(), n, part_meta)
    record = {"file": part_name(k), "e1_range": [lo, hi], "first": {"id": first, "text": texts.get(first)},
              "last": {"id": last, "text": texts.get(last)}, "n_pairs": n, "n_phrases": len(used),
              "n_foreign": len(used_f), "key": key}
    write_text_atomic(done, json.dumps(record, indent=1, sort_keys=True))
    return record


def survey_task(chunks, j: int, n_stored: int) -> dict:
    """pivot.store.write.survey_chunk of chunk j of ``chunks()`` (a task: the chunks before it are
    not opened when ``chunks`` has a ``from_chunk``, see pivot.store.write._chunks_from)."""
    c = next(_chunks_from(chunks, j), None)
    if c is None:
        raise ValueError(f"the chunks are fewer than {j + 1}, as their n_chunks said")
    return survey_chunk(c, n_stored)


def _survey(chunks, stored: list[dict], learned: list[dict], engine):
    """The survey of the chunks (pivot.store.write.Survey): a task per chunk on the engine's
    workers when ``chunks`` says how many it yields (the build's StoreChunks), each task's piece
    folded in here as it comes back (a job per chunk of Engine.run), so that this process holds
    the few pieces under way, never every chunk's ids (engine.map would return them all at once:
    a chunk's distinct ids are up to a few per row)."""
    n_chunks = getattr(chunks, "n_chunks", None)
    if engine is None or n_chunks is None:
        return survey_chunks(chunks, stored, learned)
    from pivot.pipeline.engine import Batch

    fold = SurveyFold(len(stored))

    def job(j):
        (piece,) = yield Batch(survey_task, [(chunks, j, len(stored))], name="store-survey", quiet=True)
        fold.add(j, piece)

    t0 = time.perf_counter()
    engine.run(*(job(j) for j in range(n_chunks)))
    log.info("  store-survey: %d tasks in %.1f s", n_chunks, time.perf_counter() - t0)
    return fold.finish(learned)


def _round_two(kind: str, *args) -> dict:
    """A task of the second round: an index shard or a part's pairs (submitted together, so that
    neither kind waits for the other)."""
    return write_index_shard(*args) if kind == "index" else write_part_pairs(*args)


def add_reverse(folder, k: int, n_parts: int, record: dict, n_stored: int, key: str) -> dict:
    """Phase 2 of part k: ``part-k.db`` is its phase-1 file plus `reverse`, the rows of the other
    parts whose e2 lies in k's range (so that a lookup here reads p(e1|e2) here); returns the
    part's record (with sha256 and bytes).

    The rows are copied inside SQLite (ATTACH, INSERT ... SELECT): no Python value per row, and
    the other parts' phase-1 files are only read (part k writes a copy of its own). They come
    part after part, each in key order, so the b-tree is appended to.
    """
    folder = Path(folder)
    path, done = folder / part_name(k), folder / f"part-{k:04d}.json"
    if done.is_file() and path.is_file():
        old = json.loads(done.read_text())
        if old.get("key") == key and old.get("bytes") == path.stat().st_size:
            return old
    lo, hi = record["e1_range"]
    columns = ", ".join([*(f"p_{j}" for j in range(n_stored)), "ppdb2"])
    n_reverse = 0
    with atomic_path(path) as tmp:
        shutil.copyfile(folder / _pairs_name(k), tmp)
        with _writing(tmp, path) as conn:
            conn.execute("PRAGMA journal_mode=OFF")
            conn.execute("PRAGMA synchronous=OFF")
            # The rows come in key order (part after part, each sorted): the b-tree is appended
            # to, and the cache needs its interior pages and the leaves being filled, as in
            # begin_load; 256 MiB filled with leaves never read again (a part's reverse rows
            # at bio-multi's size are ~0.5 GB) for the same bytes.
            conn.execute("PRAGMA cache_size=-65536")
            for j in range(n_parts):
                if j == k:
                    continue
                # one at a time: SQLite attaches at most 10 files by default
                conn.execute("ATTACH DATABASE ? AS other", (_read_only(folder / _pairs_name(j)),))
                n_reverse += conn.execute(f"INSERT INTO main.reverse SELECT e1, e2, {columns} FROM other.pair "
                                          "WHERE e2 >= ? AND e2 < ?", (lo, hi)).rowcount
                conn.execute("DETACH DATABASE other")
            conn.execute("ANALYZE reverse")
    out = {**{k_: v for k_, v in record.items() if k_ != "key"}, "n_reverse": n_reverse,
           "sha256": sha256_file(path), "bytes": path.stat().st_size, "key": key}
    write_text_atomic(done, json.dumps(out, indent=1, sort_keys=True))
    return out


def staging_folder(path: Path, key: str) -> Path:
    """The temporary sibling a database in parts is written in (kept for resume until renamed)."""
    return path.with_name(f".{path.name}.parts-{key}")


def write_database_parts(path, n_parts: int, *, phrases, phrase_counts, chunks, foreign, models: list[dict],
                         meta: dict, lhs=None, engine=None, batch_rows: int = 200_000) -> Path:
    """:func:`pivot.store.write.write_database_chunks` as a folder of ``n_parts`` parts (module doc).

    ``engine``: a pivot.pipeline.engine.Engine whose workers write the parts at once (then
    ``chunks`` must be picklable); None writes them here, one after the other.
    """
    path = Path(path)
    t0 = time.perf_counter()
    stored, learned = check_models(models)
    survey = _survey(chunks, stored, learned, engine)
    t1 = time.perf_counter()
    table = TableE1(chunks, survey.chunk_rows, survey.chunk_e1)
    ranges = cut_ranges(table, n_parts)
    meta_all = full_meta(models, meta)
    key = hashlib.sha256(json.dumps({"format": [FORMAT, FORMAT_VERSION], "meta": meta_all, "models": models,
                                     "ranges": ranges, "n": survey.n, "n_pairs": survey.n_pairs},
                                    sort_keys=True, default=str).encode()).hexdigest()[:16]
    staging = staging_folder(path, key)
    for other in path.parent.glob(f".{path.name}.parts-*"):  # an interrupted write of other inputs
        if other != staging and other.is_dir():
            shutil.rmtree(other, ignore_errors=True)
    staging.mkdir(parents=True, exist_ok=True)

    def run(fn, tasks, name, cost):
        if engine is None:
            return [fn(*t) for t in tasks]
        return engine.map(fn, tasks, name=name, cost=cost)

    blocks = text_blocks(survey.used, survey.used_f, *write_id_bits(staging, survey))
    t2 = time.perf_counter()
    # a task is handed its block's labels only (pivot.pipeline.lhs.Labels), not every phrase's
    tasks = [(staging, blk, n_parts, phrases, phrase_counts, lhs.within(*blk.e_range) if hasattr(lhs, "within") else lhs,
              foreign, key) for blk in blocks]
    cost = [len(blk.ids) for blk in blocks]
    texts = run(write_text_block, tasks, "store-texts", cost)
    per_shard = np.sum([t["per_shard"] for t in texts], axis=0).tolist()
    del tasks
    t3 = time.perf_counter()
    block_files, block_ranges = [blk.file for blk in blocks], [blk.ranges() for blk in blocks]
    # every part and every index shard at once, the largest first (pairs and phrases: a pair
    # row and a phrase row cost about the same to copy, the indexes aside)
    tasks = [("pairs", staging, k, lo, hi, chunks, block_ranges, models, meta, survey.n_piv_cols, key, batch_rows)
             for k, (lo, hi) in enumerate(ranges)]
    tasks += [("index", staging, j, n_parts, block_files, meta_all.get("signature"), key) for j in range(n_parts)]
    pairs_in = [table.rows_below(hi) - table.rows_below(lo) for lo, hi in ranges]
    done = run(_round_two, tasks, "store-pairs-and-index", [*pairs_in, *per_shard])
    pairs, shards = done[:n_parts], done[n_parts:]
    tasks = [(staging, k, n_parts, r, len(stored), key) for k, r in enumerate(pairs)]
    records = run(add_reverse, tasks, "store-reverse", pairs_in)
    t4 = time.perf_counter()
    log.info("database in %d parts: survey %.1f s, texts (%d blocks) %.1f s, index shards and parts %.1f s",
             n_parts, t1 - t0, len(blocks), t3 - t2, t4 - t3)
    column_of = {m["name"]: j for j, m in enumerate(stored)}
    manifest = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "signature": meta_all.get("signature"),
        "n_parts": n_parts, "n_pairs": survey.n, "n_phrases": len(survey.used),
        "n_foreign": len(survey.used_f) if callable(foreign) else len(foreign), "pair_columns": _pair_columns(n_stored=len(stored),
                                                                      n_piv_cols=survey.n_piv_cols),
        "models": [{"name": m["name"], "kind": m["kind"], "description": m.get("description", ""),
                    "params": m.get("params", {}),
                    **dict(zip(("score_column", "n_pairs"), model_column(m, column_of, survey.n_pairs, survey.n)))}
                   for m in models],
        "index": {"hash": SHARD_HASH, "n_shards": n_parts,
                  "shards": [{k: v for k, v in r.items() if k != "key"} for r in shards]},
        "parts": [{k: v for k, v in r.items() if k != "key"} for r in records],
        "meta": meta_all,
    }
    write_text_atomic(staging / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True, default=str) + "\n")
    for k in range(n_parts):
        for leftover in (f"part-{k:04d}.json", f"part-{k:04d}.pairs.json", _pairs_name(k),
                         Path(index_name(k)).with_suffix(".json").name):
            (staging / leftover).unlink(missing_ok=True)
    for name in ("used-e.bits", "used-f.bits"):
        (staging / name).unlink(missing_ok=True)
    for blk in blocks:
        (staging / blk.file).unlink(missing_ok=True)
        (staging / blk.file).with_suffix(".json").unlink(missing_ok=True)
    _swap_into_place(staging, path)
    return path


def _pair_columns(n_stored: int, n_piv_cols: int) -> list[str]:
    from pivot.store.write import RELATION_COLUMNS

    return (["e1", "e2", "n_pivots", *(f"pivot{j + 1}" for j in range(n_piv_cols)),
             *(f"p_{j}" for j in range(n_stored)), "form", "ppdb2", *RELATION_COLUMNS, "relation"])


def _swap_into_place(staging: Path, path: Path) -> None:
    """Rename the finished folder to ``path``; a previous database in parts there (the output
    guard allowed only that) is moved aside first and removed after."""
    if not os.path.lexists(path):
        os.rename(staging, path)
        return
    old = path.with_name(f".{path.name}.old-{os.getpid()}")
    os.rename(path, old)
    os.rename(staging, path)
    shutil.rmtree(old)


# ------------------------------------------------------------------------------------ reading


def is_parts(path) -> bool:
    return Path(path).is_dir()


def check_replaceable(path: Path, option: str = "--out") -> None:
    """``path`` may be (re)written as a database in parts: absent, or a folder holding only the
    files its manifest names (a previous database in parts); anything else is refused, since
    renaming over it would lose files that are not ours (inputs, a work folder, a single file)."""
    if not os.path.lexists(path):
        return
    if not path.is_dir() or path.is_symlink():
        raise InputError(f"{option} {path}: exists and is not a folder of parts (a single-file database or "
                         "another file); refusing to replace it with a folder (remove it, or choose another --out)")
    manifest = path / MANIFEST
    if not manifest.is_file():
        raise InputError(f"{option} {path}: is a folder without a {MANIFEST} (not a database in parts); "
                         "refusing to replace it (choose another --out)")
    try:
        m = json.loads(manifest.read_text(encoding="utf-8"))
        ours = {MANIFEST, *_index_files(m), *(p["file"] for p in m["parts"])}
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{option} {path}: its {MANIFEST} is unreadable ({exc}); refusing to replace the folder")
    others = sorted(set(os.listdir(path)) - ours)
    if others:
        raise InputError(f"{option} {path}: holds files its {MANIFEST} does not name ({', '.join(others[:3])}); "
                         "refusing to replace the folder")


def _index_files(m: dict) -> list[str]:
    """The phrase index's files a manifest names: its shards (format 2), or format 1's one file
    (a folder of an older pivot may still be replaced by a new build)."""
    index = m["index"]
    return [index["file"]] if "file" in index else [s["file"] for s in index["shards"]]


class Manifest:
    """A database in parts as its manifest describes it, every file checked to exist with its
    recorded size (one line naming the file otherwise); a part's sha256 is checked when a
    reader first opens it (:meth:`verified`)."""

    def __init__(self, folder):
        self.folder = Path(folder)
        path = self.folder / MANIFEST
        if not path.is_file():
            raise InputError(f"a folder without {MANIFEST}: not a pivot database in parts", self.folder)
        try:
            m = json.loads(path.read_text(encoding="utf-8"))
            if m.get("format") != FORMAT or m.get("format_version") != FORMAT_VERSION:
                raise InputError(f"{BROKEN}: format {m.get('format')!r} version {m.get('format_version')!r}, this "
                                 f"pivot reads {FORMAT!r} version {FORMAT_VERSION}: rebuild it with `pivot build`", path)
            self.data = m
            self.parts = m["parts"]
            self.starts = [int(p["e1_range"][0]) for p in self.parts]
            self.ends = [int(p["e1_range"][1]) for p in self.parts]
            self.shards = m["index"]["shards"]
            if m["index"].get("hash") != SHARD_HASH or len(self.shards) != int(m["index"]["n_shards"]) or \
                    not self.shards:
                raise InputError(f"{BROKEN}: its phrase index is not {m['index'].get('n_shards')!r} shards by "
                                 f"{SHARD_HASH!r}", path)
            files = [*self.shards, *self.parts]
            names = [f["file"] for f in files]
            sizes = [int(f["bytes"]) for f in files]
        except InputError:  # (a ValueError) already says what is wrong: not wrapped again
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise InputError(f"{BROKEN}: unreadable manifest ({type(exc).__name__}: {exc})", path) from None
        if any(os.sep in n or n in ("", ".", "..") for n in names):
            raise InputError(f"{BROKEN}: the manifest names a file outside its folder", path)
        if self.starts != sorted(self.starts) or any(a >= b for a, b in zip(self.starts, self.ends)) or \
                self.starts[1:] != self.ends[:-1]:
            raise InputError(f"{BROKEN}: the parts' ranges are not consecutive", path)
        for name, size in zip(names, sizes):
            f = self.folder / name
            if not f.is_file():
                raise InputError(f"{BROKEN}: a part the manifest lists is missing", f)
            if f.stat().st_size != size:
                raise InputError(f"{BROKEN}: {f.stat().st_size:,} bytes, the manifest says {size:,} (altered)", f)
        self._verified: set[str] = set()

    def part_of(self, e1: int) -> int | None:
        """The part whose range holds phrase id e1 (binary search on the ranges' starts)."""
        k = bisect.bisect_right(self.starts, e1) - 1
        return k if 0 <= k and e1 < self.ends[k] else None

    def path(self, name: str) -> Path:
        return self.folder / name

    def verified(self, name: str, sha256: str) -> Path:
        """The file, after its sha256 was checked against the manifest (once per reader)."""
        f = self.folder / name
        if name not in self._verified:
            got = sha256_file(f)
            if got != sha256:
                raise InputError(f"{BROKEN}: sha256 {got[:12]}..., the manifest says {sha256[:12]}... (altered)", f)
            self._verified.add(name)
        return f

    def shard_of(self, text: str) -> int:
        """The phrase-index shard that holds the phrase ``text``, if the database stores it."""
        return shard_of(text, len(self.shards))

    def index_path(self, j: int) -> Path:
        """Shard j of the phrase index, its sha256 checked."""
        return self.verified(self.shards[j]["file"], self.shards[j]["sha256"])

    def part_path(self, k: int) -> Path:
        return self.verified(self.parts[k]["file"], self.parts[k]["sha256"])
