"""Bundles: named numpy arrays in one file, for the partial results the sharded stages pass on.

Why not ``.npz``: an .npz is a zip archive. Opening one parses its whole member directory,
and the merges open every shard's file, each holding a few hundred members (a few arrays
per partition): at 4x the bio corpus that was a third of a merge task's time. And every
member is copied twice and checksummed on the way out and again on the way in, on two cores
that share one memory bandwidth (``bench/bench_ceiling.py``).

A bundle is the members' ``.npy`` images back to back (each starting at a multiple of 64
bytes), then a JSON index ``{name: offset}``, then the index's offset (8 bytes, little
endian) and the tag ``PIVOTIDX``. A reader reads the index once and each member straight
into its array (``np.fromfile``). There is no checksum: a bundle is written under a
temporary name and renamed (:func:`pivot.atomic.atomic_path`: readers see all of it or nothing), and the stage's content key
hashes the finished files.

>>> import tempfile, numpy as np
>>> path = Path(tempfile.mkdtemp()) / "x.arrays"
>>> save_bundle(path, keys=np.array([3, 5], np.uint64), counts=np.ones((2, 3)))
>>> with open_bundle(path) as b:
...     b.files, b["keys"].tolist(), b["counts"].shape
(['keys', 'counts'], [3, 5], (2, 3))
"""
from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import numpy as np

from pivot.atomic import atomic_path

_TAG = b"PIVOTIDX"
_ALIGN = 64


class Blocks:
    """A member given as its blocks of rows, in order (save_bundle writes each as it comes, so
    the whole array is never held): ``dtype``, ``shape`` (the whole's), ``blocks`` (an iterable
    of arrays of that dtype whose rows make up the shape's)."""

    def __init__(self, dtype, shape, blocks):
        self.dtype, self.shape, self.blocks = np.dtype(dtype), tuple(shape), blocks

    def write(self, fh, path, name) -> None:
        write_npy_header(fh, self.dtype, self.shape)
        rows = 0
        for block in self.blocks:
            block = np.ascontiguousarray(block, dtype=self.dtype)
            if block.shape[1:] != self.shape[1:]:
                raise ValueError(f"{path}: member {name!r}: a block of shape {block.shape}, "
                                 f"rows of {self.shape[1:]} expected")
            fh.write(block.tobytes())
            rows += len(block)
        if rows != self.shape[0]:
            raise ValueError(f"{path}: member {name!r}: {rows} rows in its blocks, {self.shape[0]} declared")


def write_npy_header(fh, dtype, shape) -> None:
    """The .npy header of an array of ``dtype`` and ``shape`` (C order), as np.save writes it."""
    header = np.lib.format.header_data_from_array_1_0(np.empty((0, *shape[1:]), dtype))
    header["shape"] = tuple(shape)
    np.lib.format.write_array_header_1_0(fh, header)


def save_bundle(path, **arrays) -> None:
    """Write ``arrays`` as one bundle at ``path``: under a temporary name, then renamed. A
    member may be :class:`Blocks` (written block by block)."""
    index = {}
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        for name, value in arrays.items():
            if isinstance(value, Blocks):
                fh.write(b"\0" * (-fh.tell() % _ALIGN))
                index[name] = fh.tell()
                value.write(fh, path, name)
                continue
            value = np.asanyarray(value)
            if value.dtype.hasobject:
                raise TypeError(f"{path}: member {name!r} holds Python objects")
            fh.write(b"\0" * (-fh.tell() % _ALIGN))
            index[name] = fh.tell()
            np.lib.format.write_array(fh, value, allow_pickle=False)
        at = fh.tell()
        fh.write(json.dumps(index).encode())
        fh.write(struct.pack("<Q", at) + _TAG)


def allocate_bundle(path, **members) -> None:
    """A bundle at ``path`` whose members, given as (dtype, shape), are written later row by row
    in place (write_rows: tasks writing their own rows of one file at once). The file is
    save_bundle's bytes once every row is written: the same headers, offsets and index, the
    data regions left as holes meanwhile (a sparse file: allocating writes no data). Not
    atomic: the caller writes it under a scratch name and renames it when every row is in."""
    index = {}
    with open(path, "wb") as fh:
        for name, (dtype, shape) in members.items():
            fh.seek(fh.tell() + (-fh.tell() % _ALIGN))
            index[name] = fh.tell()
            write_npy_header(fh, dtype, shape)
            fh.seek(fh.tell() + int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize)
        at = fh.tell()
        fh.write(json.dumps(index).encode())
        fh.write(struct.pack("<Q", at) + _TAG)


def write_rows(path, name: str, start: int, rows: np.ndarray) -> None:
    """Rows start:start + len(rows) of member ``name`` of an allocated bundle (allocate_bundle),
    written in place (writing them again writes the same bytes: a retried task is harmless)."""
    with open_bundle(path) as z:
        z._seek(name)
        shape, fortran, dtype = read_npy_header(z._fh)
        data = z._fh.tell()
    rows = np.ascontiguousarray(rows, dtype=dtype)
    if fortran or rows.shape[1:] != tuple(shape[1:]) or not 0 <= start <= start + len(rows) <= shape[0]:
        raise ValueError(f"{path}: member {name!r} {shape}: cannot hold rows {start}:{start + len(rows)} "
                         f"of shape {rows.shape}")
    with open(path, "r+b") as fh:
        fh.seek(data + start * int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize)
        fh.write(rows.tobytes())


class Bundle:
    """An open bundle: ``b[name]`` reads a member into a new array; ``b.files`` lists them."""

    def __init__(self, path):
        self.path = Path(path)
        self._fh = open(self.path, "rb")
        try:
            self._fh.seek(0, os.SEEK_END)
            size = self._fh.tell()
            if size < 16:
                raise ValueError(f"{self.path}: not a bundle ({size} bytes)")
            self._fh.seek(size - 16)
            at, tag = struct.unpack("<Q8s", self._fh.read(16))
            if tag != _TAG or at > size - 16:
                raise ValueError(f"{self.path}: not a bundle (no index at its end)")
            self._fh.seek(at)
            self._index = json.loads(self._fh.read(size - 16 - at))
        except BaseException:
            self._fh.close()
            raise

    @property
    def files(self) -> list[str]:
        return list(self._index)

    def __contains__(self, name) -> bool:
        return name in self._index

    def _seek(self, name) -> None:
        """The file positioned at the member's .npy header; KeyError naming the bundle if none."""
        try:
            offset = self._index[name]
        except KeyError:
            raise KeyError(f"{self.path}: no member {name!r}") from None
        self._fh.seek(offset)

    def __getitem__(self, name) -> np.ndarray:
        self._seek(name)
        return np.lib.format.read_array(self._fh, allow_pickle=False)

    def shape(self, name) -> tuple:
        """The member's shape, from its header alone."""
        self._seek(name)
        return tuple(read_npy_header(self._fh)[0])

    def dtype(self, name) -> np.dtype:
        """The member's dtype, from its header alone."""
        self._seek(name)
        return read_npy_header(self._fh)[2]

    def memmap(self, name) -> np.ndarray:
        """The member as a read-only memory map of the file (nothing is read until used)."""
        self._seek(name)
        shape, fortran, dtype = read_npy_header(self._fh)
        if not shape or 0 in shape:
            return np.zeros(shape, dtype=dtype)
        return np.memmap(self.path, dtype=dtype, mode="r", offset=self._fh.tell(), shape=shape,
                         order="F" if fortran else "C")

    def rows(self, name, idx, window_bytes: int | None = None) -> np.ndarray:
        """Rows ``idx`` (ascending) of the member into a new array, read through maps of at most
        ``window_bytes`` of its rows (GATHER_BYTES; at least one row), each unmapped before the
        next (:func:`read_rows`): rows spread over the whole member never have all of its pages
        in this process's resident set at once, as one map of the whole (:meth:`take`) has."""
        self._seek(name)
        shape, fortran, dtype = read_npy_header(self._fh)
        if fortran and len(shape) > 1:
            raise ValueError(f"{self.path}: member {name!r} is in Fortran order (rows are read from C order)")
        row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
        window = max(1, (GATHER_BYTES if window_bytes is None else window_bytes) // max(row_bytes, 1))
        return read_rows(self._fh, self._fh.tell(), shape, dtype, idx, window)

    def slice(self, name, a: int, b: int) -> np.ndarray:
        """Rows a:b of the member (0 <= a <= b <= its rows, C order) into a new array, read
        with one read of their bytes (no map: an apply task's blocks of its part's p, n_pivots
        and pivots through :meth:`take`'s map cost a third more, the map's set-up and faults)."""
        self._seek(name)
        shape, fortran, dtype = read_npy_header(self._fh)
        if fortran and len(shape) > 1:
            raise ValueError(f"{self.path}: member {name!r} is in Fortran order (rows are read from C order)")
        if not 0 <= a <= b <= (shape[0] if shape else 0):
            raise ValueError(f"{self.path}: member {name!r}: rows {a}:{b} outside its {shape[0] if shape else 0} rows")
        out = np.empty((b - a, *shape[1:]), dtype)
        if out.nbytes:
            self._fh.seek(self._fh.tell() + a * (out.nbytes // (b - a)))
            if self._fh.readinto(memoryview(out).cast("B")) != out.nbytes:
                raise ValueError(f"{self.path}: member {name!r} ends before row {b}")
        return out

    def take(self, name, index) -> np.ndarray:
        """``member[index]`` as a new array, read through a memory map that goes with the call
        (a map kept open keeps every page a read touched in the process's resident set)."""
        m = self.memmap(name)
        out = np.array(m[index])
        del m
        return out

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> "Bundle":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


#: Bytes of a member's rows Bundle.rows maps at once: the pages of one window are mapped, read
#: and unmapped before the next (pivot.pipeline.pivoting.GATHER_WINDOW's 64 MiB of p_ef).
GATHER_BYTES = 64 << 20


def read_rows(fh, offset: int, shape: tuple, dtype, idx, window: int) -> np.ndarray:
    """Rows ``idx`` (ascending) of the C-order array of ``shape`` and ``dtype`` at byte
    ``offset`` of the open file ``fh``, into a new array, read through memory maps of at most
    ``window`` rows (from the first row a map reads to the last), each unmapped before the next:
    however widely the rows are spread, the process maps one window of the file at a time, not
    every page it reads."""
    import mmap

    idx = np.asarray(idx, dtype=np.int64)
    dtype = np.dtype(dtype)
    out = np.empty((len(idx),) + tuple(shape[1:]), dtype=dtype)
    if not len(idx):
        return out
    if idx[0] < 0 or idx[-1] >= shape[0]:
        raise ValueError(f"{fh.name}: rows {idx[0]}..{idx[-1]} outside its {shape[0]} rows")
    width = int(np.prod(shape[1:], dtype=np.int64))
    row_bytes = width * dtype.itemsize
    if row_bytes == 0:
        return out
    a = 0
    while a < len(idx):
        r0 = int(idx[a])
        b = int(np.searchsorted(idx, r0 + window, side="left"))
        r1 = int(idx[b - 1]) + 1
        start = offset + r0 * row_bytes
        aligned = start - start % mmap.ALLOCATIONGRANULARITY
        mm = mmap.mmap(fh.fileno(), start - aligned + (r1 - r0) * row_bytes, access=mmap.ACCESS_READ,
                       offset=aligned)
        try:
            rows = np.frombuffer(mm, dtype=dtype, count=(r1 - r0) * width, offset=start - aligned)
            out[a:b] = rows.reshape((r1 - r0,) + tuple(shape[1:]))[idx[a:b] - r0]
            del rows
        finally:
            mm.close()
        a = b
    return out


def read_npy_header(fh) -> tuple[tuple, bool, np.dtype]:
    """(shape, fortran order, dtype) of the .npy array at ``fh``'s position (format 1.0 or
    2.0); ``fh`` is left at the array's data."""
    version = np.lib.format.read_magic(fh)
    read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                   else np.lib.format.read_array_header_2_0)
    return read_header(fh)


def open_bundle(path) -> Bundle:
    """Open the bundle at ``path`` (use it in a ``with`` block)."""
    return Bundle(path)


#: Ids whose presence marks present_windows makes at a time (the stored phrases' ids of the ppdb2
#: and lhs stages): its memory is a window's marks and ids (1 + 8 bytes an id of the window),
#: not an entry per phrase id.
IDS_WINDOW = 1 << 20


def present_windows(n: int, paths, name: str, window: int = IDS_WINDOW):
    """(a, the ids of a..a + window - 1 that member ``name`` of some bundle of ``paths`` holds,
    ascending) for a = 0, window, ... below n: the ids 0..n-1 that some of those members holds, cut into windows,
    each member an ascending array of distinct ids of which a window's slice is read through a
    map that goes with the read (never every id's mark at once)."""
    for a in range(0, n, window):
        b = min(a + window, n)
        seen = np.zeros(b - a, dtype=bool)
        for path in paths:
            with open_bundle(path) as z:
                m = z.memmap(name)
                lo, hi = np.searchsorted(m, [a, b]) if len(m) else (0, 0)
                seen[np.asarray(m[lo:hi], np.int64) - a] = True
                del m
        yield a, a + np.flatnonzero(seen)
