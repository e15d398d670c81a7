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
