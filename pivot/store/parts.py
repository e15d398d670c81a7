"""A database in parts: a folder of SQLite files, one per range of English phrase ids.

``pivot build --parts N`` writes ``OUT`` as a folder::

    OUT/manifest.json      format, signature, meta, the models (with their total pair counts) and,
                           per part: file name, e1 id range [lo, hi), first and last phrase (id,
                           text), sha256, bytes and row counts
    OUT/phrases.db         every stored English phrase (the single file's `phrase` table, with its
                           text index and the search's FTS5 index) and every foreign phrase: the
                           text -> id map a lookup routes by
    OUT/part-0000.db ...   one schema-3 database per range: the pairs whose e1 lies in the range, the
                           phrase and foreign rows they name, the models (pair counts of this part),
                           the meta (the build's, plus "part": its index and range), and `reverse`

The ranges are cut on the order the store already uses, the e1 id (the pairs' primary key), so
reading the parts in turn reads the table in key order, and an export of the folder is the
export of the single file byte for byte. They are balanced by pair count: part k starts at the
first e1 whose preceding pairs reach k/N of the table (a phrase's pairs are never split).

Phrase ids are ranks of token-id keys, not of texts, so a phrase's text does not say its range:
a lookup finds the id in ``phrases.db`` (one probe of its text index), the part by a binary
search on the ranges' starts, and then reads that part only. ``reverse`` holds, for each pair
(a, b) of the part whose reverse (b, a) lies in another part, that reverse row's model columns
(keyed (b, a), as in `pair`): p(e1|e2) of a lookup is then read from the same file.

Written by the build's workers at once (pivot.pipeline.engine), in two rounds of one task per
part: the pairs of its range with their texts, models and meta (``part-k.pairs.db``); then the
part itself, a copy of that file with `reverse` filled inside SQLite from the other parts'
first-round files (ATTACH, INSERT ... SELECT; no Python value per row). Every file is written
under a temporary name and renamed when complete, all of them inside a temporary sibling folder
``.OUT.parts-KEY`` renamed to ``OUT`` at the end: a reader never sees half a database, and an
interrupted write resumes with the parts it finished (KEY hashes everything the parts hold).
"""
from __future__ import annotations

import bisect
import hashlib
import json
import logging
import os
import shutil
import sqlite3
import time
from pathlib import Path

import numpy as np

from pivot.atomic import atomic_path
from pivot.atomic import write_text as write_text_atomic
from pivot.errors import InputError
from pivot.store.write import (FTS_SQL, FTS_TABLE, PairChunk, _integers, _used_ids, _write_failed, begin_load, check_models,
                               finish_load, full_meta, insert_pairs, model_column, survey_chunks)

MANIFEST = "manifest.json"
INDEX = "phrases.db"
FORMAT = "pivot-parts"
FORMAT_VERSION = 1
log = logging.getLogger("pivot")

#: What a reader says of a folder whose manifest or parts do not agree.
BROKEN = "a damaged database in parts"


def part_name(k: int) -> str:
    return f"part-{k:04d}.db"


def sha256_file(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def cut_ranges(e1_pairs: np.ndarray, n_parts: int) -> list[tuple[int, int]]:
    """e1 id ranges [lo, hi) of ``n_parts`` parts covering 0..len(e1_pairs), balanced by pairs.

    e1_pairs[i]: the pairs whose e1 is i. With c the cumulative counts and T their total, part
    k >= 1 starts after the first id i with c[i] >= ceil(k T / N): every part holds at least its
    share, ends at a phrase boundary, and each has a pair (else InputError: too many parts).
    """
    cum = np.cumsum(e1_pairs)
    total = int(cum[-1]) if len(cum) else 0
    starts = [0]
    for k in range(1, n_parts):
        target = (k * total + n_parts - 1) // n_parts
        starts.append(int(np.searchsorted(cum, target, side="left")) + 1)
    starts.append(len(e1_pairs))
    before = [0] + cum.tolist()  # pairs whose e1 is below id i
    if total == 0 or any(before[b] <= before[a] for a, b in zip(starts[:-1], starts[1:])):
        raise InputError(f"--parts {n_parts}: the table has {total:,} pairs over {int((e1_pairs > 0).sum()):,} "
                         "first phrases, too few to give every part a pair; ask for fewer parts")
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


def write_part_pairs(folder, k: int, lo: int, hi: int, chunks, index_path, models: list[dict], meta: dict,
                     n_piv_cols: int, key: str, batch_rows: int = 200_000) -> dict:
    """Phase 1 of part k: the pairs with lo <= e1 < hi, their phrase and foreign rows, the models
    and meta, as ``folder/part-k.pairs.db``; returns its counts.

    A task of the build's engine: it reads the chunks (the e1 column of each, and every column
    of its own rows only: the build hands them over as memory maps), the texts from
    ``index_path``. A file already written under the same ``key`` (an interrupted write) is kept.
    """
    folder = Path(folder)
    path, done = folder / _pairs_name(k), folder / f"part-{k:04d}.pairs.json"
    if done.is_file() and path.is_file():
        record = json.loads(done.read_text())
        if record.get("key") == key:
            return record
    stored, _ = check_models(models)
    n_stored = len(stored)
    n_pairs, n = np.zeros(n_stored, np.int64), 0
    used, used_f = np.zeros(0, np.int64), np.zeros(0, np.int64)
    first = last = None
    with atomic_path(path) as tmp:
        tmp.unlink(missing_ok=True)
        conn = sqlite3.connect(tmp.resolve().as_uri(), uri=True, isolation_level=None)
        try:
            # read-only (ATTACH is refused inside a transaction)
            conn.execute("ATTACH DATABASE ? AS st", (_read_only(index_path),))
            begin_load(conn, n_stored, n_piv_cols)
            conn.execute(_reverse_sql(n_stored))  # filled in phase 2 (add_reverse)
            for c in chunks():
                e1 = _integers(c.e1)
                a, b = int(np.searchsorted(e1, lo)), int(np.searchsorted(e1, hi))  # chunks are sorted by e1
                if b <= a:
                    continue
                sl = slice(a, b)
                sub = PairChunk(e1[sl], _integers(c.e2)[sl], c.n_pivots[sl], c.pivots[sl], np.asarray(c.p)[sl],
                                **{f: None if getattr(c, f, None) is None else getattr(c, f)[sl]
                                   for f in ("form", "ppdb2", "rel")})
                insert_pairs(conn, sub, n_piv_cols, n_stored, batch_rows)
                n_pairs += (np.asarray(sub.p, np.float64) > 0).sum(axis=0)
                n += b - a
                used = _used_ids(used, sub.e1, sub.e2)
                piv = _integers(sub.pivots)
                used_f = _used_ids(used_f, piv[piv >= 0])
                first = int(e1[a]) if first is None else first
                last = int(e1[b - 1])
            # The texts the part's pairs name, copied from the phrase index in id order.
            conn.execute("CREATE TEMP TABLE used_e (id INTEGER PRIMARY KEY)")
            conn.executemany("INSERT INTO used_e VALUES (?)", ((i,) for i in used.tolist()))
            conn.execute("CREATE TEMP TABLE used_f (id INTEGER PRIMARY KEY)")
            conn.executemany("INSERT INTO used_f VALUES (?)", ((i,) for i in used_f.tolist()))
            conn.execute("INSERT INTO main.phrase SELECT p.id, p.text, p.n_words, p.count, p.lhs FROM st.phrase p "
                         "JOIN temp.used_e u ON u.id = p.id ORDER BY p.id")
            conn.execute("INSERT INTO main.foreign_phrase SELECT f.id, f.text FROM st.foreign_phrase f "
                         "JOIN temp.used_f u ON u.id = f.id ORDER BY f.id")
            texts = dict(conn.execute("SELECT id, text FROM main.phrase WHERE id IN (?, ?)", (first, last)))
            conn.execute("COMMIT")
            conn.execute("DETACH DATABASE st")
            conn.execute("BEGIN")
            part_meta = {**meta, "part": {"index": k, "e1_range": [lo, hi], "format": FORMAT}}
            finish_load(conn, models, n_pairs.tolist(), n, part_meta)
        except sqlite3.OperationalError as exc:
            raise _write_failed(exc, path) from exc
        finally:
            conn.close()
    record = {"file": part_name(k), "e1_range": [lo, hi], "first": {"id": first, "text": texts.get(first)},
              "last": {"id": last, "text": texts.get(last)}, "n_pairs": n, "n_phrases": len(used),
              "n_foreign": len(used_f), "key": key}
    write_text_atomic(done, json.dumps(record, indent=1, sort_keys=True))
    return record


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
        conn = sqlite3.connect(tmp.resolve().as_uri(), uri=True, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=OFF")
            conn.execute("PRAGMA synchronous=OFF")
            conn.execute("PRAGMA cache_size=-262144")
            for j in range(n_parts):
                if j == k:
                    continue
                # one at a time: SQLite attaches at most 10 files by default
                conn.execute("ATTACH DATABASE ? AS other", (_read_only(folder / _pairs_name(j)),))
                n_reverse += conn.execute(f"INSERT INTO main.reverse SELECT e1, e2, {columns} FROM other.pair "
                                          "WHERE e2 >= ? AND e2 < ?", (lo, hi)).rowcount
                conn.execute("DETACH DATABASE other")
            conn.execute("ANALYZE reverse")
        except sqlite3.OperationalError as exc:
            raise _write_failed(exc, path) from exc
        finally:
            conn.close()
    out = {**{k_: v for k_, v in record.items() if k_ != "key"}, "n_reverse": n_reverse,
           "sha256": sha256_file(path), "bytes": path.stat().st_size, "key": key}
    write_text_atomic(done, json.dumps(out, indent=1, sort_keys=True))
    return out


def _write_index(path, survey, phrases, foreign, lhs, phrase_counts, meta: dict) -> None:
    """``phrases.db``: the English phrases (the single file's `phrase` rows), the foreign
    phrases, the text index and the search's FTS5 index; the texts built a block of ids at a
    time (pivot.store.write.Survey.phrase_rows)."""
    with atomic_path(path) as tmp:
        tmp.unlink(missing_ok=True)
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=OFF")
            conn.execute("PRAGMA synchronous=OFF")
            conn.executescript("""
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE phrase (
    id INTEGER PRIMARY KEY, text TEXT NOT NULL, n_words INTEGER NOT NULL, count INTEGER NOT NULL,
    lhs TEXT NOT NULL);
CREATE TABLE foreign_phrase (id INTEGER PRIMARY KEY, text TEXT NOT NULL);
""")
            conn.execute("BEGIN")
            conn.executemany("INSERT INTO phrase VALUES (?, ?, ?, ?, ?)",
                             survey.phrase_rows(phrases, lhs, phrase_counts))
            conn.executemany("INSERT INTO foreign_phrase VALUES (?, ?)", survey.foreign_rows(foreign))
            conn.executemany("INSERT INTO meta VALUES (?, ?)", ((k, json.dumps(v, sort_keys=True)) for k, v in
                                                                {"signature": meta.get("signature"),
                                                                 "role": "the phrase index of a database in parts",
                                                                 "format": FORMAT}.items()))
            conn.execute("CREATE UNIQUE INDEX phrase_text ON phrase(text)")
            conn.execute(FTS_SQL)
            conn.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('rebuild')")
            conn.execute("COMMIT")
            conn.execute("ANALYZE")
        except sqlite3.OperationalError as exc:
            raise _write_failed(exc, Path(path)) from exc
        finally:
            conn.close()


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
    survey = survey_chunks(chunks, stored, learned)
    t1 = time.perf_counter()
    ranges = cut_ranges(survey.e1_pairs, n_parts)
    meta_all = full_meta(models, meta)
    key = hashlib.sha256(json.dumps({"format": [FORMAT, FORMAT_VERSION], "meta": meta_all, "models": models,
                                     "ranges": ranges, "n": survey.n, "n_pairs": survey.n_pairs},
                                    sort_keys=True, default=str).encode()).hexdigest()[:16]
    staging = staging_folder(path, key)
    for other in path.parent.glob(f".{path.name}.parts-*"):  # an interrupted write of other inputs
        if other != staging and other.is_dir():
            shutil.rmtree(other, ignore_errors=True)
    staging.mkdir(parents=True, exist_ok=True)
    index_path = staging / INDEX
    index_done = staging / "phrases.json"
    if not (index_path.is_file() and index_done.is_file() and json.loads(index_done.read_text()).get("key") == key):
        _write_index(index_path, survey, phrases, foreign, lhs, phrase_counts, meta_all)
        write_text_atomic(index_done, json.dumps({"key": key}))
    t3 = time.perf_counter()
    tasks = [(staging, k, lo, hi, chunks, index_path, models, meta, survey.n_piv_cols, key, batch_rows)
             for k, (lo, hi) in enumerate(ranges)]
    cost = [hi - lo for lo, hi in ranges]
    if engine is None:
        pairs = [write_part_pairs(*t) for t in tasks]
    else:
        pairs = engine.map(write_part_pairs, tasks, name="store-pairs", cost=cost)
    tasks = [(staging, k, n_parts, r, len(stored), key) for k, r in enumerate(pairs)]
    if engine is None:
        records = [add_reverse(*t) for t in tasks]
    else:
        records = engine.map(add_reverse, tasks, name="store-reverse", cost=cost)
    t4 = time.perf_counter()
    log.info("database in %d parts: survey %.1f s, phrase index (with its texts) %.1f s, parts %.1f s", n_parts,
             t1 - t0, t3 - t1, t4 - t3)
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
        "index": {"file": INDEX, "sha256": sha256_file(index_path), "bytes": index_path.stat().st_size},
        "parts": [{k: v for k, v in r.items() if k != "key"} for r in records],
        "meta": meta_all,
    }
    write_text_atomic(staging / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True, default=str) + "\n")
    for k in range(n_parts):
        for leftover in (f"part-{k:04d}.json", f"part-{k:04d}.pairs.json", _pairs_name(k)):
            (staging / leftover).unlink(missing_ok=True)
    index_done.unlink(missing_ok=True)
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
        ours = {MANIFEST, m["index"]["file"], *(p["file"] for p in m["parts"])}
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{option} {path}: its {MANIFEST} is unreadable ({exc}); refusing to replace the folder")
    others = sorted(set(os.listdir(path)) - ours)
    if others:
        raise InputError(f"{option} {path}: holds files its {MANIFEST} does not name ({', '.join(others[:3])}); "
                         "refusing to replace the folder")


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
                                 f"pivot reads {FORMAT!r} version {FORMAT_VERSION}", path)
            self.data = m
            self.parts = m["parts"]
            self.starts = [int(p["e1_range"][0]) for p in self.parts]
            self.ends = [int(p["e1_range"][1]) for p in self.parts]
            files = [m["index"], *self.parts]
            names = [f["file"] for f in files]
            sizes = [int(f["bytes"]) for f in files]
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

    def index_path(self) -> Path:
        return self.verified(self.data["index"]["file"], self.data["index"]["sha256"])

    def part_path(self, k: int) -> Path:
        return self.verified(self.parts[k]["file"], self.parts[k]["sha256"])
