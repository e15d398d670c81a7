"""The output guard of every command (pivot/outputs.py; docs/bad-input.md, "Every command's outputs").

``test_bad_output`` runs each row of that section's table on a tiny database built from the
synthetic recipe of tests/test_build_domain.py: exit code 2, one line on stderr equal to the
documented message, no traceback, no temporary file left, and the sha256 of every file the
command reads and of the file the output named unchanged. The other tests cover what is
accepted: replacing, links, several outputs, the check before the rename, stdout.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from pivot import outputs
from pivot.cli import main
from pivot.errors import InputError
from test_build_domain import write_tiny
from test_preflight import doc_table, template_regex

SECTION = "Every command's outputs"
MSRP = ("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
        "1\t1\t2\tthe cell divides\tthe cell splits\n"
        "0\t3\t4\twe eat pizza\tthey like music\n")


def sha256(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The tiny domain recipe, its data and its database (built once)."""
    tmp = tmp_path_factory.mktemp("guard")
    write_tiny(tmp)
    assert main(["-q", "build", "--recipe", str(tmp / "tinybio.toml"), "--data", str(tmp / "data"),
                 "--work", str(tmp / "work"), "--out", str(tmp / "t.db"), "--workers", "1"]) == 0
    return tmp


class Site:
    """A copy of the recipe, data and database in the test's own folder."""

    def __init__(self, built: Path, tmp: Path):
        self.tmp = tmp
        self.data = tmp / "data"
        shutil.copytree(built / "data", self.data)
        self.recipe = tmp / "tinybio.toml"
        shutil.copy(built / "tinybio.toml", self.recipe)
        self.db = tmp / "t.db"
        shutil.copy(built / "t.db", self.db)

    def recipe_args(self) -> list[str]:
        return ["--recipe", str(self.recipe), "--data", str(self.data), "--work", str(self.tmp / "work")]

    def file(self, name, text) -> Path:
        path = self.tmp / name
        path.write_text(text)
        return path

    def normalize(self, text: str) -> str:
        return text.replace(str(self.data), "DATA").replace(str(self.tmp), "TMP")


@pytest.fixture
def site(built, tmp_path):
    return Site(built, tmp_path)


def _read_only(monkeypatch, path: Path):
    """os.access says no for writing `path` (the tests may run as root, whom modes do not stop)."""
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, *a, **k:
                        False if Path(p) == path and mode & os.W_OK else real(p, mode, *a, **k))


def _after(_, argv, kept=()):
    """(argv, kept) once the setup in the first argument has run."""
    return argv, list(kept)


def _identify(s: Site):
    train, test = s.file("train.txt", MSRP), s.file("test.txt", MSRP)
    return ["identify", str(s.db), "--train", str(train), "--test", str(test), "--predictions", str(test)], [test]


# id -> setup(site, monkeypatch) -> (argv, the files that must keep their bytes besides the
# database, the recipe and the data files, which are always checked)
CASES = {
    "export-out-is-database": lambda s, mp: (["export", str(s.db), "-o", str(s.db)], []),
    "export-out-hard-link": lambda s, mp: _after(
        os.link(s.db, s.tmp / "link.txt"), ["export", str(s.db), "-o", str(s.tmp / "link.txt")]),
    "export-fails": lambda s, mp: (
        ["export", str(s.db), "--model", "nope", "-o", str(s.file("existing.txt", "precious\n"))],
        [s.tmp / "existing.txt"]),
    "export-out-is-fifo": lambda s, mp: _after(
        os.mkfifo(s.tmp / "pipe"), ["export", str(s.db), "-o", str(s.tmp / "pipe")]),
    "export-out-read-only": lambda s, mp: _after(
        _read_only(mp, s.file("existing.txt", "precious\n")),
        ["export", str(s.db), "-o", str(s.tmp / "existing.txt")], [s.tmp / "existing.txt"]),
    "serve-metadata-is-database": lambda s, mp: (["serve", str(s.db), "--metadata", str(s.db)], []),
    "serve-metadata-is-directory": lambda s, mp: _after(
        (s.tmp / "meta").mkdir(), ["serve", str(s.db), "--metadata", str(s.tmp / "meta")]),
    "score-out-is-recipe": lambda s, mp: (["-q", "score", *s.recipe_args(), "-o", str(s.recipe)], []),
    "score-out-is-bitext": lambda s, mp: (["-q", "score", *s.recipe_args(), "-o", str(s.data / "c.en")], []),
    "eval-report-is-database": lambda s, mp: (
        ["eval", str(s.db), *s.recipe_args()[:4], "--report", str(s.db)], []),
    "eval-report-is-gold": lambda s, mp: (
        ["eval", str(s.db), *s.recipe_args()[:4], "--report", str(s.data / "control.txt")], []),
    "eval-report-without-recipe": lambda s, mp: (
        ["eval", str(s.db), "--gold", str(s.data / "control.txt"), "--report", str(s.tmp / "r.md")], []),
    "identify-predictions-is-test": lambda s, mp: _identify(s),
    "stdout-closed": "subprocess",
}


def test_every_case_is_documented():
    rows = doc_table(SECTION)
    assert set(rows) == set(CASES), (sorted(set(CASES) - set(rows)), sorted(set(rows) - set(CASES)))


def _closed_stdout():
    os.close(1)


@pytest.mark.parametrize("case", list(CASES))
def test_bad_output(case, site, capsys, monkeypatch):
    s = site
    if CASES[case] == "subprocess":   # `pivot lookup t.db divides >&-`
        argv, kept = None, []
    else:
        argv, kept = CASES[case](s, monkeypatch)
    kept = [s.db, s.recipe, *sorted(p for p in s.data.rglob("*") if p.is_file()), *kept]
    before = {p: sha256(p) for p in kept}
    if argv is None:
        done = subprocess.run([sys.executable, "-m", "pivot", "lookup", str(s.db), "divides"],
                              preexec_fn=_closed_stdout, stderr=subprocess.PIPE, text=True)
        rc, err = done.returncode, done.stderr
    else:
        rc = main(argv)
        err = capsys.readouterr().err
    assert rc == 2, err
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    message = s.normalize(err.splitlines()[0])
    template = doc_table(SECTION)[case]
    assert template_regex(template).match(message), f"\n  got: {message}\n  doc: {template}"
    assert {p: sha256(p) for p in kept} == before
    assert not [p for p in s.tmp.rglob("*") if ".tmp-" in p.name]
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


# ----------------------------------------------------------------------------- accepted


def test_export_to_a_file_equals_stdout(site, capsys):
    """-o writes through a temporary file: the same bytes as the export to stdout."""
    assert main(["-q", "export", str(site.db)]) == 0
    streamed = capsys.readouterr().out
    out = site.tmp / "out.ppdb"
    out.write_text("an older export\n")
    assert main(["-q", "export", str(site.db), "-o", str(out)]) == 0
    assert streamed and out.read_text(encoding="utf-8") == streamed
    assert sorted(p.name for p in site.tmp.iterdir()) == ["data", "out.ppdb", "t.db", "tinybio.toml"]


def test_success_replaces_and_keeps_the_mode(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old\n")
    os.chmod(target, 0o640)
    with outputs.Outputs([tmp_path / "in.txt"]) as guard:
        dest = guard.add(target, "-o")
        with outputs.writing(dest) as fh:
            fh.write("new\n")
        assert target.read_text() == "old\n"          # renamed only at the group's end
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]
    # written twice in one command: the second write is the one renamed
    with outputs.Outputs():
        outputs.write_text(target, "first\n")
        outputs.write_text(target, "second\n")
    assert target.read_text() == "second\n" and sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_symbolic_link_output_writes_through(tmp_path):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "report.md"
    target.write_text("old\n")
    link = tmp_path / "report.md"
    link.symlink_to(target)
    outputs.write_text(link, "new\n")
    assert link.is_symlink() and target.read_text() == "new\n"
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["report.md"]


def test_group_failure_replaces_nothing(tmp_path):
    a, b = tmp_path / "a.md", tmp_path / "b.png"
    a.write_text("old a\n")
    b.write_bytes(b"old b")
    for failure in (RuntimeError("the work failed"), KeyboardInterrupt()):
        with pytest.raises(type(failure)):
            with outputs.Outputs() as guard:
                guard.add(a, "--report")
                outputs.write_text(a, "new a\n")
                with outputs.replacing(b) as tmp:
                    tmp.write_bytes(b"new b")
                raise failure
        assert (a.read_text(), b.read_bytes()) == ("old a\n", b"old b")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["a.md", "b.png"]
    # a failure inside one write removes that file's temporary too
    with pytest.raises(ValueError):
        with outputs.writing(a) as fh:
            fh.write("half")
            raise ValueError("half written")
    assert a.read_text() == "old a\n" and sorted(p.name for p in tmp_path.iterdir()) == ["a.md", "b.png"]


def test_target_checked_again_before_the_rename(tmp_path):
    """A target that turns into a FIFO during the run, or an input that appears under a declared
    output's name, is refused at the end: no output is replaced."""
    a, fifo = tmp_path / "a.txt", tmp_path / "later"
    a.write_text("old\n")
    with pytest.raises(InputError, match=r"^-o .*/later: is a FIFO \(named pipe\), not a regular file"):
        with outputs.Outputs() as guard:
            outputs.write_text(guard.add(a, "--json"), "new\n")
            outputs.write_text(guard.add(fifo, "-o"), "new\n")
            os.mkfifo(fifo)
    assert a.read_text() == "old\n" and stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "later"]
    with pytest.raises(InputError, match=r"is an input of this command \(the ranking .*/a.txt\)"):
        with outputs.Outputs() as guard:
            guard.add(a, "-o")
            guard.input(a, "the ranking")
    assert a.read_text() == "old\n"


def test_two_outputs_may_not_share_a_file(tmp_path):
    with pytest.raises(InputError, match=r"^--json .*/r.md: is also the output of --report"):
        with outputs.Outputs() as guard:
            guard.add(tmp_path / "r.md", "--report")
            guard.add(tmp_path / "r.md", "--json")


@pytest.mark.parametrize("unbuffered", ["", "1"])
def test_full_standard_output_is_an_error(site, unbuffered):
    """Buffered, the error is met at the flush main() makes (it used to be "Exception ignored"
    at exit, code 120); unbuffered, at the first write."""
    env = {**os.environ, "PYTHONUNBUFFERED": unbuffered}
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "pivot", "lookup", str(site.db), "divides"], stdout=full,
                              stderr=subprocess.PIPE, text=True, env=env)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "pivot lookup: error: [Errno 28] No space left on device (run with --debug for the traceback)"]


def test_failed_index_build_leaves_the_database_as_it_was(site, monkeypatch):
    """The phrase index is written into the database (in place, one transaction): made to fail
    half-way (the FTS table is created, filling it fails), the file keeps its bytes."""
    from pivot.store import search

    before = sha256(site.db)
    monkeypatch.setattr(search, "FTS_SQL", f"CREATE TABLE {search.FTS_TABLE} (text)")
    with pytest.raises(InputError, match="cannot add the phrase search index"):
        search.build_phrase_index(site.db)
    assert sha256(site.db) == before
    conn = search.connect(site.db)
    try:
        assert not search.has_phrase_index(conn)
    finally:
        conn.close()
    assert sorted(p.name for p in site.tmp.iterdir()) == ["data", "t.db", "tinybio.toml"]


def test_score_checks_no_database_it_does_not_write(site, built, monkeypatch, capsys):
    """`pivot score` writes its ranking, not a database: a file named like the recipe's default
    database (tinybio.db) in the current folder is neither checked nor touched."""
    monkeypatch.chdir(site.tmp)
    notes = site.file("tinybio.db", "my notes, not a database\n")
    ranked = site.tmp / "ranked.tsv"
    argv = ["-q", "score", "--recipe", str(site.recipe), "--data", str(site.data), "--work", str(built / "work")]
    assert main([*argv, "-o", str(ranked)]) == 0, capsys.readouterr().err
    assert notes.read_text() == "my notes, not a database\n"
    assert ranked.read_text().count("\n") == 12        # one line per sentence pair of the bitext


def test_failing_eval_keeps_its_previous_report_and_figures(site, monkeypatch, capsys):
    """The figures are drawn before the report is written; when the report's writing fails,
    no figure has replaced its previous file (they are renamed together at the end)."""
    from pivot.eval import evaluate

    report = site.tmp / "docs" / "results.md"
    argv = ["-q", "eval", str(site.db), "--recipe", str(site.recipe), "--data", str(site.data),
            "--report", str(report), "--n-boot", "20"]
    assert main(argv) == 0, capsys.readouterr().err
    figures = sorted((report.parent / "figures").iterdir())
    assert [p.name for p in figures] == ["results-combined.png", "results-subsampled.png"]
    for p in [report, *figures]:
        p.write_bytes(b"the previous run's " + p.name.encode())

    def fail(*args, **kwargs):
        raise RuntimeError("the report could not be written")

    monkeypatch.setattr(evaluate, "write_report", fail)
    with pytest.raises(RuntimeError):
        main(argv)
    for p in [report, *figures]:
        assert p.read_bytes() == b"the previous run's " + p.name.encode()
    assert sorted(p.name for p in report.parent.rglob("*")) == [
        "figures", "results-combined.png", "results-subsampled.png", "results.md"]


def test_a_file_marked_read_only_is_refused_whoever_runs(tmp_path):
    """Mode 0444, no os.access stub: root (whom os.access lets write anything) is refused too,
    and the file keeps its bytes."""
    target = tmp_path / "kept.txt"
    target.write_text("precious\n")
    os.chmod(target, 0o444)
    with pytest.raises(InputError, match="exists and is read-only; refusing to replace it"):
        outputs.check_target(target, "-o")
    assert target.read_text() == "precious\n"


def test_a_folder_marked_read_only_is_refused_whoever_runs(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    os.chmod(folder, 0o555)
    try:
        with pytest.raises(InputError, match=r"cannot write in .*ro \(no permission, or a read-only"):
            outputs.check_target(folder / "new.txt", "-o")
        assert list(folder.iterdir()) == []
    finally:
        os.chmod(folder, 0o755)


def test_read_only_is_no_write_bit_for_anyone(tmp_path):
    target = tmp_path / "f.txt"
    target.write_text("x\n")
    for mode, read_only in ((0o444, True), (0o555, True), (0o000, True), (0o464, False), (0o644, False),
                            (0o200, False), (0o446, False)):
        os.chmod(target, mode)
        assert outputs._read_only(os.stat(target)) is read_only, oct(mode)
