"""The write's sets of used ids as bits (pivot.store.write.IdSet and its helpers): the same ids,
read by rank or by range, as the ascending array np.unique gives."""
import numpy as np
import pytest

from pivot.store.write import IdSet, _distinct, _mark, _narrow, read_id_bits


def test_mark_sets_packbits_order_bits_and_grows():
    # id i is bit 7 - i % 8 of byte i // 8 (np.packbits): ids 0 and 3 -> 128 + 16 = 144 in byte 0,
    # id 9 -> 64 in byte 1, id 70000 -> 128 in byte 8750 (the mask grows to 8751 bytes)
    packed = _mark(np.zeros(0, np.uint8), np.array([0, 3, 9, 70000]))
    assert len(packed) == 8751
    assert (packed[0], packed[1], packed[8750]) == (144, 64, 128)
    assert int(packed.astype(np.int64).sum()) == 144 + 64 + 128
    # more ids: 1 (64 in byte 0: 208), 8 (128 in byte 1: 192); no growth
    again = _mark(packed, np.array([1, 8]))
    assert again is packed and (packed[0], packed[1], len(packed)) == (208, 192, 8751)
    assert np.array_equal(np.unpackbits(packed)[:10], [1, 1, 0, 1, 0, 0, 0, 0, 1, 1])


def test_an_id_set_reads_by_rank_and_by_range():
    s = IdSet(_mark(np.zeros(0, np.uint8), np.array([0, 3, 9, 70000])))
    assert len(s) == 4
    assert s.tolist() == [0, 3, 9, 70000]
    assert s[1:3].tolist() == [3, 9]
    assert s[2:4].tolist() == [9, 70000]      # id 70000 is in group 2 (32,768 ids a group)
    assert s[3:4].tolist() == [70000] and s[4:9].tolist() == [] and s[2:2].tolist() == []
    assert s.within(2, 10).tolist() == [3, 9]
    assert s.within(10, 70001).tolist() == [70000] and s.within(70001, 80000).tolist() == []
    with pytest.raises(ValueError, match="step 1"):
        s[0:4:2]
    assert len(IdSet(np.zeros(0, np.uint8))) == 0 and IdSet(np.zeros(0, np.uint8))[0:5].tolist() == []
    assert IdSet.of(np.array([5, 1, 5, -1])).tolist() == [1, 5]


def test_an_id_set_is_the_ascending_array_of_its_ids():
    rng = np.random.default_rng(3)
    for size, k in ((100, 10), (300_000, 2_000), (300_000, 250_000)):
        ids = np.unique(rng.integers(0, size, k))
        s = IdSet(_mark(np.zeros(0, np.uint8), ids))
        assert len(s) == len(ids) and np.array_equal(s.ids(), ids)
        for a, b in ((0, 1), (len(ids) // 3, len(ids) // 2), (len(ids) - 7, len(ids) + 5)):
            assert np.array_equal(s[a:b], ids[a:b])
        lo, hi = size // 5, size // 2
        assert np.array_equal(s.within(lo, hi), ids[(ids >= lo) & (ids < hi)])


def test_read_id_bits_reads_a_range_of_a_saved_set(tmp_path):
    packed = _mark(np.zeros(0, np.uint8), np.array([0, 3, 9, 70000]))
    packed.tofile(tmp_path / "s.bits")
    assert read_id_bits(tmp_path / "s.bits", 2, 70001).tolist() == [3, 9, 70000]
    assert read_id_bits(tmp_path / "s.bits", 0, 4).tolist() == [0, 3]
    assert read_id_bits(tmp_path / "s.bits", 9, 10).tolist() == [9]
    assert read_id_bits(tmp_path / "s.bits", 80000, 90000).tolist() == []   # past the file's end
    assert read_id_bits(tmp_path / "s.bits", 0, 0).tolist() == []


def test_distinct_ids_of_arrays():
    assert _distinct(np.array([3, -1, 3]), np.array([[0, -1], [5, 3]])).tolist() == [0, 3, 5]
    assert _distinct(np.zeros(0, np.int32)).dtype == np.int64 and _distinct().tolist() == []


def test_narrow_ids_are_int32_when_they_fit():
    assert _narrow(np.array([0, 2**31 - 1], np.int64)).dtype == np.int32
    assert _narrow(np.array([0, 2**31], np.int64)).dtype == np.int64
    assert _narrow(np.array([0, 2**31], np.int64)).tolist() == [0, 2**31]
    assert _narrow(np.zeros(0, np.int64)).dtype == np.int64
