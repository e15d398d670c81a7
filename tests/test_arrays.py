"""pivot.arrays.unique: np.unique's values, by the sort."""
import numpy as np

from pivot.arrays import unique


def test_unique_by_hand_and_as_numpy():
    """[5, 1, 5, 3, 1] -> [1, 3, 5]; 64-bit keys beyond 2^63 (uint64) sort as unsigned; a 2-D
    array is flattened; NaNs count as one value, last; an empty array stays empty of its dtype."""
    assert unique(np.array([5, 1, 5, 3, 1])).tolist() == [1, 3, 5]
    big = np.array([2 ** 64 - 1, 7, 2 ** 63, 7], np.uint64)
    got = unique(big)
    assert got.dtype == np.uint64 and got.tolist() == [7, 2 ** 63, 2 ** 64 - 1]
    assert unique(np.array([[4, 2], [2, 9]])).tolist() == [2, 4, 9]
    floats = unique(np.array([2.0, np.nan, 1.0, np.nan, 2.0]))
    assert floats[:2].tolist() == [1.0, 2.0] and np.isnan(floats[2]) and len(floats) == 3
    empty = unique(np.zeros(0, np.int64))
    assert empty.dtype == np.int64 and len(empty) == 0
    rng = np.random.default_rng(3)
    keys = rng.integers(0, 2 ** 63, 50_000, dtype=np.int64).astype(np.uint64)
    keys = np.concatenate([keys, keys[:20_000]])
    assert unique(keys).tobytes() == np.unique(keys).tobytes()
