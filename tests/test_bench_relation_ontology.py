"""The ontology labels of bench/bench_relation_ontology.py on a tiny OBO file written here, each
expected value worked out by hand in the comments."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

_PATH = Path(__file__).resolve().parent.parent / "bench" / "bench_relation_ontology.py"
_spec = importlib.util.spec_from_file_location("bench_relation_ontology", _PATH)
ro = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ro)

# X:1 organ <- X:2 heart ("Cardiac organ", EXACT) <- X:4 left heart <- X:6 left atrium <- X:7 atrial wall
#           <- X:3 lung
# X:5 is obsolete (its name and its is_a link are dropped); "Heart" is also a RELATED synonym of
# X:3 (not EXACT: no name); a [Typedef] stanza is skipped.
OBO = """format-version: 1.2

[Term]
id: X:1
name: organ

[Term]
id: X:2
name: heart
synonym: "Cardiac organ" EXACT []
is_a: X:1 ! organ

[Term]
id: X:3
name: lung
synonym: "heart" RELATED []
is_a: X:1

[Term]
id: X:4
name: left heart
is_a: X:2

[Term]
id: X:5
name: old heart
is_a: X:2
is_obsolete: true

[Term]
id: X:6
name: left atrium
is_a: X:4

[Term]
id: X:7
name: atrial wall
is_a: X:6

[Typedef]
id: part_of
name: part of
"""


@pytest.fixture()
def concepts(tmp_path):
    path = tmp_path / "x.obo"
    path.write_text(OBO, encoding="utf-8")
    return ro.Concepts.read({"X": path}, norm_many=lambda texts: [t.lower() for t in texts])


def test_read_names_and_parents(concepts):
    assert concepts.parents == {"X:1": (), "X:2": ("X:1",), "X:3": ("X:1",), "X:4": ("X:2",), "X:6": ("X:4",),
                                "X:7": ("X:6",)}
    assert concepts.named == {"organ": ("X:1",), "heart": ("X:2",), "cardiac organ": ("X:2",), "lung": ("X:3",),
                              "left heart": ("X:4",), "left atrium": ("X:6",), "atrial wall": ("X:7",)}


def test_labels_follow_wordnet_precedence(concepts):
    E, F, R, X, _, U = range(6)
    c1 = [("X:2",), ("X:4",), ("X:1",), ("X:2",), ("X:4",), ("X:7",), ("X:7",), ("X:2", "X:3")]
    c2 = [("X:2",), ("X:1",), ("X:4",), ("X:3",), ("X:3",), ("X:2",), ("X:1",), ("X:1",)]
    # heart/heart: one concept; left heart -> organ: 2 is_a links up; organ -> left heart: the
    # converse; heart/lung: both under organ; left heart/lung: left heart's parent is heart, not
    # organ (and 2 links up is no sibling); atrial wall -> heart: 3 links (X:6, X:4, X:2);
    # atrial wall -> organ: 4 links, beyond HYPERNYM_LEVELS; {heart, lung} -> organ: forward
    # (entailment goes before the shared parent)
    got = ro.pair_labels(concepts, c1, c2, 3).tolist()
    assert got == [E, F, R, X, U, F, U, F]
    # with 4 levels atrial wall reaches organ
    assert ro.pair_labels(concepts, [("X:7",)], [("X:1",)], 4).tolist() == [F]


def test_phrase_concepts_exact_and_lemma(concepts):
    def lemmas(token):
        return frozenset({token, token[:-1]}) if token.endswith("s") else frozenset({token})
    texts = ["hearts", "left hearts", "organ", "kidney"]
    assert ro.phrase_concepts(concepts, texts) == [(), (), ("X:1",), ()]
    assert ro.phrase_concepts(concepts, texts, lemmas) == [("X:2",), ("X:4",), ("X:1",), ()]


def test_label_pairs_sides(concepts):
    texts = ["heart", "cardiac organ", "organ", "lung", "left heart", "kidney"]
    # slot 3 (lung) is a WordNet lemma on the training side, slot 4 (left heart) one on the held-out
    # side; slots 0 and 1 are WordNet lemmas too (so the pair (0, 1) stays WordNet's)
    wn_has = np.array([1, 1, 0, 1, 1, 0], bool)
    wn_held = np.array([0, 0, 0, 0, 1, 0], bool)
    s1 = np.array([0, 1, 2, 4, 2, 0, 5])
    s2 = np.array([1, 2, 3, 2, 4, 2, 0])
    # q = 0: no concept held out. Rows: (0, 1) both WordNet lemmas -> overlap; (5, 0) kidney names
    # nothing -> no row. Kept (1, 2) F, (2, 3) R, (4, 2) F, (2, 4) R, (0, 2) F; training side: those
    # without a phrase on WordNet's held-out side: (1, 2), (2, 3), (0, 2); test: none
    lab = ro.label_pairs(concepts, {}, texts, s1, s2, wn_has, wn_held, seed=0, q=0.0)
    assert lab["rows"].tolist() == [1, 2, 3, 4, 5]
    assert lab["y"].tolist() == [1, 2, 1, 2, 1]
    assert lab["train"].tolist() == [True, True, False, False, True]
    assert not lab["test"].any()
    assert lab["overlap"].tolist() == [0] and lab["y_overlap"].tolist() == [0]
    # q = 1: every concept held out; a test pair has no phrase on WordNet's training side (slots
    # 0, 1 and 3): (1, 2), (2, 3) and (0, 2) are on neither side, (4, 2) and (2, 4) are test
    lab = ro.label_pairs(concepts, {}, texts, s1, s2, wn_has, wn_held, seed=0, q=1.0)
    assert lab["test"].tolist() == [False, False, True, True, False]
    assert not lab["train"].any()
    assert lab["info"]["neither_side"] == 3


def test_macro_f1_fast_matches_report():
    from pivot.pipeline.ppdb2 import classification_report

    y = np.array([0, 0, 1, 1, 2, 5, 5, 5])
    p = np.array([0, 1, 1, 1, 5, 5, 5, 0])
    # class 0: P 1/2 R 1/2 F 1/2; class 1: P 2/3 R 1 F 4/5; class 2: F 0; class 5: P 2/3 R 2/3 F 2/3
    expected = (0.5 + 0.8 + 0.0 + 2 / 3) / 4
    assert ro.macro_f1_fast(y, p) == pytest.approx(expected, abs=1e-12)
    assert classification_report(y, p)["macro_f1"] == round(expected, 4)


def test_paired_bootstrap_identical_and_better():
    y = np.array([0, 1, 2, 3, 0, 1, 2, 3])
    a = np.array([0, 1, 2, 3, 0, 1, 2, 3])
    same = ro.paired_bootstrap(y, a, a, n=50, seed=1)
    assert same["observed"] == 0.0 and same["ci95"] == [0.0, 0.0] and same["share_le_0"] == 1.0
    # b always wrong on class 3 where a is right: a is never worse on a resample
    b = np.array([0, 1, 2, 0, 0, 1, 2, 0])
    worse = ro.paired_bootstrap(y, a, b, n=50, seed=1)
    assert worse["observed"] < 0 and worse["ci95"][1] <= 0.0 and worse["share_le_0"] == 1.0
