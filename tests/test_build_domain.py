"""A whole domain build on a tiny synthetic recipe: LMs, Moore-Lewis, every model, combination, eval.

The bitext is word-for-word with hand alignments (0-0 1-1 2-2), and the foreign side maps
synonyms to one word, so single-word pivots are exact:

    divides, splits -> divise      grows, expands -> croit      binds, attaches -> lie
    eat, devour -> mange           like, love -> aime

"divides" is aligned only to "divise", which is aligned to divides (sentence 0) and splits
(sentence 1), so for any model with sentence weights w:

    p(splits | divides) = p(splits | divise) * p(divise | divides) = w1 / (w0 + w1) * 1

General (w = 1): 0.5. M-L Weighted (w = H_gen/H_tgt): read back from `pivot score`'s output.
"""
import json
import sqlite3
import subprocess
import sys

import pytest

from pivot.cli import main
from pivot.store.db import ParaphraseDB

EN = ["the cell divides", "the cell splits", "the cell grows", "the cell expands", "the protein binds",
      "the protein attaches", "we eat pizza", "we devour bread", "they like music", "they love music",
      "we eat bread", "they like pizza"]
LEX = {"the": "le", "cell": "cellule", "divides": "divise", "splits": "divise", "grows": "croit",
       "expands": "croit", "protein": "proteine", "binds": "lie", "attaches": "lie", "we": "nous",
       "eat": "mange", "devour": "mange", "pizza": "pizza", "bread": "pain", "they": "ils", "like": "aime",
       "love": "aime", "music": "musique"}
BIO = set(EN[:6])
IN_DOMAIN = ["the cell divides .", "the cell splits into two cells .", "a protein binds the cell .",
             "the protein attaches to the membrane .", "the cell grows and expands .", "cells divide ."] * 3
GOLD = "divides\tsplits\t9.0\ngrows\texpands\t8.0\nlike\tlove\t4.0\neat\tdevour\t5.0\npizza\tbread\t1.0\n"
CONTROL = "binds\tattaches\t8.0\nwe eat\twe devour\t2.0\npizza\tmusic\t0.5\n"


def write_tiny(tmp, en=EN, lex=LEX):
    """The tiny recipe and its data under `tmp`; `en` (3-word sentences) and `lex` (word for word)
    may add sentences, as tests/test_docs.py does; returns the build's arguments."""
    data = tmp / "data"
    data.mkdir()
    (data / "c.en").write_text("\n".join(en) + "\n")
    (data / "c.fr").write_text("\n".join(" ".join(lex[w] for w in s.split()) for s in en) + "\n")
    (data / "c.align").write_text("0-0 1-1 2-2\n" * len(en))
    (data / "bio.txt").write_text("\n".join(IN_DOMAIN) + "\n")
    (data / "gold.txt").write_text(GOLD)
    (data / "control.txt").write_text(CONTROL)
    recipe = tmp / "tinybio.toml"
    recipe.write_text("""
name = "tinybio"
[[bitext]]
lang = "fr"
sources = [{ name = "c", format = "parallel", en = "c.en", f = "c.fr" }]
[align]
method = "pharaoh"
pharaoh = { fr = "c.align" }
[pivot]
min_phrase_count = 1
[domain]
order = 3
in_domain = { lines = ["bio.txt"] }
taus = [9]
# Matched LMs on tiny text: the in-domain sample holds ~18 tokens (the size of a cross-fitted
# half of the bitext), so a word seen once there is part of the shared vocabulary.
vocab_min_count = 1
[combine]
gold = ["gold.txt"]
n_tune = 1000
[eval]
sets = [{ name = "control", sources = [{ path = "control.txt", format = "simlex", threshold = 6.0 }] }]
[ppdb2]
# this data root holds neither the PPDB 2.0 ratings nor WordNet: no learned score, no relations;
# nor GENIA-pos and Brown: every LHS is [X]
learn = false
wordnet = false
lhs = "x"
""")
    return ["--recipe", str(recipe), "--data", str(data), "--work", str(tmp / "work")]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("domain")
    args = write_tiny(tmp)
    assert main(["-q", "build", *args, "--out", str(tmp / "t.db")]) == 0
    return tmp, args


def test_failed_build_resumes_where_it_stopped(tmp_path, caplog, capsys, monkeypatch):
    args = write_tiny(tmp_path)
    from pivot.errors import InputError
    from pivot.pipeline import combine

    def fail(*a, **k):  # the build stops at the combination stage, after every other stage
        raise InputError("the regression failed (injected)")

    with monkeypatch.context() as m:
        m.setattr(combine, "fit_combination_unordered", fail)
        assert main(["-q", "build", *args, "--out", str(tmp_path / "t.db")]) == 2
    assert "injected" in capsys.readouterr().err
    assert not (tmp_path / "t.db").exists()
    # combine is the graph's last stage; on a cluster ppdb2 may still run beside it and is
    # stopped with it: the rerun runs what did not finish, and only that
    finished = {d.name.rsplit("-", 1)[0] for d in (tmp_path / "work").glob("*-*") if (d / "DONE").is_file()}
    assert {"extract", "translation", "pivot"} <= finished and "combine" not in finished
    with caplog.at_level("INFO", logger="pivot"):
        assert main(["build", *args, "--out", str(tmp_path / "t.db")]) == 0
    messages = [r.getMessage() for r in caplog.records]
    ran = {m.split()[1] for m in messages if "running" in m}
    reused = {m.split()[1] for m in messages if "reused" in m}
    assert "combine" in ran and ran <= {"combine", "ppdb2"} and not ran & finished
    assert {"corpus.fr", "align.fr", "encode", "lmtext", "lm", "score", "weights", "extract", "pivot"} <= reused
    assert (tmp_path / "t.db").is_file()


def test_models_and_meta(built):
    tmp, _ = built
    with ParaphraseDB(tmp / "t.db") as db:
        names = db.models
        assert names[0] == "general" and "ml-t9" in names
        assert {"ml-change-point", "ml-weighted", "ml-weighted-ppl"} <= set(names)
        domain = [n for n in names if n.startswith("ml-")]
        assert [n for n in names if n.startswith("general+")] == [f"general+{n}" for n in domain]
        # every combination records how it was fitted, on the four candidate tuning pairs
        # (pizza/bread shares no pivot: not a candidate)
        comb = db.meta["combination"]
        assert comb["n_tuning"] == 5 and comb["n_tuning_candidates"] == 4
        assert comb["n_tuning_candidates_positive"] == 2
        for name in domain:
            fit = comb["models"][f"general+{name}"]
            assert fit["n"] == 4 and fit["method"] in ("mle", "l2-fallback")
            assert fit["method"] == "mle" or fit["reason"]
        assert set(db.meta["lm"]["models"]) == {"in_domain", "general.0", "general.1"}
        # Matched LMs: equal-size samples (each holds n_match tokens, up to the sentence that
        # reaches it) over one declared vocabulary, so the three models have the same unigrams.
        text, models = db.meta["lm"]["text"], db.meta["lm"]["models"]
        n_match = text["protocol"]["n_tokens_target"]
        assert text["protocol"]["matched"] and n_match == min(text["in_domain_full"]["tokens"],
                                                              text["general.0"]["tokens"], text["general.1"]["tokens"])
        for name in models:
            assert n_match <= text[name]["tokens"] < n_match + 8  # the sentences here hold < 8 tokens
            assert models[name]["vocab_size"] == text["protocol"]["shared_vocab_size"] + 3  # <unk> <s> </s>
            assert models[name]["n_declared"] == text["protocol"]["shared_vocab_size"]
        assert db.meta["lm"]["scoring"]["bitext_tokens"] == sum(len(s.split()) for s in EN)
        # The pruning record: each model on its own counts, every pair above the floor,
        # top_n a lookup default only.
        pruning = db.meta["pruning"]
        assert pruning["decided_on"] == "each model's own counts" and pruning["top_n"] == 0
        assert pruning["lookup_top_n"] == 20 and db.default_k == 20
        assert len(pruning["n_kept_by_model"]) == len([m for m in names if not m.startswith("general+")])
        # The signature names every pruning setting and the LM protocol.
        assert "|prune:0.001/0.001/100/n1/floor0.0/per-model|lm:matched/v1|" in db.signature
        assert db.meta["moore_lewis"]["n_sentences"] == len(EN)
        assert db.lookup("divides", k=1)[0].paraphrase == "splits"
        assert db.lookup("divides", k=1)[0].score == 0.5


def test_weighted_model_counts_with_the_sentence_weights(built, tmp_path, capsys):
    tmp, args = built
    ranked = tmp_path / "ranked.tsv"
    assert main(["-q", "score", *args, "-o", str(ranked)]) == 0
    # "-o -": the same ranking on standard output, the summary on stderr
    capsys.readouterr()
    assert main(["-q", "score", *args, "-o", "-"]) == 0
    got = capsys.readouterr()
    assert got.out == ranked.read_text() and json.loads(got.err)["ranked"] == "-"
    rows = [line.rstrip("\n").split("\t") for line in ranked.read_text().splitlines()]
    sigma = [float(r[0]) for r in rows]
    assert sigma == sorted(sigma) and {r[3] for r in rows} == set(EN)
    # the in-domain sentences rank first
    assert {r[3] for r in rows[:6]} == BIO
    h = {r[3]: (float(r[1]), float(r[2])) for r in rows}
    w0 = h[EN[0]][1] / h[EN[0]][0]   # H_gen / H_tgt
    w1 = h[EN[1]][1] / h[EN[1]][0]
    with ParaphraseDB(tmp / "t.db") as db:
        got = db.scores([("divides", "splits")], model="ml-weighted")[0]
        # ranked.tsv rounds to 6 decimals, hence the tolerance
        assert got == pytest.approx(w1 / (w0 + w1), rel=1e-5)
        ppl0, ppl1 = 2 ** -float(rows[[r[3] for r in rows].index(EN[0])][0]), 2 ** -float(
            rows[[r[3] for r in rows].index(EN[1])][0])
        assert db.scores([("divides", "splits")], model="ml-weighted-ppl")[0] == pytest.approx(
            ppl1 / (ppl0 + ppl1), rel=1e-4)


def test_rerun_reuses_every_stage(built, caplog):
    tmp, args = built
    with caplog.at_level("INFO", logger="pivot"):
        assert main(["build", *args, "--out", str(tmp / "t2.db")]) == 0
    messages = [r.getMessage() for r in caplog.records]
    assert not [m for m in messages if "running" in m]
    stages = {m.split()[1] for m in messages if "reused" in m}
    assert {"corpus.fr", "align.fr", "encode", "lmtext", "lm", "score", "weights", "extract", "pivot",
            "combine"} <= stages


def test_eval_report(built, capsys):
    tmp, args = built
    report = tmp / "docs" / "results.md"
    data = args[args.index("--data") + 1]
    assert main(["eval", str(tmp / "t.db"), "--recipe", args[1], "--data", data, "--report", str(report),
                 "--n-boot", "50"]) == 0
    out = capsys.readouterr().out
    # control: binds/attaches (positive) and "we eat"/"we devour" (negative) are candidates;
    # pizza/music shares no pivot. General, either direction, the better one:
    #   binds/attaches: p(attaches|binds) = p(attaches|lie) p(lie|binds) = 1/2 * 1 = 0.5 (reverse 0.5)
    #   we eat/we devour: "we eat" twice, "we devour" once, all aligned to "nous mange":
    #     p(we devour|we eat) = 1/3 * 1, p(we eat|we devour) = 2/3 * 1 -> 2/3
    # The negative ranks first: AP = precision at the positive = 1/2.
    assert "## control: 2 candidates (1 positive) of 3 gold pairs" in out
    assert "| general | 50.0" in out
    text = report.read_text()
    assert "## control" in text and db_signature(tmp / "t.db") in text
    pngs = sorted((report.parent / "figures").glob("*.png"))
    assert len(pngs) == 2 and all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)


def test_eval_refuses_tuning_pairs(built, capsys):
    tmp, args = built
    gold = tmp / "data" / "gold.txt"
    assert main(["eval", str(tmp / "t.db"), "--gold", str(gold)]) == 2
    assert "overlaps the regression's tuning pairs" in capsys.readouterr().err
    # with the tuning pairs dropped nothing is left: a clear error, not a number
    assert main(["eval", str(tmp / "t.db"), "--gold", str(gold), "--exclude-tuning"]) == 2


def db_signature(path):
    conn = sqlite3.connect(path)
    return json.loads(conn.execute("SELECT value FROM meta WHERE key='signature'").fetchone()[0])


def test_quiet_build_prints_only_warnings(tmp_path):
    """`pivot -q build` keeps the terminal quiet: no progress bar (kenlm draws one on stderr when
    it loads an ARPA file unless told not to), no info line, no Python warning with its source
    line; stdout is the database's path. What is left are one-line warnings: here the tiny
    texts leave the LMs without the counts-of-counts modified Kneser-Ney needs (one line per
    model: in_domain and the two cross-fitted general halves)."""
    args = write_tiny(tmp_path)
    out = tmp_path / "t.db"
    done = subprocess.run([sys.executable, "-m", "pivot", "-q", "build", *args, "--workers", "1", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{out}\n"
    lines = done.stderr.splitlines()
    assert [line.split(" pivot WARNING ", 1)[1].split(":", 1)[0] for line in lines] == \
        ["lm in_domain", "lm general.0", "lm general.1"]
    assert all("too little text for modified Kneser-Ney discounts" in line for line in lines)
