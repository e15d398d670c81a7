"""The build: every stage of the pipeline, cached in a work directory.

    corpus ─┬─> align ─> encode ─────────────────────────┬─> weights ─> extract ─> translation ─> pivot
            └─> lmtext ─> lm ─> score ───────────────────┘      ┌─> combine ─┐
                                                  pivot ─┼─> ppdb2 ───┼─> store
                                                         └─> lhs ─────┘
    tagger (needs no stage: GENIA-pos, Brown) ──────────────────^

Each stage declares itself in its own module (:class:`pivot.pipeline.stage.Stage`; the graph,
pivot/pipeline/graph.py, gathers them), and :class:`Build` runs every one by the same loop: its
parameters from the recipe, its key, its cached artifact or its run. On a cluster a stage starts
as soon as the stages it needs are done (:func:`run_stages`): the LM branch and the tagger run
beside the aligner, ppdb2 beside lhs and combine. In one process (``--workers 1``) the stages run
one after another.

Each stage writes its artifact into `<work>/<stage>-<key>/`, where the key hashes the
stage's version, its parameters, the keys of the stages it reads and the fingerprints of the
data files. The folder is built under a temporary name and renamed when complete, so an
interrupted build resumes at the first unfinished stage and a rerun with unchanged
inputs reuses everything. The database itself is written the same way (see pivot.store.db).
"""
from __future__ import annotations

import hashlib
import inspect
import json
import logging
import os
import shutil
import signal
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from pivot._version import __version__
from pivot import preflight, recipes
from pivot.pipeline.engine import Engine, release_heap
from pivot.pipeline.graph import STAGES, check_inputs, order, upstream
from pivot.pipeline.stage import VOLATILE, Context, DeclarationError, Params, Stage, key_of

log = logging.getLogger("pivot")


def run_stages(steps: dict, *, side_by_side: bool, on_error=None) -> None:
    """Run every stage of ``steps`` (a name of pivot/pipeline/graph.py -> the function that runs
    or reuses it) once, each after every stage it needs.

    The rule: a stage starts as soon as every stage it needs (``graph.STAGES[name].needs``,
    among those in ``steps``: a build without [domain] has no score) is done. With
    ``side_by_side`` (a cluster) each stage runs in a thread of its own, where its driver code
    keys, caches and submits its tasks to the shared cluster; the loop waits for the first
    stage to finish and starts whatever that made ready. Without it the stages run one after
    another in the graph's order, in this thread.

    The first stage to fail stops the build: ``on_error`` is called (the engine cancels the
    other stages' tasks and closes), their threads are given a moment to end, and the error
    is raised (the first failing stage in the graph's order when several finish together).
    """
    names = [name for name in order() if name in steps]
    if not side_by_side:
        for name in names:
            steps[name]()
        return
    needs = {name: {up for up in STAGES[name].needs if up in steps} for name in names}
    running: dict[Future, str] = {}
    done: set[str] = set()
    threads = []

    def start(name):
        future = Future()

        def target():
            # Ctrl-C is the main thread's to answer: with SIGINT blocked here (and in every thread
            # a stage starts: the mask is inherited), the kernel delivers it to the main thread,
            # whose wait below it interrupts at once. Delivered to a stage thread, it could wait
            # for the next stage to end, or be taken by a thread that never lets Python see it.
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            try:
                future.set_result(steps[name]())
            except BaseException as exc:  # handed to the loop, which raises it
                future.set_exception(exc)

        thread = threading.Thread(target=target, name=f"pivot-stage-{name}", daemon=True)
        running[future] = name
        threads.append(thread)
        thread.start()

    try:
        while len(done) < len(names):
            started = set(running.values())
            for name in names:
                if name not in done and name not in started and needs[name] <= done:
                    start(name)
            finished, _ = wait(list(running), timeout=1.0, return_when=FIRST_COMPLETED)
            for future in sorted(finished, key=lambda f: names.index(running[f])):
                future.result()  # the stage's error, raised here
                done.add(running.pop(future))
    except BaseException:
        if on_error is not None:
            on_error()
        deadline = time.monotonic() + 30  # their next wait raises; none is waited for beyond this
        for thread in threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        raise


@dataclass
class Workdir:
    """A folder of finished stage artifacts, each named by its inputs' key."""

    root: Path
    reused: list = field(default_factory=list)
    built: list = field(default_factory=list)
    timings: dict = field(default_factory=dict)
    contents: dict = field(default_factory=dict)  # stage name -> content key of its artifact
    engine: object = None  # hashes a finished artifact on its workers once its cluster runs
    # Stages run side by side in threads (run_stages): the lists and dicts above change under it.
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def stage(self, name: str, inputs: dict, params: dict, produce) -> tuple[Path, str]:
        """Run `produce(tmp_dir)` unless an artifact with the same key is complete.

        Returns (artifact folder, content key). The folder is named by the key of the
        stage's inputs and parameters (so a rerun finds it); the key handed downstream is
        the hash of what the stage actually wrote. Downstream keys, and the database
        signature built from them, therefore change whenever an artifact's bytes change,
        e.g. when an aligner produces different links from the same corpus. An artifact
        holding a file its stage does not declare (``Stage.writes``) is refused before it
        is renamed into place.
        """
        run = self._begin(name, inputs, params)
        if run.tmp is None:
            return run.final, run.content
        produce(run.tmp)
        return self._finish(run)

    def stages(self, specs) -> list[tuple[Path, str]]:
        """Several stages side by side: ``specs`` are (name, inputs, params, job), ``job(tmp_dir)``
        a job of :meth:`pivot.pipeline.engine.Engine.run` that writes the stage's artifact (as
        ``produce`` of :meth:`stage`). The jobs of the stages not yet complete run together on
        the engine; each stage's recorded seconds run from the start of them all to its own end,
        so the seconds of stages run together overlap. Returns what :meth:`stage` returns, per spec.
        """
        runs = [self._begin(name, inputs, params) for name, inputs, params, _ in specs]
        todo = [(run, job) for run, (*_, job) in zip(runs, specs) if run.tmp is not None]

        def timed(run, job):
            value = yield from job(run.tmp)
            run.job_seconds = time.perf_counter() - run.t0
            return value

        if todo:
            engine = self.engine if self.engine is not None else Engine(workers=1)
            engine.run(*(timed(run, job) for run, job in todo))
        return [(run.final, run.content) if run.tmp is None else self._finish(run) for run in runs]

    def _begin(self, name, inputs, params) -> "_StageRun":
        """The stage's folder and key; an artifact already complete is reused (``tmp`` None),
        else its ``.partial`` folder is made."""
        check_inputs(name, inputs)
        parts = {"stage": name, "version": STAGES[name.split(".")[0]].version, "inputs": inputs, "params": params}
        key = key_of(parts)
        final = self.root / f"{name}-{key}"
        if (final / "DONE").is_file():
            done = json.loads((final / "DONE").read_text())
            if "content" in done:
                log.info("stage %-12s reused  %s", name, final)
                with self.lock:
                    self.reused.append(name)
                    self.contents[name] = done["content"]
                return _StageRun(name, parts, final, None, done["content"])
        tmp = self.root / f".{name}-{key}.partial"
        # A partial folder of the same key holds finished tasks of an interrupted run (each
        # written atomically, under its final name): the stage resumes from them.
        tmp.mkdir(parents=True, exist_ok=True)
        log.info("stage %-12s running -> %s", name, final)
        return _StageRun(name, parts, final, tmp)

    def _finish(self, run: "_StageRun") -> tuple[Path, str]:
        """The artifact written in ``run.tmp``: its files checked against the stage's declared
        writes, its content key, DONE, renamed to its final name."""
        t0 = time.perf_counter()
        stage = STAGES[run.name.split(".")[0]]
        undeclared = stage.undeclared_writes(run.tmp)
        if undeclared:
            raise DeclarationError(f"stage {run.name} wrote {', '.join(undeclared)}, which match none of its "
                                   f"declared writes ({', '.join(stage.writes)})")
        content = content_key(run.tmp, self.engine if self.engine is not None and self.engine.running else None)
        with self.lock:
            self.contents[run.name] = content
        (run.tmp / "DONE").write_text(json.dumps({**run.parts, "content": content}, sort_keys=True, indent=1,
                                                 default=str))
        release_heap()
        shutil.rmtree(run.final, ignore_errors=True)
        os.replace(run.tmp, run.final)
        seconds = (time.perf_counter() - run.t0) if run.job_seconds is None else \
            run.job_seconds + (time.perf_counter() - t0)
        with self.lock:
            self.timings[run.name] = round(seconds, 2)
            self.built.append(run.name)
        log.info("stage %-12s done in %.1f s", run.name, self.timings[run.name])
        return run.final, content


@dataclass
class _StageRun:
    """A stage begun by Workdir._begin: ``tmp`` None when its artifact was complete (``content``)."""

    name: str
    parts: dict
    final: Path
    tmp: Path | None
    content: str | None = None
    t0: float = field(default_factory=time.perf_counter)
    job_seconds: float | None = None


#: An artifact of fewer bytes is hashed in this process (~0.1 s): on a cluster its hash tasks
#: would wait for the workers, busy with the tasks of the stages running beside it (the bio
#: lmtext stage's 25 MB waited 40 s behind the aligner's).
HASH_HERE_BYTES = 64 << 20


def file_sha256(path) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def content_key(folder: Path, engine=None) -> str:
    """The artifact's content: sha256 over every file's relative name and sha256, in name order.

    A two-level hash so that the files can be hashed side by side: ``engine`` (a running
    cluster) hashes them on its workers when they hold HASH_HERE_BYTES or more, otherwise this
    process does; the key is the same.
    """
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name not in ("DONE", VOLATILE))
    if engine is not None and len(files) > 1 and sum(p.stat().st_size for p in files) >= HASH_HERE_BYTES:
        # before the tasks already waiting: the stage is done but for its key
        digests = engine.map(file_sha256, [(str(p),) for p in files], name="hash", priority=1)
    else:
        digests = [file_sha256(p) for p in files]
    h = hashlib.sha256()
    for path, digest in zip(files, digests):
        h.update(str(path.relative_to(folder)).encode() + b"\0" + digest.encode() + b"\0")
    return h.hexdigest()[:16]


class Build:
    """One build of one recipe: the stages of pivot/pipeline/graph.py that the recipe has, each
    run (or reused) once by :meth:`run_stage`, in the graph's order or side by side."""

    def __init__(self, domain: str | None = "bio", *, recipe=None, data=None, out=None, work=None,
                 threads: int = 0, quiet: bool = False, lmplz: bool = False, workers: int | None = None,
                 scheduler: str | None = None, prestart: bool = False, store: bool = True, parts: int = 1):
        # store=False: no database is written (`pivot score`), so none is checked
        self.recipe_file = recipes.recipe_path(domain, recipe)
        self.rec = recipes.load_recipe(self.recipe_file)
        if lmplz and self.rec.get("domain"):
            # --lmplz is the recipe's [domain] estimator = "lmplz": the lm stage reads it there
            self.rec["domain"] = {**self.rec["domain"], "estimator": "lmplz"}
        self.data_root = recipes.resolve_data_root(data)
        self.name = self.rec["name"]
        self.engine = None

        def start_workers():
            # Once the arguments, recipe and paths have passed, a build (prestart) starts its
            # cluster in the background while preflight reads every input through: the
            # workers are up when the first sharded stage needs them.
            self.engine = Engine(workers=workers, scheduler=scheduler)
            if prestart:
                self.engine.prestart()

        # Every input opened and checked, every output checked writable and not an input,
        # before anything is written (pivot/preflight.py; docs/bad-input.md).
        try:
            self.plan = preflight.check(self.recipe_file, self.data_root,
                                        (Path(out) if out else Path(f"{self.name}.db")) if store else None,
                                        Path(work) if work else Path("work") / self.name,
                                        threads=threads, workers=workers, scheduler=scheduler, lmplz=lmplz,
                                        on_checked=start_workers, parts=parts)
        except BaseException:
            if self.engine is not None:
                self.engine.close()
            raise
        self.out_path = self.plan.out_path  # absolute: SQLite never reads "file:..." as a URI
        #: The database's parts: 1 is one file, N > 1 a folder of N parts (pivot.store.parts).
        self.parts = parts
        self.writes_database = store
        # Absolute (preflight made it so): the tasks get paths under it, and a worker of an
        # external cluster runs in a folder of its own.
        self.wd = Workdir(self.plan.work_dir, engine=self.engine)
        self.wd.root.mkdir(parents=True, exist_ok=True)
        self.threads = threads
        self.quiet = quiet
        self.langs = [spec["lang"] for spec in self.rec["bitext"]]
        #: stage name -> (folder, content key), {lang: (folder, key)} for a stage per language
        self.artifacts: dict = {}
        self.fingerprints: dict[str, str] = {}
        self.started = time.perf_counter()
        log.info("pivot %s: %s", __version__, " ".join(sys.argv))
        log.info("recipe %s, data root %s, work dir %s", self.recipe_file, self.data_root, self.wd.root)
        log.info("%s", self.plan.summary())

    def stages(self, until: str | None = None) -> list[str]:
        """The stages this recipe has, in the graph's order: all of them, or those ``until``
        needs (itself included). A recipe without [domain] has no LM branch; one whose phrases
        are labelled [X] (``[ppdb2] lhs = "x"``) trains no tagger; `pivot score` writes no database."""
        names = [n for n in order() if STAGES[n].wanted(self.rec) and (self.writes_database or n != "store")]
        return names if until is None else [n for n in names if n in upstream(until)]

    def run(self, until: str | None = None) -> None:
        """Every stage of :meth:`stages`, each as soon as what it needs is done (run_stages: side
        by side on a cluster, one after another in one process)."""
        steps = {name: partial(self.run_stage, STAGES[name]) for name in self.stages(until)}
        run_stages(steps, side_by_side=not self.engine.in_process, on_error=self.engine.stop)

    def store(self) -> Path:
        """The whole build: every stage, the store (the database at ``out_path``) last."""
        try:
            self.run()
            return self.out_path
        finally:
            self.engine.close()

    def run_stage(self, stage: Stage) -> None:
        """One stage (every language's, for a stage per language), the same for all: its
        parameters from the recipe (``stage.params``, the only reader of its settings), the
        fingerprints of its data files, its inputs' content keys; then its artifact reused,
        or built by ``stage.run`` (a generator's batches beside the other languages' on the
        engine) and checked against its declared writes (Workdir)."""
        specs = []
        for lang in self.langs if stage.per_language else [None]:
            name = f"{stage.name}.{lang}" if lang else stage.name
            params = stage.params(self.rec, lang) if lang else stage.params(self.rec)
            keyed = dict(params)
            if stage.data is not None:
                keyed["data"] = self._fingerprint(stage.data(params, self.data_root))
            inputs = {need: self._input_key(need, lang) for need in stage.needs if need in self.artifacts}
            context = Context(stage, name, Params(name, params), None, self.engine, self.data_root, self.recipe_file,
                              threads=self.threads, quiet=self.quiet, lang=lang,
                              artifacts={need: self.artifacts[need] for need in stage.needs if need in self.artifacts})
            specs.append((name, inputs, keyed, context))
        if stage.name == "store":
            # The database is the store's output, at --out (never cached: its meta records this
            # build's seconds); pivot.store.write writes it under a temporary name and renames it.
            [(_, inputs, _, context)] = specs
            check_inputs(stage.name, inputs)
            context.tmp = self.out_path
            context.record = {"parts": self.parts, "fingerprints": self.fingerprints, "seconds": self.wd.timings,
                              "started": self.started, "work": self.wd.root}
            stage.run(context)
            return
        if inspect.isgeneratorfunction(stage.run):
            done = self.wd.stages([(name, inputs, keyed, partial(_job, stage, context))
                                   for name, inputs, keyed, context in specs])
        else:
            done = [self.wd.stage(name, inputs, keyed, partial(_produce, stage, context))
                    for name, inputs, keyed, context in specs]
        self.artifacts[stage.name] = dict(zip(self.langs, done)) if stage.per_language else done[0]

    def _input_key(self, need: str, lang: str | None):
        """A needed stage's content key; of a stage per language, this language's (for a stage
        per language) or every language's in recipe order."""
        found = self.artifacts[need]
        if not isinstance(found, dict):
            return found[1]
        return found[lang][1] if lang else [found[x][1] for x in self.langs]

    def _fingerprint(self, files) -> list[str]:
        prints = recipes.fingerprint_files(files)
        with self.wd.lock:
            self.fingerprints.update({os.path.relpath(k, self.data_root): v for k, v in prints.items()})
        return sorted(prints.values())


def _produce(stage: Stage, context: Context, tmp: Path) -> None:
    context.tmp = tmp
    stage.run(context)


def _job(stage: Stage, context: Context, tmp: Path):
    context.tmp = tmp
    return (yield from stage.run(context))


def run_build(domain: str | None = "bio", **kwargs) -> Path:
    """Build the paraphrase database of a recipe; returns the database path."""
    from pivot.locking import WorkdirLock, sweep_stale

    build = Build(domain, prestart=True, **kwargs)
    try:
        with WorkdirLock(build.wd.root):  # a second build on the same work dir stops: "in use by PID N"
            if build.engine.scheduler is None:  # process ids mean something on this host only
                sweep_stale(build.wd.root, outputs=[build.out_path])
            return build.store()
    finally:
        build.engine.close()


