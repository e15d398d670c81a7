"""The paraphrase database: one SQLite file per build, written whole or not at all.

Schema (every lookup is a primary-key range scan, never a table scan):

    meta(key PRIMARY KEY, value)            build signature, parameters, pruning, versions (JSON values)
    model(id PRIMARY KEY, name UNIQUE, kind, description, params)
    phrase(id PRIMARY KEY, text UNIQUE, n_words, count)
                                            English phrases; `count` is the phrase's support in the bitext
    pair(e1, e2, n_pivots, pivots)          PRIMARY KEY (e1, e2), WITHOUT ROWID; `pivots` names the
                                            foreign phrases behind the pair ("fr:traiter|de:behandeln")
    score(model, e1, rank, e2, p, p_rev)    PRIMARY KEY (model, e1, rank), WITHOUT ROWID: the paraphrases
                                            of e1 under a model are stored in rank order, best first,
                                            so "top k of e1" reads k consecutive rows.

`p` is the model's score of the pair, p(e2|e1). `p_rev` is p(e1|e2) when the reverse pair
survived pruning (NULL otherwise). Pairs a model gives zero are absent for that model.

Combined models (General+X, kind "combined") store no rows: their score is a logistic
regression over the stored p_general and p_X of the same pair, whose coefficients are in
`model.params`, so the reader computes it exactly (`lookup`, `scores`, `iter_pairs`). That
keeps the file one pivot model's size per combination smaller (each would repeat every
General pair) at the cost of scoring a phrase's General candidates at lookup time.

The writer builds the file under a temporary name in the destination folder and renames
it into place only after the last index is built, so a reader never sees half a database.
"""
from __future__ import annotations

import json
import math
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pivot.errors import InputError

SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE model (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, kind TEXT NOT NULL,
    description TEXT NOT NULL, params TEXT NOT NULL);
CREATE TABLE phrase (
    id INTEGER PRIMARY KEY, text TEXT NOT NULL, n_words INTEGER NOT NULL, count INTEGER NOT NULL);
CREATE TABLE pair (
    e1 INTEGER NOT NULL, e2 INTEGER NOT NULL, n_pivots INTEGER NOT NULL, pivots TEXT NOT NULL,
    PRIMARY KEY (e1, e2)) WITHOUT ROWID;
CREATE TABLE score (
    model INTEGER NOT NULL, e1 INTEGER NOT NULL, rank INTEGER NOT NULL, e2 INTEGER NOT NULL,
    p REAL NOT NULL, p_rev REAL,
    PRIMARY KEY (model, e1, rank)) WITHOUT ROWID;
"""


@dataclass(frozen=True)
class Paraphrase:
    """One answer of a lookup, best first."""

    paraphrase: str
    score: float
    p_rev: float | None
    rank: int
    n_pivots: int
    pivots: tuple[str, ...]


# ------------------------------------------------------------------------------------ writing


def _rank_within_e1(e1: np.ndarray, e2: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Rank of each row inside its e1 group by descending p, ties by ascending e2 (0 = best)."""
    order = np.lexsort((e2, -p, e1))
    sorted_e1 = e1[order]
    starts = np.flatnonzero(np.r_[True, sorted_e1[1:] != sorted_e1[:-1]])
    group_start = np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order)) - group_start
    return rank


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


def _reverse_lookup(e1: np.ndarray, e2: np.ndarray, values: np.ndarray) -> np.ndarray:
    """values[(e2, e1)] for each (e1, e2) where the reverse pair exists, NaN elsewhere."""
    row = find_pairs(e1, e2, e2, e1)
    out = np.full(len(e1), np.nan)
    out[row >= 0] = values[row[row >= 0]]
    return out


def write_database(
    path,
    *,
    phrases,
    phrase_counts: np.ndarray,
    e1: np.ndarray,
    e2: np.ndarray,
    n_pivots: np.ndarray,
    pivots: list[str],
    models: list[dict],
    scores: np.ndarray,
    meta: dict,
    progress: bool = False,
) -> Path:
    """Write a complete database to `path` atomically.

    phrases maps an English phrase id to its text (list or dict; only ids in e1/e2 are read).
    `models` are dicts {name, kind, description, params}; `scores` has one column per model
    whose kind is not "combined", in order. A zero (or NaN) score means the model does not
    propose the pair, and the row is not stored. A combined model's params hold
    {"base": name, "other": name, "fit": pivot.store.combined.Combination.to_meta()}.
    """
    import sqlite_utils  # imports pandas: kept off the lookup path, where it would triple start-up
    from tqdm import tqdm

    def bar(rows, total, what):
        return tqdm(rows, total=total, desc=f"database: {what}", unit="row", unit_scale=True,
                    disable=not progress, mininterval=1.0)

    path = Path(path)
    stored = [m for m in models if m["kind"] != "combined"]
    if scores.shape != (len(e1), len(stored)):
        raise ValueError(f"scores has shape {scores.shape}, expected ({len(e1)}, {len(stored)})")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    if tmp.exists():
        tmp.unlink()
    conn = sqlite3.connect(tmp)
    try:
        # The file is private until renamed: durability tricks are unnecessary while writing.
        conn.execute("PRAGMA journal_mode=OFF")
        conn.execute("PRAGMA synchronous=OFF")
        conn.executescript(SCHEMA)
        db = sqlite_utils.Database(conn)

        used = np.unique(np.concatenate([e1, e2])).astype(np.int64)
        db.conn.executemany(
            "INSERT INTO phrase VALUES (?, ?, ?, ?)",
            ((int(i), phrases[i], phrases[i].count(" ") + 1, int(phrase_counts[i])) for i in used),
        )
        db.conn.executemany(
            "INSERT INTO pair VALUES (?, ?, ?, ?)",
            bar(zip(e1.tolist(), e2.tolist(), n_pivots.tolist(), pivots), len(e1), "pairs"),
        )
        column = 0
        for model_id, spec in enumerate(models):
            db.conn.execute(
                "INSERT INTO model VALUES (?, ?, ?, ?, ?)",
                (model_id, spec["name"], spec["kind"], spec.get("description", ""),
                 json.dumps(spec.get("params", {}), sort_keys=True)),
            )
            if spec["kind"] == "combined":
                continue
            p = scores[:, column]
            column += 1
            keep = np.flatnonzero(np.nan_to_num(p) > 0)
            k_e1, k_e2, k_p = e1[keep], e2[keep], p[keep]
            rank = _rank_within_e1(k_e1, k_e2, k_p)
            p_rev = _reverse_lookup(k_e1, k_e2, k_p)
            rows = zip(
                [model_id] * len(keep), k_e1.tolist(), rank.tolist(), k_e2.tolist(),
                k_p.tolist(), [None if math.isnan(v) else v for v in p_rev.tolist()],
            )
            db.conn.executemany("INSERT INTO score VALUES (?, ?, ?, ?, ?, ?)", bar(rows, len(keep), spec["name"]))
        meta = {"schema_version": SCHEMA_VERSION, **meta}
        db.conn.executemany(
            "INSERT INTO meta VALUES (?, ?)",
            ((k, json.dumps(v, sort_keys=True)) for k, v in meta.items()),
        )
        # Lookups by text go through this index; pairs and scores are clustered by their keys.
        db["phrase"].create_index(["text"], unique=True)
        conn.commit()
        conn.execute("ANALYZE")
        conn.commit()
    except BaseException:
        conn.close()
        tmp.unlink(missing_ok=True)
        raise
    conn.close()
    os.replace(tmp, path)
    return path


# ------------------------------------------------------------------------------------ reading


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
        self._conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
        try:
            self.meta = {k: json.loads(v) for k, v in self._conn.execute("SELECT key, value FROM meta")}
            rows = self._conn.execute("SELECT id, name, kind, description, params FROM model ORDER BY id")
        except sqlite3.DatabaseError as exc:
            raise InputError(f"not a pivot paraphrase database ({exc})", path) from exc
        self._models = {
            name: {"id": i, "name": name, "kind": kind, "description": desc, "params": json.loads(params)}
            for i, name, kind, desc, params in rows
        }
        self._lang = self.meta.get("normalization", {}).get("lang", "en")

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
        """(base model id, other model id, fitted Combination) of a combined model."""
        from pivot.store.combined import Combination

        params = info["params"]
        return (self._model(params["base"])["id"], self._model(params["other"])["id"],
                Combination.from_meta(params["fit"]))

    def _combined_rows(self, info: dict, e1: int):
        """(e2, score) of every pair of e1 that the base model proposes, best first."""
        base, other, fit = self._combination(info)
        rows = self._conn.execute("SELECT e2, p FROM score WHERE model = ? AND e1 = ?", (base, e1)).fetchall()
        if not rows:
            return []
        p_x = dict(self._conn.execute("SELECT e2, p FROM score WHERE model = ? AND e1 = ?", (other, e1)))
        e2 = [r[0] for r in rows]
        score = fit.predict(np.array([r[1] for r in rows]), np.array([p_x.get(e, 0.0) for e in e2]))
        return sorted(zip(e2, score.tolist()), key=lambda r: (-r[1], r[0]))

    def lookup(self, phrase: str, k: int = 10, model: str = "general", *, normalize: bool = True) -> list[Paraphrase]:
        """The k best paraphrases of `phrase` under `model`, best first ([] if it has none)."""
        info = self._model(model)
        model_id = info["id"]
        e1 = self.phrase_id(phrase, normalize=normalize)
        if e1 is None:
            return []
        if info["kind"] == "combined":
            out = []
            for rank, (e2, score) in enumerate(self._combined_rows(info, e1)[:k]):
                text, n_piv, pivots = self._conn.execute(
                    "SELECT ph.text, pr.n_pivots, pr.pivots FROM phrase ph JOIN pair pr ON pr.e1 = ? AND pr.e2 = ph.id"
                    " WHERE ph.id = ?", (e1, e2)).fetchone()
                out.append(Paraphrase(text, score, None, rank, n_piv, tuple(pivots.split("|")) if pivots else ()))
            return out
        rows = self._conn.execute(
            """SELECT ph.text, s.p, s.p_rev, s.rank, pr.n_pivots, pr.pivots
                 FROM score s
                 JOIN phrase ph ON ph.id = s.e2
                 JOIN pair pr ON pr.e1 = s.e1 AND pr.e2 = s.e2
                WHERE s.model = ? AND s.e1 = ? AND s.rank < ?
                ORDER BY s.rank""",
            (model_id, e1, k),
        )
        return [
            Paraphrase(text, p, p_rev, rank, n_piv, tuple(pivots.split("|")) if pivots else ())
            for text, p, p_rev, rank, n_piv, pivots in rows
        ]

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
        model_id = info["id"]
        out = np.full(len(pairs), np.nan)
        for i, (a, b) in enumerate(pairs):
            e1, e2 = self.phrase_id(a, normalize=normalize), self.phrase_id(b, normalize=normalize)
            if e1 is None or e2 is None:
                continue
            row = self._conn.execute(
                "SELECT p FROM score WHERE model = ? AND e1 = ? AND e2 = ?", (model_id, e1, e2)
            ).fetchone()
            if row is not None:
                out[i] = row[0]
        return out

    def n_pairs(self, model: str = "general") -> int:
        info = self._model(model)
        if info["kind"] == "combined":
            return self.n_pairs(info["params"]["base"])
        model_id = info["id"]
        return self._conn.execute("SELECT count(*) FROM score WHERE model = ?", (model_id,)).fetchone()[0]

    def n_phrases(self) -> int:
        return self._conn.execute("SELECT count(*) FROM phrase").fetchone()[0]

    def iter_pairs(self, model: str = "general"):
        """Every (e1, e2, p, p_rev, n_pivots, pivots) of a model, grouped by e1, best first."""
        info = self._model(model)
        if info["kind"] == "combined":
            yield from self._iter_combined(info)
            return
        model_id = info["id"]
        yield from self._conn.execute(
            """SELECT a.text, b.text, s.p, s.p_rev, pr.n_pivots, pr.pivots
                 FROM score s
                 JOIN phrase a ON a.id = s.e1
                 JOIN phrase b ON b.id = s.e2
                 JOIN pair pr ON pr.e1 = s.e1 AND pr.e2 = s.e2
                WHERE s.model = ?
                ORDER BY s.e1, s.rank""",
            (model_id,),
        )

    def _iter_combined(self, info):
        base = self._combination(info)[0]
        text = dict(self._conn.execute("SELECT id, text FROM phrase"))
        e1s = [r[0] for r in self._conn.execute("SELECT DISTINCT e1 FROM score WHERE model = ?", (base,))]
        for e1 in e1s:
            for e2, score in self._combined_rows(info, e1):
                n_piv, pivots = self._conn.execute("SELECT n_pivots, pivots FROM pair WHERE e1 = ? AND e2 = ?",
                                                   (e1, e2)).fetchone()
                yield text[e1], text[e2], score, None, n_piv, pivots

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


def export_ppdb(db: ParaphraseDB, out, model: str = "general", **kwargs) -> int:
    """Write every pair of `model` as PPDB 2.0 lines to the text stream `out`; returns the count."""
    n = 0
    for e1, e2, p, p_rev, n_pivots, _ in db.iter_pairs(model):
        out.write(ppdb_line(e1, e2, p, p_rev, n_pivots, model=model, **kwargs))
        out.write("\n")
        n += 1
    return n
