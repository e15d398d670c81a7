"""PPDB labels: the GENIA-pos reader, a deterministic cached tagger, the constituent rules and the
label classes (on synthetic data). The export writes the labels the build stored
(tests/test_export.py, where nlpaug reads an export)."""
import hashlib
import json
import os
import subprocess
import sys

import pytest

nltk = pytest.importorskip("nltk", reason="the labels extra is not installed")

from pivot.errors import InputError  # noqa: E402
from pivot.store import labels  # noqa: E402

# A tiny tagged corpus (Penn Treebank tags), lower-case like a database's phrases.
SENTENCES = [
    "the/DT drug/NN treats/VBZ chronic/JJ infections/NNS ./.",
    "the/DT medicine/NN treats/VBZ persistent/JJ infections/NNS ./.",
    "patients/NNS receive/VBP the/DT drug/NN in/IN hospitals/NNS ./.",
    "subjects/NNS receive/VBP the/DT medicine/NN in/IN clinics/NNS ./.",
    "a/DT new/JJ drug/NN cures/VBZ the/DT infection/NN ./.",
    "doctors/NNS treat/VBP chronic/JJ infections/NNS with/IN the/DT drug/NN ./.",
    "the/DT medicine/NN cures/VBZ patients/NNS quickly/RB ./.",
]
HEADER = "UI\tLS\n-\t:\n12345\tCD\n\nTI\tLS\n-\t:\n"


def _conll(sentences, repeat):
    """CoNLL text: a GENIA-like header (UI sentence, TI marker) then the sentences, repeated."""
    out = [HEADER]
    for k in range(repeat):
        for i, s in enumerate(sentences):
            if i == 1:
                out.append("AB\tLS\n-\t:\n")
            out.append("".join("{}\t{}\n".format(*tok.rsplit("/", 1)) for tok in s.split()) + "\n")
    return "".join(out)


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    genia = root / labels.GENIA_DIR
    genia.mkdir(parents=True)
    (genia / "train.tsv").write_text(_conll(SENTENCES, 20), encoding="utf-8")
    (genia / "devel.tsv").write_text(_conll(SENTENCES[:3], 2), encoding="utf-8")
    (genia / "test.tsv").write_text(_conll(SENTENCES[3:], 1), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def tagger(data_root, tmp_path_factory):
    tagger, info = labels.genia_tagger(data_root, cache=tmp_path_factory.mktemp("cache"))
    assert info["test_accuracy"] > 0.9
    return tagger


def test_read_conll_strips_genia_headers(data_root):
    sents = labels.read_conll(data_root / labels.GENIA_DIR / "devel.tsv")
    assert len(sents) == 6  # the UI sentence is gone
    assert sents[0][:2] == [("the", "DT"), ("drug", "NN")]  # "TI -" stripped
    assert sents[1][0] == ("the", "DT")  # "AB -" stripped
    assert not any(w in ("UI", "TI", "AB") for s in sents for w, _ in s)


def test_read_conll_names_the_bad_line(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("the\tDT\nlonely\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.tsv:2"):
        labels.read_conll(bad)


def _train_and_dump(corpus):
    sents = labels.read_conll(corpus)
    return json.dumps(labels.tagger_to_json(labels.train_tagger(sents)), sort_keys=True)


def test_training_is_deterministic(data_root):
    corpus = data_root / labels.GENIA_DIR / "train.tsv"
    a, b = _train_and_dump(corpus), _train_and_dump(corpus)
    assert a == b
    t1 = labels.tagger_from_json(json.loads(a))
    t2 = labels.train_tagger(labels.read_conll(corpus))
    words = "patients receive a new medicine quickly".split()
    assert t1.tag(words) == t2.tag(words)
    # Another process with another hash seed (set iteration order) gives the same weights.
    code = ("import sys, hashlib; sys.path.insert(0, sys.argv[2]); import tests.test_labels as t; "
            "print(hashlib.sha256(t._train_and_dump(sys.argv[1]).encode()).hexdigest())")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code, str(corpus), root], capture_output=True, text=True,
                         env={**os.environ, "PYTHONHASHSEED": "12345"}, check=True).stdout.strip()
    assert out == hashlib.sha256(a.encode()).hexdigest()
    # The global random state is the caller's: training neither reads nor moves it.
    import random
    random.seed(7)
    before = random.random()
    random.seed(7)
    labels.train_tagger(labels.read_conll(corpus))
    assert random.random() == before


def test_tagger_is_cached_by_content(data_root, tmp_path, monkeypatch):
    t1, info1 = labels.genia_tagger(data_root, cache=tmp_path)
    assert info1["path"].startswith(str(tmp_path)) and os.path.isfile(info1["path"])
    assert set(info1["files"]) == {"train.tsv", "devel.tsv"}
    monkeypatch.setattr(labels, "train_tagger", lambda *a, **k: pytest.fail("retrained despite the cache"))
    t2, info2 = labels.genia_tagger(data_root, cache=tmp_path)
    assert info2["path"] == info1["path"] and t2.tag(["drug"]) == t1.tag(["drug"])
    # Another corpus is another key, so another file: here a retraining.
    other = tmp_path / "other"
    (other / labels.GENIA_DIR).mkdir(parents=True)
    for name in ("train.tsv", "devel.tsv"):
        (other / labels.GENIA_DIR / name).write_text(_conll(SENTENCES[:4], 3), encoding="utf-8")
    with pytest.raises(pytest.fail.Exception, match="retrained"):
        labels.genia_tagger(other, cache=tmp_path)


def test_missing_genia_is_a_clear_error(tmp_path):
    with pytest.raises(InputError, match="GENIA-pos"):
        labels.genia_tagger(tmp_path, cache=tmp_path)


@pytest.mark.parametrize("tags, label", [
    (["NN"], "NN"), (["VBZ"], "VBZ"), (["("], "-LRB-"),
    (["DT", "NN"], "NP"), (["JJ", "NNS"], "NP"), (["NN", "CC", "NNS"], "NP"), (["DT", "JJ"], "X"),
    (["VB", "DT", "NN"], "VP"), (["TO", "VB"], "VP"), (["RB", "VBZ"], "VP"), (["MD", "VB"], "VP"),
    (["IN", "DT", "NN"], "PP"), (["TO", "DT", "NN"], "PP"),
    (["RB", "JJ"], "ADJP"), (["RB", "RB"], "ADVP"), (["CC", "NN"], "X"), ([], "X"),
])
def test_constituent_rules(tags, label):
    assert labels.constituent(tags) == label


def test_word_lexicon():
    sents = [[("Treat", "VB"), ("x", "NN")], [("treat", "VB"), ("treat", "NN"), ("once", "RB")]]
    assert labels.word_lexicon(sents) == {"treat": "VB"}  # "x", "once": seen once
    assert labels.word_lexicon(sents, min_count=1)["once"] == "RB"
    assert labels.word_lexicon([[("a", "NN"), ("a", "DT")]]) == {"a": "DT"}  # a tie: the first tag by name


def test_label_classes():
    assert labels.same_class("[NN]", "[NNS]") and labels.same_class("[NP]", "[NN]")
    assert labels.same_class("[VB]", "[VBZ]") and not labels.same_class("[NN]", "[VBZ]")
    assert not labels.same_class("[X]", "[NN]") and labels.same_class("[X]", "[X]")


def test_phrase_labels(tagger):
    lab = labels.PhraseLabeler(tagger)
    assert [lab.label(p) for p in ("drug", "treats", "patients", "chronic", "the drug", "in hospitals")] == \
        ["[NN]", "[VBZ]", "[NNS]", "[JJ]", "[NP]", "[PP]"]
