"""The rule model (pivot.sentences.rules) and the decoder's rule weight and gate, by hand.

Toy database and LM of tests/test_sentences_decoder.py: cat -> feline 0.5, cat -> kitty 0.25,
"the cat" -> "a feline" 0.2; bigram LM with p(the|<s>) = -0.3 and unigrams otherwise (log10).
Source "the cat sat", reference "a feline sat down"; reference n-grams padded with <s>, </s>.

Labels (a rewrite is good when its output with one source word of context is a reference
n-gram and the span with that context is not):
    cat -> feline          "feline sat" in the reference, "the cat"/"cat sat" not     good
    the cat -> a feline    "<s> a feline" in the reference                           good
    cat -> kitty           neither "the kitty" nor "kitty sat"                        not good
Counts: keep (w in src -> w in ref): the 0/1, cat 0/1, sat 1/1 -> keep0 = 1/3; rules: 3 offered,
2 good -> rule0 = 2/3. Smoothed (a = 5): keep_rate(sat) = (1 + 5/3) / 6 = 0.444444,
keep_rate(cat) = (0 + 5/3) / 6 = 0.277778, rate(cat -> feline) = (1 + 10/3) / 6 = 0.722222.
"""
import math

import pytest

from pivot.cli import main
from pivot.sentences.paraphrase import (LanguageModel, Option, Paraphraser, PhraseTable, build_lattice,
                                        decode_lattice, gate_margin)
from pivot.sentences.rewrite import Weights
from pivot.sentences.rules import CONTEXT_FEATURES, FEATURES, RuleModel, _grams, harmless_label, option_label
from pivot.store.db import ParaphraseDB
from test_sentences_decoder import toy  # noqa: F401  (the toy database and LM fixture)

LN10 = math.log(10)
SRC, REF = "the cat sat".split(), "a feline sat down".split()


def test_option_labels_and_counts(toy):
    db_path, _ = toy
    grams = _grams(REF)
    assert option_label(SRC, 1, 2, ("feline",), grams)
    assert option_label(SRC, 0, 2, ("a", "feline"), grams)
    assert not option_label(SRC, 1, 2, ("kitty",), grams)
    # the span itself already in the reference with its context: not good, whatever the output
    assert not option_label("a feline sat".split(), 1, 2, ("cat",), _grams("a feline sat".split()))
    with ParaphraseDB(db_path) as db:
        table = PhraseTable(db, "general")
        lattice = build_lattice(SRC, table)
        m = RuleModel()
        m.count([(SRC, REF)], [lattice])
        assert m.keep == {"the": [1, 0], "cat": [1, 0], "sat": [1, 1]}
        assert m.keep0 == pytest.approx(1 / 3) and m.rule0 == pytest.approx(2 / 3)
        assert m.rules == {"cat\tfeline": [1, 1], "cat\tkitty": [1, 0], "the cat\ta feline": [1, 1]}
        assert m.keep_rate("sat") == pytest.approx(0.444444, abs=1e-6)
        assert m.keep_rate("cat") == pytest.approx(0.277778, abs=1e-6)
        feline = lattice[1][1]
        f = dict(zip(FEATURES, m.features(table, SRC, feline)))
        assert f["logp"] == pytest.approx(math.log(0.5))
        assert f["log_pivots"] == pytest.approx(math.log(2)) and f["rank"] == 0
        assert (f["span_len"], f["len_change"], f["partial"], f["same_stem"]) == (1, 0, 0, 0)
        assert f["keep_mean"] == f["keep_min"] == pytest.approx(0.277778, abs=1e-6)
        assert f["rule_rate"] == pytest.approx(math.log(0.722222 / 0.277778), abs=1e-5)
        assert f["rule_log_count"] == pytest.approx(math.log(2))


def test_harmless_labels_and_context_features(toy):
    """A span is harmless when none of its words is in the reference; the context features by hand.

    Reference words {a, feline, sat, down}: "cat" and "the cat" are harmless, "sat" is not.
    cat -> feline (span [1, 2) of 3 words): start 1/3, end 1/3, left keep_rate(the) = 5/3 / 6 =
    0.277778, right keep_rate(sat) = 0.444444, "Cat" capitalised after the first word, followed
    by a word, 1 content word. sat -> sits ([2, 3)): at the end, so the right keep rate is 1 and
    the "before punctuation" flag is set; "the cat" keeps 1 on the left (the sentence's start)."""
    db_path, _ = toy
    words = set(REF)
    assert harmless_label(SRC, 1, 2, words) and harmless_label(SRC, 0, 2, words)
    assert not harmless_label(SRC, 2, 3, words) and not harmless_label(SRC, 1, 3, words)
    with ParaphraseDB(db_path) as db:
        lattice = build_lattice(SRC, PhraseTable(db, "general"))
    m = RuleModel()
    m.count([(SRC, REF)], [lattice])
    cased = ["The", "Cat", "sat"]
    f = dict(zip(CONTEXT_FEATURES, m.context_features(SRC, lattice[1][1], cased)))
    assert f == pytest.approx({"start_share": 1 / 3, "end_share": 1 / 3, "src_len": 3, "has_digit": 0,
                               "keep_left": 5 / 18, "keep_right": 8 / 18, "capitalised": 1, "before_punct": 0,
                               "content_words": 1})
    assert m.context_features(SRC, lattice[1][1])[CONTEXT_FEATURES.index("capitalised")] == 0   # no casing given
    sits = dict(zip(CONTEXT_FEATURES, m.context_features(SRC, Option(2, 3, ("sits",), -1.0, False), cased)))
    assert (sits["start_share"], sits["end_share"], sits["keep_right"], sits["before_punct"]) == (2 / 3, 0, 1.0, 1)
    assert sits["keep_left"] == pytest.approx(5 / 18) and sits["capitalised"] == 0
    the_cat = [o for o in lattice[0] if o.out == ("a", "feline")][0]
    g = dict(zip(CONTEXT_FEATURES, m.context_features(SRC, the_cat, cased)))
    assert (g["start_share"], g["keep_left"], g["content_words"], g["capitalised"]) == (0, 1.0, 1, 1)


class _FixedRules:
    """A stand-in rule model: fixed log-odds per (span, paraphrase)."""
    LOG_ODDS = {("cat", "feline"): 1.0, ("the cat", "a feline"): -2.0, ("cat", "kitty"): -3.0}

    def annotate(self, table, src, lattice):
        from dataclasses import replace

        return [[o if o.identity else replace(o, rule=self.LOG_ODDS[(" ".join(src[o.start:o.end]), " ".join(o.out))])
                 for o in opts] for opts in lattice]


def test_rule_weight_and_gate(toy):
    """Scores (lm 1, identity 0.5, tm 1, rule 1): the decoder tests' values plus the log-odds:
    the feline sat -6.600902 + 1 = -5.600902; the cat sat -6.098531; a feline sat -8.707969 - 2;
    the kitty sat -10.287410 - 3."""
    db_path, lm_path = toy
    w = Weights(lm=1.0, identity=0.5, tm=1.0, rule=1.0)
    with ParaphraseDB(db_path) as db:
        p = Paraphraser(db, "general", lm_path, weights=w, rules=_FixedRules())
        lat = p.lattice(SRC)
        best = decode_lattice(lat, LanguageModel(lm_path), w, beam=10, nbest=4)
        got = [(" ".join(x for o in opts for x in o.out), round(score, 6)) for score, opts, _ in best]
        assert got == [("the feline sat", -5.600902), ("the cat sat", -6.098531), ("a feline sat", -10.707969),
                       ("the kitty sat", -13.28741)]
        assert best[0][2]["rule"] == 1.0
        assert gate_margin(best[0][1]) == 1.0 and gate_margin(best[1][1]) == -math.inf
        # the gate: the forced best (margin 1.0) is kept at gate 0.5, refused at gate 1.5
        p.gate = 0.5
        assert p.paraphrase("The cat sat")[0].text == "The feline sat"
        p.gate = 1.5
        hyp = p.paraphrase("The cat sat")[0]
        assert hyp.text == "The cat sat" and hyp.score == pytest.approx(-6.098531, abs=1e-6)


def test_rule_model_fit_save_load_and_cli(toy, tmp_path, capsys):
    db_path, lm_path = toy
    pairs = [(SRC, REF), ("the cat sat".split(), "the kitty sat".split())] * 5
    with ParaphraseDB(db_path) as db:
        table = PhraseTable(db, "general")
        lattices = [build_lattice(s, table) for s, _ in pairs]
        m = RuleModel().fit(pairs, lattices, table, seed=0)
        m.weights, m.gate = Weights(lm=1.0, identity=0.5, tm=1.0, rule=1.0), -100.0
        m.save(tmp_path / "rules.json")
        back = RuleModel.load(tmp_path / "rules.json")
        o = build_lattice(SRC, table)[1][1]
        assert back.log_odds(table, SRC, o) == pytest.approx(m.log_odds(table, SRC, o))
        assert back.weights == m.weights and back.gate == -100.0
    # the rule file brings its weights and gate: with gate -100 every sentence with an option changes
    assert main(["-q", "paraphrase", str(db_path), "--lm", str(lm_path), "--rules", str(tmp_path / "rules.json"),
                 "The cat sat"]) == 0
    assert capsys.readouterr().out != "The cat sat\n"
    assert main(["-q", "paraphrase", str(db_path), "--lm", str(lm_path), "--rules", str(tmp_path / "rules.json"),
                 "--gate", "1000", "The cat sat"]) == 0
    assert capsys.readouterr().out == "The cat sat\n"
    assert main(["-q", "paraphrase", str(db_path), "--lm", str(lm_path), "--gate", "1", "The cat sat"]) == 2
    assert "--gate needs --rules" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("{}")
    assert main(["-q", "paraphrase", str(db_path), "--lm", str(lm_path), "--rules", str(tmp_path / "bad.json"),
                 "x"]) == 2
    assert "not a rule model" in capsys.readouterr().err
