"""PPDB labels: the GENIA-pos reader, a deterministic cached tagger, the constituent rules, the
labelled export, and nlpaug's PPDB synonym augmenter reading that export (on synthetic data)."""
import hashlib
import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest

nltk = pytest.importorskip("nltk", reason="the labels extra is not installed")

from pivot import cli  # noqa: E402
from pivot.errors import InputError  # noqa: E402
from pivot.store import labels  # noqa: E402
from pivot.store.db import ParaphraseDB, export_ppdb, tagged_labeler  # noqa: E402
from pivot.store.write import write_database  # noqa: E402

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


# Pairs among the corpus words; "drug -> treats" crosses classes (noun -> verb).
PHRASES = ["drug", "medicine", "treats", "cures", "patients", "subjects", "chronic", "persistent",
           "the drug", "the medicine", "in hospitals"]
PAIRS = [(0, 1, 0.6), (0, 2, 0.1), (1, 0, 0.5), (2, 3, 0.7), (3, 2, 0.6), (4, 5, 0.8), (5, 4, 0.7),
         (6, 7, 0.5), (7, 6, 0.5), (8, 9, 0.4), (9, 8, 0.4), (10, 8, 0.1)]


@pytest.fixture(scope="module")
def db_path(tmp_path_factory):
    e1, e2, p = (np.array(c) for c in zip(*PAIRS))
    n = len(PAIRS)
    return write_database(
        tmp_path_factory.mktemp("db") / "syn.db", phrases=PHRASES, phrase_counts=np.full(len(PHRASES), 5),
        e1=e1, e2=e2, n_pivots=np.ones(n, dtype=np.int32), pivots=np.zeros((n, 1), dtype=np.int32),
        foreign={0: "fr:x"}, models=[{"name": "general", "kind": "general", "description": "all", "params": {}}],
        scores=p.reshape(-1, 1), meta={"signature": "syn", "normalization": {"lang": "en"}})


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


def _export(db_path, tagger, **kw):
    out, stats = io.StringIO(), {}
    with ParaphraseDB(db_path) as db:
        n = export_ppdb(db, out, labeler=labels.PhraseLabeler(tagger), stats=stats, **kw)
    lines = out.getvalue().splitlines()
    assert len(lines) == n == stats["written"]
    return lines, stats


def test_export_labels_e1(db_path, tagger):
    lines, stats = _export(db_path, tagger)
    assert len(lines) == len(PAIRS) and stats["disagree"] == 0
    fields = {(f[1], f[2]): f for f in (line.split(" ||| ") for line in lines)}
    assert all(len(f) == 6 for f in fields.values())
    assert fields["drug", "medicine"][0] == "[NN]"
    assert fields["drug", "treats"][0] == "[NN]"  # the label of e1 even when e2's differs
    assert fields["treats", "cures"][0] == "[VBZ]"
    assert fields["the drug", "the medicine"][0] == "[NP]"
    assert fields["in hospitals", "the drug"][0] == "[PP]"
    # --agree drops the pairs whose labels are of different classes (noun -> verb, PP -> NP).
    agreed, stats = _export(db_path, tagger, agree=True)
    assert stats["disagree"] == 2 and len(agreed) == len(PAIRS) - 2
    assert not any(" ||| drug ||| treats ||| " in line for line in agreed)
    with ParaphraseDB(db_path) as db, pytest.raises(ValueError):
        export_ppdb(db, io.StringIO(), agree=True)


def test_nlpaug_substitutes_from_the_labelled_export(db_path, tagger, tmp_path):
    pytest.importorskip("nlpaug", reason="the labels extra is not installed")
    import nlpaug.augmenter.word as naw

    lines, _ = _export(db_path, tagger)
    ppdb = tmp_path / "syn-labelled.ppdb"
    ppdb.write_text("\n".join(lines) + "\n", encoding="utf-8")
    aug = naw.SynonymAug(aug_src="ppdb", model_path=str(ppdb), aug_p=1.0, force_reload=True)
    # nlpaug tags the sentence with nltk.pos_tag, whose model is a separate download: use ours.
    aug.model.pos_tag = tagger.tag
    sentence = "The drug treats chronic infections in patients"
    out = aug.augment(sentence)
    out = out[0] if isinstance(out, list) else out
    paraphrases = {}
    for a, b, _ in PAIRS:
        paraphrases.setdefault(PHRASES[a], set()).add(PHRASES[b])
    before, after = sentence.split(), out.split()
    assert len(before) == len(after)
    changed = [(a, b) for a, b in zip(before, after) if a != b]
    assert changed, f"nlpaug substituted nothing: {out!r}"
    for a, b in changed:
        assert b in paraphrases[a.lower()], (a, b)
    # The same export with [X] everywhere gives nlpaug nothing to substitute.
    out_x = io.StringIO()
    with ParaphraseDB(db_path) as db:
        export_ppdb(db, out_x)
    plain = tmp_path / "syn-x.ppdb"
    plain.write_text(out_x.getvalue(), encoding="utf-8")
    aug_x = naw.SynonymAug(aug_src="ppdb", model_path=str(plain), aug_p=1.0, force_reload=True)
    aug_x.model.pos_tag = tagger.tag
    out = aug_x.augment(sentence)
    assert (out[0] if isinstance(out, list) else out) == sentence


def test_cli_export_tagged(db_path, data_root, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PIVOT_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "out.ppdb"
    assert cli.main(["-q", "export", str(db_path), "--lhs", "tagged", "--data", str(data_root), "--agree",
                     "-o", str(out)]) == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(PAIRS) - 2 and lines[0].startswith("[NN] ||| drug ||| medicine ||| ")
    assert list((tmp_path / "cache" / "taggers").glob("genia-pos-*.json.gz"))
    # the default stays [X]
    assert cli.main(["-q", "export", str(db_path)]) == 0
    assert all(line.startswith("[X] ||| ") for line in capsys.readouterr().out.splitlines())


def test_cli_export_tagged_without_data_fails_clearly(db_path, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("PIVOT_DATA", raising=False)
    assert cli.main(["-q", "export", str(db_path), "--lhs", "tagged"]) == 2
    err = capsys.readouterr().err
    assert "--lhs tagged" in err and "PIVOT_DATA" in err
    assert cli.main(["-q", "export", str(db_path), "--lhs", "tagged", "--data", str(tmp_path)]) == 2
    assert "GENIA-pos" in capsys.readouterr().err
    assert cli.main(["-q", "export", str(db_path), "--agree"]) == 2
    assert "--lhs tagged" in capsys.readouterr().err
    with pytest.raises(InputError):
        tagged_labeler(str(tmp_path / "nowhere"))
