"""Phrase search (FTS5) and the datasette front end, on a synthetic database."""
import asyncio
import hashlib
import json
import shutil
import sqlite3
from urllib.parse import urlencode

import numpy as np
import pytest

from pivot import cli
from pivot.errors import InputError
from pivot.store import search as S
from pivot.store.db import ParaphraseDB
from pivot.store.write import write_database

PHRASES = ["tumor", "tumour", "tumors", "the tumor", "tumor suppressor", "tumor suppressor gene", "rumor",
           "il-2", "il-2 gene", "il-2r", "café au lait", "denosumab", "treat", "cure", "to treat", "a[b]c"]
COUNTS = [50, 20, 9, 8, 7, 3, 4, 12, 6, 2, 1, 5, 30, 25, 10, 1]
PAIRS = [(0, 1, 0.5, 0.4), (0, 2, 0.2, 0.0), (0, 3, 0.1, 0.3), (1, 0, 0.6, 0.5), (2, 0, 0.3, 0.0),
         (4, 5, 0.4, 0.2), (12, 13, 0.5, 0.6), (12, 14, 0.3, 0.1), (13, 12, 0.7, 0.0), (14, 12, 0.2, 0.2),
         (7, 9, 0.5, 0.5), (6, 0, 0.1, 0.0), (8, 10, 0.2, 0.0), (11, 15, 0.3, 0.0)]
FIT = {"model": "logit", "method": "mle", "features": ["const", "log_p_general", "log_p_x", "x_missing"],
       "params": {"const": 0.3, "log_p_general": 1.2, "log_p_x": 0.7, "x_missing": -0.5},
       "bse": None, "converged": True, "n": 10, "n_positive": 5, "llf": -1.0, "dropped": [],
       "reason": None, "floor_p": 1e-10}
MODELS = [{"name": "general", "kind": "general", "description": "every sentence pair", "params": {}},
          {"name": "dom", "kind": "top-tau", "description": "the in-domain pairs", "params": {}},
          {"name": "general+dom", "kind": "combined", "description": "logistic regression",
           "params": {"base": "general", "other": "dom", "fit": FIT}}]


STORED = sorted({PHRASES[i] for a, b, *_ in PAIRS for i in (a, b)})  # the phrase table holds these only


def _write(path):
    e1, e2, pg, pd = (np.array(c) for c in zip(*PAIRS))
    n = len(PAIRS)
    return write_database(
        path, phrases=PHRASES, phrase_counts=np.array(COUNTS), e1=e1, e2=e2,
        n_pivots=np.full(n, 2, dtype=np.int32), pivots=np.tile(np.array([[0, 1, -1]], dtype=np.int32), (n, 1)),
        foreign={0: "fr:tumeur", 1: "de:Tumor"}, models=MODELS, scores=np.column_stack([pg, pd]),
        meta={"signature": "syn-sig", "normalization": {"lang": "en"}})


@pytest.fixture
def db_path(tmp_path):
    return _write(tmp_path / "syn.db")


def _tables(path):
    with sqlite3.connect(path) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


# ------------------------------------------------------------------------------------ patterns


@pytest.mark.parametrize("pattern, fts", [
    ("tumo*r", '"tumo"*'), ("tumor supp*", '"tumor" AND "supp"*'), ("*mab", None), ("*", None),
    ("il-2*", '"il" AND "2"*'), ("il-2", '"il" AND "2"'), ("t?mor", '"t"*'), ("café*", '"caf"*'),
    ("*-2", '"2"'), ("TUMOR", '"tumor"'), ("a[b*", '"a" AND "b"*'),
])
def test_pattern_to_fts(pattern, fts):
    assert S.compile_pattern(pattern).fts == fts


def test_empty_pattern():
    with pytest.raises(InputError):
        S.compile_pattern("  ")


@pytest.mark.parametrize("pattern", ["tumo*r", "tumor", "tumor*", "*mor", "tum*", "t?mor", "tumor supp*",
                                     "supp* gene", "il-2*", "il-2", "*-2", "café*", "*é*", "*", "?",
                                     "treat", "to *", "a[b]c", "a[b*", "*]c", "gene", "au"])
@pytest.mark.parametrize("whole", [False, True])
def test_search_finds_exactly_what_a_scan_finds(db_path, pattern, whole):
    """The index only narrows: results equal a plain scan of every phrase with the pattern."""
    compiled = S.compile_pattern(pattern, whole=whole)
    expected = sorted((p for p in STORED if compiled.matches(p)), key=lambda p: (-COUNTS[PHRASES.index(p)], p))
    res = S.search(db_path, pattern, whole=whole, limit=None)
    assert [m.phrase for m in res.matches] == expected
    assert res.n_matches == len(expected)


def test_search_semantics(db_path):
    res = S.search(db_path, "tumo*r")
    assert [m.phrase for m in res.matches] == ["tumor", "tumour", "the tumor", "tumor suppressor",
                                              "tumor suppressor gene"]
    assert [m.count for m in res.matches] == [50, 20, 8, 7, 3]
    assert [m.n_paraphrases for m in res.matches] == [3, 1, 0, 1, 0]  # under general
    assert [m.n_paraphrases for m in S.search(db_path, "tumo*r", model="dom").matches] == [2, 1, 0, 1, 0]
    # a combined model proposes its base model's pairs
    assert S.search(db_path, "tumor", model="general+dom", whole=True).matches[0].n_paraphrases == 3
    assert [m.phrase for m in S.search(db_path, "tumo*r", whole=True).matches] == ["tumor", "tumour"]
    assert [m.phrase for m in S.search(db_path, "tumo*r", limit=2).matches] == ["tumor", "tumour"]
    assert S.search(db_path, "tumo*r", limit=2).n_matches == 5
    with pytest.raises(InputError, match="unknown model"):
        S.search(db_path, "tumor", model="nope")


def test_case_follows_the_database_normalization(tmp_path):
    path = write_database(
        tmp_path / "cased.db", phrases=["Tumor", "tumor", "IL-2"], phrase_counts=np.array([3, 2, 1]),
        e1=np.array([0, 1]), e2=np.array([1, 2]), n_pivots=np.array([1, 1]), pivots=np.array([[0], [0]]),
        foreign={0: "fr:x"}, models=MODELS[:1], scores=np.array([[0.5], [0.5]]),
        meta={"signature": "cased", "normalization": {"lang": "en", "lowercase": False}})
    assert [m.phrase for m in S.search(path, "Tum*").matches] == ["Tumor"]
    assert [m.phrase for m in S.search(path, "tum*").matches] == ["tumor"]
    assert [m.phrase for m in S.search(path, "IL-*").matches] == ["IL-2"]
    assert S.compile_pattern("IL-2*", lowercase=False).fts == '"il" AND "2"*'


def test_index_is_built_lazily_once_and_deterministically(tmp_path):
    a, b = _write(tmp_path / "a.db"), _write(tmp_path / "b.db")
    assert "phrase_fts" not in _tables(a)
    S.search(a, "*mab")  # a scan: no index needed, none built
    assert "phrase_fts" not in _tables(a)
    assert S.search(a, "tumor").n_matches == 4
    assert "phrase_fts" in _tables(a)
    assert S.build_phrase_index(a) is False  # already there
    assert S.build_phrase_index(b) is True
    digest = [hashlib.sha256(p.read_bytes()).hexdigest() for p in (a, b)]
    assert digest[0] == digest[1]
    # the reader still opens the indexed file, and its data is untouched
    with ParaphraseDB(a) as db:
        assert [p.paraphrase for p in db.lookup("tumor", normalize=False)] == ["tumour", "tumors", "the tumor"]


def test_read_only_database_without_index_is_a_clear_error(db_path, monkeypatch):
    monkeypatch.setattr(S.os, "access", lambda *a, **k: False)  # tests may run as root
    with pytest.raises(InputError, match="read-only.*copy it"):
        S.search(db_path, "tumor")
    assert "phrase_fts" not in _tables(db_path)
    with pytest.raises(InputError, match="read-only"):
        S.build_phrase_index(db_path)
    monkeypatch.undo()
    S.build_phrase_index(db_path)
    monkeypatch.setattr(S.os, "access", lambda *a, **k: False)
    assert S.search(db_path, "tumor").n_matches == 4  # with the index, read-only is fine


def test_search_refuses_what_is_not_a_database(tmp_path):
    with pytest.raises(InputError, match="no such"):
        S.search(tmp_path / "missing.db", "x")
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(InputError):
        S.search(junk, "x")
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(InputError, match="not a pivot"):
        S.build_phrase_index(other)


@pytest.mark.parametrize("name", ["a#b?.db", "50%.db", "file:x.db", "sp ace.db"])
def test_paths_are_never_uris(db_path, tmp_path, monkeypatch, name):
    odd = tmp_path / name
    shutil.copyfile(db_path, odd)
    monkeypatch.chdir(tmp_path)
    assert S.search(name, "tumo*r").n_matches == 5
    assert "phrase_fts" in _tables(odd)
    assert not (tmp_path / "a").exists() and not (tmp_path / "x.db").exists()  # no stray files


def test_cli_search(db_path, capsys):
    assert cli.main(["-q", "search", str(db_path), "tumo*r", "-n", "2"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[1].split() == ["tumor", "50", "3"] and out.splitlines()[2].split()[0] == "tumour"
    assert "5 phrases match" in err
    assert cli.main(["-q", "search", str(db_path), "tumor", "supp*", "--format", "json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [m["phrase"] for m in got["matches"]] == ["tumor suppressor", "tumor suppressor gene"]
    assert cli.main(["-q", "search", str(db_path), "zzz"]) == 1
    assert cli.main(["-q", "search", str(db_path)]) == 2
    assert cli.main(["-q", "search", str(db_path), "--build-index"]) == 0


# ------------------------------------------------------------------------------------ serve


def _get_json(ds, path):
    async def go():
        await ds.invoke_startup()
        response = await ds.client.get(path)
        assert response.status_code == 200, (path, response.text[:500])
        return response.json()

    return asyncio.run(go())


def test_metadata_describes_tables_columns_and_models(db_path):
    pytest.importorskip("datasette", reason="the serve extra is not installed")
    from pivot.store.serve import metadata

    meta = metadata(db_path)
    db = meta["databases"]["syn"]
    for table in ("meta", "model", "phrase", "foreign_phrase", "pair"):
        assert db["tables"][table]["description"]
    pair_cols = db["tables"]["pair"]["columns"]
    assert "every sentence pair" in pair_cols["p_0"] and "in-domain" in pair_cols["p_1"]
    for m in MODELS:
        assert m["name"] in db["description_html"] and m["description"] in db["description_html"]
    assert ":phrase" in db["queries"]["paraphrases"]["sql"] and ":model" in db["queries"]["paraphrases"]["sql"]
    assert "syn-sig" in meta["description_html"]
    assert cli.main(["-q", "serve", str(db_path), "--metadata", str(db_path.with_suffix(".json"))]) == 0
    assert json.loads(db_path.with_suffix(".json").read_text())["databases"]["syn"]["queries"]


@pytest.mark.parametrize("name", ["syn.db", "a#b?.db"])
def test_datasette_serves_pairs_and_the_canned_query(db_path, tmp_path, name):
    pytest.importorskip("datasette", reason="the serve extra is not installed")
    from pivot.store.serve import make_datasette

    path = tmp_path / name
    if name != "syn.db":
        shutil.copyfile(db_path, path)
    ds = make_datasette(path)
    db_name = "syn" if name == "syn.db" else "a_b_"
    rows = _get_json(ds, f"/{db_name}/pair.json?_shape=array")
    assert len(rows) == len(PAIRS) and {"e1", "e2", "p_0", "p_1"} <= set(rows[0])
    with ParaphraseDB(db_path) as db:
        for model in ("general", "dom", "general+dom"):
            for phrase in ("tumor", "treat"):
                query = urlencode({"_shape": "array", "phrase": phrase, "model": model})  # "+" is a space
                got = _get_json(ds, f"/{db_name}/paraphrases.json?{query}")
                want = db.lookup(phrase, k=100, model=model, normalize=False)
                assert got, (phrase, model)
                assert [r["paraphrase"] for r in got] == [p.paraphrase for p in want]
                assert [r["score"] for r in got] == pytest.approx([p.score for p in want], rel=1e-12)
                assert [r["p_rev"] for r in got] == [p.p_rev for p in want]
                assert got[0]["pivot1"] == "fr:tumeur"
    assert _get_json(ds, f"/{db_name}/paraphrases.json?_shape=array&phrase=nothing&model=general") == []
    models = _get_json(ds, f"/{db_name}/models.json?_shape=array")
    assert [m["name"] for m in models] == [m["name"] for m in MODELS]
    home = asyncio.run(ds.client.get(f"/{db_name}"))
    assert home.status_code == 200 and "the in-domain pairs" in home.text
