"""The database: schema, round trip, ranks and ties, reverse probabilities, atomic and
deterministic writes (PPDB lines: tests/test_export.py)."""
import hashlib
import math
import sqlite3

import numpy as np
import pytest

from pivot.store.db import ParaphraseDB
from pivot.store.write import SCHEMA_VERSION, write_database
from pivot.errors import InputError

# Phrases 0..3; pairs and two models. Model "general" scores every pair, "dom" only some.
PHRASES = ["treat", "cure", "handle", "look after"]
E1 = np.array([0, 0, 0, 1, 2], dtype=np.int32)
E2 = np.array([1, 2, 3, 0, 0], dtype=np.int32)
SCORES = np.array([
    [0.5, 0.6],   # treat -> cure
    [0.2, 0.15],  # treat -> handle
    [0.5, 0.1],   # treat -> look after (ties with cure under general: e2=1 ranks first)
    [0.4, 0.3],   # cure -> treat
    [0.25, 0.0],  # handle -> treat   (dom: absent, so treat -> handle has no p_rev under dom)
])
N_PIVOTS = np.array([2, 1, 1, 2, 1])
FOREIGN = {0: "fr:traiter", 1: "fr:soigner", 2: "de:x"}
PIVOTS = np.array([[0, 1, -1], [0, -1, -1], [2, -1, -1], [0, 1, -1], [0, -1, -1]], dtype=np.int32)
# A combined model with coefficients chosen so that its score is readable by hand:
# eta = ln p_general + ln p_dom, so score = sigmoid(ln(p_g * p_d)) = x / (1 + x) with x = p_g * p_d.
FIT = {"model": "logit", "method": "mle", "features": ["const", "log_p_general", "log_p_x", "x_missing"],
       "params": {"const": 0.0, "log_p_general": 1.0, "log_p_x": 1.0, "x_missing": 0.0},
       "bse": None, "converged": True, "n": 10, "n_positive": 5, "llf": -1.0, "dropped": [],
       "reason": None, "floor_p": 1e-10}
MODELS = [{"name": "general", "kind": "pivot", "description": "all", "params": {}},
          {"name": "dom", "kind": "pivot", "description": "domain", "params": {"tau": 3}},
          {"name": "general+dom", "kind": "combined", "description": "both",
           "params": {"base": "general", "other": "dom", "fit": FIT}}]
META = {"signature": "test-sig", "normalization": {"lang": "en"}}


def _write(path, order=slice(None), **over):
    kwargs = dict(phrases=PHRASES, phrase_counts=np.array([10, 4, 7, 2]), e1=E1[order], e2=E2[order],
                  n_pivots=N_PIVOTS[order], pivots=PIVOTS[order], foreign=FOREIGN, models=MODELS,
                  scores=SCORES[order], meta=META)
    kwargs.update(over)
    return write_database(path, **kwargs)


@pytest.fixture
def db_path(tmp_path):
    return _write(tmp_path / "t.db")


def _sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_schema_holds_one_row_per_pair(db_path):
    conn = sqlite3.connect(db_path)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
    assert tables == ["foreign_phrase", "meta", "model", "pair", "phrase", "sqlite_stat1"]
    assert [r[1] for r in conn.execute("PRAGMA table_info(pair)")] == [
        "e1", "e2", "n_pivots", "pivot1", "pivot2", "pivot3", "p_0", "p_1", "form", "ppdb2",
        "rel_eq", "rel_fwd", "rel_rev", "rel_excl", "rel_other", "rel_indep", "relation"]
    # Key order; NULL for "no pivot" and for a model's zero. Written without PPDB 2.0's layer:
    # no flag, score 0, unclassified (OtherRelated, 1000 per mille, index 4).
    layer = (0, 0.0, 0, 0, 0, 0, 1000, 0, 4)
    assert conn.execute("SELECT * FROM pair").fetchall() == [
        (0, 1, 2, 0, 1, None, 0.5, 0.6, *layer),
        (0, 2, 1, 0, None, None, 0.2, 0.15, *layer),
        (0, 3, 1, 2, None, None, 0.5, 0.1, *layer),
        (1, 0, 2, 0, 1, None, 0.4, 0.3, *layer),
        (2, 0, 1, 0, None, None, 0.25, None, *layer)]
    assert conn.execute("SELECT * FROM foreign_phrase").fetchall() == [(0, "fr:traiter"), (1, "fr:soigner"), (2, "de:x")]
    assert conn.execute("SELECT * FROM phrase").fetchall() == [
        (0, "treat", 1, 10, "[X]"), (1, "cure", 1, 4, "[X]"), (2, "handle", 1, 7, "[X]"),
        (3, "look after", 2, 2, "[X]")]
    assert conn.execute("SELECT name, kind, score_column, n_pairs FROM model ORDER BY id").fetchall() == [
        ("general", "pivot", "p_0", 5), ("dom", "pivot", "p_1", 4), ("general+dom", "combined", None, 5)]
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    assert conn.execute("SELECT value FROM meta WHERE key = 'default_model'").fetchone() == ('"general"',)
    assert SCHEMA_VERSION == 3


def test_lookup_default_k_is_the_recipes_top_n(tmp_path, db_path):
    # The database stores every pair above the floor; how many a lookup shows by default is
    # the recipe's top_n recorded in meta.pruning (10 when a database records none).
    with ParaphraseDB(db_path) as db:
        assert db.default_k == 10 and len(db.lookup("treat")) == 3
    path = _write(tmp_path / "k2.db", meta={**META, "pruning": {"lookup_top_n": 2, "top_n": 0}})
    with ParaphraseDB(path) as db:
        assert db.default_k == 2
        assert [h.paraphrase for h in db.lookup("treat")] == ["cure", "look after"]
        assert len(db.lookup("treat", k=3)) == 3


def test_lookup_round_trip(db_path):
    with ParaphraseDB(db_path) as db:
        assert db.models == ["general", "dom", "general+dom"]
        assert db.model_info("dom")["column"] == "p_1"
        hits = db.lookup("treat", k=10)
        assert [(h.paraphrase, h.score, h.p_rev, h.rank) for h in hits] == [
            ("cure", 0.5, 0.4, 0), ("look after", 0.5, None, 1), ("handle", 0.2, 0.25, 2)]
        assert hits[0].pivots == ("fr:traiter", "fr:soigner") and hits[0].n_pivots == 2
        assert hits[1].pivots == ("de:x",) and hits[2].pivots == ("fr:traiter",)
        assert [h.paraphrase for h in db.lookup("Treat", k=2)] == ["cure", "look after"]
        assert db.lookup("treat", k=0) == []
        assert db.lookup("unknown phrase") == []
        assert db.signature == "test-sig"
        assert db.n_pairs("general") == 5 and db.n_pairs("dom") == 4 and db.n_phrases() == 4
        s = db.scores([("treat", "cure"), ("handle", "treat"), ("cure", "nothing")], model="dom")
        assert s[0] == 0.6 and math.isnan(s[1]) and math.isnan(s[2])


def test_ranks_sort_by_the_model_and_break_ties_by_e2(db_path):
    with ParaphraseDB(db_path) as db:
        # general: cure and look after tie at .5; e2 id 1 < 3, so cure first, at either k.
        assert [(h.paraphrase, h.rank) for h in db.lookup("treat", k=1)] == [("cure", 0)]
        assert [(h.paraphrase, h.rank) for h in db.lookup("treat", k=2)] == [("cure", 0), ("look after", 1)]
        # dom ranks by its own column: .6, .15, .1
        assert [(h.paraphrase, h.score, h.rank) for h in db.lookup("treat", model="dom")] == [
            ("cure", 0.6, 0), ("handle", 0.15, 1), ("look after", 0.1, 2)]
        # a model that gives the pair 0 drops it: handle -> treat exists only under general
        assert db.lookup("handle", model="dom") == []
        assert [(h.paraphrase, h.score, h.rank) for h in db.lookup("handle")] == [("treat", 0.25, 0)]


def test_ties_are_broken_by_e2_id_not_by_insertion_order(tmp_path):
    # Five pairs of phrase 0 all scored .3, given in descending e2 order: ranks follow e2 ascending.
    phrases = ["a", "b", "c", "d", "e", "f"]
    e2 = np.array([5, 4, 3, 2, 1])
    path = write_database(tmp_path / "tie.db", phrases=phrases, phrase_counts=np.ones(6), e1=np.zeros(5, int),
                          e2=e2, n_pivots=np.zeros(5, int), pivots=np.full((5, 3), -1), foreign={},
                          models=MODELS[:1], scores=np.full((5, 1), 0.3), meta=META)
    with ParaphraseDB(path) as db:
        hits = db.lookup("a", k=3)
        assert [(h.paraphrase, h.rank, h.pivots, h.p_rev) for h in hits] == [
            ("b", 0, (), None), ("c", 1, (), None), ("d", 2, (), None)]


def test_p_rev_is_the_reverse_pair_under_the_same_model(db_path):
    with ParaphraseDB(db_path) as db:
        # general: (1,0) = .4 and (0,1) = .5 are each other's reverse; (0,3) has no reverse pair
        assert [(h.paraphrase, h.p_rev) for h in db.lookup("cure")] == [("treat", 0.5)]
        # dom: treat -> cure's reverse is dom(cure -> treat) = .3; treat -> handle's reverse pair
        # exists but dom gives it 0, so no p_rev; cure -> treat's reverse is dom(treat -> cure) = .6
        assert [(h.paraphrase, h.p_rev) for h in db.lookup("treat", model="dom")] == [
            ("cure", 0.3), ("handle", None), ("look after", None)]
        assert [(h.paraphrase, h.p_rev) for h in db.lookup("cure", model="dom")] == [("treat", 0.6)]
        assert [(a, b, p, r) for a, b, p, r, *_ in db.iter_pairs("dom")] == [
            ("treat", "cure", 0.6, 0.3), ("treat", "handle", 0.15, None), ("treat", "look after", 0.1, None),
            ("cure", "treat", 0.3, 0.6)]


def test_combined_model_is_computed_from_stored_scores(db_path):
    # treat->cure: x = .5*.6 = .3 -> .3/1.3; treat->look after: x = .5*.1 = .05 -> .05/1.05;
    # treat->handle: x = .2*.15 = .03 -> .03/1.03
    with ParaphraseDB(db_path) as db:
        hits = db.lookup("treat", model="general+dom")
        assert [h.paraphrase for h in hits] == ["cure", "look after", "handle"]
        assert [h.score for h in hits] == pytest.approx([0.3 / 1.3, 0.05 / 1.05, 0.03 / 1.03], rel=1e-12)
        assert [h.rank for h in hits] == [0, 1, 2] and all(h.p_rev is None for h in hits)
        assert hits[0].pivots == ("fr:traiter", "fr:soigner") and hits[0].n_pivots == 2
        assert [h.paraphrase for h in db.lookup("treat", k=1, model="general+dom")] == ["cure"]
        # handle->treat: dom absent, floor 1e-10: x = .25e-10
        assert db.lookup("handle", model="general+dom")[0].score == pytest.approx(2.5e-11, rel=1e-9)
        s = db.scores([("treat", "cure"), ("cure", "treat"), ("cure", "handle")], model="general+dom")
        # cure->treat: x = .4*.3 = .12
        assert s[:2] == pytest.approx([0.3 / 1.3, 0.12 / 1.12], rel=1e-12) and math.isnan(s[2])
        assert db.n_pairs("general+dom") == 5
        rows = list(db.iter_pairs("general+dom"))
        assert [(a, b) for a, b, *_ in rows] == [("treat", "cure"), ("treat", "look after"), ("treat", "handle"),
                                                 ("cure", "treat"), ("handle", "treat")]
        assert rows[0][2] == pytest.approx(0.3 / 1.3, rel=1e-12)
        assert rows[0][3:] == (None, 2, "fr:traiter|fr:soigner")


def test_lookup_uses_the_primary_key(db_path):
    conn = sqlite3.connect(db_path)
    plan = " ".join(r[-1] for r in conn.execute(
        "EXPLAIN QUERY PLAN SELECT e2, p_0 FROM pair WHERE e1 = 0 AND p_0 IS NOT NULL ORDER BY p_0 DESC, e2 LIMIT 10"))
    assert "SEARCH pair USING PRIMARY KEY (e1=?)" in plan
    plan = " ".join(r[-1] for r in conn.execute(
        "EXPLAIN QUERY PLAN SELECT p_0 FROM pair WHERE e1 = 1 AND e2 = 0"))
    assert "SEARCH pair USING PRIMARY KEY (e1=? AND e2=?)" in plan
    plan = " ".join(r[-1] for r in conn.execute("EXPLAIN QUERY PLAN SELECT id FROM phrase WHERE text='treat'"))
    assert "USING COVERING INDEX" in plan or "USING INDEX" in plan


def test_rewrite_is_byte_identical(tmp_path):
    a = _write(tmp_path / "a.db")
    b = _write(tmp_path / "b.db")
    # The writer sorts the pairs itself: any input order gives the same file.
    c = _write(tmp_path / "c.db", order=np.array([4, 2, 0, 3, 1]))
    assert _sha256(a) == _sha256(b) == _sha256(c)
    # Small batches change nothing either.
    d = _write(tmp_path / "d.db", batch_rows=2)
    assert _sha256(d) == _sha256(a)


def test_empty_database(tmp_path):
    empty = np.zeros(0, dtype=np.int32)
    path = write_database(tmp_path / "e.db", phrases=[], phrase_counts=empty, e1=empty, e2=empty,
                          n_pivots=empty, pivots=np.zeros((0, 3), dtype=np.int32), foreign={},
                          models=MODELS, scores=np.zeros((0, 2)), meta=META)
    with ParaphraseDB(path) as db:
        assert db.n_pairs() == 0 and db.n_pairs("general+dom") == 0 and db.lookup("treat") == []
        assert list(db.iter_pairs("dom")) == [] and list(db.iter_pairs("general+dom")) == []


def test_old_schema_is_refused(db_path):
    conn = sqlite3.connect(db_path)
    conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(InputError, match="schema version 1.*rebuild"):
        ParaphraseDB(db_path)


def test_unknown_model_and_missing_db(db_path, tmp_path):
    with ParaphraseDB(db_path) as db, pytest.raises(InputError, match="unknown model 'nope'.*general, dom"):
        db.lookup("treat", model="nope")
    with pytest.raises(InputError, match="no such paraphrase database"):
        ParaphraseDB(tmp_path / "absent.db")
    junk = tmp_path / "junk.db"
    junk.write_text("not sqlite at all")
    with pytest.raises(InputError, match="not a pivot paraphrase database"):
        ParaphraseDB(junk)


def test_failed_write_leaves_nothing(tmp_path):
    path = tmp_path / "t.db"
    with pytest.raises(ValueError, match="scores has shape"):
        _write(path, models=MODELS[:1])
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="no text in `foreign`"):
        _write(path, foreign={0: "fr:traiter"})
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(IndexError):  # fails while inserting phrases
        _write(path, phrases=PHRASES[:2])
    assert list(tmp_path.iterdir()) == []
    # A model spec whose params are not JSON fails after every pair was written: the
    # temporary file goes too.
    bad = [MODELS[0], {**MODELS[1], "params": {"tau": {3}}}, MODELS[2]]
    with pytest.raises(TypeError, match="not JSON serializable"):
        _write(path, models=bad)
    assert list(tmp_path.iterdir()) == []
    # A duplicate pair violates the primary key in the middle of the load.
    dup = np.array([0, 1, 1, 2, 3, 4])
    with pytest.raises(sqlite3.IntegrityError):
        _write(path, order=dup)
    assert list(tmp_path.iterdir()) == []
    # A failed rewrite leaves the previous database in place, untouched.
    _write(path)
    before = _sha256(path)
    with pytest.raises(TypeError):
        _write(path, models=bad)
    assert [p.name for p in tmp_path.iterdir()] == ["t.db"] and _sha256(path) == before


def _chunk(rows):
    from pivot.store.write import PairChunk
    return PairChunk(E1[rows], E2[rows], N_PIVOTS[rows], PIVOTS[rows], SCORES[rows])


def test_chunked_write_is_the_same_file_as_the_whole_table(tmp_path):
    from pivot.store.write import write_database_chunks

    whole = _write(tmp_path / "whole.db")
    # The pairs in (e1, e2) order are rows 0, 1, 2 (e1 = 0), 3 (e1 = 1), 4 (e1 = 2); cut after row
    # 1 and after row 3, with an empty chunk between (an empty row range of the pivot stage).
    chunks = [_chunk([0, 1]), _chunk([]), _chunk([2, 3]), _chunk([4])]
    seen = []

    def parts():
        seen.append(1)
        return iter(chunks)

    chunked = write_database_chunks(tmp_path / "chunked.db", phrases=PHRASES, phrase_counts=np.array([10, 4, 7, 2]),
                                    chunks=parts, foreign=FOREIGN, models=MODELS, meta=META)
    assert _sha256(chunked) == _sha256(whole)
    assert len(seen) == 2  # read twice: ids and counts, then rows
    # Texts asked for after the first pass, for exactly the ids the pairs use: the same file.
    asked = {}

    def texts(table, name):
        def lookup(ids):
            asked[name] = ids.tolist()
            return {i: table[i] for i in ids.tolist()}
        return lookup

    lazy = write_database_chunks(tmp_path / "lazy.db", phrases=texts(PHRASES, "e"), phrase_counts=np.array([10, 4, 7, 2]),
                                 chunks=parts, foreign=texts(FOREIGN, "f"), models=MODELS, meta=META)
    assert _sha256(lazy) == _sha256(whole)
    assert asked == {"e": [0, 1, 2, 3], "f": [0, 1, 2]}


def test_chunks_out_of_key_order_are_refused_and_leave_no_file(tmp_path):
    from pivot.store.write import write_database_chunks

    for chunks in ([_chunk([3]), _chunk([0, 1, 2, 4])],  # e1 = 1 before e1 = 0
                   [_chunk([1, 0]), _chunk([2, 3, 4])]):  # inside a chunk: (0, 2) before (0, 1)
        with pytest.raises(ValueError, match="sorted by"):
            write_database_chunks(tmp_path / "x.db", phrases=PHRASES, phrase_counts=np.array([10, 4, 7, 2]),
                                  chunks=lambda: iter(chunks), foreign=FOREIGN, models=MODELS, meta=META)
        assert list(tmp_path.iterdir()) == []


def test_directed_scores_over_row_ranges_equal_the_whole_table():
    from pivot.pipeline.combine import directed_scores

    class Table:
        def __init__(self, rows):
            self.e1, self.e2, self.p = E1[rows], E2[rows], SCORES[rows]

    queries = [(0, 1), (2, 0), (3, 0), (1, 2), (None, 1)]
    whole = directed_scores(Table(slice(None)), queries)
    parts = directed_scores(iter([Table([0, 1, 2]), Table([3]), Table([4])]), queries)
    # p(b|a): (0,1) row 0, (2,0) row 4, (3,0) and (1,2) absent, unknown id 0.
    fwd = np.array([[0.5, 0.6], [0.25, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    # p(a|b): (1,0) row 3, (0,2) row 1, (0,3) row 2, (2,1) absent, unknown id 0.
    rev = np.array([[0.4, 0.3], [0.2, 0.15], [0.5, 0.1], [0.0, 0.0], [0.0, 0.0]])
    for got in (whole, parts):
        assert np.array_equal(got[0], fwd) and np.array_equal(got[1], rev)
