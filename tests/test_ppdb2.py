"""PPDB 2.0's layer: features by hand, the fits on toy data, the WordNet labels on a tiny
hand-written WordNet, the apply step's independence of how the pairs are cut, the database."""
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

from pivot.pipeline import ppdb2 as P
from pivot.pipeline import wellformed, wordnet
from pivot.pipeline.bundle import open_bundle, save_bundle
from pivot.store.combined import FLOOR_LOG_P
from pivot.store.db import ParaphraseDB
from pivot.store.write import write_database
from pivot.store import write as W


# ------------------------------------------------------------------------------ strings


def _code(t, alphabet="#abc"):
    # r0 A^2 + r1 A + r2, r the rank of a character in the texts' alphabet ("#" = 35 first)
    a = len(alphabet)
    return (alphabet.index(t[0]) * a + alphabet.index(t[1])) * a + alphabet.index(t[2])


def test_char_trigrams_of_padded_texts():
    # alphabet "#abc" (A = 4): "#ab#": #ab = 0*16 + 1*4 + 2 = 6, ab# = 16 + 8 + 0 = 24;
    # "#abc#": #ab 6, abc = 16 + 8 + 3 = 27, bc# = 32 + 12 + 0 = 44
    ptr, tri = P.char_trigrams(["ab", "abc"])
    assert ptr.tolist() == [0, 2, 5]
    assert tri.tolist() == [6, 24, 6, 27, 44] == [_code("#ab"), _code("ab#"), _code("#ab"), _code("abc"),
                                                  _code("bc#")]
    assert tri.dtype == np.uint32
    # a repeated trigram counts once: "#aaaa#" -> #aa, aaa, aa# (alphabet "#a": 0*4 + 2 + 1 = 3,
    # 4 + 2 + 0 = 6, 4 + 2 + 1 = 7)
    ptr, tri = P.char_trigrams(["aaaa"])
    assert ptr.tolist() == [0, 3] and tri.tolist() == [3, 6, 7]


def test_char_trigrams_by_blocks(monkeypatch):
    # blocks of 2 texts, cut after "abc" and after "": "#ab#": #ab, ab#; "#abc#": #ab, abc, bc#;
    # "#aaaa#": #aa, aa#, aaa (ascending: "#" < "a" < "b" < "c"); "##": none; "#b#": #b#
    # (the alphabet is every block's: "#abc")
    monkeypatch.setattr(P, "TRIGRAM_BLOCK", 2)
    ptr, tri = P.char_trigrams(["ab", "abc", "aaaa", "", "b"])
    assert ptr.tolist() == [0, 2, 5, 8, 8, 9]
    assert tri.tolist() == [_code("#ab"), _code("ab#"), _code("#ab"), _code("abc"), _code("bc#"),
                            _code("#aa"), _code("aa#"), _code("aaa"), _code("#b#")]


def test_char_trigrams_narrow_codes_and_wide_alphabets():
    """Codes are uint32 while A^3 <= 2^32 (A <= 1625 characters), int64 beyond; either way they
    sort as the trigrams' code points and the pairs share the trigrams their strings share."""
    assert 1625 ** 3 <= 1 << 32 < 1626 ** 3
    # 1,625 characters: uint32, the largest code A^3 - 1 for the trigram of the last character
    # three times; 1,626 characters: int64. Only the first TRIGRAM_CHARS - 2 = 38 characters
    # of a text count, so the alphabet comes in texts of 38 characters.
    for n_chars, dtype in ((1625, np.uint32), (1626, np.int64)):
        chars = "#" + "".join(chr(0x4E00 + i) for i in range(n_chars - 1))
        texts = [chars[1 + i:1 + i + 38] for i in range(0, n_chars - 1, 38)] + [chars[-1] * 3]
        ptr, tri = P.char_trigrams(texts)
        assert tri.dtype == dtype and int(tri.max()) == n_chars ** 3 - 1
    # shared trigrams of the code points against the codes, in both widths: a wide alphabet of
    # 1,700 extra characters in texts of their own, then the same pairs of short texts
    short = ["cell count", "counts of cell", "cell", "célula", "cel", "-cell-", ""]
    wide = ["".join(chr(0x4E00 + i) for i in range(k, k + 38)) for k in range(0, 1700, 38)]
    for texts in (short, short + wide):
        ph = _phrases(texts, f_lang=(0,))
        assert ph.tri.dtype == (np.uint32 if texts is short else np.int64)
        a, b = np.repeat(np.arange(7), 7), np.tile(np.arange(7), 7)
        shared = P.string_overlaps(ph, a, b)[2]

        def grams(t):
            t = "#" + t[:38] + "#"
            return {t[k:k + 3] for k in range(len(t) - 2)}
        assert shared.tolist() == [len(grams(short[i]) & grams(short[j])) for i, j in zip(a.tolist(), b.tolist())]
        for i in range(7):
            row = ph.tri[ph.tri_ptr[i]:ph.tri_ptr[i + 1]]
            assert np.all(np.diff(row.astype(np.int64)) > 0)
            # ascending codes are the ascending trigrams (code points, first character first)
            assert len(row) == len(grams(short[i]))


def _phrases(texts, counts=None, f_lang=(0, 1)):
    vocab = {}
    tokens = np.full((len(texts), 5), -1, np.int32)
    for i, t in enumerate(texts):
        ids = [vocab.setdefault(w, len(vocab)) for w in t.split()]
        tokens[i, :len(ids)] = ids
    ptr, tri = P.char_trigrams(texts)
    counts = np.ones(len(texts)) if counts is None else np.asarray(counts, float)
    return P.Phrases((tokens >= 0).sum(axis=1).astype(np.int8), np.log1p(counts), tokens, ptr, tri,
                     np.asarray(f_lang, np.int16), np.arange(len(texts), dtype=np.int32))


def test_string_overlaps_count_positions_and_trigrams():
    ph = _phrases(["cell counts", "counts of cell", "cell"])
    a_in_b, b_in_a, shared = P.string_overlaps(ph, np.array([0, 2]), np.array([1, 0]))
    # cell, counts both in "counts of cell"; of it "counts", "cell" are in e1, "of" is not
    assert a_in_b.tolist() == [2, 1] and b_in_a.tolist() == [2, 1]
    # "#cell#" (#ce cel ell ll#) against "#cell counts#": #ce cel ell share; "ll " is not "ll#"
    assert shared[1] == 3
    with pytest.raises(ValueError):
        P.string_overlaps(ph, np.array([3]), np.array([0]))


def test_n_distinct_languages():
    assert P.n_distinct_languages(np.array([[0, 0, -1], [1, 0, 1], [-1, -1, -1]])).tolist() == [1, 2, 0]


def test_pair_features_by_hand():
    ph = _phrases(["kidney", "kidneys"], counts=[9, 3])
    p = np.array([[0.5, 0.0]])        # General 0.5, the domain model proposes nothing
    p_rev = np.array([[0.25, 0.1]])
    cols = P.pair_features(ph, [0], [1], p, p_rev, [3], np.array([[0, 1, -1]]), np.array([wellformed.INFLECTION]))
    x = dict(zip(P.feature_names(["general", "dom"]), [c[0] for c in cols]))
    assert len(cols) == len(P.feature_names(["general", "dom"]))
    assert x["logp[general]"] == pytest.approx(math.log(0.5)) and x["logp_rev[general]"] == pytest.approx(math.log(0.25))
    assert x["logp_min[general]"] == pytest.approx(math.log(0.25))
    assert (x["missing[general]"], x["missing_rev[general]"]) == (0.0, 0.0)
    assert x["logp[dom]"] == FLOOR_LOG_P and x["missing[dom]"] == 1.0 and x["missing_rev[dom]"] == 0.0
    assert x["logp_min[dom]"] == FLOOR_LOG_P and x["logp_rev[dom]"] == pytest.approx(math.log(0.1))
    assert x["log1p_n_pivots"] == pytest.approx(math.log(4)) and x["n_pivot_languages"] == 2
    assert x["log1p_count_e1"] == pytest.approx(math.log(10)) and x["log1p_count_e2"] == pytest.approx(math.log(4))
    assert (x["n_words_e1"], x["n_words_e2"], x["n_words_absdiff"]) == (1, 1, 0)
    # tokens differ; trigrams: #ki kid idn dne ney ey# (6) and #ki kid idn dne ney eys ys# (7), 5 shared
    assert x["token_jaccard"] == 0.0 and x["char3_jaccard"] == pytest.approx(5 / 8)
    assert (x["e1_contains_e2"], x["e2_contains_e1"]) == (0.0, 0.0)
    assert [x[n] for n in P.FORM_FEATURES] == [0, 0, 0, 1, 0]
    assert x["fwd_gt_rev"] == 1.0


def test_score_features_are_every_feature_but_the_excluded():
    names = P.score_features(["general", "dom"])
    assert names == [n for n in P.feature_names(["general", "dom"]) if n not in P.SCORE_EXCLUDED]
    assert "logp_rev[general]" in names and "log1p_count_e2" in names and "logp[dom]" in names
    assert P.anchor_features(["general", "dom"]) == {"logp[general]", "logp_min[general]", "missing[general]",
                                                      "missing_rev[general]"}


# ------------------------------------------------------------------------------ small numerics


def test_ridge_fit_by_hand():
    # z centred: z'z = 2, z'(y - mean y) = 3; b = 3 / (2 + penalty), b0 = mean y = 7/3
    z, y = np.array([[-1.0], [0.0], [1.0]]), np.array([1.0, 2.0, 4.0])
    b0, b = P.ridge_fit(z, y, np.array([1.0]))
    assert b0 == pytest.approx(7 / 3) and b.tolist() == pytest.approx([1.0])
    assert P.ridge_fit(z, y, np.array([0.0]))[1].tolist() == pytest.approx([1.5])


def test_spearman_with_ties():
    # ranks x 1 2.5 2.5 4, y 1 3 2 4: r = 4.5 / sqrt(4.5 * 5) = sqrt(0.9)
    assert P.spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(math.sqrt(0.9))
    assert math.isnan(P.spearman([1, 1, 1], [1, 2, 3]))


def test_per_mille_sums_to_1000():
    out = P.per_mille(np.array([[1 / 3, 1 / 3, 1 / 3, 0, 0, 0], [0.5, 0.25, 0.25, 0, 0, 0]]))
    # 333.33 each: one unit short, the remainders tie, the lowest index gets it
    assert out.tolist() == [[334, 333, 333, 0, 0, 0], [500, 250, 250, 0, 0, 0]]


def test_stable_ranks_by_hand():
    # row 0 ascending, ties in index order: 1 (-0.1), 3 (-0.1), 0 (0.2), 2 (0.2); row 1: 3, 1, 2, 0
    key = np.array([[0.2, -0.1, 0.2, -0.1], [3.0, 1.0, 2.0, 0.0]])
    assert P._stable_ranks(key).tolist() == [[2, 0, 3, 1], [3, 1, 2, 0]]


def test_softmax_by_hand_and_nan_rows():
    # row 0: exp(0 - 1), exp(1 - 1) over their sum; the max of a row with NaN is NaN
    out = P.softmax(np.array([[0.0, 1.0], [np.nan, 1.0]]))
    assert out[0].tolist() == [math.exp(-1) / (math.exp(-1) + 1.0), 1.0 / (math.exp(-1) + 1.0)]
    assert np.isnan(out[1]).all()


def test_size_cuts_nested_by_share_of_visible_pairs():
    scores = np.array([5.0, 4.0, 3.0, 2.0, 1.0, 0.5, 9.0])
    visible = np.array([True] * 6 + [False])   # the hidden 9.0 is not counted
    # six visible: s, m, l take ceil(6/32), ceil(6/16), ceil(6/8) = 1, 1, 1; xl ceil(1.5) = 2;
    # xxl 3; xxxl the lowest score of all pairs
    assert P.size_cuts(scores, visible) == {"s": 5.0, "m": 5.0, "l": 5.0, "xl": 4.0, "xxl": 3.0, "xxxl": 0.5}


def test_top_k_hits_ranks_like_a_lookup():
    group, score = np.array([0, 0, 0, 1, 1]), np.array([3.0, 2.0, 1.0, 5.0, 5.0])
    tiebreak, positive = np.array([0, 1, 2, 7, 6]), np.array([0, 1, 1, 1, 0])
    # k=1: group 0 keeps score 3 (not positive); group 1's tie goes to e2 id 6 (not positive)
    assert P.top_k_hits(group, score, tiebreak, positive, k=1) == 0
    assert P.top_k_hits(group, score, tiebreak, positive, k=2) == 2


def test_softmax_separates_toy_classes_and_is_deterministic():
    z = np.array([[-2.0], [-1.5], [-1.0], [-0.2], [0.0], [0.2], [1.0], [1.5], [2.0]])
    y = np.repeat([0, 1, 2], 3)
    w1 = P.softmax_fit(z, y, 3, lam=1e-3)
    w2 = P.softmax_fit(z, y, 3, lam=1e-3)
    assert w1.tobytes() == w2.tobytes()
    pred = P.softmax(np.column_stack([np.ones(9), z]) @ w1.T).argmax(axis=1)
    assert pred.tolist() == y.tolist()


def test_softmax_class_weight_exponent_sets_the_intercepts():
    # no usable feature (a zero column, penalised): the optimum's probabilities are the weighted
    # class shares, p_c = n_c * n_c^-beta / sum_k n_k^(1 - beta); classes of 1 and 3 pairs:
    # beta 1 -> 1/2, 1/2; beta 0 -> 1/4, 3/4; beta 1/2 -> 1/(1 + sqrt 3), sqrt 3/(1 + sqrt 3)
    z, y = np.zeros((4, 1)), np.array([0, 1, 1, 1])
    for beta, want in ((1.0, [0.5, 0.5]), (0.0, [0.25, 0.75]),
                       (0.5, [1 / (1 + 3 ** 0.5), 3 ** 0.5 / (1 + 3 ** 0.5)])):
        w = P.softmax_fit(z, y, 2, lam=1.0, balance=beta)
        assert P.softmax(w[None, :, 0])[0] == pytest.approx(want, abs=1e-5)


def test_fit_relations_selects_lambda_and_balance_on_validation():
    # one feature separates classes 0 and 1 except a class-1 row at the class-0 end; the grid's
    # table has a row per (lambda, balance) and the chosen pair has the best validation macro-F1
    x = np.array([[-2.0], [-1.9], [-1.8], [-1.7], [1.0], [1.1], [1.2], [1.3], [1.4], [-1.95]])
    y = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1, 1])
    validation = np.array([False, True, False, False, False, True, False, False, False, False])
    model, table = P.fit_relations(["a"], x, y, validation, lambdas=(1e-3, 1e-2), balances=(0.5, 1.0))
    assert [(r["lambda"], r["balance"]) for r in table["grid"]] == [(1e-3, 0.5), (1e-3, 1.0), (1e-2, 0.5),
                                                                     (1e-2, 1.0)]
    # both validation rows are classified right by every setting (macro-F1 1): ties go to the
    # larger lambda, then the larger balance
    assert all(r["validation_macro_f1"] == 1.0 for r in table["grid"])
    assert (table["lambda"], table["balance"]) == (1e-2, 1.0)
    assert model.probabilities(["a"], np.array([[-3.0], [3.0]])).argmax(axis=1).tolist() == [0, 1]


def test_fit_score_recovers_a_linear_rating():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 2))
    y = 3.0 + 0.5 * x[:, 0]          # the second feature is noise
    keys = [f"p{i}" for i in range(60)]
    model, table = P.fit_score(["a", "b"], x, y, keys, anchor={"a"}, lambdas=(0.01,), multipliers=(1000.0,))
    assert P.spearman(model.predict(["a", "b"], x), y) == pytest.approx(1.0)
    assert abs(model.coef[1]) < 1e-3 < model.coef[0]
    assert table["lambda"] == 0.01 and table["gamma"] == 0.0


def _lists(n_lists, validation_lists):
    """n_lists candidate lists of 12 rows over features (a, b): the synonym has a = -1, b = 1, the
    eleven others a = b = 0, and the largest tie-break id; the first validation_lists held back."""
    rows = 12
    x = np.zeros((n_lists * rows, 2))
    positive = np.zeros(n_lists * rows, bool)
    positive[rows - 1::rows] = True
    x[positive] = [-1.0, 1.0]
    group = np.repeat(np.arange(n_lists), rows)
    return P.WithinLists(x, group, np.tile(np.arange(rows), n_lists), positive, np.zeros(n_lists * rows),
                         group < validation_lists)


def test_pair_moments_by_hand():
    # list 0: synonym x = 2, others 0 and 1: w = 1/2, d = 2, 1 -> A = (4 + 1) / 2, c = (2 + 1) / 2;
    # list 1 has no other candidate and list 2 no synonym: neither counts (L = 1)
    lists = P.WithinLists(np.array([[2.0], [0.0], [1.0], [5.0], [7.0]]), np.array([0, 0, 0, 1, 2]),
                          np.arange(5), np.array([True, False, False, True, False]), np.zeros(5), np.zeros(5, bool))
    big_a, c, n = lists.pair_moments()
    assert (big_a.tolist(), c.tolist(), n) == ([[2.5]], [1.5], 1)


def test_fit_score_within_lists_choose_the_list_term():
    # Ratings: y = 3 + 0.5 a exactly and b orthogonal to a and y, so the ratings alone give b no
    # weight and rank each list's synonym (a = -1) last of 12: 0 validation hits at gamma 0. The
    # list term, gamma 10, lifts b: the synonym first in every list, 4 of the 4 held-back lists.
    a = np.tile([-1.0, 1.0, -1.0, 1.0], 15)
    b = np.tile([-1.0, -1.0, 1.0, 1.0], 15)
    x, y, keys = np.column_stack([a, b]), 3.0 + 0.5 * a, [f"p{i}" for i in range(60)]
    lists = _lists(10, 4)
    model, table = P.fit_score(["a", "b"], x, y, keys, anchor={"a"}, within=lists, lambdas=(0.01,),
                               multipliers=(1.0,), gammas=(0.0, 10.0))
    hits = {row["gamma"]: row["validation_top_k_synonyms"] for row in table["grid"]}
    assert hits == {0.0: 0, 10.0: 4}
    # one standard error of the best (4 of 4: 0) leaves gamma 10 alone
    assert table["gamma"] == 10.0 and table["within"]["validation"]["tolerance"] == 0.0
    assert table["within"]["validation"]["p_general_top_k_synonyms"] == 0 and model.coef[1] > 0
    # without lists, gamma is 0 and the fit is the ridge regression
    _, table = P.fit_score(["a", "b"], x, y, keys, anchor={"a"}, lambdas=(0.01,), multipliers=(1.0,))
    assert [row["gamma"] for row in table["grid"]] == [0.0] and "within" not in table


def test_classification_report_macro_over_supported_classes():
    r = P.classification_report([0, 0, 1, 5], [0, 1, 1, 5])
    assert r["per_class"]["Equivalence"] == {"precision": 1.0, "recall": 0.5, "f1": 0.6667, "support": 2,
                                             "predicted": 1}
    assert r["per_class"]["ForwardEntailment"]["f1"] == 0.6667
    # rows: true class, columns: predicted; (0, 0), (0, 1), (1, 1), (5, 5)
    assert r["confusion"][0] == [1, 1, 0, 0, 0, 0] and r["confusion"][1] == [0, 1, 0, 0, 0, 0]
    assert r["confusion"][5] == [0, 0, 0, 0, 0, 1] and sum(map(sum, r["confusion"])) == 4
    # classes 0, 1, 5 have support: (2/3 + 2/3 + 1) / 3
    assert r["macro_f1"] == pytest.approx(round((2 / 3 + 2 / 3 + 1) / 3, 4), abs=1e-4)


# ------------------------------------------------------------------------------ WordNet


def _wordnet(folder: Path) -> Path:
    """A six-synset WordNet in wndb(5) layout: offsets are the lines' byte positions."""
    wn = folder / "corpora" / "wordnet"
    wn.mkdir(parents=True)
    header = "  1 a licence line, skipped\n"
    # name -> (words, pointers as (symbol, target name))
    synsets = {"meat": (["meat"], [("~", "beef"), ("~", "pork")]),
               "beef": (["beef", "boeuf"], [("@", "meat")]),
               "pork": (["pork"], [("@", "meat")]),
               "day": (["day"], [("!", "night")]),
               "night": (["night"], [("!", "day")]),
               "goose": (["goose"], [("+", "meat")])}
    names = list(synsets)
    offsets, pos = {}, len(header.encode())
    # every line has the same length whatever the offsets (8 digits each), so two passes suffice
    for name in names:
        offsets[name] = pos
        words, ptrs = synsets[name]
        line = _data_line(0, words, [(s, 0) for s, _ in ptrs])
        pos += len(line.encode())
    text = header + "".join(_data_line(offsets[n], synsets[n][0], [(s, offsets[t]) for s, t in synsets[n][1]])
                            for n in names)
    (wn / "data.noun").write_text(text)
    index = header + "".join(f"{w} n 1 0 1 0 {offsets[n]:08d}  \n" for n in names for w in synsets[n][0])
    (wn / "index.noun").write_text(index)
    (wn / "noun.exc").write_text("geese goose\n")
    for pos_name in ("verb", "adj", "adv"):
        (wn / f"data.{pos_name}").write_text(header)
        (wn / f"index.{pos_name}").write_text(header)
        (wn / f"{pos_name}.exc").write_text("")
    return wn


def _data_line(offset, words, ptrs):
    w = " ".join(f"{x} 0" for x in words)
    p = " ".join(f"{s} {t:08d} n 0000" for s, t in ptrs)
    return f"{offset:08d} 03 n {len(words):02x} {w} {len(ptrs):03d} {p} | a gloss\n"


def test_wordnet_relations_on_a_tiny_wordnet(tmp_path):
    folder = _wordnet(tmp_path / "nltk_data")
    wn = wordnet.WordNet.read(folder)
    lem = wellformed.WordNetLemmatizer(wn)
    assert lem("geese") == {"geese", "goose"} and lem("beefs") == {"beefs", "beef"}

    def rel(a, b):
        return wordnet.RELATIONS[wn.relation(wn.phrase_synsets(a, lem), wn.phrase_synsets(b, lem))]

    assert rel("beef", "boeuf") == "Equivalence"
    assert rel("beef", "meat") == "ForwardEntailment" and rel("meat", "beef") == "ReverseEntailment"
    assert rel("beef", "pork") == "Exclusion"          # co-hyponyms of meat
    assert rel("day", "night") == "Exclusion"          # antonyms
    assert rel("geese", "meat") == "OtherRelated"      # a "+" link, reached through the lemma goose
    assert rel("day", "beef") == "Independent"
    assert wn.phrase_synsets("no such word", lem) == ()


def test_phrase_side_tasks_by_block(tmp_path):
    """The stage's phrase side as tasks (phrase_side_task per block of _write_texts): a block's
    texts read back alone, and the same trigrams, synsets and held flags for blocks of 3 texts as
    for one block, equal to char_trigrams and WordNet.many_phrase_synsets over the whole list; the
    held flags by hand from unit_hash of each phrase's smallest synset."""
    from pivot.hashes import unit_hash

    _wordnet(tmp_path / "lexicon" / "nltk_data")
    wn = wordnet.WordNet.read(wordnet.wordnet_folder(tmp_path))
    texts = ["beef", "meat", "geese", "day night", "boeuf", "xyz", "pork"]
    blocks = P._write_texts(tmp_path / "t.txt", texts, block=3)
    assert (tmp_path / "t.txt").read_bytes() == "\n".join(texts).encode()
    # offsets: "beef\nmeat\ngeese" is 15 bytes, then "\n"; "day night\nboeuf\nxyz" 19, then "\n"
    assert blocks == [(0, 3, 0, 15), (3, 3, 16, 19), (6, 1, 36, 4)]
    assert [P.read_text_block(tmp_path / "t.txt", o, size, n) for _, n, o, size in blocks] == \
        [texts[:3], texts[3:6], texts[6:]]
    # the words' alphabet: "#", " " and the letters of beef, day, night (token rows, -1 padded)
    words = ["beef", "day", "night", "unused"]
    alphabet = P.words_alphabet(np.array([[0, -1], [1, 2]]), words)
    assert "".join(map(chr, alphabet)) == " #abdefghinty"
    alphabet = P.trigram_alphabet([" ", *texts])
    got = {}
    for size in (3, 100):
        bl = P._write_texts(tmp_path / f"t{size}.txt", texts, block=size)
        paths = [tmp_path / f"b{size}-{k}.arrays" for k in range(len(bl))]
        for b, path in zip(bl, paths):
            assert P.phrase_side_task(tmp_path / f"t{size}.txt", b, alphabet, tmp_path, 0, 0.5, path)["n_phrases"] == b[1]
        assert P.phrase_side_task(tmp_path / f"t{size}.txt", bl[0], alphabet, tmp_path, 0, 0.5, paths[0]) == \
            {"reused": True}
        got[size] = {name: P._members(paths, name) for name in ("tri_count", "tri", "syn_count", "syn_ids", "held")}
    assert all(got[3][k].tobytes() == got[100][k].tobytes() for k in got[3])
    ptr, tri = P.char_trigrams(texts, alphabet=alphabet)
    assert got[3]["tri_count"].tolist() == np.diff(ptr).tolist() and got[3]["tri"].tolist() == tri.tolist()
    synsets = wn.many_phrase_synsets(texts, P.CachedLemmas(wellformed.WordNetLemmatizer(wn)))
    assert got[3]["syn_count"].tolist() == [1, 1, 1, 0, 1, 0, 1]      # geese: goose's, "day night": none
    assert got[3]["syn_ids"].tolist() == [x for ids in synsets for x in ids]
    assert got[3]["held"].tolist() == [bool(ids) and unit_hash(str(min(ids)), 0) < 0.5 for ids in synsets]
    assert got[3]["syn_ids"][0] == got[3]["syn_ids"][3]               # beef and boeuf: one synset


def test_phrase_side_in_one_process_writes_the_phrases_and_lexical(tmp_path):
    """phrase_side (the stage's phrase side run here, for the benchmarks): phrase ids 1, 3, 4 of
    ids 0..5 stored (slots 0, 1, 2: texts beef, geese, day night), the pivots' foreign ids 2 and
    5 (languages 1 and 0: f_lang_of is id mod 2, asked for those two alone); its phrases file
    holds row_of = the slots, f_lang -1 but at 2 and 5, n_words 1, 1, 2, tri_ptr the trigram
    counts' offsets, and its Lexical is Lexical.from_synsets of the block's synsets (beef and
    geese one synset each, "day night" none) with the held flags phrase_side_task gave."""
    _wordnet(tmp_path / "lexicon" / "nltk_data")
    texts = ["beef", "geese", "day night"]
    words = ["beef", "geese", "day", "night"]
    tokens = np.array([[0, -1], [1, -1], [2, 3]], np.int32)
    slot = np.array([-1, 0, -1, 1, 2, -1], np.int32)
    pivots = np.array([[2, 5, -1], [5, -1, -1]], np.int32)
    part = tmp_path / "part-0.arrays"
    save_bundle(part, e1=np.array([1, 3], np.int32), e2=np.array([3, 4], np.int32), p=np.full((2, 1), 0.5),
                n_pivots=np.array([2, 1], np.int32), pivots=pivots)
    table = P.PairTable.read([part])
    asked = []

    def f_lang_of(ids):
        asked.append(ids.tolist())
        return ids % 2

    paths = (tmp_path / "ph.arrays", tmp_path / "vec.arrays")
    lex = P.phrase_side(table, texts, slot, tokens, words, np.array([3.0, 2.0, 1.0]), f_lang_of, tmp_path,
                        {"seed": 0, "relation_test_fraction": 0.5}, paths)
    assert asked == [[2, 5]]
    ptr, _ = P.char_trigrams(texts, alphabet=P.words_alphabet(tokens, words))
    with open_bundle(paths[0]) as z:
        assert z["row_of"].tolist() == slot.tolist() and z["row_of"].dtype == np.int32
        assert z["f_lang"].tolist() == [-1, -1, 0, -1, -1, 1] and z["f_lang"].dtype == np.int16
        assert z["n_words"].tolist() == [1, 1, 2] and z["tri_ptr"].tolist() == ptr.tolist()
        assert z["tokens"].tolist() == tokens.tolist()
    # the same block's synsets and held flags by phrase_side_task ("beef\ngeese\nday night": 20 bytes)
    block = tmp_path / "side.arrays"
    P.phrase_side_task(_texts_file(tmp_path, texts), (0, 3, 0, 20), P.words_alphabet(tokens, words), tmp_path, 0,
                       0.5, block)
    with open_bundle(block) as z:
        count, ids, held = z["syn_count"], z["syn_ids"].tolist(), z["held"]
    assert count.tolist() == [1, 1, 0]
    want = P.Lexical.from_synsets([tuple(ids[:1]), tuple(ids[1:2]), ()], held, slot)
    for k in ("syn_ptr", "syn_ids", "held", "slot", "has"):
        assert getattr(lex, k).tolist() == getattr(want, k).tolist(), k
    assert not list(tmp_path.glob(".*.arrays")) and not list(tmp_path.glob(".texts.txt"))


def _texts_file(folder, texts):
    """``texts`` joined by newlines in a file of ``folder`` (as _write_texts writes one block)."""
    path = folder / "side-texts.txt"
    path.write_bytes("\n".join(texts).encode())
    return path


def test_char_trigrams_over_a_wider_alphabet_meet_alike():
    """char_trigrams over an alphabet that holds more characters than the texts (the stage's: the
    words' and the space) gives other codes but the same counts and the same shared trigrams of
    every two texts; a character outside the alphabet is an error."""
    texts = ["kidney cell", "cells", "a cell", "kidney"]
    ptr0, tri0 = P.char_trigrams(texts)
    ptr1, tri1 = P.char_trigrams(texts, alphabet=P.trigram_alphabet([" ", "xyz", *texts]))
    assert ptr0.tolist() == ptr1.tolist() and tri0.tolist() != tri1.tolist()
    for i in range(4):
        for j in range(4):
            a0, b0 = set(tri0[ptr0[i]:ptr0[i + 1]].tolist()), set(tri0[ptr0[j]:ptr0[j + 1]].tolist())
            a1, b1 = set(tri1[ptr1[i]:ptr1[i + 1]].tolist()), set(tri1[ptr1[j]:ptr1[j + 1]].tolist())
            assert len(a0 & b0) == len(a1 & b1)
    with pytest.raises(ValueError, match="outside the alphabet"):
        P.char_trigrams(["cells"], alphabet=P.trigram_alphabet(["cel"]))


def test_wordnet_missing_file_is_a_clear_error(tmp_path):
    from pivot.errors import InputError

    with pytest.raises(InputError, match="index.noun"):
        wordnet.wordnet_folder(tmp_path, "lexicon/nltk_data")


def test_the_store_agrees_with_the_pipeline_on_names():
    assert W.FORM_NAMES == wellformed.NAMES and W.HIDDEN_FORMS == wellformed.HIDDEN
    assert W.RELATION_NAMES == wordnet.RELATIONS


# ------------------------------------------------------------------------------ the apply step


def _fit_json(names):
    """A hand-made score and relation model over two features (coefficients per SD)."""
    score = {"features": ["logp[general]", "char3_jaccard"], "mean": [-2.0, 0.5], "sd": [1.0, 0.25],
             "intercept": 3.0, "coefficients": {"logp[general]": 0.5, "char3_jaccard": 1.0}, "dropped": []}
    rel = {"features": ["logp_min[general]"], "mean": [-3.0], "sd": [2.0], "dropped": [],
           "classes": list(wordnet.RELATIONS),
           "intercepts": dict(zip(wordnet.RELATIONS, [0.0, 0.1, 0.2, 0.3, 0.4, 0.5])),
           "coefficients": {c: {"logp_min[general]": 0.1 * k} for k, c in enumerate(wordnet.RELATIONS)}}
    return {"score": score, "relations": rel, "names": names}


def _table():
    # pairs sorted by (e1, e2); (0,1)'s reverse is (1,0), (2,3)'s is (3,2); (1,2) has none
    e1 = np.array([0, 0, 1, 1, 2, 3], np.int32)
    e2 = np.array([1, 2, 0, 2, 3, 2], np.int32)
    p = np.array([[0.5], [0.1], [0.25], [0.2], [0.4], [0.8]])
    return e1, e2, p


def _row_parts(folder, cuts) -> tuple[list, "P.PairTable"]:
    """_table()'s rows as pivot parts cut at ``cuts`` ((lo, hi) each), and their PairTable."""
    e1, e2, p = _table()
    parts = []
    for j, (lo, hi) in enumerate(cuts):
        path = folder / f"rows-{j}.arrays"
        save_bundle(path, e1=e1[lo:hi], e2=e2[lo:hi], p=p[lo:hi], n_pivots=np.ones(hi - lo, np.int32),
                    pivots=np.full((hi - lo, 3), -1, np.int32))
        parts.append(path)
    return parts, P.PairTable.read(parts)


def _label_parts(folder, table, cuts, form) -> list:
    """label_range's files of _table()'s parts: ``form`` and the reverses' rows as
    PairTable.find finds them; (0,1) and (1,0) are rows 0 and 2, (2,3) and (3,2) rows 4 and 5."""
    e1, e2, _ = _table()
    rev = table.find(e2, e1)
    assert rev.tolist() == [2, -1, 0, -1, 5, 4]
    paths = []
    for j, (lo, hi) in enumerate(cuts):
        paths.append(folder / f"labels-{j}.arrays")
        save_bundle(paths[-1], form=form[lo:hi], rev=rev[lo:hi])
    return paths


def _apply(tmp, cuts):
    names = P.feature_names(["general"])
    ph = _phrases(["cell", "cells", "cellular", "kidney"])
    parts, table = _row_parts(tmp, cuts)
    ph.save(tmp / "ph.arrays")
    labels = _label_parts(tmp, table, cuts, np.array([0, 1, 0, 8, 0, 0], np.uint8))
    (tmp / "fit.json").write_text(json.dumps(_fit_json(names)))
    for j in range(len(parts)):
        P.apply_range(parts, j, tmp / "ph.arrays", labels[j], tmp / "fit.json", tmp / f"x-{j}.arrays")
    layers = list(_read(tmp / f"x-{j}.arrays") for j in range(len(parts)))
    return {f: np.concatenate([l[f] for l in layers]) for f in ("form", "ppdb2", "rel", "relation")}


def _read(path):
    from pivot.pipeline.bundle import open_bundle

    with open_bundle(path) as z:
        return {f: z[f] for f in ("form", "ppdb2", "rel", "relation")}


def test_apply_is_the_same_however_the_pairs_are_cut(tmp_path):
    one = tmp_path / "one"
    two = tmp_path / "two"
    one.mkdir()
    two.mkdir()
    a = _apply(one, [(0, 6)])
    b = _apply(two, [(0, 3), (3, 6)])
    for f in a:
        assert a[f].tobytes() == b[f].tobytes(), f
    # pair (0, 1): logp = ln 0.5; trigrams of "#cell#" (4) and "#cells#" (5) share 3: J = 3/6
    expected = 3.0 + 0.5 * (math.log(0.5) + 2.0) + 1.0 * (0.5 - 0.5) / 0.25
    assert a["ppdb2"][0] == pytest.approx(expected)
    assert (a["rel"].sum(axis=1) == 1000).all() and a["form"].tolist() == [0, 1, 0, 8, 0, 0]
    # (1, 2) has no stored reverse: logp_min is the floor, z = (-23.03 + 3) / 2 = -10.01, and
    # class k's linear term 0.1 k z sinks the later classes: Equivalence wins
    assert a["relation"][3] == 0 and a["relation"].tolist() == np.argmax(a["rel"], axis=1).tolist()


def test_apply_in_blocks_writes_the_bytes_of_one_pass(tmp_path, monkeypatch):
    """A task turns its part into features APPLY_ROWS pairs at a time (its memory): blocks of 2
    and 4 pairs over a part of 6 (the last block short) write the bytes of one block of all."""
    runs = {}
    for rows in (2, 4, 1 << 16):
        monkeypatch.setattr(P, "APPLY_ROWS", rows)
        d = tmp_path / str(rows)
        d.mkdir()
        runs[rows] = _apply(d, [(0, 6)])
    for rows in (2, 4):
        for f in runs[rows]:
            assert runs[rows][f].tobytes() == runs[1 << 16][f].tobytes(), (rows, f)



def test_apply_reads_its_phrases_rows_alone_never_a_map_of_the_files(tmp_path, monkeypatch):
    """An apply task reads each block's phrases as their rows (Bundle.rows: bounded windows),
    never a map of a whole phrase-file member (Bundle.memmap, Bundle.take: with those, each
    worker's resident set held most of the phrase files on bio-multi). Blocks of 2 pairs over
    rows 0..5 of _table(): pairs (0,1) (0,2) | (1,0) (1,2) | (2,3) (3,2) read phrase rows
    [0, 1, 2], [0, 1, 2], [2, 3] from each row array, and the output is one block's bytes."""
    from pivot.pipeline.bundle import Bundle

    whole = _apply(tmp_path, [(0, 6)])
    reads = []
    for method in ("memmap", "take", "rows"):
        def recorded(self, name, *args, _orig=getattr(Bundle, method), _m=method, **kw):
            if self.path.name == "ph.arrays":
                reads.append((_m, name, np.asarray(args[0]).tolist() if _m == "rows" else None))
            return _orig(self, name, *args, **kw)
        monkeypatch.setattr(Bundle, method, recorded)
    monkeypatch.setattr(P, "APPLY_ROWS", 2)
    d = tmp_path / "blocks"
    d.mkdir()
    got = _apply(d, [(0, 6)])
    assert {m for m, _, _ in reads} == {"rows"}
    assert [r for m, n, r in reads if n == "tokens"] == [[0, 1, 2], [0, 1, 2], [2, 3]]
    # the trigram pointers: rows r and r + 1 of each, one ascending pass
    assert [r for m, n, r in reads if n == "tri_ptr"][2] == [2, 3, 3, 4]
    for f in whole:
        assert got[f].tobytes() == whole[f].tobytes(), f


def test_phrase_file_gathers_rows_as_the_whole_arrays_hold_them(tmp_path, monkeypatch):
    """PhraseFile.gather(rows) holds exactly those rows of every per-phrase array (row_of the
    identity on them), read in windows of one row (GATHER_BYTES = 1), and the pair features of
    their local numbers are the whole arrays' features of the phrase ids, to the byte."""
    from pivot.pipeline import bundle

    texts = ["the", "cell", "of", "a", "cells", "kidney cell"]
    whole = _phrases(texts, counts=[1, 9, 2, 3, 4, 5], f_lang=(0, 1, 1))
    whole.vec = np.arange(12, dtype=np.float32).reshape(6, 2) - 3.0
    whole.vec_has = np.array([1, 1, 0, 1, 1, 1], bool)
    whole.row_of = np.array([0, 1, 2, 3, 4, 5, -1], np.int32)
    whole.save(tmp_path / "phrases.arrays")
    monkeypatch.setattr(bundle, "GATHER_BYTES", 1)
    f = P.PhraseFile(tmp_path / "phrases.arrays")
    g = f.gather(np.array([1, 4, 5]))
    for k in P.PHRASE_ROW_ARRAYS:
        assert getattr(g, k).tobytes() == getattr(whole, k)[[1, 4, 5]].tobytes(), k
    assert g.row_of.tolist() == [0, 1, 2] and g.f_lang.tolist() == [0, 1, 1]
    # "#cell#" 4 trigrams, "#cells#" 5, "#kidney cell#" 11: whole's codes of rows 1, 4, 5
    assert g.tri_ptr.tolist() == [0, 4, 9, 20]
    assert g.tri.tobytes() == np.concatenate([whole.tri[whole.tri_ptr[r]:whole.tri_ptr[r + 1]]
                                              for r in (1, 4, 5)]).tobytes()
    e1, e2 = np.array([1, 4, 5, 5]), np.array([4, 1, 1, 4])
    l1, l2 = np.array([0, 1, 2, 2]), np.array([1, 0, 0, 1])
    args = ([[0.5], [0.2], [0.1], [0.0]], [[0.2], [0.5], [0.0], [0.3]], [1, 2, 3, 4],
            np.array([[0, 1, -1], [2, -1, -1], [-1, -1, -1], [1, 2, 0]]), np.zeros(4, np.uint8))
    want, got = P.pair_features(whole, e1, e2, *args), P.pair_features(g, l1, l2, *args)
    assert [c.tobytes() for c in got] == [c.tobytes() for c in want]
    assert f.rows([5, 1]).tolist() == [5, 1] and len(f.gather(np.zeros(0, np.int64)).tokens) == 0
    for bad in ([4, 1], [1, 1], [6]):
        with pytest.raises(ValueError, match="ascending"):
            f.gather(np.array(bad))
    with pytest.raises(ValueError, match="without a row"):
        f.rows([1, 6])



def test_standardised_matrix_is_linear_over_the_standardised_columns_to_the_byte():
    """The score's and the softmax's linear predictors, one column at a time (standardised_matrix),
    give the bytes of linear() over Standardiser.columns; by hand, with mean (1, 10) and sd
    (2, 4): rows x = (3, 14) and (0, 2) have z = (1, 1) and (-0.5, -2), and 1 + 2 z1 - z2 is 2 and 2."""
    std = P.Standardiser(["a", "b"], np.array([1.0, 10.0]), np.array([2.0, 4.0]), [])
    cols = [np.array([14.0, 2.0]), np.array([7.0, 7.0]), np.array([3.0, 0.0])]      # b, x (unused), a
    names = ["b", "x", "a"]
    got = list(P.standardised_matrix(std, names, cols, [1.0, 0.0], [[2.0, -1.0], [0.5, 0.25]]).T)
    assert got[0].tolist() == [2.0, 2.0] and got[1].tolist() == [0.75, -0.75]
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1000, 7)) * rng.uniform(0.1, 30, 7) + rng.uniform(-5, 5, 7)
    names = [f"f{j}" for j in range(7)]
    std = P.Standardiser.fit(names[:6], x[:, :6])
    coefs = rng.standard_normal((3, 6))
    cols = [x[:, j] for j in range(7)]
    got = list(P.standardised_matrix(std, names, cols, [0.3, -1.0, 2.0], coefs).T)
    z = std.columns(names, cols)
    assert [g.tobytes() for g in got] == [P.linear(z, b, c).tobytes() for b, c in zip([0.3, -1.0, 2.0], coefs)]


def test_standardised_matrix_by_hand_with_a_shorter_coefficient_row():
    """The kernel's (n, K) sums: mean (1, 10), sd (2, 4); rows x = (3, 14), (0, 2) have z = (1, 1),
    (-0.5, -2). Sum 0: 1 + 2 z_a - z_b = 2, 2. Sum 1 has one coefficient (0.5 on a): its sum
    stops there, 0.5 z_a = 0.5, -0.25. Integer columns are taken as float64 (numpy's ufuncs
    do); a float32 column is refused (numpy would subtract the mean in float32)."""
    std = P.Standardiser(["a", "b"], np.array([1.0, 10.0]), np.array([2.0, 4.0]), [])
    cols = [np.array([3, 0]), np.array([14.0, 2.0])]
    got = P.standardised_matrix(std, ["a", "b"], cols, [1.0, 0.0], [[2.0, -1.0], [0.5]])
    assert got.shape == (2, 2) and got.tolist() == [[2.0, 0.5], [2.0, -0.25]]
    assert P.standardised_matrix(std, ["a", "b"], [c[:0] for c in cols], [1.0], [[1.0, 1.0]]).shape == (0, 1)
    # an intercept without a coefficient row is its sum (as the numpy form's zip left it)
    assert P.standardised_matrix(std, ["a", "b"], cols, [1.0, 7.0], [[2.0, -1.0]]).tolist() == [[2.0, 7.0], [2.0, 7.0]]
    with pytest.raises(TypeError, match="float32"):
        P.standardised_matrix(std, ["a", "b"], [cols[0], cols[1].astype(np.float32)], [1.0], [[1.0, 1.0]])


def test_standardised_matrix_is_numpy_one_column_at_a_time_to_the_byte():
    """The kernel (blocks of 256 rows: 1000 rows end in a short block) against the numpy
    reference, z_j = (x_j - mean_j) / sd_j then s_k += c_kj z_j column after column: the
    same bytes for coefficient rows of every length, with infinities and NaN among the x."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((1000, 9)) * rng.uniform(0.1, 30, 9) + rng.uniform(-5, 5, 9)
    names = [f"f{j}" for j in range(9)]
    std = P.Standardiser(names[::-1], x.mean(axis=0)[::-1], x.std(axis=0)[::-1] + 0.1, [])
    x[3, 2], x[7, 5], x[999, 0] = np.inf, np.nan, -np.inf
    cols = [x[:, j] for j in range(9)]                      # strided columns: the kernel copies them
    coefs = [rng.standard_normal(k) for k in (9, 9, 4, 0, 9, 1)]
    intercepts = rng.standard_normal(6)
    want = []
    for b, c in zip(intercepts, coefs):
        s = np.full(1000, b)
        for cj, name, m, sd in zip(c, std.names, std.mean, std.sd):
            s += cj * ((cols[names.index(name)] - m) / sd)
        want.append(s)
    got = P.standardised_matrix(std, names, cols, intercepts, coefs)
    assert got.flags.c_contiguous and [got[:, k].tobytes() for k in range(6)] == [w.tobytes() for w in want]


def test_log_floor_is_portable_log_of_the_positive_entries_to_the_bit():
    """_log_floor: portable.log where p > 0 (log 1 = 0, log 0.5 = -ln 2, log 0.25 = -2 ln 2),
    FLOOR_LOG_P for 0, -0, negatives and NaN; the kernel (portable's fast path in C) leaves the
    positive non-normal entries (subnormal, inf) to portable.log: the bits of the numpy form,
    log of every entry then masked, over 2^-1074..2^1023 and around the cut sqrt(1/2)."""
    from pivot import portable
    from pivot._native import _counts

    got = P._log_floor(np.array([[1.0, 0.0], [0.5, -1.0], [np.nan, 0.25], [-0.0, 1.0]]))
    assert got.tolist() == [[0.0, FLOOR_LOG_P], [-math.log(2), FLOOR_LOG_P], [FLOOR_LOG_P, -2 * math.log(2)],
                            [FLOOR_LOG_P, 0.0]]
    rng = np.random.default_rng(4)
    p = rng.uniform(0.5, 1, 200_000) * np.exp2(rng.integers(-1074, 1024, 200_000).astype(float))
    p[rng.uniform(0, 1, len(p)) < 0.4] = 0.0
    cut = portable._SQRT_HALF
    p = np.concatenate([p, [5e-324, 1e-310, np.inf, -np.inf, np.nan, np.finfo(float).max, portable._TINY],
                        np.outer([np.nextafter(cut, 0), cut, np.nextafter(cut, 1), 1.0, np.nextafter(1.0, 0)],
                                 np.exp2(np.arange(-60.0, 60.0))).ravel()])
    want = np.where(p > 0, portable.log(np.where(p > 0, p, 1.0)), FLOOR_LOG_P)
    assert P._log_floor(p.reshape(-1, 1)).tobytes() == want.reshape(-1, 1).tobytes()
    # the kernel itself: 5e-324, 1e-310 and inf are its "odd" entries (NaN, for the caller)
    out, odd = _counts.log_floor(np.array([5e-324, 1e-310, np.inf, 0.5, 0.0]), -7.0,
                                 np.asarray(portable._LOG_R), portable._LN2_HI, portable._LN2_LO, cut)
    assert odd == 3 and np.isnan(out[:3]).all() and out[3] == -math.log(2) and out[4] == -7.0


def test_n_distinct_languages_as_a_sort_of_each_row():
    """The pairwise comparison of columns counts what the sorted rows' distinct values >= 0 count."""
    langs = np.random.default_rng(3).integers(-1, 4, (2000, 3))
    s = np.sort(langs, axis=1)
    want = (s[:, :1] >= 0).sum(axis=1) + ((s[:, 1:] != s[:, :-1]) & (s[:, 1:] >= 0)).sum(axis=1)
    assert P.n_distinct_languages(langs).tolist() == want.tolist()
    assert P.n_distinct_languages(np.array([[2], [-1]])).tolist() == [1, 0]


def test_row_numbers_clear_their_marks_between_calls():
    """RowNumbers(7): [5, 1, 5, 3, 1] has rows 1, 3, 5 (numbers 2 0 2 1 0); the next call,
    [6, 0, 6], sees none of them: rows 0, 6 (numbers 1 0 1); then distinct_rows' own answers."""
    numbers = P.RowNumbers(7)
    rows, local = numbers(np.array([5, 1, 5, 3, 1]))
    assert rows.tolist() == [1, 3, 5] and local.tolist() == [2, 0, 2, 1, 0]
    rows, local = numbers([6, 0, 6])
    assert rows.tolist() == [0, 6] and local.tolist() == [1, 0, 1] and not numbers.mark.any()
    r = np.random.default_rng(8).integers(0, 500, 3000)
    big = P.RowNumbers(500)
    for a in range(0, 3000, 700):
        want = np.unique(r[a:a + 700], return_inverse=True)
        got = big(r[a:a + 700])
        assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()


def test_pair_table_rows_read_rows_of_every_part_in_any_order(tmp_path):
    """PairTable.rows: _table()'s p (0.5 0.1 0.25 0.2 0.4 0.8) in parts (0,2), (2,2) empty,
    (2,5), (5,6): global rows 5, 0, 3, 3, 2 give 0.8, 0.5, 0.2, 0.2, 0.25."""
    parts, table = _row_parts(tmp_path, [(0, 2), (2, 2), (2, 5), (5, 6)])
    got = table.rows([5, 0, 3, 3, 2], ("p",))[0]
    assert got[:, 0].tolist() == [0.8, 0.5, 0.2, 0.2, 0.25]
    assert table.p_rows([5, 0, 3, 3, 2]).tobytes() == got.astype(np.float64).tobytes()
    assert table.rows([], ("pivots",))[0].shape == (0, 3)


def test_distinct_rows_are_numpy_unique_with_the_inverse():
    """distinct_rows(r, n): the distinct rows ascending and each one's index among them."""
    rows, local = P.distinct_rows(np.array([5, 1, 5, 3, 1]), 7)
    assert rows.tolist() == [1, 3, 5] and local.tolist() == [2, 0, 2, 1, 0]
    r = np.random.default_rng(2).integers(0, 500, 2000)
    want = np.unique(r, return_inverse=True)
    got = P.distinct_rows(r, 500)
    assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()
    assert [a.tolist() for a in P.distinct_rows(np.zeros(0, np.int64), 4)] == [[], []]


# ------------------------------------------------------------------------------ the database


def _db(tmp_path, **layer):
    phrases = ["treat", "cure", "treat ,", "the treat"]
    e1 = np.array([0, 0, 0, 1])
    e2 = np.array([1, 2, 3, 0])
    models = [{"name": "general", "kind": "general", "description": "", "params": {}},
              {"name": "ppdb2", "kind": "learned", "description": "", "params": {}}]
    meta = {"signature": "s", "normalization": {"lang": "en"}, "ppdb2": {"learned": True},
            "relations": {"classified": True}}
    rel = np.array([[700, 100, 50, 50, 50, 50], [0, 0, 0, 0, 1000, 0], [500, 500, 0, 0, 0, 0],
                    [200, 0, 0, 0, 0, 800]])
    kwargs = dict(phrases=phrases, phrase_counts=np.array([5, 3, 1, 1]), e1=e1, e2=e2, n_pivots=np.ones(4),
                  pivots=np.full((4, 3), -1), foreign={}, models=models, scores=np.array([[0.2], [0.5], [0.1], [0.3]]),
                  meta=meta, form=np.array([0, 1, 2 | 16, 0]), ppdb2=np.array([4.0, 4.5, 3.0, 2.0]), rel=rel,
                  lhs={0: "[VB]", 1: "[VB]", 2: "[X]", 3: "[NP]"})
    kwargs.update(layer)
    return write_database(tmp_path / "t.db", **kwargs)


def test_lookup_ranks_by_the_learned_score_and_hides_junk(tmp_path):
    with ParaphraseDB(_db(tmp_path)) as db:
        assert db.default_model == "ppdb2" and db.meta["default_model"] == "ppdb2"
        assert db.stored_models == ["general"] and db.n_pairs("ppdb2") == 4
        hits = db.lookup("treat")
        # "treat ," (edge-punct) and "the treat" (function-only) are hidden; cure remains
        assert [(h.paraphrase, h.score, h.relation) for h in hits] == [("cure", 4.0, "Equivalence")]
        assert hits[0].relations["Equivalence"] == 0.7 and hits[0].form == ()
        assert hits[0].p_rev == 2.0   # the reverse pair's learned score
        every = db.lookup("treat", all=True)
        assert [h.paraphrase for h in every] == ["treat ,", "cure", "the treat"]
        assert every[0].form == ("edge-punct",) and every[2].form == ("function-only", "containment")
        assert [h.paraphrase for h in db.lookup("treat", model="general", all=True)] == ["treat ,", "cure", "the treat"]
        assert [h.paraphrase for h in db.lookup("treat", model="general")] == ["cure"]
        lhs = dict(db._conn.execute("SELECT text, lhs FROM phrase"))
        assert lhs == {"treat": "[VB]", "cure": "[VB]", "treat ,": "[X]", "the treat": "[NP]"}


def test_a_learned_model_needs_its_scores(tmp_path):
    with pytest.raises(ValueError, match="learned"):
        _db(tmp_path, ppdb2=None)


DATA = Path(os.environ.get("PIVOT_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


@pytest.mark.integration
@pytest.mark.skipif(not (DATA / "lexicon" / "nltk_data").is_dir(), reason="WordNet not found (set PIVOT_DATA)")
def test_wordnet_reader_matches_nltk_on_the_real_files():
    """The files read directly give NLTK's lemmatizer and synsets (a sample of 2,000 lemmas)."""
    wn = wordnet.WordNet.read(wordnet.wordnet_folder(DATA, P.LEXICON))
    import nltk

    nltk.data.path.insert(0, str(DATA / P.LEXICON))
    from nltk.corpus import wordnet as nltk_wn

    assert nltk_wn.get_version() == "3.0"
    ours, theirs = wellformed.wordnet_lemmatizer(DATA), wellformed.WordNetLemmatizer(nltk_wn)
    assert ours.units == theirs.units

    lemmas = sorted(wn.pos_of)[::70]
    pos = {"n": 0, "v": 1, "a": 2, "s": 2, "r": 3}
    for lemma in lemmas:
        assert ours(lemma) == theirs(lemma), lemma
        inflected = lemma + "s"
        assert ours(inflected) == theirs(inflected), inflected
        expected = {pos[s.pos()] * 10 ** 8 + s.offset() for s in nltk_wn.synsets(lemma)
                    if lemma in [n.lower() for n in s.lemma_names()]}
        assert set(wn.synsets[lemma]) == expected, lemma


def test_share_synset_by_hand():
    """Lexical.share_synset on arrays: slots 0 (synsets 5, 7), 1 (7), 2 (none), 3 (5, 9);
    (0, 1) share 7, (0, 3) share 5, (1, 3) share none, (2, x) and (x, 2) nothing."""
    synsets = [(5, 7), (7,), (), (9, 5)]
    lex = P.Lexical.from_synsets(synsets, np.zeros(4, bool), np.arange(4))
    assert lex.syn_ptr.tolist() == [0, 2, 3, 3, 5] and lex.syn_ids.tolist() == [5, 7, 7, 9, 5]
    assert lex.has.tolist() == [True, True, False, True] and lex.synsets(3) == (9, 5)
    a = np.array([0, 0, 1, 2, 0, 3, 1, 3])
    b = np.array([1, 3, 3, 0, 2, 0, 0, 3])
    assert lex.share_synset(a, b).tolist() == [True, True, False, False, False, True, True, True]
    assert lex.share_synset(np.zeros(0, np.int64), np.zeros(0, np.int64)).tolist() == []


def test_relation_tasks_are_fit_relations(tmp_path):
    """The build's relation fits as tasks (relation_task on the saved training rows, a column
    subset like the string-only classifier's, relation_selection) give fit_relations' model to
    the byte and its selection table."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(120, 3))
    y = (x[:, 0] + 0.5 * x[:, 2] > 0).astype(np.int64) + 2 * (x[:, 1] > 1.0)
    validation = np.arange(120) % 4 == 0
    save_bundle(tmp_path / "rows.arrays", x=x, y=y, validation=validation)
    for cols, names in ((None, ["a", "b", "c"]), ([0, 2], ["a", "c"])):
        sub = x if cols is None else x[:, cols]
        want, want_table = P.fit_relations(names, sub, y, validation)
        grid = [(lam, beta) for lam in P.RELATION_LAMBDAS for beta in P.RELATION_BALANCE]
        best, table = P.relation_selection({k: P.relation_task(tmp_path / "rows.arrays", cols, names, *k, False)
                                            for k in grid})
        got = P.relation_task(tmp_path / "rows.arrays", cols, names, *best, True)
        assert table == want_table and got.W.tobytes() == want.W.tobytes()
        assert json.dumps(got.to_json()) == json.dumps(want.to_json())


def test_phrase_text_list_in_the_order_of_the_ids():
    """The stage's texts (encode.phrase_text_list): each id's row of token ids joined by spaces,
    in the ids' order (no dict of them); phrase_texts is the same as a dict."""
    from pivot.pipeline.encode import phrase_text_list, phrase_texts

    rows = np.array([[0, 1, -1], [2, -1, -1], [-1, -1, -1], [1, 0, 2]], np.int32)
    assert phrase_text_list(rows, ["a", "b", "c"], np.array([3, 1, 0, 2])) == ["b a c", "c", "a b", ""]
    assert phrase_texts(rows, ["a", "b", "c"], np.array([3, 1])) == {3: "b a c", 1: "c"}


@pytest.mark.parametrize("wordnet_lemmas", [False, True])
def test_labels_per_part_are_the_labels_of_the_whole(tmp_path, monkeypatch, wordnet_lemmas):
    """forms_task per block of 3 phrases, lemmas_task, then label_range per pivot part (the
    build's tasks) give PhraseForms.from_texts' pair_labels of every pair at once (labels traced
    by hand), and each pair's reverse row as PairTable.find finds it; without WordNet and with
    the six-synset one of _wordnet (its "geese" -> goose)."""
    texts = ["the cell", "cell", "geese", ", cell", "cell counts were", "cell counts", "goose", "goose 's meat",
             "goose meat"]
    # the encode stage's English ids (not by first occurrence), the last a word no phrase holds
    e_tokens = [*sorted({w for t in texts for w in t.split()}, reverse=True), "unused"]
    rows = np.full((len(texts), 3), -1, np.int32)
    for p, t in enumerate(texts):
        rows[p, :len(t.split())] = [e_tokens.index(w) for w in t.split()]
    # phrase ids 0..11 with ids 1, 5 and 9 unused: slot maps an id to its text's position
    ids = [0, 2, 3, 4, 6, 7, 8, 10, 11]
    slot = np.full(12, -1, np.int32)
    slot[ids] = np.arange(len(ids))
    e1 = np.array([0, 0, 2, 2, 3, 6, 7, 10, 11], np.int32)
    e2 = np.array([2, 3, 4, 10, 8, 7, 6, 11, 3], np.int32)
    parts = []
    for j, (lo, hi) in enumerate(((0, 4), (4, 5), (5, 9))):
        parts.append(tmp_path / f"rows-{j}.arrays")
        save_bundle(parts[-1], e1=e1[lo:hi], e2=e2[lo:hi])
    blocks = P._write_texts(tmp_path / "texts.txt", texts, block=3)
    save_bundle(tmp_path / "slot.arrays", slot=slot)
    save_bundle(tmp_path / "tokens.arrays", tokens=rows)
    data_root = None
    lemmatizer = P.identity_lemmas
    if wordnet_lemmas:
        data_root = str(tmp_path)
        lemmatizer = wellformed.WordNetLemmatizer(wordnet.WordNet.read(_wordnet(tmp_path / "lexicon" / "nltk_data")))
    # each task gives its worker's freed heap back to the system when it ends (release_heap)
    released = []
    monkeypatch.setattr(P, "release_heap", lambda: released.append(1))
    form_paths = [tmp_path / f"forms-{k}.arrays" for k in range(3)]
    assert [P.forms_task(tmp_path / "texts.txt", b, tmp_path / "tokens.arrays", data_root, path)
            for b, path in zip(blocks, form_paths)] == [{"reused": False, "n_phrases": 3}] * 3
    # the lemma table's rows: every id up to the largest some phrase holds ("unused" is not one)
    assert P.lemmas_task(form_paths, tmp_path / "lemmas.arrays") == {"reused": False, "n_tokens": len(e_tokens) - 1}
    got = [P.label_range(form_paths, tmp_path / "lemmas.arrays", tmp_path / "slot.arrays", parts, j,
                         tmp_path / f"f-{j}.arrays") for j in range(3)]
    assert [g["n_pairs"] for g in got] == [4, 1, 4] and len(released) == 7
    from pivot.pipeline.bundle import open_bundle

    form, rev = [], []
    for j in range(3):
        with open_bundle(tmp_path / f"f-{j}.arrays") as z:
            form.append(z["form"])
            rev.append(z["rev"])
    whole = wellformed.PhraseForms.from_texts(texts, lemmatizer).pair_labels(slot[e1], slot[e2])
    assert np.concatenate(form).tolist() == whole.tolist()
    # by hand: "the cell" / "cell" differ by a function word (2); "the cell" / "geese" nothing;
    # "cell" / ", cell" an edge's punctuation and a function-word change (1 | 2); "cell" / "goose
    # 's meat" nothing; "geese" / "goose" share a lemma in WordNet (8); "cell counts were" /
    # "cell counts" a function word and a dangling end, both ways (2 | 4); "goose 's meat" /
    # "goose meat" the genitive (8); "goose meat" / "geese": [geese] in [goose, meat] by lemma (16)
    assert whole.tolist() == ([2, 0, 3, 0, 8, 6, 6, 8, 16] if wordnet_lemmas else [2, 0, 3, 0, 0, 6, 6, 8, 0])
    # the reverses by hand: rows 5 (6,7) and 6 (7,6); no other pair's is stored
    assert np.concatenate(rev).tolist() == [-1, -1, -1, -1, -1, 6, 5, -1, -1]
    assert P.forms_task(tmp_path / "texts.txt", blocks[0], tmp_path / "tokens.arrays", data_root,
                        form_paths[0]) == {"reused": True}
    assert P.lemmas_task(form_paths, tmp_path / "lemmas.arrays") == {"reused": True}
    assert P.label_range(form_paths, tmp_path / "lemmas.arrays", tmp_path / "slot.arrays", parts, 0,
                         tmp_path / "f-0.arrays") == {"reused": True}


def test_block_words_are_the_texts_words(tmp_path):
    """_block_words: each id of the rows with its word, read from the texts in row order; a
    text that does not hold its row's number of words is refused."""
    rows = np.array([[4, 1, -1], [-1, -1, -1], [1, 7, 2]], np.int32)
    assert P._block_words(["b a", "", "a c d"], rows) == {1: "a", 2: "d", 4: "b", 7: "c"}
    with pytest.raises(ValueError, match="4 words in the block's texts, 5 token ids"):
        P._block_words(["b a", "", "a c"], rows)


# ------------------------------------------------------------------------------ the stage part by part


def test_order_keys_sort_as_the_floats():
    values = [-np.inf, -1e300, -2.0, -1.0, -5e-324, 0.0, 5e-324, 1.0, 2.0, 1e300, np.inf, np.nan]
    keys = P.order_keys(np.array(values))
    assert (keys[1:] > keys[:-1]).all()
    # +0.0's key is the sign bit alone; 1.0 = 0x3FF0... gets the sign bit set; -1.0 = 0xBFF0... flipped
    assert int(keys[5]) == 1 << 63 and int(keys[7]) == 0xBFF0000000000000 and int(keys[3]) == 0x400FFFFFFFFFFFFF
    back = [P.key_value(int(k)) for k in keys]
    assert back[:-1] == values[:-1] and math.isnan(back[-1])


def _cut_in_parts(scores, visible, cuts):
    """The (scores, visible) of each part between the cuts, anew at every call."""
    edges = [0, *cuts, len(scores)]
    return lambda: ((scores[a:b], visible[a:b]) for a, b in zip(edges[:-1], edges[1:]))


def test_size_cuts_parts_by_hand():
    """test_size_cuts_nested_by_share_of_visible_pairs's pairs in three parts (one empty): the
    same cuts; visible pairs >= each cut: s, m, l: 1 (5.0); xl: 2; xxl: 3; xxxl: 6 (>= 0.5)."""
    scores = np.array([5.0, 4.0, 3.0, 2.0, 1.0, 0.5, 9.0])
    visible = np.array([True] * 6 + [False])
    cuts, size_pairs = P.size_cuts_parts(_cut_in_parts(scores, visible, [2, 2]))
    assert cuts == {"s": 5.0, "m": 5.0, "l": 5.0, "xl": 4.0, "xxl": 3.0, "xxxl": 0.5}
    assert size_pairs == {"s": 1, "m": 1, "l": 1, "xl": 2, "xxl": 3, "xxxl": 6}
    # no visible pair: every cut is the lowest score of all; no pair at all: 0.0
    none = np.zeros(7, bool)
    assert P.size_cuts_parts(_cut_in_parts(scores, none, [3]))[0] == dict.fromkeys(P.SIZES, 0.5)
    assert P.size_cuts_parts(_cut_in_parts(np.zeros(0), np.zeros(0, bool), []))[0] == dict.fromkeys(P.SIZES, 0.0)


@pytest.mark.parametrize("seed", range(6))
def test_size_cuts_parts_are_size_cuts(seed):
    """Random scores with many ties (a few distinct values, some negative, some far apart in
    exponent) and hidden pairs, cut at random: the cuts are size_cuts' floats to the bit, and
    the pairs at or above each cut are counted as over the whole."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    pool = np.concatenate([rng.normal(3.0, 1.0, 7), -rng.exponential(1.0, 3), [1e-300, 7e200, 4.0]])
    scores = rng.choice(pool, n) if seed % 2 else rng.normal(3.0, 1.0, n)
    visible = rng.random(n) < 0.8
    cuts = sorted(rng.integers(0, n + 1, int(rng.integers(0, 6))).tolist())
    got, size_pairs = P.size_cuts_parts(_cut_in_parts(scores, visible, cuts))
    want = P.size_cuts(scores, visible)
    assert {k: v.hex() for k, v in got.items()} == {k: float(v).hex() for k, v in want.items()}
    assert size_pairs == {k: int((scores[visible] >= c).sum()) for k, c in want.items()}


def test_smallest_by_hash_in_lots_is_the_stable_argsort_of_all():
    rng = np.random.default_rng(1)
    h = rng.integers(0, 5, 200).astype(np.float64)       # many ties: the row decides among them
    rows = np.arange(200) * 3
    want = np.sort(rows[np.argsort(h, kind="stable")[:17]])
    kept_h, kept = np.zeros(0), np.zeros(0, np.int64)
    for a, b in ((0, 50), (50, 51), (51, 51), (51, 200)):
        kept_h, kept = P.smallest_by_hash(np.concatenate([kept_h, h[a:b]]), np.concatenate([kept, rows[a:b]]), 17)
    assert np.sort(kept).tolist() == want.tolist()
    # no more than the limit: kept as given
    assert P.smallest_by_hash(h[:3], rows[:3], 17)[1].tolist() == [0, 3, 6]


def test_pair_table_reads_part_by_part(tmp_path):
    """_table()'s six pairs in parts (0,2), (2,2) empty, (2,5), (5,6), (6,6) empty: rows
    bounds, the first keys, find (pairs stored in every part, absent ones below the first
    key, between parts and above the last), selected rows in any order, the used phrases and
    the pivots, read one part at a time."""
    e1, e2, p = _table()
    parts = []
    for j, (lo, hi) in enumerate(((0, 2), (2, 2), (2, 5), (5, 6), (6, 6))):
        parts.append(tmp_path / f"rows-{j}.arrays")
        pivots = np.array([[7, -1, -1], [2, 7, -1], [-1, -1, -1], [9, -1, -1], [-1, -1, -1], [0, 2, -1]], np.int32)
        save_bundle(parts[-1], e1=e1[lo:hi], e2=e2[lo:hi], p=p[lo:hi], n_pivots=np.arange(lo, hi, dtype=np.int32),
                    pivots=pivots[lo:hi])
    table = P.PairTable.read(parts)
    assert table.bounds.tolist() == [0, 2, 2, 5, 6, 6] and table.n_models == 1 and table.n_pairs == 6
    assert table.nonempty.tolist() == [0, 2, 3] and table.first_keys.tolist() == [1, 1 << 32, 3 << 32 | 2]
    # rows 0..5, then (0, 0) below the first key, (0, 3) between parts 0 and 2, (2, 0) between 2 and 3,
    # (3, 3) above the last
    a = np.array([0, 0, 1, 1, 2, 3, 0, 0, 2, 3])
    b = np.array([1, 2, 0, 2, 3, 2, 0, 3, 0, 3])
    assert table.find(a, b).tolist() == [0, 1, 2, 3, 4, 5, -1, -1, -1, -1]
    assert table.find(a[::-1], b[::-1]).tolist() == [-1, -1, -1, -1, 5, 4, 3, 2, 1, 0]
    got_e1, got_n, got_pivots = table.rows([5, 0, 3, 3], ("e1", "n_pivots", "pivots"))
    assert got_e1.tolist() == [3, 0, 1, 1] and got_n.tolist() == [5, 0, 3, 3]
    assert got_e1.dtype == np.int32 and got_pivots[0].tolist() == [0, 2, -1]
    assert table.rows([], ("pivots",))[0].shape == (0, 3)
    assert table.p_rows([4, 1], 0).tolist() == [0.4, 0.1]
    # p(e1|e2) of (0, 1), (1, 2), (3, 2): rows 2 (0.25), none, 4 (0.4)
    assert table.reverse_p(np.array([0, 1, 3]), np.array([1, 2, 2]))[:, 0].tolist() == [0.25, 0.0, 0.4]
    assert table.used_phrases(6).tolist() == [0, 1, 2, 3]
    assert table.pivot_ids().tolist() == [0, 2, 7, 9]
    scanned = [(lo, z["e2"].tolist()) for lo, z in table.scan(("e2",))]
    assert scanned == [(0, [1, 2]), (2, []), (2, [0, 2, 3]), (5, [2]), (6, [])]


def test_phrases_keep_rows_for_the_stored_phrases_only():
    """Phrases whose arrays hold only phrase ids 1, 4, 5 (rows 0, 1, 2: the build keeps a row per
    stored phrase) give the feature columns of arrays over every id, to the byte; an id
    without a row is an error."""
    texts = ["the", "cell", "of", "a", "cells", "kidney cell"]
    whole = _phrases(texts, counts=[1, 9, 2, 3, 4, 5], f_lang=(0, 1, 1))
    whole.vec = np.arange(12, dtype=np.float32).reshape(6, 2) - 3.0
    whole.vec_has = np.ones(6, bool)
    used = np.array([1, 4, 5])
    ptr, tri = P.char_trigrams([texts[i] for i in used])
    part = P.Phrases(whole.n_words[used], whole.log_count[used], whole.tokens[used], ptr, tri, whole.f_lang,
                     np.array([-1, 0, -1, -1, 1, 2], np.int32), whole.vec[used], whole.vec_has[used])
    e1, e2 = np.array([1, 4, 5, 5]), np.array([4, 1, 1, 4])
    p, p_rev = np.array([[0.5], [0.2], [0.1], [0.0]]), np.array([[0.2], [0.5], [0.0], [0.3]])
    args = (p, p_rev, [1, 2, 3, 4], np.array([[0, 1, -1], [2, -1, -1], [-1, -1, -1], [1, 2, 0]]), np.zeros(4, np.uint8))
    want, got = P.pair_features(whole, e1, e2, *args), P.pair_features(part, e1, e2, *args)
    assert [c.tobytes() for c in got] == [c.tobytes() for c in want]
    assert P.phrase_columns(part, e1, e2).tobytes() == P.phrase_columns(whole, e1, e2).tobytes()
    assert part.rows([5, 1]).tolist() == [2, 0]
    with pytest.raises(ValueError, match="without a row"):
        part.rows([1, 3])


def test_phrase_file_reads_the_rows_of_the_pairs_phrases(tmp_path):
    """The stage's process reads the Phrases from their file (PhraseFile): take(ids) holds the
    rows of those ids alone (ascending rows, row_of renumbered) and gives their pairs the
    feature columns of the whole arrays, to the byte; the file object itself holds no array
    with a row per phrase, only row_of and f_lang; vectors(a, b) are rows a:b."""
    texts = ["the", "cell", "of", "a", "cells", "kidney cell"]
    whole = _phrases(texts, counts=[1, 9, 2, 3, 4, 5], f_lang=(0, 1, 1))
    whole.vec = np.arange(12, dtype=np.float32).reshape(6, 2) - 3.0
    whole.vec_has = np.array([1, 1, 0, 1, 1, 1], bool)
    whole.row_of = np.array([0, 1, 2, 3, 4, 5, -1], np.int32)     # id 6: in no stored pair
    whole.save(tmp_path / "phrases.arrays")
    f = P.PhraseFile(tmp_path / "phrases.arrays")
    assert f.dim == 2 and f.n == 6
    assert {k for k, v in vars(f).items() if isinstance(v, np.ndarray)} == {"row_of", "f_lang"}
    e1, e2 = np.array([1, 4, 5, 5]), np.array([4, 1, 1, 4])
    part = f.take(np.concatenate([e1, e2]))
    # ids 1, 4, 5: rows 0, 1, 2 of the part; "#cell#" has the trigrams #ce cel ell ll#, "#cells#"
    # five, "#kidney cell#" eleven (#ki kid idn dne ney "ey " "y c" " ce" cel ell ll#)
    assert part.row_of.tolist() == [-1, 0, -1, -1, 1, 2, -1] and len(part.tokens) == 3
    assert part.tri_ptr.tolist() == [0, 4, 9, 20] and part.tri.dtype == np.uint32
    assert part.tri.tobytes() == whole.tri[whole.tri_ptr[1]:whole.tri_ptr[2]].tobytes() + \
        whole.tri[whole.tri_ptr[4]:whole.tri_ptr[6]].tobytes()
    p, p_rev = np.array([[0.5], [0.2], [0.1], [0.0]]), np.array([[0.2], [0.5], [0.0], [0.3]])
    args = (p, p_rev, [1, 2, 3, 4], np.array([[0, 1, -1], [2, -1, -1], [-1, -1, -1], [1, 2, 0]]), np.zeros(4, np.uint8))
    want, got = P.pair_features(whole, e1, e2, *args), P.pair_features(part, e1, e2, *args)
    assert [c.tobytes() for c in got] == [c.tobytes() for c in want]
    assert P.phrase_columns(part, e1, e2).tobytes() == P.phrase_columns(whole, e1, e2).tobytes()
    assert f.vectors(2, 4).tobytes() == whole.vec[2:4].tobytes()
    with pytest.raises(ValueError, match="without a row"):
        f.take([1, 6])
    # the stage writes the vectors to a bundle of their own: the same rows from the two
    fields = {k: getattr(whole, k) for k in whole.__dataclass_fields__}
    save_bundle(tmp_path / "p.arrays", **{k: v for k, v in fields.items() if not k.startswith("vec")})
    save_bundle(tmp_path / "v.arrays", vec=whole.vec, vec_has=whole.vec_has)
    two = P.PhraseFile(tmp_path / "p.arrays", tmp_path / "v.arrays")
    assert two.dim == 2 and two.vectors(2, 4).tobytes() == whole.vec[2:4].tobytes()
    got = P.pair_features(two.take(np.concatenate([e1, e2])), e1, e2, *args)
    assert [c.tobytes() for c in got] == [c.tobytes() for c in want]
    loaded = P.Phrases.load(tmp_path / "p.arrays", tmp_path / "v.arrays", mmap=True)
    assert all(np.asarray(getattr(loaded, k)).tobytes() == v.tobytes() for k, v in fields.items())


def test_text_file_reads_each_text_by_its_start(tmp_path):
    """write_text_blocks writes "\\n".join of the blocks' texts and gives each text's start; the
    TextFile reads any text back (UTF-8: "bœuf" is 5 bytes, an empty text 0) and the texts a
    block at a time. Starts by hand: "beef" 0, "bœuf" 5, "" 11, "day night" 12, end 21 + 1."""
    texts = ["beef", "bœuf", "", "day night"]
    blocks, starts = P.write_text_blocks(tmp_path / "t.txt", [texts[:2], [], texts[2:]])
    assert (tmp_path / "t.txt").read_bytes() == "\n".join(texts).encode()
    assert starts.tolist() == [0, 5, 11, 12, 22]
    assert blocks == [(0, 2, 0, 10), (2, 2, 11, 10)]        # the empty block writes nothing
    assert P._write_texts(tmp_path / "u.txt", texts, block=2) == blocks
    tf = P.TextFile(tmp_path / "t.txt", starts)
    assert len(tf) == 4 and [tf[i] for i in (3, 1, 2, 0)] == ["day night", "bœuf", "", "beef"]
    assert [(a, b) for a, b in tf.blocks(3)] == [(0, texts[:3]), (3, texts[3:])]
    tf.close()
    with pytest.raises(ValueError, match="newline"):
        P.write_text_blocks(tmp_path / "v.txt", [["a\nb"]])
    empty_blocks, empty_starts = P.write_text_blocks(tmp_path / "w.txt", [])
    assert empty_blocks == [] and len(P.TextFile(tmp_path / "w.txt", empty_starts)) == 0
    # write_text_file: the same text file and blocks, the starts in a bundle (written by block),
    # read by the TextFile through windows of it: the same texts by index, by many and by block
    assert P.write_text_file(tmp_path / "x.txt", [texts[:2], [], texts[2:]], tmp_path / "s.arrays", 4) == blocks
    assert (tmp_path / "x.txt").read_bytes() == (tmp_path / "t.txt").read_bytes()
    with open_bundle(tmp_path / "s.arrays") as z:
        assert z["starts"].tolist() == [0, 5, 11, 12, 22]
    tf = P.TextFile(tmp_path / "x.txt", tmp_path / "s.arrays")
    assert len(tf) == 4 and [tf[i] for i in (3, 1, 2, 0)] == ["day night", "bœuf", "", "beef"]
    assert tf.many(np.array([3, 1, 3, 0, 2])) == ["day night", "bœuf", "day night", "beef", ""]
    assert tf.many(np.zeros(0, np.int64)) == []
    assert [(a, b) for a, b in tf.blocks(3)] == [(0, texts[:3]), (3, texts[3:])]
    tf.close()
    with pytest.raises(ValueError, match="5 rows in its blocks, 4 declared"):
        P.write_text_file(tmp_path / "y.txt", [texts], tmp_path / "s2.arrays", 3)


def test_size_cuts_as_tasks_are_size_cuts_parts(tmp_path):
    """The stage's size cuts (_size_cuts_job: a task per apply file and pass, in one process
    here) give size_cuts_parts' floats and counts over the same files' (score, not HIDDEN)."""
    from pivot.pipeline.engine import Engine
    from pivot.pipeline.wellformed import HIDDEN

    rng = np.random.default_rng(4)
    paths, pieces = [], []
    for k, n in enumerate((0, 700, 1, 2300)):
        scores = rng.choice(np.concatenate([rng.normal(3.0, 1.0, 9), [-2.0, 1e-300]]), n)
        form = np.where(rng.random(n) < 0.2, HIDDEN, 0).astype(np.uint8)
        paths.append(tmp_path / f"x-{k}.arrays")
        save_bundle(paths[-1], ppdb2=scores, form=form)
        pieces.append((scores, (form & HIDDEN) == 0))
    got = Engine(workers=1).run(P._size_cuts_job(paths))[0]
    want = P.size_cuts_parts(lambda: iter(pieces))
    assert got == want
    whole = P.size_cuts(np.concatenate([s for s, _ in pieces]), np.concatenate([v for _, v in pieces]))
    assert {k: v.hex() for k, v in got[0].items()} == {k: float(v).hex() for k, v in whole.items()}


def test_survey_and_lists_tasks_by_hand(tmp_path):
    """survey_range and list_rows_range over two pivot parts, reduced by _survey_job.

    Phrases 0..4 in slots 0..4 with synsets 0: (5, 7), 1: (7,), 2: none, 3: (5, 9), 4: (7,);
    held out: slots 3 and 4. Pairs (part 0: rows 0-2, part 1: rows 3-6) and forms:
      row 0 (0, 1) visible, share 7: training synonyms -> query 0
      row 1 (0, 2) visible; row 2 (1, 0) HIDDEN (edge punctuation), share 7
      row 3 (1, 4) visible, share 7, 4 held but 1 not: a candidate on neither relation side,
            a training-side synonym pair for the lists (their side is e1's) -> query 1
      row 4 (3, 4) visible, both held, no shared synset: a held-out candidate
      row 5 (4, 3) visible, both held; row 6 (4, 1) visible, share 7, 4 held: held-out query 4
    Form counts: EDGE_PUNCT once, HIDDEN once. Candidates (both have synsets): rows 0, 2, 3,
    4, 5, 6 = 6; held-out side rows 4, 5; training side rows 0, 2 (limit 1: the smaller of the
    two pair hashes). Lists: queries 0 and 1, their visible rows 0, 1, 3 (rows 0 and 3
    synonyms); held-out query 4's rows 5, 6 (row 6 a synonym)."""
    from pivot.hashes import unit_hash
    from pivot.pipeline import wellformed
    from pivot.pipeline.engine import Engine

    texts = ["beef", "meat", "day", "boeuf", "flesh"]
    _, starts = P.write_text_blocks(tmp_path / "t.txt", [texts])
    save_bundle(tmp_path / "starts.arrays", starts=starts)
    lex = P.Lexical.from_synsets([(5, 7), (7,), (), (5, 9), (7,)], np.array([0, 0, 0, 1, 1], bool), np.arange(5))
    lex.save(tmp_path / "lex.arrays")
    e1 = np.array([0, 0, 1, 1, 3, 4, 4], np.int32)
    e2 = np.array([1, 2, 0, 4, 4, 3, 1], np.int32)
    form = np.array([0, 0, wellformed.EDGE_PUNCT, 0, 0, 0, 0], np.uint8)
    parts, labels = _pivot_parts(tmp_path, e1, e2, form, ((0, 3), (3, 7)))
    table = P.PairTable.read(parts)
    survey, listed = Engine(workers=1).run(P._survey_job(table, labels, tmp_path / "lex.arrays", tmp_path / "t.txt",
                                                         tmp_path / "starts.arrays", 11, 1))[0]
    assert survey["counts"] == {name: int(flag == wellformed.EDGE_PUNCT) for flag, name in wellformed.NAMES.items()}
    assert survey["hidden"] == 1 and survey["n_candidates"] == 6
    assert survey["test_rows"].tolist() == [4, 5]
    h0, h2 = unit_hash("beef\tmeat", 11), unit_hash("meat\tbeef", 11)
    assert survey["train_rows"].tolist() == [0 if h0 <= h2 else 2]
    assert listed["train"][0].tolist() == [0, 1, 3] and listed["train"][1].tolist() == [True, False, True]
    assert listed["held"][0].tolist() == [5, 6] and listed["held"][1].tolist() == [False, True]
    # the phrase ids and pivots of the parts (ids_file per part, _ids_job), their scratch files gone
    assert Engine(workers=1).run(P._ids_job(table, 6, tmp_path, tmp_path / "ids.arrays"))[0] == 5
    with open_bundle(tmp_path / "ids.arrays") as z:
        assert z["used"].tolist() == [0, 1, 2, 3, 4] and z["f_used"].tolist() == [0]
        assert z["slot"].tolist() == [0, 1, 2, 3, 4, -1] and z["slot"].dtype == np.int32
    assert not list(tmp_path.glob(".ids-*"))


def _survey_fixture(tmp_path):
    """Two pivot parts of nine pairs over phrases 0..4 (slots 0..4, texts beef, meat, day, boeuf,
    flesh), synsets 0: (5, 7), 1: (7,), 2: none, 3: (5, 9), 4: (7,); held out: slots 3 and 4.
    Rows (part 0: 0-6, part 1: 7-8):
      0 (0, 1) share 7, 1 (0, 2), 2 (1, 0) HIDDEN, 3 (1, 4) share 7,
      4 (3, 0) share 5, 5 (3, 4), 6 (4, 0) share 7 | 7 (4, 1) share 7, 8 (4, 3).
    Candidates (both with synsets): every row but 1 (8). Relation sides: training (neither
    held) rows 0, 2; test (both held) rows 5, 8, one in each part. Within-list queries (e1 of a
    visible synonym pair, its side e1's): training 0 (row 0), 1 (row 3); held-out 3 (row 4)
    and 4 (rows 6 and 7: in both parts)."""
    from pivot.pipeline import wellformed

    texts = ["beef", "meat", "day", "boeuf", "flesh"]
    P.write_text_file(tmp_path / "t.txt", [texts], tmp_path / "starts.arrays", len(texts))
    lex = P.Lexical.from_synsets([(5, 7), (7,), (), (5, 9), (7,)], np.array([0, 0, 0, 1, 1], bool),
                                 np.arange(5, dtype=np.int32))
    lex.save(tmp_path / "lex.arrays")
    e1 = np.array([0, 0, 1, 1, 3, 3, 4, 4, 4], np.int32)
    e2 = np.array([1, 2, 0, 4, 0, 4, 0, 1, 3], np.int32)
    form = np.where(np.arange(9) == 2, wellformed.EDGE_PUNCT, 0).astype(np.uint8)
    parts, labels = _pivot_parts(tmp_path, e1, e2, form, ((0, 7), (7, 9)))
    return P.PairTable.read(parts), labels


def _pivot_parts(tmp_path, e1, e2, form, ranges):
    """Pivot parts (part-J.arrays: the pairs of rows lo..hi, p = 0.5 in one model, one pivot) and
    their label files (form-J.arrays: the forms, no reverse rows), one per (lo, hi) of ranges."""
    parts, labels = [], []
    for j, (lo, hi) in enumerate(ranges):
        parts.append(tmp_path / f"part-{j}.arrays")
        labels.append(tmp_path / f"form-{j}.arrays")
        save_bundle(parts[-1], e1=e1[lo:hi], e2=e2[lo:hi], p=np.full((hi - lo, 1), 0.5),
                    n_pivots=np.ones(hi - lo, np.int32), pivots=np.zeros((hi - lo, 3), np.int32))
        save_bundle(labels[-1], form=form[lo:hi], rev=np.full(hi - lo, -1, np.int64))
    return parts, labels


def test_survey_caps_the_held_out_samples_by_hash(tmp_path):
    """The survey's held-out samples, capped by a seeded hash (_survey_fixture; seed 11). Pair
    hashes: "boeuf\tflesh" (row 5) 0.7311, "flesh\tboeuf" (row 8) 0.2440; "beef\tmeat" (row 0)
    0.8780, "meat\tbeef" (row 2) 0.9942; query texts "boeuf" (3) 0.0209, "flesh" (4) 0.8147.
    Uncapped (limits above the counts): test rows 5, 8 and held queries 3, 4, every one (query
    4 once, though both parts hold its list), held lists rows 4-8 (synonyms 4, 6, 7). Capped at
    one: test row 8, training row 0, held query 3 (its rows 4, 5; row 4 a synonym); training
    queries capped at one: query 0 (rows 0, 1). The training lists' rows: query 0's 2 (rows 0,
    1), query 1's 1 (row 3; row 2 hidden): capped at 3 rows both lists, at 2 query 0's, at 1
    none (a list is kept whole or not at all, the smallest slots first)."""
    from pivot.hashes import unit_hash
    from pivot.pipeline.engine import Engine

    assert [round(unit_hash(t, 11), 4) for t in ("boeuf\tflesh", "flesh\tboeuf", "boeuf", "flesh")] == \
        [0.7311, 0.244, 0.0209, 0.8147]
    table, labels = _survey_fixture(tmp_path)
    args = (table, labels, tmp_path / "lex.arrays", tmp_path / "t.txt", tmp_path / "starts.arrays", 11)
    survey, listed = Engine(workers=1).run(P._survey_job(*args, 10, 10, 10))[0]
    assert survey["n_candidates"] == 8 and survey["hidden"] == 1
    assert survey["test_rows"].tolist() == [5, 8] and survey["train_rows"].tolist() == [0, 2]
    assert listed["train"][0].tolist() == [0, 1, 3] and listed["train"][1].tolist() == [True, False, True]
    assert listed["held"][0].tolist() == [4, 5, 6, 7, 8]
    assert listed["held"][1].tolist() == [True, False, True, True, False]
    for row_limit, want in ((3, [0, 1, 3]), (2, [0, 1]), (1, [])):
        got = Engine(workers=1).run(P._survey_job(*args, 10, 10, 10, row_limit))[0][1]["train"]
        assert got[0].tolist() == want and got[1].tolist() == [True, False, True][:len(want)]
    survey, listed = Engine(workers=1).run(P._survey_job(*args, 1, 1, 1))[0]
    assert survey["n_candidates"] == 8 and survey["hidden"] == 1
    assert survey["test_rows"].tolist() == [8] and survey["train_rows"].tolist() == [0]
    assert listed["train"][0].tolist() == [0, 1, 3]
    assert listed["held"][0].tolist() == [4, 5] and listed["held"][1].tolist() == [True, False]
    # the fold by hand, the parts' pieces in either order: the same selection
    lows = table.bounds[:-1].tolist()
    pieces = [P.survey_range(path, label, tmp_path / "lex.arrays", tmp_path / "t.txt", tmp_path / "starts.arrays",
                             lo, 11, 1, 1, 1, 1) for path, label, lo in zip(table.part_paths, labels, lows)]
    assert pieces[0]["queries"].tolist() == [0] and pieces[1]["queries"].tolist() == []
    assert pieces[0]["query_rows"].tolist() == [2] and pieces[1]["query_rows"].tolist() == []
    assert pieces[0]["held_queries"].tolist() == [3] and pieces[1]["held_queries"].tolist() == [4]
    assert pieces[0]["test_rows"].tolist() == [5] and pieces[1]["test_rows"].tolist() == [8]
    for order in (pieces, pieces[::-1]):
        fold = P.SelectionFold(1, 1, 1, 1)
        for piece in order:
            fold.add(piece)
        got, queries, held = fold.finish()
        assert got["test_rows"].tolist() == [8] and got["train_rows"].tolist() == [0]
        assert queries.tolist() == [0] and held.tolist() == [3] and got["n_candidates"] == 8


def test_selection_fold_sums_a_list_over_its_parts():
    """SelectionFold's training queries, by hand: piece A holds queries 2 and 5 (lists of 3 and 4
    rows there), piece B 5 and 7 (1 and 6 rows). At most 2 queries: 2 and 5, with 3 and 4 + 1 =
    5 rows, in either order of the pieces (7 is dropped, and 5's rows from B are kept); rows
    capped at 8: both (3 + 5), at 7: query 2 alone, at 2: none."""
    from pivot.pipeline import wellformed

    def piece(queries, rows):
        empty = (np.zeros(0), np.zeros(0, np.int64))
        return {"counts": dict.fromkeys(wellformed.NAMES.values(), 0), "hidden": 0, "n_candidates": 0,
                "queries": np.array(queries, np.int64), "query_rows": np.array(rows, np.int64),
                **{k: v for names in (("train_h", "train_rows"), ("test_h", "test_rows"), ("held_h", "held_queries"))
                   for k, v in zip(names, empty)}}

    a, b = piece([2, 5], [3, 4]), piece([5, 7], [1, 6])
    for row_limit, want in ((8, [2, 5]), (7, [2]), (2, [])):
        for order in ((a, b), (b, a)):
            fold = P.SelectionFold(10, 10, 2, 10, row_limit)
            for p in order:
                fold.add(p)
            assert fold.queries.tolist() == [2, 5] and fold.query_rows.tolist() == [3, 5]
            assert fold.finish()[1].tolist() == want


def test_write_ids_by_windows(tmp_path):
    """write_ids from two parts' ids files (English 1, 4, 5 and 0, 4; pivots 2 and 2, 7), n_e 7
    and n_f 8, by windows of 3 ids (English 0-2, 3-5, 6; foreign 0-2, 3-5, 6-7) and of 100:
    used 0, 1, 4, 5 (4 in both parts, once), slots 0, 1, -1, -1, 2, 3, -1 (int32), pivots 2, 7.
    The pivots' languages by windows of 3 (_language_blocks, f_lang_of: id mod 3): -1 but at
    2 (2) and 7 (1)."""
    paths = [tmp_path / "a.arrays", tmp_path / "b.arrays"]
    save_bundle(paths[0], e=np.array([1, 4, 5], np.int64), f=np.array([2], np.int64))
    save_bundle(paths[1], e=np.array([0, 4], np.int64), f=np.array([2, 7], np.int64))
    for window in (3, 100):
        assert P.write_ids(tmp_path / f"ids-{window}.arrays", 7, 8, paths, window) == 4
        with open_bundle(tmp_path / f"ids-{window}.arrays") as z:
            assert z["used"].tolist() == [0, 1, 4, 5] and z["used"].dtype == np.int64
            assert z["slot"].tolist() == [0, 1, -1, -1, 2, 3, -1] and z["slot"].dtype == np.int32
            assert z["f_used"].tolist() == [2, 7]
    asked = []

    def f_lang_of(ids):
        asked.append(ids.tolist())
        return ids % 3

    got = np.concatenate(list(P._language_blocks(tmp_path / "ids-3.arrays", 8, f_lang_of, window=3)))
    assert got.tolist() == [-1, -1, 2, -1, -1, -1, -1, 1] and got.dtype == np.int16
    assert asked == [[2], [7]]                  # the window 3-5 holds no pivot: nothing asked


def test_write_lexical_by_blocks_is_lexical_save(tmp_path):
    """write_lexical from two phrase-side block files (slots 0-1: synsets (9, 5), (); slots 2-4:
    (9,), (2, 7, 8), (7, 7)) and the slots of an ids file is Lexical.save's file of the same
    synsets member by member: syn_ptr 0, 2, 2, 3, 6, 8; share_synset's keys each block's
    slot * 2^32 + synset, sorted and distinct (slot 0: 5 before 9; slot 4's 7 once)."""
    synsets = [(9, 5), (), (9,), (2, 7, 8), (7, 7)]
    held = np.array([0, 1, 0, 0, 1], bool)
    slot = np.array([-1, 0, 1, 2, -1, 3, 4], np.int32)
    paths = [tmp_path / "b0.arrays", tmp_path / "b1.arrays"]
    for path, (a, b) in zip(paths, ((0, 2), (2, 5))):
        count = np.array([len(x) for x in synsets[a:b]], np.int32)
        save_bundle(path, syn_count=count, syn_ids=np.array([i for x in synsets[a:b] for i in x], np.int64),
                    held=held[a:b])
    save_bundle(tmp_path / "ids.arrays", slot=slot)
    P.write_lexical(tmp_path / "lex.arrays", paths, tmp_path / "ids.arrays")
    P.Lexical.from_synsets(synsets, held, slot).save(tmp_path / "want.arrays")
    with open_bundle(tmp_path / "lex.arrays") as got, open_bundle(tmp_path / "want.arrays") as want:
        assert got.files == want.files == ["syn_ptr", "syn_ids", "held", "slot", "keys"]
        for k in want.files:
            assert got[k].dtype == want[k].dtype and got[k].tolist() == want[k].tolist(), k
        assert got["syn_ptr"].tolist() == [0, 2, 2, 3, 6, 8]
        assert got["keys"].tolist() == [5, 9, 2 << 32 | 9, 3 << 32 | 2, 3 << 32 | 7, 3 << 32 | 8, 4 << 32 | 7]


def test_phrase_rows_by_block(tmp_path):
    """write_phrase_rows asks e_phrases for a block of ids at a time and writes the rows and
    counts of exactly those ids; member_blocks reads them back by block; words_alphabet_of over
    blocks is words_alphabet over the whole."""
    rows = np.array([[0, 1, -1], [2, -1, -1], [1, 3, 4], [4, -1, -1], [0, -1, -1]], np.int32)
    count = np.array([7, 5, 9, 2, 4], np.int64)
    asked = []

    def e_phrases(ids):
        asked.append(ids.tolist())
        return rows[ids], count[ids]

    path = tmp_path / "t.arrays"
    P.write_phrase_rows(path, e_phrases, np.array([0, 2, 3, 4]), block=3)
    # the width from an empty ask, then [0, 2, 3] and [4] for the rows and again for the counts
    assert asked == [[], [0, 2, 3], [4], [0, 2, 3], [4]]
    with open_bundle(path) as z:
        assert z["tokens"].tolist() == [[0, 1, -1], [1, 3, 4], [4, -1, -1], [0, -1, -1]]
        assert z["tokens"].dtype == np.int32
        assert z["counts"].tolist() == [7.0, 9.0, 2.0, 4.0] and z["counts"].dtype == np.float64
    got = list(P.member_blocks(path, "counts", block=3))
    assert [b.tolist() for b in got] == [[7.0, 9.0, 2.0], [4.0]]
    words = ["a", "bc", "d", "ce", "f"]
    # ids 0, 1, 3, 4 in the stored rows: characters a, b, c, e, f and the space
    whole = P.words_alphabet(rows[[0, 2, 3, 4]], words)
    assert P.words_alphabet_of(P.member_blocks(path, "tokens", block=1), words).tolist() == whole.tolist()
    assert "".join(map(chr, whole.tolist())) == " #abcef"


def test_lexical_file_synsets_of(tmp_path):
    """LexicalFile reads the synsets of the slots asked for from Lexical.save's file: slots
    0..3 hold (5, 9), (), (9,), (2, 7, 8); asked for 3, 1, 0, 3 (distinct, ascending), the file
    gives what the Lexical in memory gives."""
    lex = P.Lexical.from_synsets([(5, 9), (), (9,), (2, 7, 8)], [False, True, False, False],
                                 np.array([-1, 0, 1, 2, 3], np.int32))
    lex.save(tmp_path / "lex.arrays")
    got = P.LexicalFile(tmp_path / "lex.arrays").synsets_of(np.array([3, 1, 0, 3]))
    assert got == {0: (5, 9), 1: (), 3: (2, 7, 8)}
    assert got == lex.synsets_of([3, 1, 0, 3])
    assert P.LexicalFile(tmp_path / "lex.arrays").synsets_of(np.zeros(0, np.int64)) == {}
    # the slots of ids 4, 1 and 0, 2 (1 twice) from the file's slot array (-1, 0, 1, 2, 3)
    s1, s2 = P.LexicalFile(tmp_path / "lex.arrays").slots(np.array([4, 1]), np.array([0, 1]))
    assert s1.tolist() == [3, 0] and s2.tolist() == [-1, 0]
    s1, s2 = P.LexicalFile(tmp_path / "lex.arrays").slots(np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert s1.tolist() == [] and s2.tolist() == []


def test_phrase_file_rows_and_pivots_without_lookup(tmp_path):
    """PhraseFile(lookup=False) holds neither row_of nor f_lang; rows_of reads the rows of
    ascending ids from the file, pivot_languages the languages of a block's distinct pivots with
    the pivots numbered among them: f_lang (0, 1, 1, 2) and pivots [[3, 1, -1], [1, -1, -1]] give
    distinct (1, 3), languages (1, 2), numbers [[1, 0, -1], [0, -1, -1]], and the pairs'
    n_pivot_languages column is that of the whole f_lang (2 and 1)."""
    whole = _phrases(["a", "b c", "d"], f_lang=(0, 1, 1, 2))
    whole.row_of = np.array([-1, 0, 1, -1, 2], np.int32)
    whole.save(tmp_path / "ph.arrays")
    f = P.PhraseFile(tmp_path / "ph.arrays", lookup=False)
    assert f.row_of is None and f.f_lang is None
    assert f.rows_of(np.array([1, 2, 4])).tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match="without a row"):
        f.rows_of(np.array([0, 1]))
    pivots = np.array([[3, 1, -1], [1, -1, -1]], np.int32)
    langs, numbers = f.pivot_languages(pivots)
    assert langs.tolist() == [1, 2] and numbers.tolist() == [[1, 0, -1], [0, -1, -1]]
    part = f.gather(np.array([0, 1, 2]))
    part.f_lang = langs
    args = (np.array([[0.5], [0.2]]), np.array([[0.2], [0.5]]), [2, 1])
    e1, e2 = np.array([0, 1]), np.array([1, 2])
    got = P.pair_features(part, e1, e2, *args, numbers, np.zeros(2, np.uint8))
    want = P.pair_features(whole, np.array([1, 2]), np.array([2, 4]), *args, pivots, np.zeros(2, np.uint8))
    names = P.pair_feature_names(["general"])
    assert got[names.index("n_pivot_languages")].tolist() == [2.0, 1.0]
    assert [c.tobytes() for c in got] == [c.tobytes() for c in want]
    # no pivot in the block: no languages, the pivots as they are
    langs, numbers = f.pivot_languages(np.full((2, 3), -1, np.int32))
    assert langs.tolist() == [] and numbers.tolist() == [[-1] * 3] * 2


def test_part_lexical_numbers_the_parts_phrases(tmp_path):
    """part_lexical: the pairs (5, 1), (1, 7), (5, 7) hold ids 1, 5, 7 (slots 0, 2, 3), numbered
    0, 1, 2; their synsets (5, 9), (9,), (2, 7, 8) and sides read for those slots alone; slot 1
    (id 3, synsets ()) is in no pair and not read. ids 1 and 5 share synset 9."""
    full = P.Lexical.from_synsets([(5, 9), (), (9,), (2, 7, 8)], [False, True, True, False],
                                  np.array([-1, 0, -1, 1, -1, 2, -1, 3], np.int32))
    full.save(tmp_path / "lex.arrays")
    lex, s1, s2, slots = P.part_lexical(tmp_path / "lex.arrays", np.array([5, 1, 5]), np.array([1, 7, 7]))
    assert s1.tolist() == [1, 0, 1] and s2.tolist() == [0, 2, 2] and slots.tolist() == [0, 2, 3]
    assert lex.syn_ptr.tolist() == [0, 2, 3, 6] and lex.syn_ids.tolist() == [5, 9, 9, 2, 7, 8]
    assert lex.held.tolist() == [False, True, False] and lex.has.tolist() == [True, True, True]
    assert lex.share_synset(s1, s2).tolist() == [True, False, False]
    assert lex.share_synset(s1, s2).tolist() == full.share_synset(slots[s1], slots[s2]).tolist()


def test_rows_features_from_the_file_are_the_whole_arrays(tmp_path):
    """_rows_features with a PhraseFile(lookup=False) (the fits' phrases: the rows' phrases and
    pivots' languages read alone) gives the bytes of the whole Phrases in memory, for rows in any
    order and by blocks (_rows_map of the identity); pivots of rows 1 and 4 given by hand: (1, 0)
    (languages 1 and 0: two) and (2, -1) (one); the rest none."""
    cuts = [(0, 3), (3, 6)]
    e1, e2, p = _table()
    pivots = np.full((6, 3), -1, np.int32)
    pivots[1, :2], pivots[4, :1] = (1, 0), (2,)
    parts = []
    for j, (lo, hi) in enumerate(cuts):
        parts.append(tmp_path / f"rows-{j}.arrays")
        save_bundle(parts[-1], e1=e1[lo:hi], e2=e2[lo:hi], p=p[lo:hi], n_pivots=np.ones(hi - lo, np.int32),
                    pivots=pivots[lo:hi])
    table = P.PairTable.read(parts)
    labels = _label_parts(tmp_path, table, cuts, np.array([0, 1, 0, 8, 0, 0], np.uint8))
    whole = _phrases(["cell", "cells", "cellular", "kidney"], f_lang=(0, 1, 1))
    whole.save(tmp_path / "ph.arrays")
    f = P.PhraseFile(tmp_path / "ph.arrays", lookup=False)
    rows = np.array([4, 1, 5, 0, 2])
    want = P._rows_features(table, whole, labels, rows)
    got = P._rows_features(table, f, labels, rows)
    assert got.tobytes() == want.tobytes()
    # label files without the reverses' rows: the reverses found by PairTable.find, the same bytes
    bare = []
    for j, path in enumerate(labels):
        with open_bundle(path) as z:
            bare.append(tmp_path / f"bare-{j}.arrays")
            save_bundle(bare[-1], form=z["form"])
    assert P._rows_features(table, f, bare, rows).tobytes() == want.tobytes()
    assert P._holds(labels[0], "rev") and not P._holds(bare[0], "rev")
    col = P.pair_feature_names(["general"]).index("n_pivot_languages")
    assert got[:, col].tolist() == [1.0, 2.0, 0.0, 0.0, 0.0]
    by_blocks = P._rows_map(lambda x: x, table, f, labels, rows, block=2, empty=np.zeros((0, want.shape[1])))
    assert by_blocks.tobytes() == want.tobytes()
    # _rows_columns: columns n_pivot_languages, logp[general] and 0 of the rows by blocks of 2
    # into one array, the whole matrix's columns (n_pivot_languages 1, 2, 0, 0, 0 as above)
    cols = [col, P.pair_feature_names(["general"]).index("logp[general]"), 0]
    got = P._rows_columns(table, f, labels, rows, cols, block=2)
    assert got.shape == (5, 3) and got.flags.f_contiguous == want[:, cols].flags.f_contiguous == True
    assert got.tobytes(order="A") == want[:, cols].tobytes(order="A")
    assert got[:, 0].tolist() == [1.0, 2.0, 0.0, 0.0, 0.0]
    assert P._rows_columns(table, f, labels, np.zeros(0, np.int64), cols).shape == (0, 3)
