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
