"""Preflight, locking and the command line's handling of bad input.

Every row of the table in docs/bad-input.md is produced here: ``test_bad_input`` runs
``pivot build`` on a tiny synthetic recipe with one thing wrong and checks exit code 2, one
line on stderr that names the file and equals the documented message, no traceback, and
that nothing was written (no database, no stage folder). ``test_accepted`` covers the rows
of input that is accepted as it is.
"""
from __future__ import annotations

import fcntl
import gzip
import io
import os
import re
import stat
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from pivot import locking, preflight, recipes
from pivot.cli import build_parser, main
from pivot.errors import InputError
from pivot.text import numbered_lines

DOC = Path(__file__).resolve().parent.parent / "docs" / "bad-input.md"

EN = ["we treat it", "we cure it", "they treat it"]
FR = ["nous soignons le", "nous soignons le", "ils traitent le"]
ALIGN = "0-0 1-1 2-2\n" * 3
IN_DOMAIN = "Cells divide .\nProteins fold .\n"
GOLD = "treat\tcure\t8.0\ncell\tnucleus\t2.0\n"

RECIPE = """name = "tiny"
[[bitext]]
lang = "fr"
sources = [{{ name = "c", format = "parallel", en = "c.en", f = "c.fr" }}{extra_sources}]
[preprocess]
max_tokens = 80
[align]
method = "pharaoh"
pharaoh = {{ fr = "c.align" }}
[extract]
max_phrase_len = 5
[pivot]
min_p_f_given_e = 0.001
top_n = 20
min_phrase_count = 1
[ppdb2]
learn = false
wordnet = false
lhs = "x"
{domain}
"""
DOMAIN = """[domain]
order = 3
in_domain = {{ {in_domain} }}
report_in_domain_sources = ["c"]
[combine]
gold = ["gold.txt"]
[eval]
sets = [{{ name = "control", sources = [{{ path = "gold.txt", format = "simlex", threshold = 6.0 }}] }}]
"""


class Tiny:
    """A tiny recipe (parallel fr-en, Pharaoh alignments, a domain, gold) under tmp/."""

    def __init__(self, tmp: Path, domain: bool = True):
        self.tmp = tmp
        self.data = tmp / "data"
        self.data.mkdir(exist_ok=True)
        self.recipe = tmp / "tiny.toml"
        self.work = tmp / "work"
        self.out = tmp / "tiny.db"
        self.extra_sources = ""
        self.in_domain = 'lines = ["bio.txt"]'
        self.domain = domain
        self.file("c.en", "\n".join(EN) + "\n")
        self.file("c.fr", "\n".join(FR) + "\n")
        self.file("c.align", ALIGN)
        self.file("bio.txt", IN_DOMAIN)
        self.file("gold.txt", GOLD)
        self.write_recipe()

    def file(self, name, content):
        path = self.data / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        return path

    def write_recipe(self, edit=None):
        text = RECIPE.format(extra_sources=self.extra_sources,
                             domain=DOMAIN.format(in_domain=self.in_domain) if self.domain else "")
        if edit:
            text = edit(text)
        self.recipe.write_text(text)

    def args(self, *more, out=None, work=None):
        return ["-q", "build", "--recipe", str(self.recipe), "--data", str(self.data),
                "--out", str(out or self.out), "--work", str(work or self.work), "--workers", "1", *more]


# ----------------------------------------------------------------------------- damaged files


def _gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def _zip(members: dict) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def _tar_gz(members: dict) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _bad_crc_gz(data: bytes) -> bytes:
    raw = bytearray(_gz(data))
    raw[-8] ^= 0xFF                      # the CRC32 of the trailer
    return bytes(raw)


def _bad_crc_zip(name: str, data: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr(name, data)
    raw = buf.getvalue()
    at = raw.index(data)
    return raw[:at] + data.replace(b"Go", b"Og", 1) + raw[at + len(data):]


TATOEBA = b"Go.\tVa !\tCC-BY 2.0\nHi.\tSalut !\tCC-BY 2.0\n"


def gz_source(t: Tiny, content: bytes, name="c2.en.gz"):
    t.file(name, content)
    t.file(name.replace(".en.", ".fr."), _gz("\n".join(FR).encode() + b"\n"))
    t.extra_sources = (f', {{ name = "c2", format = "parallel", en = "{name}", '
                       f'f = "{name.replace(".en.", ".fr.")}" }}')
    t.write_recipe()


def zip_source(t: Tiny, content: bytes):
    t.file("t.zip", content)
    t.extra_sources = ', { name = "t", format = "tsv-zip", path = "t.zip", member = "fra.txt" }'
    t.write_recipe()


def tsv_source(t: Tiny, content: bytes):
    t.file("t.tsv.gz", _gz(content))
    t.extra_sources = ', { name = "t", format = "tsv-gz", path = "t.tsv.gz" }'
    t.write_recipe()


def extra_parallel(t: Tiny, en: str, en_content: bytes, f: str, f_content: bytes):
    t.file(en, en_content)
    t.file(f, f_content)
    t.extra_sources = f', {{ name = "d", format = "parallel", en = "{en}", f = "{f}" }}'
    t.write_recipe()


def in_domain(t: Tiny, spec: str, name: str | None = None, content: bytes | str = b""):
    if name:
        t.file(name, content)
    t.in_domain = spec
    t.write_recipe()


def edit(old: str, new: str):
    def change(t: Tiny):
        t.write_recipe(lambda text: text.replace(old, new) if old in text else pytest.fail(f"no {old!r}"))
    return change


def holding_lock(t: Tiny):
    """Another process' lock on the work directory (an open file description of the test's own,
    so the probe of the build, which opens the file anew, meets it)."""
    t.work.mkdir()
    fd = os.open(t.work / ".lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.write(fd, f"{os.getpid()}\n".encode())
    t.cleanup.append(lambda: os.close(fd))


def unwritable(monkeypatch, folder: Path):
    """os.access says no for `folder` (the tests may run as root, whom permissions do not stop)."""
    real = os.access

    def access(path, mode, *a, **k):
        if Path(path) == folder and mode & os.W_OK:
            return False
        return real(path, mode, *a, **k)

    monkeypatch.setattr(os, "access", access)


def _then(_, *args) -> list[str]:
    return [str(a) for a in args]


def _truncated_tar() -> bytes:
    text = " ".join(f"Cell {i} divides into {i * 7919 % 10007} parts." for i in range(3000)).encode()
    data = _tar_gz({"a/m.md": text, "a/n.md": text[::-1]})
    return data[:len(data) // 2]


# (id, setup(t) -> extra CLI args (a list) or anything else for none, a path the message must name)
CASES = {
    # recipe
    "unknown-section": (edit("[domain]", "[domian]"), "RECIPE"),
    "unknown-key": (edit("top_n = 20", "top_m = 20"), "RECIPE"),
    "unknown-top-key": (edit('name = "tiny"', 'nmae = "tiny"'), "RECIPE"),
    "wrong-type": (edit("max_tokens = 80", 'max_tokens = "80"'), "RECIPE"),
    "integer-as-decimal": (edit("max_tokens = 80", "max_tokens = 80.0"), "RECIPE"),
    "max-tokens-1": (edit("max_tokens = 80", "max_tokens = 1"), "RECIPE"),
    "max-tokens-negative": (edit("max_tokens = 80", "max_tokens = -1"), "RECIPE"),
    "sample-fraction-0": (edit("max_tokens = 80", "max_tokens = 80\nsample_fraction = 0"), "RECIPE"),
    "sample-fraction-above-1": (edit("max_tokens = 80", "max_tokens = 80\nsample_fraction = 1.5"), "RECIPE"),
    "sample-seed-negative": (edit("max_tokens = 80", "max_tokens = 80\nsample_seed = -1"), "RECIPE"),
    "sample-with-pharaoh": (edit("max_tokens = 80", "max_tokens = 80\nsample_fraction = 0.5"), "RECIPE"),
    "probability-range": (edit("min_p_f_given_e = 0.001", "min_p_f_given_e = 2.0"), "RECIPE"),
    "probability-nan": (edit("min_p_f_given_e = 0.001", "min_p_f_given_e = nan"), "RECIPE"),
    "top-n-negative": (edit("top_n = 20", "top_n = -5"), "RECIPE"),
    "order-range": (edit("order = 3", "order = 12"), "RECIPE"),
    "shard-sentences-0": (edit("max_phrase_len = 5", "max_phrase_len = 5\nshard_sentences = 0"), "RECIPE"),
    "max-phrase-len": (edit("max_phrase_len = 5", "max_phrase_len = 9"), "RECIPE"),
    "source-format": (edit('format = "parallel"', 'format = "paralel"'), "RECIPE"),
    "source-key": (edit('f = "c.fr" }', 'f = "c.fr", drop_header = true }'), "RECIPE"),
    "mono-format": (edit("lines = [", "line = ["), "RECIPE"),
    "report-source": (edit('report_in_domain_sources = ["c"]', 'report_in_domain_sources = ["d"]'), "RECIPE"),
    "gold-not-a-list": (edit('gold = ["gold.txt"]', 'gold = "gold.txt"'), "RECIPE"),
    "pharaoh-language": (edit('pharaoh = { fr = "c.align" }', 'pharaoh = { fra = "c.align" }'), "RECIPE"),
    "not-toml": (edit("max_tokens = 80", "max_tokens = "), "RECIPE"),
    "recipe-missing": (lambda t: t.recipe.unlink(), "RECIPE"),
    # data
    "data-root-missing": (lambda t: ["--data", str(t.tmp / "nowhere")], "TMP/nowhere"),
    "file-missing": (lambda t: (t.data / "c.fr").unlink(), "DATA/c.fr"),
    "line-counts": (lambda t: t.file("c.fr", "\n".join(FR[:2]) + "\n"), "DATA/c.fr"),
    "not-utf8": (lambda t: t.file("c.fr", b"nous soignons le\nnous \xff\xfe le\nils traitent le\n"), "DATA/c.fr:2"),
    "nul-byte": (lambda t: t.file("c.fr", b"nous soignons le\nnous\x00 le\nils traitent le\n"), "DATA/c.fr:2"),
    "utf16": (lambda t: t.file("c.fr", "\n".join(FR).encode("utf-16")), "DATA/c.fr:1"),
    "gzip-crc": (lambda t: gz_source(t, _bad_crc_gz("\n".join(EN).encode() + b"\n")), "DATA/c2.en.gz"),
    "gzip-truncated": (lambda t: gz_source(t, _gz(("\n".join(EN) + "\n").encode() * 50)[:60]), "DATA/c2.en.gz"),
    "not-gzip": (lambda t: gz_source(t, b"plain text, not gzip\n"), "DATA/c2.en.gz"),
    "not-zip": (lambda t: zip_source(t, b"not a zip at all"), "DATA/t.zip"),
    "zip-crc": (lambda t: zip_source(t, _bad_crc_zip("fra.txt", TATOEBA)), "DATA/t.zip"),
    "zip-member": (lambda t: zip_source(t, _zip({"deu.txt": TATOEBA})), "DATA/t.zip"),
    "tsv-fields": (lambda t: tsv_source(t, b"hello\tbonjour\nworld only\n"), "DATA/t.tsv.gz:2"),
    "tar-truncated": (lambda t: in_domain(t, 'openstax = ["os.tar.gz"]', "os.tar.gz", _truncated_tar()),
                      "DATA/os.tar.gz"),
    "in-domain-empty": (lambda t: t.file("bio.txt", "\n  \n"), "DATA/bio.txt"),
    "in-domain-no-match": (lambda t: in_domain(t, 'lines = ["nothing*.txt"]'), "DATA/nothing*.txt"),
    "conll-no-tab": (lambda t: in_domain(t, 'conll = ["bio.conll"]', "bio.conll", "Cells\tO\nno tab\n"),
                     "DATA/bio.conll:2"),
    "gold-missing": (lambda t: (t.data / "gold.txt").unlink(), "DATA/gold.txt"),
    "gold-score": (lambda t: t.file("gold.txt", "treat\tcure\t8.0\ncell\tnucleus\thigh\n"), "DATA/gold.txt:2"),
    "gold-empty": (lambda t: t.file("gold.txt", "\n"), "DATA/gold.txt"),
    "pharaoh-link": (lambda t: t.file("c.align", "0-0 1-1 2-2\n0-0 1_1\n0-0\n"), "DATA/c.align:2"),
    # data that is sound but leaves the build nothing to work with
    "bitext-empty": (lambda t: extra_parallel(t, "d.en", b"", "d.fr", b""), "DATA/d.en"),
    "gzip-empty": (lambda t: gz_source(t, b""), "DATA/c2.en.gz"),
    "tsv-empty": (lambda t: tsv_source(t, b""), "DATA/t.tsv.gz"),
    "same-file": (edit('f = "c.fr"', 'f = "c.en"'), "DATA/c.en"),
    "identical-sides": (lambda t: t.file("c.fr", "\n".join(EN) + "\n"), "DATA/c.en"),
    "no-pair-fits": (lambda t: t.file("c.en", "".join(f"{' '.join(['cells'] * 85)}\n" for _ in EN)), "DATA/c.en:1"),
    "tuning-one-class": (lambda t: t.file("gold.txt", "treat\tcure\t8.0\ncell\tnucleus\t7.0\n"), "DATA/gold.txt"),
    "ppdb2-learn-no-wordnet": (edit("learn = false", "learn = true"), "RECIPE"),
    "ppdb2-ratings-missing": (edit("learn = false\nwordnet = false", "learn = true\nwordnet = true"),
                              "DATA/gold/ppdb-human-dev.tsv"),
    "ppdb2-wordnet-missing": (edit("wordnet = false", "wordnet = true"),
                              "DATA/lexicon/nltk_data/corpora/wordnet/index.noun"),
    "ppdb2-lhs-missing": (edit('lhs = "x"', 'lhs = "tagged"'), "DATA/mono/bio-ner/GENIA-pos/train.tsv"),
    # outputs
    "out-is-input": (lambda t: ["--out", str(t.data / "c.en")], "DATA/c.en"),
    "out-links-to-input": (lambda t: _then((t.tmp / "link.db").symlink_to(t.data / "c.en"),
                                           "--out", t.tmp / "link.db"), "TMP/link.db"),
    "out-is-recipe": (lambda t: ["--out", str(t.recipe)], "RECIPE"),
    "out-hard-link-to-input": (lambda t: _then(os.link(t.data / "c.en", t.tmp / "hard.db"), "--out", t.tmp / "hard.db"),
                               "TMP/hard.db"),
    "out-is-directory": (lambda t: _then((t.tmp / "outdir").mkdir(), "--out", t.tmp / "outdir"), "TMP/outdir"),
    # /dev/null itself: the test asserts it is still the character device afterwards. (Tiny's
    # build could not reach its database write anyway: its one-pair gold cannot fit the combination.)
    "out-is-device": (lambda t: ["--out", os.devnull], "/dev/null"),
    "out-is-fifo": (lambda t: _then(os.mkfifo(t.tmp / "pipe.db"), "--out", t.tmp / "pipe.db"), "TMP/pipe.db"),
    "out-not-sqlite": (lambda t: _then((t.tmp / "notes.db").write_text("my notes\n"), "--out", t.tmp / "notes.db"),
                       "TMP/notes.db"),
    "out-under-a-file": (lambda t: _then((t.tmp / "afile").write_text("x"), "--out", t.tmp / "afile" / "x.db"),
                         "TMP/afile/x.db"),
    "out-unwritable": ("unwritable-out", "TMP/ro/x.db"),
    # --parts N: --out is a folder
    "parts-out-is-a-file": (lambda t: _then((t.tmp / "one.db").write_text("x"), "--parts", "2", "--out",
                                            t.tmp / "one.db"), "TMP/one.db"),
    "parts-out-folder-not-parts": (lambda t: _then((t.tmp / "outdir").mkdir(), "--parts", "2", "--out",
                                                   t.tmp / "outdir"), "TMP/outdir"),
    "parts-out-holds-input": (lambda t: ["--parts", "2", "--out", str(t.data)], "DATA"),
    "parts-out-holds-work": (lambda t: ["--parts", "2", "--out", str(t.tmp)], "TMP"),
    "work-is-file": (lambda t: t.work.write_text("x"), "WORK"),
    "work-is-data-root": (lambda t: ["--work", str(t.data)], "DATA"),
    "work-holds-inputs": (lambda t: ["--work", str(t.tmp)], "TMP"),
    "work-unwritable": ("unwritable-work", "TMP/ro/work"),
    "work-in-use": (holding_lock, "WORK"),
    # counts
    "threads-huge": (lambda t: ["--threads", "100000"], "--threads"),
    "threads-negative": (lambda t: ["--threads", "-1"], "--threads"),
    "workers-huge": (lambda t: ["--workers", "100000"], "--workers"),
    "scheduler-not-an-address": (lambda t: ["--scheduler", "not a url"], "--scheduler"),
}


def doc_table(section: str = "Refused") -> dict[str, str]:
    """id -> message template, from the tables of one section ("## <section>") of
    docs/bad-input.md; "Refused" holds the preflight's cases, tested here."""
    rows, current = {}, None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
        m = re.match(r"^\|\s*`([a-z0-9-]+)`\s*\|[^|]*\|\s*``\s?(.*?)\s?``\s*\|\s*$", line)
        if m and current == section:
            rows[m.group(1)] = m.group(2)
    return rows


def template_regex(template: str) -> re.Pattern:
    parts = re.split(r"(\{n\}|\{\*\})", template)
    rx = "".join(r"\d+" if p == "{n}" else ".*?" if p == "{*}" else re.escape(p) for p in parts)
    return re.compile(rx + r"\Z")


def normalize(text: str, t: Tiny) -> str:
    for path, name in ((t.recipe, "RECIPE"), (t.work, "WORK"), (t.data, "DATA"), (t.tmp, "TMP"),
                       (recipes.RECIPES_DIR, "RECIPES")):
        text = text.replace(str(path), name)
    return text


def test_every_case_is_documented():
    rows = doc_table()
    assert set(rows) == set(CASES), (sorted(set(CASES) - set(rows)), sorted(set(rows) - set(CASES)))


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input(case, tmp_path, capsys, monkeypatch):
    setup, names = CASES[case]
    t = Tiny(tmp_path)
    t.cleanup = []
    extra = []
    if setup == "unwritable-out":
        (tmp_path / "ro").mkdir()
        unwritable(monkeypatch, tmp_path / "ro")
        extra = ["--out", str(tmp_path / "ro" / "x.db")]
    elif setup == "unwritable-work":
        (tmp_path / "ro").mkdir()
        unwritable(monkeypatch, tmp_path / "ro")
        extra = ["--work", str(tmp_path / "ro" / "work")]
    else:
        extra = setup(t)
        extra = extra if isinstance(extra, list) else []
    before = sorted(p.name for p in t.work.iterdir()) if t.work.is_dir() else None
    top = sorted(p.name for p in tmp_path.iterdir())
    try:
        rc = main(t.args(*extra))
    finally:
        for undo in t.cleanup:
            undo()
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    message = normalize(lines[0], t)
    assert names in message, message
    template = doc_table()[case]
    assert template_regex(template).match(message), f"\n  got: {message}\n  doc: {template}"
    # nothing written: no database, no stage folder
    assert not t.out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == top
    after = sorted(p.name for p in t.work.iterdir()) if t.work.is_dir() else None
    assert after == before
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)   # never replaced by a database


def test_bad_content_found_while_the_cluster_starts_leaves_no_process(tmp_path, capsys, workers_left):
    """With workers, the cluster starts once the recipe, arguments and paths have passed,
    while the inputs are read through; a bad input found then still exits 2, writes nothing
    and leaves no worker process behind."""
    t = Tiny(tmp_path)
    t.file("c.fr", b"nous soignons le\nnous\x00 le\nils traitent le\n")
    args = t.args()[:-2] + ["--workers", "2"]  # t.args() ends with --workers 1
    assert main(args) == 2
    assert "DATA/c.fr:2" in normalize(capsys.readouterr().err, t)
    assert not t.out.exists()
    assert workers_left() == []


# ----------------------------------------------------------------------------- accepted input


def test_accepted_bom_nul_free_crlf(tmp_path):
    """A BOM at the start of a file, or of a later line, is dropped; U+FEFF inside a line is text;
    CRLF line ends read as LF."""
    p = tmp_path / "a.txt"
    p.write_bytes(b"\xef\xbb\xbfone\r\n\xef\xbb\xbftwo\nthree\xef\xbb\xbffour\n")
    assert [line for _, line in numbered_lines(p)] == ["one", "two", "three\ufefffour"]


def test_accepted_preflight_on_tiny(tmp_path):
    t = Tiny(tmp_path)
    t.file("c.en", b"\xef\xbb\xbf" + "\r\n".join(EN).encode() + b"\r\n")
    plan = preflight.check(t.recipe, t.data, t.out, t.work, threads=0, workers=1)
    assert plan.name == "tiny" and plan.out_path == t.out and plan.work_dir == t.work
    assert {f.role for f in plan.inputs} == {"bitext", "alignments", "in-domain text", "gold"}
    assert plan.counts["bitext lines"] == 3 and plan.counts["in-domain text sentences"] == 2
    assert "preflight: recipe" in plan.summary()
    assert not t.work.exists() and not t.out.exists()       # it writes nothing


@pytest.mark.parametrize("name", ["a#b?c%d.db", "file:x/a#b.db"])
def test_accepted_uri_like_database_names(tmp_path, monkeypatch, capsys, name):
    """A database name is a plain file name: '#', '?', '%' and a leading 'file:' are letters."""
    t = Tiny(tmp_path, domain=False)
    monkeypatch.chdir(tmp_path)
    assert main(t.args(out=name)) == 0, capsys.readouterr().err
    assert (tmp_path / name).is_file()
    assert (tmp_path / name).read_bytes().startswith(b"SQLite format 3\x00")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["data", "tiny.toml", "work", name.split("/")[0]])


def test_existing_database_may_be_replaced(tmp_path):
    t = Tiny(tmp_path)
    t.out.write_bytes(b"SQLite format 3\x00" + bytes(100))
    assert preflight.check(t.recipe, t.data, t.out, t.work).out_path == t.out


def test_preflight_reads_every_real_layout(tmp_path):
    """tsv-gz with row filters (a file shared by two sources), tsv-zip, parallel-glob, brown,
    openstax and conll inputs all pass when sound."""
    t = Tiny(tmp_path)
    t.file("terms.tsv.gz", _gz(b"cell\tcellule\tfr\nhouse\tmaison\tfr\n"))
    t.file("t.zip", _zip({"fra.txt": TATOEBA}))
    t.file("g/a.en", "one\n")
    t.file("g/a.fr", "un\n")
    t.extra_sources = (', { name = "t", format = "tsv-zip", path = "t.zip" }'
                       ', { name = "g", format = "parallel-glob", en = "g/*.en" }'
                       ', { name = "terms", format = "tsv-gz", path = "terms.tsv.gz", where = { 3 = "fr" } }'
                       ', { name = "terms2", format = "tsv-gz", path = "terms.tsv.gz", exclude = { 3 = "x*" } }')
    in_domain(t, 'conll = ["c.conll"], openstax = ["os.tar.gz"], lines = ["bio.txt"]', "c.conll", "Cells\tO\n")
    t.file("os.tar.gz", _tar_gz({"a/m.md": b"Cells divide. Proteins fold.\n"}))
    plan = preflight.check(t.recipe, t.data, t.out, t.work)
    assert plan.counts["bitext lines"] == 3 + 2 + 1 + 2
    assert len([f for f in plan.inputs if f.path.name == "terms.tsv.gz"]) == 1


# ----------------------------------------------------------------------------- read through in two processes


def _rule(plan) -> tuple:
    r = plan.lengths
    return list(r.read.items()), sorted(r.may_pass), sorted(r.example.items())


def test_read_through_in_two_processes_as_in_one(tmp_path):
    """A build with a cluster reads its inputs through in two processes (ReadThrough's forked
    helper): the counts, in the same order of keys (the log's line), and the length rule's
    lines, passing languages and first dropped pairs are what one process gives."""
    t = Tiny(tmp_path)
    t.file("t.zip", _zip({"fra.txt": TATOEBA}))
    t.file("terms.tsv.gz", _gz(b"cell\tcellule\tfr\nhouse\tmaison\tfr\n"))
    t.extra_sources = (', { name = "t", format = "tsv-zip", path = "t.zip" }'
                       ', { name = "terms", format = "tsv-gz", path = "terms.tsv.gz", where = { 3 = "fr" } }')
    in_domain(t, 'conll = ["c.conll"], lines = ["bio.txt", "more*.txt"]', "c.conll", "Cells\tO\n\nDivide\tO\n")
    for k in range(6):
        t.file(f"more{k}.txt", "".join(f"cell line {k} {i}\n" for i in range(50 * (k + 1))))
    one = preflight.check(t.recipe, t.data, t.out, t.work, workers=1)
    two = preflight.check(t.recipe, t.data, t.out, t.work, workers=2)
    assert list(two.counts.items()) == list(one.counts.items())
    assert one.counts["in-domain text sentences"] == 2 + 2 + sum(50 * (k + 1) for k in range(6))
    assert _rule(two) == _rule(one) and one.lengths.may_pass == {"fr"}


# the content cases: found by reading the inputs through (no command-line argument)
_READ_CASES = ["not-utf8", "nul-byte", "utf16", "gzip-crc", "gzip-truncated", "not-gzip", "not-zip", "zip-crc",
               "tsv-fields", "tar-truncated", "in-domain-empty", "conll-no-tab", "gold-score", "gold-empty",
               "pharaoh-link", "bitext-empty", "identical-sides", "no-pair-fits", "tuning-one-class"]


@pytest.mark.parametrize("case", _READ_CASES)
def test_read_through_in_two_processes_raises_the_same_first_error(case, tmp_path):
    t = Tiny(tmp_path)
    setup, names = CASES[case]
    if case != "no-pair-fits":   # (the length rule's, found once every file is read)
        # a second bad file, the [eval] set's (the last check): the first in the order is named
        t.file("late.txt", "treat\tcure\tnot a score\n")
        tiny_recipe = t.write_recipe
        t.write_recipe = lambda edit=None: tiny_recipe(lambda text: (edit(text) if edit else text).replace(
            '{ path = "gold.txt", format = "simlex"', '{ path = "late.txt", format = "simlex"'))
        t.write_recipe()
    setup(t)
    errors = []
    for workers in (1, 2):
        with pytest.raises(InputError) as got:
            preflight.check(t.recipe, t.data, t.out, t.work, workers=workers)
        errors.append((str(got.value), got.value.path, got.value.line))
    assert errors[1] == errors[0]
    assert names in normalize(errors[0][0], t)


def _checks(plan, bad=(), die_in_helper=False, sleep=0.02):
    parent = os.getpid()

    def check(k):
        if die_in_helper and os.getpid() != parent:
            os._exit(3)
        time.sleep(sleep)
        plan.count(f"lines {k % 3}", k + 1)
        plan.lengths.count([f"l{k % 2}"], 10 * k)
        if k in bad:
            raise InputError(f"check {k} fails", Path(f"f{k}.txt"), k + 1)

    return [lambda k=k: check(k) for k in range(12)]


def _plan(tmp_path):
    from pivot.pipeline.corpus import LengthRule
    return preflight.Plan(recipe_path=tmp_path / "r.toml", name="r", data_root=tmp_path, out_path=None,
                          work_dir=None, recipe={}, lengths=LengthRule(5))


def test_read_through_shares_the_checks_and_replays_them_in_order(tmp_path):
    plan = _plan(tmp_path)
    reading = preflight.ReadThrough(_checks(plan), plan, helper=True)
    reading.finish()
    reading.close()
    assert reading.helper.exitcode == 0
    # hand sums: "lines j" adds k + 1 over k = j mod 3; l0 / l1 add 10 k over even / odd k
    assert list(plan.counts.items()) == [("lines 0", 1 + 4 + 7 + 10), ("lines 1", 2 + 5 + 8 + 11),
                                         ("lines 2", 3 + 6 + 9 + 12)]
    assert list(plan.lengths.read.items()) == [("l0", 10 * (0 + 2 + 4 + 6 + 8 + 10)),
                                               ("l1", 10 * (1 + 3 + 5 + 7 + 9 + 11))]


def test_read_through_raises_the_first_failing_check_in_order(tmp_path):
    for _ in range(3):   # whichever process takes which check
        plan = _plan(tmp_path)
        reading = preflight.ReadThrough(_checks(plan, bad={4, 5, 9}), plan, helper=True)
        with pytest.raises(InputError) as got:
            reading.finish()
        reading.close()
        assert (str(got.value), got.value.path, got.value.line) == (f"{Path('f4.txt')}:5: check 4 fails",
                                                                    Path("f4.txt"), 5)


def test_read_through_runs_what_a_dead_helper_took(tmp_path):
    """The helper killed mid-check: the checks it took are run in this process, nothing is
    counted twice."""
    plan = _plan(tmp_path)
    reading = preflight.ReadThrough(_checks(plan, die_in_helper=True, sleep=0.05), plan, helper=True)
    reading.finish()
    reading.close()
    assert reading.helper.exitcode == 3
    assert list(plan.counts.items()) == [("lines 0", 22), ("lines 1", 26), ("lines 2", 30)]


def test_input_error_pickles_with_its_path_and_line():
    import pickle

    e = pickle.loads(pickle.dumps(InputError("bad byte", Path("a.txt"), 7)))
    assert (str(e), e.path, e.line, e.message) == ("a.txt:7: bad byte", Path("a.txt"), 7, "bad byte")


def test_pivot_score_needs_no_out(tmp_path):
    t = Tiny(tmp_path)
    plan = preflight.check(t.recipe, t.data, None, t.work, read_inputs=False)
    assert plan.out_path is None


# ----------------------------------------------------------------------------- command line


def test_global_flags_before_or_after_the_command(tmp_path):
    p = build_parser()
    for argv in (["-q", "build", "--graph"], ["build", "-q", "--graph"], ["build", "--graph", "--quiet"]):
        args = p.parse_args(argv)
        assert args.quiet is True and args.command == "build"
    args = p.parse_args(["build", "-v", "--debug"])
    assert args.verbose == 1 and args.debug is True and args.quiet is False
    args = p.parse_args(["-v", "build"])
    assert args.verbose == 1
    args = p.parse_args(["lookup", "x.db", "treat", "-q"])
    assert args.quiet is True


@pytest.mark.parametrize("argv, message", [
    (["buld"], "pivot: error: argument COMMAND: invalid choice: 'buld'"),
    (["build", "--bogus"], "pivot: error: unrecognized arguments: --bogus"),
    (["build", "--threads", "many"], "pivot build: error: argument --threads: invalid int value: 'many'"),
    ([], "pivot: error: the following arguments are required: COMMAND"),
])
def test_usage_errors_are_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith(message), err


def test_debug_shows_the_traceback(tmp_path, capsys):
    t = Tiny(tmp_path)
    (t.data / "c.fr").write_bytes(b"\xff\n")
    assert main(t.args()) == 2
    assert "Traceback" not in capsys.readouterr().err
    assert main(t.args("--debug")) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and err.splitlines()[-1].startswith("pivot build: error: ")


def test_cli_subprocess_exit_code_and_stderr(tmp_path):
    t = Tiny(tmp_path)
    t.write_recipe(lambda text: text.replace("[domain]", "[domian]"))
    done = subprocess.run([sys.executable, "-m", "pivot", *t.args()], capture_output=True, text=True)
    assert done.returncode == 2
    line = t.recipe.read_text().splitlines().index("[domian]") + 1
    assert done.stderr.strip() == f"pivot build: error: {t.recipe}:{line}: unknown section 'domian' (did you mean 'domain'?)"


# ----------------------------------------------------------------------------- recipes


def test_shipped_recipes_validate():
    for domain in recipes.available_domains():
        rec = recipes.load_recipe(recipes.recipe_path(domain))
        assert rec["bitext"] and rec["name"] == domain


def test_recipe_errors_name_the_line(tmp_path):
    t = Tiny(tmp_path)
    t.write_recipe(lambda text: text.replace("top_n = 20", "top_n = 20\ntop_m = 3"))
    with pytest.raises(InputError) as err:
        recipes.load_recipe(t.recipe)
    line = t.recipe.read_text().splitlines().index("top_m = 3") + 1
    assert err.value.line == line and str(err.value).startswith(f"{t.recipe}:{line}: [pivot] has unknown keys")


@pytest.mark.parametrize("old, new, message", [
    ("max_tokens = 80", "max_tokens = true", "must be an integer (got a boolean)"),
    ("order = 3", "order = 0", "must be between 1 and 9"),
    ("top_n = 20", "top_n = 1.5", "must be an integer"),
    ('method = "pharaoh"', 'method = "eflomall"', "(did you mean 'eflomal'?)"),
    ('lang = "fr"', 'lang = "en"', "repeated or English"),
    ('lang = "fr"', 'lang = "f r"', "must be a language code"),
    ('name = "tiny"', 'name = "a/b"', "must be usable as a file name"),
    ('threshold = 6.0', 'threshold = "six"', "threshold = \"six\": must be a number"),
    ('format = "simlex"', 'format = "simlexx"', "(did you mean 'simlex'?)"),
    ('lines = ["bio.txt"]', 'lines = 3', "must be an array of non-empty strings"),
    ('[combine]\ngold = ["gold.txt"]', '[combine]\ngold = []', "is empty"),
    ('f = "c.fr" }', 'f = "c.fr", where = { 1 = "x" } }', "unknown keys ['where']"),
])
def test_recipe_schema(tmp_path, old, new, message):
    t = Tiny(tmp_path)
    t.write_recipe(lambda text: text.replace(old, new))
    with pytest.raises(InputError) as err:
        recipes.load_recipe(t.recipe)
    assert message in str(err.value) and str(err.value).startswith(str(t.recipe))


def test_recipe_defaults_are_filled(tmp_path):
    rec = recipes.load_recipe(Tiny(tmp_path).recipe)
    assert rec["preprocess"]["max_ratio"] == 9.0 and rec["extract"]["shard_sentences"] == 50_000
    assert rec["domain"]["estimator"] == "pivot" and rec["combine"]["n_tune"] == 1000


def test_recipes_dir_prefers_package_data(tmp_path, monkeypatch):
    fake = tmp_path / "pivot"
    (fake / "recipes_data").mkdir(parents=True)
    (fake / "recipes_data" / "x.toml").write_text("")
    monkeypatch.setattr(recipes, "__file__", str(fake / "recipes.py"))
    assert recipes._recipes_dir() == fake / "recipes_data"
    (fake / "recipes_data" / "x.toml").unlink()
    assert recipes._recipes_dir() == tmp_path / "recipes"


# ----------------------------------------------------------------------------- locking


def test_workdir_lock_is_exclusive(tmp_path):
    work = tmp_path / "w"
    with locking.WorkdirLock(work) as lock:
        assert lock.held and (work / ".lock").read_text().strip() == str(os.getpid())
        locking.check_not_locked(work)           # this process' own lock passes the probe
        code = ("import sys; from pivot import locking\n"
                "try:\n    locking.WorkdirLock(sys.argv[1]).acquire()\n"
                "except Exception as e:\n    print(e); sys.exit(3)\n")
        done = subprocess.run([sys.executable, "-c", code, str(work)], capture_output=True, text=True)
        assert done.returncode == 3
        assert done.stdout.strip().startswith(f"work directory {work} is in use by PID {os.getpid()}")
    assert not lock.held
    done = subprocess.run([sys.executable, "-c", code, str(work)], capture_output=True, text=True)
    assert done.returncode == 0
    locking.check_not_locked(work)


def test_lock_dies_with_its_holder(tmp_path):
    work = tmp_path / "w"
    holder = subprocess.Popen([sys.executable, "-c",
                               "import sys, time; from pivot import locking\n"
                               "locking.WorkdirLock(sys.argv[1]).acquire(); print('held', flush=True); "
                               "time.sleep(60)", str(work)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(InputError, match=f"is in use by PID {holder.pid}"):
            locking.check_not_locked(work)
    finally:
        holder.kill()
        holder.wait()
    locking.check_not_locked(work)               # killed: the kernel dropped the lock
    with locking.WorkdirLock(work):
        pass


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_sweep_stale(tmp_path):
    work, out_dir = tmp_path / "work", tmp_path / "out"
    dead, alive = _dead_pid(), os.getppid()
    stage = work / "extract-0123456789abcdef"
    partial = work / ".pivot-0123456789abcdef.partial"
    for d in (stage, partial, out_dir):
        d.mkdir(parents=True)
    gone = [partial / f".x-00001.npz.tmp-{dead}", work / f".links.npz.{dead}.tmp", stage / f"general.arpa.tmp{dead}",
            out_dir / f".bio.db.tmp-{dead}"]
    kept = [partial / f".x-00002.npz.tmp-{alive}", partial / f".x-00003.npz.tmp-{os.getpid()}",
            partial / "x-00000.npz", stage / "DONE", out_dir / f".other.db.tmp-{dead}", work / "notes.tmp"]
    for p in gone + kept:
        p.write_text("x")
    (work / f".dir.tmp-{dead}").mkdir()                            # folders are never removed
    removed = locking.sweep_stale(work, outputs=[out_dir / "bio.db"])
    assert sorted(removed) == sorted(gone)
    assert all(p.exists() for p in kept) and partial.is_dir() and (work / f".dir.tmp-{dead}").is_dir()
    assert locking.stale_owner(".bio.db.tmp-12") == 12 and locking.stale_owner("bio.db") is None


@pytest.mark.parametrize("value, ok", [(0, True), (1, True), (4 * locking.cores(), True),
                                       (4 * locking.cores() + 1, False), (-1, False), (100000, False),
                                       (True, False), ("8", False)])
def test_bounded_counts(value, ok):
    for check in (locking.bounded_threads, locking.bounded_workers):
        if ok:
            assert check(value) == value
        else:
            with pytest.raises(InputError):
                check(value)
    assert locking.bounded_workers(None) is None
