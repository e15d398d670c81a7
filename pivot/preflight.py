"""Preflight: everything a build needs, checked before any stage runs or anything is written.

:func:`check` (called by the build before its first stage) refuses, with one
:class:`pivot.errors.InputError` naming the file (and the line), any of:

1. a recipe that does not match the schema (:func:`pivot.recipes.validate`: unknown sections
   and keys with a "did you mean", types, ranges, formats, cross-references);
2. ``--threads`` / ``--workers`` below 0 or above 4 x the cores (:mod:`pivot.locking`); a
   ``--scheduler`` that is not a Dask address;
3. an input that is missing, or damaged, or not what its reader expects: every bitext file is
   read once through the build's own reader (gzip, zip and tar checksums verified, UTF-8, NUL
   bytes, field counts, equal line counts of line-aligned files); every in-domain (and
   general) text file must hold at least one word; every gold file must parse and hold pairs;
   Pharaoh alignment files must hold ``i-j`` links; the tools the recipe asks for (eflomal,
   lmplz) must be installed;
3b. inputs that are sound but leave the build nothing to work with, which the build would
   otherwise only meet after its long stages: a bitext whose English and foreign sides are
   one file, or identical on every line; a pivot language none of whose sentence pairs can
   pass the ``[preprocess]`` length rules (:class:`pivot.pipeline.corpus.LengthRule`); ``[combine]`` tuning pairs
   of one class only (all good or all bad: no regression can be fitted);
4. an output that cannot be written or would destroy an input: ``--out`` naming an input
   file or the recipe (by path, symbolic links resolved, or by inode), a directory, a device,
   a FIFO, a read-only file or a file that is not an SQLite database (the checks of every
   command's outputs, :mod:`pivot.outputs`, plus the last); ``--work`` being a file, holding
   input files, or in use by another build; a folder along either path that is not writable.

Each stage checks the inputs it declares (``check`` of its :class:`pivot.pipeline.stage.Stage`:
the corpus stages their bitexts, align its Pharaoh files, lmtext its texts, ppdb2 the ratings and
WordNet, the tagger its training text, combine its tuning gold); this module asks them, checks the
[eval] gold sets (no stage reads them: `pivot eval` does), the tools and the outputs.

Nothing is written: the checks only read (a lock is probed, not taken). A database path is a
plain file name, so ``#``, ``?`` and ``%`` in it are fine; :attr:`Plan.out_path` is absolute
(and resolved: a symbolic link's target is what the build replaces), which keeps SQLite from
reading a name that starts with ``file:`` as a URI.
"""
from __future__ import annotations

import contextlib
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from pivot import locking, outputs, recipes
from pivot.errors import InputError
from pivot.pipeline.corpus import LengthRule


_SQLITE_MAGIC = b"SQLite format 3\x00"


@dataclass
class InputFile:
    """One file the build reads: its path, what it is for, its size in bytes."""

    path: Path
    role: str          # "bitext", "alignments", "in-domain text", "general text", "gold", "lexicon", "tagged text"
    size: int
    lang: str | None = None


@dataclass
class Plan:
    """What a build will read and write, as checked by :func:`check` (log :meth:`summary`)."""

    recipe_path: Path
    name: str
    data_root: Path
    out_path: Path | None
    work_dir: Path | None
    recipe: dict
    inputs: list[InputFile] = field(default_factory=list)
    counts: dict = field(default_factory=dict)   # role -> lines / sentences / pairs read
    seconds: float = 0.0
    lengths: object = None                       # the bitext pairs that may pass [preprocess] (corpus.LengthRule)

    def add_input(self, path: Path, role: str, lang: str | None = None) -> None:
        """A file the build reads (once in the list, whichever stage names it again)."""
        if all(f.path != path for f in self.inputs):
            self.inputs.append(InputFile(path, role, _size(path), lang))

    def count(self, what: str, n: int) -> None:
        """``n`` more lines / sentences / pairs / files read through."""
        self.counts[what] = self.counts.get(what, 0) + n

    @property
    def n_bytes(self) -> int:
        return sum(f.size for f in self.inputs)

    def roles(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for f in self.inputs:
            out[f.role] = out.get(f.role, 0) + 1
        return out

    @property
    def languages(self) -> list[str]:
        return list(dict.fromkeys(f.lang for f in self.inputs if f.lang))

    def summary(self) -> str:
        """One line for the build log."""
        roles = ", ".join(f"{n} {role}" for role, n in self.roles().items())
        read = ", ".join(f"{v:,} {k}" for k, v in self.counts.items())
        return (f"preflight: recipe {self.recipe_path} ({self.name}, {len(self.languages)} pivot languages): "
                f"{len(self.inputs)} input files ({self.n_bytes / 1e6:.1f} MB: {roles}) read through in "
                f"{self.seconds:.1f} s ({read}); out {self.out_path}; work {self.work_dir}")


# ----------------------------------------------------------------------------- entry point


def check(recipe_path, data_root, out_path=None, work_dir=None, *, threads=None, workers=None,
          scheduler=None, lmplz: bool = False, read_inputs: bool = True, on_checked=None, parts: int = 1) -> Plan:
    """Check a build before it starts; return its :class:`Plan` or raise InputError.

    ``recipe_path``: the recipe file; ``data_root``: the resolved data root; ``out_path``:
    the database (None: not checked, e.g. ``pivot score``); ``work_dir``: the stage folder
    root (None: not checked); ``threads`` / ``workers``: the command-line counts (None: not
    checked; ``workers`` is not checked with a ``scheduler``, which must be a Dask address,
    :func:`check_scheduler`); ``lmplz``: the build was asked
    to use lmplz whatever the recipe says. ``read_inputs=False`` skips reading the inputs
    through (existence, outputs and the recipe are still checked).
    """
    t0 = time.perf_counter()
    recipe_path = Path(recipe_path)
    rec = recipes.load_recipe(recipe_path)
    data_root = Path(data_root)
    if not data_root.is_dir():
        raise InputError("data root does not exist; point --data (or PIVOT_DATA) at the folder "
                         "holding the recipe's files", data_root)
    if threads is not None:
        locking.bounded_threads(threads)
    if workers is not None and scheduler is None:
        locking.bounded_workers(workers)
    if scheduler is not None:
        check_scheduler(scheduler)
    plan = Plan(recipe_path=recipe_path, name=rec["name"], data_root=data_root, out_path=None,
                work_dir=None, recipe=rec, lengths=LengthRule(rec["preprocess"]["max_tokens"]))

    checks = _collect_inputs(rec, data_root, plan)
    _check_tools(rec, lmplz)
    protected = {outputs.real(f.path) for f in plan.inputs} | {outputs.real(recipe_path)}
    if work_dir is not None:
        plan.work_dir = _check_work(Path(work_dir), data_root, protected, plan)
    if out_path is not None:
        plan.out_path = _check_out(Path(out_path), protected, plan.work_dir, parts)
    # A build that runs a cluster reads its inputs through in two processes: the helper is
    # forked here, before on_checked starts the cluster's threads, and takes checks beside
    # this process (a core that would idle until the first stage). Its results are replayed
    # in the checks' order: the same counts, the same first error, as one process gives.
    reading = ReadThrough(checks, plan, helper=_spare_core(workers, scheduler)) if read_inputs else None
    try:
        if on_checked is not None:
            # Everything but the inputs' content has passed: the caller may start slow work
            # that needs no input (a cluster's worker processes) while the inputs are read.
            on_checked()
        if reading is not None:
            reading.finish()
    finally:
        if reading is not None:
            reading.close()
    if read_inputs:
        plan.lengths.verify()
    plan.seconds = time.perf_counter() - t0
    return plan


def _spare_core(workers, scheduler) -> bool:
    """Does the build run a cluster (``--workers`` 0 or above 1, or ``--scheduler``) on a
    machine with a second core? ``--workers 1`` is one process by design, and a caller that
    checked no counts (``workers`` None) starts no cluster."""
    if scheduler is None and (workers is None or workers == 1):
        return False
    return locking.cores() >= 2


class _Record(NamedTuple):
    """What check ``k`` changed of a plan (ReadThrough): counts added, length-rule lines added
    by language, languages found to pass, first dropped pairs recorded, and its error."""

    k: int
    counts: dict
    read: dict
    passed: set
    examples: dict
    error: InputError | None


class ReadThrough:
    """The read-through checks, in this process alone or shared with one forked helper.

    With a helper, each process takes the next check not yet taken (a shared counter) and
    records what it changed of the plan: its counts, and the length rule's lines read, the
    languages whose pairs may pass and the first surely dropped pair of each. :meth:`finish`
    replays the records in the checks' order onto the plan as it was before the reads, so
    the counts (and the order of their keys in the log's line) and the length rule are what
    one process gives, and the error raised is the first check's in that order that fails
    (both processes stop taking checks after it). A check the helper took but did not report
    (the helper killed) is run here. Forked before any thread starts: the helper inherits the
    checks as they are (closures, which need no pickling), and sends back plain values.
    """

    def __init__(self, checks: list, plan: Plan, helper: bool):
        self.checks, self.plan = checks, plan
        self.helper = None
        if helper and len(checks) > 1:
            import multiprocessing

            ctx = multiprocessing.get_context("fork")
            self._next = ctx.Value("q", 0)                  # the next check to take
            self._stop = ctx.Value("q", len(checks))        # no check from here on (an error's index)
            self._recv, send = ctx.Pipe(duplex=False)
            self.helper = ctx.Process(target=self._helper, args=(send,), name="pivot-preflight", daemon=True)
            self.helper.start()
            send.close()

    def _take(self) -> int | None:
        with self._next.get_lock():
            k = self._next.value
            if k >= min(len(self.checks), self._stop.value):
                return None
            self._next.value = k + 1
            return k

    def _run(self, k: int) -> _Record:
        """Check k on this process's plan, and what it changed there."""
        counts, rule = dict(self.plan.counts), self.plan.lengths
        read, passed, examples = dict(rule.read), set(rule.may_pass), set(rule.example)
        error = None
        try:
            self.checks[k]()
        except InputError as exc:
            error = exc
            with self._stop.get_lock():
                self._stop.value = min(self._stop.value, k)
        # (a key new to the dict is kept with an increment of 0: its place in the order counts)
        return _Record(k, {w: n - counts.get(w, 0) for w, n in self.plan.counts.items() if n != counts.get(w, -1)},
                       {lang: n - read.get(lang, 0) for lang, n in rule.read.items() if n != read.get(lang, -1)},
                       rule.may_pass - passed, {lang: rule.example[lang] for lang in rule.example.keys() - examples},
                       error)

    def _helper(self, send) -> None:
        done = []
        # an interrupt or a bug ends the loop quietly: what was done goes back, the rest is run
        # in the build's process (which meets the bug itself); a build gone takes no report
        with contextlib.suppress(BaseException):
            while (k := self._take()) is not None:
                done.append(self._run(k))
        with contextlib.suppress(OSError):
            send.send(done)
        send.close()

    def finish(self) -> None:
        """Every check run (or the first failing one in order raised), the plan updated."""
        if self.helper is None:
            for run in self.checks:
                run()
            return
        counts0, rule = dict(self.plan.counts), self.plan.lengths
        start = (dict(rule.read), set(rule.may_pass), dict(rule.example))
        done = []
        while (k := self._take()) is not None:
            done.append(self._run(k))
        try:
            done += self._recv.recv()
        except EOFError:     # the helper died before it reported: its checks are run below
            pass
        self.helper.join()
        by_index = {r.k: r for r in done}
        self.plan.counts = counts0
        rule.read, rule.may_pass, rule.example = dict(start[0]), set(start[1]), dict(start[2])
        for k in range(len(self.checks)):
            record = by_index.get(k)
            if record is None:
                # not reported (the helper died): run here, on the plan replayed so far,
                # which the check changes itself
                error = self._run(k).error
                if error is not None:
                    raise error
                continue
            for what, n in record.counts.items():
                self.plan.count(what, n)
            for lang, n in record.read.items():
                rule.read[lang] = rule.read.get(lang, 0) + n
            rule.may_pass |= record.passed
            for lang, example in record.examples.items():
                rule.example.setdefault(lang, example)
            if record.error is not None:
                raise record.error

    def close(self) -> None:
        """The helper gone (an error or an interrupt may leave it running)."""
        if self.helper is not None and self.helper.is_alive():
            self.helper.kill()
            self.helper.join()


# Dask's address schemes a build can reach from another process (inproc:// is one process only).
_SCHEDULER = re.compile(r"(?:(?:tcp|tls|ws|wss|ucx)://)?(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):([0-9]{1,5})")


def check_scheduler(address: str) -> str:
    """``address`` if it is a Dask scheduler address, [SCHEME://]HOST:PORT, else InputError.

    Checked before anything starts: Dask itself would take the text for a host name and try
    to connect to it for a minute before failing with a traceback.
    """
    m = _SCHEDULER.fullmatch(address)
    if m is None or not 1 <= int(m.group(1)) <= 65535:
        raise InputError(f"--scheduler {address!r}: not a Dask scheduler address; give "
                         "tcp://HOST:PORT (or tls://, ws://, wss://, ucx://), as the scheduler prints it")
    return address


# ----------------------------------------------------------------------------- inputs


def _collect_inputs(rec: dict, root: Path, plan: Plan) -> list:
    """Every input file (existence checked, globs expanded) into plan.inputs, each stage's by
    the stage itself; returns the deferred read-through checks, in the graph's order."""
    from pivot.pipeline.graph import STAGES, order

    checks = []
    for name in order():
        if STAGES[name].check is not None:
            checks += STAGES[name].check(rec, root, plan)
    for spec in (rec.get("eval") or {}).get("sets", []):
        files = []
        for src in spec["sources"]:
            g = root / src["path"]
            if not g.is_file():
                raise InputError(f"[eval] set {spec['name']!r}: gold file missing; the data root is set by "
                                 f"--data DIR or {recipes.DATA_ENV}", g)
            plan.add_input(g, "gold")
            files.append((g, src["format"]))
        checks.append(lambda files=files, name=spec["name"]: _read_eval(plan, files, name))
    return checks


def _read_eval(plan: Plan, files, name: str) -> None:
    from pivot.eval.gold import read_gold

    n = sum(len(read_gold(g, fmt)) for g, fmt in files)
    if n == 0:
        raise InputError(f"[eval] set {name!r}: the gold files hold no pairs", files[0][0])
    plan.count("gold pairs", n)


def _size(path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _check_tools(rec: dict, lmplz: bool) -> None:
    if rec["align"]["method"] == "eflomal":
        from pivot.pipeline.align import find_eflomal

        try:
            find_eflomal()
        except FileNotFoundError as exc:
            raise InputError(f"[align] method 'eflomal': {exc}", rec["_path"]) from None
    dom = rec.get("domain")
    if dom and (lmplz or dom["estimator"] == "lmplz"):
        from pivot.pipeline.lm import find_lmplz

        if find_lmplz() is None:
            raise InputError("the LMs are to be estimated with kenlm's lmplz (--lmplz or [domain] estimator = "
                             "'lmplz'), which is not installed (not on PATH nor in .tools/bin); use the "
                             "built-in estimator", rec["_path"])


# ----------------------------------------------------------------------------- outputs


def _inside(child: Path, parent: Path) -> bool:
    return child != parent and parent in child.parents


def _check_work(work: Path, data_root: Path, protected: set, plan: Plan) -> Path:
    absolute = Path(os.path.abspath(os.path.expanduser(str(work))))
    real = outputs.real(absolute)
    if os.path.lexists(absolute) and not os.path.isdir(real):
        raise InputError(f"--work {work}: exists and is not a directory")
    if real == outputs.real(data_root):
        raise InputError(f"--work {work}: is the data root; the build writes its stage folders into the work "
                         "directory: pass another --work")
    held = sorted(p for p in protected if _inside(p, real))
    if held:
        raise InputError(f"--work {work}: holds input files of the build (e.g. {held[0]}); the work directory "
                         "is written and swept: pass a --work outside the data")
    if real in protected:
        raise InputError(f"--work {work}: is an input of the build")
    outputs.check_writable(absolute, "--work", work)
    locking.check_not_locked(absolute)
    return absolute


def _check_out(out: Path, protected: set, work: Path | None, parts: int = 1) -> Path:
    text = str(out)
    if not text or text.endswith(("/", os.sep)) or out.name in ("", ".", ".."):
        raise InputError(f"--out {text!r}: must name the database file, e.g. --out bio.db")
    if parts < 1:
        raise InputError(f"--parts {parts}: must be at least 1")
    real = outputs.real(out)
    if parts > 1:
        return _check_out_folder(out, real, protected, work)
    if os.path.isdir(real):
        raise InputError(f"--out {out}: is a directory; --out names the database file (e.g. {out}/bio.db)")
    if work is not None and real == outputs.real(work):
        raise InputError(f"--out {out}: is the work directory")
    # The guard of every command's outputs (pivot/outputs.py): not an input (by path or by
    # inode), not a device, FIFO or socket, not read-only, in a writable folder.
    real = outputs.check_target(out, "--out", sorted(protected), of="the build")
    if os.path.isfile(real) and os.path.getsize(real) > 0:
        try:
            with open(real, "rb") as fh:
                head = fh.read(len(_SQLITE_MAGIC))
        except OSError as exc:
            raise InputError(f"--out {out}: exists and cannot be read ({exc.strerror or exc})") from None
        if head != _SQLITE_MAGIC:
            raise InputError(f"--out {out}: exists and is not an SQLite database; refusing to replace it "
                             "(remove it, or choose another --out)")
    return real


def _check_out_folder(out: Path, real: Path, protected: set, work: Path | None) -> Path:
    """--out of a database in parts: a folder that is absent or a previous database in parts
    (its manifest names every file in it), holding no input and not the work directory, in a
    writable folder."""
    from pivot.store.parts import check_replaceable

    if work is not None:
        w = outputs.real(work)
        if real == w or w.is_relative_to(real) or real.is_relative_to(w):
            raise InputError(f"--out {out}: is, holds or lies in the work directory {work}")
    for item in sorted(protected):
        if Path(item) == real or Path(item).is_relative_to(real):
            raise InputError(f"--out {out}: holds an input of the build ({item}); refusing to replace it")
    check_replaceable(real)
    outputs.check_writable(real.parent, "--out", out)
    return real
