"""The database: round trip, ranks, reverse probabilities, atomic write, PPDB lines."""
import math
import sqlite3

import numpy as np
import pytest

from pivot.store.db import ParaphraseDB, _rank_within_e1, _reverse_lookup, export_ppdb, ppdb_line, write_database
from pivot.errors import InputError

# Phrases 0..3; pairs and two models. Model "general" scores every pair, "dom" only some.
PHRASES = ["treat", "cure", "handle", "look after"]
E1 = np.array([0, 0, 0, 1, 2], dtype=np.int32)
E2 = np.array([1, 2, 3, 0, 0], dtype=np.int32)
SCORES = np.array([
    [0.5, 0.6],   # treat -> cure
    [0.2, 0.0],   # treat -> handle   (dom: absent)
    [0.5, 0.1],   # treat -> look after (ties with cure under general: e2=1 ranks first)
    [0.4, 0.3],   # cure -> treat
    [0.25, 0.0],  # handle -> treat
])
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


@pytest.fixture
def db_path(tmp_path):
    path = tmp_path / "t.db"
    write_database(
        path, phrases=PHRASES, phrase_counts=np.array([10, 4, 7, 2]), e1=E1, e2=E2,
        n_pivots=np.array([2, 1, 1, 2, 1]), pivots=["fr:traiter|fr:soigner", "fr:traiter", "de:x", "fr:traiter|fr:soigner", "fr:traiter"],
        models=MODELS, scores=SCORES, meta={"signature": "test-sig", "normalization": {"lang": "en"}},
    )
    return path


def test_rank_within_e1_breaks_ties_by_e2():
    # e1=0 has p = .5 (e2=1), .2 (e2=2), .5 (e2=3): ranks 0, 2, 1; e1=1 and e1=2 have one row each.
    assert _rank_within_e1(E1, E2, SCORES[:, 0]).tolist() == [0, 2, 1, 0, 0]


def test_reverse_lookup():
    # (0,1) reverse is (1,0)=.4; (0,2) reverse (2,0)=.25; (0,3) has no reverse; (1,0)->.5; (2,0)->.2
    rev = _reverse_lookup(E1, E2, SCORES[:, 0])
    assert rev[[0, 1, 3, 4]].tolist() == [0.4, 0.25, 0.5, 0.2]
    assert math.isnan(rev[2])


def test_lookup_round_trip(db_path):
    with ParaphraseDB(db_path) as db:
        assert db.models == ["general", "dom", "general+dom"]
        hits = db.lookup("treat", k=10)
        assert [(h.paraphrase, h.score, h.p_rev, h.rank) for h in hits] == [
            ("cure", 0.5, 0.4, 0), ("look after", 0.5, None, 1), ("handle", 0.2, 0.25, 2)]
        assert hits[0].pivots == ("fr:traiter", "fr:soigner") and hits[0].n_pivots == 2
        assert [h.paraphrase for h in db.lookup("Treat", k=2)] == ["cure", "look after"]
        # dom drops the zero-scored pair and ranks by its own scores
        assert [(h.paraphrase, h.score) for h in db.lookup("treat", model="dom")] == [("cure", 0.6), ("look after", 0.1)]
        assert db.lookup("unknown phrase") == []
        assert db.signature == "test-sig"
        assert db.n_pairs("general") == 5 and db.n_pairs("dom") == 3
        s = db.scores([("treat", "cure"), ("treat", "handle"), ("cure", "nothing")], model="dom")
        assert s[0] == 0.6 and math.isnan(s[1]) and math.isnan(s[2])


def test_combined_model_is_computed_from_stored_scores(db_path):
    # treat->cure: x = .5*.6 = .3 -> .3/1.3; treat->look after: x = .5*.1 = .05 -> .05/1.05;
    # treat->handle: dom absent, floor 1e-10: x = .2e-10 -> 2e-11/(1+2e-11)
    with ParaphraseDB(db_path) as db:
        hits = db.lookup("treat", model="general+dom")
        assert [h.paraphrase for h in hits] == ["cure", "look after", "handle"]
        assert [h.score for h in hits] == pytest.approx([0.3 / 1.3, 0.05 / 1.05, 2e-11], rel=1e-12)
        assert hits[0].pivots == ("fr:traiter", "fr:soigner") and hits[0].rank == 0
        s = db.scores([("treat", "cure"), ("cure", "treat"), ("cure", "handle")], model="general+dom")
        # cure->treat: x = .4*.3 = .12
        assert s[:2] == pytest.approx([0.3 / 1.3, 0.12 / 1.12], rel=1e-12) and math.isnan(s[2])
        assert db.n_pairs("general+dom") == 5
        rows = list(db.iter_pairs("general+dom"))
        assert [(a, b) for a, b, *_ in rows] == [("treat", "cure"), ("treat", "look after"), ("treat", "handle"),
                                                 ("cure", "treat"), ("handle", "treat")]


def test_lookup_uses_the_primary_key(db_path):
    conn = sqlite3.connect(db_path)
    plan = " ".join(r[-1] for r in conn.execute(
        "EXPLAIN QUERY PLAN SELECT e2, p FROM score WHERE model=0 AND e1=0 AND rank < 10 ORDER BY rank"))
    assert "SEARCH score USING PRIMARY KEY (model=? AND e1=? AND rank<?)" in plan
    plan = " ".join(r[-1] for r in conn.execute("EXPLAIN QUERY PLAN SELECT id FROM phrase WHERE text='treat'"))
    assert "USING COVERING INDEX" in plan or "USING INDEX" in plan


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
        write_database(path, phrases=PHRASES, phrase_counts=np.ones(4), e1=E1, e2=E2,
                       n_pivots=np.ones(5), pivots=[""] * 5, models=MODELS[:1], scores=SCORES, meta={})
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(IndexError):  # fails while inserting: the temporary file is removed too
        write_database(path, phrases=PHRASES[:2], phrase_counts=np.ones(4), e1=E1, e2=E2, n_pivots=np.ones(5),
                       pivots=[""] * 5, models=MODELS[:2], scores=SCORES, meta={})
    assert list(tmp_path.iterdir()) == []


def test_ppdb_line_format():
    # -ln(0.5) = 0.693147..., -ln(0.25) = 1.386294...
    line = ppdb_line("treat", "cure", 0.5, 0.25, 2, model="general")
    fields = line.split(" ||| ")
    assert fields == ["[X]", "treat", "cure",
                      "-logp(e2|e1)=0.693147 -logp(e1|e2)=1.38629 NumPivots=2 Model=general",
                      "0-0", "OtherRelated"]
    assert ppdb_line("look after", "treat", 1.0, None, 1, model="m").split(" ||| ")[3:] == [
        "-logp(e2|e1)=-0 NumPivots=1 Model=m", "", "OtherRelated"]


def test_export_ppdb(db_path):
    import io

    out = io.StringIO()
    with ParaphraseDB(db_path) as db:
        assert export_ppdb(db, out, model="dom") == 3
    lines = out.getvalue().splitlines()
    assert [l.split(" ||| ")[1:3] for l in lines] == [["treat", "cure"], ["treat", "look after"], ["cure", "treat"]]
    assert all(len(l.split(" ||| ")) == 6 for l in lines)
