"""The build's stages side by side on a cluster (pivot.pipeline.run.run_stages).

A stage starts as soon as every stage it needs (pivot/pipeline/graph.py) is done: on a cluster
align and the LM branch (lmtext <- corpus) run at the same time; in one process the stages run
one after another in the graph's order. Side by side or not, the database is the same bytes;
a stage that fails while another runs stops the build with its own error, at once.
"""
import dataclasses
import io
import threading
import time

import pytest

from pivot.cli import main
from pivot.errors import InputError
from pivot.pipeline import graph
from pivot.pipeline import run as R
from pivot.store.db import ParaphraseDB
from pivot.store.export import export_ppdb
from tests.test_build_domain import write_tiny

#: Seconds a stage waits for another to start before the test calls them not side by side.
MEET = 20


def _recorder(log, lock, name, seconds=0.0, meet=None, fail=None):
    """A stage of run_stages: records its start and end; waits for ``meet`` (an Event) if given."""
    def step():
        with lock:
            log.append(("start", name))
        if meet is not None:
            assert meet.wait(MEET), f"{name}: the other stage never started"
        time.sleep(seconds)
        if fail is not None:
            raise fail
        with lock:
            log.append(("end", name))
    return step


def test_one_process_runs_the_stages_one_after_another_in_graph_order():
    log, lock = [], threading.Lock()
    names = ["lmtext", "corpus", "align", "lm", "encode"]
    R.run_stages({n: _recorder(log, lock, n) for n in names}, side_by_side=False)
    # graph.order(): corpus, align, encode, lmtext, lm; each ends before the next starts
    assert log == [(e, n) for n in ("corpus", "align", "encode", "lmtext", "lm") for e in ("start", "end")]


def test_on_a_cluster_independent_stages_run_at_once_and_dependents_wait():
    """align and lmtext both need only corpus: each waits for the other to have started (a
    one-after-another runner would time out there); lm waits for lmtext, encode for align."""
    log, lock = [], threading.Lock()
    align_started, lmtext_started = threading.Event(), threading.Event()

    def both(name, own, other):
        inner = _recorder(log, lock, name, 0.05, meet=other)

        def step():
            own.set()
            inner()
        return step

    steps = {"corpus": _recorder(log, lock, "corpus", 0.05),
             "align": both("align", align_started, lmtext_started),
             "lmtext": both("lmtext", lmtext_started, align_started),
             "encode": _recorder(log, lock, "encode"), "lm": _recorder(log, lock, "lm")}
    R.run_stages(steps, side_by_side=True)
    at = {event: i for i, event in enumerate(log)}
    assert len(log) == 10
    assert at[("end", "corpus")] < min(at[("start", "align")], at[("start", "lmtext")])
    assert max(at[("start", "align")], at[("start", "lmtext")]) < min(at[("end", "align")], at[("end", "lmtext")])
    assert at[("end", "align")] < at[("start", "encode")] and at[("end", "lmtext")] < at[("start", "lm")]


def test_a_failing_stage_stops_the_others_and_raises_its_error():
    """lmtext fails while align runs: on_error is called once (the engine's stop, which ends the
    other stages' waits: here the event align waits on), the error raised is lmtext's, and no
    stage after them starts."""
    log, lock = [], threading.Lock()
    stopped = threading.Event()
    calls = []

    def stop():
        calls.append(1)
        stopped.set()

    def align():
        with lock:
            log.append(("start", "align"))
        assert stopped.wait(MEET)
        raise RuntimeError("cancelled")  # as a gather whose tasks were cancelled raises

    steps = {"corpus": _recorder(log, lock, "corpus"), "align": align,
             "lmtext": _recorder(log, lock, "lmtext", 0.1, fail=InputError("bad in-domain text", "bio.txt", 3)),
             "encode": _recorder(log, lock, "encode"), "lm": _recorder(log, lock, "lm")}
    t0 = time.perf_counter()
    with pytest.raises(InputError, match=r"^bio.txt:3: bad in-domain text$"):
        R.run_stages(steps, side_by_side=True, on_error=stop)
    assert time.perf_counter() - t0 < MEET / 2
    assert calls == [1]
    assert {name for event, name in log if event == "start"} == {"corpus", "align", "lmtext"}


def two_languages(tmp):
    """write_tiny's recipe with a second pivot language ("de": the same sentences, its own corpus
    and align stages); returns the build's arguments."""
    args = write_tiny(tmp)
    data, recipe = tmp / "data", tmp / "tinybio.toml"
    (data / "c.de").write_text((data / "c.fr").read_text())
    text = recipe.read_text()
    text = text.replace('[align]\nmethod = "pharaoh"\npharaoh = { fr = "c.align" }',
                        '[[bitext]]\nlang = "de"\nsources = [{ name = "c", format = "parallel", en = "c.en", f = "c.de" }]\n'
                        '[align]\nmethod = "pharaoh"\npharaoh = { fr = "c.align", de = "c.align" }')
    assert text.count("[[bitext]]") == 2
    recipe.write_text(text)
    return args


def _exports(path) -> dict:
    with ParaphraseDB(path) as db:
        out = {}
        for model in db.models:
            buf = io.BytesIO()
            export_ppdb(db, buf, model, show_all=True)
            out[model] = buf.getvalue()
        return db.signature, out


def test_two_workers_build_the_bytes_of_one_with_align_and_lmtext_side_by_side(tmp_path, monkeypatch, caplog):
    """A two-language tiny build at --workers 2 (the stages side by side, their heavy work on the
    workers) writes the signature and every model's export of the --workers 1 build (one after
    another, in this process). On the cluster align and lmtext meet: each waits until the
    other has started, so the build would stop there if they ran one after another."""
    (tmp_path / "a").mkdir()
    a = two_languages(tmp_path / "a")
    assert main(["-q", "build", *a, "--out", str(tmp_path / "one.db"), "--workers", "1"]) == 0

    started = {"align": threading.Event(), "lmtext": threading.Event()}
    align, lmtext = graph.STAGES["align"], graph.STAGES["lmtext"]

    def meet(name, other):
        started[name].set()
        assert started[other].wait(MEET), f"{name} ran alone: {other} never started beside it"

    def meeting_align(context):  # a generator, as align's run: every language's jobs run together
        meet("align", "lmtext")
        return (yield from align.run(context))

    def meeting_lmtext(context):
        meet("lmtext", "align")
        lmtext.run(context)
    monkeypatch.setitem(graph.STAGES, "align", dataclasses.replace(align, run=meeting_align))
    monkeypatch.setitem(graph.STAGES, "lmtext", dataclasses.replace(lmtext, run=meeting_lmtext))
    assert main(["build", "--recipe", a[1], "--data", a[3], "--work", str(tmp_path / "work2"),
                 "--out", str(tmp_path / "two.db"), "--workers", "2"]) == 0
    one, two = _exports(tmp_path / "one.db"), _exports(tmp_path / "two.db")
    assert one[0] == two[0] and one[1] == two[1] and len(one[1]) >= 3
    assert len(one[1]["general"].splitlines()) >= 6  # the synonyms of the tiny bitext, both ways
    # the cluster ran the corpus stages' and the LM branch's tasks
    logged = caplog.text
    for batch in ("corpus.fr-chunks: 1 tasks", "corpus.fr-join: 1 tasks", "corpus.de-chunks: 1 tasks",
                  "corpus.de-join: 1 tasks", "lmtext: 1 tasks", "lm: 3 tasks", "score: 3 tasks"):
        assert batch in logged


def test_a_stage_failing_on_a_cluster_while_another_runs_is_one_error_and_no_hang(tmp_path, monkeypatch, capsys):
    """lmtext raises an InputError while align holds a task of 60 s on the workers: the build
    stops within seconds with lmtext's one-line error and exit code 2 (the task is cancelled,
    the cluster closed), and no later stage starts."""
    args = two_languages(tmp_path)
    align = graph.STAGES["align"]
    submitted = threading.Event()

    def slow_align(context):
        if not submitted.is_set():  # the first language's job
            context.engine.client()  # the cluster is up before the task is submitted
            submitted.set()
            context.engine.map(time.sleep, [(60,)], name="sleep")
        return (yield from align.run(context))

    def failing_lmtext(context):
        assert submitted.wait(MEET)
        time.sleep(0.5)  # the sleep task is on a worker
        raise InputError("the in-domain text is unreadable", tmp_path / "data" / "bio.txt", 7)

    monkeypatch.setitem(graph.STAGES, "align", dataclasses.replace(align, run=slow_align))
    monkeypatch.setitem(graph.STAGES, "lmtext", dataclasses.replace(graph.STAGES["lmtext"], run=failing_lmtext))
    t0 = time.perf_counter()
    assert main(["build", *args, "--out", str(tmp_path / "t.db"), "--workers", "2"]) == 2
    assert time.perf_counter() - t0 < 30  # the sleep task was cancelled, not waited for (nor its thread)
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error" in line]
    assert errors == [f"pivot build: error: {tmp_path / 'data' / 'bio.txt'}:7: the in-domain text is unreadable"]
    assert "stage encode" not in err and "stage lm " not in err
    assert not (tmp_path / "t.db").exists()
