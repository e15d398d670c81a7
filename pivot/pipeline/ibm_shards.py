"""The aligner (pivot.pipeline.ibm) trained and applied by shards of sentence pairs, as engine tasks.

The corpus is a list of shard files (bundles, pivot.pipeline.bundle, of one shard's shard-local
ragged arrays: int32 ``e_tokens``, ``f_tokens``, int64 ``e_offsets``, ``f_offsets``; ids from one
vocabulary per side for the whole corpus). A task is a function of paths and numbers
(pivot.pipeline.engine): it reads its shard and writes its result beside it under a temporary
name, then renames it, so it runs the same in this process, on a local cluster or on an
external one, and a task that finds its scratch output (named by what it was computed from)
returns at once. One direction (``reverse`` swaps the sides: source = foreign):

1. **Co-occurrence**, one task a shard: the shard's own table, the CSR of
   :func:`pivot.pipeline.ibm.cooccurrence` over its sentence pairs only (``cooc-<d>-<k>.arrays``).
   The model's table is their union, taken here: the rows are sorted sets, so it is the table
   of the whole corpus, whatever the shards.
2. **EM**. The t-table's probabilities go to the tasks as one file, ``t-<d>-<i>.npy`` after i
   M-steps, written atomically; in a folder keyed by the stage's inputs the name fixes the
   bytes, so a task's argument names the exact table it reads. Each E-step task gathers its shard's entries from it (memory-mapped: the workers
   of one machine share its pages), runs the E-step kernel over the shard in the shard's own
   table and writes its expected counts: fixed point, posterior x 2^32 rounded per link, int64
   (``counts-<d>-<i>-<k>.arrays``). The M-step is here: the partial counts are added into the
   model's table in shard order and each row is normalised, t(f | e) = c(e, f) / sum_f' c(e, f').
   Integer addition is associative, so the counts -- and the model, and the links -- are the
   same bytes for any number of workers, any schedule and any shard size: those of
   :func:`pivot.pipeline.ibm.fit` on the whole corpus.
3. **Viterbi**, one task a shard, in the shard's own table with the final probabilities
   (every word pair of a shard's sentences is in its table, so the lookups find what they
   would find in the model's); the reverse direction's task also symmetrises
   (grow-diag-final-and) with the forward links and writes the shard's output.

A shard's table entry ``i`` is entry ``positions[i]`` of the model's table
(``positions-<d>-<k>.npy``, found once by the first task that needs it): the gather of the
probabilities and the scatter of the counts. The table indices of every (target word, source
word) lookup can be kept on disk between iterations (``index-<d>-<k>.bin``, in the shard's
table): the co-occurrence task finds them while it builds the shard's table (the searches
were most of the first E-step's time), every E-step and the Viterbi task read them back.

Memory: this process holds the model (the table, its probabilities and counts: 20 bytes an
entry, as :func:`pivot.pipeline.ibm.fit`) during an M-step only: between its batches a job holds
no table (row pointers, columns and probabilities wait in scratch files), so a build that runs
every language's alignment side by side holds one M-step's table at a time, not every
language's. A task holds one shard, its table and its entries' probabilities and counts, and
the indices in blocks of at most ``INDEX_CACHE_BLOCK_BYTES``.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np

from pivot._native import _align
from pivot.atomic import atomic_path
from pivot.pipeline.bundle import open_bundle, save_bundle
from pivot.pipeline import ibm
from pivot.pipeline.engine import Batch, Together, release_heap

# A shard holds at most this many E-step lookups ((n_s + 1) m_s a sentence pair; at least one
# pair): about 0.1 s of one core an E-step (it reads the stored indices), ~4x that to build the
# shard's table with them, and 16 MB of stored indices. Shards of equal work keep the workers busy
# to the end; each shard's task costs a fixed share of Dask's messages (~10 ms of scheduler and
# worker CPU on a local cluster) and its own table, whose entries overlap the other shards'
# (scattered and gathered at every M-step). The bio fr corpus (41M lookups) makes 13 shards
# (de 5); at 2M lookups it made 23 (de 8), and the front phase of the bio build at
# --workers 2 spent 1.7 CPU s more in the build's M-steps and 1.4 more in Dask's threads
# (one measured run each: 7.1 -> 5.4 and 5.4 -> 4.0 CPU s; the same E-step CPU, 31.6-31.9 s).
# The links are the same bytes for any shard size (the counts are integer sums).
SHARD_CELLS = 4_000_000

# The E-step's table indices stay on disk between iterations when all shards' indices fit in
# this many bytes and in half the free space of the scratch folder; same results either way.
INDEX_CACHE_DISK_BYTES = 16 * 2 ** 30
# A shard's E-step runs over blocks of sentences whose indices take at most this many bytes,
# so that the indices in memory stay within it whatever the shard size (a 50,000-pair shard of
# long biomedical sentences has ~110 MB of them).
INDEX_CACHE_BLOCK_BYTES = 32 * 2 ** 20

# A table entry's key: source row in the high 32 bits, target id in the low ones. Keys sort as
# the CSR's entries do (by row, then target id), so a sorted key array is the table.
_ROW_SHIFT = 32
_COL_MASK = (1 << _ROW_SHIFT) - 1


def _name(reverse: bool) -> str:
    return "rev" if reverse else "fwd"


def load_shard(path, reverse: bool):
    """(src tokens, src offsets, tgt tokens, tgt offsets) of a shard file; ``reverse``: foreign is the source."""
    with open_bundle(path) as z:
        e, eo, f, fo = z["e_tokens"], z["e_offsets"], z["f_tokens"], z["f_offsets"]
    return (f, fo, e, eo) if reverse else (e, eo, f, fo)


def table_keys(row_ptr, col) -> np.ndarray:
    """The sorted int64 keys (row << 32 | col) of a CSR table's entries."""
    rows = np.repeat(np.arange(len(row_ptr) - 1, dtype=np.int64), np.diff(row_ptr))
    return (rows << _ROW_SHIFT) | col.astype(np.int64)


class _Paths:
    """The scratch files of one direction."""

    def __init__(self, scratch, reverse):
        self.scratch, self.d = Path(scratch), _name(reverse)

    def cooc(self, k):
        return self.scratch / f"cooc-{self.d}-{k:05d}.arrays"

    def positions(self, k):
        return self.scratch / f"positions-{self.d}-{k:05d}.npy"

    def index(self, k):
        return self.scratch / f"index-{self.d}-{k:05d}.bin"

    @property
    def keys(self):
        return self.scratch / f"keys-{self.d}.npy"

    @property
    def row_ptr(self):
        return self.scratch / f"rowptr-{self.d}.npy"

    @property
    def col(self):
        return self.scratch / f"col-{self.d}.npy"

    # The t-table after `done` M-steps (0: the uniform start), and the counts of the E-step run
    # under it. Named by the iteration, not by their bytes: the scratch folder is the stage's
    # partial folder, keyed by its inputs, parameters and version, and iteration i's table is a
    # function of those alone (integer counts, a fixed division), so a file of that name left
    # by an interrupted run of the same key holds the same bytes. (Naming the table by its
    # sha256 cost bio-multi's M-steps about a tenth of their time in the build's process.)
    def table(self, done):
        return self.scratch / f"t-{self.d}-{done:02d}.npy"

    def counts(self, prob_path, k):
        return self.scratch / f"counts-{Path(prob_path).stem[2:]}-{k:05d}.arrays"


# ----------------------------------------------------------------------------- tasks

def shard_cells(shard_path, reverse) -> int:
    """The E-step's lookups in a shard, (n_s + 1) m_s a sentence pair (its offsets alone read)."""
    with open_bundle(shard_path) as z:
        eo, fo = z.memmap("e_offsets"), z.memmap("f_offsets")
        n, m = (np.diff(fo), np.diff(eo)) if reverse else (np.diff(eo), np.diff(fo))
        return int(((n + 1) * m).sum())


def cooccurrence_task(shard_path, k, reverse, n_src_vocab, n_tgt_vocab, scratch, index=False) -> dict:
    """Shard k's own table -> ``cooc-<d>-<k>.arrays`` (row_ptr, col); returns its sizes.

    ``index``: also the table index of every lookup of its E-steps -> ``index-<d>-<k>.bin``,
    the file the first E-step would write after searching them (the same bytes,
    :func:`pivot._align.cooccurrence_indexed`), so that every E-step reads them. Written before
    the table, so a table on disk always has them when asked for (a run stopped between the
    two writes both again); a shard of 2^31 lookups or more gets none (int32 indices), and its
    first E-step searches. The shard is checked here (ids inside the vocabularies: a
    ValueError naming the shard).
    """
    s, so, t, to = ibm._chunk_corpus(load_shard(shard_path, reverse), n_src_vocab, n_tgt_vocab, k)
    paths = _Paths(scratch, reverse)
    n_cells = int(((np.diff(so) + 1) * np.diff(to)).sum())
    if not paths.cooc(k).is_file():
        if index and n_cells < 2 ** 31:
            row_ptr, col, lookups = _align.cooccurrence_indexed(s, so, t, to, int(n_src_vocab), int(n_tgt_vocab))
            with atomic_path(paths.index(k)) as tmp, open(tmp, "wb") as fh:
                fh.write(memoryview(lookups).cast("B"))
            del lookups
        else:
            row_ptr, col = _align.cooccurrence_csr(s, so, t, to, int(n_src_vocab), int(n_tgt_vocab))
        save_bundle(paths.cooc(k), row_ptr=row_ptr, col=col)
    return {"n_tgt_tokens": len(t)}


def _shard_model(scratch, reverse, k, prob_path):
    """Shard k's table (row_ptr, col), its entries' positions in the model's table and their
    probabilities, gathered from the memory-mapped t-table file."""
    paths = _Paths(scratch, reverse)
    with open_bundle(paths.cooc(k)) as z:
        row_ptr, col = z["row_ptr"], z["col"]
    if paths.positions(k).is_file():
        positions = np.load(paths.positions(k))
    else:
        keys = np.load(paths.keys, mmap_mode="r")
        local = table_keys(row_ptr, col)
        positions = np.searchsorted(keys, local)
        # int32 when the table allows (always, below 2^31 entries): half the bytes to write, and
        # to read at every M-step and E-step
        positions = positions.astype(np.int32) if len(keys) < 2 ** 31 else positions
        # The model's table is the union of the shards' tables: every entry is in it.
        if len(positions) and (positions[-1] >= len(keys) or not np.array_equal(keys[positions], local)):
            raise RuntimeError(f"{paths.cooc(k)}: entries missing from the model's table {paths.keys}")
        with atomic_path(paths.positions(k)) as tmp, open(tmp, "wb") as fh:
            np.save(fh, positions)
    # An empty array cannot be memory-mapped (a shard without tokens has an empty table).
    prob = np.load(prob_path, mmap_mode="r")[positions] if len(positions) else np.zeros(0)
    return row_ptr, col, positions, np.ascontiguousarray(prob)


def e_step_task(shard_path, k, reverse, scratch, prob_path, p_null, tension, n_threads, cached) -> float:
    """One E-step over shard k under the t-table ``prob_path``: writes its expected counts
    (int64, fixed point, one per entry of the shard's table) and returns its log-likelihood."""
    paths = _Paths(scratch, reverse)
    out = paths.counts(prob_path, k)
    if out.is_file():
        with open_bundle(out) as z:
            return float(z["loglik"])
    s, so, t, to = (np.ascontiguousarray(a) for a in load_shard(shard_path, reverse))
    so, to = so.astype(np.int64, copy=False), to.astype(np.int64, copy=False)
    row_ptr, col, positions, prob = _shard_model(scratch, reverse, k, prob_path)
    counts = np.zeros(len(positions), dtype=np.int64)
    loglik = np.empty(len(so) - 1, dtype=np.float64)
    if not cached or len(col) >= 2 ** 31:        # the stored indices are int32
        _align.e_step(s, so, t, to, row_ptr, col, prob, counts, loglik, float(p_null), float(tension),
                      ibm._max_len(so), ibm._team(n_threads, len(so) - 1))
    elif paths.index(k).is_file():        # written whole by an earlier iteration: read it back
        with open(paths.index(k), "rb") as fh:
            _e_step_cached(s, so, t, to, row_ptr, col, prob, counts, loglik, float(p_null), float(tension),
                           n_threads, fh, 2)
    else:
        with atomic_path(paths.index(k)) as tmp, open(tmp, "wb") as fh:
            _e_step_cached(s, so, t, to, row_ptr, col, prob, counts, loglik, float(p_null), float(tension),
                           n_threads, fh, 1)
    total = float(loglik.sum())        # numpy sums a fixed array in a fixed order
    save_bundle(out, counts=counts, loglik=np.float64(total))
    return total


def _blocks(so, to):
    """(a, b, cum): runs [a, b) of sentences whose (n_s + 1) m_s table indices take at most
    INDEX_CACHE_BLOCK_BYTES (at least one sentence a run); cum: the indices' offsets."""
    n_sent = len(so) - 1
    cum = np.zeros(n_sent + 1, dtype=np.int64)
    np.cumsum((np.diff(so) + 1) * np.diff(to), out=cum[1:])
    block_cells = max(1, INDEX_CACHE_BLOCK_BYTES // 4)
    a = 0
    while a < n_sent:
        b = max(a + 1, int(np.searchsorted(cum, cum[a] + block_cells, side="right")) - 1)
        yield a, b, cum
        a = b


def _read_block(fh, buffer, n):
    """The next n int32 indices of an index file, in ``buffer`` (grown if too small)."""
    if len(buffer) < n:
        buffer = np.empty(n, dtype=np.int32)
    got = fh.readinto(memoryview(buffer[:n]).cast("B"))
    if got != 4 * n:
        raise RuntimeError(f"index cache {fh.name}: {got} bytes, expected {4 * n}")
    return buffer


def _e_step_cached(s, so, t, to, row_ptr, col, prob, counts, loglik, p_null, tension, n_threads, fh, mode):
    """e_step over one shard in blocks of sentences (:func:`_blocks`), its table indices stored in ``fh``.

    mode 1 searches and writes each block's indices to ``fh``; mode 2 reads them back in the
    same blocks. Every sentence is computed exactly as by one e_step over the shard.
    """
    buffer = np.empty(0, dtype=np.int32)
    for a, b, cum in _blocks(so, to):
        n = int(cum[b] - cum[a])
        if mode == 2:
            buffer = _read_block(fh, buffer, n)
        elif len(buffer) < n:
            buffer = np.empty(n, dtype=np.int32)
        e0, e1, t0, t1 = int(so[a]), int(so[b]), int(to[a]), int(to[b])
        _align.e_step(s[e0:e1], so[a:b + 1] - e0, t[t0:t1], to[a:b + 1] - t0,
                      row_ptr, col, prob, counts, loglik[a:b], p_null, tension,
                      ibm._max_len(so[a:b + 1]), ibm._team(n_threads, b - a), buffer[:n],
                      cum[a:b + 1] - cum[a], mode)
        if mode == 1:
            fh.write(memoryview(buffer[:n]).cast("B"))


def _viterbi(scratch, reverse, k, prob_path, p_null, tension, n_tgt_vocab, s, so, t, to, n_threads):
    """Viterbi links of shard k in its own table; the lookups read from the index file the
    E-steps left, when there is one (the same indices, found without searching)."""
    row_ptr, col, _, prob = _shard_model(scratch, reverse, k, prob_path)
    model = ibm.Model(row_ptr=row_ptr, col=col, prob=prob, p_null=float(p_null), tension=float(tension),
                      n_tgt_vocab=int(n_tgt_vocab))
    index = _Paths(scratch, reverse).index(k)
    if not index.is_file():
        return ibm.viterbi(model, s, so, t, to, n_threads)
    s, t = np.ascontiguousarray(s, dtype=np.int32), np.ascontiguousarray(t, dtype=np.int32)
    so, to = so.astype(np.int64), to.astype(np.int64)
    positions = np.empty(len(t), dtype=np.int32)
    buffer = np.empty(0, dtype=np.int32)
    with open(index, "rb") as fh:
        for a, b, cum in _blocks(so, to):
            n = int(cum[b] - cum[a])
            buffer = _read_block(fh, buffer, n)
            e0, e1, t0, t1 = int(so[a]), int(so[b]), int(to[a]), int(to[b])
            _align.viterbi_argmax(s[e0:e1], so[a:b + 1] - e0, t[t0:t1], to[a:b + 1] - t0, row_ptr, col, prob,
                                  positions[t0:t1], float(p_null), float(tension), ibm.UNKNOWN_PROB,
                                  ibm._max_len(so[a:b + 1]), ibm._team(n_threads, b - a), buffer[:n],
                                  cum[a:b + 1] - cum[a])
    return ibm.links_of_positions(positions, to)


def viterbi_task(shard_path, k, scratch, prob_path, p_null, tension, n_tgt_vocab, n_threads, out_path) -> int:
    """Forward (English -> foreign) Viterbi links of shard k -> ``out_path``; returns its sentences."""
    s, so, t, to = load_shard(shard_path, False)
    if not Path(out_path).is_file():
        le, lf, lo = _viterbi(scratch, False, k, prob_path, p_null, tension, n_tgt_vocab, s, so, t, to, n_threads)
        save_bundle(out_path, link_e=le, link_f=lf, link_offsets=lo)
    return len(so) - 1


def symmetrize_task(shard_path, k, scratch, prob_path, p_null, tension, n_e_vocab, n_threads, fwd_path,
                    out_path) -> int:
    """Reverse (foreign -> English) Viterbi links of shard k, grow-diag-final-and with its forward
    links -> ``out_path`` (a bundle of int32 link_e, link_f, int64 shard-local link_offsets);
    returns its sentences."""
    # Written even when out_path exists: it is the caller's, and an earlier run may have left a
    # file of that name for other sentences.
    e, eo, f, fo = load_shard(shard_path, False)
    rev = ibm._english_first(*_viterbi(scratch, True, k, prob_path, p_null, tension, n_e_vocab, f, fo, e, eo,
                                       n_threads))
    with open_bundle(fwd_path) as z:
        fwd = z["link_e"], z["link_f"], z["link_offsets"]
    le, lf, lo = ibm.symmetrize_links(fwd, rev, np.diff(eo), np.diff(fo), n_threads)
    save_bundle(out_path, link_e=np.asarray(le, dtype=np.int32), link_f=np.asarray(lf, dtype=np.int32),
                link_offsets=np.asarray(lo, dtype=np.int64))
    return len(eo) - 1


# ----------------------------------------------------------------------------- driver

def fit_sharded(engine, shard_paths, reverse, n_src_vocab, n_tgt_vocab, scratch, **kw):
    """:func:`pivot.pipeline.ibm.fit` on a corpus held as shard files, by tasks on ``engine``:
    (the same Model to the bit, the path of its t-table file). See :func:`fit_job`."""
    return engine.run(fit_job(shard_paths, reverse, n_src_vocab, n_tgt_vocab, scratch, **kw))[0]


def fit_job(shard_paths, reverse, n_src_vocab, n_tgt_vocab, scratch, *, iterations=5, p_null=0.08,
            tension=4.0, n_threads=1, index_cache=True, quiet=True, name="align"):
    """:func:`fit_sharded` as a job of :meth:`pivot.pipeline.engine.Engine.run` (it yields its
    batches of tasks; its M-steps run in the engine's process): returns (Model, t-table path).

    ``reverse`` trains foreign -> English (foreign the source). Scratch files go to
    ``scratch`` (the caller removes it); the t-table file of the result, the shards' tables
    and their stored indices stay there for the Viterbi tasks. ``n_threads`` is each task's
    kernel threads (and the M-step's). The recorded log-likelihoods are summed shard by shard
    (:func:`fit` sums them sentence by sentence: they may differ in the last bits); they play
    no part in the model.
    """
    ibm._check_prior(float(p_null), float(tension))
    if int(iterations) < 0:
        raise ValueError(f"iterations must be >= 0, got {iterations}")
    n_threads = ibm._threads(n_threads)
    scratch = Path(scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    paths = _Paths(scratch, reverse)
    d = paths.d
    n_shards = len(shard_paths)
    # The lookups, counted from the shards' offsets: each shard's E-step work (the tasks' cost)
    # and, 4 bytes each, the stored indices, decided before the tables, which write them.
    cost = [shard_cells(p, reverse) for p in shard_paths]
    cached = bool(index_cache and int(iterations) > 1
                  and 4 * sum(cost) <= min(INDEX_CACHE_DISK_BYTES, shutil.disk_usage(scratch).free // 2))
    stats = yield Batch(cooccurrence_task, [(str(p), k, reverse, int(n_src_vocab), int(n_tgt_vocab), str(scratch),
                                             cached) for k, p in enumerate(shard_paths)], name=f"{name}-{d}-cooc")
    if sum(s["n_tgt_tokens"] for s in stats) >= 2 ** 31:
        raise ValueError("more than 2^31 target tokens: the fixed-point counts could overflow")

    # The model's table: the union of the shards' tables (sorted sets: the same whatever the
    # order), merged pairwise in rounds so that each key passes log2(shards) merges, not one a shard.
    level = []
    for k in range(n_shards):
        with open_bundle(paths.cooc(k)) as z:
            level.append(table_keys(z["row_ptr"], z["col"]))
        # merge while the last two hold as many shards each (a binary counter): at most
        # log2(shards) arrays wait at any time
        size = k + 1
        while size % 2 == 0:
            level[-2:] = [_align.union_sorted(level[-2], level[-1])]
            size //= 2
    while len(level) > 1:
        level[-2:] = [_align.union_sorted(level[-2], level[-1])]
    keys = level[0] if level else np.zeros(0, dtype=np.int64)
    del level
    n_rows = int(n_src_vocab) + 1
    row_ptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys >> _ROW_SHIFT, minlength=n_rows), out=row_ptr[1:])
    col = (keys & _COL_MASK).astype(np.int32)
    _save(paths.keys, keys)
    del keys
    # Between its batches this job holds no table: the row pointers, the columns and the
    # probabilities wait in scratch files, read back for each M-step. A build runs every
    # language's two directions side by side, each waiting for its E-step tasks most of the
    # time; held here, their tables (20 bytes an entry) added up in this process (bio-multi:
    # 165 languages, 2.2 GiB before the largest two had started their EM).
    _save(paths.row_ptr, row_ptr)
    _save(paths.col, col)
    n_entries = len(col)

    # Uniform start: t(f | e) = 1 / (row length).
    sizes = np.diff(row_ptr)
    prob = np.repeat(1.0 / np.maximum(sizes, 1), sizes).astype(np.float64)
    del sizes, row_ptr, col
    prob_path = _write_table(paths, 0, prob)
    del prob
    release_heap()
    history = []
    for it in range(int(iterations)):
        logliks = yield Batch(e_step_task, [(str(p), k, reverse, str(scratch), str(prob_path), float(p_null),
                                             float(tension), n_threads, cached) for k, p in enumerate(shard_paths)],
                              name=f"{name}-{d}-em{it + 1}", cost=cost)
        # The M-step: every shard's partial counts into the model's table, in shard order.
        # The probabilities are read back from the file the E-step tasks read (np.save's bytes:
        # the same float64 values), updated and written as the next table. np.add.at adds in
        # one pass where counts[positions] += part gathers, adds and scatters (half the time:
        # 0.14 s against 0.25-0.31 s for bio fr's 23 shards, 12.4M entries); a shard's positions
        # are distinct, so both add the same integers.
        row_ptr, prob = np.load(paths.row_ptr), np.load(prob_path)
        counts = np.zeros(n_entries, dtype=np.int64)
        for k in range(n_shards):
            part = paths.counts(prob_path, k)
            with open_bundle(part) as z:
                np.add.at(counts, np.load(paths.positions(k)), z["counts"])
            part.unlink()
        history.append(float(sum(logliks)))
        _align.m_step(row_ptr, counts, prob, n_threads)
        prob_path.unlink()
        prob_path = _write_table(paths, it + 1, prob)
        del row_ptr, prob, counts
        release_heap()
        if not quiet:
            print(f"EM iteration {it + 1}/{iterations}: log-likelihood {history[-1]:.6g}", file=sys.stderr, flush=True)
    model = ibm.Model(row_ptr=np.load(paths.row_ptr), col=np.load(paths.col), prob=np.load(prob_path),
                      p_null=float(p_null), tension=float(tension), n_tgt_vocab=int(n_tgt_vocab),
                      log_likelihood=np.asarray(history))
    return model, prob_path


def _save(path: Path, array: np.ndarray) -> None:
    """``array`` as ``path`` (.npy), written whole under a temporary name."""
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.save(fh, array)


def _write_table(paths: _Paths, done: int, prob: np.ndarray) -> Path:
    """The t-table's probabilities after ``done`` M-steps as ``t-<d>-<done>.npy``, written whole
    under a temporary name."""
    path = paths.table(done)
    _save(path, prob)
    return path


def align_both_sharded(engine, shard_paths, n_e_vocab, n_f_vocab, out_paths, scratch, **kw):
    """:func:`pivot.pipeline.ibm.align_both` on a corpus held as shard files, by tasks on
    ``engine``: shard k's symmetrised links go to ``out_paths[k]``. See :func:`align_both_job`."""
    return engine.run(align_both_job(shard_paths, n_e_vocab, n_f_vocab, out_paths, scratch, **kw))[0]


def align_both_job(shard_paths, n_e_vocab, n_f_vocab, out_paths, scratch, *, iterations=5, p_null=0.08,
                   tension=4.0, n_threads=1, index_cache=True, quiet=True, name="align"):
    """:func:`pivot.pipeline.ibm.align_both` on a corpus held as shard files, as a job of
    :meth:`pivot.pipeline.engine.Engine.run`: shard k's symmetrised links go to ``out_paths[k]``
    (a bundle of int32 ``link_e``, ``link_f``, int64 shard-local ``link_offsets``), the same
    bytes as align_both's links of those sentences for any shards and workers. Returns each
    shard's number of sentences.

    The two directions are trained side by side (neither reads the other's model): the forward
    model (English source) and its Viterbi links per shard (``fwd-<k>.arrays``), and the reverse
    model; then per shard the reverse Viterbi links and grow-diag-final-and with the forward
    ones. On a cluster one direction's tasks keep the workers busy while the other's M-step
    runs here. ``scratch`` is removed by the caller.
    """
    scratch = Path(scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    kw = dict(iterations=iterations, p_null=p_null, tension=tension, n_threads=n_threads, index_cache=index_cache,
              quiet=quiet, name=name)
    fwd_paths = [scratch / f"fwd-{k:05d}.arrays" for k in range(len(shard_paths))]

    def forward():
        model, prob_path = yield from fit_job(shard_paths, False, n_e_vocab, n_f_vocab, scratch, **kw)
        del model
        release_heap()
        yield Batch(viterbi_task, [(str(p), k, str(scratch), str(prob_path), float(p_null), float(tension),
                                    int(n_f_vocab), n_threads, str(fwd_paths[k])) for k, p in enumerate(shard_paths)],
                    name=f"{name}-fwd-viterbi")
        prob_path.unlink()
        for k in range(len(shard_paths)):      # the forward indices are done with: free the disk
            _Paths(scratch, False).index(k).unlink(missing_ok=True)

    def reverse():
        model, prob_path = yield from fit_job(shard_paths, True, n_f_vocab, n_e_vocab, scratch, **kw)
        del model
        release_heap()
        return prob_path

    _, prob_path = yield Together(forward(), reverse())
    done = yield Batch(symmetrize_task, [(str(p), k, str(scratch), str(prob_path), float(p_null), float(tension),
                                          int(n_e_vocab), n_threads, str(fwd_paths[k]), str(out_paths[k]))
                                         for k, p in enumerate(shard_paths)], name=f"{name}-rev-viterbi")
    prob_path.unlink()
    return done
