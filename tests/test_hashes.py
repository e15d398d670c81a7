"""pivot.hashes: the one seeded hash behind the gold split, the ontology split and the resample.

Values written out once with hashlib: blake2b(b"0\\ncure\\ttreat", digest_size=8) read big-endian
is 6637423148435026116 (/ 2^64 = 0.35981543); blake2b(b"7\\nGO:0008150") is
16784452979184774106 (0.90988702).
"""
import pytest

from pivot.eval.gold import tuning_test_split
from pivot.eval.ontology import concept_split
from pivot.hashes import hash64, unit_hash


def test_values_by_hand():
    assert hash64("cure\ttreat", 0) == 6637423148435026116
    assert hash64("GO:0008150", 7) == 16784452979184774106
    assert unit_hash("cure\ttreat", 0) == pytest.approx(0.3598154298619416, abs=1e-16)
    assert unit_hash("GO:0008150", 7) == pytest.approx(0.9098870192006464, abs=1e-16)


def test_the_callers_decide_by_it():
    # The pair (treat, cure) has the key "cure\ttreat" and h = 0.3598 at seed 0: a tuning
    # share of 0.36 (n_tune 36 of 100 distinct pairs) takes it, 0.35 does not.
    pairs = [("treat", "cure", 1)] + [(f"w{i}", f"v{i}", 0) for i in range(99)]
    assert ("treat", "cure", 1) in tuning_test_split(pairs, n_tune=36, seed=0)[0]
    assert ("treat", "cure", 1) in tuning_test_split(pairs, n_tune=35, seed=0)[1]
    # GO:0008150 at seed 7: h = 0.9099 >= 0.6 + 0.2, so test.
    assert concept_split("GO:0008150", seed=7) == "test"
