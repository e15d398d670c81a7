"""Dask worker plugins of the build (imported only when a cluster starts)."""
from __future__ import annotations

import ctypes
import signal

from distributed.diagnostics.plugin import WorkerPlugin


class DieWithParent(WorkerPlugin):
    """Ask Linux to SIGKILL the worker process when its parent dies.

    A local cluster's workers are children of the build process (their nannies run in it);
    prctl(PR_SET_PDEATHSIG) makes the kernel end them when the build is killed outright
    (kill -9), which no Python-level clean-up can. Applied again to every restarted worker.
    Elsewhere than Linux/glibc it does nothing.
    """

    def setup(self, worker):
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
        except OSError:  # pragma: no cover - not glibc
            return
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
