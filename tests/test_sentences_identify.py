"""MSRP reader, identification features by hand, and `pivot identify` end to end on toy data."""
import math

import numpy as np
import pytest

from pivot.cli import main
from pivot.errors import InputError
from pivot.sentences.identify import (DB_FEATURES, STRING_FEATURES, ParaphraseAligner, align, bootstrap_difference,
                                      edit_distance, mcnemar, metrics, stem, string_features)
from pivot.sentences.msrp import read_msrp
from pivot.store.db import ParaphraseDB
from pivot.store.write import write_database

HEADER = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"


# The decoder tests' toy database (tests/test_sentences_decoder.py): cat -> feline 0.5,
# feline -> cat 0.4, cat -> kitty 0.25, "the cat" -> "a feline" 0.2, "cat sat" -> "cat" 0.9.
PHRASES = ["cat", "feline", "kitty", "the cat", "a feline", "cat sat"]
PAIRS = [(0, 1, 0.5), (1, 0, 0.4), (0, 2, 0.25), (3, 4, 0.2), (5, 0, 0.9)]


def write_toy_db(path):
    return write_database(path, phrases=PHRASES, phrase_counts=np.full(len(PHRASES), 5),
                          e1=np.array([p[0] for p in PAIRS], dtype=np.int32),
                          e2=np.array([p[1] for p in PAIRS], dtype=np.int32),
                          n_pivots=np.ones(len(PAIRS), dtype=np.int32),
                          pivots=np.full((len(PAIRS), 3), -1, dtype=np.int32), foreign={},
                          models=[{"name": "general", "kind": "general", "description": "toy", "params": {}}],
                          scores=np.array([[p[2]] for p in PAIRS]),
                          meta={"signature": "toy", "normalization": {"lang": "en"}})


def write_msrp(path, rows, bom=True, final_newline=False):
    text = "\n".join([HEADER] + ["\t".join(map(str, r)) for r in rows])
    if final_newline:
        text += "\n"
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
    return path


def test_read_msrp_bom_quotes_no_final_newline(tmp_path):
    path = write_msrp(tmp_path / "m.txt", [
        (1, 11, 12, '"Hi," he said "there', 'He said: "hi there."'),
        (0, 21, 22, "Déjà vu\u00a0at 3 p.m.", "It's 4 o'clock"),
    ])
    pairs = read_msrp(path)
    assert [(p.label, p.id1, p.id2) for p in pairs] == [(1, "11", "12"), (0, "21", "22")]
    assert pairs[0].s1 == '"Hi," he said "there' and pairs[0].s2 == 'He said: "hi there."'
    assert pairs[1].s1 == "Déjà vu\u00a0at 3 p.m."


def test_read_msrp_errors(tmp_path):
    wrong = tmp_path / "m.txt"
    wrong.write_text("a\tb\n1\t2\t3\tx\ty\n")
    with pytest.raises(InputError, match=r"m\.txt:1: not an MSRP file"):
        read_msrp(wrong)
    bad = write_msrp(tmp_path / "b.txt", [(2, 1, 2, "a", "b")])
    with pytest.raises(InputError, match=r"b\.txt:2: Quality must be 0 or 1"):
        read_msrp(bad)
    short = write_msrp(tmp_path / "s.txt", [(1, 1, 2, "a")])
    with pytest.raises(InputError, match=r"s\.txt:2: 4 TAB-separated fields"):
        read_msrp(short)
    raw = tmp_path / "r.txt"
    raw.write_bytes(HEADER.encode() + b"\n1\t1\t2\ta \xff\tb\n")
    with pytest.raises(InputError, match=r"r\.txt:2: not UTF-8"):
        read_msrp(raw)
    empty = tmp_path / "e.txt"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match="empty file"):
        read_msrp(empty)


def test_stem_and_edit_distance():
    assert {stem(w) for w in ["agree", "agreed", "agrees", "agreement"]} == {"agre"}
    assert stem("studies") == stem("studied") == "study"
    assert stem("running") == "run"
    assert edit_distance("the cat sat".split(), "the dog sat down".split()) == 2
    assert edit_distance([], ["a"]) == 1


def test_string_features_by_hand():
    a = "the cat sat on the mat".split()
    b = "the cat sat".split()
    f = dict(zip(STRING_FEATURES, string_features(a, b)))
    assert len(f) == len(STRING_FEATURES)
    assert f["word_edit"] == 0.5                       # 3 deletions / 6
    assert f["len_ratio"] == 0.5 and f["len_diff"] == 3
    assert (f["ngram1_min"], f["ngram1_max"]) == (0.5, 1.0)        # 3 of 6, 3 of 3
    assert (f["ngram2_min"], f["ngram2_max"]) == (0.4, 1.0)        # 2 of 5, 2 of 2
    assert (f["ngram4_min"], f["ngram4_max"]) == (0.0, 0.0)        # b has no 4-gram
    assert f["content_min"] == pytest.approx(2 / 3) and f["content_max"] == 1.0   # cat sat mat / cat sat
    assert (f["num_both"], f["num_equal"], f["num_jaccard"], f["num_unmatched"]) == (0.0, 1.0, 1.0, 0)
    # alignment by identity: the, cat, sat; "mat" is a's one unaligned content word (of 3), b has none
    assert [f[k] for k in STRING_FEATURES if k.startswith("align_")] == [0, 1, 1, 0.0, 1 / 3, 0.0]
    assert f["lexical_distance"] == 0.4                 # {cat mat on sat the} vs {cat sat the}: 2 deletions / 5
    assert f["aligned_per_edit"] == 0.75                # 3 aligned words / (3 edits + 1)
    # numbers and dates
    g = dict(zip(STRING_FEATURES, string_features("sales rose 5 % in june 2003".split(),
                                                  "sales rose 6 % in july 2003".split())))
    assert (g["num_both"], g["num_equal"], g["num_jaccard"], g["num_unmatched"]) == (1.0, 0.0, 1 / 3, 2)
    assert g["date_unmatched"] == 2                    # june / july
    # morphological variants: "agreed" and "agreement" share a stem
    h = dict(zip(STRING_FEATURES, string_features("they agreed".split(), "an agreement".split())))
    assert h["stem_min"] == 0.5 and h["morph_variants"] == 0.5


def test_align_stages():
    # identity first (left to right, first free equal word), then stems, then links best first
    al = align("he agreed to the deal".split(), "the deal was agreed".split(), ())
    assert al.aligned_a == [False, True, False, True, True] and al.aligned_b == [True, True, False, True]
    m = align("they agreed".split(), "an agreement".split(), ())
    assert m.before_a == m.aligned_a == [False, True] and m.aligned_b == [False, True]   # agre = agre
    # a link is taken best first; a later one overlapping an earlier link is not
    a, b = "x y z".split(), "u v z".split()
    n = align(a, b, [(0.2, 0, 2, 0, 2), (0.5, 1, 2, 1, 2)])
    assert n.links == [(0.5, 1, 2, 1, 2)] and n.aligned_a == [False, True, True]
    # a link whose b-side words are all aligned already is not taken
    assert align("the cat sat".split(), "the cat".split(), [(0.9, 1, 3, 1, 2)]).links == []


def test_db_features_by_hand(tmp_path):
    """a = "the cat sat", b = "a feline sat" (toy database above).

    Candidate links (spans of a x spans of b held as a pair in either direction, p = the max of
    the two directions): cat/feline max(0.5, 0.4) = 0.5 and "the cat"/"a feline" 0.2.
    Alignment: identity sat-sat; no stems shared; link cat-feline (0.5) taken; "the cat"/"a
    feline" overlaps it, not taken. Unaligned content words: none (the, a are stop words), of
    2 a side; before the links cat and feline were: 2 aligned by the paraphrase. 1 link, best
    0.5, mean log p log 0.5.
    a' = "the feline sat" vs b: clipped precisions 2/3, 1/2, 0, 0 (no 4-gram); b' = "a cat sat"
    vs a the same. BLEU-like (floor 1e-3): (1/3 * 1e-6)^(1/4) = 0.024028; raw a vs b: 1/3, 0,
    0, 0: (1/3 * 1e-9)^(1/4) = 0.004273; gain 2 * (0.024028 - 0.004273). Precision gains summed
    over the two directions: 2 * 1/3, 2 * 1/2, 0, 0.
    """
    db_path = write_toy_db(tmp_path / "toy.db")
    with ParaphraseDB(db_path) as db:
        al = ParaphraseAligner(db, "general")
        a, b = "the cat sat".split(), "a feline sat".split()
        assert sorted(al.links(a, b)) == [(0.2, 0, 2, 0, 2), (0.5, 1, 2, 1, 2)]
        f = dict(zip(DB_FEATURES, al.features(a, b)))
        expected = {"para_unaligned_min": 0, "para_unaligned_max": 0, "para_unaligned_sum": 0,
                    "para_unaligned_share_min": 0.0, "para_unaligned_share_max": 0.0, "para_aligned_words": 2,
                    "para_links": 1, "para_best_p": 0.5, "para_mean_logp": math.log(0.5), "para_all_aligned": 1.0,
                    "para_bleu_min": 0.024028, "para_bleu_max": 0.024028,
                    "para_bleu_gain": 2 * (0.024028 - 0.004273),
                    "para_gain1": 2 / 3, "para_gain2": 1.0, "para_gain3": 0.0, "para_gain4": 0.0}
        assert f == {k: pytest.approx(v, abs=2e-6) for k, v in expected.items()}
        # the string block's alignment of the same pair: cat and feline unaligned (1 of 2 each side)
        g = dict(zip(STRING_FEATURES, string_features(a, b)))
        assert [g[k] for k in STRING_FEATURES if k.startswith("align_")] == [1, 1, 2, 0.5, 0.5, 0.0]
        assert g["lexical_distance"] == 1.0 and g["aligned_per_edit"] == pytest.approx(1 / 3)
        # "cat sat" -> "cat" (0.9) links a[1:3] to b[1:2], whose one word is aligned by identity:
        # not taken, "sat" stays unaligned
        h = dict(zip(DB_FEATURES, al.features("the cat sat".split(), "the cat".split())))
        assert (h["para_links"], h["para_unaligned_sum"], h["para_best_p"], h["para_mean_logp"]) == (0, 1, 0.0, 0.0)
        # min_p drops weaker pairs
        assert ParaphraseAligner(db, "general", min_p=0.3).links(a, b) == [(0.5, 1, 2, 1, 2)]
        assert al.links("the dog".split(), b) == []


def test_metrics_and_bootstrap():
    y = np.array([1, 1, 0, 0])
    m = metrics(y, np.array([1, 0, 0, 1]))
    assert m == {"accuracy": 0.5, "precision": 0.5, "recall": 0.5, "f1": 0.5}
    d = bootstrap_difference(y, y, np.array([1, 0, 0, 1]), n_boot=50)
    assert d["accuracy_diff"] == 0.5 and d["accuracy_diff_ci95"][0] <= 0.5 <= d["accuracy_diff_ci95"][1]
    # McNemar: a right only on pairs 1 and 3 (b wrong there), never the reverse: n = 2 discordant,
    # p = 2 * P(Bin(2, 1/2) <= 0) = 2 * 1/4 = 0.5
    assert mcnemar(y, y, np.array([1, 0, 0, 1])) == {"a_only_right": 2, "b_only_right": 0, "p_value": 0.5}
    # 3 against 1 of 4 discordant: 2 * (1 + 4) / 16 = 0.625; none discordant: p = 1
    assert mcnemar([1] * 4, [1, 1, 1, 0], [0, 0, 0, 1])["p_value"] == 0.625
    assert mcnemar(y, y, y)["p_value"] == 1.0


def test_cli_identify(tmp_path, capsys):
    db_path = write_toy_db(tmp_path / "toy.db")
    rng = np.random.default_rng(0)
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    rows = []
    for i in range(30):
        s = " ".join(rng.choice(words, 6))
        if i % 2:
            rows.append((1, i, i + 100, s + " cat", s + " feline"))
        else:
            rows.append((0, i, i + 100, s, " ".join(rng.choice(words, 6))))
    train = write_msrp(tmp_path / "train.txt", rows[:20])
    test = write_msrp(tmp_path / "test.txt", rows[20:])
    pred = tmp_path / "pred.tsv"
    assert main(["-q", "identify", str(db_path), "--train", str(train), "--test", str(test),
                 "--predictions", str(pred), "--n-boot", "20"]) == 0
    out = capsys.readouterr().out
    assert "majority baseline" in out and "string + DB" in out and "95% CI" in out
    lines = pred.read_text().splitlines()
    assert len(lines) == 10
    labels = [int(ln.split("\t")[0]) for ln in lines]
    assert all(0.0 <= float(ln.split("\t")[1]) <= 1.0 for ln in lines)
    assert labels == [r[0] for r in rows[20:]]          # separable toy data
    # bad input: one line, exit 2
    one = write_msrp(tmp_path / "one.txt", [(1, 1, 2, "a", "a")] * 3)
    assert main(["-q", "identify", str(db_path), "--train", str(one), "--test", str(test)]) == 2
    assert "both labels" in capsys.readouterr().err
