"""PPDB 2.0 export: a model's pairs as `LHS ||| e1 ||| e2 ||| features ||| alignment ||| relation`.

One line builder, ``pivot._export.format_ppdb``, writes the lines of `pivot export` and of
`pivot lookup --format ppdb`. A line (wrapped here; one line in the file)::

    [NN] ||| kidney ||| renal ||| PPDB2.0Score=3.91 -logp(e2|e1)=1.69315 -logp(e1|e2)=1.59 Equivalence=0.710
    ForwardEntailment=0.080 ReverseEntailment=0.050 Exclusion=0.010 OtherRelated=0.120 Independent=0.030
    NumPivots=12 Form=none ||| 0-0 ||| Equivalence

* LHS: e1's stored label (``phrase.lhs``), or [X] (lhs="x"). nlpaug reads it as the part of
  speech of the word it replaces: [X] maps to none, and a file of [X] lines substitutes nothing.
* PPDB2.0Score: the learned score (left out where the database has none).
* -logp(e2|e1), -logp(e1|e2): -ln p (natural logarithm, as PPDB) of the line's probability
  model: the exported model itself, a combined model's base, General for the learned model.
  Either is left out when that model gives the pair (or its reverse) nothing.
* Equivalence= ... Independent=: the relation probabilities, the stored per-mille values as
  exact three-decimal fractions (left out where the database's relations are unclassified).
* NumPivots: the foreign phrases the pair pivots through.
* Form: the pair's well-formedness flags (``edge-punct``, ``function-only``, ``dangling``,
  ``inflection``, ``containment``, comma-separated) or ``none``. The default export holds no
  pair with one of the first three (HIDDEN_FORMS); ``show_all`` writes them too.
* ModelScore: a combined model's logistic score, by which it ranks (combined models only).
* alignment: ``0-0`` for two single words, empty for phrases (pivoting aligns no words inside
  a phrase pair); relation: the most probable relation (the stored argmax).

Which pairs: those the model proposes, minus the HIDDEN_FORMS kinds (unless ``show_all``), cut
to a size (``ppdb2 >= meta ppdb2.sizes[size]``: nested tiers S ⊂ M ⊂ L ⊂ XL ⊂ XXL ⊂ XXXL, by
the learned score), to the relations asked for (by the last field) and, with ``agree``, to
pairs whose two labels are of one broad class (noun, verb, adjective, adverb, preposition).
Lines are grouped by e1 in id order, best first under the model (ties by e2 id): equal
databases give equal bytes.

Speed (the issue's target: 500k lines a second): the pair table is read by a C scan straight
into arrays (``pivot._export.Table``), with the filters in its SQL (SQLite skips a filtered row
before reading its other columns), and no Python object is made per pair. p(e1|e2) comes from
the reverse pair's row, found by ``find_rows`` in the (e1, e2, p) columns of the rows it can
come from: the probability model's, and without ``show_all`` only the visible ones (the
well-formedness flags are symmetric in the two phrases, :func:`_reverse_where`).

* Without a size or relation cut (the default export, ``--all``, ``--agree``, ``--model X``),
  those rows are the rows written: the table is read once, from the file's b-tree pages by
  ``pivot._export.scan_pair_file`` in a thread (the phrases meanwhile through SQLite), and the
  lines are formatted in chunks of whole e1 runs in two threads while this one writes them in
  order (the scans and the formatting run without the GIL). On bio's default export (1.55M of
  4.48M pairs) the second scan of the table this saves was 1.6 of the export's 5.5 s of CPU,
  and the file read takes 0.5 s of CPU where SQLite's took 1.4 (a WAL database, whose pages
  may sit in its -wal file, is read through SQLite, in two halves by e1 in two threads).
* With a cut, from the file: the same scan, and the rows of the cut written (the reverse rows
  are the scan's). Through SQLite (a WAL database), the reverse rows are read first (in two
  halves, at once), then the written rows one chunk of whole e1 runs at a time, the next two
  chunks in two threads, each on its own connection, while this one is formatted.
"""
from __future__ import annotations

import collections
import contextlib
import io
import os

import numpy as np

from pivot.errors import InputError
from pivot.store.write import HIDDEN_FORMS, RELATION_COLUMNS, RELATION_NAMES

#: The kind of the learned model (PPDB2.0Score), scored by the `ppdb2` column of every pair.
LEARNED = "learned"

#: PPDB 2.0's sizes, smallest first; each holds the ones before it.
SIZES = ("s", "m", "l", "xl", "xxl", "xxxl")
#: Pairs read per chunk (whole e1 runs) by an export with a size or relation cut through SQLite
#: (a WAL database): bounds its memory besides the (e1, e2, p) columns of the probability model.
#: (In one scan the export holds the packed columns of every row without a cut, 40 bytes a
#: pair, and formats FORMAT_ROWS at a time.)
CHUNK_ROWS = 1 << 18
#: Rows per formatting task of an export read in one scan (whole e1 runs; about 8 MB of lines):
#: the two formatting threads hold a few tasks' lines at a time.
FORMAT_ROWS = 1 << 15
#: How much of the database file the export maps into memory (SQLite caps it at its compile-time
#: maximum, 2 GiB by default): pages are read from the page cache through the map instead of
#: copied by a read() each time they are visited (13% of the export's time without it).
MMAP_BYTES = 1 << 40


def parse_relations(text: str) -> tuple[int, ...]:
    """"Equivalence,ForwardEntailment" -> their indices in RELATION_NAMES (names case-insensitive);
    an unknown or empty name is an InputError that lists the relations."""
    by_name = {r.lower(): i for i, r in enumerate(RELATION_NAMES)}
    out = set()
    for name in (n.strip() for n in text.split(",")):
        if name.lower() not in by_name:
            raise InputError(f"unknown relation {name!r} in --relation; the relations are {', '.join(RELATION_NAMES)}")
        out.add(by_name[name.lower()])
    return tuple(sorted(out))


def size_cut(db, size: str) -> float:
    """The learned score a pair needs to be in `size` (meta ppdb2.sizes)."""
    if size not in SIZES:
        raise InputError(f"unknown size {size!r}; the sizes are {', '.join(SIZES)}")
    sizes = (db.meta.get("ppdb2") or {}).get("sizes") or {}
    if size not in sizes:
        raise InputError(f"this database records no learned-score cut for size {size!r} (meta ppdb2.sizes): "
                         "was its score learned?", db.path)
    return float(sizes[size])


def probability_model(db, name: str) -> str:
    """The model whose p(e2|e1) a line of `name` reports: itself for a pivot model, the base of
    a combined model, and for the learned model the first stored model (General)."""
    info = db.model_info(name)
    if info["kind"] == "combined":
        return info["params"]["base"]
    if info["kind"] == LEARNED:
        return db.stored_models[0]
    return name


@contextlib.contextmanager
def _read_checked(path):
    """The kernel's checks of what it reads (a NULL where the schema forbids one, a relation
    index outside 0..5, a per-mille value above 1000, a missing column ...) as one line about the
    database: the file is damaged, or not a pivot database."""
    from pivot.store.db import DAMAGED

    try:
        yield
    except ValueError as exc:
        raise InputError(f"{DAMAGED}: {exc}", path) from None


def _offsets_by_id(ids: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Offsets (max id + 2) into a buffer holding the texts of ascending `ids` back to back, so
    that id i's text is buffer[out[i]:out[i + 1]] (empty for an id without a row)."""
    size = int(ids[-1]) + 1 if len(ids) else 0
    lengths = np.zeros(size, np.int64)
    lengths[ids] = np.diff(offsets)
    out = np.zeros(size + 1, np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


def _in_order(pieces, order: np.ndarray, rows_at_once: int = 1 << 20) -> tuple[bytes, np.ndarray]:
    """(buffer, offsets) of the strings of ``pieces`` (each a (buffer, offsets) of back-to-back
    strings) concatenated, taken in ``order``: a byte gather, ``rows_at_once`` strings at a time
    (its index is 8 bytes per byte of text)."""
    bufs = [np.frombuffer(b, np.uint8) for b, _ in pieces]
    base = np.cumsum([0, *(len(b) for b in bufs[:-1])])
    starts = np.concatenate([np.asarray(off[:-1], np.int64) + b0 for (_, off), b0 in zip(pieces, base)])
    lengths = np.concatenate([np.diff(np.asarray(off, np.int64)) for _, off in pieces])
    buf = np.concatenate(bufs)
    s, n = starts[order], lengths[order]
    out_off = np.zeros(len(n) + 1, np.int64)
    np.cumsum(n, out=out_off[1:])
    out = np.empty(int(out_off[-1]), np.uint8)
    for a in range(0, len(n), rows_at_once):
        b = min(a + rows_at_once, len(n))
        lo, hi = int(out_off[a]), int(out_off[b])
        out[lo:hi] = buf[np.repeat(s[a:b] - out_off[a:b], n[a:b]) + np.arange(lo, hi)]
    return out.tobytes(), out_off


class _Phrases:
    """Phrase texts and LHS labels, one buffer each, with offsets by phrase id."""

    def __init__(self, text: bytes, text_off: np.ndarray, lhs: bytes, lhs_off: np.ndarray):
        self.text, self.text_off, self.lhs, self.lhs_off = text, text_off, lhs, lhs_off

    @classmethod
    def read(cls, table) -> _Phrases:
        """Every phrase of the database (one scan)."""
        ids, (text, off), (lhs, lhs_off) = table.scan("SELECT id, text, lhs FROM phrase ORDER BY id", (), "Itt")
        return cls(text, _offsets_by_id(ids, off), lhs, _offsets_by_id(ids, lhs_off))

    @classmethod
    def read_shards(cls, tables) -> _Phrases:
        """Every phrase of the shards of a database in parts' phrase index (one scan of each),
        the texts put back in id order (each shard holds ascending ids of its own)."""
        if len(tables) == 1:
            return cls.read(tables[0])
        scans = [t.scan("SELECT id, text, lhs FROM phrase ORDER BY id", (), "Itt") for t in tables]
        ids = np.concatenate([s[0] for s in scans])
        order = np.argsort(ids, kind="stable")
        text, text_off = _in_order([s[1] for s in scans], order)
        lhs, lhs_off = _in_order([s[2] for s in scans], order)
        ids = ids[order]
        return cls(text, _offsets_by_id(ids, text_off), lhs, _offsets_by_id(ids, lhs_off))

    @property
    def n_ids(self) -> int:
        return len(self.text_off) - 1

    def label_classes(self) -> np.ndarray:
        """Per phrase id, a code of its label's broad class (noun, verb, adjective, adverb,
        preposition; any other label its own class): what `agree` compares."""
        from pivot.store.labels import label_class

        codes: dict[str, int] = {}
        bounds = self.lhs_off.tolist()
        return np.array([codes.setdefault(label_class(self.lhs[a:b].decode()), len(codes)) if b > a else -1
                         for a, b in zip(bounds[:-1], bounds[1:])], np.int64)


class _LineWriter:
    """Formats rows with the kernel into reused buffers: :meth:`pieces` yields the filled parts,
    :meth:`rows` hands them to `write`. Buffers come from a free list and go back to it once
    written (:meth:`emit`), so that formatting threads and the writing thread share a few."""

    def __init__(self, write, phrases: _Phrases, *, lhs_x: bool, with_score: bool, with_relations: bool,
                 buffer_bytes: int = 1 << 23):
        self.write, self.phrases, self.buffer_bytes = write, phrases, buffer_bytes
        self.free: list[bytearray] = []   # list.pop / list.append: atomic under the GIL
        self.flags = (lhs_x, with_score, with_relations)

    def pieces(self, e1, e2, ppdb2, p, p_rev, rel, relation, n_pivots, form, model_score, order):
        """(buffer, size) of the lines of rows order[0], order[1], ... (order empty: every row
        in turn), one filled buffer at a time; each buffer must be given back by :meth:`emit`."""
        from pivot._native import _export

        ph, r, n = self.phrases, 0, len(e1)
        while r < n:
            try:
                buffer = self.free.pop()
            except IndexError:
                buffer = bytearray(self.buffer_bytes)
            nxt, size = _export.format_ppdb(buffer, r, e1, e2, ph.text, ph.text_off, ph.lhs, ph.lhs_off, ppdb2,
                                            p, p_rev, rel, relation, n_pivots, form, model_score, order,
                                            *self.flags)
            if nxt == r:  # not even one line fits: a longer buffer
                buffer.extend(bytes(len(buffer)))
                self.free.append(buffer)
                continue
            yield buffer, size
            r = nxt

    def emit(self, pieces) -> None:
        """Write the pieces in order, each buffer back to the free list after its write."""
        for buffer, size in pieces:
            with memoryview(buffer) as view, view[:size] as part:
                self.write(part)
            self.free.append(buffer)

    def rows(self, *columns) -> None:
        """Write the lines of :meth:`pieces` as they are formatted (one buffer, reused)."""
        self.emit(self.pieces(*columns))


class _Plan:
    """What a model's lines read: the probability column, the pair columns (and their scan
    kinds), the combined model's fit, and whether the score and relations are real."""

    def __init__(self, db, model: str | None, lhs: str):
        self.name = model or db.default_model
        info = db.model_info(self.name)
        if lhs not in ("stored", "x"):
            raise InputError(f"unknown LHS choice {lhs!r} (stored or x)")
        self.kind = info["kind"]
        self.pcol = db.model_info(probability_model(db, self.name))["column"]
        self.learned = bool((db.meta.get("ppdb2") or {}).get("learned"))
        self.classified = bool((db.meta.get("relations") or {}).get("classified"))
        self.lhs_x = lhs == "x"
        self.fit, self.other_col = None, None
        # What a line reads of its pair, packed by SQLite into five integers and floats: each
        # value handed over costs a C call, and the pass over the pairs is the export's largest
        # cost (13 separate columns: 3.7 s of CPU on bio's 4.48M pairs; packed: 3.1 s). The
        # fields fit: ids < 2^31, n_pivots < 2^40, form < 2^16, relation < 2^8, and per-mille
        # values <= 1000 < 2^10 (the writer checks them; the kernel checks what it unpacks).
        self.columns = ["e1 << 32 | e2", self.pcol, "ppdb2", "n_pivots | (form << 40) | (relation << 56)",
                        " | ".join(f"({c} << {10 * j})" for j, c in enumerate(RELATION_COLUMNS))]
        if self.kind == "combined":
            from pivot.store.combined import Combination

            self.fit = Combination.from_meta(info["params"]["fit"])
            self.other_col = db.model_info(info["params"]["other"])["column"]
            self.columns.append(self.other_col)
        # I, D: columns the schema declares NOT NULL, read without asking each value's type.
        self.kinds = "IdDII" + ("d" if self.fit is not None else "")
        self.uri = db.path.resolve().as_uri() + "?mode=ro"

    def unpack(self, cols) -> dict:
        """The scanned columns as arrays: e1, e2, p, ppdb2, n_pivots, form, relation, rel (n x 6)
        and other (a combined model's other p, else None)."""
        key, p, ppdb2, misc, packed = cols[:5]
        return {"e1": key >> 32, "e2": key & 0xFFFFFFFF, "p": p, "ppdb2": ppdb2, "n_pivots": misc & (1 << 40) - 1,
                "form": misc >> 40 & 0xFFFF, "relation": misc >> 56,
                "rel": np.stack([packed >> 10 * j & 1023 for j in range(len(RELATION_COLUMNS))], axis=1),
                "other": cols[5] if self.fit is not None else None}

    def writer(self, write, phrases: _Phrases, buffer_bytes: int = 1 << 23) -> _LineWriter:
        return _LineWriter(write, phrases, lhs_x=self.lhs_x, with_score=self.learned,
                           with_relations=self.classified, buffer_bytes=buffer_bytes)

    def line_columns(self, rows: dict, p_rev) -> tuple:
        """The arguments of :meth:`_LineWriter.pieces` for rows (unpacked): each e1 run best
        first under the model, ties by e2."""
        from pivot._native import _export

        e1, p, ppdb2 = rows["e1"], rows["p"], rows["ppdb2"]
        model_score = np.zeros(0)
        if self.kind == LEARNED:
            score = ppdb2
        elif self.kind == "combined":
            score = model_score = self.fit.predict(p, np.nan_to_num(rows["other"]))
        else:
            score = p
        order = _export.order_runs(e1, np.ascontiguousarray(score, dtype=np.float64))
        return (e1, rows["e2"], ppdb2, p, p_rev, rows["rel"], rows["relation"], rows["n_pivots"], rows["form"],
                model_score, order)

    def write_rows(self, writer: _LineWriter, rows: dict, p_rev) -> int:
        """Order rows (unpacked) and write their lines. Returns how many."""
        writer.rows(*self.line_columns(rows, p_rev))
        return len(rows["e1"])


def _chunk_lines(cols, plan, writer, classes, reverse):
    """One chunk of pair columns as (pieces of its lines (lazy), lines, pairs --agree removed)."""
    from pivot._native import _export

    disagree = 0
    if classes is not None:
        key = cols[0]
        ok = classes[key >> 32] == classes[key & 0xFFFFFFFF]
        disagree = int((~ok).sum())
        cols = [c[ok] for c in cols]
    if not len(cols[0]):
        return (), 0, disagree
    ptr, e2_all, p_all = reverse
    rows = plan.unpack(cols)
    rev = _export.find_rows(ptr, e2_all, rows["e2"], rows["e1"])
    p_rev = np.where(rev >= 0, p_all[np.maximum(rev, 0)], np.nan)
    return writer.pieces(*plan.line_columns(rows, p_rev)), len(cols[0]), disagree


def _write_chunks(chunks, plan, writer, classes, reverse, counts: dict, pool=None, ahead: int = 4) -> None:
    """Write the export's chunks of pair columns in order. classes: None, or each phrase's broad
    label class (--agree keeps the pairs whose two classes are equal; the key packs e1 << 32 | e2).
    reverse: (row pointer by e1, e2 of every row, p of every row) of the probability model over
    the whole table, where each written pair finds its p(e1|e2) (NaN: no reverse row).

    pool: None, each chunk formatted as it is written; or an executor whose threads format up to
    `ahead` chunks (the kernels run without the GIL) while this thread writes them in order."""
    if pool is None:
        for cols in chunks:
            pieces, written, disagree = _chunk_lines(cols, plan, writer, classes, reverse)
            writer.emit(pieces)
            counts["written"] += written
            counts["disagree"] += disagree
        return

    def formatted(cols):
        pieces, written, disagree = _chunk_lines(cols, plan, writer, classes, reverse)
        return list(pieces), written, disagree

    pending = collections.deque()

    def drain_one():
        pieces, written, disagree = pending.popleft().result()
        writer.emit(pieces)
        counts["written"] += written
        counts["disagree"] += disagree

    for cols in chunks:
        pending.append(pool.submit(formatted, cols))
        if len(pending) >= ahead:
            drain_one()
    while pending:
        drain_one()


def export_ppdb(db, out, model: str | None = None, *, lhs: str = "stored", size: str | None = None,
                relations: tuple[int, ...] | None = None, show_all: bool = False, agree: bool = False,
                stats: dict | None = None, chunk_rows: int = CHUNK_ROWS, prefetch: bool = True,
                direct: bool = True) -> int:
    """Write `model`'s pairs (default: the database's default model) as PPDB 2.0 lines to `out`
    (a binary stream, or a text stream); returns the number of lines.

    lhs: "stored" (e1's label) or "x" ([X]); size: one of SIZES or None (every pair);
    relations: indices into RELATION_NAMES to keep (by the last field), None for all;
    show_all: keep the HIDDEN_FORMS kinds; agree: keep only pairs whose two labels are of one
    broad class. `stats`, if given, receives "written" and "disagree" (the pairs agree
    removed). prefetch: read the next chunks in two threads while this one is formatted (the
    same bytes either way). direct: read the pair table from the file's b-tree pages
    (:func:`_scan_file`: one scan, any cut applied after) rather than through SQLite (the same
    bytes either way; a WAL database is always read through SQLite).
    """
    from pivot._native import _export

    plan = _Plan(db, model, lhs)
    if relations is not None and not plan.classified:
        raise InputError("--relation: this database's relations were not classified (meta relations)", db.path)
    if agree and (db.meta.get("lhs") or {}).get("tagger", "stored") is None:
        # Every stored label is [X] (meta lhs): all pairs would "agree", and the filter would keep everything.
        raise InputError("--agree compares the phrases' labels, and this build stored none (every LHS is [X]; "
                         "meta lhs)", db.path)
    # The pairs to write, as SQL over one chunk's e1 range (?1, ?2): the model's own, minus the
    # filtered ones.
    where, params = ["e1 >= ?1", "e1 < ?2"], ()
    if plan.kind != LEARNED:
        where.append(f"{plan.pcol} IS NOT NULL")  # a combined model proposes its base model's pairs
    if not show_all:
        where.append(f"(form & {HIDDEN_FORMS}) = 0")
    if size is not None:
        where.append("ppdb2 >= ?3")
        params = (size_cut(db, size),)
    if relations is not None:
        where.append(f"relation IN ({', '.join(str(int(r)) for r in relations)})")
    sql = f"SELECT {', '.join(plan.columns)} FROM pair WHERE {' AND '.join(where)}"
    counts = dict(written=0, disagree=0)
    if db.manifest is not None:
        _export_parts(db, plan, sql, params, agree, show_all, counts, out, chunk_rows, prefetch)
        if stats is not None:
            stats.update(counts)
        return counts["written"]

    # With prefetch, two connections whose scans run in two threads, and a third on which this
    # thread reads the phrases meanwhile (an export in one scan).
    tables = [_export.Table(plan.uri) for _ in range(3 if prefetch else 1)]
    table = tables[0]
    # The file, opened before any read transaction and closed after the last one ends (POSIX:
    # closing any descriptor of a file drops every lock this process holds on it, SQLite's too).
    file = open(db.path, "rb") if direct else None
    mapped = None
    try:
        with _read_checked(db.path):
            for t in tables:
                t.scan(f"PRAGMA mmap_size = {MMAP_BYTES}", (), "I")
                t.scan("BEGIN", (), "")  # one read snapshot for every scan below
            # Phrase ids run 0..max: the halves' bounds, before the phrases are read. (This read
            # takes the transaction's shared lock: no writer can commit until COMMIT.)
            n_ids = int(table.scan("SELECT coalesce(max(id) + 1, 0) FROM phrase", (), "I")[0][0])
            mapped = _map_file(file) if file is not None else None
            if mapped is not None or (size is None and relations is None):
                # One scan of the rows without a cut (:func:`_write_one_scan`), the cut applied
                # after: from the file it costs less than the reverse rows' scan alone.
                if mapped is not None:
                    layout = _pair_layout(table, plan, mapped)
                    scan = lambda: _scan_file(mapped, layout, plan, show_all, n_ids)  # noqa: E731
                    cols, phrases = (_in_thread(scan, meanwhile=lambda: _Phrases.read(tables[-1])) if prefetch
                                     else (scan(), _Phrases.read(table)))
                else:
                    cols, phrases = _scan_halves(tables[:2], sql, plan.kinds, n_ids,
                                                 meanwhile=lambda: _Phrases.read(tables[-1]))
                if phrases.n_ids != n_ids:
                    raise ValueError(f"the phrase table changed while read ({n_ids} then {phrases.n_ids} ids)")
                classes = phrases.label_classes() if agree else None
                keep = None
                if size is not None or relations is not None:
                    # the SQL's cut: ppdb2 >= the size's score, relation (misc >> 56) among those asked
                    keep = np.ones(len(cols[0]), bool)
                    if size is not None:
                        keep &= cols[2] >= params[0]
                    if relations is not None:
                        keep &= np.isin(cols[3] >> 56, relations)
                _write_one_scan(cols, plan, plan.writer(_writer(out), phrases), classes, n_ids, counts,
                                min(chunk_rows, FORMAT_ROWS), prefetch, keep)
            else:
                phrases = _Phrases.read(table)
                classes = phrases.label_classes() if agree else None
                writer = plan.writer(_writer(out), phrases)
                # The probability model's pairs over the whole table, in key order: where every
                # pair's p(e1|e2) comes from (its reverse row), and the chunk boundaries.
                e1_all, e2_all, p_all = _scan_halves(tables[:2], f"SELECT e1, e2, {plan.pcol} FROM pair WHERE "
                                                     f"e1 >= ?1 AND e1 < ?2 AND {_reverse_where(plan, show_all)}",
                                                     "IID", phrases.n_ids)
                ptr = _export.row_pointer(e1_all, phrases.n_ids)
                bounds = _chunk_bounds(e1_all, phrases.n_ids, chunk_rows)
                # closing(): after an error below, the scan threads finish before their connections close.
                with contextlib.closing(_prefetched(tables[:2], sql, params, plan.kinds, bounds, prefetch)) as chunks:
                    _write_chunks(chunks, plan, writer, classes, (ptr, e2_all, p_all), counts)
            for t in tables:
                t.scan("COMMIT", (), "")
    finally:
        for t in tables:
            t.close()
        if mapped is not None:
            mapped.close()
        if file is not None:
            file.close()
    if stats is not None:
        stats.update(counts)
    return counts["written"]


def _map_file(file):
    """The database file mapped read-only, or None where its pages need not all be in it: a
    WAL database (file format bytes 18, 19 = 2) keeps committed pages in its -wal file until a
    checkpoint. In the rollback-journal modes (1, 1) the file is the database while a read
    transaction's shared lock keeps writers out."""
    import mmap

    head = os.pread(file.fileno(), 100, 0)
    if len(head) < 100 or head[18] != 1 or head[19] != 1:
        return None
    return mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)


def _pair_layout(table, plan, mapped) -> dict:
    """Where the pair table is in the file (read in the export's transaction): its root page, the
    record position of each column the export reads (a WITHOUT ROWID table's record is the
    columns of its primary-key index, PRAGMA index_xinfo), the page size and reserved bytes."""
    head = mapped[:100]
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    root = table.scan("SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = 'pair'", (), "I")[0]
    text, off = table.scan("SELECT x.name FROM pragma_index_list('pair') AS i, pragma_index_xinfo(i.name) AS x "
                           "WHERE i.origin = 'pk' ORDER BY x.seqno", (), "t")[0]
    names = [text[a:b].decode() for a, b in zip(off[:-1].tolist(), off[1:].tolist())]
    if len(root) != 1 or not names:
        raise ValueError("no WITHOUT ROWID pair table (sqlite_master, PRAGMA index_xinfo)")
    wanted = ["e1", "e2", plan.pcol, "ppdb2", "n_pivots", "form", "relation", *RELATION_COLUMNS]
    missing = [c for c in wanted + [plan.other_col] * (plan.other_col is not None) if c not in names]
    if missing:
        raise ValueError(f"the pair table's records have no column {', '.join(missing)}")
    cols = [names.index(c) for c in wanted] + [names.index(plan.other_col) if plan.other_col is not None else -1]
    # The in-header page count is valid when its version-valid-for number (offset 92) is the
    # change counter (offset 24); SQLite then reads no page beyond it.
    n_pages = len(mapped) // page_size
    if head[92:96] == head[24:28]:
        n_pages = min(n_pages, int.from_bytes(head[28:32], "big"))
    return {"root": int(root[0]), "cols": cols, "page_size": page_size, "reserved": head[20], "n_pages": n_pages}


def _scan_file(mapped, layout: dict, plan, show_all: bool, n_ids: int) -> list:
    """The rows of the one-scan export's SELECT (:func:`_write_one_scan`: every row of the
    probability model's with e1 in 0..n_ids-1, the hidden forms left out unless show_all), read
    by ``_export.scan_pair_file`` from the file's b-tree pages: SQLite's virtual machine spends
    about 1 us of CPU on each of bio's 4.48M rows (decoding every record's header, a call per
    column), most of the default export's scan, where the hidden 2.9M are not even written."""
    from pivot._native import _export

    with memoryview(mapped) as view, view[:layout["n_pages"] * layout["page_size"]] as pages:
        return _export.scan_pair_file(pages, layout["page_size"], layout["reserved"], layout["root"], layout["cols"],
                                      plan.kind != LEARNED, 0 if show_all else HIDDEN_FORMS, 0, n_ids)


def _in_thread(work, meanwhile):
    """(work(), meanwhile()): work in a thread of its own while this one calls meanwhile."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="pivot-export-scan") as pool:
        done = pool.submit(work)
        extra = meanwhile()
        return done.result(), extra


def _reverse_where(plan, show_all: bool) -> str:
    """The rows where a written pair's p(e1|e2) can come from: the probability model's, and
    without show_all only the visible ones. The well-formedness flags are a symmetric function
    of the pair's two phrases (pivot.pipeline.wellformed: each flag is set when either phrase,
    or the pair as a whole, has the property; tests/test_wellformed.py checks the kernel against
    the reverse pairs), so the reverse row of a visible pair is visible: the hidden rows (2.9M
    of bio's 4.5M) need not be read for it."""
    hide = "" if show_all else f" AND (form & {HIDDEN_FORMS}) = 0"
    return f"{plan.pcol} IS NOT NULL{hide}"


def _write_one_scan(cols, plan, writer, classes, n_ids: int, counts: dict, task_rows: int, prefetch: bool,
                    keep=None) -> None:
    """The export without a size or relation cut: the rows it writes are the probability model's
    rows that :func:`_reverse_where` names (the learned model writes every visible pair, and
    reads p from General's column: NaN where General has none, as where no reverse row is), so
    one scan of them gives both the lines and every line's p(e1|e2), and the table is read once
    instead of twice (bio's default export, 1.55M of 4.48M rows: 5.5 -> 3.6 s of CPU in process).

    cols: that scan (:func:`_scan_file`, or :func:`_scan_halves` in two threads); keep: None, or
    the rows to write (a size or relation cut: every written row is among the scan's, so the
    scan still gives every p(e1|e2)). The lines are formatted in tasks of about task_rows rows
    (whole e1 runs) on two threads while this one writes them in order."""
    from pivot._native import _export

    key, p_all = cols[0], cols[1]
    e1_all = key >> 32
    ptr = _export.row_pointer(e1_all, n_ids)
    reverse = (ptr, key & 0xFFFFFFFF, p_all)
    if keep is not None:
        cols = [c[keep] for c in cols]
        e1_all = cols[0] >> 32
        ptr = _export.row_pointer(e1_all, n_ids)
    starts = np.arange(task_rows, len(e1_all), task_rows)
    cuts = np.unique(np.concatenate([[0], ptr[e1_all[starts]], [len(e1_all)]])).tolist()
    del e1_all, starts, ptr
    chunks = ([c[a:b] for c in cols] for a, b in zip(cuts[:-1], cuts[1:]))
    if not prefetch:
        _write_chunks(chunks, plan, writer, classes, reverse, counts)
        return
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="pivot-export-format")
    try:
        _write_chunks(chunks, plan, writer, classes, reverse, counts, pool)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _export_parts(db, plan, sql: str, params: tuple, agree: bool, show_all: bool, counts: dict, out,
                  chunk_rows: int, prefetch: bool) -> None:
    """export_ppdb of a database in parts (pivot.store.parts): the same lines, the same bytes.

    The phrases come from the phrase index's shards, the probability model's (e1, e2, p) columns from
    every part in turn (their ranges are consecutive, so the concatenation is the single file's
    scan), and each chunk of the single file's bounds is read from the part(s) its e1 range
    meets: a chunk cut at a part's start still holds whole e1 runs, which is all the ordering
    of a chunk's lines needs.
    """
    from pivot._native import _export

    m = db.manifest
    ranges = [(int(p["e1_range"][0]), int(p["e1_range"][1])) for p in m.parts]
    index = []
    tables = []
    try:
        index = [_export.Table(m.index_path(j).resolve().as_uri() + "?mode=ro") for j in range(len(m.shards))]
        tables = [[_export.Table(m.part_path(k).resolve().as_uri() + "?mode=ro") for _ in range(2 if prefetch else 1)]
                  for k in range(len(ranges))]
        with _read_checked(db.path):
            for t in [*index, *(t for ts in tables for t in ts)]:
                t.scan(f"PRAGMA mmap_size = {MMAP_BYTES}", (), "I")
                t.scan("BEGIN", (), "")
            phrases = _Phrases.read_shards(index)
            classes = phrases.label_classes() if agree else None
            writer = plan.writer(_writer(out), phrases)
            scans = [ts[0].scan(f"SELECT e1, e2, {plan.pcol} FROM pair WHERE e1 >= ?1 AND e1 < ?2 AND "
                                f"{_reverse_where(plan, show_all)}", (lo, hi), "IID")
                     for ts, (lo, hi) in zip(tables, ranges)]
            e1_all, e2_all, p_all = (np.concatenate([s[c] for s in scans]) for c in range(3))
            del scans
            ptr = _export.row_pointer(e1_all, phrases.n_ids)
            pieces = [(k, max(lo, a), min(hi, b)) for lo, hi in _chunk_bounds(e1_all, phrases.n_ids, chunk_rows)
                      for k, (a, b) in enumerate(ranges) if max(lo, a) < min(hi, b)]
            with contextlib.closing(_prefetched_pieces(tables, sql, params, plan.kinds, pieces, prefetch)) as chunks:
                _write_chunks(chunks, plan, writer, classes, (ptr, e2_all, p_all), counts)
            for t in [*index, *(t for ts in tables for t in ts)]:
                t.scan("COMMIT", (), "")
    finally:
        for t in index:
            t.close()
        for ts in tables:
            for t in ts:
                t.close()


def _prefetched_pieces(tables, sql: str, params: tuple, kinds: str, pieces, prefetch: bool):
    """:func:`_prefetched` over pieces (part k, lo, hi): piece j on part k's connection j % 2,
    in thread j % 2 (each connection used by its own thread only)."""
    if not prefetch:
        for k, lo, hi in pieces:
            yield tables[k][0].scan(sql, (lo, hi, *params), kinds)
        return
    from concurrent.futures import ThreadPoolExecutor

    pools = [ThreadPoolExecutor(max_workers=1, thread_name_prefix="pivot-export-scan") for _ in range(2)]
    try:
        def submit(j):
            k, lo, hi = pieces[j]
            return pools[j % 2].submit(tables[k][j % 2].scan, sql, (lo, hi, *params), kinds)

        pending = [submit(j) for j in range(min(2, len(pieces)))]
        for j in range(len(pieces)):
            cols = pending.pop(0).result()
            if j + 2 < len(pieces):
                pending.append(submit(j + 2))
            yield cols
    finally:
        for pool in pools:
            pool.shutdown(wait=True, cancel_futures=True)


def _scan_halves(tables, sql: str, kinds: str, n_ids: int, meanwhile=None):
    """`sql` over e1 in [0, n_ids) (parameters ?1, ?2: an e1 range); with two connections, as
    two halves read at once in two threads: phrase ids are ranks of hashes, so each half holds
    about half the pairs, and the two scans share the 2 cores. meanwhile: None, or a function
    this thread calls while the halves are read (both then in threads of their own); the result
    is then (columns, its value)."""
    if len(tables) == 1:
        cols = tables[0].scan(sql, (0, n_ids), kinds)
        return cols if meanwhile is None else (cols, meanwhile())
    from concurrent.futures import ThreadPoolExecutor

    mid = n_ids // 2
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="pivot-export-scan") as pool:
        upper = pool.submit(tables[1].scan, sql, (mid, n_ids), kinds)
        if meanwhile is None:
            lower = tables[0].scan(sql, (0, mid), kinds)
        else:
            lower = pool.submit(tables[0].scan, sql, (0, mid), kinds)
            extra = meanwhile()
            lower = lower.result()
        upper = upper.result()
    cols = [np.concatenate([a, b]) for a, b in zip(lower, upper)]
    return cols if meanwhile is None else (cols, extra)


def _chunk_bounds(e1_all: np.ndarray, n_ids: int, chunk_rows: int) -> list[tuple[int, int]]:
    """e1 ranges [lo, hi) covering 0..n_ids, each about chunk_rows of the rows e1_all lists
    (sorted), cut between runs of one e1."""
    cuts = [0]
    for r in range(chunk_rows, len(e1_all), chunk_rows):
        if int(e1_all[r]) > cuts[-1]:
            cuts.append(int(e1_all[r]))
    cuts.append(max(n_ids, cuts[-1] + 1))
    return list(zip(cuts[:-1], cuts[1:]))


def _prefetched(tables, sql: str, params: tuple, kinds: str, bounds, prefetch: bool):
    """The scan of `sql` over every bound (lo, hi) in order. With prefetch, two scans run ahead
    in two threads, chunk k on connection k % 2 (each connection used by its own thread only),
    while the caller works on the current chunk: the scans are most of the export's time, and
    on 2 cores the pass over the pairs then takes about half as long."""
    if not prefetch:
        for lo, hi in bounds:
            yield tables[0].scan(sql, (lo, hi, *params), kinds)
        return
    from concurrent.futures import ThreadPoolExecutor

    pools = [ThreadPoolExecutor(max_workers=1, thread_name_prefix="pivot-export-scan") for _ in tables]
    try:
        def submit(k):
            lo, hi = bounds[k]
            return pools[k % len(pools)].submit(tables[k % len(tables)].scan, sql, (lo, hi, *params), kinds)

        pending = [submit(k) for k in range(min(len(tables), len(bounds)))]
        for k in range(len(bounds)):
            cols = pending.pop(0).result()
            if k + len(tables) < len(bounds):
                pending.append(submit(k + len(tables)))
            yield cols
    finally:
        for pool in pools:
            pool.shutdown(wait=True, cancel_futures=True)


def _writer(out):
    """A function writing bytes to `out`: its binary buffer for a text file, decoded for a
    text stream without one (io.StringIO)."""
    if isinstance(out, io.TextIOBase):
        buffer = getattr(out, "buffer", None)
        if buffer is not None:
            out.flush()
            return buffer.write
        return lambda b: out.write(bytes(b).decode("utf-8"))
    return out.write


def lookup_lines(db, query: str, hits, model: str | None = None, *, lhs: str = "stored") -> str:
    """The PPDB 2.0 lines of a lookup's answers (pivot.store.db.Paraphrase, `model`'s lookup of
    `query`), in their order: the pairs' stored columns read as the export reads them and
    formatted by its line builder, so a line is byte for byte the export's line of that pair."""
    from pivot._native import _export

    plan = _Plan(db, model, lhs)
    e1 = db.phrase_id(query)
    texts = [db.normalize(query), *(h.paraphrase for h in hits)]
    e2 = [db.phrase_id(t, normalize=False) for t in texts[1:]]
    if e1 is None or None in e2:
        raise InputError(f"{query!r}: the answers are not pairs of this database", db.path)
    uri, back_sql = plan.uri, f"SELECT {plan.pcol} FROM pair WHERE e1 = ?1 AND e2 = ?2"
    if db.manifest is not None:  # the part of the query's phrase; a reverse pair of another part is in `reverse`
        k = db.manifest.part_of(e1)
        if k is None:
            raise InputError(f"{query!r}: the answers are not pairs of this database", db.path)
        uri = db.manifest.part_path(k).resolve().as_uri() + "?mode=ro"
        back_sql += f" UNION ALL SELECT {plan.pcol} FROM reverse WHERE e1 = ?1 AND e2 = ?2"
    table = _export.Table(uri)
    try:
        with _read_checked(db.path):
            one = f"SELECT {', '.join(plan.columns)} FROM pair WHERE e1 = ?1 AND e2 = ?2"
            rows = [table.scan(one, (e1, b), plan.kinds) for b in e2]
            back = [table.scan(back_sql, (b, e1), "d")[0] for b in e2]
            label = table.scan("SELECT lhs FROM phrase WHERE id = ?1", (e1,), "t")[0]
    finally:
        table.close()
    if any(len(r[0]) != 1 for r in rows):
        raise InputError(f"{query!r}: the answers are not pairs of this database", db.path)
    # The rows as one chunk whose phrase ids are 0 (the query) and 1..k (the answers, in order).
    unpacked = plan.unpack([np.concatenate([r[c] for r in rows]) if rows else
                            np.zeros(0, np.float64 if plan.kinds[c] in "dD" else np.int64)
                            for c in range(len(plan.columns))])
    unpacked["e1"], unpacked["e2"] = np.zeros(len(hits), np.int64), np.arange(1, len(hits) + 1, dtype=np.int64)
    p_rev = np.array([b[0] if len(b) else np.nan for b in back], np.float64)
    encoded = [t.encode() for t in texts]
    lhs_text, lhs_off = label
    phrases = _Phrases(b"".join(encoded), np.concatenate([[0], np.cumsum([len(t) for t in encoded])]).astype(np.int64),
                       lhs_text, np.array([0] + [int(lhs_off[1])] * len(encoded), np.int64))
    out = io.BytesIO()
    with _read_checked(db.path):
        plan.write_rows(plan.writer(out.write, phrases, buffer_bytes=1 << 12), unpacked, p_rev)
    return out.getvalue().decode("utf-8")
