"""The build's phrase labels (PPDB's LHS): pivot.store.labels.LexiconTagger by hand (lexicon,
back-off, suffixes, shapes, contextual rules, the vectorised labeller), Brown's tags as PTB's,
the lhs stage on a synthetic data root, a tiny build that stores them, and nlpaug 1.1.11's PPDB
reader substituting from a plain `pivot export --relation Equivalence --size m` of them."""
import json
import sqlite3
import zipfile

import numpy as np
import pytest

from pivot import cli
from pivot.pipeline import lhs
from pivot.pipeline.bundle import open_bundle, save_bundle
from pivot.pipeline.corpus import Vocab
from pivot.store import labels
from pivot.store.labels import LexiconTagger
from pivot.store.write import write_database

from tests.test_cli import build as tiny_build, write_recipe
from tests.test_labels import SENTENCES, _conll

# In-domain sentences for the hand-traced tagger (lower-cased on training).
DOMAIN = [
    [("The", "DT"), ("kinase", "NN"), ("phosphorylated", "VBN"), ("proteins", "NNS"), (".", ".")],
    [("the", "DT"), ("ligase", "NN"), ("activated", "VBD"), ("cells", "NNS"), (".", ".")],
    [("the", "DT"), ("cells", "NNS"), ("express", "VBP"), ("IL-2", "NN"), (".", ".")],
]
BACKOFF = [("you", "PRP"), ("express", "VB"), ("express", "VB")]


@pytest.fixture(scope="module")
def hand():
    return LexiconTagger.train(DOMAIN, BACKOFF, suffix_max=3, suffix_min_count=2, rare_max=1)


def test_lexicon_prefers_the_domain_then_the_backoff(hand):
    # express: VBP once in the domain beats VB twice in the back-off; you: the back-off's only
    assert hand.lexicon == {".": ".", "activated": "VBD", "cells": "NNS", "express": "VBP", "il-2": "NN",
                            "kinase": "NN", "ligase": "NN", "phosphorylated": "VBN", "proteins": "NNS",
                            "the": "DT", "you": "PRP"}
    # ".", DT, NN, NNS: 3 tokens each; the tie goes to the first name
    assert hand.default == "."


def test_suffixes_of_rare_words_by_hand(hand):
    # Rare (seen once): kinase NN, ligase NN, phosphorylated VBN, activated VBD, proteins NNS,
    # express VBP (shape a) and il-2 NN (shape dha). A suffix needs 2 of them; "|" (shape only)
    # always stays. -d/-ed/-ted: VBD 1, VBN 1, a tie to VBD; -s: NNS 1, VBP 1 -> NNS.
    assert hand.suffixes == {"a|": "NN", "a|e": "NN", "a|se": "NN", "a|ase": "NN", "a|d": "VBD", "a|ed": "VBD",
                             "a|ted": "VBD", "a|s": "NNS", "dha|": "NN"}


@pytest.mark.parametrize("word, tag", [
    ("lipase", "NN"),        # a|ase
    ("methylated", "VBD"),   # a|ted
    ("tissues", "NNS"),      # no a|es (1 rare word: none), a|s
    ("ifn-3", "NN"),         # dha: no suffix of 2 rare words, the shape alone
    ("!", "."),              # shape p never seen: the default
    ("you", "PRP"), ("express", "VBP"), ("cells", "NNS"),
])
def test_tag_word(hand, word, tag):
    assert hand.tag_word(word) == tag


def test_phrase_labels_by_hand(hand):
    assert [hand.label(p) for p in ("lipase", "the lipase", "methylated proteins", "you express", "the cells")] == \
        ["[NN]", "[NP]", "[VP]", "[X]", "[NP]"]


@pytest.mark.parametrize("word, shape", [("il-2", "dha"), ("--", "p"), ("p53", "da"), ("cells", "a"), ("1,000", "d")])
def test_word_shape(word, shape):
    assert labels.word_shape(word) == shape


def _rule_tagger():
    return LexiconTagger({"to": "TO", "express": "VBP", "cells": "NNS"}, {"a|": "NN"}, "NN")


def test_rules_learned_by_hand():
    # 12 spans "to express" (gold TO VB) and 5 "cells express" (gold NNS VBP); the lexicon says
    # VBP for express, wrong 12 times. "VBP -> VB after TO" corrects 12 and breaks none (gain
    # 12); "VBP -> VB at the phrase's end" corrects 12 and breaks 5 (gain 7). After the first,
    # nothing is wrong: one rule.
    spans = [[("to", "TO"), ("express", "VB")]] * 12 + [[("cells", "NNS"), ("express", "VBP")]] * 5
    assert labels.learn_rules(_rule_tagger(), spans, max_rules=5, min_gain=10) == [("prev", "VBP", "VB", "TO")]
    # below min_gain: no rule
    assert labels.learn_rules(_rule_tagger(), spans, max_rules=5, min_gain=13) == []
    tagger = _rule_tagger().with_rules(spans, max_rules=5, min_gain=10)
    assert tagger.tag(["to", "express"]) == [("to", "TO"), ("express", "VB")]
    assert tagger.tag(["cells", "express"]) == [("cells", "NNS"), ("express", "VBP")]
    assert tagger.tag(["express"]) == [("express", "VBP")]


def test_label_rows_tags_the_vocabulary_once_and_applies_the_rules():
    tagger = LexiconTagger(_rule_tagger().lexicon | {"the": "DT"}, {"a|": "NN"}, "NN",
                           [("prev", "VBP", "VB", "TO")])
    tokens = ["to", "express", "cells", "lipase", "the"]
    rows = np.array([[0, 1, -1], [2, 1, -1], [4, 3, -1], [1, -1, -1], [0, 1, 2]])
    code, names = tagger.label_rows(rows, tokens)
    # to express: TO VB -> VP; cells express: NNS VBP -> X; the lipase: DT NN -> NP; express: VBP;
    # to express cells: TO VB NNS -> VP
    assert names == ["[NP]", "[VBP]", "[VP]", "[X]"]
    assert code.tolist() == [2, 3, 0, 1, 2]
    # the same labels as one phrase at a time
    texts = [" ".join(tokens[i] for i in r if i >= 0) for r in rows.tolist()]
    assert [names[c] for c in code.tolist()] == [tagger.label(t) for t in texts]
    # a rule on tags the tagger never gives never fires
    odd = LexiconTagger(tagger.lexicon, tagger.suffixes, "NN", [("next", "JJ", "RB", "XX"), ("prev", "VBP", "VB", "TO")])
    assert odd.label_rows(rows, tokens)[0].tolist() == code.tolist()
    assert tagger.label_rows(np.zeros((0, 3), np.int32), tokens)[0].tolist() == []


def test_window_spans_cover_every_token_once():
    sent = [(f"W{i}", "NN") for i in range(8)]
    spans = labels.window_spans([sent, sent[:2]])
    assert [[w for w, _ in s] for s in spans] == [["w0"], ["w1", "w2"], ["w3", "w4", "w5"], ["w6", "w7"],
                                                  ["w0"], ["w1"]]


@pytest.mark.parametrize("word, tag, out", [
    ("Don't", "do*", [("don", "VBP"), ("'t", "RB")]),
    ("it's", "pps+bez", [("it", "PRP"), ("'s", "VBZ")]),
    ("man's", "nn$", [("man", "NN"), ("'s", "POS")]),
    ("Judge", "nn-tl", [("judge", "NN")]),
    ("Tom", "np", [("tom", "NNP")]),
    ("coup", "fw-nn", [("coup", "FW")]),
    ("very", "ql", [("very", "RB")]),
    ("gonna", "vbg+to", []),
    ("o'clock", "rb", []),
    ("x", "nil", []),
])
def test_brown_token(word, tag, out):
    assert labels.brown_token(word, tag) == out


# ------------------------------------------------------------------------------ a data root

BROWN = {
    "brown/ca01": "\n\n\tThey/ppss cure/vb people/nns ./.\n\n\tWe/ppss handle/vb it/ppo ./.\n",
    "brown/ca02": "\n\n\tPeople/nns manage/vb it/ppo ./.\n\n\tDon't/do* cure/vb it/ppo ./.\n",
    "brown/README": "not a corpus file\n",
}


def write_data_root(root):
    """GENIA-pos (tests/test_labels.py's sentences) and a two-file Brown zip under `root`."""
    genia = root / labels.GENIA_DIR
    genia.mkdir(parents=True, exist_ok=True)
    (genia / "train.tsv").write_text(_conll(SENTENCES, 20), encoding="utf-8")
    (genia / "devel.tsv").write_text(_conll(SENTENCES[:3], 2), encoding="utf-8")
    (genia / "test.tsv").write_text(_conll(SENTENCES[3:], 1), encoding="utf-8")
    (root / labels.BROWN_ZIP).parent.mkdir(parents=True, exist_ok=True)
    # Each entry with a fixed date: writestr(name) stamps the clock's time (to 2 s), and two data
    # roots written across a 2-second boundary would then differ in the zip's sha256.
    with zipfile.ZipFile(root / labels.BROWN_ZIP, "w") as z:
        for name, text in BROWN.items():
            z.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), text)
    return root


def test_read_brown(tmp_path):
    write_data_root(tmp_path)
    assert lhs.brown_tokens(tmp_path / labels.BROWN_ZIP) == [
        ("they", "PRP"), ("cure", "VB"), ("people", "NNS"), (".", "."), ("we", "PRP"), ("handle", "VB"),
        ("it", "PRP"), (".", "."), ("people", "NNS"), ("manage", "VB"), ("it", "PRP"), (".", "."),
        ("don", "VBP"), ("'t", "RB"), ("cure", "VB"), ("it", "PRP"), (".", ".")]
    (tmp_path / "bad.zip").write_bytes(b"not a zip")
    with pytest.raises(labels.InputError, match="bad.zip: not a readable zip file"):
        lhs.brown_tokens(tmp_path / "bad.zip")


# Phrases of the stage test and the nlpaug test (ids are positions), as token rows.
PHRASES = ["treat", "cure", "handle", "manage", "patients", "people", "they", "the drug", "treat patients"]


def _stage(tmp_path, block=lhs.LABEL_BLOCK, by_ids=False, window=lhs.IDS_WINDOW, vocab_file=False, leftovers=()):
    """The lhs stage on a synthetic data root and a one-part pivot table using phrases 0-8
    (phrase 9, "unused", is in no pair and gets no label), ``block`` phrases a task (by_ids:
    the rows given as a function of the ids, as the stage gives them; the ids it asks for are
    recorded in ``_stage.asked``), the used ids' union ``window`` ids at a time (vocab_file:
    the words given as a Vocab.save file, as the stage gives encode's vocab.en; leftovers: files
    an interrupted run left in the stage's folder)."""
    root = write_data_root(tmp_path / "data")
    tokens = sorted({w for p in PHRASES + ["unused"] for w in p.split()})
    e_rows = np.full((len(PHRASES) + 1, 2), -1, np.int32)
    for i, p in enumerate(PHRASES + ["unused"]):
        e_rows[i, :len(p.split())] = [tokens.index(w) for w in p.split()]
    part = tmp_path / "rows-0000.arrays"
    save_bundle(part, e1=np.array([0, 0, 0, 4, 5, 6, 7], np.int32), e2=np.array([1, 2, 3, 5, 4, 4, 8], np.int32))
    tagger = tmp_path / "tagger"
    tagger.mkdir()
    lhs.train_stage(tagger, root)
    out = tmp_path / "stage"
    out.mkdir()
    for name in leftovers:
        (out / name).write_text("left by an interrupted run\n")
    _stage.asked = []

    def rows_of(ids):
        _stage.asked.append(ids.tolist())
        return e_rows[ids]
    words = tokens
    if vocab_file:
        words = tmp_path / "vocab.en"
        Vocab(tokens).save(words)
    meta = lhs.build(out, part_paths=[part], e_rows=rows_of if by_ids else e_rows, e_tokens=words,
                     tagger_dir=tagger, block=block, window=window)
    return out, meta, root


def test_used_phrases_by_part_and_window(tmp_path):
    """Each part's distinct ids (a task each: a's pairs 0-5, 0-2, 2-0 hold 0, 2, 5; b none; c's
    7-2, 9-7 hold 2, 7, 9), the largest + 1 returned; their union 0, 2, 5, 7, 9 written the
    same for every window of ids (of 3: windows 0-2, 3-5, 6-8, 9 hold 0 2, 5, 7, 9; of 1: one
    id each; of 100: all) and read back by ranges of used ids."""
    parts = [tmp_path / "a.arrays", tmp_path / "b.arrays", tmp_path / "c.arrays"]
    save_bundle(parts[0], e1=np.array([0, 0, 2], np.int32), e2=np.array([5, 2, 0], np.int32))
    save_bundle(parts[1], e1=np.zeros(0, np.int32), e2=np.zeros(0, np.int32))
    save_bundle(parts[2], e1=np.array([7, 9], np.int32), e2=np.array([2, 7], np.int32))
    ids = [tmp_path / f"ids-{k}.arrays" for k in range(3)]
    assert [lhs.phrase_ids_file(part, out) for part, out in zip(parts, ids)] == [6, 0, 10]
    held = []
    for path in ids:
        with open_bundle(path) as z:
            assert z.dtype("e") == np.int64
            held.append(z["e"].tolist())
    assert held == [[0, 2, 5], [], [2, 7, 9]]
    for window in (3, 1, 100):
        used = tmp_path / f"used-{window}.bin"
        assert lhs.write_used(used, 10, ids, window) == 5
        assert used.read_bytes() == np.array([0, 2, 5, 7, 9], "<i8").tobytes()
    assert lhs.read_used(used, 1, 4).tolist() == [2, 5, 7] and lhs.read_used(used, 5, 5).tolist() == []
    assert lhs.write_used(tmp_path / "none.bin", 0, ids[1:2]) == 0
    # an interrupted stage's file is kept: a changed part does not change it
    save_bundle(parts[0], e1=np.array([11], np.int32), e2=np.array([12], np.int32))
    assert lhs.phrase_ids_file(parts[0], ids[0]) == 6


def test_stage_windows_and_vocab_file(tmp_path):
    """The used ids' union by windows of 4 ids (0-3, 4-7, 8: the used 0-8 cut at 4 and 8) or 1,
    and the words read from a vocabulary file (one a line, line k id k), give the bytes of the
    whole; the stage deletes its scratch files and not the vocabulary."""
    whole, _, _ = _stage(tmp_path / "whole")
    for window, vocab_file in ((4, False), (1, True), (lhs.IDS_WINDOW, True)):
        out, _, _ = _stage(tmp_path / f"w{window}{vocab_file}", block=3, window=window, vocab_file=vocab_file)
        for name in ("lhs.arrays", "lhs.json"):
            assert (out / name).read_bytes() == (whole / name).read_bytes(), (window, vocab_file, name)
        assert sorted(p.name for p in out.iterdir()) == ["lhs.arrays", "lhs.json", "timings.json"]
        assert (tmp_path / f"w{window}{vocab_file}" / "vocab.en").is_file() == vocab_file


def test_a_word_file_an_older_run_left_goes(tmp_path):
    """Resumed in the folder of an interrupted run of the stage's older version (which wrote the
    words to .words.txt even when given encode's vocabulary file): the artifact is the one of a
    fresh folder, and holds its declared files only (the runner refuses any other)."""
    fresh, _, _ = _stage(tmp_path / "fresh", vocab_file=True)
    out, _, _ = _stage(tmp_path / "resumed", vocab_file=True, leftovers=(".words.txt",))
    assert sorted(p.name for p in out.iterdir()) == ["lhs.arrays", "lhs.json", "timings.json"]
    assert lhs.STAGE.undeclared_writes(out) == []
    for name in ("lhs.arrays", "lhs.json"):
        assert (out / name).read_bytes() == (fresh / name).read_bytes()


def test_stage_rows_by_ids_block(tmp_path):
    """With the rows as a function of the ids, the stage asks for the used ids (0-8) a block at
    a time (after an empty ask for the rows' width) and labels them as with the whole array."""
    out, meta, _ = _stage(tmp_path / "f", block=4, by_ids=True)
    assert _stage.asked == [[], [0, 1, 2, 3], [4, 5, 6, 7], [8]]
    out2, meta2, _ = _stage(tmp_path / "a", block=4)
    assert lhs.read(out)[0] == lhs.read(out2)[0] and meta["distribution"] == meta2["distribution"]


def test_stage_labels_every_used_phrase(tmp_path):
    out, meta, root = _stage(tmp_path)
    by_id, read_meta = lhs.read(out)
    # GENIA: treat VBP, patients NNS, the DT, drug NN; Brown: cure/handle/manage VB, people NNS, they PRP
    assert by_id == {0: "[VBP]", 1: "[VB]", 2: "[VB]", 3: "[VB]", 4: "[NNS]", 5: "[NNS]", 6: "[PRP]",
                     7: "[NP]", 8: "[VP]"}
    assert meta["tagger"] == "lexicon-suffix" and meta["version"] == labels.LEXICON_TAGGER_VERSION
    assert meta["n_phrases"] == 9
    # as a function of the ids (the database write's, a block at a time): only those labelled
    labels_of, _ = lhs.read_labels(out)
    assert labels_of(np.array([1, 4, 8])) == {1: "[VB]", 4: "[NNS]", 8: "[VP]"}
    assert labels_of(np.array([7, 9, 12])) == {7: "[NP]"}
    assert labels_of(np.zeros(0, np.int64)) == {}
    # read through the stage's file where asked; a block's labels copied out for a task
    assert labels_of.path == out / "lhs.arrays" and labels_of.ids.tolist() == list(range(9))
    block = labels_of.within(4, 8)
    assert block.path is None and block.ids.tolist() == [4, 5, 6, 7]
    assert block(np.array([3, 4, 7, 8])) == {4: "[NNS]", 7: "[NP]"}
    assert labels_of(np.array([8, 1])) == {1: "[VB]", 8: "[VP]"}   # ids out of order: the whole map
    assert meta["distribution"] == {"[VB]": 3, "[NNS]": 2, "[NP]": 1, "[PRP]": 1, "[VBP]": 1, "[VP]": 1}
    import hashlib
    assert meta["files"] == {str(p): hashlib.sha256((root / p).read_bytes()).hexdigest()
                             for p in (*lhs.TRAIN_FILES, lhs.TEST_FILE, lhs.BACKOFF_FILE)}
    # the test split's sentences are training sentences here: every token right
    assert meta["test_accuracy_spans"] == 1.0 and meta["test_accuracy_words"] == 1.0 and meta["rules"] == []
    assert meta["train_sentences"] == 7 * 20 + 3 * 2 and meta["backoff_tokens"] == 17
    assert set(read_meta["cpu_seconds"]) == {"train_cpu_seconds", "label_cpu_seconds", "stage_cpu_seconds"}
    assert "names" not in read_meta and {k: v for k, v in read_meta.items() if k != "cpu_seconds"} == \
        {k: v for k, v in meta.items() if k != "names"}


def test_stage_is_deterministic(tmp_path):
    a, _, _ = _stage(tmp_path / "a")
    b, _, _ = _stage(tmp_path / "b")
    for name in ("lhs.arrays", "lhs.json"):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    assert (a.parent / "tagger" / lhs.TAGGER_FILE).read_bytes() == (b.parent / "tagger" / lhs.TAGGER_FILE).read_bytes()


def test_blocks_of_phrases_give_the_bytes_of_one(tmp_path):
    """Labelled 2 or 3 used phrases a task, the stage writes the bytes of one task over all 9:
    the blocks' label names merged and sorted (in blocks of 2 the first holds "treat" [VBP] and
    "cure" [VB], codes 0 and 1 there, 3 and 4 among the whole's six names: "]" sorts after
    "P"), the scratch files gone."""
    whole, _, _ = _stage(tmp_path / "whole")
    for block in (2, 3):
        out, meta, _ = _stage(tmp_path / f"b{block}", block)
        for name in ("lhs.arrays", "lhs.json"):
            assert (out / name).read_bytes() == (whole / name).read_bytes(), (block, name)
        assert sorted(p.name for p in out.iterdir()) == ["lhs.arrays", "lhs.json", "timings.json"]
    assert meta["names"] == ["[NNS]", "[NP]", "[PRP]", "[VBP]", "[VB]", "[VP]"]
    with open_bundle(whole / "lhs.arrays") as z:
        assert z["ids"].tolist() == list(range(9)) and z["code"].tolist() == [3, 4, 4, 4, 0, 0, 2, 1, 5]


def test_the_saved_tagger_tags_as_the_trained_one(tmp_path):
    """The tagger stage's file, reloaded, is the tagger trained from the data root: its tables
    and rules, and the tags of a fixed sentence (known words of GENIA and Brown, and unknown
    ones that fall to the suffixes and the default)."""
    root = write_data_root(tmp_path / "data")
    trained, info = lhs.train(root)
    lhs.train_stage(tmp_path, root)
    loaded, loaded_info, files = lhs.load_tagger_json(tmp_path / lhs.TAGGER_FILE)
    assert (loaded.lexicon, loaded.suffixes, loaded.default, loaded.rules) == \
        (trained.lexicon, trained.suffixes, trained.default, trained.rules)
    sentence = "we treat the patients with a new drug and cure people quickly".split()
    assert loaded.tag(sentence) == trained.tag(sentence)
    # GENIA: treat VBP, the DT, patients NNS, drug NN; Brown: cure VB, people NNS
    tags = dict(loaded.tag(sentence))
    assert (tags["treat"], tags["the"], tags["patients"], tags["drug"], tags["cure"], tags["people"]) == \
        ("VBP", "DT", "NNS", "NN", "VB", "NNS")
    assert loaded_info == json.loads(json.dumps(info))
    import hashlib
    assert files == {str(p): hashlib.sha256((root / p).read_bytes()).hexdigest()
                     for p in (*lhs.TRAIN_FILES, lhs.TEST_FILE, lhs.BACKOFF_FILE)}


def test_a_tagger_of_another_version_is_refused(tmp_path):
    root = write_data_root(tmp_path / "data")
    lhs.train_stage(tmp_path, root)
    path = tmp_path / lhs.TAGGER_FILE
    obj = json.loads(path.read_text())
    obj["version"] = labels.LEXICON_TAGGER_VERSION + 1
    path.write_text(json.dumps(obj))
    with pytest.raises(ValueError, match="a tagger of version"):
        lhs.load_tagger_json(path)


def test_nlpaug_substitutes_from_a_plain_export_of_the_stage_labels(tmp_path):
    """nlpaug 1.1.11's Ppdb (nlpaug/model/word_dict/ppdb.py) files each line under the parts of
    speech of its LHS (PartOfSpeech.constituent2pos: VB/VBP -> v, NNS -> n, PRP -> none) and
    keeps pairs of equal word count. From `pivot export --relation Equivalence --size m` of a
    database whose LHS are the stage's labels: treat (VBP) -> cure (handle: ForwardEntailment;
    manage: below size m); patients <-> people (NNS); they (PRP) -> patients is Independent."""
    pytest.importorskip("nlpaug", reason="the labels extra is not installed")
    from nlpaug.model.word_dict import Ppdb

    out, _, _ = _stage(tmp_path)
    by_id, lhs_meta = lhs.read(out)
    # e1, e2, ppdb2 score, relation (0 Equivalence, 1 ForwardEntailment, 5 Independent)
    pairs = [(0, 1, 4.5, 0), (0, 2, 4.8, 1), (0, 3, 1.0, 0), (4, 5, 4.0, 0), (5, 4, 4.0, 0), (6, 4, 4.9, 5),
             (7, 8, 4.2, 0)]
    rel = np.zeros((len(pairs), 6), np.int64)
    for i, (_, _, _, r) in enumerate(pairs):
        rel[i, r] = 1000
    e1, e2, score = (np.array([p[i] for p in pairs]) for i in range(3))
    models = [{"name": "general", "kind": "general", "description": "all", "params": {}},
              {"name": "ppdb2", "kind": "learned", "description": "PPDB2.0Score", "params": {}}]
    meta = {"signature": "test-sig", "normalization": {"lang": "en"}, "lhs": lhs_meta,
            "ppdb2": {"learned": True, "sizes": {"s": 4.5, "m": 4.0, "l": 1.0, "xl": 1.0, "xxl": 1.0, "xxxl": 1.0}},
            "relations": {"classified": True}}
    phrases = PHRASES + ["unused"]
    db = write_database(tmp_path / "aug.db", phrases=phrases, phrase_counts=np.full(len(phrases), 3), e1=e1, e2=e2,
                        n_pivots=np.ones(len(pairs), np.int64), pivots=np.zeros((len(pairs), 1), np.int64),
                        foreign={0: "fr:x"}, models=models, scores=np.full((len(pairs), 1), 0.5), meta=meta,
                        form=np.zeros(len(pairs), np.int64), ppdb2=score, rel=rel, lhs=by_id)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT lhs FROM phrase WHERE text = 'treat'").fetchone() == ("[VBP]",)
    ppdb = tmp_path / "aug.ppdb"
    assert cli.main(["-q", "export", str(db), "--relation", "Equivalence", "--size", "m", "-o", str(ppdb)]) == 0
    assert [line.split(" ||| ")[:3] for line in ppdb.read_text().splitlines()] == [
        ["[VBP]", "treat", "cure"], ["[NNS]", "patients", "people"], ["[NNS]", "people", "patients"],
        ["[NP]", "the drug", "treat patients"]]
    model = Ppdb(str(ppdb))
    assert model.predict("treat", pos="v") == ["cure"]
    assert model.predict("patients", pos="n") == ["people"] and model.predict("people", pos="n") == ["patients"]
    assert model.predict("treat", pos="n") == [] and model.predict("they") == []
    assert model.predict("the drug", pos="n") == ["treat patients"]  # NP -> n, two words each
    # The same export with --lhs x: [X] maps to no part of speech, nothing is filed under one.
    plain = tmp_path / "aug-x.ppdb"
    assert cli.main(["-q", "export", str(db), "--relation", "Equivalence", "--size", "m", "--lhs", "x",
                     "-o", str(plain)]) == 0
    assert Ppdb(str(plain)).predict("treat", pos="v") == []


# ------------------------------------------------------------------------------ a tiny build


def test_a_tiny_build_stores_the_labels(tmp_path, capsys, caplog):
    """tests/test_cli.py's recipe with lhs = "tagged" and a data root holding GENIA-pos and
    Brown: "treat" (GENIA: VBP) and "cure", "we", "it" (Brown: VB, PRP, PRP) label the stored
    phrases; the meta says which tagger; the export writes them and does not warn."""
    recipe, data = write_recipe(tmp_path)
    recipe.write_text(recipe.read_text().replace('lhs = "x"', 'lhs = "tagged"'))
    write_data_root(data)
    assert tiny_build(tmp_path, recipe, data) == 0
    with sqlite3.connect(tmp_path / "tiny.db") as conn:
        stored = dict(conn.execute("SELECT text, lhs FROM phrase"))
        meta = json.loads(conn.execute("SELECT value FROM meta WHERE key = 'lhs'").fetchone()[0])
    # treat VBP, cure VB; we treat: PRP VBP -> X; treat it: VBP PRP -> VP
    assert stored == {"treat": "[VBP]", "cure": "[VB]", "we treat": "[X]", "we cure": "[X]", "treat it": "[VP]",
                      "cure it": "[VP]", "we treat it": "[X]", "we cure it": "[X]"}
    assert meta["tagger"] == "lexicon-suffix" and meta["n_phrases"] == 8
    caplog.clear()
    out = tmp_path / "tiny.ppdb"
    assert cli.main(["-q", "export", str(tmp_path / "tiny.db"), "-o", str(out)]) == 0
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
    assert {tuple(line.split(" ||| ")[:2]) for line in out.read_text().splitlines()} == {
        ("[VB]", "cure"), ("[VBP]", "treat"), ("[VP]", "cure it"), ("[VP]", "treat it"), ("[X]", "we cure"),
        ("[X]", "we cure it"), ("[X]", "we treat"), ("[X]", "we treat it")}
    # the labels are a stage of their own: a rerun reuses it
    caplog.clear()
    with caplog.at_level("INFO", logger="pivot"):
        assert cli.main(["build", "--recipe", str(recipe), "--data", str(data), "--out", str(tmp_path / "tiny.db"),
                         "--work", str(tmp_path / "work")]) == 0
    said = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("stage lhs ") and "reused" in m for m in said)
    assert any(m.startswith("stage tagger ") and "reused" in m for m in said)
    assert not any("running" in m for m in said)
    # the tagger is a stage of its own, with no stage before it: its key holds the training
    # files' sha256, and a changed training file trains it (and labels) again
    import hashlib
    [tagger] = (tmp_path / "work").glob("tagger-*")
    done = json.loads((tagger / "DONE").read_text())
    assert done["inputs"] == {} and done["params"]["data"] == sorted(
        hashlib.sha256((data / p).read_bytes()).hexdigest() for p in (*lhs.TRAIN_FILES, lhs.TEST_FILE, lhs.BACKOFF_FILE))
    train = data / lhs.TRAIN_FILES[0]
    train.write_text(train.read_text() + "\ncure\tNN\n")
    caplog.clear()
    with caplog.at_level("INFO", logger="pivot"):
        assert cli.main(["build", "--recipe", str(recipe), "--data", str(data), "--out", str(tmp_path / "tiny.db"),
                         "--work", str(tmp_path / "work")]) == 0
    said = [r.getMessage() for r in caplog.records]
    assert [m.split()[1] for m in said if m.startswith("stage ") and "running" in m] == ["tagger", "lhs"]
