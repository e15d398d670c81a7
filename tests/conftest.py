"""Shared test helpers."""
import os
import time
from pathlib import Path

import psutil
import pytest

# The data root as an absolute path, before any test module reads it: the README's test command
# gives it relative to the checkout (PIVOT_DATA=../shared/data), and tests that build or run a
# block in a folder of their own would read it from there.
if os.environ.get("PIVOT_DATA"):
    os.environ["PIVOT_DATA"] = str(Path(os.environ["PIVOT_DATA"]).resolve())


def _workers_left(seconds: float = 10.0) -> list:
    """This process's descendants still alive after waiting up to ``seconds`` for them to go.

    Python's multiprocessing resource tracker is not counted: one per interpreter, started
    with the first spawned process, it lives (idle) until this interpreter exits.
    """
    deadline = time.monotonic() + seconds
    while True:
        alive = []
        for p in psutil.Process().children(recursive=True):
            try:
                if p.status() != psutil.STATUS_ZOMBIE and "resource_tracker" not in " ".join(p.cmdline()):
                    alive.append(p)
            except psutil.NoSuchProcess:
                pass
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


@pytest.fixture
def workers_left():
    """Call it to get the worker processes (any descendant) that outlived what the test closed."""
    return _workers_left
