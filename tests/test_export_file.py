"""The export's read of the pair table from the database file's b-tree pages
(pivot._export.scan_pair_file, pivot.store.export._scan_file): the rows, values and order of the
SELECT it stands for, by hand and against SQLite on random tables (deep trees, overflow pages,
whole-number REALs, NULLs, a column order of its own); the same bytes as the export through
SQLite; a WAL database read through SQLite; a damaged page as one line."""
import io
import random
import sqlite3

import numpy as np
import pytest

from pivot import cli
from pivot._native import _export
from pivot.store.db import ParaphraseDB
from pivot.store.export import _map_file, export_ppdb
from pivot.store.write import HIDDEN_FORMS, RELATION_COLUMNS, schema_sql
from tests.test_export import write_db

# Record positions in the pivot schema with 2 models and 1 pivot column (schema_sql(2, 1)):
# e1 0, e2 1, n_pivots 2, pivot1 3, p_0 4, p_1 5, form 6, ppdb2 7, rel_* 8..13, relation 14.
COLS = {"e1": 0, "e2": 1, "n_pivots": 2, "p_0": 4, "p_1": 5, "form": 6, "ppdb2": 7, "relation": 14,
        **{c: 8 + j for j, c in enumerate(RELATION_COLUMNS)}}
# ... and in bio's layout (schema_sql(8, 3)): e1 0, e2 1, n_pivots 2, pivot1..3 3..5, p_0..p_7 6..13,
# form 14, ppdb2 15, rel_* 16..21, relation 22.
COLS8 = {"e1": 0, "e2": 1, "n_pivots": 2, **{f"p_{j}": 6 + j for j in range(8)}, "form": 14, "ppdb2": 15,
         "relation": 22, **{c: 16 + j for j, c in enumerate(RELATION_COLUMNS)}}
# The SELECT that scan_pair_file stands for (pivot.store.export._Plan.columns).
PACKED = ["e1 << 32 | e2", "{p}", "ppdb2", "n_pivots | (form << 40) | (relation << 56)",
          " | ".join(f"({c} << {10 * j})" for j, c in enumerate(RELATION_COLUMNS))]


def header(path):
    head = path.read_bytes()[:100]
    size = int.from_bytes(head[16:18], "big")
    return (65536 if size == 1 else size), head[20]


def scan_file(path, p="p_0", p_required=False, hidden=HIDDEN_FORMS, lo=0, hi=1 << 31, other=None, cols=COLS):
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'pair'").fetchone()[0]
    page_size, reserved = header(path)
    positions = [cols[c] for c in ["e1", "e2", p, "ppdb2", "n_pivots", "form", "relation", *RELATION_COLUMNS]]
    data = np.frombuffer(path.read_bytes(), np.uint8)
    return _export.scan_pair_file(data, page_size, reserved, root, positions + [cols[other] if other else -1],
                                  p_required, hidden, lo, hi)


def scan_sql(path, p="p_0", p_required=False, hidden=HIDDEN_FORMS, lo=0, hi=1 << 31, other=None):
    where = ["e1 >= ?1", "e1 < ?2"] + [f"{p} IS NOT NULL"] * p_required + [f"(form & {hidden}) = 0"] * bool(hidden)
    columns = [c.format(p=p) for c in PACKED] + [other] * bool(other)
    table = _export.Table(path.resolve().as_uri() + "?mode=ro")
    try:
        return table.scan(f"SELECT {', '.join(columns)} FROM pair WHERE {' AND '.join(where)}", (lo, hi),
                          "IdDII" + "d" * bool(other))
    finally:
        table.close()


def same(a, b):
    """Equal arrays, float ones bit for bit (NaN for NaN)."""
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape
        assert (x.view(np.int64) == y.view(np.int64)).all()


def test_scan_by_hand(tmp_path):
    # test_export's PAIRS: the learned model's default export reads every pair without a hidden
    # form (form & 7 == 0): treat -> cure, handle, look after; cure -> treat; handle -> treat
    # (treat -> the cure: form 2, cure -> "cure ,": 1, the cure -> cure: 18 = 2 | 16 are hidden).
    path = write_db(tmp_path / "s3.db")
    key, p, ppdb2, misc, packed = scan_file(path)
    assert key.tolist() == [0 << 32 | 1, 0 << 32 | 2, 0 << 32 | 3, 1 << 32 | 0, 2 << 32 | 0]
    assert p.tolist() == [0.5, 0.2, 0.25, 0.4, 0.25]      # General's p
    assert ppdb2.tolist() == [3.5, 2.25, 4.0, 3.5, 2.0]
    # n_pivots | form << 40 | relation << 56: relations Equivalence 0, ForwardEntailment 1, Equivalence
    # (a tie of 500s: the first), Equivalence, ReverseEntailment 2; every form 0.
    assert misc.tolist() == [2, 1 | 1 << 56, 1, 2, 1 | 2 << 56]
    # the six per-mille values, 10 bits each: treat -> cure (700, 100, 50, 50, 50, 50) ...
    assert packed.tolist() == [700 | 100 << 10 | 50 << 20 | 50 << 30 | 50 << 40 | 50 << 50,
                               100 | 600 << 10 | 100 << 20 | 100 << 30 | 50 << 40 | 50 << 50,
                               500 | 500 << 40,
                               600 | 50 << 10 | 250 << 20 | 50 << 40 | 50 << 50,
                               1000 << 20]
    # dom's pairs (p_1 not NULL), nothing hidden, e1 in [0, 2): treat -> cure, handle, the cure; cure -> treat;
    # and the other p column (General's) beside them
    key, p, _, misc, _, other = scan_file(path, p="p_1", p_required=True, hidden=0, hi=2, other="p_0")
    assert key.tolist() == [1, 2, 4, 1 << 32]
    assert p.tolist() == [0.6, 0.15, 0.05, 0.3] and other.tolist() == [0.5, 0.2, 0.05, 0.4]
    assert misc.tolist() == [2, 1 | 1 << 56, 1 | 2 << 40 | 4 << 56, 2]   # the cure: form 2, OtherRelated (4)
    same(scan_file(path, p="p_1", p_required=True, hidden=0, hi=2, other="p_0"),
         scan_sql(path, p="p_1", p_required=True, hidden=0, hi=2, other="p_0"))


def random_table(path, n_rows, page_size, seed):
    """A pivot pair table in bio's layout (8 models, 3 pivot columns) of n_rows random rows in a
    file of page_size bytes a page."""
    rng = random.Random(seed)
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA page_size = {page_size}")
    conn.executescript(schema_sql(8, 3))
    keys = sorted(rng.sample(range(300 * 300), n_rows))

    def prob():
        r = rng.random()
        # NULL, whole numbers (SQLite stores them as integers in a REAL column), doubles
        return None if r < 0.2 else 1.0 if r < 0.3 else 0.0 if r < 0.35 else rng.random()

    rows = [(k // 300, k % 300, rng.choice([1, 2, 300, 70000, 1 << 39]), *(rng.randrange(1 << 20) for _ in range(3)),
             *(prob() for _ in range(8)), rng.randrange(32), rng.choice([2.0, -3.0, rng.uniform(-5, 5), 1e300, -0.0]),
             *(rng.randrange(1001) for _ in range(6)), rng.randrange(6)) for k in keys]
    conn.executemany(f"INSERT INTO pair VALUES ({', '.join('?' * 23)})", rows)
    conn.commit()
    conn.close()


@pytest.mark.parametrize("page_size, n_rows", [(512, 3000), (4096, 20000), (65536, 500)])
def test_scan_is_the_select_on_random_tables(tmp_path, page_size, n_rows):
    # 512-byte pages: records longer than 102 bytes spill to overflow pages, and the b-tree is
    # 3 levels deep; interior pages hold records of their own (an index b-tree's).
    path = tmp_path / "r.db"
    random_table(path, n_rows, page_size, seed=page_size)
    with sqlite3.connect(path) as conn:
        if page_size == 512:
            assert conn.execute("SELECT max(depth) FROM (SELECT length(path) - length(replace(path, '/', '')) AS depth "
                                "FROM dbstat WHERE name = 'pair')").fetchone()[0] >= 2
            assert conn.execute("SELECT count(*) FROM dbstat WHERE name = 'pair' AND pagetype = 'overflow'"
                                ).fetchone()[0] > 0
    for kw in [{}, {"hidden": 0}, {"p": "p_1", "p_required": True}, {"p": "p_7", "p_required": True, "other": "p_3"},
               {"lo": 100, "hi": 200}, {"hidden": 5, "lo": 299, "hi": 300}]:
        same(scan_file(path, cols=COLS8, **kw), scan_sql(path, **kw))


def test_export_reads_the_file_as_sqlite_would(tmp_path):
    # The same bytes by either read: test_export's table as written, and with its columns declared
    # in reverse (a WITHOUT ROWID record holds the key first, then the rest as declared: the
    # layout comes from PRAGMA index_xinfo), for every model and option.
    path = write_db(tmp_path / "s3.db")
    moved = tmp_path / "moved.db"
    moved.write_bytes(path.read_bytes())
    with sqlite3.connect(moved) as conn:
        ddl = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'pair'").fetchone()[0]
        body = ddl[ddl.index("(") + 1:ddl.index("PRIMARY KEY")]
        columns = [c.strip() for c in body.replace("\n", " ").split(",") if c.strip()]
        conn.execute(f"CREATE TABLE pair_moved ({', '.join(reversed(columns))}, PRIMARY KEY (e1, e2)) WITHOUT ROWID")
        conn.execute(f"INSERT INTO pair_moved ({', '.join(c.split()[0] for c in columns)}) "
                     f"SELECT {', '.join(c.split()[0] for c in columns)} FROM pair")
        conn.execute("DROP TABLE pair")
        conn.execute("ALTER TABLE pair_moved RENAME TO pair")
        assert conn.execute("SELECT name FROM pragma_table_info('pair') WHERE cid = 0").fetchone()[0] == "relation"
    # With a cut, the file's one scan is cut after; through SQLite the cut is in the SELECT.
    for kw in [{}, {"show_all": True}, {"model": "dom"}, {"model": "general+dom"}, {"model": "general", "lhs": "x"},
               {"agree": True}, {"size": "l"}, {"relations": (0, 2)}, {"size": "xl", "relations": (1, 4), "show_all": True},
               {"model": "dom", "size": "xxxl", "relations": (4,), "show_all": True}]:
        outs = set()
        for p in (path, moved):
            with ParaphraseDB(p) as db:
                for direct in (True, False):
                    for prefetch in (True, False):
                        out = io.BytesIO()
                        export_ppdb(db, out, direct=direct, prefetch=prefetch, **kw)
                        outs.add(out.getvalue())
        assert len(outs) == 1 and len(outs.pop()) > 0


def test_a_wal_database_is_read_through_sqlite(tmp_path):
    # In WAL mode committed pages can sit in the -wal file: the export must not read the main
    # file's pages, so it reads through SQLite (the same lines).
    path = write_db(tmp_path / "s3.db")
    with ParaphraseDB(path) as db:
        out = io.BytesIO()
        export_ppdb(db, out)
    expected = out.getvalue()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode = WAL").fetchone()[0] == "wal"
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    # a change that stays in the -wal file: the main file's pages still hold the old value
    conn.execute("UPDATE pair SET ppdb2 = 9.5 WHERE e1 = 2 AND e2 = 0")
    conn.commit()
    with open(path, "rb") as fh:
        assert _map_file(fh) is None
    with ParaphraseDB(path) as db:
        out = io.BytesIO()
        export_ppdb(db, out)
    assert out.getvalue() == expected.replace(b"handle ||| treat ||| PPDB2.0Score=2 ", b"handle ||| treat ||| PPDB2.0Score=9.5 ")
    assert out.getvalue() != expected
    conn.close()


def test_a_damaged_page_is_one_line(tmp_path, capsys):
    # The pair table's root page with the type byte of a table b-tree leaf (13): one line naming
    # the file and the page; and a child pointer outside the file.
    path = tmp_path / "big.db"
    random_table(path, 3000, 512, seed=1)
    with sqlite3.connect(path) as conn:
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'pair'").fetchone()[0]
    data = bytearray(path.read_bytes())
    assert data[(root - 1) * 512] == 2   # an interior page: its right-most child's number at bytes 8..11
    for offset, value, problem in [(0, 13, f"a page of the pair b-tree is not an index b-tree page (page {root} "),
                                   (8, 0x7F, "a child page number is outside the file (page ")]:
        bad = bytearray(data)
        bad[(root - 1) * 512 + offset] = value
        with pytest.raises(ValueError) as err:
            _export.scan_pair_file(np.frombuffer(bytes(bad), np.uint8), 512, 0, root,
                                   [COLS8[c] for c in ["e1", "e2", "p_0", "ppdb2", "n_pivots", "form", "relation",
                                                      *RELATION_COLUMNS]] + [-1], False, 7, 0, 1 << 31)
        assert str(err.value).startswith(problem)
    # through the CLI, on a pivot database: the root page's type byte
    good = write_db(tmp_path / "s3.db")
    with sqlite3.connect(good) as conn:
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'pair'").fetchone()[0]
    page_size, _ = header(good)
    data = bytearray(good.read_bytes())
    assert data[(root - 1) * page_size] == 10   # one leaf page holds the 8 pairs
    data[(root - 1) * page_size] = 13
    bad = tmp_path / "bad.db"
    bad.write_bytes(bytes(data))
    assert cli.main(["-q", "export", str(bad), "-o", str(tmp_path / "out.ppdb")]) == 2
    assert capsys.readouterr().err == (
        f"pivot export: error: {bad}: not a pivot paraphrase database, or a damaged one: a page of the pair b-tree "
        f"is not an index b-tree page (page {root} of the pair table's b-tree)\n")


def test_scan_checks_its_arguments():
    data = np.zeros(1024, np.uint8)
    cols = list(range(13)) + [-1]
    with pytest.raises(ValueError, match="page size 1000 is not a power of two"):
        _export.scan_pair_file(data, 1000, 0, 1, cols, False, 0, 0, 1)
    with pytest.raises(ValueError, match="names 13 record positions, not 14"):
        _export.scan_pair_file(data, 512, 0, 1, cols[:13], False, 0, 0, 1)
    with pytest.raises(ValueError, match="record position 64 outside 0..63"):
        _export.scan_pair_file(data, 512, 0, 1, [64] + cols[1:], False, 0, 0, 1)
