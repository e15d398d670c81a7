"""The streaming database writer (schema in `pivot.store.db`).

A real build stores millions of pairs under a handful of models, so the writer never holds a
Python object per pair for the whole table: rows go in primary-key order (which lets SQLite
append to the WITHOUT ROWID b-tree instead of splitting pages all over it), one batch at a
time converted to Python values for `executemany`. The build hands the table over as chunks
in key order (`write_database_chunks`, the pivot stage's row ranges read in turn), so the
write holds one chunk of pairs, not the table; `write_database` takes whole arrays. Ranks
and reverse probabilities are not stored; the reader derives them from the pair rows of one
phrase, which are few.

Binding a row from Python costs most of its time (sqlite3's per-value binding and the Python
values themselves): ~2.7 us a row of `pair` on bio, of which SQLite's own insert ~0.5 us, once the
values are made a run of rows at a time and NULL is bound as NaN (:func:`_insert_columns`; ~5 us
with a tuple a row and None for NULL). Given an engine with workers, the rows are bound there
instead: one task per block of BLOCK_ROWS rows writes a scratch SQLite file, all blocks
at once, and so do the texts (a task per block of stored phrase ids and its share of the
foreign ids); this process copies the texts into the database, then each block's rows in key
order, inside SQLite (ATTACH, INSERT ... SELECT), the same sequence of inserts and transactions
as one writer, so the same bytes (see `_load_pairs_joined`).

The file is built under a temporary name in the destination folder and renamed into place
only when complete, so a reader never sees half a database; any exception removes it. Equal
inputs give a byte-identical file: nothing time- or process-dependent is written.
"""
from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import sqlite3
import time
from dataclasses import dataclass
from itertools import chain, repeat
from pathlib import Path

import numpy as np

from pivot import outputs
from pivot.atomic import atomic_path
from pivot.errors import InputError

log = logging.getLogger("pivot")

SCHEMA_VERSION = 3

#: The phrase search's FTS5 index over phrase.text (pivot.store.search; built into the phrase
#: index of a database in parts by pivot.store.parts).
FTS_TABLE = "phrase_fts"
FTS_SQL = (f"CREATE VIRTUAL TABLE {FTS_TABLE} USING fts5(text, content='phrase', content_rowid='id', "
           "detail=none, tokenize='unicode61 remove_diacritics 0')")

#: The relation columns of `pair` and the relations' names (pivot.pipeline.wordnet.RELATIONS).
RELATION_COLUMNS = ("rel_eq", "rel_fwd", "rel_rev", "rel_excl", "rel_other", "rel_indep")
RELATION_NAMES = ("Equivalence", "ForwardEntailment", "ReverseEntailment", "Exclusion", "OtherRelated",
                  "Independent")
#: The well-formedness flags of the `form` column (pivot.pipeline.wellformed.NAMES, HIDDEN; the
#: store cannot import the pipeline, a test checks that the two agree).
FORM_NAMES = {1: "edge-punct", 2: "function-only", 4: "dangling", 8: "inflection", 16: "containment"}
HIDDEN_FORMS = 1 | 2 | 4
#: A pair no classifier labelled (a build with ``[ppdb2] learn = false``, or a writer given no
#: relations): OtherRelated, with probability 1 (per mille: 1000), as pivot wrote before it had a
#: classifier; the database's meta "relations" then says ``classified: false``.
UNCLASSIFIED = 4


def text_tables_sql(extra: str = "") -> str:
    """The DDL of the `phrase` and `foreign_phrase` tables (``extra``: more columns of `phrase`,
    ", name TYPE ..."): the database's (schema_sql), and a texts file's (fill_text_file), whose
    rows are copied into it. The text itself is stored in the file (sqlite_schema): one text, the
    same bytes."""
    return f"""CREATE TABLE phrase (
    id INTEGER PRIMARY KEY, text TEXT NOT NULL, n_words INTEGER NOT NULL, count INTEGER NOT NULL,
    lhs TEXT NOT NULL{extra});
CREATE TABLE foreign_phrase (id INTEGER PRIMARY KEY, text TEXT NOT NULL);"""


def schema_sql(n_models: int, n_pivot_columns: int = 3) -> str:
    """The DDL of a database with `n_models` stored models and `n_pivot_columns` pivots per pair.

    Model columns are named by position (p_0, p_1, ...), never by model name, so no user text
    reaches the DDL; `model.score_column` maps names to columns. The foreign phrase table is
    not called "foreign": FOREIGN is an SQL keyword and would need quoting in every query.
    """
    pivots = "".join(f"pivot{j + 1} INTEGER, " for j in range(n_pivot_columns))
    probs = "".join(f"p_{j} REAL, " for j in range(n_models))
    relations = "".join(f"{c} INTEGER NOT NULL, " for c in RELATION_COLUMNS)
    return f"""
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE model (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, kind TEXT NOT NULL,
    description TEXT NOT NULL, params TEXT NOT NULL, score_column TEXT, n_pairs INTEGER NOT NULL);
{text_tables_sql()}
CREATE TABLE pair (
    e1 INTEGER NOT NULL, e2 INTEGER NOT NULL, n_pivots INTEGER NOT NULL, {pivots}{probs}
    form INTEGER NOT NULL, ppdb2 REAL NOT NULL, {relations}relation INTEGER NOT NULL,
    PRIMARY KEY (e1, e2)) WITHOUT ROWID;
"""


def _write_failed(exc: sqlite3.OperationalError, path: Path) -> InputError:
    """A database write that SQLite could not finish, as one line naming the file.

    SQLite says "database or disk is full" (SQLITE_FULL) when a write finds no space, and
    only "disk I/O error" when the kernel refuses it otherwise, e.g. EFBIG at this process'
    file size limit (``ulimit -f``), which is then named, since SQLite cannot say so.
    """
    import resource

    if getattr(exc, "sqlite_errorname", "") == "SQLITE_FULL":
        return InputError(f"cannot write the database: the disk is full (SQLite: {exc}); free space in "
                          f"{path.parent} or write the database elsewhere", path)
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY:
        return InputError(f"cannot write the database (SQLite: {exc}), and this process may write files of at "
                          f"most {limit:,} bytes (ulimit -f): raise that limit, or check the disk", path)
    return InputError(f"cannot write the database (SQLite: {exc}); check the disk and the free space in "
                      f"{path.parent}", path)


def _integers(a) -> np.ndarray:
    a = np.asarray(a)
    return a if a.dtype.kind in "iu" else a.astype(np.int64)


def _distinct(*ids: np.ndarray) -> np.ndarray:
    """The distinct non-negative ids of the arrays, ascending (int64).

    By a sort of the values, not a presence mask over 0..largest id: a mask costs a byte per id
    of the whole vocabulary in every task that surveys a chunk or writes a part (a chunk's e2 and
    pivots range over all of it), where the sort costs the chunk's own values only."""
    parts = [np.asarray(a).ravel() for a in ids]
    values = np.sort(np.concatenate([a[a >= 0] for a in parts])) if parts else np.zeros(0, np.int64)
    # (np.sort and the first of each run: np.unique's extra work made it 7 times slower here;
    # sorted in the arrays' own dtype, the pipeline's int32, and widened after)
    keep = np.ones(len(values), bool)
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep].astype(np.int64)


def _narrow(ids: np.ndarray) -> np.ndarray:
    """Ascending non-negative ids as int32 when the largest fits, else as they are."""
    return ids.astype(np.int32) if len(ids) and int(ids[-1]) < 2**31 else ids


#: One popcount a byte value (the rank index of an IdSet counts a group's bits through it).
_POPCOUNT = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).sum(axis=1).astype(np.uint8)


def _mark(packed: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Set the bits of the distinct ascending ``ids`` in the np.packbits mask ``packed`` (id i
    is bit 7 - i % 8 of byte i // 8), grown as needed (a new array then); returns the mask.

    The bits of ids sharing a byte are OR-ed together first (np.bitwise_or.reduceat over the
    runs of equal i // 8): one assignment a byte, no ufunc.at."""
    if not len(ids):
        return packed
    byte = ids >> 3
    need = int(byte[-1]) + 1
    if need > len(packed):
        grown = np.zeros(max(need, 2 * len(packed)), np.uint8)
        grown[:len(packed)] = packed
        packed = grown
    bits = np.left_shift(np.uint8(1), (7 - (ids & 7)).astype(np.uint8))
    starts = np.flatnonzero(np.concatenate(([True], byte[1:] != byte[:-1])))
    packed[byte[starts]] |= np.bitwise_or.reduceat(bits, starts)
    return packed


class IdSet:
    """Distinct non-negative ids as a bit mask, an eighth of a byte an id of the vocabulary,
    read by rank like the ascending array of the ids (``len``, ``s[a:b]``, :meth:`within`).

    What the write's survey finds used (bio-multi: 2.4M of 3.5M English ids, 3.1M of 12.4M
    foreign ones) was an int64 array (8 bytes a used id) and, while merged, a byte an id: at
    the target's 252M English phrases several GB in the build's process; as bits, 31 MB.

    The rank index counts the ids of each group of GROUP bytes (cumulative, int64: 8 bytes a
    32,768 ids), so the ids of ranks a..b are the set bits of the few groups that hold them."""

    GROUP = 4096

    def __init__(self, packed: np.ndarray):
        self.packed = np.asarray(packed, dtype=np.uint8)
        # each group's ids, a slice of 4096 groups (16 MiB of the mask) at a time: a popcount
        # byte per mask byte for all of it at once would double the mask for a moment
        step = self.GROUP * 4096
        counts = [np.add.reduceat(_POPCOUNT[self.packed[a:a + step]], np.arange(0, min(step, len(self.packed) - a),
                                                                             self.GROUP), dtype=np.int64)
                  for a in range(0, len(self.packed), step)]
        self._ends = np.cumsum(np.concatenate(counts) if counts else np.zeros(0, np.int64))  # ids in groups 0..g
        self._n = int(self._ends[-1]) if len(self._ends) else 0

    @classmethod
    def of(cls, ids) -> IdSet:
        """The set of the non-negative values of ``ids``."""
        return cls(_mark(np.zeros(0, np.uint8), _distinct(np.asarray(ids))))

    def __len__(self) -> int:
        return self._n

    def _group_ids(self, g0: int, g1: int) -> np.ndarray:
        """The ids of groups g0..g1-1, ascending."""
        a, b = g0 * self.GROUP, min(g1 * self.GROUP, len(self.packed))
        return np.flatnonzero(np.unpackbits(self.packed[a:b])).astype(np.int64) + 8 * a

    def __getitem__(self, sl: slice) -> np.ndarray:
        """The ids of ranks sl.start..sl.stop - 1 (a slice with step 1), ascending."""
        a, b, step = sl.indices(self._n)
        if step != 1:
            raise ValueError("an IdSet is sliced with step 1")
        if b <= a:
            return np.zeros(0, np.int64)
        g0 = int(np.searchsorted(self._ends, a, side="right"))   # the group of rank a
        g1 = int(np.searchsorted(self._ends, b - 1, side="right")) + 1
        before = int(self._ends[g0 - 1]) if g0 else 0
        return self._group_ids(g0, g1)[a - before:b - before]

    def ids(self) -> np.ndarray:
        """Every id, ascending (as an array: for small sets and tests)."""
        return self[0:self._n]

    def tolist(self) -> list[int]:
        return self.ids().tolist()

    def within(self, lo: int, hi: int) -> np.ndarray:
        """The ids lo <= id < hi, ascending."""
        ids = self._group_ids(lo // (8 * self.GROUP), -(-hi // (8 * self.GROUP)))
        return ids[(ids >= lo) & (ids < hi)]


def read_id_bits(path, lo: int, hi: int) -> np.ndarray:
    """The ids lo <= id < hi of an IdSet's mask saved raw at ``path`` (``packed.tofile``),
    reading only the bytes of the range: what a task of the write reads of the survey's sets."""
    path = Path(path)
    first, last = lo >> 3, min(-(-hi // 8), path.stat().st_size)
    if last <= first:
        return np.zeros(0, np.int64)
    packed = np.fromfile(path, dtype=np.uint8, count=last - first, offset=first)
    ids = np.flatnonzero(np.unpackbits(packed)).astype(np.int64) + 8 * first
    return ids[(ids >= lo) & (ids < hi)]


def _texts_name(b: int) -> str:
    """The file of block b of a database in parts' texts round (pivot.store.parts)."""
    return f"texts-{b:04d}.db"


class TextBlock:
    """One block of the texts a write with workers has its tasks write (a database in parts'
    texts round, pivot.store.parts; the one file's, :func:`_load_pairs_joined`): its index and
    the English and foreign id ranges it holds ([lo, hi) each: a part copies from it the texts
    of its ids in those ranges), and its file in a database in parts' folder. Its ids are
    those of the survey's sets in its ranges, read by the task from the sets' bit files
    (``e_bits``, ``f_bits``: :func:`write_id_bits`): a task is handed two ranges, not its ids
    (every block's ids, held in the build's process until their tasks ran, were 8 bytes a stored
    phrase and a stored pivot)."""

    def __init__(self, b: int, e_range: tuple, f_range: tuple, e_bits, f_bits):
        self.b, self.e_range, self.f_range = b, tuple(e_range), tuple(f_range)
        self.e_bits, self.f_bits = Path(e_bits), Path(f_bits)

    @property
    def ids(self) -> np.ndarray:
        return read_id_bits(self.e_bits, *self.e_range)

    @property
    def f_ids(self) -> np.ndarray:
        return read_id_bits(self.f_bits, *self.f_range)

    @property
    def file(self) -> str:
        return _texts_name(self.b)

    def ranges(self) -> tuple:
        """What a part task needs of the block (not its ids)."""
        return self.file, self.e_range, self.f_range


def write_id_bits(folder: Path, survey, names=("used-e.bits", "used-f.bits")) -> tuple[Path, Path]:
    """The survey's English and foreign id sets as raw bit files ``names`` in ``folder``
    (IdSet.packed), which the texts round's tasks read a range of."""
    paths = folder / names[0], folder / names[1]
    for path, ids in zip(paths, (survey.used, survey.used_f)):
        packed = ids.packed if isinstance(ids, IdSet) else IdSet.of(ids).packed
        with atomic_path(path) as tmp:
            packed.tofile(tmp)
    return paths


def _id_range(ids, a: int, b: int) -> tuple[int, int]:
    """[first, last + 1) of the ids of ranks a..b-1 ((0, 0) for none)."""
    if b <= a:
        return 0, 0
    return int(ids[a:a + 1][0]), int(ids[b - 1:b][0]) + 1


def text_blocks(used, used_f, e_bits, f_bits, most: int | None = None) -> list[TextBlock]:
    """The texts round's blocks: the English ids cut evenly into blocks of at most TEXT_BLOCK,
    the foreign ids into as many (at least one block; the cut depends on the data only, never
    on the workers). ``used``, ``used_f``: IdSets (or ascending arrays), saved at ``e_bits``,
    ``f_bits``. ``most``: at most that many blocks, larger than TEXT_BLOCK where need be (the
    one-file write attaches every block's file at once: _copy_texts)."""
    n = max(1, -(-len(used) // TEXT_BLOCK))
    if most is not None:
        n = min(n, most)
    e_cuts = [len(used) * i // n for i in range(n + 1)]
    f_cuts = [len(used_f) * i // n for i in range(n + 1)]
    return [TextBlock(i, _id_range(used, e_cuts[i], e_cuts[i + 1]), _id_range(used_f, f_cuts[i], f_cuts[i + 1]),
                      e_bits, f_bits) for i in range(n)]


def write_database(
    path,
    *,
    phrases,
    phrase_counts: np.ndarray,
    e1: np.ndarray,
    e2: np.ndarray,
    n_pivots: np.ndarray,
    pivots: np.ndarray,
    foreign: dict,
    models: list[dict],
    scores: np.ndarray,
    meta: dict,
    progress: bool = False,
    batch_rows: int = 200_000,
    form: np.ndarray | None = None,
    ppdb2: np.ndarray | None = None,
    rel: np.ndarray | None = None,
    lhs=None,
) -> Path:
    """Write a complete database to `path` atomically.

    phrases maps an English phrase id to its text (list or dict; only ids in e1/e2 are read).
    `pivots` is an int (n, k) array of foreign phrase ids per pair, best first, -1 for none;
    `foreign` maps each of those ids to its text ("fr:traiter").
    `models` are dicts {name, kind, description, params}; `scores` has one column per model
    whose kind is not "combined", in order. A zero (or NaN) score means the model does not
    propose the pair and is stored as NULL. A combined model's params hold
    {"base": name, "other": name, "fit": pivot.store.combined.Combination.to_meta()}.
    form, ppdb2, rel: PPDB 2.0's layer per pair (see PairChunk); a model of kind "learned" is
    scored by `ppdb2`. lhs: see write_database_chunks.
    """
    e1, e2, n_pivots, pivots = (_integers(a) for a in (e1, e2, n_pivots, pivots))
    scores = np.asarray(scores, dtype=np.float64)
    n = len(e1)
    if pivots.ndim == 1 and n == 0:
        pivots = pivots.reshape(0, 3)
    n_stored = sum(m["kind"] not in ("combined", "learned") for m in models)
    if scores.shape != (n, n_stored):
        raise ValueError(f"scores has shape {scores.shape}, expected ({n}, {n_stored})")
    if len(e2) != n or len(n_pivots) != n or pivots.ndim != 2 or len(pivots) != n:
        raise ValueError(f"e2 {e2.shape}, n_pivots {n_pivots.shape} and pivots {pivots.shape} must have "
                         f"{n} rows")
    # Primary-key order; a duplicate pair fails the insert (and the write).
    order = np.lexsort((e2, e1))
    layer = {name: None if a is None else np.asarray(a)[order] for name, a in (("form", form), ("ppdb2", ppdb2),
                                                                              ("rel", rel))}
    chunk = PairChunk(e1[order], e2[order], n_pivots[order], pivots[order], scores[order], **layer)
    return write_database_chunks(path, phrases=phrases, phrase_counts=phrase_counts, chunks=lambda: [chunk],
                                 foreign=foreign, models=models, meta=meta, progress=progress, batch_rows=batch_rows,
                                 lhs=lhs)


@dataclass
class PairChunk:
    """Consecutive pairs of the table in (e1, e2) order: the unit the database write streams.

    PPDB 2.0's layer (pivot.pipeline.ppdb2) is optional: without ``form`` a pair has no flag (0),
    without ``ppdb2`` no learned score (0.0; then no model may be of kind "learned"), without
    ``rel`` it is UNCLASSIFIED.
    """

    e1: np.ndarray
    e2: np.ndarray
    n_pivots: np.ndarray
    pivots: np.ndarray  # (n, k) foreign phrase ids, best first, -1 for none
    p: np.ndarray  # (n, stored models) scores
    form: np.ndarray | None = None  # (n,) the well-formedness bitmask (pivot.pipeline.wellformed)
    ppdb2: np.ndarray | None = None  # (n,) the learned score
    rel: np.ndarray | None = None  # (n, 6) relation probabilities per mille, RELATION_COLUMNS order


def write_database_chunks(
    path,
    *,
    phrases,
    phrase_counts,
    chunks,
    foreign: dict,
    models: list[dict],
    meta: dict,
    progress: bool = False,
    batch_rows: int = 200_000,
    lhs=None,
    engine=None,
    scratch=None,
) -> Path:
    """:func:`write_database` for a table too large to hold at once: ``chunks()`` returns a fresh
    iterable of :class:`PairChunk` (or objects with the same fields), each sorted by (e1, e2)
    and following the previous one in that order. It is read twice (ids and counts, then rows),
    so the write holds one chunk of pairs, never the table. ``phrases``, ``phrase_counts`` and
    ``foreign`` may also be functions of the ids the pairs use (ascending, a block at a time),
    called after the first pass, so that a caller builds texts only for the phrases stored. ``lhs`` gives each stored phrase's
    PPDB label (a mapping id -> "[NN]", or a function of the ids returning one); None: "[X]".

    The chunks' PPDB 2.0 fields (PairChunk) must be given in every chunk or in none. A model of
    kind "learned" is scored by the ``ppdb2`` column and proposes every pair; the meta's
    "default_model" is the learned model when there is one, else the first model (unless the
    caller's meta sets it).

    ``engine``: a pivot.pipeline.engine.Engine with workers: they write the texts (a task per
    block of stored phrase ids) and the pair rows (a task per block of BLOCK_ROWS rows), each
    into a scratch file in ``scratch`` (default: the database's folder; the workers must see it,
    as they see the work folder), which this process copies into the database inside SQLite,
    the texts first, then the pairs in key order (``chunks``, ``phrases``, ``phrase_counts``,
    ``lhs`` and a function ``foreign`` must then be picklable). The file is the same bytes as
    without an engine.
    """
    path = Path(path)
    stored, learned = check_models(models)
    survey = survey_chunks(chunks, stored, learned)
    on_workers = engine is not None and not engine.in_process

    # Built under a temporary name beside `path` and renamed when complete (pivot/outputs.py);
    # an exception removes it.
    with outputs.replacing(path) as tmp:
        conn = sqlite3.connect(tmp.resolve().as_uri(), uri=True, isolation_level=None)
        try:
            begin_load(conn, len(stored), survey.n_piv_cols)
            if on_workers:
                _load_pairs_joined(conn, path, survey, chunks, len(stored), batch_rows, engine, scratch,
                                   (phrases, phrase_counts, lhs, foreign))
            else:
                _insert_texts(conn, survey, phrases, foreign, lhs, phrase_counts)
                _load_pairs_here(conn, survey, chunks, len(stored), batch_rows, progress)
            conn.execute("BEGIN")
            finish_load(conn, models, survey.n_pairs, survey.n, meta)
        except sqlite3.OperationalError as exc:  # the disk's: full, a file size limit, an I/O error
            raise _write_failed(exc, path) from exc
        finally:
            conn.close()
    return path


#: Rows per transaction of the pair load, and per task when the workers write them.
BLOCK_ROWS = 250_000

# The pair load, two ways to the same bytes. Both insert the same rows in the same order, after
# the texts' transaction, one transaction per block of BLOCK_ROWS rows of the table in key order
# (a fixed cut: neither the chunks' sizes nor the workers count reach the file). SQLite's file
# then depends only on that sequence (its b-tree is appended to, pages are allocated in insert
# order, the header counts the transactions), which a test checks byte for byte.
#
# - here (no engine, or --workers 1): each block's rows bound from Python into `pair`;
# - on the workers: each block's rows bound from Python into a scratch SQLite file by an engine
#   task, all blocks at once, after the tasks that write the texts' files (_copy_texts); this
#   process copies the texts in, then each block's file into `pair` in key order inside SQLite
#   (ATTACH, INSERT ... SELECT: no Python value per row), each as soon as it and the ones before
#   it are written. A scratch row is 5 packed
#   integers and the scores (~1.3-1.5 us a row to write, bio and bio-multi), so the workers bind
#   about half the values the table's rows have.
#
# The copy cannot be SQLite's transfer optimization (INSERT INTO pair SELECT * FROM part.pair, a
# scratch table of pair's own schema, each record copied as it is: 0.24 against 0.84 us a row,
# SQLite 3.40.1, 1M synthetic rows of 2 models). `pair` is WITHOUT ROWID, its key a unique index,
# so SQLite transfers only into an empty table (insert.c, xferOptimization: a Rewind of the
# destination at run time; into a non-empty one it runs the per-column insert, as here), and it
# opens the destination as a bulk load (OPFLAG_BULKCSR): balance_nonroot then leaves the left
# pages of a split full, ~59 rows a leaf against the appends' ~52, another file. Unpacking in the
# workers and copying named columns (no transfer, the same bytes) saves ~15% of this copy
# (0.21 -> 0.18 s a block) and costs the workers 0.07-0.18 s a block more: more CPU in all on
# 2 cores.


def _blocks(n: int) -> list[tuple[int, int]]:
    """The row ranges [start, stop) of the table's blocks (the last one may be shorter)."""
    return [(a, min(a + BLOCK_ROWS, n)) for a in range(0, n, BLOCK_ROWS)]


def _rows(c, a: int, b: int) -> PairChunk:
    """Rows a..b of a chunk, as a PairChunk (views: a chunk's memory maps are read only there)."""
    return PairChunk(*(getattr(c, f)[a:b] for f in ("e1", "e2", "n_pivots", "pivots", "p")),
                     **{f: None if getattr(c, f, None) is None else getattr(c, f)[a:b]
                        for f in ("form", "ppdb2", "rel")})


def _chunks_from(chunks, first: int):
    """``chunks()`` from chunk ``first`` on: ``chunks.from_chunk(first)`` when it has one
    (pivot.pipeline.store.StoreChunks, which then never opens the chunks before)."""
    if hasattr(chunks, "from_chunk"):
        return chunks.from_chunk(first)
    return itertools.islice(chunks(), first, None)


def _block_pieces(chunks, start: int, stop: int, chunk_rows: list | None = None):
    """The pieces of the chunks that hold rows start..stop of the table, in order. ``chunk_rows``
    (the rows of each chunk, Survey.chunk_rows): the chunks before the block are skipped, not
    opened (:func:`_chunks_from`); chunk j starts at row sum(chunk_rows[:j])."""
    first, pos = 0, 0
    if chunk_rows is not None and len(chunk_rows):
        ends = np.cumsum(chunk_rows)
        first = int(np.searchsorted(ends, start, side="right"))   # the first chunk ending after start
        pos = int(ends[first - 1]) if first else 0
    for c in _chunks_from(chunks, first):
        m = len(c.e1)
        a, b = max(start - pos, 0), min(stop - pos, m)
        if a < b:
            yield _rows(c, a, b)
        pos += m
        if pos >= stop:
            return


def _insert_texts(conn, survey: Survey, phrases, foreign, lhs, phrase_counts) -> None:
    """The phrase and foreign_phrase rows (the load's first transaction, begun by begin_load),
    their texts built a block of ids at a time (:meth:`Survey.phrase_rows`)."""
    _insert_flat(conn, "phrase", 5, chain.from_iterable(survey.phrase_rows(phrases, lhs, phrase_counts)))
    _insert_flat(conn, "foreign_phrase", 2, chain.from_iterable(survey.foreign_rows(foreign)))
    conn.execute("COMMIT")


def _load_pairs_here(conn, survey: Survey, chunks, n_stored: int, batch_rows: int, progress: bool) -> None:
    from tqdm import tqdm

    # Pass 2: the rows, in primary-key order (a duplicate pair fails the insert and the write),
    # a transaction per block.
    pos = 0
    with tqdm(total=survey.n, desc="database: pairs", unit="row", unit_scale=True,
              disable=not progress, mininterval=1.0) as bar:
        for c in chunks():
            m, a = len(c.e1), 0
            while a < m:
                take = min(m - a, BLOCK_ROWS - pos % BLOCK_ROWS)
                if pos % BLOCK_ROWS == 0:
                    conn.execute("BEGIN")
                insert_pairs(conn, _rows(c, a, a + take), survey.n_piv_cols, n_stored, batch_rows)
                pos, a = pos + take, a + take
                if pos % BLOCK_ROWS == 0 or pos == survey.n:
                    conn.execute("COMMIT")
            bar.update(m)


def _scratch_sql(n_stored: int, n_piv_cols: int) -> str:
    """A scratch file's pair table: the packed integers (see _packed), the scores, no key (its
    rows come in key order, and the copy into `pair` checks the key); a rowid table is the
    cheaper insert."""
    columns = ["key INTEGER", *(f"piv{j} INTEGER" for j in range(0, n_piv_cols, 2)), "misc INTEGER", "rel INTEGER",
               *(f"p_{j} REAL" for j in range(n_stored)), "ppdb2 REAL"]
    return f"CREATE TABLE pair ({', '.join(columns)})"


def write_pair_file(path, chunks, start: int, stop: int, n_piv_cols: int, n_stored: int,
                    batch_rows: int = 200_000, chunk_rows: list | None = None) -> int:
    """Rows start..stop of the table (``chunks()`` in key order) as a scratch SQLite file at
    ``path``: an engine task (a retry after a dead worker starts the file again). Returns the
    rows written. ``chunk_rows``: see :func:`_block_pieces`."""
    path = Path(path)
    n = 0
    with _writing(path, path, fresh=True) as conn:
        conn.execute(_scratch_sql(n_stored, n_piv_cols))
        conn.execute("BEGIN")
        for piece in _block_pieces(chunks, start, stop, chunk_rows):
            insert_pairs(conn, piece, n_piv_cols, n_stored, batch_rows, packed=True)
            n += len(piece.e1)
        conn.execute("COMMIT")
    return n


@contextlib.contextmanager
def _writing(tmp: Path, path: Path, fresh: bool = False):
    """A connection (autocommit) to the temporary file ``tmp`` of ``path``, closed after; an
    SQLite error (a full disk, a read-only folder) becomes one line naming ``path``. ``fresh``:
    a new file (any leftover removed) written without a journal or syncs (it is renamed into
    place only when complete, or is a scratch file)."""
    if fresh:
        Path(tmp).unlink(missing_ok=True)
    conn = sqlite3.connect(Path(tmp).resolve().as_uri(), uri=True, isolation_level=None)
    try:
        if fresh:
            conn.execute("PRAGMA journal_mode=OFF")
            conn.execute("PRAGMA synchronous=OFF")
        yield conn
    except sqlite3.OperationalError as exc:
        raise _write_failed(exc, path) from exc
    finally:
        conn.close()


def fill_text_file(conn, ids, f_ids, phrases, phrase_counts, lhs, foreign, shard=None) -> None:
    """A file of texts: the `phrase` rows (id, text, n_words, count, lhs) of the English ids
    ``ids`` and the `foreign_phrase` rows (id, text) of the foreign ids ``f_ids`` (ascending,
    arrays or IdSets), in id order, in one transaction; the tables are those of the database
    (text_tables_sql), so a copy of their rows is the rows the database stores.

    ``phrases``, ``lhs``, ``foreign`` and ``phrase_counts`` as for :func:`phrase_rows` and
    :func:`foreign_rows` (a mapping ``foreign`` is asked for the entries of ``f_ids`` only).
    ``shard``: a function of a text giving its phrase-index shard (a database in parts,
    pivot.store.parts), kept in an extra column ``shard``, indexed with the id: what each shard
    reads of the file. Written by a task of the build's engine (:func:`write_text_file`;
    pivot.store.parts.write_text_block)."""
    conn.executescript(text_tables_sql(", shard INTEGER NOT NULL" if shard is not None else ""))
    conn.execute("BEGIN")
    rows = phrase_rows(ids, phrases, lhs, phrase_counts)
    if shard is not None:
        rows = ((*row, shard(row[1])) for row in rows)
    # many rows a statement (a scratch file: only its rows' content reaches the database)
    _insert_flat(conn, "phrase", 5 + (shard is not None), itertools.chain.from_iterable(rows))
    texts_of = foreign if callable(foreign) else (lambda some: {f: foreign[f] for f in some.tolist() if f in foreign})
    _insert_flat(conn, "foreign_phrase", 2, itertools.chain.from_iterable(foreign_rows(f_ids, texts_of)))
    if shard is not None:
        conn.execute("CREATE INDEX phrase_shard ON phrase(shard, id)")
    conn.execute("COMMIT")


def write_text_file(path, block, phrases, phrase_counts, lhs, foreign) -> None:
    """The texts of a block (pivot.store.parts.TextBlock: its English and foreign ids) as a
    scratch SQLite file at ``path`` (:func:`fill_text_file`): an engine task of the one-file
    write (a retry after a dead worker starts the file again). A task that fails (a pivot
    without text) removes its file: the write may have removed its scratch files already."""
    path = Path(path)
    try:
        with _writing(path, path, fresh=True) as conn:
            fill_text_file(conn, block.ids, block.f_ids, phrases, phrase_counts, lhs, foreign)
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def _block_labels(lhs, lo: int, hi: int):
    """What a texts task of ids lo..hi-1 is handed of the labels: a reader of the lhs stage's
    file as it is (pivot.pipeline.lhs.Labels with a path: the task reads its ids' labels there,
    and this process holds none), labels held in arrays cut to the block, anything else as it is."""
    if getattr(lhs, "path", None) is None and hasattr(lhs, "within"):
        return lhs.within(lo, hi)
    return lhs


def _copy_texts(conn, files: list, survey: Survey, foreign) -> None:
    """The texts' files (:func:`write_text_file`, the blocks in id order) copied into `phrase`,
    then `foreign_phrase`, in id order inside SQLite, in the load's first transaction (begun by
    begin_load): every `phrase` row then every `foreign_phrase` row in id order, the inserts of
    :func:`_insert_texts`, so the same bytes. A mapping ``foreign`` (not a function: a caller's,
    held here already) is written from here as there, every entry.

    SQLite attaches a file inside a transaction but detaches it only after the transaction ends
    ("database is locked"), so every file is attached at once: text_blocks cuts at most
    SQLITE_LIMIT_ATTACHED (10) blocks. The columns are named, so no INSERT here is SQLite's
    transfer optimization (INSERT INTO t SELECT * FROM u of two tables of one schema copies
    each record as it is); it gives the same bytes too, a test checks it."""
    names = [f"texts{b}" for b in range(len(files))]
    for name, f in zip(names, files):
        conn.execute(f"ATTACH DATABASE ? AS {name}", (Path(f).resolve().as_uri() + "?mode=ro",))
    got = sum(conn.execute(f"INSERT INTO main.phrase SELECT id, text, n_words, count, lhs FROM {name}.phrase "
                           "ORDER BY id").rowcount for name in names)
    if got != len(survey.used):
        raise ValueError(f"the texts' files hold {got} phrases, the pairs use {len(survey.used)}")
    if callable(foreign):
        got = sum(conn.execute(f"INSERT INTO main.foreign_phrase SELECT id, text FROM {name}.foreign_phrase "
                               "ORDER BY id").rowcount for name in names)
        if got != len(survey.used_f):
            raise ValueError(f"the texts' files hold {got} foreign phrases, the pairs use {len(survey.used_f)}")
    else:
        _insert_flat(conn, "foreign_phrase", 2, chain.from_iterable(survey.foreign_rows(foreign)))
    conn.execute("COMMIT")
    for name in names:
        conn.execute(f"DETACH DATABASE {name}")


def _load_pairs_joined(conn, path: Path, survey: Survey, chunks, n_stored: int, batch_rows: int, engine, scratch,
                       texts: tuple) -> None:
    """The texts and the pair rows, written by the engine's workers as scratch files and copied
    here inside SQLite: the texts' first (in the load's first transaction), then the pairs' in
    key order, each as soon as it and the ones before it are written. ``texts``: (phrases,
    phrase_counts, lhs, foreign) as write_database_chunks has them."""
    from pivot.pipeline.engine import Batch

    phrases, phrase_counts, lhs, foreign = texts
    folder = Path(scratch) if scratch is not None else path.parent
    blocks = _blocks(survey.n)
    # ".NAME.pairs-B.tmp-PID", ".NAME.texts-B.tmp-PID", ".NAME.used-e.tmp-PID": temporary names
    # pivot.locking.sweep_stale removes after a killed build (in a work folder); removed below
    # otherwise.
    pid = os.getpid()
    files = [folder / f".{path.name}.pairs-{k:05d}.tmp-{pid}" for k in range(len(blocks))]
    bits = (f".{path.name}.used-e.tmp-{pid}", f".{path.name}.used-f.tmp-{pid}")
    # the texts' blocks: their ranges of ids (a worker reads its ids from the bit files)
    text_files = [folder / f".{path.name}.texts-{b:04d}.tmp-{pid}" for b in range(conn.getlimit(
        sqlite3.SQLITE_LIMIT_ATTACHED))]
    scratch_files = [*files, *text_files, *(folder / name for name in bits)]
    columns = _unpacked_sql(survey.n_piv_cols, n_stored)
    state = {"texts": False, "written": set(), "joined": 0}

    def join_ready():
        # in key order, once the texts are in: the pages of `pair` follow those of the texts
        while state["texts"] and state["joined"] in state["written"]:
            k = state["joined"]
            conn.execute("ATTACH DATABASE ? AS part", (files[k].resolve().as_uri() + "?mode=ro",))
            # (a failed copy is not detached: the connection is closed and the file removed)
            conn.execute("BEGIN")
            got = conn.execute(f"INSERT INTO main.pair SELECT {columns} FROM part.pair ORDER BY rowid").rowcount
            conn.execute("COMMIT")
            conn.execute("DETACH DATABASE part")
            start, stop = blocks[k]
            if got != stop - start:
                raise ValueError(f"{files[k]}: {got} pair rows, block {k} has {stop - start}")
            files[k].unlink()
            state["joined"] += 1

    def writer(k):
        start, stop = blocks[k]
        yield Batch(write_pair_file, [(files[k], chunks, start, stop, survey.n_piv_cols, n_stored, batch_rows,
                                       survey.chunk_rows)],
                    name="store-pairs", quiet=True)   # one line for them all, below
        state["written"].add(k)
        join_ready()

    def texts_job():
        t0 = time.perf_counter()
        e_bits, f_bits = write_id_bits(folder, survey, bits)
        # a mapping of foreign texts is written here (_copy_texts): the tasks get no foreign id
        used_f = survey.used_f if callable(foreign) else np.zeros(0, np.int64)
        tblocks = text_blocks(survey.used, used_f, e_bits, f_bits, most=len(text_files))
        tasks = [(text_files[b.b], b, phrases, phrase_counts, _block_labels(lhs, *b.e_range),
                  foreign if callable(foreign) else {}) for b in tblocks]
        yield Batch(write_text_file, tasks, name="store-texts", quiet=True)
        del tasks
        t1 = time.perf_counter()
        _copy_texts(conn, text_files[:len(tblocks)], survey, foreign)
        log.info("  store-texts: %d tasks in %.1f s, copied in %.1f s", len(tblocks), t1 - t0,
                 time.perf_counter() - t1)
        for f in scratch_files[len(files):]:
            f.unlink(missing_ok=True)
        state["texts"] = True
        join_ready()

    t0 = time.perf_counter()
    try:
        # the texts' tasks first, then the pairs': Dask runs earlier submissions first, and no
        # pair block is copied before the texts are in
        engine.run(texts_job(), *(writer(k) for k in range(len(blocks))))
    finally:
        for f in scratch_files:
            f.unlink(missing_ok=True)
    if state["joined"] != len(blocks):
        raise RuntimeError(f"the pair load joined {state['joined']} of {len(blocks)} block files")
    log.info("  store-pairs: %d tasks, joined in key order, in %.1f s", len(blocks), time.perf_counter() - t0)


def check_models(models: list[dict]) -> tuple[list[dict], list[dict]]:
    """(stored models, learned models) of a model list, or ValueError for an inconsistent one."""
    stored = [m for m in models if m["kind"] not in ("combined", "learned")]
    learned = [m for m in models if m["kind"] == "learned"]
    if len(learned) > 1:
        raise ValueError(f"at most one learned model (the ppdb2 column): {[m['name'] for m in learned]}")
    names = [m["name"] for m in models]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate model names: {names}")
    stored_names = {m["name"] for m in stored}
    for m in models:
        if m["kind"] == "combined" and not {m["params"].get("base"), m["params"].get("other")} <= stored_names:
            raise ValueError(f"combined model {m['name']!r} must name two stored models as base and other")
    return stored, learned


@dataclass
class Texts:
    """The texts a database stores: phrases and LHS labels by English id, foreign texts by id."""

    phrases: object
    foreign: dict
    lhs: object

    def phrase_row(self, i: int, phrase_counts) -> tuple:
        """(text, n_words, count, lhs) of English phrase i: the columns of `phrase` after its id."""
        text = self.phrases[i]
        return text, text.count(" ") + 1, int(phrase_counts[i]), "[X]" if self.lhs is None else self.lhs[i]


@dataclass
class Survey:
    """What the first pass over the pair chunks finds: the table's size and shape, each stored
    model's pair count, the English and foreign ids the pairs use (IdSet: bits, or ascending
    arrays), and each chunk's rows and first and last e1 (where a database in parts is cut:
    pivot.store.parts.TableE1 reads the e1 of a row from its chunk, so no count per English
    id is held)."""

    n: int
    n_piv_cols: int
    n_pairs: list
    used: IdSet | np.ndarray
    used_f: IdSet | np.ndarray
    chunk_rows: list  # the rows of each chunk, in order (where the pair load is cut among workers)
    chunk_e1: list = None  # (first e1, last e1) of each chunk, None for an empty one

    def phrase_rows(self, phrases, lhs, phrase_counts):
        """The `phrase` rows of the ids used (:func:`phrase_rows`)."""
        return phrase_rows(self.used, phrases, lhs, phrase_counts)

    def foreign_rows(self, foreign):
        """The `foreign_phrase` rows of the pivots used (:func:`foreign_rows`)."""
        return foreign_rows(self.used_f, foreign)


def phrase_rows(used: np.ndarray, phrases, lhs, phrase_counts):
    """The `phrase` rows (id, text, n_words, count, lhs) of the ids ``used``, in id order, their
    texts asked for TEXT_BLOCK ids at a time when ``phrases`` and ``lhs`` are functions of
    the ids: the rows are the same as from every text at once, and no more than a block
    of texts is held (a bio-multi database stores 2.4M phrases and 3.1M foreign ones; all
    their texts at once were 1.3 GB of Python strings and dicts). ``phrase_counts`` is an
    array by id, a mapping, or a function of a block's ids giving their counts in order
    (called after ``phrases`` with the same ids: the build reads a block's texts and
    counts from the same rows)."""
    for a in range(0, len(used), TEXT_BLOCK):
        ids = used[a:a + TEXT_BLOCK]
        texts = Texts(phrases(ids) if callable(phrases) else phrases, None, lhs(ids) if callable(lhs) else lhs)
        if callable(phrase_counts):
            counts = np.asarray(phrase_counts(ids))
        elif isinstance(phrase_counts, np.ndarray):
            counts = phrase_counts[ids]
        else:
            for i in ids.tolist():
                yield (i, *texts.phrase_row(i, phrase_counts))
            continue
        if counts.shape != ids.shape:
            raise ValueError(f"{counts.shape[0] if counts.ndim else 0} phrase counts for a block of {len(ids)} ids")
        # the same rows as phrase_row's, a column at a time (a bio build stores 448k phrases)
        keys = ids.tolist()
        text = [texts.phrases[i] for i in keys]
        labels = repeat("[X]") if texts.lhs is None else [texts.lhs[i] for i in keys]
        yield from zip(keys, text, [t.count(" ") + 1 for t in text], counts.astype(np.int64).tolist(), labels)


def foreign_rows(used_f: np.ndarray, foreign):
    """The `foreign_phrase` rows (id, text) in id order: every entry of a mapping ``foreign``,
    or the pivots ``used_f``, asked for TEXT_BLOCK ids at a time of a function ``foreign``."""
    if not callable(foreign):
        _check_foreign(used_f, foreign)
        yield from ((int(f), foreign[f]) for f in sorted(foreign))
        return
    for a in range(0, len(used_f), TEXT_BLOCK):
        ids = used_f[a:a + TEXT_BLOCK]
        texts = foreign(ids)
        _check_foreign(ids, texts)
        yield from ((f, texts[f]) for f in ids.tolist())


#: Phrase ids whose texts are built at a time by the database write (Survey.phrase_rows).
TEXT_BLOCK = 250_000


def _check_foreign(used_f: np.ndarray, foreign) -> None:
    missing = [f for f in used_f.tolist() if f not in foreign]
    if missing:
        raise ValueError(f"{len(missing)} pivot id(s) have no text in `foreign`, e.g. {missing[:5]}")


def survey_chunks(chunks, stored: list[dict], learned: list[dict]) -> Survey:
    """Pass 1 over ``chunks()``: shapes, key order, the phrases and pivots used, each model's
    pair count; ValueError for a chunk out of order or of the wrong shape. Each chunk's piece
    is folded in as it comes (:class:`SurveyFold`): one chunk's ids are held, never every one's."""
    fold = SurveyFold(len(stored))
    for j, c in enumerate(chunks()):
        fold.add(j, survey_chunk(c, len(stored)))
    return fold.finish(learned)


def survey_chunk(c, n_stored: int) -> dict:
    """What the survey finds in one chunk (checked alone; :class:`SurveyFold` checks the chunks
    against each other): its rows, pivot columns, each model's pairs, the distinct English and
    foreign ids it uses (ascending arrays: at most a chunk's values, whatever the vocabulary's
    size), its first and last key, which PPDB 2.0 fields it carries. A task of the write of a
    database in parts (pivot.store.parts), one per chunk."""
    # Integer arrays keep their dtype (the pipeline's are int32): a copy per column would cost
    # hundreds of MB at a real build's size, and .tolist() gives Python ints either way.
    e1, e2, n_piv, piv = (_integers(c.e1), _integers(c.e2), _integers(c.n_pivots), _integers(c.pivots))
    sc = c.p
    m = len(e1)
    if piv.ndim == 1 and m == 0:
        piv = piv.reshape(0, 3)
    if np.shape(sc) != (m, n_stored):
        raise ValueError(f"scores has shape {np.shape(sc)}, expected ({m}, {n_stored})")
    if len(e2) != m or len(n_piv) != m or piv.ndim != 2 or len(piv) != m:
        raise ValueError(f"e2 {e2.shape}, n_pivots {n_piv.shape} and pivots {piv.shape} must have {m} rows")
    have = tuple(getattr(c, f, None) is not None for f in ("form", "ppdb2", "rel"))
    for name in ("form", "ppdb2"):
        a = getattr(c, name, None)
        if a is not None and np.shape(a) != (m,):
            raise ValueError(f"{name} has shape {np.shape(a)}, expected ({m},)")
    if getattr(c, "rel", None) is not None and np.shape(c.rel) != (m, len(RELATION_COLUMNS)):
        raise ValueError(f"rel has shape {np.shape(c.rel)}, expected ({m}, {len(RELATION_COLUMNS)})")
    # each model's pairs, a block of rows at a time (0 and NaN: the model does not propose the
    # pair): the scores as float64 all at once were 64 bytes a row of a chunk
    n_pairs = np.zeros(n_stored, np.int64)
    for a in range(0, m, BLOCK_ROWS):
        n_pairs += (np.asarray(sc[a:a + BLOCK_ROWS], dtype=np.float64) > 0).sum(axis=0)
    # the ids as int32 when they fit (the pipeline's are): a piece goes back from its task to the
    # build's process, half the bytes of int64 on the way and while it waits to be folded in
    used, used_f = (_narrow(_distinct(a, b)) for a, b in ((e1, e2), (piv, np.zeros(0, np.int64))))
    piece = {"n": m, "n_piv_cols": piv.shape[1] if m else None, "have": have, "n_pairs": n_pairs,
             "used": used, "used_f": used_f, "first": None, "last": None}
    if m:
        key = e1.astype(np.int64) << 32 | e2.astype(np.int64)
        if (np.diff(key) < 0).any():
            raise ValueError("pair chunks must be sorted by (e1, e2), each after the previous one")
        piece.update(first=int(key[0]), last=int(key[-1]))
    return piece


class SurveyFold:
    """The Survey of chunks whose :func:`survey_chunk` pieces are added one at a time (in any
    order: a task's piece as it comes back), each dropped once added: their ids are set in two
    bit masks (an eighth of a byte a vocabulary id) and the rest is a few numbers a chunk.
    :meth:`finish` checks the chunks against each other in chunk order: every chunk after the
    previous one in key order, of the same pivot width and fields."""

    def __init__(self, n_stored: int):
        self.n_stored = n_stored
        self.pieces: dict[int, dict] = {}   # chunk -> its piece without the ids
        self.used, self.used_f = np.zeros(0, np.uint8), np.zeros(0, np.uint8)

    def add(self, j: int, piece: dict) -> None:
        self.used = _mark(self.used, np.asarray(piece["used"], np.int64))
        self.used_f = _mark(self.used_f, np.asarray(piece["used_f"], np.int64))
        self.pieces[j] = {k: v for k, v in piece.items() if k not in ("used", "used_f")}

    def finish(self, learned: list[dict]) -> Survey:
        n, n_piv_cols, given, last = 0, None, None, None
        n_pairs = np.zeros(self.n_stored, np.int64)
        pieces = [self.pieces[j] for j in sorted(self.pieces)]
        for p in pieces:
            if p["n_piv_cols"] is not None:
                if n_piv_cols is None:
                    n_piv_cols = p["n_piv_cols"]
                elif p["n_piv_cols"] != n_piv_cols:
                    raise ValueError(f"pivots have {p['n_piv_cols']} columns in one chunk and {n_piv_cols} in another")
            if given is not None and p["have"] != given:
                raise ValueError("every chunk or none must carry form, ppdb2 and rel")
            given = p["have"]
            if p["first"] is not None:
                if last is not None and p["first"] < last:
                    raise ValueError("pair chunks must be sorted by (e1, e2), each after the previous one")
                last = p["last"]
            n += p["n"]
            n_pairs += p["n_pairs"]
        if learned and not (given or (False, False, False))[1]:
            raise ValueError(f"model {learned[0]['name']!r} is learned: the chunks must carry its ppdb2 scores")
        return Survey(n, 3 if n_piv_cols is None else n_piv_cols, n_pairs.tolist(), IdSet(self.used),
                      IdSet(self.used_f), [p["n"] for p in pieces],
                      [None if p["first"] is None else (p["first"] >> 32, p["last"] >> 32) for p in pieces])


def begin_load(conn: sqlite3.Connection, n_stored: int, n_piv_cols: int) -> None:
    """The schema and the pragmas of a bulk load into a new private file, in one transaction."""
    # The file is private until renamed: durability is unnecessary while writing. The cache
    # holds the b-tree's interior pages (a few MB at bio-multi's size) and a block's dirty
    # leaves (~25 MB for 250k rows) during the load; 256 MiB used to fill with pages the
    # appends never read again (+0.22 GiB of the build's process on bio) for the same bytes.
    conn.execute("PRAGMA journal_mode=OFF")
    conn.execute("PRAGMA synchronous=OFF")
    conn.execute("PRAGMA cache_size=-65536")  # KiB: 64 MiB
    # Temporary data in files: the sort of CREATE UNIQUE INDEX phrase_text (finish_load) keeps
    # up to the cache's size of records in memory and writes the rest to temporary files, where
    # temp_store=MEMORY kept all of them (every stored phrase's text: +80 MB of the build's
    # process at bio-multi's 2.4M phrases, GBs at the target), and a part's id tables
    # (pivot.store.parts) stay on disk too. Only where temporary data lives changes: the same
    # sorted records make the same index, the same bytes.
    conn.execute("PRAGMA temp_store=FILE")
    conn.executescript(schema_sql(n_stored, n_piv_cols))
    conn.execute("BEGIN")  # one transaction for the whole load


#: Rows per INSERT statement of a load: a statement of many rows is bound and stepped once, where
#: one of one row pays the statement's dispatch, reset and step set-up per row. 128 rows of the
#: pair table's 26 columns are 3,328 parameters: where SQLite allows fewer (its limit before 3.32
#: was 999) a statement holds as many rows as fit (:func:`_statement_rows`). The rows go in the
#: same order either way: the file is the same bytes.
ROWS_PER_STATEMENT = 128

#: Statements whose values are made at a time by :func:`_insert_columns` (rows: 256 x 128): the
#: Python values of a run only are held, never a batch's.
RUN_STATEMENTS = 256


def pair_columns(n_piv_cols: int, n_stored: int) -> list[str]:
    """The column names of `pair`, in table order."""
    return (["e1", "e2", "n_pivots", *(f"pivot{j + 1}" for j in range(n_piv_cols)),
             *(f"p_{j}" for j in range(n_stored)), "form", "ppdb2", *RELATION_COLUMNS, "relation"])


def _or_null(values: np.ndarray, present: np.ndarray) -> np.ndarray:
    """values where ``present``, else NaN: a float column SQLite stores with NULL where NaN.

    SQLite stores a bound NaN as NULL (sqlite3_bind_double), and Python's sqlite3 binds a float
    directly, where every None goes through its adaptation lookup first (a tuple, a dict probe and
    two failed attribute lookups: 4-5 times a number's cost). An integer column given this way
    (a pivot id) gets its integer back: INTEGER affinity stores a float with no fractional part
    as that integer (ids below 2^53 are exact in a double), the same record as an int bound.
    """
    return np.where(present, values, np.nan)


def insert_pairs(conn: sqlite3.Connection, c, n_piv_cols: int, n_stored: int, batch_rows: int = 200_000,
                 packed: bool = False) -> None:
    """Insert one chunk's rows into `pair` (in its key order), `batch_rows` at a time; ``packed``:
    into a scratch file's pair table (:func:`_scratch_sql`), its integers packed."""
    e1, e2, n_piv, piv = (_integers(c.e1), _integers(c.e2), _integers(c.n_pivots), _integers(c.pivots))
    scores = np.asarray(c.p, dtype=np.float64)
    m = len(e1)
    if piv.ndim == 1 and m == 0:
        piv = piv.reshape(0, n_piv_cols)
    form = np.zeros(m, np.int64) if getattr(c, "form", None) is None else _integers(c.form)
    score = np.zeros(m) if getattr(c, "ppdb2", None) is None else np.asarray(c.ppdb2, np.float64)
    if getattr(c, "rel", None) is None:
        unclassified = np.zeros(len(RELATION_COLUMNS), dtype=np.int64)
        unclassified[UNCLASSIFIED] = 1000
        rel = np.broadcast_to(unclassified, (m, len(RELATION_COLUMNS)))
    else:
        rel = _integers(c.rel)
    # the argmax relation, ties to the lower index (np.argmax returns the first maximum)
    relation = rel.argmax(axis=1) if m else np.zeros(0, np.int64)
    if packed:
        _check_packable(e1, e2, n_piv, piv, form, rel)
    for start in range(0, m, batch_rows):
        sl = slice(start, start + batch_rows)
        sc = scores[sl]
        # a score of 0 or NaN: the model does not propose the pair (NULL)
        floats = [_or_null(sc[:, j], sc[:, j] > 0) for j in range(n_stored)] + [score[sl]]
        if packed:
            columns = _packed(e1[sl], e2[sl], n_piv[sl], piv[sl], form[sl], rel[sl], relation[sl]) + floats
        else:
            pv = piv[sl]
            columns = [e1[sl], e2[sl], n_piv[sl], *(_or_null(pv[:, j], pv[:, j] >= 0) for j in range(n_piv_cols)),
                       *floats[:n_stored], form[sl], floats[-1], *(rel[sl, j] for j in range(len(RELATION_COLUMNS))),
                       relation[sl]]
        _insert_columns(conn, "pair", columns)


def _statement_rows(conn, n_columns: int) -> int:
    """Rows per INSERT statement of n_columns values each: ROWS_PER_STATEMENT, or as many as
    this SQLite's limit on a statement's parameters allows."""
    return max(1, min(ROWS_PER_STATEMENT, conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // n_columns))


def _statements(conn, table: str, n_columns: int) -> tuple[int, str, str]:
    """(rows a statement, the INSERT of that many rows, the INSERT of one row) of ``table``."""
    per = _statement_rows(conn, n_columns)
    one = f"({', '.join('?' * n_columns)})"
    return per, f"INSERT INTO {table} VALUES {', '.join([one] * per)}", f"INSERT INTO {table} VALUES {one}"


def _insert_columns(conn, table: str, columns: list) -> None:
    """Rows given as columns (1-D arrays of one length: integers, or floats with NaN for NULL,
    see :func:`_or_null`), :func:`_statement_rows` to an INSERT statement.

    A run of statements' values is made in one step: the columns assigned into an object array
    of the run's rows (numpy makes each a Python int or float), reshaped to a statement a row
    and listed, rather than rows zipped into tuples and chained. With NaN for NULL, on bio's
    first 1M pairs: a scratch row 3.4 -> 1.5 us, a row of `pair` 5.1 -> 2.7 us (CPU)."""
    n_columns = len(columns)
    m = len(columns[0]) if columns else 0
    per, many, single = _statements(conn, table, n_columns)
    run = per * RUN_STATEMENTS
    for a in range(0, m, run):
        b = min(a + run, m)
        values = np.empty((b - a, n_columns), dtype=object)
        for j, col in enumerate(columns):
            values[:, j] = col[a:b]
        full = (b - a) - (b - a) % per   # a run is whole statements but for the table's last rows
        conn.executemany(many, values[:full].reshape(-1, per * n_columns).tolist())
        if full < b - a:
            conn.executemany(single, values[full:].tolist())


def _insert_flat(conn, table: str, n_columns: int, values) -> None:
    """Rows of n_columns values each, one after the other in the iterable ``values``,
    :func:`_statement_rows` to an INSERT statement (the last rows that fill no statement one by
    one). The values are taken a run of statements at a time: the rows are never all held as
    Python objects at once (a bio database's foreign phrases alone are millions of values)."""
    per, many, single = _statements(conn, table, n_columns)
    width = n_columns * per
    it = iter(values)
    while True:
        flat = list(itertools.islice(it, width * RUN_STATEMENTS))
        full = len(flat) - len(flat) % width
        conn.executemany(many, (flat[i:i + width] for i in range(0, full, width)))
        if len(flat) < width * RUN_STATEMENTS:   # the last run: its rows that fill no statement
            conn.executemany(single, (flat[i:i + n_columns] for i in range(full, len(flat), n_columns)))
            return


# A scratch file's integers, packed: a bound value costs more than the rows' bit arithmetic, so
# the 19 integer columns of a row (3 pivots) go as 5 values, unpacked by the copy's SELECT:
#   key   = e1 << 32 | e2                                      (ids below 2^31)
#   piv_i = (pivot_2i + 1) << 32 | (pivot_2i+1 + 1)           (0 for none, SQL NULL; a last odd one alone)
#   misc  = n_pivots << 8 | form << 3 | relation               (form below 32, relation below 8)
#   rel   = sum of rel_j << 10 j                               (per mille, below 1024)
_ID_LIMIT = 1 << 31


def _check_packable(e1, e2, n_piv, piv, form, rel) -> None:
    bad = []
    for name, a, lo, hi in (("e1", e1, 0, _ID_LIMIT), ("e2", e2, 0, _ID_LIMIT), ("pivots", piv, -1, _ID_LIMIT - 1),
                            ("n_pivots", n_piv, 0, 1 << 54), ("form", form, 0, 32), ("rel", rel, 0, 1024)):
        if len(a) and (int(a.min()) < lo or int(a.max()) >= hi):
            bad.append(f"{name} outside [{lo}, {hi})")
    if bad:
        raise ValueError(f"pair values the scratch files cannot pack: {', '.join(bad)}")


def _packed(e1, e2, n_piv, piv, form, rel, relation) -> list:
    i64 = np.int64
    columns = [e1.astype(i64) << 32 | e2.astype(i64)]
    p1 = piv.astype(i64) + 1
    for j in range(0, p1.shape[1], 2):
        columns.append(p1[:, j] << 32 | p1[:, j + 1] if j + 1 < p1.shape[1] else p1[:, j])
    columns.append(n_piv.astype(i64) << 8 | form.astype(i64) << 3 | relation.astype(i64))
    r = rel.astype(i64)
    columns.append(np.bitwise_or.reduce([r[:, j] << (10 * j) for j in range(r.shape[1])], axis=0)
                   if len(r) else np.zeros(0, i64))
    return columns


def _unpacked_sql(n_piv_cols: int, n_stored: int) -> str:
    """The SELECT list that gives `pair`'s columns, in order, from a scratch file's packed row."""
    pivots = []
    for j in range(0, n_piv_cols, 2):
        if j + 1 < n_piv_cols:
            pivots += [f"NULLIF(piv{j} >> 32, 0) - 1", f"NULLIF(piv{j} & 4294967295, 0) - 1"]
        else:
            pivots.append(f"NULLIF(piv{j}, 0) - 1")
    return ", ".join(["key >> 32", "key & 4294967295", "misc >> 8", *pivots,
                      *(f"p_{j}" for j in range(n_stored)), "(misc >> 3) & 31", "ppdb2",
                      *(f"(rel >> {10 * j}) & 1023" for j in range(len(RELATION_COLUMNS))), "misc & 7"])


def finish_load(conn: sqlite3.Connection, models: list[dict], n_pairs: list, n: int, meta: dict) -> None:
    """The model and meta rows, the phrase text index, COMMIT and ANALYZE of a bulk load.

    ``n_pairs``: each stored model's pair count, ``n``: the pairs (the learned model's count).
    """
    stored, learned = check_models(models)
    # A model's pair count is stored so that n_pairs() need not scan the table; a combined
    # model proposes exactly its base model's pairs.
    column_of = {m["name"]: j for j, m in enumerate(stored)}
    for model_id, spec in enumerate(models):
        col, count = model_column(spec, column_of, n_pairs, n)
        conn.execute(
            "INSERT INTO model VALUES (?, ?, ?, ?, ?, ?, ?)",
            (model_id, spec["name"], spec["kind"], spec.get("description", ""),
             json.dumps(spec.get("params", {}), sort_keys=True), col, int(count)),
        )
    meta = full_meta(models, meta)
    conn.executemany("INSERT INTO meta VALUES (?, ?)",
                     ((k, json.dumps(v, sort_keys=True)) for k, v in meta.items()))
    # Lookups by text go through this index; pairs are clustered by their key. Built after
    # the load: one sort instead of an index update per row.
    conn.execute("CREATE UNIQUE INDEX phrase_text ON phrase(text)")
    conn.execute("COMMIT")
    conn.execute("ANALYZE main")  # this file's tables only, never an attached one's


def model_column(spec: dict, column_of: dict, n_pairs: list, n: int) -> tuple[str | None, int]:
    """(score column, pair count) of a model: a combined model has no column and its base's count."""
    if spec["kind"] == "combined":
        return None, n_pairs[column_of[spec["params"]["base"]]]
    if spec["kind"] == "learned":
        return "ppdb2", n
    return f"p_{column_of[spec['name']]}", n_pairs[column_of[spec["name"]]]


def full_meta(models: list[dict], meta: dict) -> dict:
    """The meta rows a database stores: the schema version, the default model, then `meta`."""
    learned = [m for m in models if m["kind"] == "learned"]
    return {"schema_version": SCHEMA_VERSION,
            "default_model": learned[0]["name"] if learned else (models[0]["name"] if models else None), **meta}
