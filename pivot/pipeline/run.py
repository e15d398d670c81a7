"""The build: every stage of the pipeline, cached in a work directory.

    corpus ─┬─> align ─> encode ─────────────────────────┬─> weights ─> extract ─> translation ─> pivot
            └─> lmtext ─> lm ─> score ───────────────────┘      ┌─> combine ─┐
                                                  pivot ─┼─> ppdb2 ───┼─> store
                                                         └─> lhs ─────┘
    tagger (needs no stage: GENIA-pos, Brown) ──────────────────^

(pivot/pipeline/graph.py declares it.) On a cluster a stage starts as soon as the stages it
needs are done (:func:`run_stages`): the LM branch and the tagger run beside the aligner, ppdb2
beside lhs and combine. In one process (``--workers 1``) the stages run one after another.

Each stage writes its artifact into `<work>/<stage>-<key>/`, where the key hashes the
stage's parameters, the keys of the stages it reads and the fingerprints of the data
files. The folder is built under a temporary name and renamed when complete, so an
interrupted build resumes at the first unfinished stage and a rerun with unchanged
inputs reuses everything. The database itself is written the same way (see pivot.store.db).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import shutil
import signal
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np

from pivot._version import __version__
from pivot import preflight, recipes
from pivot.errors import InputError
from pivot.locking import resolve_threads
from pivot.store.combined import symmetric_p
from pivot.pipeline.encode import phrase_texts
from pivot.pipeline.engine import Batch, Engine, release_heap
from pivot.pipeline.graph import STAGES, check_inputs, order

log = logging.getLogger("pivot")

# Bump a stage's version when its code changes what it writes: old artifacts then miss.
STAGE_VERSIONS = {"corpus": 1, "align": 1, "encode": 2, "lmtext": 4, "lm": 4, "score": 4,
                  "weights": 3, "extract": 4, "translation": 4, "pivot": 5, "combine": 2, "ppdb2": 4,
                  "tagger": 1, "lhs": 2}


def _key(parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


_LOCKS_LOCK = threading.Lock()


class once:
    """A cached property that is computed once per instance even when threads ask for it at the
    same time (stages run side by side ask for what they share: the phrase keys, the models).

    ``functools.cached_property`` has no lock since Python 3.12, and in 3.11 one lock per class
    (two pipelines would wait on each other). Here each instance has a lock per property: a
    thread asking for a value another thread is computing waits for it. A property that raises
    caches nothing. The stages' properties ask only for the stages upstream of them, so the
    locks are taken in the graph's order and cannot deadlock."""

    def __init__(self, fn):
        self.fn, self.name, self.__doc__ = fn, fn.__name__, fn.__doc__

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        values = obj.__dict__
        if self.name in values:
            return values[self.name]
        with _LOCKS_LOCK:
            lock = values.setdefault("_once_locks", {}).setdefault(self.name, threading.RLock())
        with lock:
            if self.name not in values:
                values[self.name] = self.fn(obj)
            return values[self.name]


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
        e.g. when an aligner produces different links from the same corpus.
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
        parts = {"stage": name, "version": STAGE_VERSIONS[name.split(".")[0]], "inputs": inputs, "params": params}
        key = _key(parts)
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
        """The artifact written in ``run.tmp``: its content key, DONE, renamed to its final name."""
        t0 = time.perf_counter()
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


#: A file an artifact may hold that is not part of its content (timings).
VOLATILE = "timings.json"
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


def _versions() -> dict:
    import importlib.metadata as md

    out = {"pivot": __version__, "python": platform.python_version()}
    for dist in ("numpy", "scipy", "ufal.kenlm", "sqlite-utils", "statsmodels", "eflomal",
                 "opus-fast-mosestokenizer", "Cython"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist] = None
    return out


class Pipeline:
    """One build of one recipe. Each stage is a cached property: asking for a stage's
    artifact runs (or reuses) it and every stage it depends on, nothing else."""

    def __init__(self, domain: str | None = "bio", *, recipe=None, data=None, out=None, work=None,
                 threads: int = 0, quiet: bool = False, lmplz: bool = False, workers: int | None = None,
                 scheduler: str | None = None, prestart: bool = False, store: bool = True, parts: int = 1):
        # store=False: no database is written (`pivot score`), so none is checked
        self.recipe_file = recipes.recipe_path(domain, recipe)
        self.rec = recipes.load_recipe(self.recipe_file)
        self.data_root = recipes.resolve_data_root(data)
        self.name = self.rec["name"]
        # Every input opened and checked, every output checked writable and not an input,
        # before anything is written (pivot/preflight.py; docs/bad-input.md).
        from pivot.pipeline.engine import Engine

        self.engine = None

        def start_workers():
            # Once the arguments, recipe and paths have passed, a build (prestart) starts its
            # cluster in the background while preflight reads every input through: the
            # workers are up when the first sharded stage needs them.
            self.engine = Engine(workers=workers, scheduler=scheduler)
            if prestart:
                self.engine.prestart()

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
        # Absolute (preflight made it so): the tasks get paths under it, and a worker of an
        # external cluster runs in a folder of its own.
        self.wd = Workdir(self.plan.work_dir)
        self.wd.root.mkdir(parents=True, exist_ok=True)
        self.threads = threads
        self.wd.engine = self.engine
        self.quiet = quiet
        self.lmplz = lmplz
        self.langs = [spec["lang"] for spec in self.rec["bitext"]]
        self.fingerprints: dict[str, str] = {}
        self.started = time.perf_counter()
        log.info("pivot %s: %s", __version__, " ".join(sys.argv))
        log.info("recipe %s, data root %s, work dir %s", self.recipe_file, self.data_root, self.wd.root)
        log.info("%s", self.plan.summary())

    def _fingerprint(self, files) -> list[str]:
        prints = recipes.fingerprint_files(files)
        with self.wd.lock:
            self.fingerprints.update({os.path.relpath(k, self.data_root): v for k, v in prints.items()})
        return sorted(prints.values())

    # ------------------------------------------------------------ corpus + align, per language

    @once
    def corpora(self) -> list[tuple[Path, str]]:
        """Per language: (corpus dir, content key). One task per language
        (corpus.write_bitext), side by side on a cluster."""
        from pivot.pipeline import corpus

        # A resample of the bitext ([preprocess] sample_fraction < 1) enters the key here; the
        # full bitext's parameters are the table as always (corpus.sample_params).
        preprocess = corpus.sample_params(self.rec["preprocess"])
        # On the workers without a progress bar: several on one terminal would garble it.
        write = partial(corpus.write_bitext, quiet=self.quiet or not self.engine.in_process, **preprocess)
        specs = []
        for spec in self.rec["bitext"]:
            lang = spec["lang"]
            files = [f for src in spec["sources"] for f in recipes.source_files(src, self.data_root, lang)]

            def job(tmp, spec=spec):
                yield Batch(write, [(spec["sources"], spec["lang"], self.data_root, tmp)], name=f"corpus.{spec['lang']}")

            specs.append((f"corpus.{lang}", {},
                          {"sources": spec["sources"], "data": self._fingerprint(files), "preprocess": preprocess}, job))
        done = self.wd.stages(specs)
        for corpus_dir, _ in done:
            _check_kept(corpus.read_meta(corpus_dir), self.recipe_file)
        return done

    @once
    def english_texts(self) -> list[tuple[Path, int]]:
        """(bitext.en, sentence pairs) of each language, in recipe order: the English side the
        encode stage concatenates into english.txt, read as it is by the LM branch."""
        from pivot.pipeline.corpus import read_meta

        return [(d / "bitext.en", int(read_meta(d)["n_pairs"])) for d, _ in self.corpora]

    @once
    def bitexts(self) -> list[tuple[Path, Path, list[str]]]:
        """Per language: (corpus dir, alignment dir, keys). The align stages run side by side
        (Workdir.stages: on a cluster, every language's and both directions' tasks keep the
        workers busy while an M-step runs here)."""
        from pivot.pipeline import align

        corpora, specs = [], []
        for spec, (corpus_dir, corpus_key) in zip(self.rec["bitext"], self.corpora):
            lang = spec["lang"]
            params = dict(self.rec["align"])
            pharaoh = params.pop("pharaoh", {}) or {}
            pharaoh_path = None
            if params["method"] == "pharaoh":
                if lang not in pharaoh:
                    raise InputError(f"[align] method 'pharaoh' needs a file for {lang!r}: "
                                     f"pharaoh = {{{lang} = 'path'}}", self.recipe_file)
                pharaoh_path = self.data_root / pharaoh[lang]
                if not pharaoh_path.is_file():
                    raise InputError("alignment file missing; the data root is set by --data DIR or "
                                     f"{recipes.DATA_ENV}", pharaoh_path)
                params["pharaoh"] = self._fingerprint([pharaoh_path])
            n_threads = resolve_threads(self.threads)

            def job(tmp, corpus_dir=corpus_dir, pharaoh_path=pharaoh_path, params=params, n_threads=n_threads):
                # Chunks of the shard size: the links of shard k are one file.
                # ibm2's EM and Viterbi run by shard as the engine's tasks (the same links on any engine).
                return align.align_corpus_job(
                    corpus_dir, tmp, method=params["method"], chunk_sentences=self.shard_sentences,
                    n_threads=n_threads, pharaoh_path=pharaoh_path, quiet=self.quiet, model=params["model"],
                    length=params["length"], task_threads=n_threads if self.engine.in_process else 1)

            corpora.append((corpus_dir, corpus_key))
            specs.append((f"align.{lang}", {"corpus": corpus_key}, params, job))
        aligned = self.wd.stages(specs)
        return [(corpus_dir, align_dir, [corpus_key, align_key])
                for (corpus_dir, corpus_key), (align_dir, align_key) in zip(corpora, aligned)]

    # ------------------------------------------------------------ encode: shards of token ids

    @property
    def shard_sentences(self) -> int:
        return int(self.rec["extract"]["shard_sentences"])

    @property
    def shard_tokens(self) -> int:
        return int(self.rec["extract"]["shard_tokens"])

    @once
    def encoded(self) -> tuple[Path, str]:
        from pivot.pipeline.encode import encode_shards

        inputs = {"corpus": [keys[0] for _, _, keys in self.bitexts], "align": [keys[1] for _, _, keys in self.bitexts]}
        return self.wd.stage("encode", inputs, {"shard_sentences": self.shard_sentences, "shard_tokens": self.shard_tokens},
                             lambda tmp: encode_shards([(lang, b[0], b[1]) for lang, b in zip(self.langs, self.bitexts)],
                                                       tmp, self.shard_sentences, self.shard_tokens))

    @once
    def shards(self) -> dict:
        return json.loads((self.encoded[0] / "shards.json").read_text(encoding="utf-8"))

    @property
    def n_sentences(self) -> int:
        return int(self.shards["n_sentences"])

    @property
    def domain(self) -> dict | None:
        return self.rec.get("domain")

    # ------------------------------------------------------------ language models

    @once
    def lm_texts(self) -> tuple[Path, str]:
        """The in-domain text and the general text(s), normalised, one sentence a line
        (pivot.pipeline.lmtext: cross-fitted general LMs, matched samples): one task, which
        reads the corpus stages' English side and so runs beside the aligner on a cluster."""
        from pivot.pipeline import lmtext, mono

        dom = self.domain
        files = []
        for spec in (dom["in_domain"], dom.get("general") or {}):
            for kind, patterns in spec.items():
                for pattern in patterns:
                    files += mono.expand(self.data_root, pattern, kind)
        texts = [(str(path), n) for path, n in self.english_texts]

        def produce(tmp):
            stats, = self.engine.map(lmtext.write_lm_texts, [(tmp, self.data_root, dom, texts)], name="lmtext")
            log.info("LM text: %s", stats)

        return self.wd.stage("lmtext", {"corpus": [key for _, key in self.corpora]},
                             {"in_domain": dom["in_domain"], "general": dom.get("general"),
                              "seed": dom["seed"], "data": self._fingerprint(sorted(set(files))),
                              "matched": dom.get("matched", True),
                              "vocab_min_count": dom.get("vocab_min_count", 2)}, produce)

    @property
    def lm_names(self) -> list[str]:
        return ["in_domain"] + (["general"] if self.domain.get("general") else ["general.0", "general.1"])

    @once
    def lms(self) -> tuple[Path, str]:
        """The modified Kneser-Ney LMs (ARPA, binarised when kenlm's build_binary is installed)."""
        from pivot.pipeline import lm

        order = self.domain["order"]
        estimator = "lmplz" if self.lmplz else self.domain["estimator"]
        text_dir, text_key = self.lm_texts

        vocab_path = text_dir / "vocab.txt"
        vocab_path = str(vocab_path) if vocab_path.is_file() else None

        def produce(tmp):
            # One task per model: on a cluster the models are estimated side by side.
            names = self.lm_names
            done = self.engine.map(lm.estimate_model, [(name, text_dir / f"{name}.txt", tmp, order, estimator,
                                                        vocab_path) for name in names], name="lm")
            for name, d in zip(names, done):
                if d["fallback_orders"]:
                    log.warning("lm %s: too little text for modified Kneser-Ney discounts at order %s; "
                                "used the fallback discounts %s", name,
                                ", ".join(map(str, d["fallback_orders"])), lm.DEFAULT_DISCOUNT_FALLBACK)
            (tmp / "stats.json").write_text(json.dumps({name: d["stats"] for name, d in zip(names, done)},
                                                       indent=1, default=str))
            # Timings vary run to run: kept beside the artifact, outside its content key.
            (tmp / VOLATILE).write_text(json.dumps({name: d["seconds"] for name, d in zip(names, done)}, indent=1))

        return self.wd.stage("lm", {"lmtext": text_key}, {"order": order, "estimator": estimator}, produce)

    def lm_path(self, name: str) -> Path:
        lm_dir = self.lms[0]
        binary = lm_dir / f"{name}.binary"
        return binary if binary.is_file() else lm_dir / f"{name}.arpa"

    # ------------------------------------------------------------ Moore-Lewis scores

    @once
    def scores(self) -> tuple[Path, str]:
        """sigma = H_tgt - H_gen (bits per word, </s> counted) for every English sentence;
        H_gen from the general LM that did not see the sentence (see lm_texts)."""
        from pivot.pipeline import score

        def produce(tmp):
            general = ({0: self.lm_path("general")} if self.domain.get("general")
                       else {k: self.lm_path(f"general.{1 - k}") for k in (0, 1)})
            vocab_path = self.lm_texts[0] / "vocab.txt"
            score.score_stage(tmp, [(str(path), n) for path, n in self.english_texts], self.lm_texts[0] / "folds.npy",
                              self.lm_path("in_domain"), general, str(vocab_path) if vocab_path.is_file() else None,
                              self.engine)

        return self.wd.stage("score", {"lm": self.lms[1], "lmtext": self.lm_texts[1],
                                       "corpus": [key for _, key in self.corpora]}, {}, produce)

    def ml_scores(self):
        from pivot.pipeline.score import MooreLewisScores

        z = np.load(self.scores[0] / "scores.npz")
        return MooreLewisScores(h_tgt=z["h_tgt"], h_gen=z["h_gen"], sigma=z["sigma"], n_words=z["n_words"])

    # ------------------------------------------------------------ weights: one column per model

    @once
    def weights(self) -> tuple[Path, str]:
        from pivot.pipeline import weights as W

        dom = self.domain
        inputs, params = {"encode": self.encoded[1]}, {}
        if dom:
            inputs["score"], params["taus"] = self.scores[1], dom["taus"]

        def produce(tmp):
            if dom is None:
                columns = W.general(self.n_sentences)[:, None]
                models = [{"name": "general", "kind": "general", "description": "every sentence pair, weight 1",
                           "params": {}}]
                report = None
            else:
                ml = self.ml_scores()
                columns, models = W.model_columns(ml, extra_taus=dom["taus"])
                report = W.weight_report(columns, models, ml, self.in_domain_origin())
                log.info("Moore-Lewis: %s", json.dumps(report.get("summary", report), default=str)[:2000])
            np.save(tmp / "weights.npy", np.ascontiguousarray(columns, dtype=np.float64))
            (tmp / "models.json").write_text(json.dumps(models, indent=1))
            (tmp / "report.json").write_text(json.dumps(report, indent=1, default=str))

        return self.wd.stage("weights", inputs, params, produce)

    def in_domain_origin(self) -> np.ndarray | None:
        """True for sentences from a source the recipe names as in-domain (for the report only)."""
        names = set((self.domain or {}).get("report_in_domain_sources", []))
        if not names:
            return None
        is_in = np.array([name in names for _, name in self.shards["origins"]], dtype=bool)
        return is_in[np.load(self.encoded[0] / "origin.npy")]

    @once
    def models(self) -> list[dict]:
        return json.loads((self.weights[0] / "models.json").read_text())

    # ------------------------------------------------------------ extract + pivot

    @property
    def n_parts(self) -> int:
        """Partitions of the phrase-key range for the merges: a merge task holds about
        1/n_parts of all shards' partial counts, so this grows with the corpus (about 50k
        sentence pairs a partition, at least 8 so that a few workers share the merges evenly).
        It follows the data, never the number of workers; the database does not depend on it."""
        return max(8, -(-self.n_sentences // 50_000))

    @once
    def table_dir(self) -> tuple[Path, str]:
        """Round 1: every shard's phrase pairs, counted under every model, split by e key range."""
        from pivot.pipeline import extract

        max_len = self.rec["extract"]["max_phrase_len"]
        n_parts = self.n_parts

        def produce(tmp):
            weights = self.weights[0] / "weights.npy"
            tasks = [(self.encoded[0] / sh["file"], weights, sh["start"], max_len, n_parts,
                      tmp / f"x-{i:05d}.arrays") for i, sh in enumerate(self.shards["shards"])]
            done = self.engine.map(extract.extract_shard, tasks, name="extract",
                                   cost=[sh.get("english_tokens", sh["n"]) for sh in self.shards["shards"]])
            (tmp / "extract.json").write_text(json.dumps({"n_parts": n_parts, "n_shards": len(tasks),
                                                          "n_pairs_in_shards": sum(d.get("n_pairs", 0) for d in done)}))

        return self.wd.stage("extract", {"encode": self.encoded[1], "weights": self.weights[1]},
                             {"max_len": max_len, "n_parts": n_parts}, produce)

    @once
    def translation_dir(self) -> tuple[Path, str]:
        """Rounds 2-4: merged counts, p(f|e) and p(e|f) over the full table, pruning, the pivot structure."""
        from pivot.pipeline import translation as T

        prune = {k: v for k, v in self.rec["pivot"].items() if k in _ENTRY_PRUNING}
        x_dir = self.table_dir[0]
        n_parts = json.loads((x_dir / "extract.json").read_text())["n_parts"]
        x_paths = sorted(x_dir.glob("x-*.arrays"))

        def produce(tmp):
            e_paths = [tmp / f"e-{p:04d}.arrays" for p in range(n_parts)]
            self.engine.map(T.merge_by_e, [(x_paths, p, n_parts, e_paths[p], prune["min_phrase_count"])
                                           for p in range(n_parts)], name="merge-e")
            f_paths = [tmp / f"f-{q:04d}.arrays" for q in range(n_parts)]
            stats = self.engine.map(_merge_by_f_task, [(e_paths, x_paths, q, f_paths[q], prune)
                                                       for q in range(n_parts)], name="merge-f")
            shape = T.assemble(f_paths, tmp / "structure", self.engine)
            total = {k: sum(s[k] for s in stats) for k in stats[0] if k != "n_kept_by_model"}
            (tmp / "translation.json").write_text(json.dumps({
                **{k: v for k, v in prune.items()}, "decided_on": "each model's own counts",
                "n_phrase_pairs": total["n_pairs"], "n_after_floors": total["n_after_floors"],
                "n_after_cap": total["n_kept"], "sum_deg_f_squared": total["sum_deg_f_squared"],
                "n_kept_by_model": np.sum([s["n_kept_by_model"] for s in stats], axis=0).tolist(),
                "n_parts": n_parts, **shape}, indent=1))

        return self.wd.stage("translation", {"extract": self.table_dir[1]}, prune, produce)

    def _part_paths(self, prefix: str) -> list[Path]:
        return sorted(self.translation_dir[0].glob(f"{prefix}-*.arrays"))

    @once
    def pivot_dir(self) -> tuple[Path, str]:
        """Round 5: P_k(e2|e1) = sum_f p_k(e2|f) p_k(f|e1) by ranges of English rows; each model
        keeps its pairs with P_k >= min_p_e2_given_e1 (no top-N: that is a lookup setting)."""
        from pivot.pipeline import pivoting

        floor = float(self.rec["pivot"]["min_p_e2_given_e1"])
        top_n = 0
        structure = self.translation_dir[0] / "structure"

        def produce(tmp):
            s = pivoting.load_structure(structure)
            # The ranges are the stage's files, so their number follows the data, never the
            # number of workers (the content key, and the signature, must not depend on it).
            n_tasks = max(PIVOT_MIN_TASKS, -(-len(s["row_f"]) // PIVOT_ENTRIES_PER_TASK))
            ranges = pivoting.row_ranges(np.asarray(s["row_ptr"]), np.asarray(s["col_ptr"]), np.asarray(s["row_f"]),
                                         n_tasks)
            del s
            parts = [tmp / f"rows-{i:04d}.arrays" for i in range(len(ranges))]
            # In process the kernel's own threads share the work; on a cluster, the workers do.
            threads = self.threads if self.engine.in_process else 1
            done = self.engine.map(pivoting.pivot_rows, [(structure, lo, hi, top_n, path, threads, floor)
                                                         for (lo, hi), path in zip(ranges, parts)], name="pivot")
            # The row ranges, in e1 order, are the stage's output as they are: the database
            # write reads them in turn, and no process first copies them into one file.
            meta = {**json.loads((self.translation_dir[0] / "translation.json").read_text()), "top_n": top_n,
                    "min_p_e2_given_e1": floor}
            pivoting.Paraphrases.write_index(tmp, parts, [d["n_pairs"] for d in done], meta)

        return self.wd.stage("pivot", {"translation": self.translation_dir[1]},
                             {"top_n": top_n, "min_p_e2_given_e1": floor}, produce)

    @once
    def phrase_keys(self) -> np.ndarray:
        """Key of each English phrase id of the paraphrase table (ids are ranks of keys)."""
        return np.load(self.translation_dir[0] / "structure" / "e_key.npy")

    def paraphrase_parts(self):
        """The paraphrase table's row ranges, read one at a time in (e1, e2) order."""
        from pivot.pipeline.pivoting import Paraphrases

        return Paraphrases.iter_parts(self.pivot_dir[0])

    # ------------------------------------------------------------ ppdb2: PPDB 2.0's layer

    @once
    def ppdb2_dir(self) -> tuple[Path, str]:
        """Every stored pair's well-formedness labels, learned score (PPDB2.0Score, fitted to the
        PPDB 2.0 ratings) and relation probabilities (fitted to WordNet), and the sizes; fitted
        once here, applied per range of the pivot stage's rows (pivot.pipeline.ppdb2)."""
        from pivot.pipeline import ppdb2
        from pivot.pipeline.corpus import Vocab
        from pivot.pipeline.pivoting import Paraphrases
        from pivot.pipeline.translation import foreign_rows, phrase_rows

        # lhs is the lhs stage's setting: the phrases' labels are no input of this one
        params = {k: v for k, v in self.rec["ppdb2"].items() if k != "lhs"}
        files = ppdb2.data_files(params, self.data_root)
        encode_dir = self.encoded[0]

        def produce(tmp):
            e_rows, e_count = phrase_rows(self._part_paths("e"), self.phrase_keys)
            f_keys = np.load(self.translation_dir[0] / "structure" / "f_key.npy")
            f_lang_of_token = np.load(encode_dir / "f_lang.npy")

            def f_lang_of(ids):
                # a foreign phrase's language is its first token's (ids are offset per language)
                return f_lang_of_token[foreign_rows(self._part_paths("f"), f_keys[ids])[:, 0]]

            index = Paraphrases.read_index(self.pivot_dir[0])
            ppdb2.build(tmp, part_paths=[self.pivot_dir[0] / name for name in index["parts"]], e_rows=e_rows,
                        e_count=e_count, e_tokens=Vocab.load(encode_dir / "vocab.en").tokens, f_lang_of=f_lang_of,
                        models=[m["name"] for m in self.models], params=params, data_root=self.data_root,
                        engine=self.engine, shard_paths=[encode_dir / sh["file"] for sh in
                                                         json.loads((encode_dir / "shards.json").read_text())["shards"]])

        return self.wd.stage("ppdb2", {"pivot": self.pivot_dir[1], "translation": self.translation_dir[1],
                                       "encode": self.encoded[1]},
                             {**params, "data": self._fingerprint(files)}, produce)

    # ------------------------------------------------------------ lhs: the phrases' PPDB labels

    @once
    def tagger_dir(self) -> tuple[Path, str]:
        """The lexicon tagger trained on the data root's GENIA-pos and Brown (pivot.pipeline.lhs):
        it needs no stage, only those files."""
        from pivot.pipeline import lhs
        from pivot.store.labels import LEXICON_TAGGER_VERSION

        files = lhs.data_files(self.data_root)

        def job(tmp):
            # one task: on a cluster it trains on a worker while the aligner's tasks run
            yield Batch(lhs.train_stage, [(tmp, self.data_root)], name="tagger")

        [done] = self.wd.stages([("tagger", {}, {"tagger_version": LEXICON_TAGGER_VERSION,
                                                 "data": self._fingerprint(files)}, job)])
        return done

    @once
    def lhs_dir(self) -> tuple[Path, str] | None:
        """Each stored phrase's PPDB label (phrase.lhs) by the tagger stage's tagger
        (pivot.pipeline.lhs); None when the recipe says lhs = "x"."""
        if self.rec["ppdb2"]["lhs"] != "tagged":
            return None
        from pivot.pipeline import lhs
        from pivot.pipeline.corpus import Vocab
        from pivot.pipeline.pivoting import Paraphrases
        from pivot.pipeline.translation import phrase_rows

        tagger_dir, tagger_key = self.tagger_dir

        def produce(tmp):
            e_rows, _ = phrase_rows(self._part_paths("e"), self.phrase_keys)
            index = Paraphrases.read_index(self.pivot_dir[0])
            lhs.build(tmp, part_paths=[self.pivot_dir[0] / name for name in index["parts"]], e_rows=e_rows,
                      e_tokens=Vocab.load(self.encoded[0] / "vocab.en").tokens, tagger_dir=tagger_dir)

        return self.wd.stage("lhs", {"pivot": self.pivot_dir[1], "translation": self.translation_dir[1],
                                     "encode": self.encoded[1], "tagger": tagger_key}, {"lhs": "tagged"}, produce)

    # ------------------------------------------------------------ combine: General + X

    @once
    def combination(self) -> tuple[Path, str] | None:
        """For every domain model X, a logistic regression over (p_general, p_X) fitted on the
        tuning part of the labelled in-domain pairs; scores every pair General proposes."""
        comb = self.rec.get("combine")
        if not comb or len(self.models) < 2:
            return None
        from pivot.pipeline import combine
        from pivot.eval import gold

        gold_files = [self.data_root / g for g in comb["gold"]]
        for g in gold_files:
            if not g.is_file():
                raise InputError(f"gold file missing; the data root is set by --data DIR or {recipes.DATA_ENV}", g)

        def produce(tmp):
            pairs = [p for g in gold_files for p in gold.read_gold(g, comb["format"])]
            labelled = gold.binarize(pairs, comb["threshold"])
            tune, test = gold.tuning_test_split(labelled, n_tune=comb["n_tune"], seed=comb["seed"])
            ids = self.phrase_ids([t for p in tune for t in p[:2]])
            fwd, rev = directed_scores(self.paraphrase_parts(), [(ids.get(a), ids.get(b)) for a, b, _ in tune])
            labels = np.array([p[2] for p in tune], dtype=np.float64)
            # The paper's candidates: pairs General extracted (either direction: gold pairs are unordered).
            candidate = ~np.isnan(symmetric_p(fwd[:, 0], rev[:, 0]))
            n_candidates, n_good = int(candidate.sum()), int(labels[candidate].sum())
            if n_good in (0, n_candidates):
                # Preflight checked the tuning pairs hold both classes; which of them the bitext
                # made pairs of only the built table says.
                raise InputError(
                    f"[combine]: {n_candidates} of the {len(tune)} tuning pairs are pairs of the General model, "
                    f"{n_good} of them good: fitting the combination needs good and bad pairs among them; "
                    "add gold pairs whose phrases the bitext holds, or build without [combine]", self.recipe_file)
            g_f, g_r = fwd[candidate, 0], rev[candidate, 0]
            fitted = {}
            for k, model in enumerate(self.models[1:], start=1):
                # The evaluation scores a combination with the same unordered features.
                c = combine.fit_combination_unordered(g_f, g_r, fwd[candidate, k], rev[candidate, k], labels[candidate])
                fitted[f"general+{model['name']}"] = c.to_meta()
                log.info("general+%s: %s", model["name"], json.dumps(fitted[f"general+{model['name']}"], default=str)[:400])
            (tmp / "combination.json").write_text(json.dumps({
                "gold": comb["gold"], "format": comb["format"], "threshold": comb["threshold"],
                "n_tune_requested": comb["n_tune"], "seed": comb["seed"],
                "n_gold": len(labelled), "n_tuning": len(tune), "n_test": len(test),
                "n_tuning_candidates": int(candidate.sum()),
                "n_tuning_candidates_positive": int(labels[candidate].sum()),
                "tuning_pairs": [[a, b, int(y)] for a, b, y in tune],
                "test_pairs": [[a, b, int(y)] for a, b, y in test],
                "models": fitted,
            }, indent=1, default=str))

        data = self._fingerprint(gold_files)
        return self.wd.stage("combine", {"pivot": self.pivot_dir[1], "encode": self.encoded[1]}, {**comb, "data": data},
                             produce)

    def phrase_ids(self, texts) -> dict[str, int]:
        """English phrase id of each normalised text that the paraphrase table holds."""
        from pivot.pipeline.corpus import Vocab
        from pivot.pipeline.extract import phrase_keys
        from pivot.text import normalize_many

        vocab = Vocab.load(self.encoded[0] / "vocab.en")
        width = self.rec["extract"]["max_phrase_len"]
        texts = list(dict.fromkeys(texts))
        found, rows = [], []
        for text, norm in zip(texts, normalize_many(texts, "en")):
            toks = norm.split()
            if 0 < len(toks) <= width and all(t in vocab for t in toks):
                found.append(text)
                rows.append([vocab[t] for t in toks] + [-1] * (width - len(toks)))
        if not found:
            return {}
        keys = phrase_keys(np.array(rows, dtype=np.int32))
        table = self.phrase_keys
        pos = np.minimum(np.searchsorted(table, keys), max(len(table) - 1, 0))
        hit = (table[pos] == keys) if len(table) else np.zeros(len(keys), bool)
        return {t: int(i) for t, i, h in zip(found, pos.tolist(), hit.tolist()) if h}

    # ------------------------------------------------------------ store

    #: The property that runs (or reuses) each stage of pivot/pipeline/graph.py.
    STAGE_PROPERTIES = {"corpus": "corpora", "align": "bitexts", "encode": "encoded", "lmtext": "lm_texts",
                        "lm": "lms", "score": "scores", "weights": "weights", "extract": "table_dir",
                        "translation": "translation_dir", "pivot": "pivot_dir", "combine": "combination",
                        "ppdb2": "ppdb2_dir", "tagger": "tagger_dir", "lhs": "lhs_dir"}

    def run_stages(self) -> None:
        """Every stage of this recipe, each as soon as what it needs is done (run_stages: side by
        side on a cluster, one after another in one process). A recipe without [domain] has no
        LM branch; one whose phrases are labelled [X] (``[ppdb2] lhs = "x"``) trains no tagger."""
        names = [n for n in self.STAGE_PROPERTIES if (self.domain or n not in ("lmtext", "lm", "score"))
                 and (self.rec["ppdb2"]["lhs"] == "tagged" or n != "tagger")]
        run_stages({n: partial(getattr, self, self.STAGE_PROPERTIES[n]) for n in names},
                   side_by_side=not self.engine.in_process, on_error=self.engine.stop)

    def store(self) -> Path:
        try:
            self.run_stages()
            return self._store()
        finally:
            self.engine.close()

    def _store(self) -> Path:
        from pivot.pipeline import corpus
        from pivot.pipeline.pivoting import Paraphrases
        from pivot.pipeline.translation import foreign_rows, phrase_rows
        from pivot.store.write import write_database_chunks

        index = Paraphrases.read_index(self.pivot_dir[0])
        n_pairs_out = int(sum(index["n_pairs"]))
        ppdb2_dir = self.ppdb2_dir[0]
        lhs_stage = self.lhs_dir
        # The workers write the database's pair rows (pivot.store.write), or its parts.
        models = [dict(m) for m in self.models]
        layer = json.loads((ppdb2_dir / "ppdb2.json").read_text())
        comb_meta = None
        if self.combination is not None:
            comb_dir = self.combination[0]
            comb_meta = json.loads((comb_dir / "combination.json").read_text())
            for model in self.models[1:]:
                name = f"general+{model['name']}"
                models.append({"name": name, "kind": "combined",
                               "description": f"logistic regression over p_general and p_{model['name']}",
                               "params": {"base": "general", "other": model["name"],
                                          "fit": comb_meta["models"][name]}})
        if layer["ppdb2"]["learned"]:
            # after General and the domain models, so that models[0] stays General (the baseline)
            models.append({"name": "ppdb2", "kind": "learned",
                           "description": "PPDB2.0Score: ridge regression on the PPDB 2.0 human ratings over every "
                                          "model's p(e2|e1) and p(e1|e2), pivots, counts, strings and "
                                          "well-formedness (meta ppdb2)",
                           "params": {"meta": "ppdb2", "target": layer["ppdb2"]["target"]}})
        encode_dir = self.encoded[0]
        e_vocab = corpus.Vocab.load(encode_dir / "vocab.en")
        f_vocabs = [corpus.Vocab.load(encode_dir / f"vocab.{lang}") for lang in self.langs]
        f_lang_of_token = np.load(encode_dir / "f_lang.npy")
        # Text only for the phrases the database stores (most phrases pivot to nothing): the
        # write finds which in its first pass over the row ranges and asks for their texts.
        e_rows, e_count = phrase_rows(self._part_paths("e"), self.phrase_keys)
        f_keys = np.load(self.translation_dir[0] / "structure" / "f_key.npy")

        def e_text(e_used):
            return phrase_texts(e_rows, e_vocab.tokens, e_used)

        def f_text(f_used):
            return dict(zip(f_used.tolist(), foreign_phrase_texts(foreign_rows(self._part_paths("f"), f_keys[f_used]),
                                                                  f_vocabs, self.langs, f_lang_of_token)))
        tstats = json.loads((self.translation_dir[0] / "translation.json").read_text())

        prune = self.rec["pivot"]
        # (a build without labels keeps the key it had before the lhs stage existed)
        final_key = _key([self.pivot_dir[1], self.combination[1] if self.combination else None, self.ppdb2_dir[1]]
                         + ([lhs_stage[1]] if lhs_stage else []))
        # Only a resample of the bitext says so: a full bitext's signature is as it always was.
        sample = corpus.sample_params(self.rec["preprocess"])
        resample = ([f"sample:{sample['sample_fraction']!r}/seed{sample['sample_seed']}"]
                    if "sample_fraction" in sample else [])
        signature = "|".join([
            f"pivot:{__version__}", f"recipe:{self.name}@{self.rec['_sha256'][:12]}",
            f"data:{_key(self.fingerprints)[:12]}", *resample,
            f"align:{self.rec['align']['method']}@" + "+".join(self.wd.contents[f"align.{lang}"][:8] for lang in self.langs),
            f"maxlen:{self.rec['extract']['max_phrase_len']}", f"shards:{self.shard_sentences}/{self.shard_tokens}t",
            "prune:{min_p_f_given_e}/{min_p_e_given_f}/{max_e_per_f}/n{min_phrase_count}/floor{min_p_e2_given_e1}"
            "/per-model".format(**prune),
            ("lm:" + (f"matched/v{self.domain.get('vocab_min_count', 2)}" if self.domain.get("matched", True)
                      else "unmatched")) if self.domain else "lm:none",
            f"models:{len(models)}", f"build:{final_key[:12]}",
        ])
        meta = {
            "signature": signature,
            "recipe": {k: v for k, v in self.rec.items() if not k.startswith("_")},
            "recipe_file": self.rec["_path"], "recipe_sha256": self.rec["_sha256"],
            "data_fingerprints": self.fingerprints,
            "parameters": {k: self.rec[k] for k in ("preprocess", "align", "extract", "pivot")},
            # top_n: the recipe's lookup default (pivot lookup -k); the stored pairs are cut by
            # the floor only (index["meta"]["top_n"] == 0).
            "pruning": {**prune, **index["meta"], "lookup_top_n": prune["top_n"], "decided_on": "each model's own counts",
                        "n_pairs_out": n_pairs_out, "n_phrase_pairs": tstats["n_phrase_pairs"],
                        "n_english_phrases_kept": tstats["n_e"], "n_foreign_phrases_kept": tstats["n_f"]},
            "shards": {"shard_sentences": self.shard_sentences, "shard_tokens": self.shard_tokens, "n_shards": len(self.shards["shards"]),
                       "n_sentences": self.n_sentences, "n_parts": tstats["n_parts"]},
            "normalization": {"lang": "en", "lowercase": True,
                              "tokenizer": "Moses (mosestokenizer C++ port), escape off"},
            "pivot_languages": self.langs,
            "versions": _versions(),
            "stage_seconds": self.wd.timings,
            "corpus_stats": {lang: json.loads((d / "meta.json").read_text()).get("stats", {})
                             for lang, (d, _, _) in zip(self.langs, self.bitexts)},
        }
        if self.domain:
            meta["moore_lewis"] = json.loads((self.weights[0] / "report.json").read_text())
            oov_path = self.scores[0] / "oov.json"
            meta["lm"] = {"text": json.loads((self.lm_texts[0] / "stats.json").read_text()),
                          "models": json.loads((self.lms[0] / "stats.json").read_text()),
                          "order": self.domain["order"],
                          "scoring": json.loads(oov_path.read_text()) if oov_path.is_file() else None}
        if comb_meta is not None:
            meta["combination"] = comb_meta
        meta.update(layer)  # forms, ppdb2 (score, its fit and sizes), relations
        # phrase.lhs: the lhs stage's labels (the lexicon tagger: pivot.store.labels' perceptron
        # would cost 65 s of training and 67 CPU s for bio's 448k phrases), or [X] for every phrase
        if lhs_stage is not None:
            from pivot.pipeline.lhs import read as read_lhs

            phrase_lhs, meta["lhs"] = read_lhs(lhs_stage[0])
        else:
            phrase_lhs = None
            meta["lhs"] = {"labels": "[X] for every phrase", "tagger": None,
                           "why": '[ppdb2] lhs = "x" in the recipe'}
        meta["default_model"] = "ppdb2" if layer["ppdb2"]["learned"] else models[0]["name"]

        chunks = StoreChunks(self.pivot_dir[0], ppdb2_dir, len(index["parts"]))
        if self.parts == 1:
            write_database_chunks(
                self.out_path, phrases=e_text, phrase_counts=e_count, chunks=chunks, foreign=f_text,
                models=models, meta=meta, progress=not self.quiet and sys.stderr.isatty(), lhs=phrase_lhs,
                engine=self.engine, scratch=self.wd.root,
            )
        else:
            from pivot.store.parts import write_database_parts

            write_database_parts(self.out_path, self.parts, phrases=e_text, phrase_counts=e_count, chunks=chunks,
                                 foreign=f_text, models=models, meta=meta, lhs=phrase_lhs,
                                 engine=None if self.engine.in_process else self.engine)
        log.info("wrote %s (%d pairs, %d models) in %.1f s; signature %s", self.out_path, n_pairs_out,
                 len(models), time.perf_counter() - self.started, signature)
        return self.out_path


class StoreChunks:
    """The table the database stores, as PairChunks in key order: the pivot stage's row ranges
    with the ppdb2 stage's layer. A picklable callable (the parts of a database in parts are
    written by the workers, each reading the chunks itself)."""

    def __init__(self, pivot_dir, ppdb2_dir, n_parts: int):
        self.pivot_dir, self.ppdb2_dir, self.n_parts = Path(pivot_dir), Path(ppdb2_dir), n_parts

    def __call__(self):
        from pivot.pipeline.bundle import open_bundle
        from pivot.pipeline.pivoting import Paraphrases
        from pivot.store.write import PairChunk

        # Memory maps: a part of a database in parts reads every range's e1 and e2 (for the
        # reverse rows it holds) but the other columns only of the rows it stores.
        index = Paraphrases.read_index(self.pivot_dir)
        for j, (name, n) in enumerate(zip(index["parts"], index["n_pairs"])):
            with open_bundle(self.pivot_dir / name) as para, open_bundle(self.ppdb2_dir / f"x-{j:04d}.arrays") as x:
                fields = {f: para.memmap(f) for f in ("e1", "e2", "n_pivots", "pivots", "p")}
                extra = {f: x.memmap(f) for f in ("form", "ppdb2", "rel") if f in x}
            if fields["e1"].shape[0] != n:
                raise ValueError(f"{self.pivot_dir / name}: {fields['e1'].shape[0]} pairs, the index says {n}")
            yield PairChunk(**fields, **extra)


def run_build(domain: str | None = "bio", **kwargs) -> Path:
    """Build the paraphrase database of a recipe; returns the database path."""
    from pivot.locking import WorkdirLock, sweep_stale

    pipe = Pipeline(domain, prestart=True, **kwargs)
    try:
        with WorkdirLock(pipe.wd.root):  # a second build on the same work dir stops: "in use by PID N"
            if pipe.engine.scheduler is None:  # process ids mean something on this host only
                sweep_stale(pipe.wd.root, outputs=[pipe.out_path])
            return pipe.store()
    finally:
        pipe.engine.close()


# -------------------------------------------------------------------------------- helpers


def _check_kept(meta: dict, recipe_file) -> None:
    """A pivot language whose corpus stage kept no sentence pair stops the build here, in one
    line, before its alignment and the later stages meet an empty bitext (an LM "with no
    sentences", an empty table). Preflight refuses the plain cases (every pair surely too long
    or empty); this is the rest, which only tokenising decides."""
    if meta["n_pairs"] > 0:
        return
    total = meta["stats"]["total"]
    dropped = ", ".join(f"{total[k]:,} {k.replace('_', ' ')}" for k in
                        ("blank", "header", "empty", "too_long", "ratio", "duplicate", "sampled_out")
                        if total.get(k))
    raise InputError(f"[[bitext]] {meta['lang']}: no sentence pair is left after the [preprocess] rules "
                     f"({total['read']:,} read: {dropped or 'none kept'}); raise max_tokens or max_ratio, "
                     "or check the files", recipe_file)


#: The pivot stage's row ranges: at least this many, and about this many kept translation
#: entries each (enough tasks for a few workers at the bio size, bounded work per task at any size).
PIVOT_MIN_TASKS = 8
PIVOT_ENTRIES_PER_TASK = 500_000

#: The [pivot] settings that prune translation entries (rounds 2-3); the rest act after the pivot.
_ENTRY_PRUNING = ("min_p_f_given_e", "min_p_e_given_f", "max_e_per_f", "min_phrase_count")


def _merge_by_f_task(e_paths, x_paths, q, out_path, prune):
    from pivot.pipeline.translation import merge_by_f

    return merge_by_f(e_paths, x_paths, q, out_path, **prune)


def directed_scores(para, id_pairs) -> tuple[np.ndarray, np.ndarray]:
    """(p(b|a), p(a|b)) per model for each pair (a, b) of phrase ids: two (n, K) arrays, 0 where
    the table lacks that direction or an id is None.

    Gold similarity pairs are unordered: the combination is fitted on both directions
    (pivot.pipeline.combine.fit_combination_unordered), as the evaluation scores it
    (pivot.store.combined.unordered_score). ``para`` is the table or an iterable of its row
    ranges (a pair lies in the one range that holds its first phrase).
    """
    from pivot.store.db import find_pairs

    a = np.array([-1 if x is None or y is None else x for x, y in id_pairs], dtype=np.int64)
    b = np.array([-1 if x is None or y is None else y for x, y in id_pairs], dtype=np.int64)
    fwd = rev = None
    for part in ([para] if hasattr(para, "e1") else para):
        if fwd is None:
            fwd, rev = np.zeros((len(id_pairs), part.p.shape[1])), np.zeros((len(id_pairs), part.p.shape[1]))
        for out, row in ((fwd, find_pairs(part.e1, part.e2, a, b)), (rev, find_pairs(part.e1, part.e2, b, a))):
            found = row >= 0
            out[found] = part.p[row[found]]
    return fwd, rev


def foreign_phrase_texts(phrases, vocabs, langs, f_lang_of_token) -> list[str]:
    """Foreign phrases as 'lang:text' (ids are offset per language, see pivot.pipeline.encode)."""
    starts = np.cumsum([0] + [len(v) for v in vocabs])
    out = []
    for row in phrases.tolist():
        toks = [t for t in row if t >= 0]
        li = int(f_lang_of_token[toks[0]])
        vocab = vocabs[li].tokens
        out.append(langs[li] + ":" + " ".join(vocab[t - starts[li]] for t in toks))
    return out
