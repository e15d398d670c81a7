"""Files written whole or not at all: a temporary name beside the target, renamed on success.

A reader -- a resumed stage, a task that finds its output already written, a worker on another
machine -- sees either the previous file (or none) or the complete new one, never part of it.
The temporary name is ``.NAME.tmp-PID`` in the target's own folder: the same file system, so
``os.replace`` is atomic, and a name that :func:`pivot.locking.sweep_stale` removes once its
process is dead. A write that fails removes it at once.

No fsync. The promise is against the death of the process (an exception, kill -9, a lost Dask
worker): the kernel keeps what a dead process wrote, so the rename alone suffices. It is not
against a power cut, and neither is any other writer of a build: the stage folders and their
DONE markers, the bundles, the database (SQLite with ``synchronous=OFF``). Syncing these
files only would not let a build survive a power cut, and would cost a flush to disk for
every file.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

import numpy as np


def temporary(path) -> Path:
    """The temporary name of a write of ``path``: ``.NAME.tmp-PID`` in its folder (also the
    name :mod:`pivot.outputs` writes a command's outputs under)."""
    path = Path(path)
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


@contextmanager
def atomic_path(path):
    """``with atomic_path(p) as tmp: <write tmp>``: renamed to ``p`` when the block ends
    normally, removed when it raises. ``tmp`` is ``.NAME.tmp-PID`` in p's folder."""
    path = Path(path)
    tmp = temporary(path)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)     # only left when the write or the rename failed


def save_npz(path, **arrays) -> None:
    """``np.savez`` (uncompressed) of ``arrays`` at ``path``, atomically."""
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.savez(fh, **arrays)


def write_text(path, text: str) -> None:
    """``text`` as UTF-8 with ``\\n`` line ends at ``path``, atomically."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)
