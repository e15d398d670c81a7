"""PPDB 2.0 export (pivot.store.export, the pivot._export kernel) and the lookup's output on a
schema-3 database: exact lines traced by hand, sizes, relations, hidden forms, the combined and
probability models, byte-identical output across chunkings and threads, the kernel's %.6g and
its checks, the CLI's errors, and nlpaug's PPDB reader substituting from a plain export."""
import io
import json
import math
import random
import sqlite3

import numpy as np
import pytest

from pivot import cli
from pivot._native import _export
from pivot.errors import InputError
from pivot.store.db import ParaphraseDB
from pivot.store.export import SIZES, export_ppdb, lookup_lines, parse_relations, probability_model
from pivot.store.write import write_database

# Phrases 0..6 with their stored labels.
PHRASES = ["treat", "cure", "handle", "look after", "the cure", "cure ,", "unused"]
LHS = ["[VB]", "[VB]", "[VB]", "[VP]", "[NP]", "[X]", "[NN]"]
NAN = float("nan")
# e1, e2, p_general, p_dom (NaN: the model gives nothing), n_pivots, form, ppdb2, relations (per mille)
PAIRS = [
    (0, 1, 0.5, 0.6, 2, 0, 3.5, (700, 100, 50, 50, 50, 50)),     # treat -> cure: Equivalence
    (0, 2, 0.2, 0.15, 1, 0, 2.25, (100, 600, 100, 100, 50, 50)),  # treat -> handle: ForwardEntailment
    (0, 3, 0.25, NAN, 1, 0, 4.0, (500, 0, 0, 0, 500, 0)),         # treat -> look after: a tie, Equivalence
    (0, 4, 0.05, 0.05, 1, 2, 0.75, (0, 0, 0, 0, 1000, 0)),        # treat -> the cure: function-only (hidden)
    (1, 0, 0.4, 0.3, 2, 0, 3.5, (600, 50, 250, 0, 50, 50)),       # cure -> treat: Equivalence
    (1, 5, 0.3, NAN, 1, 1, 1.0, (0, 0, 0, 0, 0, 1000)),           # cure -> "cure ,": edge-punct (hidden)
    (2, 0, 0.25, NAN, 1, 0, 2.0, (0, 0, 1000, 0, 0, 0)),          # handle -> treat: ReverseEntailment
    (4, 1, 0.9, 0.9, 1, 18, 0.5, (200, 200, 200, 200, 200, 0)),   # the cure -> cure: function-only, containment
]
SIZE_CUTS = {"s": 4.0, "m": 3.5, "l": 2.25, "xl": 2.0, "xxl": 1.0, "xxxl": 0.5}
# eta = ln p_general + ln p_dom: score = x / (1 + x), x = p_general * p_dom (readable by hand).
FIT = {"model": "logit", "method": "mle", "features": ["const", "log_p_general", "log_p_x", "x_missing"],
       "params": {"const": 0.0, "log_p_general": 1.0, "log_p_x": 1.0, "x_missing": 0.0},
       "bse": None, "converged": True, "n": 10, "n_positive": 5, "llf": -1.0, "dropped": [],
       "reason": None, "floor_p": 1e-10}
MODELS = [{"name": "general", "kind": "general", "description": "all", "params": {}},
          {"name": "dom", "kind": "weighted", "description": "domain", "params": {}},
          {"name": "general+dom", "kind": "combined", "description": "both",
           "params": {"base": "general", "other": "dom", "fit": FIT}},
          {"name": "ppdb2", "kind": "learned", "description": "PPDB2.0Score", "params": {}}]
META = {"signature": "test-sig", "normalization": {"lang": "en"},
        "ppdb2": {"learned": True, "sizes": SIZE_CUTS}, "relations": {"classified": True}}


def write_db(path, pairs=PAIRS, meta=META):
    e1, e2, pg, pd, npiv, form, score, rel = (np.array(c) for c in zip(*pairs))
    return write_database(
        path, phrases=PHRASES, phrase_counts=np.full(len(PHRASES), 3), e1=e1, e2=e2, n_pivots=npiv,
        pivots=np.zeros((len(pairs), 1), dtype=np.int64), foreign={0: "fr:soigner"}, models=MODELS,
        scores=np.nan_to_num(np.stack([pg, pd], axis=1)), meta=meta, form=form, ppdb2=score, rel=rel, lhs=LHS)


@pytest.fixture(scope="module")
def db_path(tmp_path_factory):
    return write_db(tmp_path_factory.mktemp("s3") / "s3.db")


def export(db_path, **kw) -> list[str]:
    out = io.BytesIO()
    with ParaphraseDB(db_path) as db:
        n = export_ppdb(db, out, **kw)
    lines = out.getvalue().decode("utf-8").splitlines()
    assert len(lines) == n
    return lines


REL = ("Equivalence={} ForwardEntailment={} ReverseEntailment={} Exclusion={} OtherRelated={} "
       "Independent={}")
# -ln 0.5 = 0.693147..., -ln 0.4 = 0.916290..., -ln 0.25 = 1.386294..., -ln 0.2 = 1.609437...
TREAT_LOOK = ("[VB] ||| treat ||| look after ||| PPDB2.0Score=4 -logp(e2|e1)=1.38629 "
              + REL.format("0.500", "0.000", "0.000", "0.000", "0.500", "0.000") + " NumPivots=1 Form=none"
              " |||  ||| Equivalence")
TREAT_CURE = ("[VB] ||| treat ||| cure ||| PPDB2.0Score=3.5 -logp(e2|e1)=0.693147 -logp(e1|e2)=0.916291 "
              + REL.format("0.700", "0.100", "0.050", "0.050", "0.050", "0.050") + " NumPivots=2 Form=none"
              " ||| 0-0 ||| Equivalence")
TREAT_HANDLE = ("[VB] ||| treat ||| handle ||| PPDB2.0Score=2.25 -logp(e2|e1)=1.60944 -logp(e1|e2)=1.38629 "
                + REL.format("0.100", "0.600", "0.100", "0.100", "0.050", "0.050") + " NumPivots=1 Form=none"
                " ||| 0-0 ||| ForwardEntailment")
CURE_TREAT = ("[VB] ||| cure ||| treat ||| PPDB2.0Score=3.5 -logp(e2|e1)=0.916291 -logp(e1|e2)=0.693147 "
              + REL.format("0.600", "0.050", "0.250", "0.000", "0.050", "0.050") + " NumPivots=2 Form=none"
              " ||| 0-0 ||| Equivalence")
HANDLE_TREAT = ("[VB] ||| handle ||| treat ||| PPDB2.0Score=2 -logp(e2|e1)=1.38629 -logp(e1|e2)=1.60944 "
                + REL.format("0.000", "0.000", "1.000", "0.000", "0.000", "0.000") + " NumPivots=1 Form=none"
                " ||| 0-0 ||| ReverseEntailment")


def test_default_export_is_the_learned_models_pairs_best_first_without_hidden_forms(db_path):
    # Grouped by e1 id; within treat by PPDB2.0Score 4 > 3.5 > 2.25; "the cure" (function-only),
    # "cure ," (edge-punct) and the cure -> cure (function-only) are hidden.
    assert export(db_path) == [TREAT_LOOK, TREAT_CURE, TREAT_HANDLE, CURE_TREAT, HANDLE_TREAT]


def test_all_adds_the_hidden_forms_with_their_flags(db_path):
    lines = export(db_path, show_all=True)
    assert len(lines) == len(PAIRS)
    assert lines[3] == ("[VB] ||| treat ||| the cure ||| PPDB2.0Score=0.75 -logp(e2|e1)=2.99573 "
                        + REL.format("0.000", "0.000", "0.000", "0.000", "1.000", "0.000")
                        + " NumPivots=1 Form=function-only |||  ||| OtherRelated")  # -ln 0.05 = 2.995732
    # cure -> "cure ,": -ln 0.3 = 1.203973; the cure -> cure: -ln 0.9 = 0.1053605, reverse absent
    assert lines[5].startswith("[VB] ||| cure ||| cure , ||| PPDB2.0Score=1 -logp(e2|e1)=1.20397 ")
    assert lines[5].endswith(" Form=edge-punct |||  ||| Independent")
    assert lines[7] == ("[NP] ||| the cure ||| cure ||| PPDB2.0Score=0.5 -logp(e2|e1)=0.105361 "
                        + REL.format("0.200", "0.200", "0.200", "0.200", "0.200", "0.000")
                        + " NumPivots=1 Form=function-only,containment |||  ||| Equivalence")  # ties: the first


@pytest.mark.parametrize("size, expected", [
    ("s", [TREAT_LOOK]),                          # ppdb2 >= 4
    ("m", [TREAT_LOOK, TREAT_CURE, CURE_TREAT]),  # >= 3.5
    ("l", [TREAT_LOOK, TREAT_CURE, TREAT_HANDLE, CURE_TREAT]),  # >= 2.25
    ("xl", [TREAT_LOOK, TREAT_CURE, TREAT_HANDLE, CURE_TREAT, HANDLE_TREAT]),
    ("xxxl", [TREAT_LOOK, TREAT_CURE, TREAT_HANDLE, CURE_TREAT, HANDLE_TREAT]),
])
def test_sizes_are_nested_cuts_of_the_learned_score(db_path, size, expected):
    assert export(db_path, size=size) == expected


def test_relations_filter_by_the_last_field(db_path):
    assert export(db_path, relations=parse_relations("Equivalence")) == [TREAT_LOOK, TREAT_CURE, CURE_TREAT]
    assert export(db_path, relations=parse_relations("forwardentailment, ReverseEntailment")) == [
        TREAT_HANDLE, HANDLE_TREAT]
    assert export(db_path, relations=parse_relations("Equivalence"), size="s") == [TREAT_LOOK]
    assert parse_relations("Independent,Equivalence,Equivalence") == (0, 5)
    for bad in ("Synonym", "Equivalence,", ""):
        with pytest.raises(InputError, match="the relations are Equivalence, ForwardEntailment"):
            parse_relations(bad)


def test_lhs_x_and_agree(db_path):
    assert [line.split(" ||| ")[0] for line in export(db_path, lhs="x")] == ["[X]"] * 5
    # --agree: [VB] -> [VP] is one class (verbs); with --all, treat -> the cure ([VB] -> [NP]),
    # cure -> "cure ," ([VB] -> [X]) and the cure -> cure ([NP] -> [VB]) are dropped.
    stats = {}
    with ParaphraseDB(db_path) as db:
        out = io.BytesIO()
        assert export_ppdb(db, out, show_all=True, agree=True, stats=stats) == 5
    assert stats == {"written": 5, "disagree": 3}
    assert out.getvalue().decode().splitlines() == [TREAT_LOOK, TREAT_CURE, TREAT_HANDLE, CURE_TREAT, HANDLE_TREAT]


def test_probability_and_combined_models(db_path):
    # general ranks by p(e2|e1): treat -> cure .5, look after .25, handle .2; the lines are the
    # learned model's, reordered.
    assert export(db_path, model="general") == [TREAT_CURE, TREAT_LOOK, TREAT_HANDLE, CURE_TREAT, HANDLE_TREAT]
    # dom: its own p and reverse p (-ln .6 = 0.510826, -ln .3 = 1.203973, -ln .15 = 1.89712); it
    # gives nothing to treat -> look after, and handle -> treat (so no -logp(e1|e2) on treat -> handle).
    dom = export(db_path, model="dom")
    assert [line.split(" ||| ")[1:3] for line in dom] == [["treat", "cure"], ["treat", "handle"], ["cure", "treat"]]
    assert " -logp(e2|e1)=0.510826 -logp(e1|e2)=1.20397 " in dom[0]
    assert " -logp(e2|e1)=1.89712 Equivalence=" in dom[1]
    # general+dom: x / (1 + x) with x = p_general * p_dom: treat -> cure .3 / 1.3 = 0.230769, handle
    # .03 / 1.03 = 0.0291262, look after (dom: none, floored at 1e-10) 2.5e-11; its -logp are General's.
    comb = export(db_path, model="general+dom")
    assert [line.split(" ||| ")[2] for line in comb[:3]] == ["cure", "handle", "look after"]
    assert comb[0] == TREAT_CURE.replace(" Form=none", " Form=none ModelScore=0.230769")
    assert comb[1].endswith(" Form=none ModelScore=0.0291262 ||| 0-0 ||| ForwardEntailment")
    assert comb[2] == TREAT_LOOK.replace(" Form=none", " Form=none ModelScore=2.5e-11")
    with ParaphraseDB(db_path) as db:
        assert [probability_model(db, m) for m in db.models] == ["general", "dom", "general", "general"]


@pytest.mark.parametrize("kw", [{"show_all": True}, {}, {"size": "xxxl"}, {"model": "general+dom", "agree": True}])
def test_same_bytes_for_any_chunking_and_with_or_without_the_scan_thread(db_path, tmp_path, kw):
    # Without a size or relation cut the export reads the table once and formats chunks of
    # whole e1 runs in two threads (chunk_rows=1: one run a chunk); with one, it reads the
    # reverse rows apart and formats in this thread: every way gives the same bytes, and so
    # does the read of the table through SQLite instead of from the file's pages (direct).
    outs = set()
    with ParaphraseDB(db_path) as db:
        for chunk_rows in (1, 2, 3, 1000):
            for prefetch in (False, True):
                for direct in (False, True):
                    out = io.BytesIO()
                    export_ppdb(db, out, chunk_rows=chunk_rows, prefetch=prefetch, direct=direct, **kw)
                    outs.add(out.getvalue())
        # a text stream without a binary buffer gets the same text
        text = io.StringIO()
        export_ppdb(db, text, **kw)
    assert len(outs) == 1 and text.getvalue().encode() in outs


def test_one_scan_reverse_p_from_visible_rows_and_nulls(tmp_path):
    # The export without a cut takes p(e1|e2) from the rows it writes. Here General gives
    # cure -> treat nothing (only dom does), so treat -> cure has no -logp(e1|e2), and
    # cure -> treat no -logp(e2|e1) but -logp(e1|e2) = -ln 0.5 = 0.693147 from treat -> cure;
    # handle -> treat and treat -> handle are both hidden (dangling, a symmetric flag), so
    # neither is written, and look after -> treat (visible) finds treat -> look after
    # (-ln 0.25 = 1.386294). Lines in e1 order, each run by PPDB2.0Score; the same lines with
    # one e1 run per formatting chunk (chunk_rows=1) and without threads.
    pairs = [(0, 1, 0.5, 0.6, 2, 0, 3.5, (700, 100, 50, 50, 50, 50)),
             (0, 2, 0.2, 0.15, 1, 4, 2.25, (100, 600, 100, 100, 50, 50)),
             (0, 3, 0.25, NAN, 1, 0, 4.0, (500, 0, 0, 0, 500, 0)),
             (1, 0, NAN, 0.3, 2, 0, 3.0, (600, 50, 250, 0, 50, 50)),
             (2, 0, 0.25, NAN, 1, 4, 2.0, (0, 0, 1000, 0, 0, 0)),
             (3, 0, 0.125, NAN, 3, 0, 1.5, (0, 1000, 0, 0, 0, 0))]
    path = write_db(tmp_path / "nulls.db", pairs=pairs)
    expected = [
        TREAT_LOOK.replace("-logp(e2|e1)=1.38629 ", "-logp(e2|e1)=1.38629 -logp(e1|e2)=2.07944 "),  # -ln 0.125
        TREAT_CURE.replace(" -logp(e1|e2)=0.916291", ""),
        "[VB] ||| cure ||| treat ||| PPDB2.0Score=3 -logp(e1|e2)=0.693147 "
        + REL.format("0.600", "0.050", "0.250", "0.000", "0.050", "0.050") + " NumPivots=2 Form=none"
        " ||| 0-0 ||| Equivalence",
        "[VP] ||| look after ||| treat ||| PPDB2.0Score=1.5 -logp(e2|e1)=2.07944 -logp(e1|e2)=1.38629 "
        + REL.format("0.000", "1.000", "0.000", "0.000", "0.000", "0.000") + " NumPivots=3 Form=none"
        " |||  ||| ForwardEntailment"]
    assert export(path) == expected
    assert export(path, chunk_rows=1) == expected
    assert export(path, chunk_rows=1, prefetch=False) == expected
    # the same pairs through the path with a cut (every pair is in xxxl): the same lines
    assert export(path, size="xxxl") == expected


def test_a_failing_write_stops_the_scan_threads_first(db_path):
    # The reader fails after the first chunk's lines while the two scan threads are ahead: the
    # error comes out (not a crash: each thread finishes its scan before its connection closes).
    class Full(io.RawIOBase):
        def __init__(self):
            self.calls = 0

        def write(self, b):
            self.calls += 1
            if self.calls > 1:
                raise OSError(28, "No space left on device")
            return len(b)

    out = Full()
    with ParaphraseDB(db_path) as db, pytest.raises(OSError, match="No space left"):
        export_ppdb(db, out, show_all=True, chunk_rows=1)
    assert out.calls == 2


def test_lookup_ppdb_lines_are_the_exports(db_path):
    with ParaphraseDB(db_path) as db:
        for model in (None, "general", "dom", "general+dom"):
            for show_all in (False, True):
                exported = export(db_path, model=model, show_all=show_all)
                for phrase in ("treat", "cure", "handle", "the cure"):
                    hits = db.lookup(phrase, k=10, model=model, all=show_all)
                    mine = [line for line in exported if line.split(" ||| ")[1] == phrase]
                    assert lookup_lines(db, phrase, hits, model).splitlines() == mine, (model, phrase)


def test_lookup_hides_the_hidden_forms_and_reports_the_layer(db_path):
    with ParaphraseDB(db_path) as db:
        assert db.default_model == "ppdb2"
        hits = db.lookup("treat")
        assert [(h.paraphrase, h.score) for h in hits] == [("look after", 4.0), ("cure", 3.5), ("handle", 2.25)]
        assert hits[1].relation == "Equivalence" and hits[1].form == ()
        assert hits[1].relations == {"Equivalence": 0.7, "ForwardEntailment": 0.1, "ReverseEntailment": 0.05,
                                     "Exclusion": 0.05, "OtherRelated": 0.05, "Independent": 0.05}
        everything = db.lookup("treat", all=True, model="general")
        assert [(h.paraphrase, h.form) for h in everything][-1] == ("the cure", ("function-only",))
        assert [h.paraphrase for h in db.lookup("the cure")] == []
        assert [h.paraphrase for h in db.lookup("the cure", all=True)] == ["cure"]


def test_cli_lookup_table_json_and_ppdb(db_path, capsys):
    assert cli.main(["lookup", str(db_path), "treat"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["#", "paraphrase", "score", "p(e2|e1)", "p(e1|e2)", "relation", "form", "pivots"]
    # the learned score ranks; p(e2|e1), p(e1|e2) are General's; no reverse pair: "-"
    assert table[1].split() == ["1", "look", "after", "4.0000", "0.2500", "-", "Equivalence", "0.50", "-",
                                "1:", "fr:soigner"]
    assert table[2].split()[:8] == ["2", "cure", "3.5000", "0.5000", "0.4000", "Equivalence", "0.70", "-"]
    assert cli.main(["lookup", str(db_path), "the", "cure", "--all", "--model", "general"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[2:8] == [
        "0.9000", "0.9000", "-", "Equivalence", "0.20", "function-only,containment"]
    assert cli.main(["lookup", str(db_path), "the cure"]) == 1  # every answer hidden
    capsys.readouterr()
    assert cli.main(["lookup", str(db_path), "treat", "-k", "2", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"] == "ppdb2" and out["probability_model"] == "general" and out["all"] is False
    assert [(p["paraphrase"], p["ppdb2"], p["relation"], p["form"], p["p_e2_given_e1"], p["p_e1_given_e2"])
            for p in out["paraphrases"]] == [("look after", 4.0, "Equivalence", [], 0.25, None),
                                              ("cure", 3.5, "Equivalence", [], 0.5, 0.4)]
    assert cli.main(["lookup", str(db_path), "treat", "--format", "ppdb"]) == 0
    assert capsys.readouterr().out.splitlines() == [TREAT_LOOK, TREAT_CURE, TREAT_HANDLE]


def test_cli_export_options_and_errors(db_path, tmp_path, capsys):
    out = tmp_path / "m.ppdb"
    assert cli.main(["-q", "export", str(db_path), "--relation", "Equivalence", "--size", "M", "-o", str(out)]) == 0
    assert out.read_text(encoding="utf-8").splitlines() == [TREAT_LOOK, TREAT_CURE, CURE_TREAT]
    assert cli.main(["-q", "export", str(db_path), "--model", "general", "--all"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(PAIRS)
    for args, message in [
        (["--relation", "Synonym"], "unknown relation 'Synonym' in --relation"),
        (["--model", "nope"], "unknown model 'nope'"),
        (["-o", str(db_path)], "is an input of this command (the database"),
    ]:
        assert cli.main(["-q", "export", str(db_path), *args]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    with pytest.raises(SystemExit) as exit_:
        cli.main(["-q", "export", str(db_path), "--size", "huge"])
    assert exit_.value.code == 2 and "invalid choice: 'huge'" in capsys.readouterr().err
    assert cli.EXPORT_SIZES == SIZES
    assert db_path.is_file() and sqlite3.connect(db_path).execute("SELECT count(*) FROM pair").fetchone() == (8,)


def test_export_without_a_learned_layer_and_of_an_old_schema(tmp_path, capsys):
    # A database written without the layer: labels [X], no flags, no learned score, relations
    # unclassified (OtherRelated, stored as 1000 per mille): no PPDB2.0Score and no relation
    # probabilities on its lines, and --size / --relation are refused.
    plain = write_database(tmp_path / "plain.db", phrases=PHRASES, phrase_counts=np.full(len(PHRASES), 3),
                           e1=np.array([0, 1]), e2=np.array([1, 0]), n_pivots=np.array([1, 1]),
                           pivots=np.zeros((2, 1), np.int64), foreign={0: "fr:x"}, models=MODELS[:1],
                           scores=np.array([[0.5], [0.4]]), meta={"normalization": {"lang": "en"}})
    assert export(plain) == ["[X] ||| treat ||| cure ||| -logp(e2|e1)=0.693147 -logp(e1|e2)=0.916291 NumPivots=1 "
                             "Form=none ||| 0-0 ||| OtherRelated",
                             "[X] ||| cure ||| treat ||| -logp(e2|e1)=0.916291 -logp(e1|e2)=0.693147 NumPivots=1 "
                             "Form=none ||| 0-0 ||| OtherRelated"]
    assert cli.main(["-q", "export", str(plain), "--size", "m"]) == 2
    assert "records no learned-score cut for size 'm'" in capsys.readouterr().err
    assert cli.main(["-q", "export", str(plain), "--relation", "Equivalence"]) == 2
    assert "relations were not classified" in capsys.readouterr().err
    # A learned score without recorded sizes: --size says so too.
    bare = write_db(tmp_path / "bare.db", meta={**META, "ppdb2": {"learned": True}})
    assert cli.main(["-q", "export", str(bare), "--size", "m"]) == 2
    assert "records no learned-score cut for size 'm'" in capsys.readouterr().err
    # A database of an earlier schema is refused in one line.
    old = tmp_path / "old.db"
    old.write_bytes(plain.read_bytes())
    with sqlite3.connect(old) as conn:
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    assert cli.main(["-q", "export", str(old)]) == 2
    assert "rebuild it with `pivot build`" in capsys.readouterr().err


def test_export_says_when_the_build_stored_no_labels(tmp_path, caplog):
    # The build's meta "lhs" says every label is [X]: the export warns that nlpaug gets nothing.
    unlabelled = write_db(tmp_path / "x.db", meta={**META, "lhs": {"labels": "[X] for every phrase", "tagger": None}})
    labelled = write_db(tmp_path / "l.db", meta={**META, "lhs": {"labels": "GENIA tagger", "tagger": "genia-pos"}})
    for db, args, warned in [(unlabelled, [], True), (unlabelled, ["--lhs", "x"], False), (labelled, [], False)]:
        caplog.clear()
        assert cli.main(["-q", "export", str(db), *args, "-o", str(tmp_path / "out.ppdb")]) == 0
        said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert said == (["this database stores no part-of-speech labels (meta lhs: [X] for every phrase): every LHS "
                         "is [X], from which PPDB readers that key on it, such as nlpaug, substitute nothing"]
                        if warned else []), (db, args)


def test_a_damaged_layer_is_one_line(db_path, tmp_path, capsys):
    # A relation index outside 0..5 (the kernel checks what it unpacks): one line naming the file.
    bad = tmp_path / "bad.db"
    bad.write_bytes(db_path.read_bytes())
    with sqlite3.connect(bad) as conn:
        conn.execute("UPDATE pair SET relation = 9 WHERE e1 = 1 AND e2 = 0")
    assert cli.main(["-q", "export", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err == (f"pivot export: error: {bad}: not a pivot paraphrase database, or a damaged one: format_ppdb: "
                   "row 3 has relation 9 (0..5)\n")  # the chunk's rows: treat's 3, then cure -> treat
    assert cli.main(["lookup", str(bad), "cure", "--format", "ppdb"]) == 2
    assert "damaged one: a pair's relation is 9 (0..5)" in capsys.readouterr().err


def test_kernel_writes_printf_g6_and_exact_per_mille():
    rng = np.random.default_rng(7)
    values = np.concatenate([
        rng.uniform(-10, 10, 3000), 10.0 ** rng.uniform(-12, 20, 3000), -(10.0 ** rng.uniform(-12, 20, 1000)),
        [0.0, -0.0, 1.0, 123456.5, 12345.75, 999999.5, 9999995.0, 1e-5, 0.0001, 1e15, 1e16, 0.5, 2.5, 1e300],
        [math.nextafter(x, 0) for x in (999999.5, 1e-4, 1e6)]])
    n = len(values)
    rel = rng.integers(0, 1001, (n, 6))
    relation = rng.integers(0, 6, n)
    form = rng.integers(0, 32, n)
    texts, text_off = b"ab", np.array([0, 1, 2], np.int64)
    out = bytearray(16)  # too small for one line: the caller grows it
    lines, r = [], 0
    while r < n:
        nxt, size = _export.format_ppdb(out, r, np.zeros(n, np.int64), np.ones(n, np.int64), texts, text_off,
                                        b"[X]", np.array([0, 3, 3], np.int64), values, np.full(n, NAN),
                                        np.full(n, NAN), rel, relation, np.arange(n, dtype=np.int64), form,
                                        np.zeros(0), np.zeros(0, np.int64), False, True, True)
        if nxt == r:
            out.extend(bytes(len(out)))
            continue
        lines += bytes(out[:size]).decode().splitlines()
        r = nxt
    names = ["edge-punct", "function-only", "dangling", "inflection", "containment"]
    for i, line in enumerate(lines):
        rels = " ".join(f"{k}={v // 1000}.{v % 1000:03d}" for k, v in zip(
            ["Equivalence", "ForwardEntailment", "ReverseEntailment", "Exclusion", "OtherRelated", "Independent"],
            rel[i].tolist()))
        flags = ",".join(nm for b, nm in enumerate(names) if form[i] >> b & 1) or "none"
        rel_name = ["Equivalence", "ForwardEntailment", "ReverseEntailment", "Exclusion", "OtherRelated",
                    "Independent"][relation[i]]
        assert line == (f"[X] ||| a ||| b ||| PPDB2.0Score={format(values[i], '.6g')} {rels} NumPivots={i} "
                        f"Form={flags} ||| 0-0 ||| {rel_name}"), values[i]


def _scores_written(values: np.ndarray) -> list[str]:
    """The kernel's PPDB2.0Score text of each value (lines of [X] ||| a ||| b, nothing else)."""
    n = len(values)
    out = bytearray(128 * n + 4096)
    z = np.zeros(n, np.int64)
    nxt, size = _export.format_ppdb(out, 0, z, np.ones(n, np.int64), b"ab", np.array([0, 1, 2], np.int64), b"",
                                    np.zeros(3, np.int64), values, np.full(n, NAN), np.full(n, NAN),
                                    np.zeros((n, 6), np.int64), z, z, z, np.zeros(0), np.zeros(0, np.int64),
                                    True, True, False)
    assert nxt == n
    return [line[len("[X] ||| a ||| b ||| PPDB2.0Score="):line.index(" NumPivots")]
            for line in bytes(out[:size]).decode().splitlines()]


def test_kernel_g6_fast_path_is_printf():
    # The kernel writes 1e-16 <= |v| < 1e16 from six digits of its own rounding (pivot_g6) and
    # leaves a value whose seventh digit onwards is within 1e-6 of one half to std::to_chars:
    # every value, Python's format(v, ".6g") (printf's %.6g). Values: spread over every decade
    # and sign; the doubles nearest to halfway points d.dddddd5 x 10^e and their neighbours
    # (where the rounding direction is decided by the last bits); next to powers of ten (where
    # the exponent changes); -ln p of random p (what the export writes most).
    rng = np.random.default_rng(11)
    spread = 10.0 ** rng.uniform(-18, 18, 100_000) * rng.choice([-1.0, 1.0], 100_000)
    halves = []
    for digits, e in zip(rng.integers(1_000_000, 10_000_000, 20_000).tolist(), rng.integers(-17, 17, 20_000).tolist()):
        x = float(f"{digits}5e{e - 7}")
        halves += [x, math.nextafter(x, 0), math.nextafter(x, math.inf), math.nextafter(math.nextafter(x, 0), 0)]
    tens = [t for k in range(-17, 18) for x in (10.0 ** k, 10.0 ** k * (1 - 5e-7), 10.0 ** k * (1 - 4e-7))
            for t in (x, math.nextafter(x, 0), math.nextafter(x, math.inf))]
    logs = -np.log(rng.uniform(0, 1, 50_000))
    values = np.concatenate([spread, halves, tens, logs, [0.0, -0.0, 1e-16, 1e16, -1e16, math.inf, 5e-324]])
    written = _scores_written(values)
    wrong = [(v, w) for v, w in zip(values.tolist(), written) if w != format(v, ".6g")]
    assert not wrong, wrong[:5]


def test_kernel_minus_log_matches_python():
    p = np.array([1.0, 0.5, 0.25, 1e-3, 0.123456789, 2.0 ** -40, 0.999999])
    n = len(p)
    out = bytearray(1 << 12)
    _, size = _export.format_ppdb(out, 0, np.zeros(n, np.int64), np.ones(n, np.int64), b"ab c", np.array([0, 1, 4]),
                                  b"", np.zeros(3, np.int64), np.zeros(n), p, p[::-1].copy(),
                                  np.zeros((n, 6), np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64),
                                  np.zeros(n, np.int64), np.zeros(0), np.zeros(0, np.int64), True, False, False)
    for line, a, b in zip(bytes(out[:size]).decode().splitlines(), p, p[::-1]):
        assert line == (f"[X] ||| a ||| b c ||| -logp(e2|e1)={format(-math.log(a), '.6g')} "
                        f"-logp(e1|e2)={format(-math.log(b), '.6g')} NumPivots=0 Form=none |||  ||| Equivalence")
    assert "-logp(e2|e1)=-0 " in bytes(out[:size]).decode()  # -ln 1 is -0.0, as printf writes it


@pytest.mark.parametrize("change, message", [
    (dict(e2=np.array([3])), "outside the tables"),
    (dict(relation=np.array([6])), "relation 6"),
    (dict(form=np.array([32])), "form 32"),
    (dict(rel=np.array([[0, 0, 0, 0, 0, 1001]])), "1001 per mille"),
    (dict(text_off=np.array([0, 2, 1])), "offsets decrease"),
    (dict(text_off=np.array([0, 1, 9])), "outside the text buffers"),
    (dict(p=np.zeros(2)), "n rows"),
    (dict(order=np.array([1])), "order\\[0\\] = 1"),
])
def test_kernel_checks_its_input(change, message):
    args = dict(e1=np.array([0]), e2=np.array([1]), texts=b"ab", text_off=np.array([0, 1, 2]), lhs=b"[X]",
                lhs_off=np.array([0, 3, 3]), ppdb2=np.ones(1), p=np.ones(1), p_rev=np.ones(1),
                rel=np.zeros((1, 6), np.int64), relation=np.zeros(1, np.int64), n_pivots=np.zeros(1, np.int64),
                form=np.zeros(1, np.int64), order=np.zeros(0, np.int64))
    args.update(change)
    with pytest.raises(ValueError, match=message):
        _export.format_ppdb(bytearray(1024), 0, args["e1"], args["e2"], args["texts"], args["text_off"], args["lhs"],
                            args["lhs_off"], args["ppdb2"], args["p"], args["p_rev"], args["rel"], args["relation"],
                            args["n_pivots"], args["form"], np.zeros(0), args["order"])


def test_find_rows_and_order_runs_by_hand():
    # rows (0,1) (0,2) (0,3) (1,0) (2,0) (4,1): the reverse of (0,1) is row 3, of (2,0) row 1 ...
    e1, e2 = np.array([0, 0, 0, 1, 2, 4]), np.array([1, 2, 3, 0, 0, 1])
    ptr = _export.row_pointer(e1, 5)
    assert ptr.tolist() == [0, 3, 4, 5, 5, 6]
    assert _export.find_rows(ptr, e2, e2, e1).tolist() == [3, 4, -1, 0, 1, -1]
    assert _export.find_rows(ptr, e2, np.array([4, 9, -1]), np.array([1, 0, 0])).tolist() == [5, -1, -1]
    # each e1 run by score, highest first, ties in the given (e2) order
    assert _export.order_runs(e1, np.array([0.5, 0.2, 0.5, 1.0, 0.1, 0.3])).tolist() == [0, 2, 1, 3, 4, 5]
    with pytest.raises(ValueError, match="not sorted"):
        _export.row_pointer(np.array([1, 0]), 2)


def test_table_scan_kinds_and_errors(db_path):
    table = _export.Table(db_path.resolve().as_uri() + "?mode=ro")
    ids, (text, off), (lhs, lhs_off) = table.scan("SELECT id, text, lhs FROM phrase WHERE id < ?1 ORDER BY id", (2,),
                                                  "itt")
    assert ids.tolist() == [0, 1] and text == b"treatcure" and off.tolist() == [0, 5, 9] and lhs == b"[VB][VB]"
    (p,) = table.scan("SELECT p_1 FROM pair WHERE e1 = 0 ORDER BY e2", (), "d")
    assert np.isnan(p[2]) and p[:2].tolist() == [0.6, 0.15]  # NULL: NaN
    with pytest.raises(ValueError, match="is NULL in row 2"):
        table.scan("SELECT p_1 FROM pair WHERE e1 = 0 ORDER BY e2", (), "i")
    with pytest.raises(ValueError, match="returns 1 columns"):
        table.scan("SELECT e1 FROM pair", (), "ii")
    with pytest.raises(ValueError, match="unknown column kind"):
        table.scan("SELECT e1 FROM pair", (), "x")
    with pytest.raises(ValueError, match="no such column"):
        table.scan("SELECT nope FROM pair", (), "i")
    table.close()
    with pytest.raises(ValueError, match="closed"):
        table.scan("SELECT 1", (), "i")


def test_nlpaug_substitutes_from_a_plain_equivalence_size_m_export(tmp_path, monkeypatch):
    """nlpaug 1.1.11's PPDB reader (nlpaug/model/word_dict/ppdb.py) keys its dictionary by the
    part of speech of the LHS and keeps every pair of equal word count: the export is the
    filter. From `pivot export --relation Equivalence --size m`, "treat" can only become
    "cure" (handle: ForwardEntailment; manage: Equivalence below size m) and "patients" only
    "people"."""
    pytest.importorskip("nlpaug", reason="the labels extra is not installed")
    import nlpaug.augmenter.word as naw

    phrases = ["treat", "cure", "handle", "manage", "patients", "people", "they"]
    lhs = ["[VB]", "[VB]", "[VB]", "[VB]", "[NNS]", "[NNS]", "[PRP]"]
    pairs = [(0, 1, 4.5, 0), (0, 2, 4.8, 1), (0, 3, 1.0, 0), (4, 5, 4.0, 0), (5, 4, 4.0, 0), (6, 4, 4.9, 0)]
    rel = np.zeros((len(pairs), 6), np.int64)
    for i, (_, _, _, r) in enumerate(pairs):
        rel[i, r] = 1000
    rel[5] = [0, 0, 0, 0, 0, 1000]  # they -> patients: Independent
    e1, e2, score = (np.array([p[i] for p in pairs]) for i in range(3))
    db = write_database(tmp_path / "aug.db", phrases=phrases, phrase_counts=np.full(len(phrases), 3), e1=e1, e2=e2,
                        n_pivots=np.ones(len(pairs), np.int64), pivots=np.zeros((len(pairs), 1), np.int64),
                        foreign={0: "fr:x"}, models=[MODELS[0], MODELS[3]], scores=np.full((len(pairs), 1), 0.5),
                        meta=META, form=np.zeros(len(pairs), np.int64), ppdb2=score, rel=rel, lhs=lhs)
    ppdb = tmp_path / "aug.ppdb"
    assert cli.main(["-q", "export", str(db), "--relation", "Equivalence", "--size", "m", "-o", str(ppdb)]) == 0
    assert [line.split(" ||| ")[:3] for line in ppdb.read_text().splitlines()] == [
        ["[VB]", "treat", "cure"], ["[NNS]", "patients", "people"], ["[NNS]", "people", "patients"]]
    tags = {"They": "PRP", "treat": "VBP", "patients": "NNS"}
    aug = naw.SynonymAug(aug_src="ppdb", model_path=str(ppdb), aug_p=1.0, force_reload=True)
    aug.model.pos_tag = lambda tokens: [(t, tags[t]) for t in tokens]  # nltk.pos_tag needs a download
    random.seed(0)
    np.random.seed(0)
    out = aug.augment("They treat patients")
    assert (out[0] if isinstance(out, list) else out) == "They cure people"
    # The same export with [X] on every line maps to no part of speech: nothing is substituted.
    plain = tmp_path / "aug-x.ppdb"
    assert cli.main(["-q", "export", str(db), "--relation", "Equivalence", "--size", "m", "--lhs", "x",
                     "-o", str(plain)]) == 0
    aug_x = naw.SynonymAug(aug_src="ppdb", model_path=str(plain), aug_p=1.0, force_reload=True)
    aug_x.model.pos_tag = lambda tokens: [(t, tags[t]) for t in tokens]
    out = aug_x.augment("They treat patients")
    assert (out[0] if isinstance(out, list) else out) == "They treat patients"
