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
