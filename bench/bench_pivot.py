"""Benchmark: the pivot kernel against the same computation with scipy.sparse.

    python bench/bench_pivot.py --table work/extract-.../table.npz --k 6 --repeat 3 --json out.json
    python bench/bench_pivot.py --synthetic 3000000          # no real table at hand

What is timed (best of --repeat, after pruning once: the pruned structure and its CSR/CSC
layouts are shared by every model and by both contenders):

* kernel: :func:`pivot.pipeline.pivoting.pivot_structure` with top_n=0 — normalisation of the K
  count columns over the full table, the product for all K models in one pass, n_pivots
  and the top-3 pivots — at each thread count of --threads;
* scipy: for each of the K models, the full-table row and column sums, R_k (row-normalised
  counts on the pruned structure, CSR) and K_k^T (column-normalised, CSR over f), the product
  R_k @ K_k^T and the removal of its diagonal: one product per model, single-threaded, as
  scipy runs it.

The two must agree to 1e-12 (maximum absolute difference over all entries of all models)
and the kernel must give bitwise equal results at every thread count; the script exits
non-zero otherwise. Data on stdout, progress on stderr.

Extra model columns: when the table has fewer than --k columns, column k is synthesised from
the General counts, deterministically (seed --seed + k): odd k, counts[:,0] * uniform(0, 2)
per pair (real-valued weights such as M-L Weighted); even k, counts[:,0] * Bernoulli(0.3)
per pair (a 0/1 subsample such as M-L T=tau; many pairs and some rows become zero).

Synthetic tables (--synthetic N): N unique pairs drawn from a Zipfian generator: English
and foreign phrase frequencies are Zipfian (exponent 1.05) over N/4 phrases each; 70% of
draws take one of the English phrase's few "translations" (nearby foreign ids), 30% a
Zipfian-random foreign phrase (alignment noise and function words, which give the
high-degree pivots that pruning exists for). Support = the number of draws of a pair.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import numpy as np
import scipy
import scipy.sparse as sp

from pivot.pipeline import pivoting
from pivot.pipeline.extract import PhraseTable


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _zipf_ids(rng, n: int, size: int, exponent: float = 1.05) -> np.ndarray:
    """size draws of ids 0..n-1 with P(id) proportional to (id + 1)^-exponent."""
    cdf = np.cumsum(1.0 / np.arange(1, n + 1) ** exponent)
    return np.searchsorted(cdf, rng.random(size) * cdf[-1]).astype(np.int64)


def synthetic_table(n_pairs: int, seed: int = 0) -> PhraseTable:
    """A Zipfian random phrase table of exactly n_pairs unique pairs (see module docstring)."""
    rng = np.random.default_rng(seed)
    n_e = n_f = max(16, n_pairs // 4)
    e_perm = rng.permutation(n_e)  # ids in lexicographic, not frequency, order
    f_perm = rng.permutation(n_f)
    keys = np.empty(0, np.int64)
    support = np.empty(0, np.int64)
    while len(keys) < n_pairs:
        m = max(1 << 16, int(1.5 * (n_pairs - len(keys))))
        e_rank = _zipf_ids(rng, n_e, m)
        noise = rng.random(m) < 0.3
        f_rank = np.where(noise, _zipf_ids(rng, n_f, m),
                          (e_rank * 7919 + rng.geometric(0.4, m) - 1) % n_f)
        new, new_support = np.unique(e_perm[e_rank] * n_f + f_perm[f_rank], return_counts=True)
        keys, inverse = np.unique(np.concatenate([keys, new]), return_inverse=True)
        support = np.bincount(inverse, weights=np.concatenate([support, new_support])).astype(np.int64)
    if len(keys) > n_pairs:
        pick = np.sort(rng.choice(len(keys), n_pairs, replace=False))
        keys, support = keys[pick], support[pick]
    e_id = (keys // n_f).astype(np.int32)
    f_id = (keys % n_f).astype(np.int32)
    e_count = np.bincount(e_id, weights=support, minlength=n_e).astype(np.int64)
    return PhraseTable(
        e_phrases=np.arange(n_e, dtype=np.int32)[:, None], f_phrases=np.arange(n_f, dtype=np.int32)[:, None],
        e_id=e_id, f_id=f_id, counts=support.astype(np.float64)[:, None],
        support=support.astype(np.int64), e_count=e_count)


def widen(table: PhraseTable, k: int, seed: int) -> PhraseTable:
    """Give the table k count columns, synthesising the missing ones (see module docstring)."""
    have = table.counts.shape[1]
    if have >= k:
        table.counts = np.ascontiguousarray(table.counts[:, :k])
        return table
    general = table.counts[:, 0]
    cols = [table.counts]
    for j in range(have, k):
        rng = np.random.default_rng(seed + j)
        if j % 2:
            cols.append((general * rng.uniform(0.0, 2.0, len(general)))[:, None])
        else:
            cols.append((general * (rng.random(len(general)) < 0.3))[:, None])
    table.counts = np.ascontiguousarray(np.hstack(cols))
    return table


def scipy_pivot(table: PhraseTable, s: pivoting.PivotStructure) -> list:
    """P_k = R_k @ K_k^T minus its diagonal, one scipy product per model."""
    e_id, f_id = table.e_id, table.f_id
    e_csr, f_csr = e_id[s.kept], s.row_f
    f_csc = f_id[s.csc_pair]
    out = []
    for k in range(table.counts.shape[1]):
        c = table.counts[:, k]
        row_sum = np.bincount(e_id, weights=c, minlength=s.n_e)
        col_sum = np.bincount(f_id, weights=c, minlength=s.n_f)
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.where(row_sum[e_csr] > 0, c[s.kept] / row_sum[e_csr], 0.0)
            q = np.where(col_sum[f_csc] > 0, c[s.csc_pair] / col_sum[f_csc], 0.0)
        R = sp.csr_matrix((r, f_csr, s.row_ptr), shape=(s.n_e, s.n_f))
        Kt = sp.csr_matrix((q, s.col_e, s.col_ptr), shape=(s.n_f, s.n_e))
        P = R @ Kt
        rows = np.repeat(np.arange(s.n_e, dtype=P.indices.dtype), np.diff(P.indptr))
        P.data[P.indices == rows] = 0.0
        P.eliminate_zeros()
        out.append(P)
    return out


def best_of(repeat: int, fn):
    best, result = float("inf"), None
    for _ in range(repeat):
        result = None  # free the previous result before the next run
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def max_abs_diff(para: pivoting.Paraphrases, mats: list) -> float:
    worst = 0.0
    for k, S in enumerate(mats):
        Kp = sp.csr_matrix((para.p[:, k], (para.e1, para.e2)), shape=S.shape)
        D = (S - Kp).tocsr()
        if D.nnz:
            worst = max(worst, float(np.abs(D.data).max()))
    return worst


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--table", help="a saved PhraseTable (.npz)")
    src.add_argument("--synthetic", type=int, metavar="N", help="a Zipfian random table of N pairs")
    ap.add_argument("--k", type=int, default=6, help="number of models (count columns)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs; the best is reported")
    ap.add_argument("--threads", default="1,2", help="comma-separated kernel thread counts")
    ap.add_argument("--seed", type=int, default=0, help="seed of synthetic tables and columns")
    ap.add_argument("--min-p-f-given-e", type=float, default=pivoting.DEFAULT_MIN_P_F_GIVEN_E)
    ap.add_argument("--min-p-e-given-f", type=float, default=pivoting.DEFAULT_MIN_P_E_GIVEN_F)
    ap.add_argument("--max-e-per-f", type=int, default=pivoting.DEFAULT_MAX_E_PER_F)
    ap.add_argument("--tolerance", type=float, default=1e-12, help="max abs difference allowed")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args(argv)
    threads = [int(t) for t in args.threads.split(",")]

    t0 = time.perf_counter()
    if args.table:
        table = PhraseTable.load(args.table)
        source = args.table
    else:
        table = synthetic_table(args.synthetic, args.seed)
        source = f"synthetic:{args.synthetic}:seed{args.seed}"
    k_in = table.counts.shape[1]
    table = widen(table, args.k, args.seed)
    log(f"table {source}: {table.n_pairs} pairs, {k_in} -> {table.counts.shape[1]} columns "
        f"({time.perf_counter() - t0:.1f} s)")

    t0 = time.perf_counter()
    structure = pivoting.prune(table, min_p_f_given_e=args.min_p_f_given_e,
                               min_p_e_given_f=args.min_p_e_given_f, max_e_per_f=args.max_e_per_f)
    prune_s = time.perf_counter() - t0
    log(f"pruned in {prune_s:.2f} s: {structure.stats}")

    # One untimed run first (the reference result; it also warms the allocator), then the
    # timed runs with the thread counts interleaved, in alternating order, so that no count
    # gets a warmer machine (on VMs the first touch of freshly mapped memory varies a lot).
    t0 = time.perf_counter()
    ref = pivoting.pivot_structure(table, structure, top_n=0, n_threads=threads[0])
    log(f"warm-up run: {time.perf_counter() - t0:.3f} s, {len(ref)} pairs")
    kernel_s = {nt: float("inf") for nt in threads}
    for rep in range(args.repeat):
        for nt in (threads if rep % 2 == 0 else threads[::-1]):
            t0 = time.perf_counter()
            other = pivoting.pivot_structure(table, structure, top_n=0, n_threads=nt)
            kernel_s[nt] = min(kernel_s[nt], time.perf_counter() - t0)
            for name in ("e1", "e2", "p", "n_pivots", "pivots"):
                if not np.array_equal(getattr(ref, name), getattr(other, name)):
                    log(f"FAIL: {name} differs between {threads[0]} and {nt} threads")
                    return 1
            other = None
    for nt in threads:
        log(f"kernel, {nt} thread(s): {kernel_s[nt]:.3f} s")
    scipy_s, mats = best_of(args.repeat, lambda: scipy_pivot(table, structure))
    log(f"scipy: {scipy_s:.3f} s")
    diff = max_abs_diff(ref, mats)
    n_scipy = sum(m.nnz for m in mats)
    if not diff <= args.tolerance:
        log(f"FAIL: kernel and scipy differ by {diff:.3e} > {args.tolerance:.0e}")
        return 1

    t1 = kernel_s[threads[0]]
    result = {
        "source": source, "k": table.counts.shape[1], "repeat": args.repeat,
        "n_e": table.n_e, "n_f": table.n_f, "n_pairs": table.n_pairs,
        "n_kept": int(len(structure.kept)), "sum_deg_f_squared": structure.stats["sum_deg_f_squared"],
        "n_out": len(ref), "n_scipy_entries": int(n_scipy), "max_abs_diff": diff,
        "prune_s": prune_s, "scipy_s": scipy_s,
        "kernel_s": {str(nt): s for nt, s in kernel_s.items()},
        "ratio_scipy_over_kernel": {str(nt): scipy_s / s for nt, s in kernel_s.items()},
        "thread_speedup": {str(nt): t1 / s for nt, s in kernel_s.items()},
        "pruning": {"min_p_f_given_e": args.min_p_f_given_e, "min_p_e_given_f": args.min_p_e_given_f,
                    "max_e_per_f": args.max_e_per_f},
        "machine": {"python": platform.python_version(), "numpy": np.__version__,
                    "scipy": scipy.__version__, "processor": platform.processor() or platform.machine()},
    }
    print(f"n_e={table.n_e} n_f={table.n_f} n_pairs={table.n_pairs} kept={result['n_kept']} "
          f"n_out={len(ref)} K={result['k']}")
    print(f"scipy   {scipy_s:8.3f} s   ({result['k']} products)")
    for nt in threads:
        print(f"kernel  {kernel_s[nt]:8.3f} s   {nt} thread(s)   scipy/kernel {scipy_s / kernel_s[nt]:5.2f}x"
              f"   thread speedup {t1 / kernel_s[nt]:4.2f}x")
    print(f"max |kernel - scipy| = {diff:.3e}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
