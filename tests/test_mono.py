"""Monolingual readers on synthetic files that mimic the real layouts."""
import io
import os
import tarfile
import zipfile
from pathlib import Path

import pytest

from pivot.pipeline import mono
from pivot.errors import InputError

GENIA = ("UI\tLS\n-\t:\n95369245\tCD\n\n"
         "TI\tLS\n-\t:\nIL-2\tNN\ngene\tNN\nexpression\tNN\n.\t.\n\n"
         "AB\tLS\n-\t:\nActivation\tNN\nof\tIN\nAB\tNN\n.\t.\n\n"
         "AB\tO\nbinds\tVBZ\n``\t``\nit\tPRP\n''\t''\n-LRB-\t-LRB-\nx\tNN\n-RRB-\t-RRB-\n\n"
         "-DOCSTART-\tO\n\n"
         "Last\tJJ\nline\tNN")                       # no blank line at the end


def test_conll_strips_genia_markup(tmp_path):
    f = tmp_path / "train.tsv"
    f.write_text(GENIA)
    sents = list(mono.read_conll_sentences(f))
    assert sents == [["IL-2", "gene", "expression", "."],
                     ["Activation", "of", "AB", "."],
                     ["AB", "binds", "``", "it", "''", "-LRB-", "x", "-RRB-"],   # AB without "-"
                     ["Last", "line"]]
    assert mono.ptb_join(sents[2]) == 'AB binds " it " ( x )'


def test_conll_errors_name_file_and_line(tmp_path):
    f = tmp_path / "bad.tsv"
    f.write_text("a\tO\n\nno tab here\n")
    with pytest.raises(InputError, match=r"bad.tsv:3: expected token<TAB>tag"):
        list(mono.read_conll_sentences(f))
    f.write_bytes(b"a\tO\nb\xe9\tO\n")
    with pytest.raises(InputError, match=r"bad.tsv:2: not UTF-8"):
        list(mono.read_conll_sentences(f))


PAGE = """index: hide
name: The Process of Science

Biology is a  **science**, but what is  *science*? Science includes fields such as \
astronomy ({'Figure_1_1_3 Figure 1.1.3}). As {'Figure_2_1 Figure 2.1} shows, H<sup>+</sup> \
ions &amp; E. coli cells matter.

{image:'Figure_1_1_3}
        
## Natural Sciences

| cell | a |
|:-:|:-:|
****
  * The sorting of chromosomes is random. It occurs in meiosis (see Fig. 2).
<math display="block"><mrow><mn>2</mn></mrow></math>
Watch this video: <link:>
"""


def _openstax(tmp_path):
    path = tmp_path / "os.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        for name, text in (("subnets/os-bio/1/1_1/1_1_1.md", PAGE),
                           ("subnets/os-bio/1/1.i", "/ Unit 1. Navigation.\n"),
                           ("subnets/os-bio/Project", "name: \"Biology\"\n")):
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def test_openstax(tmp_path):
    assert list(mono.read_openstax(_openstax(tmp_path))) == [
        "Biology is a science, but what is science?",
        "Science includes fields such as astronomy.",
        "As Figure 2.1 shows, H+ ions & E. coli cells matter.",
        "The sorting of chromosomes is random.",
        "It occurs in meiosis (see Fig. 2).",
        "Watch this video:",
    ]


def test_split_sentences():
    assert mono.split_sentences('He said "Stop." Then 3 cells died. e.g. Dr. Who left. J. Smith '
                                "came! Did he? (Yes.) Ok") == [
        'He said "Stop."', "Then 3 cells died. e.g. Dr. Who left.", "J. Smith came!",
        "Did he?", "(Yes.)", "Ok"]


def _brown(tmp_path):
    path = tmp_path / "brown.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("brown/", "")
        zf.writestr("brown/ca01", "\n\n\tThe/at jury/nn said/vbd ``/`` no/at ''/'' ./.\n\n"
                                  "\n\tIt/pps cost/vbd 1/2/cd ./.\n")
        zf.writestr("brown/README", "not a corpus file/with slashes\n")
        zf.writestr("brown/cats.txt", "ca01 news\n")
    return path


def test_brown(tmp_path):
    assert list(mono.read_brown(_brown(tmp_path))) == [
        ["The", "jury", "said", "``", "no", "''", "."], ["It", "cost", "1/2", "."]]
    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("brown/cb01", "ok/at\nnotag\n")
    with pytest.raises(InputError, match=r"bad.zip:brown/cb01:2: expected word/tag"):
        list(mono.read_brown(bad))


def test_tsv_first_column(tmp_path):
    """Column 1 of a gzipped pair file (the data root's eng-XXX.tsv.gz layout); blank firsts skipped."""
    import gzip

    path = tmp_path / "eng-fra.tsv.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write("Wash your hands.\tLavez-vous les mains.\ttest\tCMU_1:1\n"
                 "\tseul\n"
                 "A fever  \tUne fièvre\n")
    assert list(mono.read_tsv_first_column(path)) == ["Wash your hands.", "A fever"]
    assert mono.in_domain_text(tmp_path, {"tsv": ["eng-*.tsv.gz"]}) == ["wash your hands .", "a fever"]


def test_in_domain_text_dedups_and_normalises(tmp_path):
    (tmp_path / "mono" / "a").mkdir(parents=True)
    (tmp_path / "mono" / "b").mkdir(parents=True)
    (tmp_path / "mono" / "a" / "train.tsv").write_text("Cells\tNNS\ndivide\tVBP\n.\t.\n\n"
                                                        "x\tO\n\n")
    (tmp_path / "mono" / "b" / "train.tsv").write_text("Cells\tO\ndivide\tO\n.\tO\n\nnew\tO\n\n")
    spec = {"conll": ["mono/*/train.tsv"]}
    assert mono.in_domain_text(tmp_path, spec, normalize=False) == ["Cells divide .", "x", "new"]
    assert mono.in_domain_text(tmp_path, spec) == ["cells divide .", "x", "new"]
    spec2 = {"conll": "mono/a/train.tsv", "brown": ["brown.zip"]}
    _brown(tmp_path)
    assert mono.in_domain_text(tmp_path, spec2) == [
        "cells divide .", "x", 'the jury said " no " .', "it cost 1 / 2 ."]
    with pytest.raises(InputError, match="matches no file"):
        mono.in_domain_text(tmp_path, {"conll": ["mono/none/*.tsv"]})
    with pytest.raises(InputError, match="unknown monolingual format"):
        mono.in_domain_text(tmp_path, {"pdf": ["x"]})


def test_sample_by_tokens():
    sents = [" ".join(["w"] * k) for k in (1, 2, 3, 4, 5, 6, 7, 8)]     # 36 tokens
    sample = mono.sample_by_tokens(sents, 10, seed=1)
    assert sample == mono.sample_by_tokens(sents, 10, seed=1)
    assert sample == sorted(sample, key=sents.index)                  # corpus order
    total = mono.n_tokens(sample)
    assert total >= 10
    # the rule "stop at the first sentence that reaches n_tokens": without the last sentence
    # taken (in the seeded order) the sample is below n_tokens
    import numpy as np
    order = np.random.default_rng(1).permutation(len(sents))
    taken = [i for i in order if sents[i] in sample]
    assert total - len(sents[taken[-1]].split()) < 10
    assert mono.sample_by_tokens(sents, 0, seed=1) == []
    assert mono.sample_by_tokens(sents, 1000, seed=1) == sents
    assert mono.general_text(bitext_english=sents, n_tokens=10, seed=1) == sample
    with pytest.raises(ValueError):
        mono.general_text()


def _old_sample_by_tokens(sentences, n_tokens, seed):
    """sample_by_tokens as it was before sample_indices_by_tokens (the list-based rule)."""
    import numpy as np
    sentences = list(sentences)
    order = np.random.default_rng(seed).permutation(len(sentences))
    lengths = np.fromiter((len(s.split()) for s in sentences), dtype=np.int64,
                          count=len(sentences))
    running = np.cumsum(lengths[order])
    n_take = int(np.searchsorted(running, n_tokens, side="left")) + 1 if n_tokens > 0 else 0
    chosen = np.sort(order[:min(n_take, len(sentences))])
    return [sentences[i] for i in chosen]


def test_sample_indices_by_tokens_equals_the_list_sample(tmp_path):
    import numpy as np
    rng = np.random.default_rng(5)
    for trial in range(40):
        n = int(rng.integers(0, 60))
        # empty sentences, repeats and white space of every kind (str.split counts)
        sents = [" ".join(rng.choice(["a", "b", "c\u00a0d", "e"], rng.integers(0, 6)).tolist())
                 for _ in range(n)]
        lengths = np.array([len(s.split()) for s in sents], dtype=np.int64)
        for n_tokens in (0, 1, 7, int(lengths.sum()), int(lengths.sum()) + 1, 10**6):
            seed = int(rng.integers(0, 1000))
            want = _old_sample_by_tokens(sents, n_tokens, seed)
            idx = mono.sample_indices_by_tokens(lengths, n_tokens, seed)
            assert idx.dtype == np.int64 and idx.tolist() == sorted(idx.tolist())
            assert [sents[i] for i in idx] == want
            assert mono.sample_by_tokens(sents, n_tokens, seed) == want
            assert mono.sample_indices_by_tokens(lengths.tolist(), n_tokens, seed).tolist() == idx.tolist()
    # the two-pass use on a file: token counts, then the chosen lines
    sents = [" ".join(["w"] * k) + f" s{k}" for k in range(30)]
    path = tmp_path / "en.txt"
    path.write_text("\n".join(sents) + "\n", encoding="utf-8")
    with open(path, encoding="utf-8") as fh:
        lengths = np.fromiter((len(line.split()) for line in fh), dtype=np.int64)
    chosen = set(mono.sample_indices_by_tokens(lengths, 50, seed=3).tolist())
    with open(path, encoding="utf-8") as fh:
        picked = [line.rstrip("\n") for i, line in enumerate(fh) if i in chosen]
    assert picked == _old_sample_by_tokens(sents, 50, 3)
    with pytest.raises(ValueError):
        mono.sample_indices_by_tokens(lengths, -1, seed=3)


DATA = Path(os.environ.get("PIVOT_DATA", Path(__file__).resolve().parents[1] / ".." / "shared" / "data"))


@pytest.mark.integration
def test_real_genia_has_no_markup_left():
    path = DATA / "mono" / "bio-ner" / "GENIA-pos" / "train.tsv"
    if not path.is_file():
        pytest.skip(f"no GENIA at {path} (set PIVOT_DATA)")
    sents = list(mono.read_conll_sentences(path))
    assert not [s for s in sents if s[0] in ("UI", "TI", "AB") and s[1:2] == ["-"]]
    assert len(sents) > 14000


def test_shared_vocabulary_and_mapping():
    from pivot.pipeline.mono import OOV_TOKEN, map_to_vocab, shared_vocabulary

    text = ["the kinase binds the receptor", "the receptor binds", "a kinase", "<oov> <oov>"]
    # counts: the 3, kinase 2, binds 2, receptor 2, a 1 (<oov> never enters the vocabulary)
    assert shared_vocabulary(text, 2) == ["binds", "kinase", "receptor", "the"]
    assert shared_vocabulary(text, 3) == ["the"]
    assert shared_vocabulary(text, 1) == ["a", "binds", "kinase", "receptor", "the"]
    with pytest.raises(ValueError):
        shared_vocabulary(text, 0)
    vocab = frozenset(shared_vocabulary(text, 2))
    assert map_to_vocab("the dog binds a kinase", vocab) == ("the <oov> binds <oov> kinase", 2)
    assert map_to_vocab("", vocab) == ("", 0)
    assert OOV_TOKEN == "<oov>"
