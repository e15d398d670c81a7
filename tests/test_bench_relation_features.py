"""The measured relation feature groups of bench/bench_relation_features.py, on tiny inputs whose
counts and ratios are worked out by hand in the comments."""
import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import sparse

_PATH = Path(__file__).resolve().parent.parent / "bench" / "bench_relation_features.py"
_spec = importlib.util.spec_from_file_location("bench_relation_features", _PATH)
rf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rf)

TOKENS = ["dogs", "and", "other", "animals", "cats", "such", "as", ",", "pets", "small"]
TOKEN_OF = {t: i for i, t in enumerate(TOKENS)}
# phrase ids: 0 dogs, 1 animals, 2 cats, 3 pets, 4 small cats
PHRASES = [["dogs"], ["animals"], ["cats"], ["pets"], ["small", "cats"]]
SENTENCES = ["animals such as dogs and cats", "dogs and other pets", "small cats , dogs", "dogs and small", "cats"]


def _rows():
    rows = np.full((len(PHRASES), 2), -1, np.int64)
    for i, p in enumerate(PHRASES):
        rows[i, :len(p)] = [TOKEN_OF[t] for t in p]
    return rows


def _pieces(cuts):
    """(ids, sentence) pieces of SENTENCES, cut before the sentence indices in ``cuts``."""
    bounds = [0, *cuts, len(SENTENCES)]
    out = []
    for a, b in zip(bounds, bounds[1:]):
        ids, sent = [], []
        for s in range(a, b):
            words = SENTENCES[s].split()
            ids += [TOKEN_OF[w] for w in words]
            sent += [s] * len(words)
        out.append((np.array(ids, np.int64), np.array(sent, np.int64)))
    return out


def test_ngrams_are_stored_phrases_within_a_sentence():
    index = rf.PhraseIndex(_rows())
    ids, sent = _pieces([])[0]
    grams = index.ngrams(ids, sent)
    # sentence 2 starts at token 10: "small cats , dogs"; "small" alone is a prefix, no phrase
    assert grams[10:14].tolist() == [[-1, 4], [2, -1], [-1, -1], [0, -1]]
    # tokens 14-16 "dogs and small" (sentence 3), 17 "cats" (sentence 4): "small cats" crosses them
    assert grams[14:18].tolist() == [[0, -1], [-1, -1], [-1, -1], [2, -1]]


def test_pattern_counts_by_hand():
    index = rf.PhraseIndex(_rows())
    table = rf.PatternCounts.count(_pieces([]), index, TOKEN_OF)
    # "animals such as dogs": (animals, dogs) hypernym first; "dogs and cats": coordination;
    # "dogs and other pets": (dogs, pets) hyponym first ("dogs and other" is not coordination:
    # "other" and "other pets" are no phrases); "small cats , dogs": (cats, dogs) and
    # (small cats, dogs); "dogs and small" | "cats": (dogs, small cats) would cross a sentence
    got = {(int(k >> 32), int(k & 0xFFFFFFFF)): c for k, c in zip(table.keys.tolist(), table.counts.tolist())}
    assert got == {(0, 2): [0, 0, 1], (0, 3): [1, 0, 0], (1, 0): [0, 1, 0], (2, 0): [0, 0, 1], (4, 0): [0, 0, 1]}
    hypo, hyper, coord = rf.pattern_features(table, np.array([0, 0, 3, 2]), np.array([1, 2, 0, 3]))
    # (dogs, animals): dogs is a kind of animals once; (dogs, cats): coordinated both ways, 2;
    # (pets, dogs): dogs is a kind of pets, so e2 is the kind; (cats, pets): nothing
    # log1p of the counts by numpy's own log1p: its AVX-512 loop and the C library's round
    # log(3) one unit in the last place apart (1.0986122886681098 against ...096)
    np.testing.assert_array_equal(hypo, np.log1p([1, 0, 0, 0]))
    np.testing.assert_array_equal(hyper, np.log1p([0, 0, 1, 0]))
    np.testing.assert_array_equal(coord, np.log1p([0, 2, 0, 0]))


@pytest.mark.parametrize("cuts", [[1], [2, 4], [1, 2, 3, 4]])
def test_pattern_counts_the_same_however_the_text_is_cut(cuts):
    index = rf.PhraseIndex(_rows())
    whole = rf.PatternCounts.count(_pieces([]), index, TOKEN_OF)
    cut = rf.PatternCounts.count(_pieces(cuts), index, TOKEN_OF)
    assert cut.keys.tolist() == whole.keys.tolist() and cut.counts.tolist() == whole.counts.tolist()


def test_inclusion_by_hand():
    u = sparse.csr_matrix(np.array([[1.0, 2.0, 0.0], [0.0, 0.0, 0.0]]))
    v = sparse.csr_matrix(np.array([[0.0, 3.0, 1.0], [1.0, 0.0, 0.0]]))
    got = rf.inclusion_features(u, v)
    # row 0: |u| = 3, |v| = 4; u's mass on v's contexts 2, v's on u's 3; sum of minima 2;
    # 2 contexts each
    assert got[0] == pytest.approx([2 / 3, 3 / 4, 2 / 3, 2 / 4, 2 / 3 - 3 / 4, 2 / 3 - 2 / 4, 0.0], abs=1e-15)
    # row 1: u empty: every ratio 0; contexts 0 and 1
    assert got[1].tolist() == [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -math.log(2)]


def test_translation_features_by_hand():
    p_fe = sparse.csr_matrix(np.array([[0.5, 0.25, 0.25, 0.0], [0.0, 0.5, 0.0, 0.5], [0.0, 0.0, 0.0, 0.0]]))
    f_lang = np.array([0, 0, 1, 1])
    got = rf.translation_features(p_fe, f_lang, np.array([0, 2]), np.array([1, 0]))
    # pair (0, 1), language 0: e1 {f0 .5, f1 .25}, e2 {f1 .5}: e1's mass on e2's 0.25 / 0.75,
    # e2's on e1's 0.5 / 0.5, Jaccard 1 / 2; language 1: e1 {f2}, e2 {f3}: nothing shared
    assert got[0] == pytest.approx([1 / 3, 1.0, 0.5, math.log(3), math.log(2),
                                    0.0, 0.0, 0.0, math.log(2), math.log(2)], abs=1e-15)
    # pair (2, 0): phrase 2 has no translation
    assert got[1] == pytest.approx([0.0, 0.0, 0.0, 0.0, math.log(3), 0.0, 0.0, 0.0, 0.0, math.log(2)], abs=1e-15)
