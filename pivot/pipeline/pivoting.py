"""Bilingual pivoting (the method behind PPDB): p(e2|e1) = sum_f p(e2|f) p(f|e1), per model.

From a :class:`~pivot.pipeline.extract.PhraseTable` with one weighted count column per model k,

    p_k(f|e) = c_k(e,f) / sum_f' c_k(e,f')      p_k(e|f) = c_k(e,f) / sum_e' c_k(e',f)

normalised over the *full* table (0/0 gives 0), and

    P_k(e1,e2) = sum over kept f of p_k(e2|f) p_k(f|e1),      e2 != e1.

In matrix form P_k = R_k K_k^T with R_k the row-normalised and K_k the column-normalised
count matrix; the cost is sum_f deg(f)^2, so frequent foreign phrases (function words,
punctuation) dominate. As in PPDB/Thrax and Moses' rephraser the entries are pruned first.
Each model k is pruned on its OWN counts and probabilities (General's counts never decide
what a domain model keeps):

(a) model k keeps (e,f) only if c_k(e,f) > 0, p_k(f|e) >= min_p_f_given_e,
    p_k(e|f) >= min_p_e_given_f and n_k(e) >= min_phrase_count (n_k(e): the extractions of e
    that model k counts at all, i.e. in sentence pairs of weight > 0);
(b) then model k keeps, for each f, at most max_e_per_f of its survivors: largest c_k(e,f)
    (equivalently p_k(e|f)) first, ties to the smaller e id (0 = no cap);
    both rules are pivot.pipeline.pruning.keep_entries, the build's own;
(c) after the product, model k keeps P_k(e1,e2) >= min_p_e2_given_e1 (the recall setting:
    every pair above a probability floor; a value below it is stored as 0 in column k), and,
    when top_n > 0, only the pairs ranking < top_n among row e1's nonzero P_k (ties to the
    smaller e2 id). A pair is stored when some model keeps it. The build stores no top-N
    (top_n = 0): how many paraphrases a lookup shows is a lookup setting.

The kernel still computes all K models in a single pass over one sparse structure: the
union of the models' kept entries, with p_k(f|e) and p_k(e|f) set to 0 where model k did
not keep the entry, so every P_k is exactly the product over model k's own pruned table.

Pruning drops probability mass, it does not redistribute it: kept entries keep their
unrenormalised p_k values, so a row of P_k sums to at most 1 and the values stay comparable
with an unpruned run (a pair's P_k only loses the terms of the pivots that were cut).

The product runs in :func:`pivot._counts.pivot_product`: threads over e1 rows, each sum in
a fixed order (f ascending, then e2 ascending), so the result is the same to the bit for
any ``n_threads`` (and equals scipy's ``R_k @ K_k.T`` entry for entry; see
``bench/bench_pivot.py``). ``Paraphrases.meta`` records the pruning parameters and how many
entries each rule removed, for the database's build record.

>>> import numpy as np
>>> from pivot.pipeline.extract import PhraseTable
from pivot.pipeline.pruning import keep_entries
>>> t = PhraseTable(e_phrases=np.array([[0], [1]], np.int32), f_phrases=np.array([[0]], np.int32),
...                 e_id=np.array([0, 1], np.int32), f_id=np.array([0, 0], np.int32),
...                 counts=np.array([[3.0], [1.0]]), support=np.array([3, 1]),
...                 e_count=np.array([3, 1]))
>>> para = pivot_paraphrases(t, max_e_per_f=0, min_p_e_given_f=0, min_p_e2_given_e1=0)
>>> para.e1.tolist(), para.e2.tolist(), para.p[:, 0].tolist()   # p(e2|f) p(f|e1)
([0, 1], [1, 0], [0.25, 0.75])
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pivot._native import _counts
from pivot.atomic import save_npz
from pivot.locking import resolve_threads
from pivot.pipeline.bundle import open_bundle, read_npy_header, read_rows, save_bundle
from pivot.pipeline.extract import PhraseTable
from pivot.pipeline.pruning import keep_entries
from pivot.pipeline.stage import Stage

# Defaults follow PPDB/Thrax practice: the cost of the product is sum_f deg(f)^2, so the few
# foreign phrases aligned to thousands of English phrases ("de", ",", "la") would dominate
# time and memory while contributing near-zero p(e2|f) p(f|e1) terms.
#: Floor on ps(f|e): translations seen in under 0.1% of e's extractions are alignment noise.
DEFAULT_MIN_P_F_GIVEN_E = 0.001
#: Floor on ps(e|f): an English phrase under 0.1% of f's mass adds at most 0.001 to any P(e2|e1).
DEFAULT_MIN_P_E_GIVEN_F = 0.001
#: Cap on English phrases per pivot f: bounds deg(f)^2 at 10^4 per pivot whatever the corpus size.
DEFAULT_MAX_E_PER_F = 100
#: Phrases seen (under a model's nonzero weights) fewer times get no paraphrases under it.
DEFAULT_MIN_PHRASE_COUNT = 1
#: Floor on P_k(e2|e1) per model: the storage rule (every pair above it is kept).
DEFAULT_MIN_P_E2_GIVEN_E1 = 0.0
#: Paraphrases kept per e1 and model: 0 = no cut (a lookup chooses how many it shows).
DEFAULT_TOP_N = 0


@dataclass
class PivotStructure:
    """The pruned entries of a phrase table: the union over models of what each model keeps.

    The kept pairs in two layouts built once: by English phrase (CSR; ``kept`` holds their
    pair indices, f ascending within a row) and by foreign phrase (CSC; ``csc_pair``, e
    ascending within a column). ``keep_csr``/``keep_csc`` say which models keep each entry.
    """

    n_e: int
    n_f: int
    kept: np.ndarray  # (n_kept,) int64 pair indices, ascending = (e, f) order
    row_ptr: np.ndarray  # (n_e + 1,) int64
    row_f: np.ndarray  # (n_kept,) int32
    col_ptr: np.ndarray  # (n_f + 1,) int64
    col_e: np.ndarray  # (n_kept,) int32
    csc_pair: np.ndarray  # (n_kept,) int64 pair indices in CSC order
    # The full (unpruned) table by row and by column, for the normalising sums.
    full_row_ptr: np.ndarray  # (n_e + 1,) int64: pairs of e are full_row_ptr[e]:full_row_ptr[e+1]
    full_col_ptr: np.ndarray  # (n_f + 1,) int64
    full_csc_pair: np.ndarray  # (n_pairs,) int64 all pair indices stably sorted by f
    keep_csr: np.ndarray = None  # (n_kept, K) bool: model k keeps entry j (CSR order)
    keep_csc: np.ndarray = None  # (n_kept, K) bool: the same in CSC order
    stats: dict = field(default_factory=dict)


@dataclass
class Paraphrases:
    """Paraphrase pairs (e1, e2) with P_k(e2|e1) for every model, sorted by (e1, e2)."""

    e1: np.ndarray  # (n_out,) int32
    e2: np.ndarray  # (n_out,) int32
    p: np.ndarray  # (n_out, K) float64: P_k(e2|e1), 0.0 where model k gives 0
    n_pivots: np.ndarray  # (n_out,) int32: kept foreign phrases shared by e1 and e2
    pivots: np.ndarray  # (n_out, 3) int32: top-3 f by p_0(e2|f) p_0(f|e1), -1 padded
    meta: dict = field(default_factory=dict)  # pruning parameters and what they removed

    def __len__(self) -> int:
        return int(self.e1.shape[0])

    def save(self, path) -> None:
        """Write one uncompressed ``.npz``, atomically; ``meta`` goes in as a JSON string."""
        arrays = {name: getattr(self, name) for name in _PARA_FIELDS}
        save_npz(path, meta=np.array(json.dumps(self.meta, sort_keys=True)), **arrays)

    @staticmethod
    def write_index(folder, parts, n_pairs, meta: dict) -> None:
        """``paraphrases.json``: the files holding consecutive e1 ranges, in order, and the meta.

        The pivot stage leaves one file per range of English rows; this index makes them one
        table, read in turn by :meth:`iter_parts` (an empty range may have no pairs).
        """
        index = {"parts": [Path(p).name for p in parts], "n_pairs": [int(n) for n in n_pairs],
                 "meta": {**meta, "n_pairs_out": int(sum(n_pairs))}}
        (Path(folder) / "paraphrases.json").write_text(json.dumps(index, indent=1, sort_keys=True))

    @staticmethod
    def read_index(folder) -> dict:
        """``paraphrases.json`` of a pivot stage: its parts, their pair counts and the meta."""
        index = json.loads((Path(folder) / "paraphrases.json").read_text())
        if not index["parts"]:
            raise ValueError(f"{folder}: the index lists no row ranges")
        return index

    @classmethod
    def iter_parts(cls, folder):
        """The row ranges a pivot stage wrote (see :meth:`write_index`), one at a time, in e1
        order: each is sorted by (e1, e2), so reading them in turn reads the table in key order
        while holding one range."""
        folder = Path(folder)
        index = cls.read_index(folder)
        for name, n in zip(index["parts"], index["n_pairs"]):
            with open_bundle(folder / name) as z:
                fields = {f: z[f] for f in _PARA_FIELDS}
            if fields["e1"].shape[0] != n:
                raise ValueError(f"{folder / name}: {fields['e1'].shape[0]} pairs, the index says {n}")
            yield cls(**fields, meta=index["meta"])

    @classmethod
    def load(cls, path) -> "Paraphrases":
        with np.load(Path(path), allow_pickle=False) as z:
            missing = [name for name in _PARA_FIELDS if name not in z.files]
            if missing:
                raise ValueError(f"{path}: not a paraphrase file (missing {', '.join(missing)})")
            meta = json.loads(str(z["meta"])) if "meta" in z.files else {}
            return cls(**{name: z[name] for name in _PARA_FIELDS}, meta=meta)


_PARA_FIELDS = ("e1", "e2", "p", "n_pivots", "pivots")


def _check_table(table: PhraseTable) -> None:
    n_e, n_f, e_id, f_id = table.n_e, table.n_f, table.e_id, table.f_id
    n = e_id.shape[0]
    if f_id.shape != (n,) or table.support.shape != (n,) or table.counts.ndim != 2 \
            or table.counts.shape[0] != n or table.counts.shape[1] < 1:
        raise ValueError("phrase table: e_id, f_id, support and counts rows must agree")
    if n == 0:
        return
    if e_id.min() < 0 or e_id.max() >= n_e or f_id.min() < 0 or f_id.max() >= n_f:
        raise ValueError("phrase table: phrase ids out of range")
    key = e_id.astype(np.int64) * n_f + f_id
    if not (np.diff(key) > 0).all():
        raise ValueError("phrase table: pairs must be unique and sorted by (e_id, f_id)")
    if (table.support < 1).any():
        raise ValueError("phrase table: support counts must be >= 1")
    # Non-negative counts make every product p_k(e2|f) p_k(f|e1) >= +0.0, which the kernel
    # relies on to start each sum with its first term (0.0 + x == x, bit for bit).
    if not (np.isfinite(table.counts).all() and (table.counts >= 0).all()):
        raise ValueError("phrase table: weighted counts must be finite and >= 0")


def model_sums(table: PhraseTable) -> tuple[np.ndarray, np.ndarray]:
    """(e_total, f_total): sum_f' c_k(e,f') per (e, k) and sum_e' c_k(e',f) per (f, k).

    bincount adds in pair order, the order normalise_kept's sums use, so a floor compared
    here sees the same bits as the stored probability.
    """
    n_e, n_f, K = table.n_e, table.n_f, table.counts.shape[1]
    e_total, f_total = np.empty((n_e, K)), np.empty((n_f, K))
    for k in range(K):
        e_total[:, k] = np.bincount(table.e_id, weights=table.counts[:, k], minlength=n_e)
        f_total[:, k] = np.bincount(table.f_id, weights=table.counts[:, k], minlength=n_f)
    return e_total, f_total


def prune(table: PhraseTable, *, min_p_f_given_e: float = DEFAULT_MIN_P_F_GIVEN_E,
          min_p_e_given_f: float = DEFAULT_MIN_P_E_GIVEN_F,
          max_e_per_f: int = DEFAULT_MAX_E_PER_F,
          min_phrase_count: int = DEFAULT_MIN_PHRASE_COUNT) -> PivotStructure:
    """Rules (a) and (b) of the module docstring (pivot.pipeline.pruning.keep_entries), each
    model on its own counts; one union structure."""
    _check_table(table)
    if max_e_per_f < 0:
        raise ValueError(f"max_e_per_f must be >= 0, got {max_e_per_f}")
    n_e, n_f = table.n_e, table.n_f
    e_id = np.ascontiguousarray(table.e_id, dtype=np.int32)
    f_id = np.ascontiguousarray(table.f_id, dtype=np.int32)
    counts = np.ascontiguousarray(table.counts, dtype=np.float64)
    e_total, f_total = model_sums(table)
    with np.errstate(invalid="ignore", divide="ignore"):
        # c > 0 implies both totals > 0: no 0/0 survives rule (a)'s first test.
        p_fe, p_ef = counts / e_total[e_id], counts / f_total[f_id]
    model_keep, n_after_floor = keep_entries(
        counts, p_fe, p_ef, table.observations()[e_id] >= min_phrase_count, f_id, e_id,
        min_p_f_given_e=min_p_f_given_e, min_p_e_given_f=min_p_e_given_f, max_e_per_f=max_e_per_f)
    del p_fe, p_ef

    mask = model_keep.any(axis=1)
    kept = np.flatnonzero(mask).astype(np.int64)
    row_f = np.ascontiguousarray(f_id[kept])
    row_ptr = np.zeros(n_e + 1, dtype=np.int64)
    np.cumsum(np.bincount(e_id[kept], minlength=n_e), out=row_ptr[1:])
    # A stable bucket sort by f keeps e ascending inside each column.
    col_ptr, order = _counts.bucket_by(row_f, n_f)
    csc_pair = kept[order]
    col_e = np.ascontiguousarray(e_id[csc_pair])
    col_deg = np.diff(col_ptr)
    full_row_ptr = np.zeros(n_e + 1, dtype=np.int64)
    np.cumsum(np.bincount(e_id, minlength=n_e), out=full_row_ptr[1:])
    full_col_ptr, full_csc_pair = _counts.bucket_by(f_id, n_f)
    stats = {
        "min_p_f_given_e": float(min_p_f_given_e), "min_p_e_given_f": float(min_p_e_given_f),
        "max_e_per_f": int(max_e_per_f), "min_phrase_count": int(min_phrase_count),
        "decided_on": "each model's own counts",
        "n_phrase_pairs": int(table.n_pairs), "n_after_floors": int(n_after_floor.sum()),
        "n_after_cap": int(len(kept)), "sum_deg_f_squared": int((col_deg ** 2).sum()),
        "n_kept_by_model": model_keep.sum(axis=0).tolist(),
    }
    return PivotStructure(n_e=n_e, n_f=n_f, kept=kept, row_ptr=row_ptr,
                          row_f=row_f, col_ptr=col_ptr, col_e=col_e,
                          csc_pair=csc_pair, full_row_ptr=full_row_ptr, full_col_ptr=full_col_ptr,
                          full_csc_pair=full_csc_pair, keep_csr=model_keep[kept], keep_csc=model_keep[csc_pair],
                          stats=stats)


def translation_probabilities(table: PhraseTable, structure: PivotStructure, n_threads: int = 0):
    """(p_fe, p_ef): p_k(f|e) of the kept entries in CSR order, p_k(e|f) in CSC order.

    Both are (n_kept, K), normalised over the full (unpruned) table, and 0 in column k for
    an entry model k does not keep.
    """
    s = structure
    counts = np.ascontiguousarray(table.counts, dtype=np.float64)
    p_fe, p_ef = _counts.normalise_kept(counts, s.full_row_ptr, s.full_col_ptr, s.full_csc_pair,
                                        s.row_ptr, s.kept, s.col_ptr, s.csc_pair, resolve_threads(n_threads))
    if s.keep_csr is not None:
        p_fe = np.where(s.keep_csr, p_fe, 0.0)
        p_ef = np.where(s.keep_csc, p_ef, 0.0)
    return p_fe, p_ef


def pivot_structure(table: PhraseTable, structure: PivotStructure, *, top_n: int = DEFAULT_TOP_N,
                    min_p_e2_given_e1: float = DEFAULT_MIN_P_E2_GIVEN_E1, n_threads: int = 0) -> Paraphrases:
    """The pivot product on an already pruned structure (rule (c) applied here)."""
    if top_n < 0:
        raise ValueError(f"top_n must be >= 0, got {top_n}")
    if not min_p_e2_given_e1 >= 0:
        raise ValueError(f"min_p_e2_given_e1 must be >= 0, got {min_p_e2_given_e1}")
    n_threads = resolve_threads(n_threads)
    p_fe, p_ef = translation_probabilities(table, structure, n_threads)
    e1, e2, p, n_pivots, pivots = _counts.pivot_product(
        structure.row_ptr, structure.row_f, p_fe, structure.col_ptr, structure.col_e, p_ef,
        int(top_n), n_threads, 0, 0, -1, float(min_p_e2_given_e1))
    meta = {**structure.stats, "top_n": int(top_n), "min_p_e2_given_e1": float(min_p_e2_given_e1),
            "n_pairs_out": int(e1.shape[0]), "n_models": int(table.counts.shape[1])}
    return Paraphrases(e1=e1, e2=e2, p=p, n_pivots=n_pivots, pivots=pivots, meta=meta)


def pivot_paraphrases(table: PhraseTable, *, min_p_f_given_e: float = DEFAULT_MIN_P_F_GIVEN_E,
                      min_p_e_given_f: float = DEFAULT_MIN_P_E_GIVEN_F,
                      max_e_per_f: int = DEFAULT_MAX_E_PER_F, min_phrase_count: int = DEFAULT_MIN_PHRASE_COUNT,
                      min_p_e2_given_e1: float = DEFAULT_MIN_P_E2_GIVEN_E1, top_n: int = DEFAULT_TOP_N,
                      n_threads: int = 0) -> Paraphrases:
    """Paraphrase probabilities P_k(e2|e1) for every model column of ``table``.

    Prunes each model on its own counts (rules (a), (b)), pivots all K models in one threaded
    pass and keeps, per model, the pairs above ``min_p_e2_given_e1`` (and the top ``top_n``
    per e1 when top_n > 0; rule (c)). ``n_threads=0`` uses every core; the result is the same
    to the bit for any thread count.
    """
    structure = prune(table, min_p_f_given_e=min_p_f_given_e, min_p_e_given_f=min_p_e_given_f,
                      max_e_per_f=max_e_per_f, min_phrase_count=min_phrase_count)
    return pivot_structure(table, structure, top_n=top_n, min_p_e2_given_e1=min_p_e2_given_e1,
                           n_threads=n_threads)


# ------------------------------------------------------------------------------ sharded pivot


def row_ranges(row_ptr: np.ndarray, col_ptr: np.ndarray, row_f: np.ndarray, n_tasks: int) -> list[tuple[int, int]]:
    """Split the English rows into about n_tasks contiguous ranges of equal pivot work.

    A row's work is sum over its f of deg(f). The split only decides which task computes a
    row; every row's result is the same whichever task computes it (but the ranges are the
    stage's files, so the stage's bytes follow them). The whole arrays at once: the stage
    cuts by blocks of rows in tasks (:func:`row_ranges_by_blocks`, the same ranges).
    """
    n_e = len(row_ptr) - 1
    if n_e == 0:
        return []
    deg = np.diff(col_ptr)
    work = np.add.reduceat(deg[row_f].astype(np.float64), row_ptr[:-1]) if len(row_f) else np.zeros(n_e)
    work[np.diff(row_ptr) == 0] = 0.0
    cum = np.cumsum(work + 1.0)
    cuts = np.searchsorted(cum, cum[-1] * np.arange(1, n_tasks) / n_tasks)
    edges = np.unique(np.concatenate([[0], cuts, [n_e]]))
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:]) if b > a]


#: English rows of one task of the cut (row_ranges_by_blocks): 1 MiB of row_ptr and, at
#: bio-multi's 6.2 entries a row, 0.8M entries (their f, 4 B, and degrees, 8 B).
CUT_BLOCK_ROWS = 1 << 17
#: Rows between the running totals a block's task hands back (128 a block): the cut's second
#: pass reads, for each cut, only the window of 1024 rows it falls in.
CUT_WINDOW_ROWS = 1 << 10


def row_work(structure_dir, lo: int, hi: int) -> np.ndarray:
    """w(e) + 1 for the English rows lo <= e < hi of an assembled structure, as int64: w(e) =
    sum over the row's kept f of deg(f), the kernel's candidate e2 for row e, and 1 for the row.

    Reads the rows' row_ptr and row_f and, for each distinct f they reach, col_ptr[f] and
    col_ptr[f + 1] (a window of the file at a time): memory of the block's size.
    """
    folder = Path(structure_dir)
    rp = npy_slice(folder / "row_ptr.npy", lo, hi + 1)
    rf = npy_slice(folder / "row_f.npy", int(rp[0]), int(rp[-1]))
    f, which = np.unique(rf, return_inverse=True)
    del rf
    # col_ptr[f] and col_ptr[f + 1] in one ascending pass (as gather_rows)
    bounds = npy_rows(folder / "col_ptr.npy", np.stack([f, f + 1], axis=1).ravel().astype(np.int64))
    deg = (bounds[1::2] - bounds[0::2])[which.ravel()]
    # each row's sum as the difference of the running sum over its entries at its two ends
    # (an empty row: 0)
    run = np.zeros(len(deg) + 1, dtype=np.int64)
    np.cumsum(deg, out=run[1:])
    at = rp - rp[0]
    return run[at[1:]] - run[at[:-1]] + 1


def window_ends(lo: int, hi: int, window: int) -> np.ndarray:
    """The ends of the windows of ``window`` rows that cut lo..hi: lo + window, lo + 2 window,
    ..., hi (the last one shorter when window does not divide hi - lo)."""
    return np.append(np.arange(lo + window, hi, window, dtype=np.int64), np.int64(hi))


def cut_block_totals(structure_dir, lo: int, hi: int, window: int = CUT_WINDOW_ROWS) -> np.ndarray:
    """The running sum of w(e) + 1 from row lo (row_work) at the end of each window of the block
    (window_ends): its last value is the block's total."""
    cum = np.cumsum(row_work(structure_dir, lo, hi))
    return cum[window_ends(lo, hi, window) - lo - 1]


def cut_in_block(structure_dir, lo: int, hi: int, before: int, targets: list) -> list[int]:
    """The cut rows of the targets that fall in rows lo..hi: for each target t, the first row e
    with C(e) >= t, C(e) = before + sum over lo <= e' <= e of (w(e') + 1) the running total over
    all rows (``before``: C(lo - 1))."""
    cum = before + np.cumsum(row_work(structure_dir, lo, hi))
    # float64 as row_ranges' running sum: the integers are exact below 2^53
    return (lo + np.searchsorted(cum.astype(np.float64), np.asarray(targets, dtype=np.float64))).tolist()


def cut_in_windows(structure_dir, windows: list) -> list[int]:
    """cut_in_block for each (lo, hi, before, targets) of ``windows``, their cuts in turn."""
    return [e for lo, hi, before, targets in windows for e in cut_in_block(structure_dir, lo, hi, before, targets)]


def row_ranges_by_blocks(structure_dir, n_tasks: int, engine, block_rows: int = CUT_BLOCK_ROWS,
                         window: int = CUT_WINDOW_ROWS) -> list[tuple[int, int]]:
    """:func:`row_ranges` of an assembled structure with the work in tasks, by blocks of rows.

    row_ranges cuts where the running total C(e) = sum over e' <= e of (w(e') + 1) first reaches
    t_i = C(n_e - 1) i / n_tasks (i = 1 .. n_tasks - 1). Here one task per block of
    ``block_rows`` rows returns its running sum at the end of each window of ``window`` rows
    (cut_block_totals); this process adds each block's total before it, in block order, so that
    it holds C at the end of every window, finds the window where each t_i is first reached
    (C before it < t_i <= C at its end), and a task per block holding such windows reads only
    those rows to find the row (cut_in_windows). Every w(e) is an integer, so each sum is exact
    whatever its grouping (below 2^53 = 9.0e15 in float64: the total is sum_f deg(f)^2 + n_e),
    and t_i is computed from the same total as row_ranges: the same ranges. This process holds
    two numbers per window (16 B per 1024 rows), never a number per row or entry.
    """
    folder = Path(structure_dir)
    with open(folder / "row_ptr.npy", "rb") as fh:
        n_e = _npy_header(fh)[1][0] - 1
    if n_e == 0:
        return []
    blocks = [(lo, min(lo + block_rows, n_e)) for lo in range(0, n_e, block_rows)]
    marks = engine.map(cut_block_totals, [(folder, lo, hi, window) for lo, hi in blocks], name="pivot-cut")
    # C at the end of every window, over all rows: a block's marks plus the blocks' totals before it
    before = np.cumsum([0] + [int(m[-1]) for m in marks[:-1]])
    ends = np.concatenate([window_ends(lo, hi, window) for lo, hi in blocks])
    block_of = np.concatenate([np.full(len(m), b) for b, m in enumerate(marks)])
    after = np.concatenate([np.asarray(m, dtype=np.int64) + before[b] for b, m in enumerate(marks)])
    del marks
    targets = np.float64(after[-1]) * np.arange(1, n_tasks) / n_tasks
    # window k holds the cut of t when C(end of k - 1) < t <= C(end of k); a t past the total
    # (none, in exact arithmetic) cuts at n_e, as searchsorted over every row would
    win = np.searchsorted(after.astype(np.float64), targets)
    jobs = {}
    for k in np.unique(win).tolist():
        if k < len(ends):
            start = int(ends[k - 1]) if k else 0  # the windows tile the rows
            jobs.setdefault(int(block_of[k]), []).append(
                (start, int(ends[k]), int(after[k - 1]) if k else 0, targets[win == k].tolist()))
    cuts = engine.map(cut_in_windows, [(folder, w) for _, w in sorted(jobs.items())], name="pivot-cut-rows") \
        if jobs else []
    edges = np.unique(np.concatenate([[0], *cuts, [n_e]]).astype(np.int64))
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:]) if b > a]


def load_structure(folder, mmap: bool = True) -> dict:
    """The arrays written by pivot.pipeline.translation.assemble (memory-mapped by default)."""
    names = ("row_ptr", "row_f", "p_fe", "col_ptr", "col_e", "p_ef", "e_key", "f_key")
    return {n: np.load(Path(folder) / f"{n}.npy", mmap_mode="r" if mmap else None) for n in names}


#: Rows of a structure file a task maps at once while it gathers its columns (64 MiB of p_ef's
#: rows at 8 models): the pages of one window are mapped, read and unmapped before the next.
GATHER_WINDOW = 1 << 20


def _npy_header(fh) -> tuple[int, tuple, np.dtype]:
    """(data offset, shape, dtype) of the C-order .npy open in ``fh``."""
    shape, fortran, dtype = read_npy_header(fh)
    if fortran:
        raise ValueError(f"{fh.name}: a Fortran-order array, the structure's are C order")
    return fh.tell(), shape, dtype


def npy_slice(path, a: int, b: int) -> np.ndarray:
    """Rows a..b of the .npy at ``path``, read into a new array (nothing else of the file is mapped)."""
    with open(path, "rb") as fh:
        offset, shape, dtype = _npy_header(fh)
        width = int(np.prod(shape[1:], dtype=np.int64))
        fh.seek(offset + a * width * dtype.itemsize)
        out = np.fromfile(fh, dtype=dtype, count=(b - a) * width)
    if len(out) != (b - a) * width:
        raise ValueError(f"{path}: rows {a}..{b} outside its {shape[0]} rows")
    return out.reshape((b - a,) + tuple(shape[1:]))


def npy_rows(path, idx: np.ndarray, window: int | None = None) -> np.ndarray:
    """Rows ``idx`` (ascending) of the .npy at ``path`` into a new array, read through memory
    maps of at most ``window`` rows, each unmapped before the next (bundle.read_rows): however
    widely the rows are spread (a task's columns reach most pages of p_ef), the process maps one
    window of the file at a time, not every page it reads."""
    with open(path, "rb") as fh:
        offset, shape, dtype = _npy_header(fh)
        return read_rows(fh, offset, shape, dtype, idx, GATHER_WINDOW if window is None else window)


def gather_rows(structure_dir, lo: int, hi: int) -> dict:
    """The English rows lo <= e < hi of an assembled structure with only the columns they reach,
    renumbered, as arrays of the task's size (pivot_rows' input: every name below but ``f`` is
    an argument of _counts.pivot_product):

    - ``f``: the foreign ids the rows reach, ascending; column c of the gathered CSC is f[c];
    - row_ptr/row_f/p_fe: the CSR of the task's rows lo..hi - 1 (row e's entries from
      row_ptr[e - lo]; hi - lo + 1 offsets from 0), row_f in column numbers;
    - col_ptr/col_e/p_ef: the CSC of the ``f`` columns, their entries in the structure's order.

    The renumbering of f is increasing, so each row's f keep their order: the kernel adds the
    same terms in the same order as over the whole structure (the same bits), and its output,
    pivots mapped back through ``f``, is the whole structure's. English ids stay the
    structure's (``n_e`` of them, col_e's bound): the kernel reads the rows from ``lo`` on
    (its row_base), so no array of the task is n_e long.
    """
    folder = Path(structure_dir)
    rp = npy_slice(folder / "row_ptr.npy", lo, hi + 1)
    a0, a1 = int(rp[0]), int(rp[-1])
    rf = npy_slice(folder / "row_f.npy", a0, a1)
    p_fe = npy_slice(folder / "p_fe.npy", a0, a1)
    f, row_f = np.unique(rf, return_inverse=True)
    del rf
    # col_ptr[f] and col_ptr[f + 1] in one pass: f ascending and distinct, so f0, f0 + 1, f1,
    # f1 + 1, ... never decreases
    bounds = npy_rows(folder / "col_ptr.npy", np.stack([f, f + 1], axis=1).ravel().astype(np.int64))
    start, length = bounds[0::2], bounds[1::2] - bounds[0::2]
    del bounds
    col_ptr = np.zeros(len(f) + 1, dtype=np.int64)
    np.cumsum(length, out=col_ptr[1:])
    # the entries of the columns, in the structure's (CSC) order
    entries = np.repeat(start - col_ptr[:-1], length) + np.arange(col_ptr[-1], dtype=np.int64)
    del start, length
    col_e = npy_rows(folder / "col_e.npy", entries)
    p_ef = npy_rows(folder / "p_ef.npy", entries)
    del entries
    with open(folder / "row_ptr.npy", "rb") as fh:
        n_e = _npy_header(fh)[1][0] - 1
    return {"f": f.astype(np.int32), "row_ptr": rp - a0, "row_f": row_f.astype(np.int32), "p_fe": p_fe,
            "col_ptr": col_ptr, "col_e": col_e, "p_ef": p_ef, "n_e": n_e}


def pivot_rows(structure_dir, lo: int, hi: int, top_n: int, out_path, n_threads: int = 1,
               min_p_e2_given_e1: float = 0.0) -> dict:
    """Round 5: P_k(e2|e1) for the English rows lo <= e1 < hi of an assembled structure.

    The task reads its own rows and the columns they reach (:func:`gather_rows`: about a tenth
    of p_ef's entries at bio-multi's size, on three quarters of its pages; read a window at a
    time, so neither the file nor those pages stay mapped), and the kernel runs on those.
    Writes e1, e2, p, n_pivots, pivots for its rows; rule (c) (the floor ``min_p_e2_given_e1``,
    and ``top_n`` when > 0) is applied per model.
    """
    out_path = Path(out_path)
    if out_path.is_file():
        with open_bundle(out_path) as done:
            return {"reused": True, "n_pairs": int(done["e1"].shape[0])}
    g = gather_rows(structure_dir, lo, hi)
    e1, e2, p, n_pivots, pivots = _counts.pivot_product(
        g["row_ptr"], g["row_f"], g["p_fe"], g["col_ptr"], g["col_e"], g["p_ef"], int(top_n),
        resolve_threads(n_threads), 0, int(lo), int(hi), float(min_p_e2_given_e1), int(lo), int(g["n_e"]))
    f = g["f"]
    del g
    # back to the structure's foreign ids (-1 stays -1)
    pivots = np.where(pivots >= 0, f[np.maximum(pivots, 0)], np.int32(-1))
    save_bundle(out_path, e1=e1, e2=e2, p=p, n_pivots=n_pivots, pivots=pivots)
    return {"reused": False, "n_pairs": int(len(e1))}


#: The stage's row ranges: at least this many, and about this many kept translation entries
#: each (enough tasks for a few workers at the bio size, bounded work per task at any size).
MIN_TASKS = 8
ENTRIES_PER_TASK = 500_000


def stage_params(recipe) -> dict:
    return {"min_p_e2_given_e1": float(recipe["pivot"]["min_p_e2_given_e1"])}


def run_stage(context) -> None:
    """Round 5: P_k(e2|e1) = sum_f p_k(e2|f) p_k(f|e1) by ranges of English rows; each model keeps
    its pairs with P_k >= min_p_e2_given_e1 (no top-N: that is a lookup setting)."""
    floor, top_n = context.params["min_p_e2_given_e1"], 0
    translation_dir, tmp = context.dir("translation"), context.tmp
    structure = translation_dir / "structure"
    with open(structure / "row_f.npy", "rb") as fh:
        n_entries = _npy_header(fh)[1][0]
    # The ranges are the stage's files, so their number follows the data, never the number of
    # workers (the content key, and the signature, must not depend on it); the cut's work is
    # tasks by blocks of rows, this process adds up their totals.
    n_tasks = max(MIN_TASKS, -(-n_entries // ENTRIES_PER_TASK))
    ranges = row_ranges_by_blocks(structure, n_tasks, context.engine)
    parts = [tmp / f"rows-{i:04d}.arrays" for i in range(len(ranges))]
    # In process the kernel's own threads share the work; on a cluster, the workers do.
    threads = context.threads if context.engine.in_process else 1
    done = context.engine.map(pivot_rows, [(structure, lo, hi, top_n, path, threads, floor)
                                           for (lo, hi), path in zip(ranges, parts)], name="pivot")
    # The row ranges, in e1 order, are the stage's output as they are: the database write reads
    # them in turn, and no process first copies them into one file.
    meta = {**json.loads((translation_dir / "translation.json").read_text()), "top_n": top_n,
            "min_p_e2_given_e1": floor}
    Paraphrases.write_index(tmp, parts, [d["n_pairs"] for d in done], meta)


def part_paths(pivot_dir) -> list[Path]:
    """The stage's row ranges, in e1 order."""
    return [Path(pivot_dir) / name for name in Paraphrases.read_index(pivot_dir)["parts"]]


STAGE = Stage("pivot", 5, ("translation",), ("pivot.min_p_e2_given_e1",), stage_params,
              ("rows-*.arrays", "paraphrases.json"), run_stage, "one per range of English rows (Dask)",
              "p(e2|e1) = sum_f p(e2|f) p(f|e1), every pair above the floor, per model")
