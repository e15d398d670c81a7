"""One build per work directory, stale temporary files, and sane thread and worker counts.

* :class:`WorkdirLock` -- an exclusive ``fcntl.flock`` on ``<work>/.lock`` held for the whole
  build. A second build on the same work directory stops at once with "work directory X is
  in use by PID N" instead of both writing the same stage folders. The kernel drops the lock
  when the holder exits, however it exits (kill -9 included): there is no stale lock to clean.
* :func:`sweep_stale` -- removes the temporary files (``.NAME.tmp-PID`` and the other
  pid-stamped names below) that a killed process left in the work directory or next to the
  database. A stage's ``.<stage>-<key>.partial`` folder is never touched: it holds the
  finished tasks of an interrupted run, from which the stage resumes.
* :func:`bounded_threads` / :func:`bounded_workers` -- ``--threads`` / ``--workers`` between
  0 and 4 x the cores this process may use; a typo such as 100000 is a clear error instead of
  a hundred thousand threads.
* :func:`cores` -- the cores this process may run on, the one count behind every default
  (threads, local Dask workers) and every bound above; :func:`resolve_threads` turns a thread
  count's 0 into it.

Every refusal is an :class:`pivot.errors.InputError`.
"""
from __future__ import annotations

import errno
import fcntl
import logging
import os
import re
import stat
from pathlib import Path

from pivot.errors import InputError

log = logging.getLogger("pivot")

LOCK_NAME = ".lock"
#: At most this many threads or workers per core this process may run on.
PER_CORE = 4

# Temporary names that carry the writer's pid, as the project's writers spell them:
#   .NAME.tmp-PID   pivot.atomic (the .npz, bundle, tagger and text writers), pivot.outputs (every
#                   command's outputs, the database among them)
#   .NAME.PID.tmp   pivot.pipeline.align before pivot.atomic served it: a work directory of an
#                   earlier version may still hold one
#   NAME.tmpPID     pivot.pipeline.lm (ARPA files)
_TMP_PATTERNS = (
    re.compile(r"^\..+\.tmp-(\d+)$"),
    re.compile(r"^\..+\.(\d+)\.tmp$"),
    re.compile(r"^.+\.tmp(\d+)$"),
)

# Lock files this process holds (resolved paths): a probe from the same process passes.
_HELD: set[str] = set()


def cores() -> int:
    """The cores this process may run on (its CPU affinity, which a batch scheduler or
    ``taskset`` may set below the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def resolve_threads(n_threads: int) -> int:
    """A thread count, where 0 means every core this process may run on (:func:`cores`)."""
    n_threads = int(n_threads)
    if n_threads < 0:
        raise ValueError(f"n_threads must be >= 0, got {n_threads}")
    return n_threads or cores()


# ----------------------------------------------------------------------------- lock


def _holder(path: Path) -> str:
    try:
        text = path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return "unknown"
    return text if text.isdigit() else "unknown"


class WorkdirLock:
    """``with WorkdirLock(work_dir): ...`` -- the build's exclusive hold on its work directory.

    Creates the directory and ``.lock`` in it, takes ``flock(LOCK_EX | LOCK_NB)`` and writes
    this process' pid into the file. If another process holds it, raises InputError "work
    directory X is in use by PID N". Released on exit (the file stays: removing it would let
    a third process lock a new file while the second still waits on the old one).
    """

    def __init__(self, root):
        self.root = Path(root)
        self.path = self.root / LOCK_NAME
        self._fd = None

    def acquire(self) -> "WorkdirLock":
        if self._fd is not None:
            return self
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise InputError(f"cannot create the work directory's lock file ({exc.strerror or exc})",
                             self.path) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise InputError(in_use_message(self.root, _holder(self.path))) from None
            raise InputError(f"cannot lock the work directory ({exc.strerror or exc})", self.path) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        _HELD.add(str(self.path.resolve()))
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        _HELD.discard(str(self.path.resolve()))
        try:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> "WorkdirLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def in_use_message(root, pid) -> str:
    return (f"work directory {root} is in use by PID {pid} (another `pivot build`); wait for it "
            "to finish, or pass another --work")


def check_not_locked(root) -> None:
    """Raise InputError when another process holds the lock of work directory ``root``.

    Writes nothing: a missing directory or lock file means nobody holds it; an existing file
    is opened read-only and locked for an instant. A lock this process holds passes.
    """
    path = Path(root) / LOCK_NAME
    if not path.is_file() or str(path.resolve()) in _HELD:
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise InputError(in_use_message(root, _holder(path))) from None
    finally:
        os.close(fd)  # closing drops an instant lock


# ----------------------------------------------------------------------------- stale temporary files


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return True  # not a pid we wrote: leave the file alone
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    except (OverflowError, OSError):
        return False
    return True


def stale_owner(name: str) -> int | None:
    """The pid in a temporary file name of the project's writers, or None for another name."""
    for rx in _TMP_PATTERNS:
        m = rx.match(name)
        if m:
            return int(m.group(1))
    return None


def sweep_stale(root, outputs=()) -> list[Path]:
    """Remove temporary files of dead processes; returns the removed paths.

    Looks in the work directory ``root`` and every folder below it (stage folders, ``.partial``
    folders, align scratch), and next to each path in ``outputs`` (the database: its writer
    uses ``.<name>.tmp-<pid>`` in the destination folder; only that name is considered
    there). A file is removed only when its name carries a pid (see ``_TMP_PATTERNS``), that
    pid is not a live process on this machine, and it is not this process. Folders are never
    removed: a ``.partial`` stage folder is kept for resume. Symbolic links are not followed.

    Only for a work directory used from this machine: on a shared file system a live worker
    of another host has a pid this host does not know.
    """
    removed = []
    me = os.getpid()

    def consider(path: Path, pid: int | None) -> None:
        if pid is None or pid == me or _pid_alive(pid):
            return
        try:
            if not stat.S_ISREG(path.lstat().st_mode):
                return
            path.unlink()
        except FileNotFoundError:
            return
        except OSError as exc:
            log.warning("could not remove the stale temporary file %s (%s)", path, exc)
            return
        removed.append(path)

    root = Path(root)
    if root.is_dir():
        for folder, dirs, files in os.walk(root):
            for name in files:
                consider(Path(folder) / name, stale_owner(name))
    for out in outputs:
        out = Path(out)
        rx = re.compile(r"^\." + re.escape(out.name) + r"\.tmp-(\d+)$")
        try:
            entries = list(os.scandir(out.parent if str(out.parent) else "."))
        except OSError:
            continue
        for entry in entries:
            m = rx.match(entry.name)
            if m:
                consider(Path(entry.path), int(m.group(1)))
    for path in removed:
        log.info("removed a stale temporary file of a dead process: %s", path)
    return removed


# ----------------------------------------------------------------------------- threads, workers


def _count(value, option: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{option} {value!r}: must be a whole number")
    limit = PER_CORE * cores()
    if value < 0 or value > limit:
        raise InputError(f"{option} {value} is out of range: must be between 0 (one per core) and {limit} "
                         f"({PER_CORE} x the {cores()} cores of this machine)")
    return value


def bounded_threads(n) -> int:
    """``n`` (``--threads``; 0 means every core) if 0 <= n <= 4 x cores, else InputError."""
    return _count(n, "--threads")


def bounded_workers(n) -> int | None:
    """``n`` (``--workers``; 0 or None: one per core) if 0 <= n <= 4 x cores, else InputError."""
    if n is None:
        return None
    return _count(n, "--workers")
