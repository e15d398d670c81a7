"""Where the sharded tasks run: the cluster started in the background, task order, clean exits."""
import pytest

from pivot.pipeline.engine import Engine


def _append(path, i):
    with open(path, "a") as fh:
        fh.write(f"{i}\n")
    return i * 10


def test_prestarted_cluster_runs_tasks_and_closes_without_orphans(workers_left):
    engine = Engine(workers=2)
    engine.prestart()
    assert engine.map(pow, [(2, 3), (3, 2), (5, 1)], name="pow") == [8, 9, 5]
    assert len(engine.worker_pids()) == 2
    engine.close()
    assert workers_left() == []


def _watchers(server):
    """(tick seconds, system monitor ms, profiler on) of a Dask server."""
    return server._tick_interval, server.periodic_callbacks["monitor"].callback_time, "profile" in server.periodic_callbacks


def _worker_watchers(dask_worker):
    return _watchers(dask_worker) + (dask_worker.memory_manager.memory_monitor_interval,)


def _scheduler_watchers(dask_scheduler):
    return _watchers(dask_scheduler)


def test_local_cluster_slows_dasks_own_watchers(workers_left):
    """The local cluster's scheduler and workers run with LOCAL_CLUSTER_CONFIG: a tick every
    second (Dask's default: every 20 ms), the system monitor every 5 s (500 ms), no profiler
    (every 10 ms), the memory monitor every second (100 ms); the nannies, which watch their
    worker's memory, too. An idle cluster then takes ~2% of a core instead of 10-13%."""
    with Engine(workers=2) as engine:
        client = engine.client()
        assert sorted(client.run(_worker_watchers).values()) == [(1.0, 5000.0, False, 1.0)] * 2
        assert client.run_on_scheduler(_scheduler_watchers) == (1.0, 5000.0, False)
        nannies = engine._cluster.workers.values()
        assert [n.memory_manager.memory_monitor_interval for n in nannies] == [1.0, 1.0]
    assert workers_left() == []


def test_the_background_start_says_nothing_until_the_build_uses_the_cluster(workers_left, caplog):
    """A cluster started beside preflight logs its line at its first use, not from the
    background: a build whose inputs fail meanwhile says its one error line alone."""
    import logging

    engine = Engine(workers=2)
    with caplog.at_level(logging.INFO, logger="pivot"):
        engine.prestart()
        engine._starter.join()
        assert engine.running and not [r for r in caplog.records if "dask: " in r.getMessage()]
        engine.client()
        engine.client()
    assert [r.getMessage().startswith("dask: <Client") for r in caplog.records if "dask: " in r.getMessage()] == [True]
    engine.close()
    assert workers_left() == []


def test_close_right_after_prestart_leaves_no_process(workers_left):
    """A build that fails while its cluster is still starting: close waits for the start."""
    engine = Engine(workers=2)
    engine.prestart()
    engine.close()
    assert workers_left() == []


def test_cost_orders_the_submissions_not_the_results(tmp_path):
    """One single-threaded worker runs tasks in submission order: largest cost first
    (ties by position), while the results keep the order of the arguments."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                      scheduler_port=0) as cluster:
        engine = Engine(scheduler=cluster.scheduler_address)
        log = tmp_path / "ran"
        out = engine.map(_append, [(str(log), i) for i in range(5)], name="order", cost=[1, 7, 3, 7, 0])
        engine.close()
    assert out == [0, 10, 20, 30, 40]
    assert log.read_text().split() == ["1", "3", "2", "0", "4"]


@pytest.mark.parametrize("workers", [0, 300])
def test_worker_counts_out_of_range_are_refused(workers):
    from pivot.errors import InputError

    if workers == 0:  # 0 means one per core
        assert Engine(workers=0).workers >= 1
    else:
        with pytest.raises(InputError, match="--workers"):
            Engine(workers=workers)


# ----------------------------------------------------------------------------- Engine.run: jobs side by side

def _job(tag, log, rounds, fail_at=None):
    """A job of Engine.run: ``rounds`` batches of two tasks that append ``<tag><round>.<i>`` to
    ``log``; between batches it appends ``<tag><round>-mstep`` here. Returns the tasks' results."""
    from pivot.pipeline.engine import Batch

    got = []
    try:
        for r in range(rounds):
            fn = _fail if r == fail_at else _record
            got += (yield Batch(fn, [(str(log), f"{tag}{r}.{i}") for i in range(2)], name=f"job-{tag}{r}"))
            _append(log, f"{tag}{r}-mstep")
        return got
    finally:
        _append(log, f"{tag}-closed")


def _record(path, item):
    _append(path, item)
    return item.upper()


def _fail(path, item):
    raise ValueError(f"task {item} failed")


def _parent(log):
    """A job that runs two jobs together, then one batch of its own with their results' count."""
    from pivot.pipeline.engine import Batch, Together

    a, b = yield Together(_job("a", log, 1), _job("b", log, 1))
    done = yield Batch(len, [(a + b,)], name="count")
    return done[0]


def test_jobs_in_this_process_run_one_after_another(tmp_path):
    log = tmp_path / "ran"
    out = Engine(workers=1).run(_job("a", log, 2), _job("b", log, 1))
    assert out == [["A0.0", "A0.1", "A1.0", "A1.1"], ["B0.0", "B0.1"]]
    assert log.read_text().split() == ["a0.0", "a0.1", "a0-mstep", "a1.0", "a1.1", "a1-mstep", "a-closed",
                                       "b0.0", "b0.1", "b0-mstep", "b-closed"]


def test_jobs_on_a_cluster_submit_their_next_batch_at_once(tmp_path):
    """One single-threaded worker runs tasks in submission order. Both jobs' first batches are
    submitted at the start; job a's second batch when its first is done (after b's first was
    submitted): so the worker runs b's first batch between a's two, where in this process a's
    second batch ran before any of b's. The results are the same."""
    from distributed import LocalCluster

    log = tmp_path / "ran"
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                      scheduler_port=0) as cluster:
        engine = Engine(scheduler=cluster.scheduler_address)
        out = engine.run(_job("a", log, 2), _job("b", log, 1))
        nested = engine.run(_parent(tmp_path / "nested"))
        engine.close()
    assert out == [["A0.0", "A0.1", "A1.0", "A1.1"], ["B0.0", "B0.1"]]
    tasks = [x for x in log.read_text().split() if "." in x]
    assert tasks == ["a0.0", "a0.1", "b0.0", "b0.1", "a1.0", "a1.1"]
    # a job's own code runs after its batch: a0-mstep after a0's tasks, before a1's
    order = log.read_text().split()
    assert order.index("a0.1") < order.index("a0-mstep") < order.index("a1.0")
    assert nested == [4]      # two tasks of each of the two jobs run together
    assert sorted((tmp_path / "nested").read_text().split()) == sorted(
        ["a0.0", "a0.1", "a0-mstep", "a-closed", "b0.0", "b0.1", "b0-mstep", "b-closed"])


@pytest.mark.parametrize("cluster", [False, True])
def test_a_failed_task_stops_every_job(tmp_path, cluster, workers_left):
    """A task's exception is raised by Engine.run; every job is closed (its finally runs). Both
    tasks of b's batch fail: in this process b0.0 raises first; on two workers whichever of the
    two finishes first does (both ran at once), so the test names the batch, not the task."""
    log = tmp_path / "ran"
    engine = Engine(workers=2 if cluster else 1)
    try:
        with pytest.raises(ValueError, match=r"task b0\.0 failed" if not cluster else r"task b0\.[01] failed"):
            engine.run(_job("a", log, 3), _job("b", log, 1, fail_at=0))
    finally:
        engine.close()
    lines = log.read_text().split()
    assert "a-closed" in lines and "b-closed" in lines and "b0-mstep" not in lines
    assert workers_left() == []


# ----------------------------------------------------------------------------- Signal: a step waits for another job's

def _giver(log, signal):
    """One batch (g0), then Set(signal, its results), then a second batch (g1)."""
    from pivot.pipeline.engine import Batch, Set

    got = yield Batch(_record, [(str(log), f"g0.{i}") for i in range(2)], name="giver-0")
    _append(log, "g-set")
    yield Set(signal, got)
    _append(log, "g-resumed")
    return got + (yield Batch(_record, [(str(log), f"g1.{i}") for i in range(2)], name="giver-1"))


def _taker(log, signal):
    """Wait(signal), then one batch of tasks named after the value it was sent."""
    from pivot.pipeline.engine import Batch, Wait

    _append(log, "t-waits")
    value = yield Wait(signal)
    _append(log, "t-resumed")
    return (yield Batch(_record, [(str(log), f"t-{v.lower()}") for v in value], name="taker"))


def test_a_wait_in_this_process_takes_the_value_set_by_a_job_before_it(tmp_path):
    """In one process a Together's jobs run in their order: the giver first (its Set does not
    stop it), then the taker, whose Wait finds the value (["G0.0", "G0.1"], the giver's first
    batch's results) set; a wait for a signal no job before it has set is an error, not a hang."""
    from pivot.pipeline.engine import Signal

    log = tmp_path / "ran"
    out = Engine(workers=1).run(_giver(log, signal := Signal()), _taker(log, signal), _job("o", log, 1))
    assert out == [["G0.0", "G0.1", "G1.0", "G1.1"], ["T-G0.0", "T-G0.1"], ["O0.0", "O0.1"]]
    assert log.read_text().split() == ["g0.0", "g0.1", "g-set", "g-resumed", "g1.0", "g1.1",
                                       "t-waits", "t-resumed", "t-g0.0", "t-g0.1",
                                       "o0.0", "o0.1", "o0-mstep", "o-closed"]
    log.unlink()
    with pytest.raises(RuntimeError, match="no job before it has set"):
        Engine(workers=1).run(_taker(log, signal := Signal()), _giver(log, signal))
    assert log.read_text().split() == ["t-waits"]


def test_a_wait_on_a_cluster_holds_its_job_alone(tmp_path):
    """On one single-threaded worker (tasks in submission order): the taker waits from the start
    while the giver's first batch and the other job's (submitted at the start) run; the Set
    resumes the taker (its batch submitted then), and the giver goes on to its second batch. The
    other job is never held: its first batch runs before the taker's. The same values as in this
    process. A wait that no job answers ends the run with an error (no task is left to wait for)."""
    from distributed import LocalCluster

    from pivot.pipeline.engine import Signal

    log = tmp_path / "ran"
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                      scheduler_port=0) as cluster:
        engine = Engine(scheduler=cluster.scheduler_address)
        # the taker first: on a cluster the order of a Together's jobs does not matter
        out = engine.run(_taker(log, signal := Signal()), _giver(log, signal), _job("o", log, 1))
        with pytest.raises(RuntimeError, match="1 job\\(s\\) wait for a Signal that no job set"):
            engine.run(_taker(tmp_path / "alone", Signal()), _job("p", tmp_path / "alone", 1))
        engine.close()
    assert out == [["T-G0.0", "T-G0.1"], ["G0.0", "G0.1", "G1.0", "G1.1"], ["O0.0", "O0.1"]]
    order = log.read_text().split()
    assert order[0] == "t-waits" and sorted(order) == sorted(
        ["t-waits", "t-resumed", "t-g0.0", "t-g0.1", "g0.0", "g0.1", "g-set", "g-resumed", "g1.0", "g1.1",
         "o0.0", "o0.1", "o0-mstep", "o-closed"])
    # the Set resumes the taker (which submits its batch) before the giver goes on to its own
    assert order.index("g-set") < order.index("t-resumed") < order.index("g-resumed")
    # the first batches of the giver and the other job, submitted together at the start, run
    # before the taker's (submitted at the Set, once the giver's was done), then the giver's second
    tasks = [x for x in order if "." in x]
    assert sorted(tasks[:4]) == ["g0.0", "g0.1", "o0.0", "o0.1"]
    assert tasks[4:] == ["t-g0.0", "t-g0.1", "g1.0", "g1.1"]
    assert (tmp_path / "alone").read_text().split() == ["t-waits", "p0.0", "p0.1", "p0-mstep", "p-closed"]


# ----------------------------------------------------------------------------- Aside: a job's long step in a thread

def _until(path, item, seconds=30.0):
    """An Aside's step: wait (polling) until ``item`` is in the log ``path``; returns whether it came."""
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and item in path.read_text().split():
            return True
        time.sleep(0.01)
    return False


def _aside_job(log, until, seconds):
    """One batch (w0), then an Aside that waits up to ``seconds`` for ``until`` in the log, then a
    second batch (w1)."""
    from pivot.pipeline.engine import Aside, Batch

    got = yield Batch(_record, [(str(log), "w0.0")], name="aside-0")
    came = yield Aside(_until, log, until, seconds)
    _append(log, f"w-aside-{came}")
    return got + (yield Batch(_record, [(str(log), "w1.0")], name="aside-1"))


def test_an_aside_on_a_cluster_lets_the_other_jobs_go_on(tmp_path):
    """The Aside waits until job b's second batch has run: b's second batch is submitted only when
    b's first is done, by the loop that resumes the jobs, so it can run only if that loop goes on
    while the Aside runs (a job's own code, run in the loop, would wait its 30 s out and find
    nothing). In this process the Aside runs at once, before b ran at all: it finds nothing (in
    0.2 s here), then the jobs run one after another. The jobs' results are the same."""
    from distributed import LocalCluster

    log = tmp_path / "ran"
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                      scheduler_port=0) as cluster:
        engine = Engine(scheduler=cluster.scheduler_address)
        out = engine.run(_aside_job(log, "b1.1", 30.0), _job("b", log, 2))
        engine.close()
    assert out == [["W0.0", "W1.0"], ["B0.0", "B0.1", "B1.0", "B1.1"]]
    order = log.read_text().split()
    assert order.index("b1.1") < order.index("w-aside-True") < order.index("w1.0")
    inline = tmp_path / "inline"
    out = Engine(workers=1).run(_aside_job(inline, "b1.1", 0.2), _job("b", inline, 2))
    assert out == [["W0.0", "W1.0"], ["B0.0", "B0.1", "B1.0", "B1.1"]]
    assert inline.read_text().split() == ["w0.0", "w-aside-False", "w1.0", "b0.0", "b0.1", "b0-mstep", "b1.0",
                                          "b1.1", "b1-mstep", "b-closed"]


def _failing_step():
    raise ValueError("the aside failed")


def _failing_aside_job():
    from pivot.pipeline.engine import Aside

    yield Aside(_failing_step)


def test_an_asides_exception_is_raised_by_the_run_and_every_job_closed(tmp_path, workers_left):
    """The Aside's exception is raised by Engine.run (in the loop, not lost in its thread), and the
    other job is closed."""
    log = tmp_path / "ran"
    engine = Engine(workers=2)
    try:
        with pytest.raises(ValueError, match="the aside failed"):
            engine.run(_failing_aside_job(), _job("b", log, 3))
    finally:
        engine.close()
    assert "b-closed" in log.read_text().split()
    assert workers_left() == []
