"""The one guard for every file a command writes (docs/bad-input.md, "Every command's outputs").

Rules, the same for every subcommand (``build --out``, ``export -o``, ``serve --metadata``,
``score -o``, ``eval --report`` and its figures, ``eval --json``, ``identify --predictions``):

1. **An output is never an input.** It may not be the same file as anything the command reads
   (the database, the recipe, every data file the command reads, another output), compared by
   path with symbolic links resolved *and* by device and inode (``st_dev``, ``st_ino``): a hard
   link is the same file under another name.
2. **An output is a regular file, or does not exist yet**: never a directory, a character or
   block device, a FIFO or a socket. The write renames a new file over the name, and a rename
   over ``/dev/null`` (as root) replaces the device node itself. A regular file that cannot be
   written (read-only: no one may write it by its mode, or this user may not) is refused too: the
   rename would replace it regardless of its mode, and root may write anything.
3. **Checked before any work, written under a temporary name, renamed only on success.** A
   command declares its outputs in an :class:`Outputs` group before it starts (the checks raise
   :class:`~pivot.errors.InputError`: one line, exit 2). Every write goes to a hidden temporary
   file in the output's own folder (one file system, so the rename is atomic), through
   :func:`replacing` (a path) or :func:`writing` (an open file). Inside a group, the renames
   wait for the group's end and happen only if the whole command succeeded, after every target
   is checked again (it may have changed during a long run); on any error, Ctrl-C included,
   the temporary files are removed and every previous file is exactly as it was. Outside a
   group (``pivot build``'s database, which preflight checked) a file is renamed when its own
   write ends.
4. **Standard output stays standard output**: without ``-o`` the data is written to stdout as
   it is produced, with no temporary file.

A symbolic link as an output is followed: the file it points to is replaced (the link stays),
as ``open(path, "w")`` would. The temporary file has the name every writer of pivot uses,
``.NAME.tmp-PID`` (:func:`pivot.atomic.temporary`); it is created with ``O_EXCL`` (never
through a link someone planted) and gets the replaced file's permission bits. No fsync, as in
pivot/atomic.py: the promise is against a failing or killed process, not a power cut.
:mod:`pivot.atomic` writes the build's own artifacts (stage files, bundles, caches), which
no command names and which are no command's result; this module writes what a user names.

One file is written in place on purpose: the phrase index ``pivot search`` adds to the
database it searches (the database is its input and its output). That write is one SQLite
transaction (``pivot.store.search.build_phrase_index``), which keeps the same promise by other
means: SQLite's rollback journal restores every page on an error, and a crashed write is rolled
back the next time the file is opened; the database file itself must be a regular file.
"""
from __future__ import annotations

import contextlib
import contextvars
import os
import stat
from pathlib import Path
from typing import Self

from pivot import atomic
from pivot.errors import InputError

_KINDS = {stat.S_IFCHR: "character device", stat.S_IFBLK: "block device", stat.S_IFIFO: "FIFO (named pipe)",
          stat.S_IFSOCK: "socket"}


def real(path) -> Path:
    """The absolute path with ``~`` expanded and every symbolic link resolved."""
    return Path(os.path.realpath(os.path.abspath(os.path.expanduser(str(path)))))


def _identity(path) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path`` (links followed), None if there is none."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


class Input:
    """A file a command reads, with what it is for ("the database", "bitext", ...), for messages."""

    def __init__(self, path, role: str | None = None):
        self.path = real(path)
        self.role = role
        self.identity = _identity(self.path)

    def same_file(self, target: Path, identity) -> bool:
        # an input folder (a database in parts) is read whole: no output may go inside it
        return target == self.path or (identity is not None and identity == self.identity) or \
            (self.path.is_dir() and target.is_relative_to(self.path))

    def __str__(self) -> str:
        return f"{self.role} {self.path}" if self.role else str(self.path)


def inputs_of(items) -> list[Input]:
    """Input records from paths, ``(path, role)`` pairs or Inputs (None entries skipped)."""
    out = []
    for item in items:
        if item is None:
            continue
        if isinstance(item, Input):
            out.append(item)
        elif isinstance(item, tuple):
            out.append(Input(*item))
        else:
            out.append(Input(item))
    return out


# ----------------------------------------------------------------------------- checks


def existing_ancestor(path: Path) -> Path:
    p = path
    while not os.path.lexists(p) and p != p.parent:
        p = p.parent
    return p


def _read_only(st: os.stat_result) -> bool:
    """A file or folder whose mode lets no one write it (``chmod a-w``). os.access answers for
    the user, and root may write anything: a build or export run as root (a container's default)
    would otherwise replace a file, or write into a folder, marked read-only."""
    return not st.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)


def check_writable(folder: Path, option: str, target) -> None:
    """``folder`` (or the nearest existing folder above it, under which the write creates it)
    must be a writable directory."""
    base = existing_ancestor(Path(os.path.abspath(os.path.expanduser(str(folder)))))
    if not os.path.isdir(base):
        raise InputError(f"{option} {target}: {base} is not a directory, so nothing can be created under it")
    if not os.access(base, os.W_OK | os.X_OK) or _read_only(os.stat(base)):
        raise InputError(f"{option} {target}: cannot write in {base} (no permission, or a read-only "
                         "file system)")


def check_target(path, option: str, inputs=(), *, of: str = "this command", stdout: bool = False) -> Path:
    """Check one output before anything is written; return its resolved path.

    ``inputs``: what the command reads (see :func:`inputs_of`); ``of`` names the command in
    the message ("the build"); ``stdout``: the command writes to standard output without this
    option (said in the message about a device, e.g. ``-o /dev/stdout``).
    """
    text = str(path)
    if not text or text.endswith(("/", os.sep)) or Path(text).name in ("", ".", ".."):
        raise InputError(f"{option} {text!r}: must name a file")
    target = real(text)
    try:
        # the name as given, followed by the kernel: /dev/stdout -> /proc/self/fd/1 -> a pipe
        # is a FIFO, though realpath cannot name it
        st = os.stat(os.path.expanduser(text))
    except (FileNotFoundError, NotADirectoryError):   # the folder check below says which
        st = None
    except OSError as exc:
        raise InputError(f"{option} {path}: cannot be examined ({exc.strerror or exc})") from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise InputError(f"{option} {path}: is a directory; {option} names a file")
        if not stat.S_ISREG(st.st_mode):
            kind = _KINDS.get(stat.S_IFMT(st.st_mode), "special file")
            hint = f" (without {option} the output goes to standard output)" if stdout else ""
            raise InputError(f"{option} {path}: is a {kind}, not a regular file; refusing to replace it{hint}")
    identity = None if st is None else (st.st_dev, st.st_ino)
    for item in inputs_of(inputs):
        if item.same_file(target, identity):
            raise InputError(f"{option} {path}: is an input of {of} ({item}); refusing to overwrite it")
    if st is not None and (_read_only(st) or not os.access(target, os.W_OK)):
        raise InputError(f"{option} {path}: exists and is read-only; refusing to replace it")
    check_writable(target.parent, option, path)
    return target


# ----------------------------------------------------------------------------- writing

_GROUP: contextvars.ContextVar[Outputs | None] = contextvars.ContextVar("pivot_outputs", default=None)


class Outputs:
    """The files one command writes, checked against what it reads and renamed together.

    >>> with Outputs([(db_path, "the database")]) as out:    # doctest: +SKIP
    ...     dest = out.add(args.output, "-o")                 # checked now, before any work
    ...     ...                                               # the work
    ...     with writing(dest) as fh:                         # a temporary file beside dest
    ...         fh.write(text)                                # renamed when the block succeeds
    """

    def __init__(self, inputs=(), *, of: str = "this command", stdout: bool = False):
        self.inputs: list[Input] = inputs_of(inputs)
        self.of = of
        self.stdout = stdout
        self.declared: dict[Path, str] = {}      # resolved output path -> option that named it
        self.staged: list[tuple[Path, Path, str]] = []   # (temporary, final, option)
        self._token = None

    def input(self, path, role: str | None = None) -> None:
        """One more file the command reads (known only once part of the work has run); the
        outputs declared so far are checked against it at once."""
        item = Input(path, role)
        self.inputs.append(item)
        for target, option in self.declared.items():
            check_target(target, option, [item], of=self.of, stdout=self.stdout)

    def add(self, path, option: str | None = None) -> Path:
        """Check an output (see :func:`check_target`) and return its resolved path."""
        option = option or "output"
        target = check_target(path, option, self.inputs, of=self.of, stdout=self.stdout)
        other = self.declared.get(target)
        if other is not None and other != option and option != "output":
            raise InputError(f"{option} {path}: is also the output of {other}; give each its own file")
        self.declared.setdefault(target, option)
        return target

    def folder(self, path, option: str, target) -> None:
        """A folder the command will create files in (e.g. a report's figures)."""
        check_writable(Path(path), option, target)

    def __enter__(self) -> Self:
        if _GROUP.get() is not None:
            raise RuntimeError("output groups do not nest")
        self._token = _GROUP.set(self)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        _GROUP.reset(self._token)
        if exc_type is not None:
            self.discard()
            return
        try:
            # every target checked again before the first rename: all or none are replaced
            for _, final, option in self.staged:
                check_target(final, option, self.inputs, of=self.of, stdout=self.stdout)
            for tmp, final, _ in self.staged:
                _commit(tmp, final)
        except BaseException:
            self.discard()
            raise
        self.staged = []

    def discard(self) -> None:
        for tmp, _, _ in self.staged:
            _unlink(tmp)
        self.staged = []


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _temporary(final: Path) -> Path:
    """A new empty file under the writers' one temporary name (:func:`pivot.atomic.temporary`,
    ``.NAME.tmp-PID`` beside ``final``), created exclusively (O_EXCL: never through a link
    planted there), mode 0666 less the umask. Only a killed process leaves one behind; the
    next build removes its database's (pivot.locking.sweep_stale)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = atomic.temporary(final)
    _unlink(tmp)          # this process's own name: a leftover of an earlier, failed write
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    return tmp


def _commit(tmp: Path, final: Path) -> None:
    """Rename ``tmp`` over ``final``, giving it final's permission bits if final exists. No
    fsync, as for every writer of pivot (see pivot/atomic.py): the promise is against a
    failing or killed process, not a power cut."""
    try:
        os.chmod(tmp, stat.S_IMODE(os.stat(final).st_mode))
    except FileNotFoundError:
        pass
    os.replace(tmp, final)


@contextlib.contextmanager
def replacing(path, option: str | None = None):
    """Yield a temporary path beside the output ``path``; write the file there. When the block
    succeeds the file is renamed to ``path`` (at the end of the enclosing :class:`Outputs`
    group, if there is one); if it fails the temporary file is removed."""
    group = _GROUP.get()
    final = group.add(path, option) if group is not None else check_target(path, option or "output")
    if group is not None:   # written again in the same command: this write replaces the staged one
        group.staged = [entry for entry in group.staged if entry[1] != final]
    tmp = _temporary(final)
    try:
        yield tmp
    except BaseException:
        _unlink(tmp)
        raise
    if group is not None:
        group.staged.append((tmp, final, option or group.declared[final]))
        return
    try:
        check_target(final, option or "output")
        _commit(tmp, final)
    except BaseException:
        _unlink(tmp)
        raise


@contextlib.contextmanager
def writing(path, mode: str = "w", option: str | None = None, **kwargs):
    """:func:`replacing`, yielding the temporary file open (text UTF-8 unless ``mode`` is binary)."""
    if "b" not in mode:
        kwargs.setdefault("encoding", "utf-8")
    with replacing(path, option) as tmp, open(tmp, mode, **kwargs) as fh:
        yield fh


def write_text(path, text: str, option: str | None = None) -> Path:
    """Write ``text`` (UTF-8) to the output ``path`` through :func:`writing`; returns ``path``."""
    with writing(path, "w", option) as fh:
        fh.write(text)
    return Path(path)
