"""bench/bench_determinism.py's ``--workers`` values: ``W`` or ``W/T`` (``--threads T``)."""
import argparse
import importlib.util
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parent.parent / "bench" / "bench_determinism.py"
_spec = importlib.util.spec_from_file_location("bench_determinism", _PATH)
bd = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bd)


def test_workers_alone_leave_threads_at_their_default():
    assert bd.workers_threads("2") == (2, None)


def test_workers_slash_threads():
    assert bd.workers_threads("1/1") == (1, 1)
    assert bd.workers_threads("4/2") == (4, 2)


@pytest.mark.parametrize("bad", ["", "two", "1/", "1/x", "1.5"])
def test_anything_else_is_refused(bad):
    with pytest.raises(argparse.ArgumentTypeError, match="expected W or W/T"):
        bd.workers_threads(bad)


def test_no_memory_runs_the_build_with_no_reader_beside_it(tmp_path):
    """run_measured(memory=False): the wall and the children's CPU (a child that burns ~0.2 s of
    CPU is counted), no memory figures, and no time of this process spent reading /proc."""
    import sys

    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.2: pass\n"
    figures = bd.run_measured([sys.executable, "-c", burn], tmp_path / "log", memory=False)
    assert figures["cpu_s"] >= 0.2
    assert figures["wall_s"] >= 0.2
    assert figures["peak_rss_tree_gib"] is None and figures["peak_pss_tree_gib"] is None
    assert figures["sampler_cpu_s"] < 0.1
    assert set(figures) == {"wall_s", "cpu_s", "sampler_cpu_s", "loadavg_1min_before", "peak_rss_tree_gib",
                            "peak_pss_tree_gib"}
