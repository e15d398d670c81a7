"""The coverage ceiling: which gold pairs pivoting a build's bitext could propose at all.

General's p(e2|e1) = sum_f p(e2|f) p(f|e1) recomputed for given pairs from the *unpruned*
merged phrase table (the ``e-*`` bundles of a build's ``translation-*`` stage: every (e, f)
with its count c(e, f) and p(f|e) = c(e, f) / sum_f' c(e, f')), with
p(e|f) = c(e, f) / sum_e' c(e', f) over the whole table (the pipeline normalises before pruning,
as PPDB does), under the pipeline's pruning rules (pivot.pipeline.pruning) at any setting:

    rule (a): keep (e, f) iff p(f|e) >= a, p(e|f) >= b and support(e) >= m;
    rule (b): then at most `cap` English phrases per f, largest c(e, f) first (ties: the
              smaller English key);
    a pair is stored iff p(e2|e1) >= floor (and > 0).

At the recipe's own setting this reproduces the database's General model (bench/coverage_ceiling.py
checks it on the real build); with every rule off it is the most any General model of this
bitext could propose.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from pivot.pipeline.bundle import open_bundle
from pivot.pipeline.pruning import keep_entries


@dataclass(frozen=True)
class Pruning:
    """One setting of the pruning rules (max_e_per_f None or 0: no cap, as the recipe's 0)."""

    min_p_f_given_e: float
    min_p_e_given_f: float
    max_e_per_f: int | None
    min_phrase_count: int
    min_p_e2_given_e1: float


class UnprunedTable:
    """General's column of a merged phrase table: one row per (e, f) with c(e, f) > 0.

    e_key, f_key: the phrases' keys (any sortable integers); c: c(e, f); p_fe: p(f|e);
    support: support(e) of each row's English phrase.
    """

    def __init__(self, e_key, f_key, c, p_fe, support):
        ok = np.asarray(c) > 0
        self.e_key, self.f_key = np.asarray(e_key)[ok], np.asarray(f_key)[ok]
        self.c, self.p_fe, self.support = np.asarray(c, float)[ok], np.asarray(p_fe, float)[ok], np.asarray(support)[ok]
        self.e_uniq, self.e_idx = np.unique(self.e_key, return_inverse=True)
        self.f_uniq, self.f_idx = np.unique(self.f_key, return_inverse=True)
        c_f = np.bincount(self.f_idx, weights=self.c, minlength=len(self.f_uniq))
        self.p_ef = self.c / c_f[self.f_idx]

    @classmethod
    def from_translation(cls, translation: Path) -> "UnprunedTable":
        """Column 0 (General) of a translation stage's e-* bundles; also keeps the English
        dictionary (key -> token ids) as ``dict_key``, ``dict_rows``."""
        cols = {"e": [], "f": [], "c": [], "pfe": [], "sup": []}
        dict_key, dict_rows = [], []
        for path in sorted(Path(translation).glob("e-*.arrays")):
            with open_bundle(path) as b:
                dict_key.append(b["e_key"])
                dict_rows.append(b["e_rows"])
                q = 0
                while f"q{q}_e_key" in b:
                    cols["e"].append(b[f"q{q}_e_key"])
                    cols["f"].append(b[f"q{q}_f_key"])
                    cols["c"].append(b[f"q{q}_counts"][:, 0].copy())
                    cols["pfe"].append(b[f"q{q}_p_fe"][:, 0].copy())
                    cols["sup"].append(b[f"q{q}_e_count"])
                    q += 1
        if not cols["e"]:
            raise FileNotFoundError(f"{translation}: no e-*.arrays bundles (not a finished translation stage)")
        t = cls(*(np.concatenate(cols[k]) for k in ("e", "f", "c", "pfe", "sup")))
        t.dict_key, t.dict_rows = np.concatenate(dict_key), np.concatenate(dict_rows)
        return t

    def __len__(self) -> int:
        return len(self.c)

    def kept(self, s: Pruning) -> np.ndarray:
        """The rows the setting keeps: rule (a), then rule (b) among them, as the build decides
        them (pivot.pipeline.pruning.keep_entries), with support(e) as General's n(e)."""
        keep, _ = keep_entries(self.c[:, None], self.p_fe[:, None], self.p_ef[:, None],
                               (self.support >= s.min_phrase_count)[:, None], self.f_idx, self.e_key,
                               min_p_f_given_e=s.min_p_f_given_e, min_p_e_given_f=s.min_p_e_given_f,
                               max_e_per_f=s.max_e_per_f or 0)
        return keep[:, 0]

    def matrices(self, s: Pruning):
        """(A, B): CSR matrices English x foreign of p(f|e) and p(e|f) on the kept rows."""
        keep = self.kept(s)
        shape = (len(self.e_uniq), len(self.f_uniq))
        a = sp.csr_matrix((self.p_fe[keep], (self.e_idx[keep], self.f_idx[keep])), shape=shape)
        b = sp.csr_matrix((self.p_ef[keep], (self.e_idx[keep], self.f_idx[keep])), shape=shape)
        return a, b

    def row_of(self, keys) -> np.ndarray:
        """Row index of each English key in the matrices; -1 where the key has no row."""
        keys = np.asarray(keys)
        pos = np.searchsorted(self.e_uniq, keys)
        pos = np.minimum(pos, len(self.e_uniq) - 1)
        return np.where((len(self.e_uniq) > 0) & (self.e_uniq[pos] == keys), pos, -1)

    def pair_scores(self, rows: np.ndarray, s: Pruning, mats=None) -> tuple[np.ndarray, np.ndarray]:
        """(p(y|x), p(x|y)) under setting s for pairs of matrix rows (n, 2) [x, y]; 0 where a
        row is -1 or the phrases share no kept pivot."""
        a, b = self.matrices(s) if mats is None else mats
        rows = np.asarray(rows, dtype=np.int64).reshape(-1, 2)
        fwd, rev = np.zeros(len(rows)), np.zeros(len(rows))
        ok = (rows >= 0).all(axis=1)
        if ok.any():
            i, j = rows[ok, 0], rows[ok, 1]
            fwd[ok] = np.asarray(a[i].multiply(b[j]).sum(axis=1)).ravel()
            rev[ok] = np.asarray(a[j].multiply(b[i]).sum(axis=1)).ravel()
        return fwd, rev

    def proposed(self, rows, s: Pruning, mats=None) -> np.ndarray:
        """A pair is proposed when either direction is stored: p >= the floor and p > 0."""
        fwd, rev = self.pair_scores(rows, s, mats)
        floor = s.min_p_e2_given_e1
        return ((fwd > 0) & (fwd >= floor)) | ((rev > 0) & (rev >= floor))

    def projected_pairs(self, s: Pruning, sample: np.ndarray, mats=None) -> float:
        """General's stored pairs projected from a sample of English rows: the sample's pairs
        (e1, e2 != e1) with p(e2|e1) at or above the floor, times the rows over the sample."""
        a, b = self.matrices(s) if mats is None else mats
        p = (a[sample] @ b.T).tocoo()
        floor = s.min_p_e2_given_e1
        n = int(((p.data > 0) & (p.data >= floor) & (np.asarray(sample)[p.row] != p.col)).sum())
        return n * len(self.e_uniq) / len(sample)
