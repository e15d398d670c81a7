"""bench/bench_handoffs.py's arithmetic: a half second's CPU from cumulative samples, its idle,
and the tasks that ran in it, against a hand computation."""
import importlib.util
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parent.parent / "bench" / "bench_handoffs.py"
_spec = importlib.util.spec_from_file_location("bench_handoffs", _PATH)
bh = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bh)


def test_task_name_drops_the_engines_suffix_only():
    # Engine.map's keys: name-index-pid-thread-time; a job's batch's: ...-time-n
    assert bh._task_name("hash-12-5125-140221437392448-9712000456") == "hash"
    assert bh._task_name("align.fr-fwd-em3-7-6052-139911273527872-9696123456-118") == "align.fr-fwd-em3"
    assert bh._task_name("ppdb2-vectors-counts-1-6052-139911273527872-9696123456-5") == "ppdb2-vectors-counts"
    assert bh._task_name("hash") == "hash"


def test_half_seconds_by_hand():
    # cumulative CPU: the build's process 0.5 core, its workers 1.0 core, throughout
    samples = [(0.0, 0.0, 0.0), (1.0, 0.5, 1.0), (2.0, 1.0, 2.0)]
    # the build's clock starts 0.25 s after the samples': an extract task over [0.25, 0.75),
    # a hash task over [0.75, 0.85)
    tasks = [("w0", "extract-3-6052-139911273527872-9696123456-2", 0.0, 0.5), ("w1", "hash-0-6052-139911273527872-9696555555", 0.5, 0.6)]
    rows, by_what = bh.half_seconds(samples, tasks, 0.25, cores=2)
    # four bins of 0.5 s; each: 0.5 + 1.0 cores busy, (2 - 1.5) * 0.5 = 0.25 core-seconds idle
    assert [a for a, *_ in rows] == [0.0, 0.5, 1.0, 1.5]
    for _, own, below, lost, _ in rows:
        assert (own, below, lost) == pytest.approx((0.5, 1.0, 0.25))
    # bin 0: extract 0.25 s; bin 1: extract 0.25 s, hash 0.1 s; bins 2 and 3: nothing ran
    assert rows[0][4] == [("extract", pytest.approx(0.25))]
    assert rows[1][4] == [("extract", pytest.approx(0.25)), ("hash", pytest.approx(0.1))]
    assert rows[2][4] == rows[3][4] == []
    assert dict(by_what) == {"extract": pytest.approx(0.5), "none": pytest.approx(0.5)}


def test_a_bin_busier_than_the_cores_counts_no_idle():
    samples = [(0.0, 0.0, 0.0), (0.5, 0.5, 1.0)]      # 1 + 2 cores over 0.5 s on 2 cores
    rows, by_what = bh.half_seconds(samples, [], 0.0, cores=2)
    assert [(own, below, lost) for _, own, below, lost, _ in rows] == [(1.0, 2.0, 0.0)]
    assert dict(by_what) == {"none": 0.0}
