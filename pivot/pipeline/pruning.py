"""The pruning rules of the pivot, in one place: which (e, f) entries each model keeps.

One function decides for the build (pivot.pipeline.translation.merge_by_f, on a foreign
partition of the merged table), for the in-memory pivot (pivot.pipeline.pivoting.prune) and for
the coverage ceiling (pivot.eval.ceiling, General's column under any setting). For every model
k, a column of the (n, K) arrays, each on its own counts and probabilities (a model is never
pruned by what General saw):

(a) keep (e, f) iff c_k(e,f) > 0, p_k(f|e) >= min_p_f_given_e, p_k(e|f) >= min_p_e_given_f and
    e passes the minimum-count rule (``e_ok``: n_k(e) >= min_phrase_count, decided by the
    caller, which holds the count);
(b) then, for each f, keep at most max_e_per_f of the survivors: largest c_k(e,f) first, ties
    to the smaller English key; 0 means no cap. Within a column the denominator of p_k(e|f)
    is shared, so ranking on c_k(e,f) is ranking on p_k(e|f) without comparing a quotient.

The rules only compare numbers the caller computed, so the same numbers keep the same
entries in every caller; the probabilities are normalised over the full table before pruning
(as PPDB does), and pruning drops entries without renormalising the rest.
"""
from __future__ import annotations

import numpy as np


def keep_entries(counts, p_fe, p_ef, e_ok, f_group, e_key, *, min_p_f_given_e: float,
                 min_p_e_given_f: float, max_e_per_f: int) -> tuple[np.ndarray, np.ndarray]:
    """Rules (a) and (b) for every model: (keep, after_floors).

    counts, p_fe, p_ef: (n, K) c_k(e,f), p_k(f|e), p_k(e|f) of n entries in any order; e_ok:
    (n, K) or (n, 1) bool, the minimum-count rule; f_group: (n,) integers equal for the
    entries of one foreign phrase (its key or an index); e_key: (n,) the English phrase's key
    or id, the tie-break of rule (b). Returns keep (n, K) bool, after rules (a) and (b), and
    after_floors (n,) bool, the entries some model keeps after rule (a) alone.
    """
    # Whole-array passes for every model at once: a column of an (n, K) array touches every
    # cache line, so one strided pass per model would read the arrays K times.
    keep = (counts > 0) & (p_fe >= min_p_f_given_e) & (p_ef >= min_p_e_given_f) & e_ok
    after_floors = keep.any(axis=1)
    for k in range(keep.shape[1] if max_e_per_f > 0 else 0):
        idx = np.flatnonzero(keep[:, k])
        if not len(idx):
            continue
        # Each foreign phrase's survivors, largest count first, then the smaller English key;
        # an entry's rank is its place after the first entry of its foreign phrase.
        ranked = idx[np.lexsort((e_key[idx], -counts[idx, k], f_group[idx]))]
        group = f_group[ranked]
        rank = np.arange(len(ranked)) - np.searchsorted(group, group)
        keep[ranked[rank >= max_e_per_f], k] = False
    return keep, after_floors
