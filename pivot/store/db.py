"""The paraphrase database: one SQLite file per build, written whole or not at all.

Schema (version 2; every lookup is a primary-key range scan, never a table scan):

    meta(key PRIMARY KEY, value)            build signature, parameters, pruning, versions (JSON values)
    model(id PRIMARY KEY, name UNIQUE, kind, description, params, score_column, n_pairs)
                                            `score_column` names the model's column of `pair`
                                            ("p_0", ...), NULL for a combined model
    phrase(id PRIMARY KEY, text UNIQUE, n_words, count)
                                            English phrases; `count` is the phrase's support in the bitext
    foreign_phrase(id PRIMARY KEY, text)    pivot phrases, "fr:traiter"
    pair(e1, e2, n_pivots, pivot1, pivot2, pivot3, p_0, p_1, ...)
                                            PRIMARY KEY (e1, e2), WITHOUT ROWID: one row per pair, the
                                            ids of its best foreign phrases (NULL: none) and one column
                                            per stored model

`p_j` is model j's score of the pair, p(e2|e1), NULL where the model gives the pair zero.
Neither the rank nor the reverse probability is stored: a phrase has a few dozen pairs, all
in consecutive rows of `pair`, so the reader sorts them by the model's column (descending,
ties by e2 id ascending) and takes p(e1|e2) from the reverse pair's row through the primary
key (NULL when the reverse pair did not survive pruning or the model gives it zero). One row
per pair instead of one per (model, pair) keeps the file and the write several times smaller.

Combined models (General+X, kind "combined") store no column: their score is a logistic
regression over p_general and p_X of the same row, whose coefficients are in `model.params`,
so the reader computes it exactly (`lookup`, `scores`, `iter_pairs`).

The writer is `pivot.store.write.write_database`.
"""
from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pivot.errors import InputError
from pivot.store.write import SCHEMA_VERSION


@dataclass(frozen=True)
class Paraphrase:
    """One answer of a lookup, best first."""

    paraphrase: str
    score: float
    p_rev: float | None
    rank: int
    n_pivots: int
    pivots: tuple[str, ...]


def find_pairs(e1: np.ndarray, e2: np.ndarray, q1: np.ndarray, q2: np.ndarray) -> np.ndarray:
    """Row index of each query pair (q1[i], q2[i]) among the pairs (e1, e2); -1 where absent.

    Pairs are keyed as e1 * 2^32 + e2 and found by binary search over the sorted keys.
    """
    key = np.asarray(e1, dtype=np.int64) << 32 | np.asarray(e2, dtype=np.int64)
    query = np.asarray(q1, dtype=np.int64) << 32 | np.asarray(q2, dtype=np.int64)
    out = np.full(len(query), -1, dtype=np.int64)
    if len(key) == 0:
        return out
    order = np.argsort(key, kind="stable")
    pos = np.minimum(np.searchsorted(key[order], query), len(key) - 1)
    hit = key[order[pos]] == query
    out[hit] = order[pos[hit]]
    return out


# ------------------------------------------------------------------------------------ reading


#: Paraphrases a lookup shows when neither the caller nor the database says how many.
DEFAULT_K = 10


class ParaphraseDB:
    """Read-only access to a database written by `pivot build`.

    >>> db = ParaphraseDB("bio.db")                       # doctest: +SKIP
    >>> [p.paraphrase for p in db.lookup("treat", k=3)]   # doctest: +SKIP
    ['cure', 'fight', 'handle']

    Phrases are normalised like the corpus (lowercase, Moses tokenisation) before the
    lookup, so "Treat" and "treat" ask the same question; pass normalize=False to skip that.
    """

    def __init__(self, path):
        self.path = Path(path)
        if not self.path.is_file():
            raise InputError("no such paraphrase database (build one with `pivot build`)", path)
        # A URI built from the resolved path (percent-encoded by pathlib): a file named
        # "a#b?.db" or "50%.db" opens that file, read-only, never another one.
        self._conn = sqlite3.connect(self.path.resolve().as_uri() + "?mode=ro", uri=True, check_same_thread=False)
        try:
            self.meta = {k: json.loads(v) for k, v in self._conn.execute("SELECT key, value FROM meta")}
            version = self.meta.get("schema_version")
            if version != SCHEMA_VERSION:
                raise InputError(f"database schema version {version}, this pivot reads version {SCHEMA_VERSION}: "
                                 "rebuild it with `pivot build`", path)
            rows = self._conn.execute(
                "SELECT id, name, kind, description, params, score_column, n_pairs FROM model ORDER BY id").fetchall()
            pair_columns = [r[1] for r in self._conn.execute("PRAGMA table_info(pair)")]
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise InputError(f"not a pivot paraphrase database ({exc})", path) from exc
        except InputError:
            self._conn.close()
            raise
        self._models = {
            name: {"id": i, "name": name, "kind": kind, "description": desc, "params": json.loads(params),
                   "column": column, "n_pairs": n}
            for i, name, kind, desc, params, column, n in rows
        }
        # Column names are spliced into SQL text (a column cannot be a parameter): accept only
        # columns the table really has.
        for info in self._models.values():
            if info["kind"] != "combined" and info["column"] not in pair_columns:
                raise InputError(f"model {info['name']!r} names a missing column {info['column']!r}", path)
        pivots = [c for c in pair_columns if c.startswith("pivot") and c[5:].isdigit()]
        self._pivot_select = ", ".join(f"f{j}.text" for j in range(len(pivots)))
        self._pivot_join = " ".join(f"LEFT JOIN foreign_phrase f{j} ON f{j}.id = t.{c}"
                                    for j, c in enumerate(pivots))
        self._pivot_columns = ", ".join(pivots)
        self._n_pivot_columns = len(pivots)
        self._lang = self.meta.get("normalization", {}).get("lang", "en")
        # How many paraphrases a lookup shows by default: the recipe's top_n. The database
        # stores every pair above the probability floor, so this is a view, not a cut.
        pruning = self.meta.get("pruning") or {}
        self.default_k = int(pruning.get("lookup_top_n") or DEFAULT_K)

    def close(self):
        self._conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- models and phrases

    @property
    def models(self) -> list[str]:
        """Model names in build order; the first is General."""
        return list(self._models)

    def model_info(self, name: str) -> dict:
        return self._model(name)

    def _model(self, name: str) -> dict:
        try:
            return self._models[name]
        except KeyError:
            raise InputError(
                f"unknown model {name!r}; this database has: {', '.join(self._models)}", self.path
            ) from None

    def normalize(self, phrase: str) -> str:
        from pivot.text import normalize

        return normalize(phrase, self._lang)

    def phrase_id(self, phrase: str, *, normalize: bool = True) -> int | None:
        text = self.normalize(phrase) if normalize else phrase
        row = self._conn.execute("SELECT id FROM phrase WHERE text = ?", (text,)).fetchone()
        return None if row is None else row[0]

    # -- queries

    def _combination(self, info: dict):
        """(base model column, other model column, fitted Combination) of a combined model."""
        from pivot.store.combined import Combination

        params = info["params"]
        return (self._model(params["base"])["column"], self._model(params["other"])["column"],
                Combination.from_meta(params["fit"]))

    def _details(self, e1: int, e2s) -> dict:
        """{e2: (text, n_pivots, pivots tuple)} of the pairs (e1, e2) for e2 in e2s."""
        out = {}
        for e2 in e2s:
            row = self._conn.execute(
                f"""SELECT ph.text, t.n_pivots{', ' if self._pivot_select else ''}{self._pivot_select}
                      FROM pair t JOIN phrase ph ON ph.id = t.e2 {self._pivot_join}
                     WHERE t.e1 = ? AND t.e2 = ?""", (e1, e2)).fetchone()
            out[e2] = (row[0], row[1], tuple(f for f in row[2:] if f is not None))
        return out

    def _combined_rows(self, info: dict, e1: int):
        """(e2, score) of every pair of e1 that the base model proposes, best first."""
        base, other, fit = self._combination(info)
        rows = self._conn.execute(
            f"SELECT e2, {base}, {other} FROM pair WHERE e1 = ? AND {base} IS NOT NULL", (e1,)).fetchall()
        if not rows:
            return []
        return self._rank_combined(fit, rows)

    @staticmethod
    def _rank_combined(fit, rows):
        """rows (e2, p_base, p_other or None, ...) -> [(e2, score, *rest)] best first, ties by e2."""
        score = fit.predict(np.array([r[1] for r in rows], dtype=np.float64),
                            np.array([0.0 if r[2] is None else r[2] for r in rows], dtype=np.float64))
        return sorted(((r[0], s, *r[3:]) for r, s in zip(rows, score.tolist())), key=lambda r: (-r[1], r[0]))

    def lookup(self, phrase: str, k: int | None = None, model: str = "general", *,
               normalize: bool = True) -> list[Paraphrase]:
        """The k best paraphrases of `phrase` under `model`, best first ([] if it has none).

        k=None: the database's default (the recipe's ``[pivot] top_n``; 10 for a database
        that does not record one).
        """
        if k is None:
            k = self.default_k
        info = self._model(model)
        e1 = self.phrase_id(phrase, normalize=normalize)
        if e1 is None or k <= 0:
            return []
        if info["kind"] == "combined":
            best = self._combined_rows(info, e1)[:k]
            details = self._details(e1, [e2 for e2, _ in best])
            return [Paraphrase(details[e2][0], score, None, rank, details[e2][1], details[e2][2])
                    for rank, (e2, score) in enumerate(best)]
        col = info["column"]
        # The inner query picks the k best rows of e1 (a primary-key range of a few dozen rows,
        # sorted); only those k are joined to their text, reverse pair and pivots.
        piv = f", {self._pivot_columns}" if self._pivot_columns else ""
        rows = self._conn.execute(
            f"""SELECT ph.text, t.p, rv.{col}, t.n_pivots{', ' if self._pivot_select else ''}{self._pivot_select}
                  FROM (SELECT e2, {col} AS p, n_pivots{piv} FROM pair
                         WHERE e1 = ?1 AND {col} IS NOT NULL ORDER BY {col} DESC, e2 LIMIT ?2) t
                  JOIN phrase ph ON ph.id = t.e2
                  LEFT JOIN pair rv ON rv.e1 = t.e2 AND rv.e2 = ?1
                  {self._pivot_join}
                 ORDER BY t.p DESC, t.e2""",
            (e1, k),
        )
        return [Paraphrase(text, p, p_rev, rank, n_piv, tuple(f for f in piv_text if f is not None))
                for rank, (text, p, p_rev, n_piv, *piv_text) in enumerate(rows)]

    def scores(self, pairs, model: str = "general", *, normalize: bool = True) -> np.ndarray:
        """The model's score of each (e1, e2) pair; NaN where the model does not propose it."""
        info = self._model(model)
        if info["kind"] == "combined":
            base = self.scores(pairs, info["params"]["base"], normalize=normalize)
            other = self.scores(pairs, info["params"]["other"], normalize=normalize)
            fit = self._combination(info)[2]
            out = np.full(len(pairs), np.nan)
            has = ~np.isnan(base)
            out[has] = fit.predict(base[has], np.nan_to_num(other[has]))
            return out
        col = info["column"]
        out = np.full(len(pairs), np.nan)
        for i, (a, b) in enumerate(pairs):
            e1, e2 = self.phrase_id(a, normalize=normalize), self.phrase_id(b, normalize=normalize)
            if e1 is None or e2 is None:
                continue
            row = self._conn.execute(f"SELECT {col} FROM pair WHERE e1 = ? AND e2 = ?", (e1, e2)).fetchone()
            if row is not None and row[0] is not None:
                out[i] = row[0]
        return out

    def pair_records(self, pairs, *, normalize: bool = True) -> dict:
        """Everything the database stores about each directed pair (e1, e2), in one pass.

        Returns a dict of arrays, row i for pairs[i]:
          ``p``          (n, K) every stored (non-combined) model's p(e2|e1), models in
                         ``stored_models`` order; NaN where the model gives the pair nothing
                         or the pair is absent
          ``n_pivots``   (n,) foreign phrases the pair pivots through (0 when absent)
          ``n_pivot_languages`` (n,) distinct languages ("fr" of "fr:traiter") among the
                         stored best pivots (at most 3 are stored, so this is a lower bound)
          ``count_e1``, ``count_e2`` (n,) the phrases' support in the bitext (0: not a phrase)
          ``stored_models`` the model names of p's columns
        One primary-key probe per pair: the reader of feature-based models, which need every
        column of many pairs (``scores`` runs one query per pair and model).
        """
        stored = [m for m, info in self._models.items() if info["kind"] != "combined"]
        cols = ", ".join(f"t.{self._models[m]['column']}" for m in stored)
        piv = f", {self._pivot_select}" if self._pivot_select else ""
        sql = f"SELECT {cols}, t.n_pivots{piv} FROM pair t {self._pivot_join} WHERE t.e1 = ? AND t.e2 = ?"
        n, k = len(pairs), len(stored)
        out = {"p": np.full((n, k), np.nan), "n_pivots": np.zeros(n, dtype=np.int64),
               "n_pivot_languages": np.zeros(n, dtype=np.int64), "count_e1": np.zeros(n, dtype=np.int64),
               "count_e2": np.zeros(n, dtype=np.int64), "stored_models": stored}
        ids: dict[str, tuple | None] = {}

        def phrase(text):
            if text not in ids:
                t = self.normalize(text) if normalize else text
                ids[text] = self._conn.execute("SELECT id, count FROM phrase WHERE text = ?", (t,)).fetchone()
            return ids[text]

        for i, (a, b) in enumerate(pairs):
            ra, rb = phrase(a), phrase(b)
            out["count_e1"][i] = 0 if ra is None else ra[1]
            out["count_e2"][i] = 0 if rb is None else rb[1]
            if ra is None or rb is None:
                continue
            row = self._conn.execute(sql, (ra[0], rb[0])).fetchone()
            if row is None:
                continue
            out["p"][i] = [np.nan if v is None else v for v in row[:k]]
            out["n_pivots"][i] = row[k]
            out["n_pivot_languages"][i] = len({f.split(":", 1)[0] for f in row[k + 1:] if f is not None})
        return out

    def n_pairs(self, model: str = "general") -> int:
        """Pairs the model proposes (a combined model: its base model's); counted at write time."""
        return self._model(model)["n_pairs"]

    def n_phrases(self) -> int:
        return self._conn.execute("SELECT count(*) FROM phrase").fetchone()[0]

    def iter_pairs(self, model: str = "general"):
        """Every (e1, e2, p, p_rev, n_pivots, pivots) of a model, grouped by e1, best first.

        `pivots` is the pair's foreign phrases joined by "|" ("fr:traiter|fr:soigner").
        """
        info = self._model(model)
        if info["kind"] == "combined":
            yield from self._iter_combined(info)
            return
        col = info["column"]
        rows = self._conn.execute(
            f"""SELECT a.text, b.text, t.{col}, rv.{col}, t.n_pivots{', ' if self._pivot_select else ''}{self._pivot_select}
                  FROM pair t
                  JOIN phrase a ON a.id = t.e1
                  JOIN phrase b ON b.id = t.e2
                  LEFT JOIN pair rv ON rv.e1 = t.e2 AND rv.e2 = t.e1
                  {self._pivot_join}
                 WHERE t.{col} IS NOT NULL
                 ORDER BY t.e1, t.{col} DESC, t.e2""")
        for a, b, p, p_rev, n_piv, *piv in rows:
            yield a, b, p, p_rev, n_piv, "|".join(f for f in piv if f is not None)

    def _iter_combined(self, info):
        """One pass over the base model's pairs in key order, scored and sorted one e1 at a time."""
        from itertools import groupby

        base, other, fit = self._combination(info)
        rows = self._conn.execute(
            f"""SELECT t.e1, t.e2, t.{base}, t.{other}, a.text, b.text, t.n_pivots{', ' if self._pivot_select else ''}{self._pivot_select}
                  FROM pair t
                  JOIN phrase a ON a.id = t.e1
                  JOIN phrase b ON b.id = t.e2
                  {self._pivot_join}
                 WHERE t.{base} IS NOT NULL
                 ORDER BY t.e1, t.e2""")
        for _, group in groupby(rows, key=lambda r: r[0]):
            for _, score, a, b, n_piv, *piv in self._rank_combined(fit, [r[1:] for r in group]):
                yield a, b, score, None, n_piv, "|".join(f for f in piv if f is not None)

    @property
    def signature(self) -> str:
        """One line that says how this database was made (the build's reproducibility signature)."""
        return self.meta.get("signature", "unknown")


# ------------------------------------------------------------------------------------ PPDB 2.0


def ppdb_line(e1: str, e2: str, p: float, p_rev: float | None, n_pivots: int, *, model: str,
              lhs: str = "[X]", label: str = "OtherRelated") -> str:
    """One PPDB 2.0 line: `[LHS] ||| phrase ||| paraphrase ||| features ||| alignment ||| label`.

    Scores are negative natural logs, as in PPDB (-logp(e2|e1) = -ln p). The alignment field
    is "0-0" for single words and empty for phrases (pivoting does not align e1 to e2).
    pivot does no entailment classification, so every pair gets one fixed label.
    """
    feats = [f"-logp(e2|e1)={-math.log(p):.6g}"]
    if p_rev is not None:
        feats.append(f"-logp(e1|e2)={-math.log(p_rev):.6g}")
    feats.append(f"NumPivots={n_pivots}")
    feats.append(f"Model={model}")
    alignment = "0-0" if " " not in e1 and " " not in e2 else ""
    return " ||| ".join([lhs, e1, e2, " ".join(feats), alignment, label])


def tagged_labeler(data=None, *, cache=None):
    """A PhraseLabeler whose tagger is trained on GENIA-pos under the data root `data`
    (default $PIVOT_DATA), or read from the cache; InputError when that is impossible."""
    from pivot import recipes

    try:
        from pivot.store.labels import PhraseLabeler, genia_tagger
        import nltk  # noqa: F401
    except ImportError as exc:
        raise InputError(f"PPDB labels need NLTK ({exc}): pip install 'pivot-paraphrase[labels]'") from None
    try:
        root = recipes.resolve_data_root(data)
    except InputError as exc:
        raise InputError(f"--lhs tagged trains a part-of-speech tagger on the data root's GENIA-pos: {exc}") from None
    tagger, _ = genia_tagger(root, cache=cache)
    return PhraseLabeler(tagger)


def export_ppdb(db: ParaphraseDB, out, model: str = "general", *, labeler=None, agree: bool = False,
                stats: dict | None = None, **kwargs) -> int:
    """Write every pair of `model` as PPDB 2.0 lines to the text stream `out`; returns the count.

    `labeler` (pivot.store.labels.PhraseLabeler, or anything with .label(phrase) -> "[NN]")
    gives each line's LHS: the label of e1 (see pivot.store.labels); without one every line
    is [X]. `agree` keeps only the pairs whose e1 and e2 labels are of one broad class (noun,
    verb, adjective, adverb, preposition); `stats`, if given, receives the counts written and
    dropped ("written", "disagree").
    """
    if agree and labeler is None:
        raise ValueError("agree=True compares labels: pass a labeler")
    if agree:
        from pivot.store.labels import same_class
    n = dropped = 0
    for e1, e2, p, p_rev, n_pivots, _ in db.iter_pairs(model):
        if labeler is not None:
            lhs = labeler.label(e1)
            if agree and not same_class(lhs, labeler.label(e2)):
                dropped += 1
                continue
            kwargs["lhs"] = lhs
        out.write(ppdb_line(e1, e2, p, p_rev, n_pivots, model=model, **kwargs))
        out.write("\n")
        n += 1
    if stats is not None:
        stats.update(written=n, disagree=dropped)
    return n
