"""Bad input met after the preflight, and bad input to every command but `build`.

Every row of the sections "Found while building" and "Every other command" of
docs/bad-input.md is produced here: the case is run, and stderr must be one line equal to the
documented message (paths written as RECIPE, DATA, TMP, DB), with exit code 2 (Ctrl-C: 130),
no traceback and no database written. ``test_ranges`` reads the table of ranges and tries
each option at both ends and one step beyond; ``test_every_number_has_a_range`` checks that
the table names every numeric option of every command.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from pivot import locking
from pivot.cli import build_parser, main
from test_preflight import DOC, EN, Tiny, doc_table, template_regex

FOUND = "Found while building"
COMMANDS = "Every other command"


def run_cli(argv) -> tuple[int, str]:
    """main(argv) -> (exit code, stderr); argparse's refusals exit through SystemExit."""
    import io
    from contextlib import redirect_stderr

    err = io.StringIO()
    with redirect_stderr(err):
        try:
            rc = main([str(a) for a in argv])
        except SystemExit as exc:
            rc = exc.code
    return rc, err.getvalue()


def check_one_line(rc, err, want_rc, template, replace) -> None:
    assert rc == want_rc, err
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    line = lines[0]
    for path, name in replace:
        line = line.replace(str(path), name)
    template = template.replace("\\|", "|")   # a pipe is escaped in a Markdown table
    assert template_regex(template).match(line), f"\n  got: {line}\n  doc: {template}"


def test_every_case_is_documented():
    assert set(doc_table(FOUND)) == set(FOUND_CASES), (sorted(set(FOUND_CASES) ^ set(doc_table(FOUND))))
    assert set(doc_table(COMMANDS)) == set(COMMAND_CASES), sorted(set(COMMAND_CASES) ^ set(doc_table(COMMANDS)))


# ----------------------------------------------------------------------------- found while building


def _tiny(tmp_path, domain=True) -> Tiny:
    t = Tiny(tmp_path, domain=domain)
    t.cleanup = []
    return t


def kept_no_pair(t: Tiny, monkeypatch):
    # 80 words and a comma: 81 whitespace-separated words, 80 holding a letter, so preflight's
    # rule cannot say the pair is too long; Moses makes the comma a token: 81 > max_tokens 80.
    t.file("c.en", "".join(" ".join(["cells"] * 80) + " ,\n" for _ in EN))
    return run_cli(t.args())


def combine_no_candidates(t: Tiny, monkeypatch):
    # The tiny recipe as it is: its gold pairs are treat~cure (8.0, good) and cell~nucleus (2.0,
    # bad), both tuning pairs (n_tune 1000 >= 2). The bitext makes treat~cure a pair of General
    # (p(cure|treat) = 1/4, tests/test_cli.py) but never mentions cell: 1 candidate, good.
    return run_cli(t.args())


def disk_full(t: Tiny, monkeypatch):
    full = t.tmp / "full"
    full.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(full)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a 16 KiB tmpfs here (needs root): {done.stderr.decode().strip()}")
    try:
        rc, err = run_cli(t.args(out=full / "tiny.db"))
        assert os.listdir(full) == []         # the temporary database is removed
    finally:
        subprocess.run(["umount", str(full)], check=True)
    return rc, err


def file_size_limit(t: Tiny, monkeypatch):
    # Every stage first, unlimited; the rerun reuses them all and writes the database only,
    # in a process that may write files of at most 16 KiB (the tiny database takes 40 KiB).
    # Python ignores SIGXFSZ, so a write past the limit fails with EFBIG, as under `ulimit -f`.
    rc, err = run_cli(t.args(out=t.tmp / "first.db"))
    assert rc == 0, err

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (16384, 16384))

    done = subprocess.run([sys.executable, "-m", "pivot", *t.args(out=t.tmp / "limited.db")],
                          preexec_fn=limit, capture_output=True, text=True)
    assert not (t.tmp / "limited.db").exists() and not list(t.tmp.glob(".limited.db.tmp-*"))
    return done.returncode, done.stderr


def interrupted(t: Tiny, monkeypatch):
    """Ctrl-C while a --workers 2 build runs: SIGINT to the whole process group, as a terminal
    sends it, once the cluster is up (its log line); the rest of the build takes seconds."""
    args = [a for a in t.args(out=t.tmp / "tiny.db") if a != "-q"][:-2] + ["--workers", "2"]
    # SIGINT as a terminal's shell leaves it: a suite run as a background job (`cmd &` without
    # job control) inherits SIGINT ignored, and an ignored signal stays ignored across exec
    proc = subprocess.Popen([sys.executable, "-m", "pivot", *args], stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    for line in proc.stderr:
        if " dask: " in line:
            os.killpg(proc.pid, signal.SIGINT)
            break
    else:
        proc.wait()
        pytest.fail("the build ended before its cluster started")
    rest = proc.stderr.read()
    proc.wait(timeout=120)
    # What follows the Ctrl-C: no traceback (each worker printed one of 32 lines, and the client
    # one per pending task); at most a log line of the build's own under way, then the one line.
    assert "Traceback" not in rest and len(rest.splitlines()) <= 3, rest
    lines = [line for line in rest.splitlines() if " pivot INFO " not in line]
    assert not t.out.exists()
    assert _session_left(proc.pid) == [], "a worker outlived the interrupted build"
    return proc.returncode, "\n".join(lines) + "\n"


def _session_left(sid: int, seconds: float = 15.0) -> list:
    """Processes of session ``sid`` (the build and its workers) still alive after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        alive = []
        for p in psutil.process_iter():
            try:
                if os.getsid(p.pid) == sid and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p)
            except (ProcessLookupError, PermissionError, psutil.NoSuchProcess):
                pass
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


# id -> (setup and run: (Tiny, monkeypatch) -> (exit code, stderr), a domain?, the exit code)
FOUND_CASES = {
    "kept-no-pair": (kept_no_pair, True, 2),
    "combine-no-candidates": (combine_no_candidates, True, 2),
    "disk-full": (disk_full, False, 2),
    "file-size-limit": (file_size_limit, False, 2),
    "interrupted": (interrupted, False, 130),
}


@pytest.mark.parametrize("case", list(FOUND_CASES))
def test_found_while_building(case, tmp_path, monkeypatch):
    run, domain, want_rc = FOUND_CASES[case]
    t = _tiny(tmp_path, domain)
    rc, err = run(t, monkeypatch)
    check_one_line(rc, err, want_rc, doc_table(FOUND)[case],
                   [(t.recipe, "RECIPE"), (t.work, "WORK"), (t.data, "DATA"), (t.tmp, "TMP")])
    assert not t.out.exists()


# ----------------------------------------------------------------------------- every other command


@pytest.fixture(scope="module")
def tiny_db(tmp_path_factory) -> Path:
    """The tiny recipe's database (General only)."""
    t = Tiny(tmp_path_factory.mktemp("db"), domain=False)
    rc, err = run_cli(t.args())
    assert rc == 0, err
    return t.out


def damaged(sql: str):
    def make(db: Path, tmp: Path) -> Path:
        copy = tmp / "damaged.db"
        shutil.copyfile(db, copy)
        conn = sqlite3.connect(copy)
        conn.execute(sql)
        conn.commit()
        conn.close()
        return copy
    return make


def weights(content: str):
    def make(tmp: Path) -> Path:
        (tmp / "weights.json").write_text(content)
        return tmp / "weights.json"
    return make


NOT_JSON = "UPDATE meta SET value = 'not json' WHERE key = 'signature'"

# id -> argv(db, tmp, monkeypatch)
COMMAND_CASES = {
    "db-table-dropped": lambda db, tmp, mp: ["lookup", damaged("DROP TABLE phrase")(db, tmp), "treat"],
    "db-column-dropped": lambda db, tmp, mp: ["lookup", damaged("ALTER TABLE phrase DROP COLUMN count")(db, tmp),
                                              "treat"],
    "db-meta-not-json": lambda db, tmp, mp: ["export", damaged(NOT_JSON)(db, tmp)],
    "search-damaged": lambda db, tmp, mp: ["search", damaged("DROP TABLE foreign_phrase")(db, tmp), "treat"],
    "serve-damaged": lambda db, tmp, mp: ["serve", damaged(NOT_JSON)(db, tmp), "--metadata", tmp / "m.json"],
    "lookup-k-0": lambda db, tmp, mp: ["lookup", db, "treat", "-k", "0"],
    "lookup-k-negative": lambda db, tmp, mp: ["lookup", db, "treat", "-k", "-1"],
    "lookup-k-huge": lambda db, tmp, mp: ["lookup", db, "treat", "-k", str(2**64)],
    "search-n-negative": lambda db, tmp, mp: ["search", db, "tr*", "-n", "-1"],
    # bytes that are not UTF-8 reach Python as lone surrogates (os.fsdecode, as sys.argv is decoded)
    "lookup-not-utf8": lambda db, tmp, mp: ["lookup", db, os.fsdecode(b"tr\xffeat")],
    "search-not-utf8": lambda db, tmp, mp: ["search", db, os.fsdecode(b"\xff*")],
    "export-relation-unknown": lambda db, tmp, mp: ["export", db, "--relation", "Equivalence,Synonym"],
    "export-size-unknown": lambda db, tmp, mp: ["export", db, "--size", "huge"],
    "paraphrase-beam-0": lambda db, tmp, mp: ["paraphrase", db, "--beam", "0", "we treat it"],
    "paraphrase-lm-weight-nan": lambda db, tmp, mp: ["paraphrase", db, "--lm-weight", "nan", "we treat it"],
    "weights-not-json": lambda db, tmp, mp: ["paraphrase", db, "--weights", weights("not json\n")(tmp), "x"],
    "weights-unknown": lambda db, tmp, mp: ["paraphrase", db, "--weights",
                                            weights('{"lm": 1.0, "identity_bias": 2.0}')(tmp), "x"],
    "weights-not-finite": lambda db, tmp, mp: ["paraphrase", db, "--weights", weights('{"lm": NaN}')(tmp), "x"],
    "weights-missing": lambda db, tmp, mp: ["paraphrase", db, "--weights", tmp / "nowhere.json", "x"],
    "align-eval-threads-negative": lambda db, tmp, mp: ["align-eval", "--threads", "-1"],
    "align-eval-threads-huge": lambda db, tmp, mp: ["align-eval", "--threads", "100000"],
    "serve-no-uvicorn": lambda db, tmp, mp: (mp.setitem(sys.modules, "uvicorn", None), ["serve", db])[1],
    "serve-no-datasette": lambda db, tmp, mp: (mp.setitem(sys.modules, "datasette.app", None), ["serve", db])[1],
}


@pytest.mark.parametrize("case", list(COMMAND_CASES))
def test_command(case, tiny_db, tmp_path, monkeypatch):
    before = tiny_db.read_bytes()
    argv = COMMAND_CASES[case](tiny_db, tmp_path, monkeypatch)
    rc, err = run_cli(argv)
    check_one_line(rc, err, 2, doc_table(COMMANDS)[case], [(tiny_db, "DB"), (tmp_path, "TMP")])
    assert tiny_db.read_bytes() == before


def test_what_the_bounds_replace_still_works(tiny_db, tmp_path, capsys):
    """The answers the refused values used to get wrong, given right: -k 1 is the best
    paraphrase, -n 0 every match (4 phrases hold a token starting "tr": treat, treat it,
    we treat, we treat it), and a weights file of known names is read."""
    assert main(["lookup", str(tiny_db), "treat", "-k", "1", "--format", "json"]) == 0
    assert [p["paraphrase"] for p in json.loads(capsys.readouterr().out)["paraphrases"]] == ["cure"]
    assert main(["search", str(tiny_db), "tr*", "-n", "0", "--format", "json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["n_matches"] == 4 and len(found["matches"]) == 4
    from pivot.sentences.paraphrase import Weights, load_weights

    path = weights('{"weights": {"lm": 0.25, "identity": 1}, "bleu": 49.7}')(tmp_path)
    assert load_weights(path) == Weights(lm=0.25, identity=1.0)


def test_ctrl_c_blocks_sigint_in_the_cluster_only():
    """The mask is restored once the cluster is up: this thread answers Ctrl-C again."""
    from pivot.pipeline.engine import _sigint_blocked

    before = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    with _sigint_blocked():
        assert signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, set())
    assert signal.pthread_sigmask(signal.SIG_BLOCK, set()) == before


# ----------------------------------------------------------------------------- ranges

# The positionals each command needs before an option can be parsed.
BASE = {"build": [], "lookup": ["x.db", "treat"], "search": ["x.db"], "serve": ["x.db"], "eval": ["x.db"],
        "paraphrase": ["x.db"], "identify": ["x.db", "--train", "a", "--test", "b"], "align-eval": []}


def range_table() -> list[tuple[str, str, str]]:
    rows, current = [], None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("### "):
            current = line[4:].strip()
        m = re.match(r"^\|\s*([a-z-]+)\s*\|\s*`(-[-a-z]+)`\s*\|\s*(.+?)\s*\|\s*$", line)
        if m and current == "Ranges":
            rows.append(m.groups())
    return rows


def _bounds(text: str) -> tuple[int, int] | None:
    """"1 .. 1000000 (...)" -> (1, 1000000); "finite" -> None."""
    if text == "finite":
        return None
    cores = 4 * locking.cores()
    m = re.match(r"(\d+) \.\. (4 × cores|\d+)\b", text)
    assert m, text
    return int(m.group(1)), cores if m.group(2) == "4 × cores" else int(m.group(2))


def _parse(command, option, value) -> tuple[int, str]:
    import io
    from contextlib import redirect_stderr

    # "--opt=-inf": argparse would take a lone "-inf" for an option (it is no negative number)
    words = [f"{option}={value}"] if option.startswith("--") else [option, value]
    err = io.StringIO()
    with redirect_stderr(err):
        try:
            build_parser().parse_args([command, *BASE[command], *words])
            return 0, ""
        except SystemExit as exc:
            return exc.code, err.getvalue()


@pytest.mark.parametrize("command, option, text", range_table())
def test_ranges(command, option, text):
    bounds = _bounds(text)
    if bounds is None:
        assert _parse(command, option, "0.5")[0] == 0
        for bad in ("nan", "inf", "-inf"):
            rc, err = _parse(command, option, bad)
            assert rc == 2 and len(err.splitlines()) == 1
            assert f"must be a finite number (got {bad})" in err, err
        return
    lo, hi = bounds
    assert _parse(command, option, str(lo))[0] == 0
    assert _parse(command, option, str(hi))[0] == 0
    for bad in (lo - 1, hi + 1):
        rc, err = _parse(command, option, str(bad))
        assert rc == 2 and len(err.splitlines()) == 1, err
        assert re.search(rf"argument [-/a-z]*{option}[-/a-z]*: must be between {lo}\b.* and {hi}\b.*\(got {bad}\)",
                         err), err


def test_every_number_has_a_range():
    """Every option of every command that takes a number is in the table of ranges, and none
    is a bare int or float (whose range would be all of them), but build's --threads and
    --workers, which its preflight bounds (build's --parts is in the table)."""
    numeric = set()
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for command, parser in sub.choices.items():
        for action in parser._actions:
            name = getattr(action.type, "__name__", "")
            if name in ("int", "float"):
                option = max(action.option_strings, key=len) if action.option_strings else action.dest
                if command == "build" and action.type is int:  # a bare int: its preflight bounds it
                    assert option in ("--threads", "--workers")
                    continue
                assert action.type not in (int, float), (command, option)
                numeric.add((command, tuple(action.option_strings)))
    table = [(c, o) for c, o, _ in range_table()]
    assert len(set(table)) == len(table)
    # each numeric option is one row (the table names an option by one of its spellings)
    rows = [[(c, o) for o in opts if (c, o) in table] for c, opts in sorted(numeric)]
    assert all(len(r) == 1 for r in rows), [opts for (c, opts), r in zip(sorted(numeric), rows) if len(r) != 1]
    assert sorted(r[0] for r in rows) == sorted(table)
