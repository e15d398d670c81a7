"""The paraphrase decoder on a toy database and a hand-written bigram LM (scores by hand).

Database (model "general"): cat -> feline 0.5 (reverse feline -> cat 0.4), cat -> kitty 0.25,
"the cat" -> "a feline" 0.2, "cat sat" -> "cat" 0.9 (a deletion: dropped from the lattice).

LM (log10): p(the|<s>) = -0.3 (the one bigram); every other word its unigram, backoffs 0:
    the -0.5, a -0.6, cat -1.0, sat -1.0, feline -0.7, kitty -2.0, </s> -1.0.

Sentence "the cat sat", weights lm = 1, identity = 0.5, tm = 1 (ln 10 = 2.302585):
    the cat sat     tm 0           LM -3.3 -> -7.598531   3 kept: +1.5   score -6.098531
    the feline sat  tm ln .5       LM -3.0 -> -6.907755   2 kept: +1.0   score -6.600902
    a feline sat    tm ln .2       LM -3.3 -> -7.598531   1 kept: +0.5   score -8.707969
    the kitty sat   tm ln .25      LM -4.3 -> -9.901116   2 kept: +1.0   score -10.287410
With tm_rev = 1 the reverse scores join: feline ln .4, the other two the floor ln 1e-3.
"""
import math

import numpy as np
import pytest

from pivot.cli import main
from pivot.errors import InputError
from pivot.sentences.paraphrase import (REV_FLOOR, LanguageModel, Paraphraser, PhraseTable,
                                        build_lattice, decode_lattice, find_lm, format_nbest, naive_substitution)
from pivot.sentences.rewrite import Weights
from pivot.store.db import ParaphraseDB
from pivot.store.write import write_database

PHRASES = ["cat", "feline", "kitty", "the cat", "a feline", "cat sat"]
PAIRS = [(0, 1, 0.5), (1, 0, 0.4), (0, 2, 0.25), (3, 4, 0.2), (5, 0, 0.9)]

ARPA = """\\data\\
ngram 1=10
ngram 2=1

\\1-grams:
-3.0\t<unk>\t0
-99\t<s>\t0
-1.0\t</s>\t0
-0.5\tthe\t0
-0.6\ta\t0
-1.0\tcat\t0
-1.0\tsat\t0
-0.7\tfeline\t0
-2.0\tkitty\t0
-1.5\tdown\t0

\\2-grams:
-0.3\t<s> the

\\end\\
"""


def write_toy_db(path, meta_extra=None, phrases=PHRASES, pairs=PAIRS):
    e1 = np.array([p[0] for p in pairs], dtype=np.int32)
    e2 = np.array([p[1] for p in pairs], dtype=np.int32)
    scores = np.array([[p[2]] for p in pairs])
    meta = {"signature": "toy", "normalization": {"lang": "en"}}
    meta.update(meta_extra or {})
    return write_database(path, phrases=phrases, phrase_counts=np.full(len(phrases), 5), e1=e1, e2=e2,
                          n_pivots=np.ones(len(pairs), dtype=np.int32),
                          pivots=np.full((len(pairs), 3), -1, dtype=np.int32), foreign={},
                          models=[{"name": "general", "kind": "general", "description": "toy", "params": {}}],
                          scores=scores, meta=meta)


@pytest.fixture
def toy(tmp_path):
    db_path = write_toy_db(tmp_path / "toy.db")
    lm_path = tmp_path / "toy.arpa"
    lm_path.write_text(ARPA)
    return db_path, lm_path


LN10 = math.log(10)
W = Weights(lm=1.0, identity=0.5, word_penalty=0.0, tm=1.0, tm_rev=0.0)
EXPECTED = [("the cat sat", -3.3 * LN10 + 1.5),
            ("the feline sat", math.log(0.5) - 3.0 * LN10 + 1.0),
            ("a feline sat", math.log(0.2) - 3.3 * LN10 + 0.5),
            ("the kitty sat", math.log(0.25) - 4.3 * LN10 + 1.0)]


def test_lattice_options_and_partial_filter(toy):
    db_path, _ = toy
    with ParaphraseDB(db_path) as db:
        table = PhraseTable(db, "general", k=8)
        lat = build_lattice("the cat sat".split(), table, max_span=5)
        got = [[(o.end, " ".join(o.out), o.identity) for o in opts] for opts in lat]
        assert got == [[(1, "the", True), (2, "a feline", False)],
                       [(2, "cat", True), (2, "feline", False), (2, "kitty", False)],   # "cat sat" -> "cat" dropped
                       [(3, "sat", True)]]
        feline = lat[1][1]
        assert feline.logp == pytest.approx(math.log(0.5)) and feline.logp_rev == pytest.approx(math.log(0.4))
        assert lat[1][2].logp_rev == REV_FLOOR
        # without the filter the deletion is an option
        keep = build_lattice("the cat sat".split(), PhraseTable(db, "general", drop_partial=False))
        assert (3, "cat") in [(o.end, " ".join(o.out)) for o in keep[1] if not o.identity]


def test_decoder_exact_nbest(toy):
    db_path, lm_path = toy
    with ParaphraseDB(db_path) as db:
        lm = LanguageModel(lm_path)
        lat = build_lattice("the cat sat".split(), PhraseTable(db, "general"))
        best = decode_lattice(lat, lm, W, beam=10, nbest=10)
        got = [(" ".join(w for o in opts for w in o.out), score) for score, opts, _ in best]
        assert [g[0] for g in got] == [e[0] for e in EXPECTED]
        for (_, s), (_, e) in zip(got, EXPECTED):
            assert s == pytest.approx(e, abs=1e-4)
        feats = best[1][2]
        assert feats["tm"] == pytest.approx(math.log(0.5))
        assert feats["lm"] == pytest.approx(-3.0 * LN10, abs=1e-4)
        assert feats["identity_words"] == 2 and feats["output_words"] == 3
        # the reverse score reorders the tail: a feline and kitty both get the floor
        rev = decode_lattice(lat, lm, Weights(lm=1.0, identity=0.5, tm_rev=1.0), beam=10, nbest=2)
        assert rev[1][0] == pytest.approx(EXPECTED[1][1] + math.log(0.4), abs=1e-4)
        # forcing a change skips the identity
        forced = decode_lattice(lat, lm, W, beam=10, nbest=1, require_change=True)
        assert forced[0][0] == pytest.approx(EXPECTED[1][1], abs=1e-4)


def test_paraphraser_truecases_detokenises_and_reports_spans(toy):
    db_path, lm_path = toy
    with ParaphraseDB(db_path) as db:
        p = Paraphraser(db, "general", lm_path, weights=W, require_change=True)
        hyps = p.paraphrase("The cat sat", nbest=3)
        assert [h.text for h in hyps] == ["The feline sat", "A feline sat", "The kitty sat"]
        assert hyps[0].replaced == [("cat", "feline", round(math.log(0.5), 6))]
        assert hyps[1].replaced == [("the cat", "a feline", round(math.log(0.2), 6))]
        line = format_nbest(0, hyps[0])
        assert line.startswith("0 ||| The feline sat ||| -6.6009 ||| tm=-0.6931")
        assert line.endswith("||| cat -> feline (-0.693)")
        p.require_change = False
        assert p.paraphrase("The cat sat")[0].text == "The cat sat"
        assert p.paraphrase("")[0].text == ""
        # OOV words pass through with their case
        assert p.paraphrase("The cat sat, Bob")[0].tokens[-1] == "bob"
        assert naive_substitution("the cat sat".split(), p.table) == ["the", "feline", "sat"]


def test_find_lm_matches_the_build_stats(tmp_path):
    stats = {"in_domain": {"n_tokens": 10, "ngram_counts": [5, 3]},
             "general.0": {"n_tokens": 7, "ngram_counts": [4, 2]}}
    db_path = write_toy_db(tmp_path / "bio.db", {"lm": {"models": stats}})
    lm_dir = tmp_path / "work" / "lm-abc"
    lm_dir.mkdir(parents=True)
    import json

    (lm_dir / "stats.json").write_text(json.dumps(stats))
    (lm_dir / "general.0.arpa").write_text(ARPA)
    (lm_dir / "in_domain.arpa").write_text(ARPA)
    other = tmp_path / "work" / "lm-other"
    other.mkdir()
    (other / "stats.json").write_text(json.dumps({"general.0": {"n_tokens": 99, "ngram_counts": [1]}}))
    (other / "general.0.arpa").write_text(ARPA)
    with ParaphraseDB(db_path) as db:
        assert find_lm(db, db_path, "general") == lm_dir / "general.0.arpa"
        (lm_dir / "general.0.binary").write_text("x")
        assert find_lm(db, db_path, "general") == lm_dir / "general.0.binary"
        assert find_lm(db, db_path, "general", work=tmp_path / "nowhere") is None


def test_cli_paraphrase(toy, tmp_path, capsys):
    db_path, lm_path = toy
    assert main(["-q", "paraphrase", str(db_path), "--lm", str(lm_path), "--lm-weight", "1",
                 "--force-change", "--identity-bias", "0.5", "The cat sat"]) == 0
    assert capsys.readouterr().out == "The feline sat\n"
    # options after and between the positionals; n-best lines
    assert main(["-q", "paraphrase", str(db_path), "--nbest", "-n", "2", "The cat sat", "--lm", str(lm_path),
                 "--force-change", "--lm-weight", "1", "--identity-bias", "0.5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split(" ||| ")[1] for ln in lines] == ["The feline sat", "A feline sat"]
    # a file: one line out per line in, in order (an empty line stays empty)
    src = tmp_path / "in.txt"
    src.write_text("The cat sat\n\nthe cat sat\n", encoding="utf-8")
    assert main(["-q", "paraphrase", str(db_path), "-i", str(src), "--lm", str(lm_path), "--lm-weight", "1",
                 "--force-change", "--identity-bias", "0.5"]) == 0
    assert capsys.readouterr().out == "The feline sat\n\nthe feline sat\n"


def test_cli_paraphrase_bad_input(toy, tmp_path, capsys):
    db_path, lm_path = toy
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"the cat\nthe \xff sat\n")
    assert main(["-q", "paraphrase", str(db_path), "-i", str(bad), "--lm", str(lm_path)]) == 2
    err = capsys.readouterr().err
    assert "bad.txt:2: not UTF-8" in err and err.count("\n") == 1
    not_db = tmp_path / "x.db"
    not_db.write_text("hello\n")
    assert main(["-q", "paraphrase", str(not_db), "--lm", str(lm_path), "hi"]) == 2
    assert "not a pivot paraphrase database" in capsys.readouterr().err
    # no LM anywhere: a clear error asking for --lm
    assert main(["-q", "paraphrase", str(db_path), "hi"]) == 2
    assert "--lm PATH" in capsys.readouterr().err
    assert main(["-q", "paraphrase", str(db_path), "--lm", str(bad), "hi"]) == 2
    assert "not a kenlm" in capsys.readouterr().err
    assert main(["-q", "paraphrase", str(db_path), "--lm", str(lm_path), "--model", "nope", "hi"]) == 2
    assert "unknown model" in capsys.readouterr().err


def test_language_model_errors(tmp_path):
    with pytest.raises(InputError, match="no such language model"):
        LanguageModel(tmp_path / "missing.arpa")


def test_function_word_spans_and_identity_default(toy, tmp_path, capsys):
    db_path = write_toy_db(tmp_path / "fw.db", phrases=["the", "a", "cat", "feline"],
                           pairs=[(0, 1, 0.9), (2, 3, 0.5)])
    with ParaphraseDB(db_path) as db:
        assert PhraseTable(db, "general").options("the") == [(("a",), pytest.approx(math.log(0.9)), REV_FLOOR)]
        assert PhraseTable(db, "general", content_only=True).options("the") == []
        assert PhraseTable(db, "general", content_only=True).options("cat")[0][0] == ("feline",)
    # without --force-change the identity may win: with identity bias 0.5 it does (EXPECTED above)
    db_path, lm_path = toy
    assert main(["-q", "paraphrase", str(db_path), "--lm", str(lm_path), "--lm-weight", "1",
                 "--identity-bias", "0.5", "The cat sat"]) == 0
    assert capsys.readouterr().out == "The cat sat\n"


def test_punctuation_changing_paraphrases_are_dropped(tmp_path):
    db_path = write_toy_db(tmp_path / "p.db", phrases=["new drug", "new ,", "novel drug", "drug", "drugs"],
                           pairs=[(0, 1, 0.5), (0, 2, 0.3), (3, 4, 0.2)])
    with ParaphraseDB(db_path) as db:
        assert [o[0] for o in PhraseTable(db, "general").options("new drug")] == [("novel", "drug")]
        assert [o[0] for o in PhraseTable(db, "general", drop_partial=False).options("new drug")] == [
            ("new", ","), ("novel", "drug")]


def test_cli_paraphrase_stdin_and_json(toy, monkeypatch, capsys):
    import io
    import json
    import sys

    db_path, lm_path = toy

    class _Stdin:
        def __init__(self, data):
            self.buffer = io.BytesIO(data)

    monkeypatch.setattr(sys, "stdin", _Stdin(b"\xef\xbb\xbfThe cat sat\n"))
    assert main(["-q", "paraphrase", str(db_path), "--lm", str(lm_path), "--lm-weight", "1",
                 "--identity-bias", "0.5", "--format", "json", "-n", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["source"] == "The cat sat"
    assert [h["text"] for h in out["nbest"]] == ["The cat sat", "The feline sat"]
    assert out["nbest"][1]["replaced"] == [["cat", "feline", round(math.log(0.5), 6)]]
    monkeypatch.setattr(sys, "stdin", _Stdin(b"ok\n\xff\n"))
    assert main(["-q", "paraphrase", str(db_path), "--lm", str(lm_path)]) == 2
    assert "<stdin>:2: not UTF-8" in capsys.readouterr().err
