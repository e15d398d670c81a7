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
   pass the ``[preprocess]`` length rules (:class:`_LengthRule`); ``[combine]`` tuning pairs
   of one class only (all good or all bad: no regression can be fitted);
4. an output that cannot be written or would destroy an input: ``--out`` naming an input
   file or the recipe (by path, symbolic links resolved, or by inode), a directory, a device,
   a FIFO, a read-only file or a file that is not an SQLite database (the checks of every
   command's outputs, :mod:`pivot.outputs`, plus the last); ``--work`` being a file, holding
   input files, or in use by another build; a folder along either path that is not writable.

Nothing is written: the checks only read (a lock is probed, not taken). A database path is a
plain file name, so ``#``, ``?`` and ``%`` in it are fine; :attr:`Plan.out_path` is absolute
(and resolved: a symbolic link's target is what the build replaces), which keeps SQLite from
reading a name that starts with ``file:`` as a URI.
"""
from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from pivot import locking, outputs, recipes
from pivot.errors import InputError


_SQLITE_MAGIC = b"SQLite format 3\x00"
_LINK = re.compile(rb"[0-9]+-[0-9]+")


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
    lengths: "_LengthRule | None" = None         # the bitext pairs that may pass [preprocess]

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
                work_dir=None, recipe=rec, lengths=_LengthRule(rec["preprocess"]["max_tokens"]))

    checks = _collect_inputs(rec, data_root, plan, lmplz)
    _check_tools(rec, lmplz)
    protected = {outputs.real(f.path) for f in plan.inputs} | {outputs.real(recipe_path)}
    if work_dir is not None:
        plan.work_dir = _check_work(Path(work_dir), data_root, protected, plan)
    if out_path is not None:
        plan.out_path = _check_out(Path(out_path), protected, plan.work_dir, parts)
    if on_checked is not None:
        # Everything but the inputs' content has passed: the caller may start slow work that
        # needs no input (a cluster's worker processes) while the inputs are read through.
        on_checked()
    if read_inputs:
        for run in checks:
            run()
        plan.lengths.verify()
    plan.seconds = time.perf_counter() - t0
    return plan


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


class _LengthRule:
    """Does any sentence pair of each pivot language pass the build's length rules?

    The corpus stage drops a pair whose normalised (Moses-tokenised) sides are empty or longer
    than ``max_tokens`` tokens (pivot.pipeline.corpus._filter_reason). Tokenising is the
    corpus stage's work, too slow to repeat here, but tokenising never merges two
    whitespace-separated words and never drops a word holding a letter or a digit. So a raw
    side with more than ``max_tokens`` such words is surely too long, and a blank side surely
    empty: a language all of whose pairs are one or the other leaves no pair, and the build
    would stop only when a later stage finds nothing (an LM "with no sentences", an empty
    alignment). Any other pair may pass; once one does, a language's pairs are not looked at
    again. What only tokenising decides (a pair just over the limit once punctuation is split
    off, the length ratio, duplicates, a resample) the build checks after its corpus stage.
    """

    def __init__(self, max_tokens: int):
        self.max_tokens = max_tokens
        self.read: dict[str, int] = {}
        self.may_pass: set[str] = set()
        self.example: dict[str, tuple] = {}   # lang -> (path, line, what is wrong) of its first pair

    def pending(self, langs) -> bool:
        """Some of ``langs`` has no pair yet that may pass."""
        return not langs <= self.may_pass

    def count(self, langs, n: int) -> None:
        for lang in langs:
            self.read[lang] = self.read.get(lang, 0) + n

    def observe(self, langs, en: str, f: str, paths, line: int) -> None:
        """One pair, read at ``line`` of ``paths`` (English file, foreign file: one file twice
        for a TSV), for the languages of the sources that read it."""
        for lang in langs:
            if lang in self.may_pass:
                continue
            wrong = self._surely_dropped(en, f)
            if wrong is None:
                self.may_pass.add(lang)
            elif lang not in self.example:
                self.example[lang] = (paths[wrong[0]], line, wrong[1])

    def _surely_dropped(self, en: str, f: str) -> tuple[int, str] | None:
        """(side, why) of a pair the length rules surely drop (side 0: English, 1: foreign)."""
        for side, text in enumerate((en, f)):
            if not text.strip():
                return side, f"its {('English', 'foreign')[side]} side is empty"
        for side, text in enumerate((en, f)):
            words = text.split()
            if len(words) > self.max_tokens:
                n = sum(1 for w in words if any(c.isalnum() for c in w))
                if n > self.max_tokens:
                    return side, f"its {('English', 'foreign')[side]} side has {n} words"
        return None

    def verify(self) -> None:
        for lang, n in self.read.items():
            if lang not in self.may_pass:
                path, line, wrong = self.example[lang]
                raise InputError(f"[[bitext]] {lang}: none of its {n:,} sentence pairs can pass the [preprocess] "
                                 f"length rules (a side empty or longer than max_tokens = {self.max_tokens} "
                                 f"tokens); here {wrong}: raise max_tokens, or check the files", path, line)


def _same_file(a, b) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _size(path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _collect_inputs(rec: dict, root: Path, plan: Plan, lmplz: bool) -> list:
    """Every input file (existence checked, globs expanded) into plan.inputs; returns the
    deferred read-through checks, in the order the build reads."""
    from pivot.pipeline import corpus, mono

    import glob

    checks = []
    listed: set = set()

    def add(item: InputFile) -> None:
        if item.path not in listed:
            listed.add(item.path)
            plan.inputs.append(item)

    # -- bitext: the build's own planner (same keys, same globs, same messages), then one read
    # of each distinct file; a tsv-gz file named by several sources is read once, with the
    # largest column count their row filters need.
    tsv_columns: dict[Path, int] = {}
    tsv_langs: dict[Path, set] = {}      # the languages of the sources naming a tsv-gz file
    seen: set = set()
    for block in rec["bitext"]:
        lang = block["lang"]
        corpus._plan(block["sources"], lang, root)   # keys, names, files exist, globs match
        for k, src in enumerate(block["sources"]):
            fmt = src["format"]
            if fmt == "parallel":
                pairs = [(corpus._data_file(root, src["en"], src["name"]),
                          corpus._data_file(root, src["f"], src["name"]))]
            elif fmt == "parallel-glob":
                ens = sorted(glob.glob(str(root.absolute() / src["en"])))
                pairs = [(Path(en), corpus._data_file(root, en[:-3] + "." + lang, src["name"])) for en in ens]
            else:
                pairs = []
            for en, f in pairs:
                if _same_file(en, f):
                    raise InputError(f"recipe source {src['name']!r}: the English and the {lang} side are the "
                                     f"same file ({f}); a bitext pairs each sentence with its translation", en)
                for p in (en, f):
                    add(InputFile(Path(p), "bitext", _size(p), lang))
                if (en, f) not in seen:
                    seen.add((en, f))
                    checks.append(lambda en=en, f=f, lang=lang: _read_parallel(plan, en, f, lang))
            if fmt == "tsv-zip":
                path = corpus._data_file(root, src["path"], src["name"])
                add(InputFile(path, "bitext", _size(path), lang))
                key = (path, src.get("member"))
                if key not in seen:
                    seen.add(key)
                    checks.append(lambda path=path, member=src.get("member"), lang=lang:
                                  _read_rows(plan, f"{path}:{member}" if member else path, {lang},
                                             corpus.read_tsv_zip(path, member)))
            elif fmt == "tsv-gz":
                if corpus._is_glob(src["path"]):
                    paths = [Path(p) for p in sorted(glob.glob(str(root.absolute() / src["path"])))]
                else:
                    paths = [corpus._data_file(root, src["path"], src["name"])]
                rule = corpus.compile_row_filter(src.get("where"), src.get("exclude"), src["name"])
                n_columns = rule[0] if rule else 2
                for path in paths:
                    add(InputFile(path, "bitext", _size(path), lang))
                    if path not in tsv_columns:
                        checks.append(lambda path=path: _read_tsv(plan, path, tsv_columns[path], tsv_langs[path]))
                    tsv_columns[path] = max(tsv_columns.get(path, 2), n_columns)
                    tsv_langs.setdefault(path, set()).add(lang)

    # -- pharaoh alignments
    align = rec["align"]
    if align["method"] == "pharaoh":
        for lang in (b["lang"] for b in rec["bitext"]):
            path = root / align["pharaoh"][lang]
            if not path.is_file():
                raise InputError(f"[align] pharaoh {lang}: alignment file missing; the data root is set by "
                                 f"--data DIR or {recipes.DATA_ENV}", path)
            add(InputFile(path, "alignments", _size(path)))
            checks.append(lambda path=path: _read_pharaoh(plan, path))

    # -- monolingual text of the language models
    dom = rec.get("domain")
    if dom:
        for key, role in (("in_domain", "in-domain text"), ("general", "general text")):
            for kind, patterns in (dom.get(key) or {}).items():
                for pattern in [patterns] if isinstance(patterns, str) else patterns:
                    for path in mono.expand(root, pattern, kind):
                        add(InputFile(Path(path), role, _size(path)))
                        checks.append(lambda path=path, kind=kind, role=role: _read_mono(plan, path, kind, role))

    # -- gold pairs: the combination's and the evaluation's
    comb = rec.get("combine")
    if comb:
        files = [root / g for g in comb["gold"]]
        for g in files:
            if not g.is_file():
                raise InputError(f"[combine] gold file missing; the data root is set by --data DIR or "
                                 f"{recipes.DATA_ENV}", g)
            add(InputFile(g, "gold", _size(g)))
        tuning = comb if dom else None    # the combination is fitted only with domain models
        checks.append(lambda files=files, fmt=comb["format"]: _read_gold(plan, files, fmt, "[combine] gold",
                                                                        tuning))
    for spec in (rec.get("eval") or {}).get("sets", []):
        files = []
        for src in spec["sources"]:
            g = root / src["path"]
            if not g.is_file():
                raise InputError(f"[eval] set {spec['name']!r}: gold file missing; the data root is set by "
                                 f"--data DIR or {recipes.DATA_ENV}", g)
            add(InputFile(g, "gold", _size(g)))
            files.append((g, src["format"]))
        checks.append(lambda files=files, name=spec["name"]: _read_eval(plan, files, name))

    # -- the PPDB 2.0 layer: the human ratings the score is fitted to, WordNet 3.0
    p2 = rec["ppdb2"]
    if p2["learn"]:
        path = root / p2["ratings"]
        if not path.is_file():
            raise InputError(f"[ppdb2] ratings file missing; the data root is set by --data DIR or "
                             f"{recipes.DATA_ENV} (a data root without the PPDB 2.0 ratings needs [ppdb2] "
                             "learn = false)", path)
        add(InputFile(path, "gold", _size(path)))
        checks.append(lambda path=path: _read_gold(plan, [path], "ppdb-human", "[ppdb2] ratings"))
    if p2["wordnet"]:
        from pivot.pipeline.wordnet import LEXICON
        from pivot.pipeline.wordnet import wordnet_files, wordnet_folder

        try:
            folder = wordnet_folder(root, LEXICON)
        except InputError as exc:
            raise InputError(f"{exc.message} (a data root without WordNet needs [ppdb2] wordnet = false and "
                             "learn = false)", exc.path) from None
        for path in wordnet_files(folder) + [folder / "index.noun"]:
            add(InputFile(path, "lexicon", _size(path)))
            checks.append(lambda path=path: _read_wordnet(plan, path))
    if p2["lhs"] == "tagged":
        from pivot.pipeline.lhs import data_files as lhs_files

        for path in lhs_files(root):
            if not path.is_file():
                raise InputError(f'[ppdb2] lhs = "tagged" trains the phrase labeller on GENIA-pos and the Brown '
                                 f"corpus, and this file is missing; the data root is set by --data DIR or "
                                 f'{recipes.DATA_ENV} (a data root without them needs [ppdb2] lhs = "x": every '
                                 "LHS [X])", path)
            add(InputFile(path, "tagged text", _size(path)))
            checks.append(lambda path=path: _read_tagged(plan, path))
    return checks


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


def _read_rows(plan: Plan, where, langs, rows, f_path=None) -> None:
    """Count the (number, english, foreign) rows of one bitext file (or file pair); refuse one
    without a pair, or whose two sides are identical on every line (the same text twice, not a
    translation); show the length rule its rows until each of ``langs`` has one that may pass."""
    n, identical = 0, True
    pending = plan.lengths.pending(langs)
    for number, en, f in rows:
        n += 1
        if identical and en != f:
            identical = False
        if pending:
            plan.lengths.observe(langs, en, f, (where, f_path or where), number)
            pending = plan.lengths.pending(langs)
    if n == 0:   # lines, but blank ones only (a file without a line is refused by its reader)
        raise InputError("holds only blank lines: no sentence pair", where)
    plan.lengths.count(langs, n)
    if identical:
        sides = (f"identical, line for line, to its {'/'.join(sorted(langs))} side {f_path}" if f_path else
                 "the English and the foreign column are identical")
        raise InputError(f"{sides} on all {n:,} lines: the same text twice is not a translation", where)
    plan.counts["bitext lines"] = plan.counts.get("bitext lines", 0) + n


def _read_parallel(plan: Plan, en: Path, f: Path, lang: str) -> None:
    from pivot.pipeline.corpus import read_parallel

    # line counts first (both files), then every line of both: the reader of the build
    _read_rows(plan, en, {lang}, read_parallel(en, f, drop_headers=False), f_path=f)


def _read_tsv(plan: Plan, path: Path, n_columns: int, langs: set) -> None:
    from pivot.pipeline.corpus import read_tsv_gz

    # A where-filter matching anything in column n_columns: no row is filtered, but every row
    # must have the columns the strictest of the file's sources needs, as in the build. The
    # length rule then sees rows a source's filter would drop: it may only say "may pass"
    # too often, never "none passes" wrongly.
    where = {str(n_columns): "*"} if n_columns > 2 else None
    _read_rows(plan, path, langs, read_tsv_gz(path, where=where))


def _read_pharaoh(plan: Plan, path: Path) -> None:
    """Every token of every line an ``i-j`` link (the aligner checks the ranges later)."""
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise InputError(f"cannot open ({exc.strerror or exc})", path) from None
    number = 0
    with fh:
        for number, raw in enumerate(fh, start=1):
            for token in raw.split():
                if not _LINK.fullmatch(token):
                    raise InputError(f"malformed link {token.decode('utf-8', 'backslashreplace')!r} "
                                     "(expected i-j with 0-based integers)", path, number)
    plan.counts["alignment lines"] = plan.counts.get("alignment lines", 0) + number


def _read_mono(plan: Plan, path, kind: str, role: str) -> None:
    from pivot.pipeline import mono

    n = 0
    for sentence in mono._READERS[kind](path):
        if sentence.strip():
            n += 1
    if n == 0:
        raise InputError(f"holds no text: every {role} file must give the language model at least one "
                         f"sentence (read as {kind!r})", path)
    plan.counts[f"{role} sentences"] = plan.counts.get(f"{role} sentences", 0) + n


def _read_gold(plan: Plan, files, fmt: str, what: str, tuning: dict | None = None) -> None:
    """Every gold file parses and together they hold pairs. With ``tuning`` (the [combine]
    section of a recipe with domain models): the tuning part the build will fit the
    combination on (the same split, pivot.eval.gold.tuning_test_split) holds good and bad pairs
    both. Whether enough of them are pairs of the built General model only the build knows."""
    from pivot.eval.gold import binarize, read_gold, tuning_test_split

    pairs = []
    for g in files:
        pairs += read_gold(g, fmt)
    if not pairs:
        raise InputError(f"{what}: the gold files hold no pairs (format {fmt!r})", files[0])
    plan.counts["gold pairs"] = plan.counts.get("gold pairs", 0) + len(pairs)
    if tuning is not None:
        tune, _ = tuning_test_split(binarize(pairs, tuning["threshold"]), n_tune=tuning["n_tune"],
                                    seed=tuning["seed"])
        n_good = sum(label for _, _, label in tune)
        if n_good in (0, len(tune)):
            raise InputError(f"{what}: the {len(tune):,} tuning pairs are all "
                             f"{'bad' if n_good == 0 else 'good'} (score {'<' if n_good == 0 else '>='} "
                             f"threshold {tuning['threshold']}): fitting the combination needs good and bad "
                             "pairs; change [combine] threshold or add gold pairs", files[0])


def _read_eval(plan: Plan, files, name: str) -> None:
    from pivot.eval.gold import read_gold

    n = sum(len(read_gold(g, fmt)) for g, fmt in files)
    if n == 0:
        raise InputError(f"[eval] set {name!r}: the gold files hold no pairs", files[0][0])
    plan.counts["gold pairs"] = plan.counts.get("gold pairs", 0) + n


def _read_wordnet(plan: Plan, path: Path) -> None:
    """A WordNet database file: UTF-8 text whose first line after the licence header is an entry."""
    from pivot.text import numbered_lines

    for number, line in numbered_lines(path):
        if line.startswith("  "):
            continue
        if len(line.split()) < 2:
            raise InputError("not a WordNet 3.0 database file (an entry line of space-separated fields "
                             "expected)", path, number)
        plan.counts["lexicon files"] = plan.counts.get("lexicon files", 0) + 1
        return
    raise InputError("empty WordNet database file", path)


def _read_tagged(plan: Plan, path: Path) -> None:
    """The labeller's training text: GENIA-pos's `token<TAB>tag` files parse whole (half a second
    for the three); the Brown zip opens and holds its `brown/cXNN` files."""
    from pivot.store import labels

    if path.suffix == ".zip":
        import zipfile

        try:
            with zipfile.ZipFile(path) as z:
                ok = any(re.fullmatch(r"brown/c[a-r]\d\d", n) for n in z.namelist())
        except zipfile.BadZipFile as exc:
            raise InputError(f"not a readable zip ({exc})", path) from None
        if not ok:
            raise InputError("no Brown corpus files (brown/cXNN) in the zip", path)
    elif not labels.read_conll(path):
        raise InputError("no tagged sentences (`token<TAB>tag` lines)", path)
    plan.counts["tagged files"] = plan.counts.get("tagged files", 0) + 1


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
