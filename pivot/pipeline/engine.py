"""Where the sharded stages run: in this process, on a local Dask cluster, or on an existing one.

Every sharded task is a plain function of small arguments (paths and numbers) that reads its
inputs from the work directory and writes its output there atomically (a temporary name,
then ``os.replace``: :mod:`pivot.atomic`, :func:`pivot.pipeline.bundle.save_bundle`). Nothing large travels through the scheduler, a task that finds its
output already written returns at once, and a task whose worker dies is simply run again by
Dask on another worker: the output is the same bytes either way. That makes the engine a
detail of speed, never of content: ``--workers 1``, ``--workers 8`` and a SLURM cluster write
the same database.

- ``Engine(workers=1)`` runs tasks in this process, one after another (no cluster start-up).
- ``Engine(workers=N)`` starts a ``distributed.LocalCluster`` of N single-threaded worker
  processes (the nannies and the scheduler live in this process).
- ``Engine(scheduler="tcp://host:8786")`` connects to a running cluster (dask-jobqueue,
  dask-kubernetes, ``dask scheduler`` + ``dask worker``); its workers must see the same work
  directory (a shared file system) and have this package installed.
"""
from __future__ import annotations

import contextlib
import logging
import os
import threading
import time

from pivot.errors import InputError
from pivot.locking import cores

log = logging.getLogger("pivot")

#: Retries of a task whose worker died or which raised (Dask's ``retries``).
RETRIES = 3
#: Most workers a local cluster may start (a typo such as --workers 100000 is refused).
MAX_LOCAL_WORKERS = 256


class Engine:
    """Runs ``fn(*args)`` for many argument tuples; results come back in input order."""

    def __init__(self, workers: int | None = None, scheduler: str | None = None):
        if scheduler is None:
            workers = cores() if workers in (None, 0) else int(workers)
            if not 1 <= workers <= MAX_LOCAL_WORKERS:
                raise InputError(f"--workers must be between 1 and {MAX_LOCAL_WORKERS}, got {workers}")
        self.workers = workers
        self.scheduler = scheduler
        self._cluster = None
        self._client = None
        self._lock = threading.Lock()
        self._starter = None
        self.task_seconds: dict[str, float] = {}

    @property
    def in_process(self) -> bool:
        return self.scheduler is None and self.workers == 1

    @property
    def running(self) -> bool:
        """A cluster is connected (a build that reused every sharded stage never starts one)."""
        return self._client is not None

    def prestart(self) -> None:
        """Start the cluster in a background thread; the first :meth:`map` waits for it.

        A start that fails in the background is simply tried again, in the foreground, by
        the first map (where its error is raised).
        """
        if self.in_process or self._client is not None or self._starter is not None:
            return

        def start():
            try:
                self.client()
            except Exception as exc:  # retried (and raised) by the first map
                log.debug("dask: background start failed (%s); the first task retries", exc)

        self._starter = threading.Thread(target=start, name="pivot-dask-start", daemon=True)
        self._starter.start()

    def client(self):
        """The Dask client, started on first use (or by :meth:`prestart`)."""
        if self.in_process:
            return None
        with self._lock:
            return self._start()

    def _start(self):
        if self._client is None:
            from distributed import Client, LocalCluster

            t0 = time.perf_counter()
            # Dask's start-up and shutdown chatter is not the build's news.
            for name in ("distributed", "distributed.scheduler", "distributed.nanny", "distributed.core",
                         "distributed.worker", "distributed.http.proxy"):
                logging.getLogger(name).setLevel(logging.ERROR)
            if self.scheduler:
                self._client = Client(self.scheduler)
            else:
                import dask

                # One thread per worker: the kernels release the GIL but a task is mostly one
                # kernel call, so processes (not threads) are the unit of parallelism.
                # Dask starts workers with MALLOC_TRIM_THRESHOLD_=65536, which also freezes
                # glibc's mmap threshold at 128 KiB: every large numpy temporary is then a fresh
                # mapping whose pages fault in again, and the merges ran 20-30% slower than the
                # same code in this process. Unset here; heap goes back to the system between
                # stages instead (release_heap, as in this process).
                with dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}), \
                        _sigint_blocked():
                    self._cluster = LocalCluster(n_workers=self.workers, threads_per_worker=1, processes=True,
                                                 dashboard_address=None, scheduler_port=0,
                                                 silence_logs=logging.ERROR)
                self._client = Client(self._cluster)
                # Workers die with the build, even when it is killed (-9): no orphans.
                from pivot.pipeline._dask_plugins import DieWithParent

                self._client.register_plugin(DieWithParent(), name="pivot-die-with-parent")
            _quiet_interrupted_gathers()
            log.info("dask: %s in %.1f s", self._client, time.perf_counter() - t0)
        return self._client

    def map(self, fn, arg_tuples, *, name: str, cost=None) -> list:
        """``[fn(*args) for args in arg_tuples]``, on the workers when there is a cluster.

        Task keys are ``name-i`` so a dashboard shows the stage; ``pure=False`` because a task
        is known by its outputs on disk, not by its arguments' hash. ``cost`` (one number per
        task, e.g. its input's tokens) submits the largest tasks first, so that a long task
        does not start last and leave the other workers idle (longest-processing-time-first);
        results still come back in input order.
        """
        arg_tuples = list(arg_tuples)
        t0 = time.perf_counter()
        client = self.client()
        if client is None:
            out = [fn(*args) for args in arg_tuples]
        else:
            order = range(len(arg_tuples)) if cost is None else \
                sorted(range(len(arg_tuples)), key=lambda i: (-cost[i], i))
            # Dask runs earlier submissions first (the priority of client.submit).
            futures = {i: client.submit(fn, *arg_tuples[i], key=f"{name}-{i}-{os.getpid()}-{int(t0 * 1e6)}",
                                        retries=RETRIES, pure=False)
                       for i in order}
            out = client.gather([futures[i] for i in range(len(arg_tuples))])
            # Give the workers' freed heap back to the system between stages (glibc keeps it).
            client.run(release_heap)
        seconds = time.perf_counter() - t0
        self.task_seconds[name] = round(self.task_seconds.get(name, 0.0) + seconds, 2)
        log.info("  %s: %d tasks in %.1f s", name, len(arg_tuples), seconds)
        return out

    def worker_pids(self) -> list[int]:
        """Process ids of the local cluster's workers (for tests and benchmarks)."""
        client = self.client()
        if client is None:
            return [os.getpid()]
        return sorted(client.run(os.getpid).values())

    def close(self) -> None:
        if self._starter is not None:
            self._starter.join()  # a cluster half started is closed like one fully started
            self._starter = None
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@contextlib.contextmanager
def _sigint_blocked():
    """SIGINT blocked in this thread while the local cluster starts, and so in every worker.

    Ctrl-C sends SIGINT to the whole foreground process group: the build and every worker
    process. The build answers it (it closes the cluster, whose nannies stop the workers, and
    says "interrupted"); a worker answering it too would print a KeyboardInterrupt traceback
    of 32 lines. The signal mask is inherited by the threads created here (the cluster's
    event loop and the threads that spawn worker processes, restarted ones included) and kept
    across fork and exec, so every worker starts, and stays, with SIGINT blocked, from its
    first instruction on (a handler installed by the worker itself would leave its start-up
    unguarded). A Ctrl-C that arrives meanwhile stays pending for this thread and is raised
    as KeyboardInterrupt as soon as the mask is restored.
    """
    import signal
    from multiprocessing import resource_tracker

    # The first start of multiprocessing's resource tracker (which the cluster needs) blocks
    # SIGINT around its own spawn and then *unblocks* it rather than restoring the mask
    # (CPython 3.11): started before the mask is set, it leaves the mask alone.
    resource_tracker.ensure_running()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class _DropAllExit(logging.Filter):
    """Drops asyncio's "Task exception was never retrieved" reports of distributed's AllExit:
    the client's internal wait tasks of a gather that a Ctrl-C interrupted, one per pending
    task, each with its traceback. Nothing is lost: the build itself says "interrupted"."""

    def filter(self, record):
        exc = record.exc_info[1] if record.exc_info else None
        return not (exc is not None and type(exc).__name__ == "AllExit"
                    and type(exc).__module__.startswith("distributed"))


def _quiet_interrupted_gathers() -> None:
    logger = logging.getLogger("asyncio")
    if not any(isinstance(f, _DropAllExit) for f in logger.filters):
        logger.addFilter(_DropAllExit())


def release_heap() -> None:
    """malloc_trim(0): return freed heap pages to the system (glibc; elsewhere nothing).

    A stage frees its arrays when it ends, but glibc keeps small freed blocks for reuse, so
    a long-lived process would carry the high-water mark of every stage it ran.
    """
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        pass
