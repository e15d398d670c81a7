"""Property tests: every reader of external input, fed random bytes and mutations of a valid
small input, either returns normally or raises InputError naming the file. Nothing else.

The inputs are mutated at two levels: the bytes of the file itself (so the gzip/zip/tar
layers see flipped, inserted, deleted and truncated bytes, bad headers and checksums), and
the text inside a container that is then packed correctly (so the parser behind the
decompressor sees bad UTF-8, NUL bytes, byte order marks, missing TABs). Deterministic:
``derandomize=True``, a fixed number of examples per reader.
"""
import atexit
import gzip
import io
import shutil
import tarfile
import tempfile
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pivot import recipes
from pivot.errors import InputError
from pivot.eval import gold
from pivot.pipeline import corpus, mono
from pivot.text import numbered_lines

EXAMPLES = 100
FUZZ = settings(derandomize=True, max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# ----------------------------------------------------------------------------- valid seeds

PARALLEL_EN = b"We treat it.\nRESULTS\n\nThey cure it.\n"
PARALLEL_FR = b"Nous le soignons.\nR\xc3\x89SULTATS\n\nIls le gu\xc3\xa9rissent.\n"
TSV = b"hello\tbonjour\tx\trdfs:label\nworld\tmonde\ty\trdfs:label\n\n"
TATOEBA = b"Go.\tVa !\tCC-BY 2.0 (France) Attribution: tatoeba.org\nHi.\tSalut !\tCC-BY\n"
CONLL = b"TI\tLS\n-\t:\nIL-2\tNN\ngene\tNN\n\nCells\tO\ndivide\tO\n.\tO\n"
BROWN = b"\n\tThe/at jury/nn said/vbd ./.\n\n\tIt/pps cost/vbd 1/2/cd ./.\n"
OPENSTAX = (b"index: hide\nname: Cells\n\nBiology is a **science**. Cells divide (Figure 1.1).\n"
            b"# Heading\n* Cells grow. E. coli is small.\n")
LINES = b"Cells divide.\n\nProteins fold.\n"
SIMLEX = b"word1\tword2\tSimLex999\tPOS\ncell\tnucleus\t3.5\tN\ntreat\tcure\t8.1\tV\n"
PPDB_HUMAN = b"3.2\t[NN]\tcell\tnucleus\t3,3,4\n4.0\t[VB]\ttreat\tcure\t4,4,4\n"
PAIRS = b"treat cure\ncell nucleus\n"


def _gz(data):
    return gzip.compress(data, mtime=0)


def _zip(members):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def _tar_gz(members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


# ----------------------------------------------------------------------------- mutations

@st.composite
def mutated(draw, seed: bytes):
    """``seed`` with a few random edits: flip, overwrite, insert, delete, truncate, or special
    bytes (NUL, byte order marks, a lone continuation byte, CR, TAB, newline) spliced in."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate", "special"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and data:
            data[at] = draw(st.integers(0, 255))
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete" and data:
            data[at:at + draw(st.integers(1, 16))] = b""
        elif op == "truncate":
            del data[at:]
        elif op == "special":
            data[at:at] = draw(st.sampled_from([b"\x00", b"\xef\xbb\xbf", b"\xff\xfe", b"\x80", b"\xc3",
                                                b"\r", b"\t", b"\n", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"]))
    return bytes(data)


def text_inputs(seed: bytes):
    """Random bytes, or a mutation of the valid seed."""
    return st.one_of(st.binary(max_size=300), mutated(seed))


def packed(seed: bytes, pack):
    """A container: its own bytes mutated (or random), or a correct container of mutated text."""
    return st.one_of(st.binary(max_size=300), mutated(pack(seed)), mutated(seed).map(pack))


# ----------------------------------------------------------------------------- harness

_DIR = Path(tempfile.mkdtemp(prefix="pivot-fuzz-"))
atexit.register(shutil.rmtree, _DIR, ignore_errors=True)


def write(name: str, data: bytes) -> Path:
    path = _DIR / name
    path.write_bytes(data)
    return path


def only_input_errors(call, *paths):
    """Run the reader to the end: a result, or an InputError that names one of the files."""
    try:
        result = call()
        if hasattr(result, "__next__"):
            result = list(result)
        return result
    except InputError as exc:
        message = str(exc)
        assert "\n" not in message
        assert any(str(p) in message for p in paths), message
        return None


# ----------------------------------------------------------------------------- readers


@FUZZ
@given(data=text_inputs(LINES))
def test_numbered_lines(data):
    path = write("plain.txt", data)
    only_input_errors(lambda: numbered_lines(path), path)


@FUZZ
@given(data=packed(LINES, _gz))
def test_numbered_lines_gz(data):
    path = write("plain.txt.gz", data)
    only_input_errors(lambda: numbered_lines(path), path)


@FUZZ
@given(en=text_inputs(PARALLEL_EN), fr=text_inputs(PARALLEL_FR))
def test_read_parallel(en, fr):
    a, b = write("c.en", en), write("c.fr", fr)
    only_input_errors(lambda: corpus.read_parallel(a, b), a, b)


@FUZZ
@given(en=packed(PARALLEL_EN, _gz), fr=packed(PARALLEL_FR, _gz))
def test_read_parallel_gz(en, fr):
    a, b = write("c.en.gz", en), write("c.fr.gz", fr)
    only_input_errors(lambda: corpus.read_parallel(a, b), a, b)


@FUZZ
@given(data=packed(TSV, _gz), filtered=st.booleans())
def test_read_tsv_gz(data, filtered):
    path = write("t.tsv.gz", data)
    where = {"4": "rdfs:*"} if filtered else None
    only_input_errors(lambda: corpus.read_tsv_gz(path, where=where, exclude={3: "y"} if filtered else None,
                                                 drop_headers=filtered), path)


@FUZZ
@given(data=text_inputs(TSV))
def test_read_tsv_plain(data):
    path = write("t.tsv", data)
    only_input_errors(lambda: corpus.read_tsv_gz(path), path)


@FUZZ
@given(data=packed(TATOEBA, lambda d: _zip({"fra.txt": d, "_about.txt": b"about"})),
       member=st.sampled_from([None, "fra.txt"]))
def test_read_tsv_zip(data, member):
    path = write("t.zip", data)
    only_input_errors(lambda: corpus.read_tsv_zip(path, member), path)


@FUZZ
@given(data=text_inputs(CONLL))
def test_read_conll(data):
    path = write("c.tsv", data)
    only_input_errors(lambda: mono.read_conll_sentences(path), path)


@FUZZ
@given(data=packed(BROWN, lambda d: _zip({"brown/ca01": d, "brown/README": b"x/y"})))
def test_read_brown(data):
    path = write("brown.zip", data)
    only_input_errors(lambda: mono.read_brown(path), path)


@FUZZ
@given(data=packed(OPENSTAX, lambda d: _tar_gz({"subnets/os-bio/m1.md": d, "subnets/os-bio/m1.i": b"x"})))
def test_read_openstax(data):
    path = write("os.tar.gz", data)
    only_input_errors(lambda: mono.read_openstax(path), path)


@FUZZ
@given(data=text_inputs(LINES))
def test_read_lines(data):
    path = write("l.txt", data)
    only_input_errors(lambda: mono.read_lines(path), path)


@pytest.mark.parametrize("fmt, seed", [("simlex", SIMLEX), ("ppdb-human", PPDB_HUMAN), ("pairs", PAIRS)])
def test_gold_readers(fmt, seed):
    @FUZZ
    @given(data=text_inputs(seed))
    def run(data):
        path = write(f"gold-{fmt}.txt", data)
        only_input_errors(lambda: gold.read_gold(path, fmt), path)

    run()


RECIPE = b"""name = "tiny"
[[bitext]]
lang = "fr"
sources = [{ name = "c", format = "parallel", en = "c.en", f = "c.fr" },
           { name = "t", format = "tsv-gz", path = "t.tsv.gz", where = { 4 = "rdfs:*" }, kind = "terms" }]
[preprocess]
max_tokens = 80
[align]
method = "pharaoh"
pharaoh = { fr = "c.align" }
[pivot]
top_n = 20
[domain]
order = 3
in_domain = { lines = ["bio.txt"], conll = "x/*.tsv" }
taus = [9]
report_in_domain_sources = ["c"]
[combine]
gold = ["gold.txt"]
[eval]
sets = [{ name = "control", sources = [{ path = "gold.txt", format = "simlex", threshold = 6.0 }] }]
"""


@FUZZ
@given(data=mutated(RECIPE))
def test_load_recipe(data):
    path = write("recipe.toml", data)
    only_input_errors(lambda: recipes.load_recipe(path), path)


# ----------------------------------------------------------------------------- the seeds are valid


def test_seeds_read_cleanly():
    """The unmutated seeds give results, so the properties above explore near valid input."""
    assert len(list(corpus.read_parallel(write("s.en", PARALLEL_EN), write("s.fr", PARALLEL_FR)))) == 2
    assert len(list(corpus.read_tsv_gz(write("s.tsv.gz", _gz(TSV)), where={"4": "rdfs:*"}))) == 2
    assert len(list(corpus.read_tsv_zip(write("s.zip", _zip({"fra.txt": TATOEBA}))))) == 2
    assert len(list(mono.read_conll_sentences(write("s.tsv", CONLL)))) == 2
    assert len(list(mono.read_brown(write("s.zip", _zip({"brown/ca01": BROWN}))))) == 2
    assert len(list(mono.read_openstax(write("s.tar.gz", _tar_gz({"a/m.md": OPENSTAX}))))) >= 3
    assert len(gold.read_gold(write("s.txt", SIMLEX), "simlex")) == 2
    assert len(gold.read_gold(write("s.txt", PPDB_HUMAN), "ppdb-human")) == 2
    assert len(gold.read_gold(write("s.txt", PAIRS), "pairs")) == 2
    assert recipes.load_recipe(write("s.toml", RECIPE))["name"] == "tiny"


# ----------------------------------------------------------------------------- block reading

@pytest.mark.parametrize("block", [1, 2, 3, 5, 8, 13, 1 << 16])
def test_lines_are_the_same_for_any_block_size(monkeypatch, block):
    """_iter_lines reads blocks cut after their last newline: lines, byte order marks dropped at
    line starts (external text), a trailing CR and an unterminated last line come out as from a
    line-by-line read, whatever the block size."""
    import pivot.text as text

    monkeypatch.setattr(text, "_BLOCK", block)
    data = b"\xef\xbb\xbfone\r\ntwo\n\xef\xbb\xbfthr\xc3\xa9e\xef\xbb\xbf\n\nfour\r"
    got = list(text._iter_lines(io.BytesIO(data), "x.txt", bom="lines"))
    assert got == [(1, "one"), (2, "two"), (3, "thr\u00e9e\ufeff"), (4, ""), (5, "four")]
    # own files: only line 1's mark is dropped, a later one is data
    got = list(text._iter_lines(io.BytesIO(data), "x.txt", bom="file", start=1))
    assert got[2] == (3, "\ufeffthr\u00e9e\ufeff")
    with pytest.raises(InputError, match=r"x\.txt:2: not UTF-8 \(byte 2 of the line, b'\\xff"):
        list(text._iter_lines(io.BytesIO(b"a\nb\xffc\nd\n"), "x.txt"))
    with pytest.raises(InputError, match=r"x\.txt:7: NUL byte at byte 1"):
        list(text._iter_lines(io.BytesIO(b"a\nb\n\0"), "x.txt", start=5))
