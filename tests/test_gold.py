"""Gold pair readers and the deterministic tuning/test split."""
import random

import pytest

from pivot.errors import InputError
from pivot.eval.gold import (assert_disjoint, binarize, pair_key, read_pairs, read_ppdb_human,
                        read_scored_pairs, tuning_test_split)


def test_read_scored_pairs_with_and_without_header(tmp_path):
    f = tmp_path / "simlex.txt"
    f.write_text("word1\tword2\tPOS\tSimLex999\nold\tnew\t1.58\textra\n\nsmart\tintelligent\t9.2\n")
    assert read_scored_pairs(f) == [("old", "new", 1.58), ("smart", "intelligent", 9.2)]
    g = tmp_path / "bio.txt"
    g.write_text("therapy\ttreatment\t9.32\n")
    assert read_scored_pairs(g) == [("therapy", "treatment", 9.32)]


def test_read_scored_pairs_errors(tmp_path):
    f = tmp_path / "bad.txt"
    f.write_text("a\tb\t1.0\nc\td\tx\n")        # non-numeric score after the first line
    with pytest.raises(InputError, match=r"bad.txt:2: score 'x'"):
        read_scored_pairs(f)
    f.write_text("a\tb\t1.0\nc d 2.0\n")
    with pytest.raises(InputError, match=r"bad.txt:2: expected"):
        read_scored_pairs(f)
    f.write_bytes(b"a\tb\t1.0\n\xff\tb\t1\n")
    with pytest.raises(InputError, match=r"bad.txt:2: not UTF-8"):
        read_scored_pairs(f)


def test_read_ppdb_human_and_pairs(tmp_path):
    f = tmp_path / "h.tsv"
    f.write_text("2.2\t[NN]\teditor\thead\t1.0,1.0,2.0,3.0,4.0\n"
                 "4.6\t[S]\tit 's serious\tthis is serious\t4.0,4.0,5.0,5.0,5.0\n")
    assert read_ppdb_human(f) == [("editor", "head", 2.2), ("it 's serious", "this is serious", 4.6)]
    f.write_text("2.2\t[NN]\teditor\thead\n")
    with pytest.raises(InputError, match=":1: expected mean"):
        read_ppdb_human(f)
    p = tmp_path / "syn.txt"
    p.write_text("mediaeval medieval\nmuslims muslim\n")
    assert read_pairs(p) == [("mediaeval", "medieval", None), ("muslims", "muslim", None)]
    p.write_text("a b\na b c\n")
    with pytest.raises(InputError, match=":2: expected 'w1 w2', found 3"):
        read_pairs(p)


def test_binarize():
    pairs = [("a", "b", 7.0), ("c", "d", 6.99), ("e", "f", None)]
    assert binarize(pairs, 7.0) == [("a", "b", 1), ("c", "d", 0), ("e", "f", 1)]


def _pairs(n):
    return [(f"w{i}", f"v{i}", float(i % 10)) for i in range(n)]


def test_split_is_deterministic_and_order_free():
    pairs = _pairs(5000)
    tune, test = tuning_test_split(pairs, n_tune=1000, seed=3)
    assert 880 <= len(tune) <= 1120 and len(tune) + len(test) == 5000
    shuffled = pairs[:]
    random.Random(1).shuffle(shuffled)
    tune2, test2 = tuning_test_split(shuffled, n_tune=1000, seed=3)
    assert set(tune2) == set(tune) and set(test2) == set(test)
    # a subset of the file keeps each pair's side (the hash depends on the pair, not the file)
    tune3, _ = tuning_test_split(pairs[:2500] + pairs[2500:], n_tune=1000, seed=3)
    assert tune3 == tune
    other, _ = tuning_test_split(pairs, n_tune=1000, seed=4)
    assert set(other) != set(tune)
    assert tuning_test_split(pairs[:10], n_tune=1000)[0] == pairs[:10]


def test_split_keeps_repeats_and_reversals_together():
    pairs = [("Cell", "unit", 1.0), ("unit", "cell", 2.0), ("cell  ", "unit", 3.0)] + _pairs(300)
    tune, test = tuning_test_split(pairs, n_tune=100, seed=0)
    assert_disjoint(tune, test)
    side = [p in tune for p in pairs[:3]]
    assert side in ([True] * 3, [False] * 3)
    assert pair_key("Cell", "unit") == pair_key("unit", "cell") == "cell\tunit"


def test_assert_disjoint_names_the_overlap():
    with pytest.raises(ValueError, match=r"1 pair\(s\) in both .*cell / unit"):
        assert_disjoint([("cell", "unit", 1)], [("Unit", "Cell", 0), ("a", "b", 1)])
    assert_disjoint([("a", "b", 1)], [("a", "c", 1)])
