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

#: Dask's watchers of its own servers, slowed or stopped on a local cluster. Their defaults
#: wake every server's event loop many times a second: the loop-blocking tick every 20 ms
#: (scheduler, each nanny, each worker), the worker's statistical profiler every 10 ms, the
#: worker's and nanny's memory monitor every 100 ms, the dashboard's system monitor every
#: 500 ms. An idle 2-worker cluster spent 10-13.5% of one core on them (measured: scheduler
#: and nannies 0.6-1.0 CPU s, each worker 0.65-1.0 CPU s in 15-30 s), 1.9% with these values:
#: ~0.1 core of a 2-core machine for the whole time a build's cluster runs, next to tasks that
#: need both cores. The tick only times how long the loop was blocked (a warning past 3 s);
#: the profiler and the system monitor only feed the dashboard (the build starts none); the
#: memory monitor now sees a worker above its limit within 1 s instead of 100 ms. The
#: scheduling is the same, and so is every byte written. An external cluster (--scheduler)
#: keeps its own configuration.
LOCAL_CLUSTER_CONFIG = {
    "distributed.admin.tick.interval": "1s",
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.worker.memory.monitor-interval": "1s",
}


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
        self._started = None   # the start's log line, until a caller of the build's own says it
        self.task_seconds: dict[str, float] = {}
        # Stages run side by side in threads of the build (pivot.pipeline.run.run_stages): the
        # futures not yet gathered, so that a failing stage can cancel the others' tasks.
        self._pending: set = set()
        self._stopped = False

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
                self.client(background=True)
            except Exception as exc:  # retried (and raised) by the first map
                log.debug("dask: background start failed (%s); the first task retries", exc)

        self._starter = threading.Thread(target=start, name="pivot-dask-start", daemon=True)
        self._starter.start()

    def client(self, background: bool = False):
        """The Dask client, started on first use (or by :meth:`prestart`). The start's log line
        waits for the first use that is not the background start: a build whose preflight
        fails while its cluster starts says its one line, not the cluster's news before it."""
        if self.in_process:
            return None
        with self._lock:
            if self._stopped:  # a stage failed: the others stop at their next batch
                raise Stopped("the build stopped (another stage failed)")
            client = self._start()
            if not background and self._started is not None:
                log.info("%s", self._started)
                self._started = None
            return client

    def stop(self) -> None:
        """Cancel every task submitted and not yet gathered, and close the cluster: what the
        build does when one of the stages running side by side fails. A stage still running
        then gets :class:`Stopped` (or Dask's cancellation) at its next wait; none restarts
        the cluster."""
        with self._lock:
            self._stopped = True
            pending, self._pending = list(self._pending), set()
        if pending and self._client is not None:
            with contextlib.suppress(Exception):
                self._client.cancel(pending)
        self.close()

    def _track(self, futures) -> None:
        with self._lock:
            self._pending.update(futures)

    def _untrack(self, futures) -> None:
        with self._lock:
            self._pending.difference_update(futures)

    def _add_seconds(self, name: str, seconds: float) -> None:
        with self._lock:
            self.task_seconds[name] = round(self.task_seconds.get(name, 0.0) + seconds, 2)

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
                with dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,
                                      **LOCAL_CLUSTER_CONFIG}), _sigint_blocked():
                    self._cluster = LocalCluster(n_workers=self.workers, threads_per_worker=1, processes=True,
                                                 dashboard_address=None, scheduler_port=0,
                                                 silence_logs=logging.ERROR)
                self._client = Client(self._cluster)
                # Workers die with the build, even when it is killed (-9): no orphans.
                from pivot.pipeline._dask_plugins import DieWithParent

                self._client.register_plugin(DieWithParent(), name="pivot-die-with-parent")
            _quiet_interrupted_gathers()
            self._started = f"dask: {self._client} in {time.perf_counter() - t0:.1f} s"
        return self._client

    def map(self, fn, arg_tuples, *, name: str, cost=None, priority: int = 0, quiet: bool = False) -> list:
        """``[fn(*args) for args in arg_tuples]``, on the workers when there is a cluster.

        Task keys are ``name-i`` so a dashboard shows the stage; ``pure=False`` because a task
        is known by its outputs on disk, not by its arguments' hash. ``cost`` (one number per
        task, e.g. its input's tokens) submits the largest tasks first, so that a long task
        does not start last and leave the other workers idle (longest-processing-time-first);
        results still come back in input order. ``priority`` > 0 puts the tasks before those
        already waiting (Dask's priority; stages running side by side share the workers).
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
            futures = {i: client.submit(_NoRetry(fn), *arg_tuples[i],
                                        key=f"{name}-{i}-{os.getpid()}-{threading.get_ident()}-{int(t0 * 1e6)}",
                                        retries=RETRIES, pure=False, priority=priority)
                       for i in order}
            self._track(futures.values())
            try:
                out = _raise_input_errors(client.gather([futures[i] for i in range(len(arg_tuples))]))
            finally:
                self._untrack(futures.values())
            # Give the workers' freed heap back to the system between stages (glibc keeps it).
            client.run(release_heap)
        seconds = time.perf_counter() - t0
        self._add_seconds(name, seconds)
        if not quiet:
            log.info("  %s: %d tasks in %.1f s", name, len(arg_tuples), seconds)
        return out

    def run(self, *jobs) -> list:
        """Run jobs side by side: each job's tasks are on the workers while the others' own code
        runs here. Returns the jobs' return values, in order.

        A job is a generator: it yields a :class:`Batch` (``Batch(fn, arg_tuples, name=...)``),
        is sent the batch's results (as :meth:`map` returns them) and resumes when all of them
        are in; it yields :class:`Together` (jobs) and is sent their return values when all have
        returned. Between its yields it runs in this process, one job at a time. On a cluster every
        job's next batch is submitted as soon as the job yields it, so that the workers keep busy
        while a job works here (an EM's M-step, a table's merge) or waits for its last long task;
        Dask runs the tasks in the order they were submitted. In this process the jobs run one
        after another, each batch by :meth:`map` (its kernels take every core). The results, and
        so every file a job writes, are the same either way.

        A job that needs another's result, but not what runs beside that other job, yields
        :class:`Wait` on a :class:`Signal` that the other yields :class:`Set` on: it resumes with
        the value as soon as it is set (at once if it was). In this process a Together's jobs run
        in their order, so the job that sets a signal must come before the jobs that wait for it
        (a wait for a signal not yet set there is an error, not a hang). A job that has long
        work to do here yields :class:`Aside`: on a cluster that runs in a thread of this
        process, and the other jobs go on meanwhile (their next batches submitted as their
        tasks end); in this process it simply runs.
        """
        client = self.client()
        if client is None:
            return [_run_inline(self, job) for job in jobs]
        return _Runner(self, client).run(list(jobs))

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


class Stopped(RuntimeError):
    """Raised in a stage that asks for the engine after the build stopped (Engine.stop)."""


class _Failed:
    """An InputError a task raised, returned as its value instead (see _NoRetry)."""

    def __init__(self, error):
        self.error = error


class _NoRetry:
    """``fn`` as a task whose InputError comes back as a value, so that Dask does not retry it:
    bad input fails the same way every time (a retry is for a worker that died). The build
    raises it where the results are gathered (:func:`_raise_input_errors`), as in one process."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args):
        try:
            return self.fn(*args)
        except InputError as exc:
            return _Failed(exc)


def _raise_input_errors(values: list) -> list:
    for value in values:
        if isinstance(value, _Failed):
            raise value.error
    return values


class Batch:
    """``fn(*args)`` for every tuple of ``arg_tuples``: what a job of :meth:`Engine.run` yields
    (``name`` and ``cost`` as for :meth:`Engine.map`)."""

    def __init__(self, fn, arg_tuples, *, name: str, cost=None, quiet: bool = False):
        # quiet: no log line of its own (a job that yields many small batches says what they did)
        self.fn, self.arg_tuples, self.name, self.cost, self.quiet = fn, list(arg_tuples), name, cost, quiet


class Together:
    """Jobs to run side by side, yielded by a job of :meth:`Engine.run`: it gets their return values."""

    def __init__(self, *jobs):
        self.jobs = list(jobs)


class Signal:
    """A value that one job of :meth:`Engine.run` gives, once, to jobs running beside it (in the
    same run, in any Together): the giver yields ``Set(signal, value)``, a taker ``Wait(signal)``.

    Why: a Together joins whole jobs, so a step needing the results of two branches (the ppdb2
    stage's phrase means: the word vectors trained at the stage's start, and the phrases' rows
    written after its ids) could only start once both branches had ended, or it would make the
    other steps of its branch (the labels) wait for the branch it needs. The wait is for the
    step alone."""

    def __init__(self):
        self.is_set, self.value = False, None
        self.waiting = []       # _Runner: the nodes of the jobs parked on it


class Set:
    """Yielded by a job: give ``value`` to the jobs waiting for ``signal`` (and to those that
    will); the job itself resumes at once (sent None). A signal is set once."""

    def __init__(self, signal: Signal, value=None):
        self.signal, self.value = signal, value


class Wait:
    """Yielded by a job: resume when ``signal`` is set, sent its value."""

    def __init__(self, signal: Signal):
        self.signal = signal


class Aside:
    """Yielded by a job: ``fn(*args)`` run in this process, the job sent its return value. On a
    cluster it runs in a thread, and the other jobs of the run go on meanwhile.

    Why: a job's own code between its yields runs in the loop that resumes every job, so a long
    step there (the ppdb2 stage's writing of the phrases' rows and texts, ~6.5 s on bio-multi)
    held back every other job's next batch: the workers ran out of tasks, though a job beside it
    (the word vectors' training) had its next step ready. ``fn`` must not touch what the other
    jobs' code touches meanwhile (the job's own files: the ppdb2 writing reads the stage's
    inputs and writes its own scratch files).

    Cost: glibc gives the thread a heap (arena) of its own, whose free top it keeps up to its
    trim threshold (raised by numpy's large frees, to 64 MiB at most) and malloc_trim does not
    shrink: texts and arrays made and freed in a thread left 33.4 MiB resident after
    malloc_trim, the same in the main thread 4.7 MiB (in a thread with MALLOC_ARENA_MAX=1: 4.8;
    bench/bench_thread_arena.py). With the ppdb2 stage's writing in one, the build process's
    peak PSS was 11-39 MB higher on bio; on bio-multi -6 to +16 MB during the stage and 10-25 MB
    higher in the write after it (3 pairs of runs each): a constant, not a function of the
    corpus."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args


def _set(request: Set) -> None:
    signal = request.signal
    if signal.is_set:
        raise RuntimeError("a Signal is set once")
    signal.is_set, signal.value = True, request.value


def _run_inline(engine, job):
    """A job run in this process: each batch by Engine.map, nested jobs one after another."""
    value = None
    try:
        while True:
            request = job.send(value)
            value = None  # the job's now: held here too, it would outlive the job's own del (_Runner._advance)
            if isinstance(request, Batch):
                value = engine.map(request.fn, request.arg_tuples, name=request.name, cost=request.cost,
                                   quiet=request.quiet)
            elif isinstance(request, Together):
                value = [_run_inline(engine, sub) for sub in request.jobs]
            elif isinstance(request, Aside):
                value = request.fn(*request.args)
            elif isinstance(request, Set):
                _set(request)
            elif isinstance(request, Wait):
                # one job after another: a signal not set now would never be (no job runs meanwhile)
                if not request.signal.is_set:
                    raise RuntimeError("a job waits for a Signal that no job before it has set: in one process a "
                                       "Together's jobs run in their order, the one that sets it must come first")
                value = request.signal.value
            else:
                raise TypeError(f"a job yields Batch, Together, Aside, Set or Wait, not {type(request).__name__}")
    except StopIteration as stop:
        return stop.value
    finally:
        job.close()


class _Node:
    """A job under way on a cluster: its generator, who waits for it, what it waits for."""

    def __init__(self, job, parent=None, slot=0):
        self.job, self.parent, self.slot = job, parent, slot
        self.futures, self.remaining, self.batch, self.t0 = [], 0, None, 0.0
        self.results, self.waiting = [], 0
        self.sent = None   # what the job is sent when it resumes (see _Runner._advance)
        self.thread, self.failed = None, None    # an Aside under way, and its exception


_RETURNED = object()   # _Runner._advance: the job returned


class _Runner:
    """Engine.run on a cluster: one loop over the tasks as they finish; a job resumes (here)
    when its batch's last task is done, and its next batch is submitted at once."""

    def __init__(self, engine, client):
        self.engine, self.client = engine, client
        self.owner = {}          # future -> node whose batch it belongs to
        self.nodes = []
        self.results = None
        self.submitted = 0
        self.parked = set()      # nodes waiting for a Signal (Wait)
        self.wakers = {}         # key of an Aside's wake-up future -> its node

    def run(self, jobs):
        from distributed import as_completed

        self.done = as_completed()
        self.results = [None] * len(jobs)
        try:
            roots = [self._node(job, None, k) for k, job in enumerate(jobs)]
            for node in roots:
                self._advance(node)
            while True:
                for future in self.done:
                    if future.key in self.wakers:  # an Aside's thread is done
                        self._resume_aside(self.wakers.pop(future.key))
                        continue
                    node = self.owner.pop(future)
                    if future.status != "finished":
                        future.result()          # the task's exception (or its cancellation), raised here
                    node.remaining -= 1
                    if node.remaining == 0:
                        self._finish_batch(node)
                # no future left: a job's Aside may still run (its wake-up comes into self.done
                # as its thread ends, or never if the cluster went: then it resumes here)
                asides = [node for node in self.nodes if node.thread is not None]
                if not asides:
                    break
                for node in asides:
                    node.thread.join()
                for node in asides:
                    if node.thread is not None and node not in self.wakers.values():
                        self._resume_aside(node)
            if self.parked:              # no task left, so no job left to set their signals
                raise RuntimeError(f"{len(self.parked)} job(s) wait for a Signal that no job set")
        finally:
            if self.owner:           # a task or a job failed: the rest is not waited for
                self.client.cancel(list(self.owner))
                self.engine._untrack(list(self.owner))
            for node in self.nodes:  # an Aside still writing ends before its job is closed
                if node.thread is not None:
                    node.thread.join()
            for node in self.nodes:  # their finally blocks run (scratch folders removed)
                node.job.close()
        # the workers' freed heap back to the system (glibc keeps it), as after Engine.map
        self.client.run(release_heap)
        return self.results

    def _node(self, job, parent, slot):
        node = _Node(job, parent, slot)
        self.nodes.append(node)
        return node

    def _finish_batch(self, node):
        node.sent = _raise_input_errors(self.client.gather(node.futures))
        self.engine._untrack(node.futures)
        batch = node.batch
        seconds = time.perf_counter() - node.t0
        self.engine._add_seconds(batch.name, seconds)
        if not batch.quiet:
            log.info("  %s: %d tasks in %.1f s", batch.name, len(batch.arg_tuples), seconds)
        node.futures, node.batch = [], None
        self._advance(node)

    def _advance(self, node):
        """Resume a job with ``node.sent`` until it yields a batch with tasks to wait for, or returns.

        A value goes from job to job through the nodes (``sent``, ``results``), never through a
        local or an argument of these calls: a job that resumes runs its next steps from inside
        them (a Together's jobs, a parent whose last child returned), and a value held by a frame
        below would outlive the job's own del of it for all that time (ppdb2's phrase side,
        0.4 GB on bio, lived on through its fits)."""
        value, node.sent = node.sent, None
        while True:
            try:
                request = node.job.send(value)
            except StopIteration as stop:
                node.sent, request = stop.value, _RETURNED
            value = None
            if request is _RETURNED:  # handled outside the except block, which holds the exception
                self._returned(node)
                return
            if isinstance(request, Batch):
                if not request.arg_tuples:
                    value = []
                    continue
                self._submit(node, request)
                return
            if isinstance(request, Together):
                if not request.jobs:
                    value = []
                    continue
                node.results, node.waiting = [None] * len(request.jobs), len(request.jobs)
                children = [self._node(sub, node, k) for k, sub in enumerate(request.jobs)]
                for child in children:
                    self._advance(child)
                return
            if isinstance(request, Aside):
                self._aside(node, request)
                return
            if isinstance(request, Set):
                _set(request)
                waiting, request.signal.waiting = request.signal.waiting, []
                for taker in waiting:    # resumed here, as a Together's jobs are: each to its next batch
                    self.parked.discard(taker)
                    taker.sent = request.signal.value
                    self._advance(taker)
                continue
            if isinstance(request, Wait):
                if request.signal.is_set:
                    value = request.signal.value
                    continue
                request.signal.waiting.append(node)
                self.parked.add(node)
                return
            raise TypeError(f"a job yields Batch, Together, Aside, Set or Wait, not {type(request).__name__}")

    def _aside(self, node, request):
        """Run the Aside ``request`` of ``node`` in a thread; as it ends, it puts a future that is
        done at once (a scattered 0: no task, no worker's thread) into the loop's futures, which
        wakes the loop (_resume_aside) however long the tasks under way still run."""
        def run():
            try:
                node.sent = request.fn(*request.args)
            except BaseException as exc:  # noqa: BLE001 - raised by the loop (_resume_aside)
                node.failed = exc
            try:
                wake = self.client.scatter(0, hash=False)
                self.wakers[wake.key] = node
                self.done.add(wake)
            except Exception as exc:  # noqa: BLE001 - the cluster went (the build stops): run() resumes the job
                log.debug("dask: an Aside's wake-up failed (%s); the run resumes its job", exc)

        node.thread = threading.Thread(target=run, name="pivot-aside", daemon=True)
        node.thread.start()

    def _resume_aside(self, node):
        node.thread.join()
        node.thread = None
        if node.failed is not None:
            failed, node.failed = node.failed, None
            raise failed
        self._advance(node)

    def _returned(self, node):
        """The job of ``node`` returned ``node.sent``: to its parent (which resumes once every job of
        its Together has returned), or to run's results."""
        node.job.close()
        parent = node.parent
        if parent is None:
            self.results[node.slot], node.sent = node.sent, None
            return
        parent.results[node.slot], node.sent = node.sent, None
        parent.waiting -= 1
        if parent.waiting == 0:
            parent.sent, parent.results = parent.results, []
            self._advance(parent)

    def _submit(self, node, batch):
        n = len(batch.arg_tuples)
        order = range(n) if batch.cost is None else sorted(range(n), key=lambda i: (-batch.cost[i], i))
        node.t0 = time.perf_counter()
        self.submitted += 1
        stamp = f"{os.getpid()}-{threading.get_ident()}-{int(node.t0 * 1e6)}-{self.submitted}"
        futures = {i: self.client.submit(_NoRetry(batch.fn), *batch.arg_tuples[i], key=f"{batch.name}-{i}-{stamp}",
                                         retries=RETRIES, pure=False)
                   for i in order}
        self.engine._track(futures.values())
        node.futures = [futures[i] for i in range(n)]
        node.remaining, node.batch = n, batch
        for i in order:
            self.owner[futures[i]] = node
            self.done.add(futures[i])


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
