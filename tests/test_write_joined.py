"""The database's pair load on the workers (pivot.store.write): scratch files by block of rows,
copied into the database in key order inside SQLite; the same bytes as one writer."""
import hashlib
import os
import sqlite3

import numpy as np
import pytest

import pivot.store.write as W
from pivot.store.write import PairChunk, write_database_chunks
from tests.test_parts import E1, E2, FORM, N_PIVOTS, PIVOTS, PPDB2, REL, SCORES, _kwargs


def _sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _changes(path) -> int:
    """The file change counter of an SQLite file (header bytes 24..27, big-endian): one per
    write transaction."""
    return int.from_bytes(path.read_bytes()[24:28], "big")


@pytest.fixture(scope="module")
def engine():
    from pivot.pipeline.engine import Engine

    with Engine(workers=2) as e:
        yield e


def test_blocks_cut_the_table_at_fixed_rows_across_chunks(monkeypatch):
    monkeypatch.setattr(W, "BLOCK_ROWS", 3)
    # 10 rows: [0, 3), [3, 6), [6, 9), [9, 10)
    assert W._blocks(10) == [(0, 3), (3, 6), (6, 9), (9, 10)]
    assert W._blocks(0) == []
    chunks = _kwargs()["chunks"]  # rows 0..3, 4..7, 8..9 of the table
    # block [3, 6): row 3 of chunk 0, rows 4 and 5 (its first two) of chunk 1
    pieces = list(W._block_pieces(chunks, 3, 6))
    assert [p.e1.tolist() for p in pieces] == [[1], [1, 2]]
    assert [p.e2.tolist() for p in pieces] == [[0], [4, 0]]
    assert [p.ppdb2.tolist() for p in pieces] == [[3.0], [1.5, 1.9]]
    # block [6, 9): rows 6, 7 of chunk 1 and row 8 of chunk 2
    assert [p.e1.tolist() for p in W._block_pieces(chunks, 6, 9)] == [[3, 4], [4]]


def test_a_transaction_per_block_and_the_same_bytes_for_any_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(W, "BLOCK_ROWS", 4)
    a = write_database_chunks(tmp_path / "a.db", **_kwargs())
    whole = [PairChunk(E1, E2, N_PIVOTS, PIVOTS, SCORES, form=FORM, ppdb2=PPDB2, rel=REL)]
    b = write_database_chunks(tmp_path / "b.db", **{**_kwargs(), "chunks": lambda: whole})
    assert _sha256(a) == _sha256(b)
    # 5 CREATE TABLE (meta, model, phrase, foreign_phrase, pair), the texts, ceil(10 / 4) = 3
    # blocks of pairs, the models and meta, ANALYZE: 11 write transactions
    assert _changes(a) == 5 + 1 + 3 + 1 + 1
    monkeypatch.setattr(W, "BLOCK_ROWS", 250_000)
    c = write_database_chunks(tmp_path / "c.db", **_kwargs())
    assert _changes(c) == 5 + 1 + 1 + 1 + 1
    # the pages themselves do not depend on the blocks: only the header's counter (bytes 24..27)
    # and its copy "version-valid-for" (bytes 92..95) differ
    x, y = a.read_bytes(), c.read_bytes()
    assert len(x) == len(y)
    assert [i for i in range(len(x)) if x[i] != y[i]] == [27, 95]


def test_the_workers_write_the_same_file_as_one_writer(tmp_path, monkeypatch, engine):
    monkeypatch.setattr(W, "BLOCK_ROWS", 3)  # 4 blocks, cut inside each chunk (read by the workers)
    one = write_database_chunks(tmp_path / "one.db", **_kwargs())
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    two = write_database_chunks(tmp_path / "two.db", **_kwargs(), engine=engine, scratch=scratch)
    assert _sha256(one) == _sha256(two)
    assert list(scratch.iterdir()) == []  # every scratch file removed once copied
    assert engine.task_seconds["store-pairs"] > 0  # written by the workers
    conn = sqlite3.connect(two)
    assert conn.execute("SELECT e1, e2, ppdb2, form, relation FROM pair WHERE e1 = 4").fetchall() == \
        [(4, 1, 2.8, 0, 1), (4, 5, 3.3, 1, 1)]  # rows 7 and 8: rel_fwd 100 + 60 k > rel_eq 700 - 60 k for k >= 6


def test_in_process_engine_writes_here(tmp_path, monkeypatch):
    from pivot.pipeline.engine import Engine

    monkeypatch.setattr(W, "BLOCK_ROWS", 3)
    one = write_database_chunks(tmp_path / "one.db", **_kwargs())
    scratch = tmp_path / "scratch"
    scratch.mkdir()

    def refuse(*a, **k):
        raise AssertionError("no scratch file with --workers 1")

    monkeypatch.setattr(W, "write_pair_file", refuse)
    here = write_database_chunks(tmp_path / "here.db", **_kwargs(), engine=Engine(workers=1), scratch=scratch)
    assert _sha256(one) == _sha256(here)


def test_a_duplicate_pair_fails_the_copy_and_leaves_no_file(tmp_path, monkeypatch, engine):
    monkeypatch.setattr(W, "BLOCK_ROWS", 3)
    # row 9 repeats row 8's key (4, 5): still sorted, so only the primary key refuses it, in the
    # copy of the last block (every block is written by then)
    e1, e2 = E1.copy(), E2.copy()
    e1[9], e2[9] = 4, 5
    chunks = [PairChunk(e1, e2, N_PIVOTS, PIVOTS, SCORES, form=FORM, ppdb2=PPDB2, rel=REL)]
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE constraint failed: pair.e1, pair.e2"):
        write_database_chunks(tmp_path / "dup.db", **{**_kwargs(), "chunks": lambda: chunks}, engine=engine,
                              scratch=scratch)
    assert os.listdir(scratch) == [] and sorted(os.listdir(tmp_path)) == ["scratch"]


def test_scratch_names_are_those_a_sweep_removes_after_a_killed_build():
    from pivot.locking import stale_owner

    # the name the build's process gives a block's file carries its pid, which sweep_stale checks
    assert stale_owner(".bio.db.pairs-00017.tmp-4242") == 4242


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_packed_rows_unpack_to_the_rows_of_pair(k):
    """A scratch row's packed integers give back pair's columns exactly, at the packing's limits."""
    big = 2**31 - 1
    piv = np.array([[big - 1] * k, [-1] * k, [0] + [-1] * (k - 1)], dtype=np.int64)
    c = PairChunk(np.array([0, big, 7]), np.array([big, 0, 7]), np.array([2**40, 0, 1]), piv,
                  np.array([[0.25, 0.0], [0.0, 1e-300], [1.0, 0.5]]), form=np.array([31, 0, 5]),
                  ppdb2=np.array([-2.5, 0.0, 3.0]),
                  rel=np.array([[1023, 0, 1, 2, 3, 4], [0] * 6, [5, 6, 900, 1, 0, 2]]))
    conn = sqlite3.connect(":memory:")
    conn.execute(W._scratch_sql(2, k))
    conn.executescript("CREATE TABLE want " + W.schema_sql(2, k).split("CREATE TABLE pair")[1].replace(
        " WITHOUT ROWID", ""))
    W.insert_pairs(conn, c, k, 2, packed=True)
    got = conn.execute(f"SELECT {W._unpacked_sql(k, 2)} FROM pair ORDER BY rowid").fetchall()
    # the same chunk bound column by column (into a copy of pair's table: `want`)
    conn.execute("ALTER TABLE pair RENAME TO scratch")
    conn.execute("ALTER TABLE want RENAME TO pair")
    W.insert_pairs(conn, c, k, 2)
    want = conn.execute("SELECT * FROM pair").fetchall()
    assert got == want
    # by hand, row 1: e1 2^31 - 1, e2 0, n_pivots 0, no pivot (NULL), p_0 NULL (0 is absent),
    # p_1 1e-300, form 0, ppdb2 0.0, rel all 0, relation 0 (argmax of a tie: the first)
    assert want[1] == (big, 0, 0, *[None] * k, None, 1e-300, 0, 0.0, 0, 0, 0, 0, 0, 0, 0)
    assert want[0][3:3 + k] == (big - 1,) * k and want[0][-7:] == (1023, 0, 1, 2, 3, 4, 0)
    assert want[2][-1] == 2  # rel_rev 900 is the largest


def test_values_the_scratch_cannot_pack_are_refused():
    c = PairChunk(np.array([0]), np.array([1]), np.array([1]), np.array([[0, -1, -1]]), np.array([[0.5]]),
                  form=np.array([32]), ppdb2=np.array([1.0]), rel=np.array([[0, 0, 0, 0, 1024, 0]]))
    conn = sqlite3.connect(":memory:")
    conn.execute(W._scratch_sql(1, 3))
    with pytest.raises(ValueError, match=r"form outside \[0, 32\), rel outside \[0, 1024\)"):
        W.insert_pairs(conn, c, 3, 1, packed=True)


def test_flat_inserts_cross_runs_of_statements():
    """_insert_flat takes its values a run of RUN_STATEMENTS statements at a time: rows across two runs and
    a tail that fills no statement all arrive, in order."""
    import sqlite3

    from pivot.store.write import ROWS_PER_STATEMENT, RUN_STATEMENTS, _insert_flat

    n = ROWS_PER_STATEMENT * RUN_STATEMENTS * 2 + 5
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (a INTEGER, b TEXT)")
    _insert_flat(conn, "t", 2, (v for i in range(n) for v in (i, f"x{i}")))
    rows = conn.execute("SELECT a, b FROM t ORDER BY rowid").fetchall()
    assert rows == [(i, f"x{i}") for i in range(n)]


def test_texts_are_asked_for_a_block_of_ids_at_a_time_and_give_the_same_bytes(tmp_path, monkeypatch):
    """Texts and labels given as functions of the ids: with TEXT_BLOCK = 4 the write asks for
    the 6 phrases as ids 0..3 then 4..5, the 3 pivots as 0..2, and the file is the same bytes
    as from the mappings themselves (and as with one block)."""
    from tests.test_parts import FOREIGN, PHRASES

    labels = {i: f"[L{i % 2}]" for i in range(len(PHRASES))}
    asked = []

    def function_of(name, mapping):
        def texts(ids):
            asked.append((name, ids.tolist()))
            return {i: mapping[i] for i in ids.tolist()}
        return texts

    by_function = dict(phrases=function_of("phrases", PHRASES), foreign=function_of("foreign", FOREIGN),
                       lhs=function_of("lhs", labels))
    monkeypatch.setattr(W, "TEXT_BLOCK", 4)
    a = write_database_chunks(tmp_path / "a.db", **{**_kwargs(), **by_function})
    assert asked == [("phrases", [0, 1, 2, 3]), ("lhs", [0, 1, 2, 3]), ("phrases", [4, 5]), ("lhs", [4, 5]),
                     ("foreign", [0, 1, 2])]
    b = write_database_chunks(tmp_path / "b.db", **{**_kwargs(), "lhs": labels})
    monkeypatch.setattr(W, "TEXT_BLOCK", 250_000)
    c = write_database_chunks(tmp_path / "c.db", **{**_kwargs(), **by_function})
    assert _sha256(a) == _sha256(b) == _sha256(c)
    conn = sqlite3.connect(a)
    assert conn.execute("SELECT id, text, lhs FROM phrase WHERE id IN (3, 4) ORDER BY id").fetchall() == \
        [(3, "look after", "[L1]"), (4, "heal", "[L0]")]
    assert conn.execute("SELECT text FROM foreign_phrase ORDER BY id").fetchall() == \
        [("fr:traiter",), ("fr:soigner",), ("de:heilen",)]


def test_a_pivot_without_text_fails_the_write(tmp_path, monkeypatch):
    monkeypatch.setattr(W, "TEXT_BLOCK", 2)
    with pytest.raises(ValueError, match="1 pivot id"):
        write_database_chunks(tmp_path / "a.db", **{**_kwargs(), "foreign": lambda ids: {0: "fr:traiter",
                                                                                           1: "fr:soigner"}})
    assert not (tmp_path / "a.db").exists()


def test_phrase_rows_from_an_array_of_counts_are_the_rows_of_phrase_row(monkeypatch):
    """Survey.phrase_rows builds a block's rows a column at a time when the counts are an array;
    they are the rows Texts.phrase_row gives one id at a time (the path a list of counts takes):
    (id, text, words, count, label), e.g. (3, "look after", 2, 2, "[L1]")."""
    from tests.test_parts import COUNTS, PHRASES

    monkeypatch.setattr(W, "TEXT_BLOCK", 2)
    survey = W.Survey(n=0, n_piv_cols=3, n_pairs=[], used=np.array([0, 3, 5]), used_f=np.zeros(0, np.int64),
                      chunk_rows=[])
    labels = {i: f"[L{i % 2}]" for i in range(len(PHRASES))}
    expected = [(0, "treat", 1, 10, "[L0]"), (3, "look after", 2, 2, "[L1]"), (5, "remedy", 1, 3, "[L1]")]
    assert list(survey.phrase_rows(PHRASES, labels, COUNTS)) == expected
    assert list(survey.phrase_rows(PHRASES, labels, COUNTS.tolist())) == expected
    assert [r[-1] for r in survey.phrase_rows(PHRASES, None, COUNTS)] == ["[X]"] * 3
    # counts as a function of each block's ids (asked for ids 0, 3 then 5): the same rows
    asked = []

    def counts_of(ids):
        asked.append(ids.tolist())
        return COUNTS[ids]
    assert list(survey.phrase_rows(PHRASES, labels, counts_of)) == expected
    assert asked == [[0, 3], [5]]
    with pytest.raises(ValueError, match="1 phrase counts for a block of 2 ids"):
        list(survey.phrase_rows(PHRASES, labels, lambda ids: COUNTS[ids][:1]))


def test_the_store_reads_a_blocks_texts_and_counts_from_the_translation_files(tmp_path):
    """pivot.pipeline.store.EnglishBlocks gives a block's texts and counts from the translation
    stage's key file and partitions (read by the block's keys), the same as every phrase's rows
    read at once (translation.english_phrases) and indexed by the ids. Two partitions hold keys
    10, 20, 30 and 40, 50 (30 and 50 are not phrases of the table: ids are ranks of e_key)."""
    from pivot.pipeline import translation
    from pivot.pipeline.bundle import save_bundle
    from pivot.pipeline.store import EnglishBlocks

    (tmp_path / "structure").mkdir()
    np.save(tmp_path / "structure" / "e_key.npy", np.array([10, 20, 40], np.int64))
    save_bundle(tmp_path / "e-0000.arrays", e_key=np.array([10, 20, 30], np.int64),
                e_rows=np.array([[0, -1], [1, 2], [2, -1]], np.int32), e_count=np.array([7, 5, 9], np.int64))
    save_bundle(tmp_path / "e-0001.arrays", e_key=np.array([40, 50], np.int64),
                e_rows=np.array([[3, 0], [1, -1]], np.int32), e_count=np.array([2, 4], np.int64))
    tokens = ["treat", "look", "after", "heal"]
    blocks = EnglishBlocks(tmp_path, tokens)
    ids = np.array([1, 2], np.int64)
    # id 1 is key 20 (tokens 1, 2), id 2 key 40 (tokens 3, 0)
    assert blocks.texts(ids) == {1: "look after", 2: "heal treat"}
    assert blocks.counts(ids).tolist() == [5, 2]
    rows, counts = translation.english_phrases(tmp_path)
    from pivot.pipeline.encode import phrase_texts
    every = np.arange(3)
    assert EnglishBlocks(tmp_path, tokens).texts(every) == phrase_texts(rows, tokens, every)
    assert EnglishBlocks(tmp_path, tokens).counts(every).tolist() == counts.tolist() == [7, 5, 2]


def test_foreign_phrase_texts_prefix_the_language_of_the_first_token():
    """Token ids are offset per language (fr 0..1, de 2..3 here); a phrase's language is its
    first token's; rows are -1 padded at the end."""
    from pivot.pipeline.store import foreign_phrase_texts

    tokens, langs, f_lang = [["le", "chat"], ["die", "katze"]], ["fr", "de"], np.array([0, 0, 1, 1])
    rows = np.array([[0, 1, -1], [3, -1, -1], [2, 3, -1], [1, -1, -1]], dtype=np.int32)
    assert foreign_phrase_texts(rows, tokens, langs, f_lang) == ["fr:le chat", "de:katze", "de:die katze", "fr:chat"]
    assert foreign_phrase_texts(rows[:0], tokens, langs, f_lang) == []
    with pytest.raises(ValueError, match="padding after"):
        foreign_phrase_texts(np.array([[0, -1, 1]]), tokens, langs, f_lang)
    with pytest.raises(ValueError, match="no token"):
        foreign_phrase_texts(np.array([[-1, -1, -1]]), tokens, langs, f_lang)


def test_columns_go_in_runs_of_statements_with_nan_as_null(monkeypatch):
    """_insert_columns: 3 rows a statement, 2 statements a run (6 rows): 14 rows are two runs
    and a run of 2 rows that fill no statement, all in order; a NaN is stored as NULL, an id
    given as a float (_or_null) as the integer."""
    monkeypatch.setattr(W, "ROWS_PER_STATEMENT", 3)
    monkeypatch.setattr(W, "RUN_STATEMENTS", 2)
    n = 14
    ids = np.arange(n, dtype=np.int32) * 1000
    pivot = W._or_null(np.arange(n) + 2**31 - n, np.arange(n) % 3 != 0)   # NULL in rows 0, 3, 6, ...
    score = np.where(np.arange(n) % 2 == 0, np.arange(n) / 4, np.nan)     # NULL in odd rows
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (a INTEGER, b INTEGER, c REAL)")
    W._insert_columns(conn, "t", [ids, pivot, score])
    rows = conn.execute("SELECT a, b, typeof(b), c FROM t ORDER BY rowid").fetchall()
    assert len(rows) == n
    assert rows[0] == (0, None, "null", 0.0)
    assert rows[1] == (1000, 2**31 - 13, "integer", None)
    assert rows[13] == (13000, 2**31 - 1, "integer", None)
    assert [r[0] for r in rows] == list(range(0, 14000, 1000))
    assert [r[3] for r in rows[::2]] == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0]


def test_nan_for_null_writes_the_bytes_of_none(tmp_path):
    """The same rows bound with None (sqlite3's adaptation) and as NaN floats (_insert_columns)
    give the same file: NaN is stored as NULL, an integral float in an INTEGER column as the
    integer, in a REAL column as it was."""
    rows = [(1, None, None), (2, 7, 0.5), (3, 2**31 - 1, 1.0), (4, None, 1e-300)]
    paths = []
    for name in ("none", "nan"):
        path = tmp_path / f"{name}.db"
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("CREATE TABLE t (a INTEGER PRIMARY KEY, b INTEGER, c REAL) WITHOUT ROWID")
        if name == "none":
            conn.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
        else:
            b = W._or_null(np.array([0, 7, 2**31 - 1, 0]), np.array([False, True, True, False]))
            c = np.array([np.nan, 0.5, 1.0, 1e-300])
            W._insert_columns(conn, "t", [np.array([1, 2, 3, 4]), b, c])
        conn.close()
        paths.append(path)
    assert _sha256(paths[0]) == _sha256(paths[1])
    assert sqlite3.connect(paths[1]).execute("SELECT * FROM t").fetchall() == rows


def test_statement_rows_follow_sqlites_limit_on_parameters():
    conn = sqlite3.connect(":memory:")
    assert W._statement_rows(conn, 26) == W.ROWS_PER_STATEMENT == 128
    conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)   # SQLite's default before 3.32
    assert W._statement_rows(conn, 26) == 38                   # 38 x 26 = 988 <= 999 < 39 x 26
    assert W._statement_rows(conn, 5) == 128
    conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 20)
    assert W._statement_rows(conn, 26) == 1


class _Opened:
    """The chunks of _kwargs (rows 0..3, 4..7, 8..9 of the table), recording which it opens;
    from_chunk(j): chunk j on, as pivot.pipeline.store.StoreChunks."""

    def __init__(self):
        self.chunks, self.opened = list(_kwargs()["chunks"]()), []

    def __call__(self):
        return self.from_chunk(0)

    def from_chunk(self, first):
        for j in range(first, len(self.chunks)):
            self.opened.append(j)
            yield self.chunks[j]


def test_a_block_opens_no_chunk_before_its_first_row(tmp_path):
    """With the chunks' rows [4, 4, 2], block [6, 9) starts in chunk 1 (rows 4..7) and block
    [9, 10) in chunk 2 (rows 8..9): chunk 0 is not opened, nor chunk 2 for a block ending at 8,
    and the pieces and the scratch file are those of reading every chunk from the first."""
    rows = [4, 4, 2]
    c = _Opened()
    assert [p.e1.tolist() for p in W._block_pieces(c, 6, 9, rows)] == [[3, 4], [4]]
    assert c.opened == [1, 2]
    c.opened.clear()
    assert [p.e2.tolist() for p in W._block_pieces(c, 9, 10, rows)] == [[4]]   # row 9: (5, 4)
    assert c.opened == [2]
    c.opened.clear()
    assert [p.e1.tolist() for p in W._block_pieces(c, 4, 8, rows)] == [[1, 2, 3, 4]]
    assert c.opened == [1]
    # an empty chunk before the block: chunk 2 (of [4, 0, 4, 2]) starts at row 4 too
    with_empty = [c.chunks[0], W._rows(c.chunks[0], 0, 0), *c.chunks[1:]]
    assert [p.e1.tolist() for p in W._block_pieces(lambda: with_empty, 4, 6, [4, 0, 4, 2])] == [[1, 2]]
    skipped, every = tmp_path / "skipped.db", tmp_path / "every.db"
    assert W.write_pair_file(skipped, _Opened(), 3, 9, 3, 2, chunk_rows=rows) == 6
    assert W.write_pair_file(every, _kwargs()["chunks"], 3, 9, 3, 2) == 6
    assert _sha256(skipped) == _sha256(every)


def test_survey_task_opens_only_its_chunk():
    from pivot.store.parts import survey_task

    c = _Opened()
    assert survey_task(c, 2, 2)["first"] == 4 << 32 | 5   # chunk 2's first key: (4, 5)
    assert c.opened == [2]


def test_a_vocabulary_file_gives_the_tokens_of_the_ids_asked(tmp_path):
    """pivot.pipeline.store.VocabFile reads tokens by id from an encode vocabulary (line k: id k),
    the same strings as corpus.Vocab.load's list, multibyte UTF-8 included."""
    from pivot.pipeline.corpus import Vocab
    from pivot.pipeline.store import VocabFile, _compact

    tokens = ["treat", "naïve", "猫", "l'", "x"]
    Vocab(tokens).save(tmp_path / "vocab.en")
    v = VocabFile(tmp_path / "vocab.en")
    assert len(v) == 5 and v.words([2, 0, 4, 1]) == ["猫", "treat", "x", "naïve"] and v.words([]) == []
    assert v.words(np.arange(5)) == Vocab.load(tmp_path / "vocab.en").tokens == tokens
    assert VocabFile(tokens).words([3, 1]) == ["l'", "naïve"]
    # a block's rows in its own tokens' ranks: ids 0, 2, 7 -> 0, 1, 2
    compact, used = _compact(np.array([[7, 2], [0, -1], [2, 7]], np.int32))
    assert used.tolist() == [0, 2, 7] and compact.tolist() == [[2, 1], [0, -1], [1, 2]]


def test_foreign_blocks_make_the_texts_of_the_whole_vocabularies(tmp_path):
    """pivot.pipeline.store.ForeignBlocks: each phrase's 'lang:text' from its block's tokens read
    by VocabFile, the same as foreign_phrase_texts over the languages' whole token lists. Token
    ids are offset per language: fr 0..2, de 3..4."""
    from pivot.pipeline.bundle import save_bundle
    from pivot.pipeline.corpus import Vocab
    from pivot.pipeline.store import ForeignBlocks, foreign_phrase_texts

    enc = tmp_path / "encode"
    enc.mkdir()
    (tmp_path / "structure").mkdir()
    Vocab(["le", "chat", "été"]).save(enc / "vocab.fr")
    Vocab(["katze", "die"]).save(enc / "vocab.de")
    f_lang = np.array([0, 0, 0, 1, 1], np.int16)
    np.save(enc / "f_lang.npy", f_lang)
    rows = np.array([[0, 1, -1], [3, -1, -1], [4, 3, -1], [2, -1, -1]], np.int32)
    np.save(tmp_path / "structure" / "f_key.npy", np.array([5, 6, 7, 8], np.int64))
    save_bundle(tmp_path / "f-0000.arrays", f_dict_key=np.array([5, 6, 7, 8], np.int64), f_rows=rows)
    texts = ForeignBlocks(tmp_path, enc, ["fr", "de"])(np.array([0, 2, 3]))
    assert texts == {0: "fr:le chat", 2: "de:die katze", 3: "fr:été"}
    whole = foreign_phrase_texts(rows, [["le", "chat", "été"], ["katze", "die"]], ["fr", "de"], f_lang)
    assert [whole[i] for i in (0, 2, 3)] == list(texts.values())


# The texts on the workers. A table whose pairs use English ids 0, 1, 3, 4, 5 (not 2) and foreign
# ids 0, 2, 4 (not 1, 3): _kwargs' pairs without those of phrase 2 (rows 1 and 5), pivot 1
# renamed 4, in two chunks (rows 0..2 and 3..7).
_KEEP = (E1 != 2) & (E2 != 2)
_GAPPED_PIVOTS = np.where(PIVOTS == 1, 4, PIVOTS)[_KEEP]
_GAPPED_FOREIGN = {0: "fr:traiter", 1: "fr:guérir", 2: "de:heilen", 3: "de:pflegen", 4: "fr:soigner"}
_LABELS = {i: f"[L{i % 2}]" for i in range(6)}


def _gapped_chunks():
    rows = [np.flatnonzero(_KEEP)[:3], np.flatnonzero(_KEEP)[3:]]
    return [PairChunk(E1[r], E2[r], N_PIVOTS[r], _GAPPED_PIVOTS[np.searchsorted(np.flatnonzero(_KEEP), r)],
                      SCORES[r], form=FORM[r], ppdb2=PPDB2[r], rel=REL[r]) for r in rows]


class _TextsOf:
    """A mapping asked as a function of a block's ids, as the build's texts are (picklable: the
    workers' tasks are handed it); ``missing``: ids it has no text for."""

    def __init__(self, mapping, missing=()):
        self.mapping, self.missing = mapping, set(missing)

    def __call__(self, ids):
        return {i: self.mapping[i] for i in np.asarray(ids).tolist() if i not in self.missing}


def _gapped(**changes):
    from tests.test_parts import PHRASES

    return {**_kwargs(), "chunks": _gapped_chunks, "phrases": _TextsOf(dict(enumerate(PHRASES))),
            "foreign": _TextsOf(_GAPPED_FOREIGN), "lhs": _TextsOf(_LABELS), **changes}


# the rows the database stores of the gapped table: (id, text, n_words, count, lhs) with
# tests.test_parts' texts and counts [10, 4, 7, 2, 5, 3] and the label [L(id mod 2)]
_GAPPED_PHRASE_ROWS = [(0, "treat", 1, 10, "[L0]"), (1, "cure", 1, 4, "[L1]"), (3, "look after", 2, 2, "[L1]"),
                       (4, "heal", 1, 5, "[L0]"), (5, "remedy", 1, 3, "[L1]")]
_GAPPED_FOREIGN_ROWS = [(0, "fr:traiter"), (2, "de:heilen"), (4, "fr:soigner")]


def test_text_blocks_cut_the_ids_with_gaps_into_at_most_the_blocks_asked(tmp_path, monkeypatch):
    """English ids 0, 1, 3, 4, 5 by TEXT_BLOCK = 2: ceil(5 / 2) = 3 blocks at ranks 0, 1, 3, 5
    (5 i // 3), the foreign ids 0, 2, 4 into as many (ranks 0, 1, 2, 3); at most 2 blocks: ranks
    0, 2, 5 and 0, 1, 3. A block's ids are read from the bit files by its ranges."""
    monkeypatch.setattr(W, "TEXT_BLOCK", 2)
    survey = W.survey_chunks(_gapped_chunks, [{}, {}], [])
    assert survey.used.tolist() == [0, 1, 3, 4, 5] and survey.used_f.tolist() == [0, 2, 4]
    bits = W.write_id_bits(tmp_path, survey, (".x.used-e.tmp-1", ".x.used-f.tmp-1"))
    three = W.text_blocks(survey.used, survey.used_f, *bits)
    assert [(b.e_range, b.f_range) for b in three] == [((0, 1), (0, 1)), ((1, 4), (2, 3)), ((4, 6), (4, 5))]
    assert [b.ids.tolist() for b in three] == [[0], [1, 3], [4, 5]]
    assert [b.f_ids.tolist() for b in three] == [[0], [2], [4]]
    two = W.text_blocks(survey.used, survey.used_f, *bits, most=2)
    assert [(b.e_range, b.f_range) for b in two] == [((0, 2), (0, 1)), ((3, 6), (2, 5))]
    assert [b.ids.tolist() for b in two] == [[0, 1], [3, 4, 5]] and [b.f_ids.tolist() for b in two] == [[0], [2, 4]]


def test_a_texts_file_holds_its_blocks_rows_and_copies_to_the_bytes_of_one_writer(tmp_path, monkeypatch):
    """write_text_file: a block's `phrase` rows (id, text, n_words, count, lhs) and its
    `foreign_phrase` rows, in id order, in tables of the database's own columns. Copied into a
    new database (_copy_texts: named columns), or by SQLite's transfer of whole records (SELECT *
    of the same schema), the texts' transaction gives the file _insert_texts writes from Python."""
    monkeypatch.setattr(W, "TEXT_BLOCK", 2)
    kw = _gapped()
    survey = W.survey_chunks(_gapped_chunks, [{}, {}], [])
    blocks = W.text_blocks(survey.used, survey.used_f, *W.write_id_bits(tmp_path, survey))
    files = [tmp_path / f"t{b.b}.db" for b in blocks]
    for f, b in zip(files, blocks):
        W.write_text_file(f, b, kw["phrases"], kw["phrase_counts"], kw["lhs"], kw["foreign"])
    rows = [sqlite3.connect(f).execute("SELECT * FROM phrase ORDER BY id").fetchall() for f in files]
    assert rows == [_GAPPED_PHRASE_ROWS[:1], _GAPPED_PHRASE_ROWS[1:3], _GAPPED_PHRASE_ROWS[3:]]
    assert [sqlite3.connect(f).execute("SELECT * FROM foreign_phrase").fetchall() for f in files] == \
        [[r] for r in _GAPPED_FOREIGN_ROWS]
    main = sqlite3.connect(":memory:")
    main.executescript(W.schema_sql(2))
    for table in ("phrase", "foreign_phrase"):
        assert sqlite3.connect(files[0]).execute(f"PRAGMA table_info({table})").fetchall() == \
            main.execute(f"PRAGMA table_info({table})").fetchall()

    def texts_db(name, how):
        conn = sqlite3.connect(tmp_path / name, isolation_level=None)
        W.begin_load(conn, 2, 3)
        if how == "python":
            W._insert_texts(conn, survey, kw["phrases"], kw["foreign"], kw["lhs"], kw["phrase_counts"])
        elif how == "named":
            W._copy_texts(conn, files, survey, kw["foreign"])
        else:
            for k, f in enumerate(files):
                conn.execute(f"ATTACH DATABASE ? AS t{k}", (str(f),))
            for table in ("phrase", "foreign_phrase"):
                for k in range(len(files)):
                    conn.execute(f"INSERT INTO main.{table} SELECT * FROM t{k}.{table}")
            conn.execute("COMMIT")
        conn.close()
        return _sha256(tmp_path / name)

    assert texts_db("python.db", "python") == texts_db("named.db", "named") == texts_db("xfer.db", "xfer")
    assert sqlite3.connect(tmp_path / "named.db").execute("SELECT * FROM phrase").fetchall() == _GAPPED_PHRASE_ROWS
    # a caller's mapping of foreign texts: every entry, written by _copy_texts itself (the tasks get none)
    conn = sqlite3.connect(tmp_path / "mapping.db", isolation_level=None)
    W.begin_load(conn, 2, 3)
    W._copy_texts(conn, [_empty_foreign(tmp_path, f) for f in files], survey, _GAPPED_FOREIGN)
    assert conn.execute("SELECT * FROM foreign_phrase").fetchall() == sorted(_GAPPED_FOREIGN.items())


def _empty_foreign(tmp_path, f):
    """A copy of a texts file without its foreign rows (what a task writes given a mapping)."""
    g = tmp_path / f"nf-{f.name}"
    g.write_bytes(f.read_bytes())
    sqlite3.connect(g, isolation_level=None).execute("DELETE FROM foreign_phrase")
    return g


def test_the_workers_write_the_texts_in_blocks_and_the_same_file(tmp_path, monkeypatch, engine, caplog):
    """With workers, the texts are 3 tasks (TEXT_BLOCK = 2 over 5 stored ids with a gap), the pairs
    3 (BLOCK_ROWS = 3 over 8 rows); the file is the one writer's, byte for byte, with the texts
    of the stored ids only, and every scratch file is removed."""
    monkeypatch.setattr(W, "TEXT_BLOCK", 2)
    monkeypatch.setattr(W, "BLOCK_ROWS", 3)
    one = write_database_chunks(tmp_path / "one.db", **_gapped())
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    before = engine.task_seconds.get("store-texts", 0)
    with caplog.at_level("INFO", logger="pivot"):
        two = write_database_chunks(tmp_path / "two.db", **_gapped(), engine=engine, scratch=scratch)
    assert _sha256(one) == _sha256(two)
    assert engine.task_seconds["store-texts"] > before and os.listdir(scratch) == []
    assert any(r.getMessage().startswith("  store-texts: 3 tasks") for r in caplog.records)
    conn = sqlite3.connect(two)
    assert conn.execute("SELECT * FROM phrase ORDER BY id").fetchall() == _GAPPED_PHRASE_ROWS
    assert conn.execute("SELECT * FROM foreign_phrase ORDER BY id").fetchall() == _GAPPED_FOREIGN_ROWS
    assert conn.execute("SELECT count(*), min(pivot1), max(pivot1) FROM pair").fetchone() == (8, 0, 4)


def _idle(engine, seconds=30.0):
    """Wait until no task runs on the workers (a task of a failed write may still be running)."""
    import time

    client, t0 = engine.client(), time.monotonic()
    while any(client.processing().values()) and time.monotonic() - t0 < seconds:
        time.sleep(0.05)


def test_a_pivot_without_text_fails_the_write_on_the_workers(tmp_path, monkeypatch, engine):
    """A texts task whose pivot has no text fails the write with the one writer's error; the
    database is not written and no texts' scratch file is left (a pair task that was running
    may leave its file, under a name a later build's sweep removes)."""
    from pivot.locking import stale_owner

    monkeypatch.setattr(W, "BLOCK_ROWS", 3)
    kw = _gapped(foreign=_TextsOf(_GAPPED_FOREIGN, missing=[4]))
    with pytest.raises(ValueError, match=r"1 pivot id\(s\) have no text in `foreign`, e.g. \[4\]"):
        write_database_chunks(tmp_path / "a.db", **kw)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with pytest.raises(ValueError, match=r"1 pivot id\(s\) have no text in `foreign`, e.g. \[4\]"):
        write_database_chunks(tmp_path / "a.db", **kw, engine=engine, scratch=scratch)
    _idle(engine)
    assert sorted(os.listdir(tmp_path)) == ["scratch"]
    left = os.listdir(scratch)
    assert [n for n in left if ".pairs-" not in n] == [] and all(stale_owner(n) == os.getpid() for n in left)
