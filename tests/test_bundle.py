"""Bundles (pivot.pipeline.bundle): the sharded stages' files of named arrays."""
import json
import struct

import numpy as np
import pytest

from pivot.pipeline.bundle import allocate_bundle, open_bundle, read_npy_header, save_bundle, write_rows


def test_members_come_back_exactly_in_order(tmp_path):
    arrays = {"e_key": np.array([2**64 - 1, 0, 7], np.uint64), "counts": np.arange(12.0).reshape(4, 3) / 7,
              "rows": np.array([[1, -1], [2, 3]], np.int32), "empty": np.zeros((0, 15)),
              "flags": np.array([1, 0], np.uint8), "meta": np.array("{\"a\": 1}")}
    save_bundle(tmp_path / "b.arrays", **arrays)
    with open_bundle(tmp_path / "b.arrays") as b:
        assert b.files == list(arrays)
        assert "counts" in b and "missing" not in b
        for name, value in arrays.items():
            got = b[name]
            assert got.dtype == value.dtype and got.shape == value.shape
            assert got.tobytes() == value.tobytes()
        assert b["e_key"][0] == 2**64 - 1


def test_layout_is_npy_images_at_64_byte_offsets_then_the_index(tmp_path):
    save_bundle(tmp_path / "b.arrays", a=np.array([1, 2, 3], np.int8), b=np.array([0.5]))
    raw = (tmp_path / "b.arrays").read_bytes()
    at, tag = struct.unpack("<Q8s", raw[-16:])
    index = json.loads(raw[at:-16])
    assert tag == b"PIVOTIDX" and list(index) == ["a", "b"]
    # a: a 128-byte .npy header (numpy pads headers to 64) and 3 bytes; b starts at the next multiple of 64.
    assert index == {"a": 0, "b": 192}
    assert raw[:6] == b"\x93NUMPY" and raw[128:131] == b"\x01\x02\x03" and raw[131:192] == b"\0" * 61
    assert raw[192:198] == b"\x93NUMPY" and at == 192 + 128 + 8


def test_the_write_is_atomic_and_replaces(tmp_path):
    path = tmp_path / "b.arrays"
    save_bundle(path, a=np.arange(3))
    save_bundle(path, a=np.arange(5))
    with open_bundle(path) as b:
        assert b["a"].tolist() == [0, 1, 2, 3, 4]
    assert [p.name for p in tmp_path.iterdir()] == ["b.arrays"]
    with pytest.raises(TypeError, match="Python objects"):
        save_bundle(tmp_path / "c.arrays", a=np.array([{}], dtype=object))
    assert [p.name for p in tmp_path.iterdir()] == ["b.arrays"]  # nothing half-written left


def test_clear_errors_name_the_file(tmp_path):
    save_bundle(tmp_path / "b.arrays", a=np.arange(3))
    with open_bundle(tmp_path / "b.arrays") as b, pytest.raises(KeyError, match=r"b\.arrays: no member 'z'"):
        b["z"]
    (tmp_path / "short").write_bytes(b"abc")
    with pytest.raises(ValueError, match=r"short: not a bundle \(3 bytes\)"):
        open_bundle(tmp_path / "short")
    np.savez(tmp_path / "z.npz", a=np.arange(3))
    with pytest.raises(ValueError, match=r"z\.npz: not a bundle \(no index at its end\)"):
        open_bundle(tmp_path / "z.npz")


def test_blocks_member_is_the_whole_array(tmp_path):
    """A Blocks member is written block by block (never held whole) and reads back as the
    array its blocks make up, beside ordinary members; a block of other rows, or fewer rows
    than declared, is an error."""
    from pivot.pipeline.bundle import Blocks

    whole = np.arange(14, dtype=np.float32).reshape(7, 2)
    flags = []

    def blocks():
        for a in range(0, 7, 3):
            flags.append(whole[a:a + 3, 0] > 4)
            yield whole[a:a + 3]
    # the second member's blocks are those the first one's made while it was written
    save_bundle(tmp_path / "b.arrays", x=Blocks(np.float32, (7, 2), blocks()), flag=Blocks(bool, (7,), flags),
                n=np.array([7]))
    with open_bundle(tmp_path / "b.arrays") as b:
        assert b["x"].tobytes() == whole.tobytes() and b.memmap("x").shape == (7, 2)
        assert b["flag"].tolist() == [False, False, False, True, True, True, True] and b["n"].tolist() == [7]
    with pytest.raises(ValueError, match="rows of"):
        save_bundle(tmp_path / "c.arrays", x=Blocks(np.float32, (7, 2), [np.zeros((7, 3), np.float32)]))
    with pytest.raises(ValueError, match="6 rows in its blocks, 7 declared"):
        save_bundle(tmp_path / "c.arrays", x=Blocks(np.float32, (7, 2), [whole[:6]]))
    assert not (tmp_path / "c.arrays").exists()


def test_take_copies_the_rows_asked_for(tmp_path):
    a = np.arange(24, dtype=np.int32).reshape(8, 3)
    save_bundle(tmp_path / "b.arrays", a=a)
    with open_bundle(tmp_path / "b.arrays") as z:
        rows = z.take("a", np.array([1, 4, 7]))
        block = z.take("a", slice(2, 5))
    assert rows.tolist() == [[3, 4, 5], [12, 13, 14], [21, 22, 23]]
    assert block.tolist() == [[6, 7, 8], [9, 10, 11], [12, 13, 14]]
    # copies, not views of a map: writable, owning their memory
    assert rows.flags.owndata and block.flags.owndata and not isinstance(block, np.memmap)


def test_slice_reads_rows_a_to_b(tmp_path):
    a = np.arange(24, dtype=np.int32).reshape(8, 3)
    save_bundle(tmp_path / "b.arrays", a=a, p=np.array([0.5, 1.5, 2.5]))
    with open_bundle(tmp_path / "b.arrays") as z:
        assert z.slice("a", 2, 5).tolist() == [[6, 7, 8], [9, 10, 11], [12, 13, 14]]
        assert z.slice("a", 8, 8).shape == (0, 3) and z.slice("p", 1, 3).tolist() == [1.5, 2.5]
        with pytest.raises(ValueError, match="rows 6:9 outside its 8 rows"):
            z.slice("a", 6, 9)


def test_read_npy_header_reads_both_formats(tmp_path):
    a = np.zeros((5, 2), dtype="<f4")
    for version in ((1, 0), (2, 0)):
        path = tmp_path / f"v{version[0]}.npy"
        with open(path, "wb") as fh:
            np.lib.format.write_array(fh, a, version=version)
        with open(path, "rb") as fh:
            assert read_npy_header(fh) == ((5, 2), False, np.dtype("<f4"))
            assert len(fh.read()) == a.nbytes      # left at the data


def recorded_maps(monkeypatch) -> list:
    """(length, offset) of every mmap.mmap made from now on in this test, in order."""
    import mmap

    maps = []

    class Recorded(mmap.mmap):
        def __new__(cls, fileno, length, **kw):
            maps.append((length, kw["offset"]))
            return super().__new__(cls, fileno, length, **kw)

    monkeypatch.setattr(mmap, "mmap", Recorded)
    return maps


def test_rows_maps_one_window_of_the_member_at_a_time(tmp_path, monkeypatch):
    """Bundle.rows reads rows 0, 1, 5, 6, 7, 20 of a (30, 2) float64 member (16-byte rows) in
    windows of 64 bytes (4 rows): three maps, of rows 0..1, 5..7 and 20, each from the start of
    the page that holds its first row; the rows are read exactly; shape() reads the header alone."""
    a = np.arange(60, dtype=np.float64).reshape(30, 2)
    save_bundle(tmp_path / "b.arrays", pad=np.zeros(3, np.int8), a=a)
    maps = recorded_maps(monkeypatch)
    idx = np.array([0, 1, 5, 6, 7, 20])
    with open_bundle(tmp_path / "b.arrays") as b:
        assert b.shape("a") == (30, 2) and maps == []
        got = b.rows("a", idx, window_bytes=64)
        # member a starts at byte 192 (pad: a 128-byte header and 3 bytes, then 64-byte
        # alignment), its data 128 bytes later, at 320
        assert got.tobytes() == a[idx].tobytes() and got.shape == (6, 2)
        assert maps == [(320 + 2 * 16, 0), (320 + 5 * 16 + 3 * 16, 0), (320 + 20 * 16 + 16, 0)]
        # a window smaller than a row still reads one row a map
        maps.clear()
        assert b.rows("a", np.array([3, 4]), window_bytes=1).tobytes() == a[[3, 4]].tobytes() and len(maps) == 2
        assert b.rows("a", np.zeros(0, np.int64)).shape == (0, 2)
        with pytest.raises(ValueError, match="outside"):
            b.rows("a", np.array([3, 30]))


def test_an_allocated_bundle_filled_row_by_row_is_save_bundles_bytes(tmp_path):
    """allocate_bundle + write_rows in any order (rows 3:5 of both members, then 0:3, then 3:5
    again: a retried task) give the bytes save_bundle writes of the whole arrays; an empty
    member (0 rows) too; rows outside the member or of another shape are refused."""
    vec = np.arange(10, dtype=np.float32).reshape(5, 2) / 3
    has = np.array([True, False, True, True, False])
    save_bundle(tmp_path / "whole.arrays", vec=vec, vec_has=has, empty=np.zeros((0, 2), np.float32))
    path = tmp_path / "filled.arrays"
    allocate_bundle(path, vec=(np.float32, (5, 2)), vec_has=(bool, (5,)), empty=(np.float32, (0, 2)))
    for a, b in ((3, 5), (0, 3), (3, 5)):
        write_rows(path, "vec", a, vec[a:b])
        write_rows(path, "vec_has", a, has[a:b])
    assert path.read_bytes() == (tmp_path / "whole.arrays").read_bytes()
    with pytest.raises(ValueError, match="cannot hold"):
        write_rows(path, "vec", 4, vec[:2])
    with pytest.raises(ValueError, match="cannot hold"):
        write_rows(path, "vec", 0, np.zeros((1, 3), np.float32))
