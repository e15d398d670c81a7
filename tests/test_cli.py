"""Every subcommand end to end on a tiny synthetic recipe, and each bad input the CLI must refuse.

The corpus (written by the tests, aligned by hand with Pharaoh files so values are exact):

    s1  we treat it   | nous soignons le     0-0 1-1 2-2
    s2  we cure it    | nous soignons le     0-0 1-1 2-2
    s3  they treat it | ils traitent le      0-0 1-1 2-2

Single words: treat~soignons (1), treat~traitent (1), cure~soignons (1), so
    p(soignons|treat) = 1/2, p(traitent|treat) = 1/2, p(cure|soignons) = 1/2, p(cure|traitent) = 0
    p(cure|treat) = 1/2 * 1/2 = 0.25          p(treat|cure) = p(treat|soignons) * 1 = 0.5
Two words: "we treat"~"nous soignons" (1), "we cure"~"nous soignons" (1):
    p(we cure|we treat) = p(we cure|nous soignons) * 1 = 0.5
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pivot.cli import main
from pivot.store.db import ParaphraseDB

EN = ["we treat it", "we cure it", "they treat it"]
FR = ["nous soignons le", "nous soignons le", "ils traitent le"]


def write_recipe(tmp_path, en=EN, fr=FR, align="0-0 1-1 2-2\n" * 3, pivot_extra=""):
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    (data / "c.en").write_bytes(en if isinstance(en, bytes) else ("\n".join(en) + "\n").encode())
    (data / "c.fr").write_bytes(fr if isinstance(fr, bytes) else ("\n".join(fr) + "\n").encode())
    (data / "c.align").write_text(align)
    recipe = tmp_path / "tiny.toml"
    recipe.write_text(f"""
name = "tiny"
[[bitext]]
lang = "fr"
sources = [{{ name = "c", format = "parallel", en = "c.en", f = "c.fr" }}]
[align]
method = "pharaoh"
pharaoh = {{ fr = "c.align" }}
[pivot]
{pivot_extra or 'min_phrase_count = 1   # "cure" occurs once'}
[ppdb2]
# this data root holds neither the PPDB 2.0 ratings nor WordNet: no learned score, no relations;
# nor GENIA-pos and Brown: every LHS is [X]
learn = false
wordnet = false
lhs = "x"
""")
    return recipe, data


def build(tmp_path, recipe, data, *more):
    return main(["-q", "build", "--recipe", str(recipe), "--data", str(data),
                 "--out", str(tmp_path / "tiny.db"), "--work", str(tmp_path / "work"), *more])


@pytest.fixture
def tiny_db(tmp_path, capsys):
    recipe, data = write_recipe(tmp_path)
    assert build(tmp_path, recipe, data) == 0
    capsys.readouterr()
    return tmp_path / "tiny.db"


def test_build_lookup_export(tiny_db, capsys, tmp_path):
    assert main(["lookup", str(tiny_db), "treat", "--model", "general", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(p["paraphrase"], p["score"], p["p_rev"]) for p in out["paraphrases"]] == [("cure", 0.25, 0.5)]
    assert out["paraphrases"][0]["pivots"] == ["fr:soignons"]
    assert out["signature"].startswith("pivot:")

    assert main(["lookup", str(tiny_db), "We", "Treat", "-k", "1", "--model", "general", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["phrase"] == "we treat"
    assert [(p["paraphrase"], p["score"]) for p in out["paraphrases"]] == [("we cure", 0.5)]

    assert main(["lookup", str(tiny_db), "treat", "--model", "general"]) == 0
    table = capsys.readouterr().out.splitlines()
    # rank, paraphrase, score, p(e2|e1), p(e1|e2) (General's: -ln .25 = 1.38629, -ln .5 = 0.693147 below)
    assert table[1].split()[:5] == ["1", "cure", "0.2500", "0.2500", "0.5000"]

    assert main(["lookup", str(tiny_db), "treat", "--model", "general", "--format", "ppdb"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("[") and " ||| treat ||| cure ||| " in line
    assert " -logp(e2|e1)=1.38629 -logp(e1|e2)=0.693147 " in line and " NumPivots=1 " in line

    assert main(["lookup", str(tiny_db), "no such phrase"]) == 1

    out_file = tmp_path / "tiny.ppdb"
    assert main(["-q", "export", str(tiny_db), "--model", "general", "--all", "-o", str(out_file)]) == 0
    lines = out_file.read_text().splitlines()
    assert all(len(x.split(" ||| ")) == 6 for x in lines)
    assert line in lines  # the lookup's line is the export's
    assert " ||| cure ||| treat ||| " in "\n".join(lines)
    # "-o -" is standard output (no file named "-"), the same lines as the file
    capsys.readouterr()
    assert main(["-q", "export", str(tiny_db), "--model", "general", "--all", "-o", "-"]) == 0
    assert capsys.readouterr().out.splitlines() == lines and not (Path.cwd() / "-").exists()


def test_min_phrase_count(tmp_path, capsys):
    # min_phrase_count = 2 keeps pairs of phrases seen at least twice: treat (2), "treat it" (2),
    # it (3), we (2). Their only shared pivots lead to cure / "cure it" (seen once) or to
    # themselves, so no pair survives and the lookup answers nothing. Without the filter there
    # are 8 (both directions of treat~cure, treat it~cure it, we treat~we cure, we treat it~we cure it).
    recipe, data = write_recipe(tmp_path, pivot_extra="min_phrase_count = 2")
    assert build(tmp_path, recipe, data) == 0
    capsys.readouterr()
    assert main(["lookup", str(tmp_path / "tiny.db"), "treat", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["paraphrases"] == []
    with ParaphraseDB(tmp_path / "tiny.db") as db:
        assert db.n_pairs() == 0 and db.meta["pruning"]["min_phrase_count"] == 2
    other = tmp_path / "one"
    other.mkdir()
    recipe, data = write_recipe(other, pivot_extra="min_phrase_count = 1")
    assert build(other, recipe, data) == 0
    with ParaphraseDB(other / "tiny.db") as db:
        assert db.n_pairs() == 8


def test_rerun_reuses_every_stage(tmp_path, caplog):
    recipe, data = write_recipe(tmp_path)
    assert build(tmp_path, recipe, data) == 0
    first = (tmp_path / "tiny.db").read_bytes()
    caplog.clear()
    with caplog.at_level("INFO", logger="pivot"):
        assert main(["build", "--recipe", str(recipe), "--data", str(data), "--out",
                     str(tmp_path / "tiny.db"), "--work", str(tmp_path / "work")]) == 0
    reused = [r.getMessage() for r in caplog.records if "reused" in r.getMessage()]
    running = [r.getMessage() for r in caplog.records if "running" in r.getMessage()]
    assert len(reused) >= 6 and running == []
    assert len(first) > 0


def test_python_dash_m_and_version():
    done = subprocess.run([sys.executable, "-m", "pivot", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("pivot ")


# ------------------------------------------------------------------------- bad input


def run_bad(tmp_path, capsys, recipe, data):
    rc = build(tmp_path, recipe, data)
    err = capsys.readouterr().err
    assert rc == 2
    assert not (tmp_path / "tiny.db").exists(), "a failed build must not leave a database"
    return err


def test_missing_data_root(tmp_path, capsys, monkeypatch):
    recipe, _ = write_recipe(tmp_path)
    monkeypatch.delenv("PIVOT_DATA", raising=False)
    assert main(["-q", "build", "--recipe", str(recipe), "--work", str(tmp_path / "w")]) == 2
    assert "--data DIR or set PIVOT_DATA" in capsys.readouterr().err
    err = run_bad(tmp_path, capsys, recipe, tmp_path / "nowhere")
    assert "data root does not exist" in err and "nowhere" in err


def test_missing_file(tmp_path, capsys):
    recipe, data = write_recipe(tmp_path)
    (data / "c.fr").unlink()
    err = run_bad(tmp_path, capsys, recipe, data)
    assert "c.fr" in err and "PIVOT_DATA" in err


def test_mismatched_line_counts(tmp_path, capsys):
    recipe, data = write_recipe(tmp_path, fr=FR[:2])
    err = run_bad(tmp_path, capsys, recipe, data)
    assert "c.en" in err and "c.fr" in err and "3" in err and "2" in err


def test_undecodable_bytes(tmp_path, capsys):
    recipe, data = write_recipe(tmp_path, fr=b"nous soignons le\nnous \xff\xfe le\nils traitent le\n")
    err = run_bad(tmp_path, capsys, recipe, data)
    assert "c.fr:2" in err


def test_alignment_out_of_range(tmp_path, capsys):
    recipe, data = write_recipe(tmp_path, align="0-0 1-1 2-2\n0-0 1-7\n0-0 1-1 2-2\n")
    err = run_bad(tmp_path, capsys, recipe, data)
    assert "c.align:2" in err and "1-7" in err


def test_unknown_domain_and_bad_recipe(tmp_path, capsys):
    assert main(["-q", "build", "--domain", "astrology", "--data", str(tmp_path)]) == 2
    assert "no recipe for domain 'astrology'" in capsys.readouterr().err
    recipe, data = write_recipe(tmp_path, pivot_extra="top_m = 3\n")
    err = run_bad(tmp_path, capsys, recipe, data)
    assert "unknown keys ['top_m']" in err


def test_lookup_bad_db_and_model(tiny_db, tmp_path, capsys):
    assert main(["lookup", str(tmp_path / "absent.db"), "treat"]) == 2
    assert "no such paraphrase database" in capsys.readouterr().err
    assert main(["lookup", str(tiny_db), "treat", "--model", "nope"]) == 2
    assert "unknown model 'nope'" in capsys.readouterr().err


def test_agree_is_refused_without_stored_labels(tiny_db, tmp_path, capsys):
    """The build stores [X] for every phrase (meta lhs): --agree would keep every pair, so it is refused."""
    assert ParaphraseDB(tiny_db).meta["lhs"]["tagger"] is None
    assert main(["export", str(tiny_db), "--agree", "-o", str(tmp_path / "out.ppdb")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--agree compares the phrases' labels, and this build stored none" in err[0]
    assert not (tmp_path / "out.ppdb").exists()


def test_list_models_needs_no_phrase(tiny_db, capsys):
    assert main(["lookup", str(tiny_db), "--list-models"]) == 0
    assert capsys.readouterr().out.splitlines()[0].split("\t")[:2] == ["general", "general"]
    assert main(["lookup", str(tiny_db)]) == 2
    assert capsys.readouterr().err.strip() == "pivot lookup: error: give a phrase to look up (or --list-models)"
