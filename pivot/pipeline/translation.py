"""Translation probabilities from sharded counts: merge by English phrase, then by foreign phrase.

Round 1 (pivot.pipeline.extract.extract_shard) leaves each shard's weighted phrase-pair
counts split into P partitions of the English key range. Then:

round 2, :func:`merge_by_e` (one task per English partition p): the pairs of part p of every
    shard, in shard order, summed per (e, f):  c_k(e,f) = sum over shards of c_k^shard(e,f).
    Every pair of an English phrase is now in one place, so the row sums give
        p_k(f|e) = c_k(e,f) / sum_f' c_k(e,f')
    and support(e) is the phrase's count in the bitext; n_k(e), the extractions of e under
    model k's nonzero weights, is summed over the shards for model k's minimum-count rule.
    The pairs go on, split by foreign key range.
round 3, :func:`merge_by_f` (one task per foreign partition q): every pair of a foreign
    phrase in one place gives
        p_k(e|f) = c_k(e,f) / sum_e' c_k(e',f)
    and the pruning rules (pivot.pipeline.pruning.keep_entries), decided for each model k on
    its OWN counts and probabilities (a model is never pruned by what General saw):
    (a) model k keeps (e,f) if c_k(e,f) > 0, p_k(f|e) >= min_p_f_given_e,
        p_k(e|f) >= min_p_e_given_f and n_k(e) >= min_phrase_count, where n_k(e) is the number
        of extractions of e that model k counts at all (weight > 0): a rarer phrase's
        distribution under k rests on one or two alignments, so it gets no paraphrases and
        is nobody's paraphrase under k;
    (b) model k keeps at most max_e_per_f English phrases per f among those, largest
        c_k(e,f) first (ties: smaller English key).
    An entry is stored when some model keeps it; p_k(f|e) and p_k(e|f) are set to 0 for the
    models that do not, so the one pivot pass computes every model on its own pruned table.
    The probabilities are normalised over the full table before pruning, as PPDB does.
round 4, :func:`assemble`: the kept entries become the pivot structure: phrase ids are the
    ranks of the keys (so they do not depend on P), a CSC by f and a CSR by e. The build's
    process only adds up per-partition counts into offsets; tasks count each English
    partition's kept phrases, write the keys, and one task per foreign partition writes its
    columns and one per English partition sorts and writes its rows, each into its own byte
    range of the shared files: no process holds the whole structure, nor all its keys.

Why the bytes cannot depend on P or on the number of workers: a pair's partial counts meet
in one partition whatever P is and are added in shard order; a row's (column's) sums run
over its pairs in key order; partitions are key ranges, so concatenating them in order is
the global key order. Only the shard size (a recipe parameter, in the signature) groups the
floating-point sums.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from pivot.arrays import unique
from pivot.pipeline.bundle import open_bundle, save_bundle
from pivot.pipeline.extract import partition_of
from pivot.pipeline.pruning import keep_entries
from pivot.pipeline.stage import Stage


def _segments(*keys) -> np.ndarray:
    """Start index of each run of equal key tuples in arrays sorted by those keys."""
    n = len(keys[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for k in keys:
        change[1:] |= k[1:] != k[:-1]
    return np.flatnonzero(change)


def _check_rows(keys: np.ndarray, rows: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Unique keys (sorted) and their rows; a key behind two different rows is an error."""
    order = np.argsort(keys, kind="stable")
    keys, rows = keys[order], rows[order]
    starts = _segments(keys)
    ends = np.append(starts[1:], len(keys))
    first = np.repeat(starts, ends - starts)
    bad = np.flatnonzero((rows != rows[first]).any(axis=1))
    if len(bad):
        raise RuntimeError(f"64-bit key collision between two {what} phrases "
                           f"({rows[first[bad[0]]].tolist()} and {rows[bad[0]].tolist()}): please report it")
    return keys[starts], rows[starts]


def _normalise(counts: np.ndarray, starts: np.ndarray, owner: np.ndarray) -> np.ndarray:
    """counts / (sum of counts over each segment), 0 where the sum is 0.

    Counts are sums of non-negative weights, so a segment whose sum is 0 holds only zeros and
    dividing them by 1 gives the 0: two passes over the (pairs x models) array instead of a
    masked division's six (the merges are bound by memory traffic, more so on two workers).
    """
    sums = np.add.reduceat(counts, starts, axis=0) if len(starts) else np.zeros((0, counts.shape[1]))
    sums[sums == 0] = 1.0
    return counts / sums[owner]


def _split(part: np.ndarray, n_parts: int) -> list[np.ndarray]:
    """Indices of each partition's rows, in their order: np.flatnonzero(part == q) for every q,
    from one stable sort instead of n_parts passes."""
    order = np.argsort(part, kind="stable")
    bounds = np.searchsorted(part[order], np.arange(n_parts + 1))
    return [order[bounds[q]:bounds[q + 1]] for q in range(n_parts)]


def merge_by_e(part_paths: list, p: int, n_parts: int, out_path, min_phrase_count: int) -> dict:
    """Round 2 for English partition p: merge, p_k(f|e), n_k(e), split by foreign partition.

    Also decides each model's minimum-count rule per English phrase (n_k(e) >= min_phrase_count,
    summed over shards) and hands it on per pair as ``e_ok`` (uint8, one column per model).
    """
    out_path = Path(out_path)
    if out_path.is_file():
        return {"reused": True}
    cols = {"e_key": [], "f_key": [], "counts": [], "support": []}
    dict_keys, dict_rows, dict_nobs = [], [], []
    for path in part_paths:
        with open_bundle(path) as z:
            for c in cols:
                cols[c].append(z[f"p{p}_{c}"])
            dict_keys.append(z[f"p{p}_e_dict_key"])
            dict_rows.append(z[f"p{p}_e_rows"])
            dict_nobs.append(z[f"p{p}_e_nobs"])
    e_key, f_key = np.concatenate(cols["e_key"]), np.concatenate(cols["f_key"])
    counts, support = np.concatenate(cols["counts"]), np.concatenate(cols["support"])
    del cols
    # A stable sort keeps each pair's shard partials in shard order.
    order = np.lexsort((f_key, e_key))
    e_key, f_key, counts, support = e_key[order], f_key[order], counts[order], support[order]
    del order
    starts = _segments(e_key, f_key)
    e_key, f_key = e_key[starts], f_key[starts]
    counts = np.add.reduceat(counts, starts, axis=0) if len(starts) else counts
    support = np.add.reduceat(support, starts) if len(starts) else support
    rows_start = _segments(e_key)
    owner = np.repeat(np.arange(len(rows_start)), np.diff(np.append(rows_start, len(e_key))))
    e_support = np.add.reduceat(support, rows_start) if len(rows_start) else support[:0]
    p_fe = _normalise(counts, rows_start, owner)
    all_keys = np.concatenate(dict_keys)
    keys, rows = _check_rows(all_keys, np.concatenate(dict_rows), "English")
    # The dictionary holds exactly the English phrases of this partition's pairs.
    assert np.array_equal(keys, e_key[rows_start])
    # n_k(e): the shards' observation counts summed per phrase (integers: exact in any order).
    order = np.argsort(all_keys, kind="stable")
    nobs = np.concatenate(dict_nobs)[order]
    nobs = np.add.reduceat(nobs, _segments(all_keys[order]), axis=0) if len(order) else nobs
    del order, all_keys
    arrays = {"e_key": keys, "e_rows": rows, "e_count": e_support.astype(np.int64), "e_nobs": nobs}
    f_part = partition_of(f_key, n_parts)
    e_count = e_support[owner].astype(np.int64)
    e_ok = (nobs[owner] >= min_phrase_count).astype(np.uint8) if len(owner) else np.zeros((0, counts.shape[1]), np.uint8)
    for q, mine in enumerate(_split(f_part, n_parts)):
        for name, values in (("e_key", e_key), ("f_key", f_key), ("counts", counts), ("support", support),
                             ("p_fe", p_fe), ("e_count", e_count), ("e_ok", e_ok)):
            arrays[f"q{q}_{name}"] = values[mine]
    save_bundle(out_path, **arrays)
    return {"reused": False, "n_pairs": int(len(e_key)), "n_e": int(len(keys))}


def merge_by_f(e_paths: list, part_paths: list, q: int, out_path, *, min_p_f_given_e: float,
               min_p_e_given_f: float, max_e_per_f: int, min_phrase_count: int) -> dict:
    """Round 3 for foreign partition q: p_k(e|f), then rules (a) and (b) for every model k.

    ``min_phrase_count`` was applied in round 2 (``e_ok``); it is a parameter here so that the
    two rounds are called with one set of pruning settings.
    """
    out_path = Path(out_path)
    if out_path.is_file():
        with open_bundle(out_path) as z:
            st = z["stats"]
            return {**{k: int(v) for k, v in zip(_STAT_NAMES, st[:len(_STAT_NAMES)])},
                    "n_kept_by_model": st[len(_STAT_NAMES):].tolist()}
    names = ("e_key", "f_key", "counts", "support", "p_fe", "e_count", "e_ok")
    cols = {c: [] for c in names}
    for path in e_paths:
        with open_bundle(path) as z:
            for c in names:
                cols[c].append(z[f"q{q}_{c}"])
    a = {c: np.concatenate(v) for c, v in cols.items()}
    del cols
    # Sorted by (f, e): within a column the English phrases ascend, as in the kernel's CSC.
    # The concatenation is already in e order (partitions are e key ranges, each sorted by
    # (e, f)), so one stable sort by f gives (f, e).
    order = np.argsort(a["f_key"], kind="stable")
    a = {c: v[order] for c, v in a.items()}
    del order
    col_start = _segments(a["f_key"])
    owner = np.repeat(np.arange(len(col_start)), np.diff(np.append(col_start, len(a["f_key"]))))
    p_ef = _normalise(a["counts"], col_start, owner)
    p_fe = a["p_fe"]
    counts = a["counts"]
    n = counts.shape[0]
    # Rules (a) and (b) for every model, each on its own numbers; a column's entries share
    # their foreign phrase's index ``owner``.
    keep, after_floors = keep_entries(counts, p_fe, p_ef, a["e_ok"] > 0, owner, a["e_key"],
                                      min_p_f_given_e=min_p_f_given_e, min_p_e_given_f=min_p_e_given_f,
                                      max_e_per_f=max_e_per_f)
    # Each model's pruned entries contribute nothing to its pivot sums.
    p_fe[~keep] = 0.0
    p_ef[~keep] = 0.0
    keep_any = keep.any(axis=1)
    n_kept_by_model = [int(x) for x in keep.sum(axis=0)]
    kept = np.flatnonzero(keep_any)
    deg = np.bincount(owner[kept], minlength=len(col_start)) if len(kept) else np.zeros(0, np.int64)
    stats = np.array([n, int(after_floors.sum()), len(kept), int((deg.astype(np.int64) ** 2).sum()),
                      *n_kept_by_model], dtype=np.int64)
    # Foreign phrases with a kept entry, and their token rows.
    dict_keys, dict_rows = [], []
    for path in part_paths:
        with open_bundle(path) as z:
            dict_keys.append(z[f"q{q}_f_dict_key"])
            dict_rows.append(z[f"q{q}_f_rows"])
    keys, rows = _check_rows(np.concatenate(dict_keys), np.concatenate(dict_rows), "foreign")
    kept_f = a["f_key"][kept]  # sorted: the pairs are in (f, e) order
    used = kept_f[_segments(kept_f)]
    pos = np.searchsorted(keys, used)
    kept_e = a["e_key"][kept]
    # For round 4's row tasks: the kept entries of each English partition p (still in (f, e)
    # order), so the task that writes the rows of partition p reads exactly its entries.
    n_parts = len(e_paths)
    e_part = partition_of(kept_e, n_parts)
    kept_p_fe = p_fe[kept]
    by_e = {}
    for p, mine in enumerate(_split(e_part, n_parts)):
        by_e[f"r{p}_e_key"], by_e[f"r{p}_f_key"], by_e[f"r{p}_p_fe"] = kept_e[mine], kept_f[mine], kept_p_fe[mine]
    save_bundle(out_path, e_key=kept_e, f_key=kept_f, p_ef=p_ef[kept], **by_e,
                    r_counts=np.bincount(e_part, minlength=n_parts).astype(np.int64),
                    e_kept=unique(kept_e), f_dict_key=used, f_rows=rows[pos], stats=stats)
    return {**{k: int(v) for k, v in zip(_STAT_NAMES, stats[:len(_STAT_NAMES)])},
            "n_kept_by_model": n_kept_by_model}


#: The first entries of a foreign partition's ``stats`` (then one n_kept per model).
_STAT_NAMES = ("n_pairs", "n_after_floors", "n_kept", "sum_deg_f_squared")


def assemble(f_paths: list, out_dir, engine=None) -> dict:
    """Round 4: the kept entries of every foreign partition as one pivot structure.

    English ids are the ranks of the kept English keys, foreign ids the ranks of the kept
    foreign keys. Writes row_ptr/row_f/p_fe (CSR by e, f ascending), col_ptr/col_e/p_ef (CSC
    by f, e ascending), e_key and f_key (id -> key) into out_dir, one .npy each.

    Partitions are key ranges, so a partition's ids, columns and rows are contiguous and its
    place in every array is a sum of the counts before it. This process reads counts only
    (per foreign partition q: its kept entries, its kept foreign phrases, its entries of each
    English partition p) and creates the arrays at their final size; ``engine`` then runs one
    task per partition in three rounds, each task filling its own disjoint ranges:

    1. :func:`write_foreign_keys` (q): q's foreign keys at id f_off[q] = sum over q' < q of
       q''s kept foreign phrases; :func:`count_english` (p): the distinct English keys that
       p keeps, n_e(p), so that p's ids start at e_lo[p] = sum over p' < p of n_e(p');
    2. :func:`write_rows` (p): p's English keys and its rows of the CSR (it needs every f_key);
    3. :func:`write_columns` (q): q's columns of the CSC (it needs every e_key).

    The build's process so holds O(P) numbers, however many phrases and entries the table has;
    a task holds one partition's entries.
    """
    from pivot.pipeline.engine import Engine
    engine = engine or Engine(workers=1)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    n_parts = len(f_paths)
    n_f_keys, n_entries, p_entries = [], [], np.zeros(n_parts, np.int64)
    for path in f_paths:
        with open_bundle(path) as z:
            n_f_keys.append(z.shape("f_dict_key")[0])
            p_entries += z["r_counts"]  # the entries of each English partition p in q
            stats = z["stats"]
            e_dtype, f_dtype = z.dtype("e_kept"), z.dtype("f_dict_key")
        n_entries.append(int(stats[_STAT_NAMES.index("n_kept")]))
    K = len(stats) - len(_STAT_NAMES)  # the rest of stats: one n_kept per model
    # Partition q's columns start at entry col_off[q] and foreign id f_off[q]; partition p's
    # rows at entry row_off[p] (its entries in every q) and English id e_lo[p].
    col_off = np.cumsum([0] + n_entries)
    f_off = np.cumsum([0] + n_f_keys)
    row_off = np.cumsum(np.concatenate([[0], p_entries]))
    n_f, n_kept = int(f_off[-1]), int(col_off[-1])
    _create_npy(out_dir / "f_key.npy", f_dtype, (n_f,))
    engine.map(write_foreign_keys, [(f_paths[q], out_dir, int(f_off[q])) for q in range(n_parts)],
               name="assemble-f-keys")
    n_e_by_part = engine.map(count_english, [(f_paths, p) for p in range(n_parts)], name="assemble-e-count")
    e_lo = np.cumsum([0] + n_e_by_part)
    n_e = int(e_lo[-1])
    for name, dtype, shape in (("e_key", e_dtype, (n_e,)), ("row_ptr", np.int64, (n_e + 1,)),
                               ("row_f", np.int32, (n_kept,)), ("p_fe", np.float64, (n_kept, K)),
                               ("col_ptr", np.int64, (n_f + 1,)), ("col_e", np.int32, (n_kept,)),
                               ("p_ef", np.float64, (n_kept, K))):
        _create_npy(out_dir / f"{name}.npy", dtype, shape)
    _write_at(out_dir / "row_ptr.npy", n_e, np.array([n_kept], np.int64))
    _write_at(out_dir / "col_ptr.npy", n_f, np.array([n_kept], np.int64))
    engine.map(write_rows, [(f_paths, p, out_dir, int(row_off[p]), int(e_lo[p]), int(e_lo[p + 1]))
                            for p in range(n_parts)], name="assemble-rows")
    engine.map(write_columns, [(f_paths[q], out_dir, int(col_off[q]), int(f_off[q])) for q in range(n_parts)],
               name="assemble-columns")
    return {"n_e": n_e, "n_f": n_f, "n_kept": n_kept}


def _english_keys(f_paths: list, p: int) -> np.ndarray:
    """The English keys of English partition p's kept entries, from every foreign partition in
    order (members r{p}_e_key). Their distinct values, ascending, are p's English phrases (ids
    e_lo[p] + their ranks): a phrase is kept when one of its entries is, and each kept entry of
    p is in exactly one foreign partition, so they are the table's kept keys in p's key range."""
    keys = []
    for path in f_paths:
        with open_bundle(path) as z:
            keys.append(z[f"r{p}_e_key"])
    return np.concatenate(keys)


def count_english(f_paths: list, p: int) -> int:
    """Round 4, English partition p: n_e(p), the number of distinct English keys p keeps."""
    return int(len(unique(_english_keys(f_paths, p))))


def write_foreign_keys(f_path, out_dir, f_off: int) -> dict:
    """Round 4, foreign partition q: its kept foreign keys (ascending, as the partitions' key
    ranges are) as ids f_off, f_off + 1, ... of f_key."""
    with open_bundle(f_path) as z:
        keys = z["f_dict_key"]
    _write_at(Path(out_dir) / "f_key.npy", f_off, keys)
    return {"n_f": int(len(keys))}


def write_columns(f_path, out_dir, col_off: int, f_off: int) -> dict:
    """Round 4, foreign partition q: its columns of the CSC (col_ptr, col_e, p_ef).

    The partition's entries are already in (f, e) order; column j of the partition is global
    column f_off + j and its entries start at col_off. Rewriting the same bytes is harmless,
    so a retried task needs no check. Runs after every :func:`write_rows` (e_key complete).
    """
    out_dir = Path(out_dir)
    with open_bundle(f_path) as z:
        e_key, f_key, p_ef = z["e_key"], z["f_key"], z["p_ef"]
    e_keys = np.load(out_dir / "e_key.npy", mmap_mode="r")
    col_e = np.searchsorted(e_keys, e_key).astype(np.int32)
    _write_at(out_dir / "col_ptr.npy", f_off, _segments(f_key).astype(np.int64) + col_off)
    _write_at(out_dir / "col_e.npy", col_off, col_e)
    _write_at(out_dir / "p_ef.npy", col_off, p_ef)
    return {"n_entries": int(len(e_key))}


def write_rows(f_paths: list, p: int, out_dir, row_off: int, e_lo: int, e_hi: int) -> dict:
    """Round 4, English partition p: its English keys (ids e_lo <= e < e_hi) and its rows of the
    CSR (row_ptr, row_f, p_fe).

    The partition's entries from every foreign partition, concatenated in foreign partition
    order, are in f order; a stable sort by e then gives each row its entries f ascending.
    Runs after every :func:`write_foreign_keys` (f_key complete).
    """
    out_dir = Path(out_dir)
    e_key, f_key, p_fe = [], [], []
    for path in f_paths:
        with open_bundle(path) as z:
            e_key.append(z[f"r{p}_e_key"])
            f_key.append(z[f"r{p}_f_key"])
            p_fe.append(z[f"r{p}_p_fe"])
    e_key = np.concatenate(e_key)
    keys = unique(e_key)  # as count_english's
    if len(keys) != e_hi - e_lo:
        raise RuntimeError(f"English partition {p}: {len(keys)} phrases, {e_hi - e_lo} counted before")
    _write_at(out_dir / "e_key.npy", e_lo, keys)
    f_keys = np.load(out_dir / "f_key.npy", mmap_mode="r")
    e = np.searchsorted(keys, e_key)  # the row within the partition: e - e_lo
    f = np.searchsorted(f_keys, np.concatenate(f_key)).astype(np.int32)
    order = np.argsort(e, kind="stable")
    counts = np.bincount(e, minlength=e_hi - e_lo) if len(e) else np.zeros(e_hi - e_lo, np.int64)
    _write_at(out_dir / "row_ptr.npy", e_lo + 1, row_off + np.cumsum(counts).astype(np.int64))
    _write_at(out_dir / "row_f.npy", row_off, f[order])
    _write_at(out_dir / "p_fe.npy", row_off, np.concatenate(p_fe)[order])
    return {"n_entries": int(len(e))}


def _create_npy(path: Path, dtype, shape) -> None:
    """An .npy file of its final shape, all zeros (sparse: the tasks write the bytes).

    The header is the one ``np.save`` writes for such an array, so the files are the same
    bytes as saving the finished arrays.
    """
    from pivot.pipeline.bundle import write_npy_header

    dtype = np.dtype(dtype)
    with open(path, "wb") as fh:
        write_npy_header(fh, dtype, shape)
        fh.truncate(fh.tell() + dtype.itemsize * int(np.prod(shape, dtype=np.int64)))


def _write_at(path: Path, start: int, values: np.ndarray) -> None:
    """Write ``values`` as rows start, start + 1, ... of the .npy array at ``path``.

    A pwrite of the exact byte range, not a shared memory map: tasks on other machines that
    write neighbouring ranges of one file on a network file system never rewrite each
    other's bytes.
    """
    values = np.ascontiguousarray(values)
    if not values.size:
        return
    with open(path, "r+b") as fh:
        np.lib.format.read_magic(fh)
        shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
        if dtype != values.dtype or tuple(shape[1:]) != values.shape[1:] or start + len(values) > shape[0]:
            raise ValueError(f"{path}: rows {start}..{start + len(values)} of {values.dtype}{values.shape[1:]} "
                             f"do not fit {dtype}{shape}")
        row_bytes = values.itemsize * int(np.prod(values.shape[1:], dtype=np.int64))
        data, offset = memoryview(values).cast("B"), fh.tell() + start * row_bytes
        while len(data):  # one write call moves at most ~2 GiB on Linux
            n = os.pwrite(fh.fileno(), data, offset)
            data, offset = data[n:], offset + n


def phrase_rows(e_paths: list, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(token rows, bitext counts) of the English phrases with these keys (sorted, all present)."""
    return _rows_by_key(e_paths, keys, "e_key", "e_rows", "e_count")


def foreign_rows(f_paths: list, keys: np.ndarray) -> np.ndarray:
    """Token rows of the foreign phrases with these keys (sorted, all kept somewhere)."""
    return _rows_by_key(f_paths, keys, "f_dict_key", "f_rows")[0]


def _rows_by_key(paths: list, keys: np.ndarray, key_name: str, rows_name: str, count_name: str | None = None):
    """(rows, counts): member ``rows_name`` (and ``count_name``, else zeros) of each sorted key,
    from bundles whose member ``key_name`` is sorted and which cover disjoint key ranges in
    order (the partitions). A key inside a bundle's range but missing from it is a KeyError."""
    rows, counts = None, np.zeros(len(keys), dtype=np.int64)
    # Memory maps: a caller asking for a few keys (the database write, a block of phrases at
    # a time) reads the pages that hold them, not every partition's members.
    for path in paths:
        with open_bundle(path) as z:
            k = z.memmap(key_name)
            if not len(k):
                continue
            lo, hi = np.searchsorted(keys, k[0], side="left"), np.searchsorted(keys, k[-1], side="right")
            want = keys[lo:hi]
            pos = np.searchsorted(k, want)
            member = z.memmap(rows_name)
            if rows is None:
                rows = np.full((len(keys), member.shape[1]), -1, dtype=np.int32)
            found = (pos < len(k)) & (k[np.minimum(pos, len(k) - 1)] == want)
            if not found.all():
                raise KeyError(f"{path}: a phrase key missing from the merged counts")
            rows[lo:hi] = member[pos]
            if count_name is not None:
                counts[lo:hi] = z.memmap(count_name)[pos]
    if rows is None:
        rows = np.zeros((len(keys), 1), dtype=np.int32)
    return rows, counts


#: The [pivot] settings that prune translation entries (rounds 2-3); the rest act after the pivot.
ENTRY_PRUNING = ("min_p_f_given_e", "min_p_e_given_f", "max_e_per_f", "min_phrase_count")


def stage_params(recipe) -> dict:
    return {k: recipe["pivot"][k] for k in ENTRY_PRUNING}


def _merge_by_f_task(e_paths, x_paths, q, out_path, prune):
    return merge_by_f(e_paths, x_paths, q, out_path, **prune)


def run_stage(context) -> None:
    """Rounds 2-4: merged counts, p(f|e) and p(e|f) over the full table, pruning, the pivot structure."""
    import json

    x_dir, tmp = context.dir("extract"), context.tmp
    prune = dict(context.params)
    n_parts = json.loads((x_dir / "extract.json").read_text())["n_parts"]
    x_paths = sorted(x_dir.glob("x-*.arrays"))
    e_paths = [tmp / f"e-{p:04d}.arrays" for p in range(n_parts)]
    context.engine.map(merge_by_e, [(x_paths, p, n_parts, e_paths[p], prune["min_phrase_count"])
                                    for p in range(n_parts)], name="merge-e")
    f_paths = [tmp / f"f-{q:04d}.arrays" for q in range(n_parts)]
    stats = context.engine.map(_merge_by_f_task, [(e_paths, x_paths, q, f_paths[q], prune)
                                                  for q in range(n_parts)], name="merge-f")
    shape = assemble(f_paths, tmp / "structure", context.engine)
    total = {k: sum(s[k] for s in stats) for k in stats[0] if k != "n_kept_by_model"}
    (tmp / "translation.json").write_text(json.dumps({
        **prune, "decided_on": "each model's own counts",
        "n_phrase_pairs": total["n_pairs"], "n_after_floors": total["n_after_floors"],
        "n_after_cap": total["n_kept"], "sum_deg_f_squared": total["sum_deg_f_squared"],
        "n_kept_by_model": np.sum([s["n_kept_by_model"] for s in stats], axis=0).tolist(),
        "n_parts": n_parts, **shape}, indent=1))


def part_paths(translation_dir, prefix: str) -> list[Path]:
    """The stage's merged rows by English key range (``e``) or foreign key range (``f``)."""
    return sorted(Path(translation_dir).glob(f"{prefix}-*.arrays"))


def phrase_keys(translation_dir) -> np.ndarray:
    """Key of each English phrase id of the paraphrase table (ids are ranks of keys)."""
    return np.load(Path(translation_dir) / "structure" / "e_key.npy")


def n_phrases(translation_dir) -> int:
    """The number of English phrase ids of the paraphrase table (its keys' file's header)."""
    return int(np.load(Path(translation_dir) / "structure" / "e_key.npy", mmap_mode="r").shape[0])


def english_rows(translation_dir, ids) -> tuple[np.ndarray, np.ndarray]:
    """(token rows, bitext counts) of the English phrase ids ``ids`` (ascending) alone: their
    keys read through a map of the keys' file that goes with the call (ids are ranks of keys),
    their rows through maps of the stage's parts (phrase_rows). A caller that reads the rows
    it needs a block of ids at a time never holds every phrase's (english_phrases: 36 bytes
    a phrase id, 126 MB on bio-multi)."""
    keys = np.load(Path(translation_dir) / "structure" / "e_key.npy", mmap_mode="r")
    want = np.array(keys[np.asarray(ids, np.int64)])
    del keys
    return phrase_rows(part_paths(translation_dir, "e"), want)


def english_phrases(translation_dir) -> tuple[np.ndarray, np.ndarray]:
    """(token rows, bitext counts) of every English phrase id of the stage's table."""
    return phrase_rows(part_paths(translation_dir, "e"), phrase_keys(translation_dir))


STAGE = Stage("translation", 4, ("extract",), tuple(f"pivot.{k}" for k in ENTRY_PRUNING), stage_params,
              ("e-*.arrays", "f-*.arrays", "structure/*.npy", "translation.json"), run_stage,
              "one per partition, four times (Dask)", "merge by e: p(f|e); merge by f: p(e|f); pruning; the pivot structure")
