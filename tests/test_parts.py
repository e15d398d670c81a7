"""A database in parts (pivot.store.parts): the same answers, export bytes and signature as the
single file of the same table; a lookup opens one part; a damaged folder is one line."""
import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from pivot.errors import InputError
from pivot.store.db import ParaphraseDB
from pivot.store.export import export_ppdb
from pivot.store.parts import MANIFEST, check_replaceable, cut_ranges, write_database_parts
from pivot.store.write import PairChunk, write_database_chunks

PHRASES = ["treat", "cure", "handle", "look after", "heal", "remedy"]
COUNTS = np.array([10, 4, 7, 2, 5, 3])
# (e1, e2) in key order. Pairs per e1: 3, 2, 1, 1, 2, 1 (10 in all).
E1 = np.array([0, 0, 0, 1, 1, 2, 3, 4, 4, 5], dtype=np.int32)
E2 = np.array([1, 2, 3, 0, 4, 0, 5, 1, 5, 4], dtype=np.int32)
SCORES = np.array([[0.5, 0.6], [0.2, 0.15], [0.5, 0.1], [0.4, 0.3], [0.1, 0.0],
                   [0.25, 0.0], [0.9, 0.8], [0.3, 0.2], [0.6, 0.7], [0.35, 0.4]])
PPDB2 = np.array([3.1, 2.0, 2.5, 3.0, 1.5, 1.9, 4.0, 2.8, 3.3, 3.6])
FORM = np.array([0, 2, 0, 0, 8, 0, 0, 0, 1, 0])
REL = np.array([[700, 100, 50, 10, 120, 20]] * 10) + np.arange(10)[:, None] * np.array([-60, 60, 0, 0, 0, 0])
N_PIVOTS = np.array([2, 1, 1, 2, 1, 3, 1, 2, 1, 1])
PIVOTS = np.array([[0, 1, -1], [0, -1, -1], [2, -1, -1], [0, 1, -1], [1, -1, -1],
                   [0, 2, 1], [2, -1, -1], [1, 0, -1], [1, -1, -1], [2, -1, -1]], dtype=np.int32)
FOREIGN = {0: "fr:traiter", 1: "fr:soigner", 2: "de:heilen"}
FIT = {"model": "logit", "method": "mle", "features": ["const", "log_p_general", "log_p_x", "x_missing"],
       "params": {"const": 0.0, "log_p_general": 1.0, "log_p_x": 1.0, "x_missing": 0.0},
       "bse": None, "converged": True, "n": 10, "n_positive": 5, "llf": -1.0, "dropped": [],
       "reason": None, "floor_p": 1e-10}
MODELS = [{"name": "general", "kind": "pivot", "description": "all", "params": {}},
          {"name": "dom", "kind": "pivot", "description": "domain", "params": {"tau": 3}},
          {"name": "general+dom", "kind": "combined", "description": "both",
           "params": {"base": "general", "other": "dom", "fit": FIT}},
          {"name": "ppdb2", "kind": "learned", "description": "learned", "params": {}}]
#: The files of the 3-part folder: the manifest, the parts, the phrase index's shards.
FILES_3 = [MANIFEST, "part-0000.db", "part-0001.db", "part-0002.db", "phrases-0000.db", "phrases-0001.db",
           "phrases-0002.db"]
META = {"signature": "test-sig", "normalization": {"lang": "en"}, "ppdb2": {"learned": True},
        "relations": {"classified": True}}


def _chunks():
    # two chunks, cut inside part 0's range and inside part 2's, as the pivot stage's row ranges fall
    out = []
    for sl in (slice(0, 4), slice(4, 8), slice(8, 10)):
        out.append(PairChunk(E1[sl], E2[sl], N_PIVOTS[sl], PIVOTS[sl], SCORES[sl], form=FORM[sl], ppdb2=PPDB2[sl],
                             rel=REL[sl]))
    return out


def _kwargs():
    return dict(phrases=PHRASES, phrase_counts=COUNTS, chunks=_chunks, foreign=FOREIGN, models=MODELS, meta=META)


class Counts:
    """TableE1's questions answered from the pairs of each e1 id (e1_pairs[i]: the pairs whose e1
    is i): the cut by a count per id, the reference of the cut from the table's rows."""

    def __init__(self, e1_pairs):
        self.cum = np.cumsum(np.asarray(e1_pairs, np.int64))
        self.total = int(self.cum[-1]) if len(self.cum) else 0
        self.end = len(self.cum)

    def at(self, r: int) -> int:
        return int(np.searchsorted(self.cum, r, side="right"))   # the first id whose cumulative count > r

    def rows_below(self, x: int) -> int:
        return int(self.cum[x - 1]) if x > 0 else 0


@pytest.fixture
def built(tmp_path):
    single = write_database_chunks(tmp_path / "one.db", **_kwargs())
    folder = write_database_parts(tmp_path / "three", 3, **_kwargs())
    return single, folder


def test_ranges_are_cut_by_pair_count_at_phrase_boundaries():
    # cumulative pairs 3, 5, 6, 7, 9, 10; part 1 starts after the first id reaching ceil(10/3) = 4
    # (id 1), part 2 after the first reaching ceil(20/3) = 7 (id 3)
    assert cut_ranges(Counts(np.bincount(E1)), 3) == [(0, 2), (2, 4), (4, 6)]
    assert cut_ranges(Counts(np.bincount(E1)), 1) == [(0, 6)]
    with pytest.raises(InputError, match="--parts 7"):
        cut_ranges(Counts(np.bincount(E1)), 7)  # six first phrases cannot fill seven parts


def test_ranges_cut_from_the_chunks_rows_are_those_of_the_counts():
    from pivot.store.parts import TableE1

    # the table's e1 read from its three chunks (rows 4, 4, 2; e1 spans (0, 1), (1, 4), (4, 5))
    table = TableE1(_chunks, [4, 4, 2], [(0, 1), (1, 4), (4, 5)])
    # row 3 is the last of chunk 0 (e1 1), row 4 the first of chunk 1 (e1 1), row 9 the last (e1 5)
    assert [table.at(r) for r in (0, 3, 4, 6, 9)] == [0, 1, 1, 3, 5]
    # rows whose e1 < x: cumulative pairs 3, 5, 6, 7, 9, 10 shifted by one id
    assert [table.rows_below(x) for x in range(7)] == [0, 3, 5, 6, 7, 9, 10]
    assert (table.total, table.end) == (10, 6)
    assert cut_ranges(table, 3) == [(0, 2), (2, 4), (4, 6)]
    assert cut_ranges(table, 1) == [(0, 6)]
    with pytest.raises(InputError, match="--parts 7"):
        cut_ranges(table, 7)
    # a random table cut into random chunks: the same ranges as from its counts per id
    rng = np.random.default_rng(5)
    for _ in range(20):
        e1 = np.sort(rng.integers(0, 40, rng.integers(1, 200)))
        cuts = np.sort(rng.choice(np.arange(1, len(e1)), min(len(e1) - 1, 4), replace=False)) if len(e1) > 1 else []
        pieces = np.split(e1, cuts)

        class Chunks:
            def __call__(self):
                return iter([PairChunk(p, p, p, p[:, None], p[:, None].astype(float)) for p in pieces])
        t = TableE1(Chunks(), [len(p) for p in pieces], [(int(p[0]), int(p[-1])) for p in pieces])
        for n in (1, 2, 3, 5, 8):
            try:
                want = cut_ranges(Counts(np.bincount(e1)), n)
            except InputError:
                with pytest.raises(InputError):
                    cut_ranges(t, n)
                continue
            assert cut_ranges(t, n) == want


def test_the_survey_of_chunks_one_at_a_time_is_the_survey_of_all():
    from pivot.store.parts import survey_task
    from pivot.store.write import SurveyFold, survey_chunk, survey_chunks

    def merge_surveys(pieces, n_stored, learned):
        fold = SurveyFold(n_stored)
        for j, piece in enumerate(pieces):
            fold.add(j, piece)
        return fold.finish(learned)

    stored = MODELS[:2]
    whole = survey_chunks(_chunks, stored, MODELS[3:])

    class Counted:  # the build's StoreChunks says how many chunks a call yields
        n_chunks = 3

        def __call__(self):
            return iter(_chunks())
    pieces = [survey_task(Counted(), j, 2) for j in range(3)]
    merged = merge_surveys(pieces, 2, MODELS[3:])
    # by hand: 10 pairs, e1 pairs 3, 2, 1, 1, 2, 1; general proposes all, dom 8; every phrase
    # and pivot used; the chunks' rows 4, 4, 2
    assert (merged.n, merged.n_piv_cols, merged.n_pairs) == (whole.n, whole.n_piv_cols, whole.n_pairs) == (10, 3, [10, 8])
    assert merged.used.tolist() == whole.used.tolist() == [0, 1, 2, 3, 4, 5]
    assert merged.used_f.tolist() == whole.used_f.tolist() == [0, 1, 2]
    assert merged.chunk_rows == whole.chunk_rows == [4, 4, 2]
    # each chunk's first and last e1: rows 0..3 e1 0, 0, 0, 1; rows 4..7 1, 2, 3, 4; rows 8, 9 4, 5
    assert merged.chunk_e1 == whole.chunk_e1 == [(0, 1), (1, 4), (4, 5)]
    # chunk 1 alone (rows 4..7): e1 1, 2, 3, 4, e2 4, 0, 5, 1
    assert (pieces[1]["first"], pieces[1]["last"]) == (1 << 32 | 4, 4 << 32 | 1)
    # its distinct ids, ascending: e1 1..4 and e2 4, 0, 5, 1 (ids 0..5); pivots 1 | 0, 2, 1 | 2 | 1, 0
    assert pieces[1]["used"].tolist() == [0, 1, 2, 3, 4, 5] and pieces[1]["used"].dtype == np.int32
    assert pieces[1]["used_f"].tolist() == [0, 1, 2]
    # the pieces folded in any order (tasks come back so) are the same survey
    from pivot.store.write import SurveyFold
    fold = SurveyFold(2)
    for j in (2, 0, 1):
        fold.add(j, pieces[j])
    shuffled = fold.finish(MODELS[3:])
    assert (shuffled.n, shuffled.n_pairs, shuffled.chunk_rows, shuffled.chunk_e1, shuffled.used.tolist()) == \
        (10, [10, 8], [4, 4, 2], [(0, 1), (1, 4), (4, 5)], [0, 1, 2, 3, 4, 5])
    with pytest.raises(ValueError, match="each after the previous one"):
        merge_surveys([pieces[1], pieces[0], pieces[2]], 2, MODELS[3:])
    with pytest.raises(ValueError, match="fewer than 4"):
        survey_task(Counted(), 3, 2)
    c = _chunks()[0]
    with pytest.raises(ValueError, match=r"scores has shape \(4, 2\), expected \(4, 3\)"):
        survey_chunk(c, 3)


def test_manifest_lists_each_part_with_its_range_and_rows(built):
    _, folder = built
    m = json.loads((folder / MANIFEST).read_text())
    assert m["signature"] == "test-sig" and m["n_parts"] == 3 and m["n_pairs"] == 10 and m["n_phrases"] == 6
    parts = m["parts"]
    assert [p["file"] for p in parts] == ["part-0000.db", "part-0001.db", "part-0002.db"]
    assert [p["e1_range"] for p in parts] == [[0, 2], [2, 4], [4, 6]]
    assert [(p["first"]["text"], p["last"]["text"]) for p in parts] == [("treat", "cure"), ("handle", "look after"),
                                                                        ("heal", "remedy")]
    assert [p["n_pairs"] for p in parts] == [5, 2, 3]
    # reverse rows: those of another part whose e2 lies here: (2,0) (4,1) | (0,2) (0,3) | (1,4) (3,5)
    assert [p["n_reverse"] for p in parts] == [2, 2, 2]
    # general proposes all 10 pairs, dom the 8 with a positive score, learned all 10
    assert {x["name"]: x["n_pairs"] for x in m["models"]} == {"general": 10, "dom": 8, "general+dom": 10, "ppdb2": 10}
    assert sorted(os.listdir(folder)) == FILES_3
    assert not [p for p in os.listdir(folder.parent) if p.startswith(".")]  # no staging folder left


def test_the_phrase_index_is_sharded_by_the_crc32_of_the_text(built):
    import sqlite3
    import zlib

    _, folder = built
    # zlib.crc32 % 3 (the reference): treat 1859403533 -> 2, cure 2050794473 -> 2, handle 2441093337 -> 0,
    # look after 1664865439 -> 1, heal 2838003374 -> 2, remedy 165852282 -> 0
    assert [zlib.crc32(p.encode()) % 3 for p in PHRASES] == [2, 2, 0, 1, 2, 0]
    want = {0: [(2, "handle", 1, 7), (5, "remedy", 1, 3)], 1: [(3, "look after", 2, 2)],
            2: [(0, "treat", 1, 10), (1, "cure", 1, 4), (4, "heal", 1, 5)]}
    m = json.loads((folder / MANIFEST).read_text())
    assert m["index"]["n_shards"] == 3 and m["index"]["hash"] == "zlib.crc32(UTF-8 text) % n_shards"
    assert [(s["file"], s["n_phrases"]) for s in m["index"]["shards"]] == [
        ("phrases-0000.db", 2), ("phrases-0001.db", 1), ("phrases-0002.db", 3)]
    for j, rows in want.items():
        conn = sqlite3.connect(folder / f"phrases-{j:04d}.db")
        assert conn.execute("SELECT id, text, n_words, count FROM phrase ORDER BY rowid").fetchall() == rows
        meta = dict(conn.execute("SELECT key, value FROM meta"))
        assert json.loads(meta["shard"]) == {"index": j, "n_shards": 3, "hash": m["index"]["hash"]}
        assert json.loads(meta["signature"]) == "test-sig"
        # the search's FTS5 index over the shard's own phrases
        assert conn.execute("SELECT rowid FROM phrase_fts WHERE phrase_fts MATCH 'heal OR handle' ORDER BY rowid"
                            ).fetchall() == [(i,) for i, t, *_ in rows if t in ("heal", "handle")]
        conn.close()
    with ParaphraseDB(folder) as db:
        assert db.phrase_id("look after") == 3 and list(db._shards) == [1]  # one shard opened: its text's
        assert db.phrase_ids(["heal", "remedy", "nothing"]) == {"heal": 4, "remedy": 5}
        assert sorted(db._shards) == [0, 1, 2]


def test_an_older_folder_format_is_refused_with_a_rebuild_hint(built):
    _, folder = built
    m = json.loads((folder / MANIFEST).read_text())
    m["format_version"] = 1
    (folder / MANIFEST).write_text(json.dumps(m))
    with pytest.raises(InputError, match="version 1, this pivot reads 'pivot-parts' version 2: rebuild it") as err:
        ParaphraseDB(folder)
    assert "unreadable manifest" not in str(err.value)  # said once, not wrapped in another message
    r = _cli("lookup", str(folder), "treat")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert r.stderr.count("version 1") == 1 and "rebuild it" in r.stderr


def test_every_lookup_score_and_export_equals_the_single_file(built):
    single, folder = built
    with ParaphraseDB(single) as a, ParaphraseDB(folder) as b:
        assert a.signature == b.signature == "test-sig"
        assert a.models == b.models and a.default_model == b.default_model == "ppdb2"
        assert a.n_phrases() == b.n_phrases() == 6
        for model in a.models:
            assert a.n_pairs(model) == b.n_pairs(model)
            assert list(a.iter_pairs(model)) == list(b.iter_pairs(model))
            for phrase in PHRASES:
                for all_ in (False, True):
                    assert a.lookup(phrase, k=10, model=model, all=all_) == b.lookup(phrase, k=10, model=model,
                                                                                     all=all_)
            pairs = [(x, y) for x in PHRASES for y in PHRASES]
            np.testing.assert_array_equal(a.scores(pairs, model), b.scores(pairs, model))
            for kw in ({}, {"show_all": True}, {"size": None, "relations": (0,)}):
                out_a, out_b = io.BytesIO(), io.BytesIO()
                export_ppdb(a, out_a, model, chunk_rows=3, **kw)
                export_ppdb(b, out_b, model, chunk_rows=3, **kw)
                assert out_a.getvalue() == out_b.getvalue() and out_a.getvalue()
        ra, rb = a.pair_records(pairs), b.pair_records(pairs)
        for key in ra:
            np.testing.assert_array_equal(ra[key], rb[key])


def test_p_rev_across_parts_comes_from_the_reverse_table(built):
    _, folder = built
    with ParaphraseDB(folder) as db:
        # treat (part 0) -> handle: the reverse pair handle -> treat is in part 1, general 0.25
        hit = {p.paraphrase: p for p in db.lookup("treat", k=10, model="general", all=True)}
        assert hit["handle"].p_rev == 0.25
        # treat -> look after: look after -> treat is no pair
        assert hit["look after"].p_rev is None


def test_a_lookup_opens_the_one_part_of_its_phrase(built):
    _, folder = built
    with ParaphraseDB(folder) as db:
        assert db._parts == {}
        # heal -> remedy (0.6) carries the edge-punct flag: shown with all only
        assert [p.paraphrase for p in db.lookup("heal", model="general", all=True)] == ["remedy", "cure"]
        assert list(db._parts) == [2]  # heal is id 4, in [4, 6)
        db.lookup("look after", model="general")
        assert sorted(db._parts) == [1, 2]


def test_parts_open_alone_as_databases_of_their_range(built):
    _, folder = built
    with ParaphraseDB(folder / "part-0001.db") as db:
        assert db.signature == "test-sig" and db.meta["part"] == {"index": 1, "e1_range": [2, 4],
                                                                  "format": "pivot-parts"}
        assert [p.paraphrase for p in db.lookup("look after", model="general")] == ["remedy"]
        assert db.n_pairs("general") == 2


def test_rewrite_gives_the_same_bytes_and_replaces_a_previous_folder(tmp_path):
    a = write_database_parts(tmp_path / "a", 3, **_kwargs())
    b = write_database_parts(tmp_path / "b", 3, **_kwargs())
    for name in os.listdir(a):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    write_database_parts(a, 2, **_kwargs())  # over the previous database in parts
    assert sorted(os.listdir(a)) == [MANIFEST, "part-0000.db", "part-0001.db", "phrases-0000.db", "phrases-0001.db"]


def test_an_interrupted_write_resumes_with_the_parts_it_finished(tmp_path, monkeypatch):
    import pivot.store.parts as parts

    real, calls = parts.add_reverse, []

    def failing(folder, k, *args):
        calls.append(k)
        if k == 2 and len(calls) == 3:
            raise KeyboardInterrupt  # the build is stopped while it finishes the last part
        return real(folder, k, *args)

    monkeypatch.setattr(parts, "add_reverse", failing)
    with pytest.raises(KeyboardInterrupt):
        write_database_parts(tmp_path / "db", 3, **_kwargs())
    assert not (tmp_path / "db").exists()
    staging = [p for p in tmp_path.iterdir() if p.name.startswith(".db.parts-")]
    assert len(staging) == 1
    assert sorted(x.name for x in staging[0].glob("part-*.db")) == [
        "part-0000.db", "part-0000.pairs.db", "part-0001.db", "part-0001.pairs.db", "part-0002.pairs.db"]
    assert sorted(x.name for x in staging[0].glob("phrases-*.db")) == ["phrases-0000.db", "phrases-0001.db",
                                                                        "phrases-0002.db"]
    before = {x.name: x.stat().st_mtime_ns for x in [*staging[0].glob("part-000[01].db"),
                                                     *staging[0].glob("phrases-*.db")]}
    write_database_parts(tmp_path / "db", 3, **_kwargs())
    assert {n: (tmp_path / "db" / n).stat().st_mtime_ns for n in before} == before  # kept, not written again
    assert not staging[0].exists()
    single = write_database_chunks(tmp_path / "one.db", **_kwargs())
    with ParaphraseDB(single) as a, ParaphraseDB(tmp_path / "db") as b:
        assert [a.lookup(p, k=10) for p in PHRASES] == [b.lookup(p, k=10) for p in PHRASES]
    fresh = write_database_parts(tmp_path / "fresh", 3, **_kwargs())
    for name in os.listdir(fresh):  # a resumed write gives the bytes of an uninterrupted one
        assert (fresh / name).read_bytes() == (tmp_path / "db" / name).read_bytes(), name


def _cli(*args):
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    return subprocess.run([sys.executable, "-m", "pivot", *args], capture_output=True, text=True, env=env)


def test_a_missing_part_is_one_line_naming_it(built):
    _, folder = built
    (folder / "part-0001.db").unlink()
    with pytest.raises(InputError, match="part-0001.db.*missing"):
        ParaphraseDB(folder)
    r = _cli("lookup", str(folder), "heal")
    assert r.returncode == 2 and "part-0001.db" in r.stderr and "missing" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_an_altered_part_is_one_line_naming_it(built):
    _, folder = built
    path = folder / "part-0002.db"
    data = bytearray(path.read_bytes())
    at = data.index(b"remedy")
    data[at:at + 6] = b"REMEDY"  # same size: only the checksum tells
    path.write_bytes(bytes(data))
    with ParaphraseDB(folder) as db:
        db.lookup("treat")  # part 0 is intact
        with pytest.raises(InputError, match=r"part-0002.db.*sha256.*altered"):
            db.lookup("heal")
    r = _cli("export", str(folder), "-o", str(folder.parent / "x.ppdb"))
    assert r.returncode == 2 and "part-0002.db" in r.stderr and "altered" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (folder.parent / "x.ppdb").exists()
    # a part of another size is caught when the folder is opened
    path.write_bytes(bytes(data) + b"\0")
    with pytest.raises(InputError, match=r"part-0002.db.*bytes, the manifest says"):
        ParaphraseDB(folder)


def test_an_altered_shard_of_the_phrase_index_is_one_line_naming_it(built):
    _, folder = built
    path = folder / "phrases-0001.db"
    data = bytearray(path.read_bytes())
    at = data.index(b"look after")
    data[at:at + 4] = b"LOOK"
    path.write_bytes(bytes(data))
    with ParaphraseDB(folder) as db:
        assert db.phrase_id("heal") == 4  # shard 2 is intact
        with pytest.raises(InputError, match=r"phrases-0001.db.*sha256.*altered"):
            db.lookup("look after")
    r = _cli("lookup", str(folder), "look after")
    assert r.returncode == 2 and "phrases-0001.db" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_the_output_guard_replaces_only_a_database_in_parts(built, tmp_path):
    single, folder = built
    check_replaceable(tmp_path / "new")  # absent: fine
    check_replaceable(folder)  # a previous database in parts: fine
    with pytest.raises(InputError, match="not a folder of parts"):
        check_replaceable(single)
    other = tmp_path / "data"
    other.mkdir()
    (other / "corpus.txt").write_text("x\n")
    with pytest.raises(InputError, match="without a manifest.json"):
        check_replaceable(other)
    (folder / "notes.txt").write_text("mine\n")
    with pytest.raises(InputError, match=r"files its manifest.json does not name \(notes.txt\)"):
        check_replaceable(folder)


def test_preflight_refuses_a_folder_out_over_an_input_or_the_work_dir(tmp_path):
    from pivot.preflight import _check_out

    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    corpus = data / "sub" / "a.en"
    corpus.write_text("x\n")
    with pytest.raises(InputError, match="holds an input of the build"):
        _check_out(data, {corpus.resolve()}, None, parts=2)
    work = tmp_path / "out" / "work"
    work.mkdir(parents=True)
    with pytest.raises(InputError, match="work directory"):
        _check_out(tmp_path / "out", set(), work, parts=2)
    with pytest.raises(InputError, match="work directory"):
        _check_out(work / "db", set(), work, parts=2)
    assert _check_out(tmp_path / "fresh", set(), work, parts=2) == (tmp_path / "fresh").resolve()


def test_cli_flag_is_bounded():
    r = _cli("build", "--parts", "0", "--graph")
    assert r.returncode == 2 and "--parts" in r.stderr and "between 1 and 1024" in r.stderr


def test_search_on_a_folder_finds_what_the_file_finds(built):
    from pivot.store.search import search

    single, folder = built
    for pattern, model in (("he*", "general"), ("*e*", "dom"), ("look", "general+dom")):
        a, b = search(single, pattern, model=model), search(folder, pattern, model=model)
        assert a.matches == b.matches and a.n_matches == b.n_matches
    # heal: 2 general pairs, in part 2
    assert [(m.phrase, m.n_paraphrases) for m in search(folder, "he*").matches] == [("heal", 2)]


def test_serve_a_folder_serves_its_parts_with_their_reverse_rows(built):
    pytest.importorskip("datasette", reason="the serve extra is not installed")
    import asyncio
    from urllib.parse import urlencode

    from pivot.store.serve import make_datasette

    single, folder = built
    ds = make_datasette(folder)

    async def get(path):
        await ds.invoke_startup()
        r = await ds.client.get(path)
        assert r.status_code == 200, (path, r.text[:300])
        return r.json()

    with ParaphraseDB(single) as db:
        for k, phrase in ((0, "treat"), (1, "handle"), (2, "heal")):
            query = urlencode({"_shape": "array", "phrase": phrase, "model": "general"})
            got = asyncio.run(get(f"/three-part-{k:04d}/paraphrases.json?{query}"))
            want = db.lookup(phrase, k=100, model="general", all=True)
            assert [(r["paraphrase"], r["score"], r["p_rev"]) for r in got] == [(p.paraphrase, p.score, p.p_rev)
                                                                                 for p in want]
    rows = [r for j in range(3) for r in asyncio.run(get(f"/three-phrases-{j:04d}/phrase.json?_shape=array"))]
    assert [r["text"] for r in sorted(rows, key=lambda r: r["id"])] == PHRASES


def test_no_output_goes_inside_a_folder_database(built):
    _, folder = built
    r = _cli("export", str(folder), "-o", str(folder / "part-0000.db"))
    assert r.returncode == 2 and "is an input" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = _cli("export", str(folder), "-o", str(folder / "x.ppdb"))
    assert r.returncode == 2 and "is an input" in r.stderr
    assert sorted(os.listdir(folder)) == FILES_3


def test_a_tiny_build_in_parts_on_workers_equals_the_single_file(tmp_path):
    """The build's own path: `pivot build --parts 3` with two Dask workers (the parts written by
    the workers, the chunks read by each) against `--parts 1` in one process."""
    from pivot.cli import main
    from tests.test_build_domain import write_tiny

    args = write_tiny(tmp_path)
    assert main(["-q", "build", *args, "--out", str(tmp_path / "one.db"), "--workers", "1"]) == 0
    assert main(["-q", "build", *args, "--out", str(tmp_path / "three"), "--parts", "3", "--workers", "2"]) == 0
    with ParaphraseDB(tmp_path / "one.db") as a, ParaphraseDB(tmp_path / "three") as b:
        assert a.signature == b.signature and len(b.manifest.parts) == 3
        texts = [t for (t,) in a._conn.execute("SELECT text FROM phrase ORDER BY id")]
        assert len(texts) >= 6
        lines = 0
        for model in a.models:
            assert [a.lookup(t, k=50, model=model, all=True) for t in texts] == \
                   [b.lookup(t, k=50, model=model, all=True) for t in texts]
            out_a, out_b = io.BytesIO(), io.BytesIO()
            lines += export_ppdb(a, out_a, model, show_all=True)
            export_ppdb(b, out_b, model, show_all=True)
            assert out_a.getvalue() == out_b.getvalue()
        assert lines > 0
