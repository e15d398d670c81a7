"""The paraphrase database: one SQLite file per build, written whole or not at all.

Schema (version 3; every lookup is a primary-key range scan, never a table scan):

    meta(key PRIMARY KEY, value)            build signature, parameters, pruning, versions (JSON values)
    model(id PRIMARY KEY, name UNIQUE, kind, description, params, score_column, n_pairs)
                                            `score_column` names the model's column of `pair`
                                            ("p_0", ...), NULL for a combined model
    phrase(id PRIMARY KEY, text UNIQUE, n_words, count, lhs)
                                            English phrases; `count` is the phrase's support in the bitext,
                                            `lhs` its PPDB label ([NN], [NP], ..., [X])
    foreign_phrase(id PRIMARY KEY, text)    pivot phrases, "fr:traiter"
    pair(e1, e2, n_pivots, pivot1, pivot2, pivot3, p_0, p_1, ..., form, ppdb2,
         rel_eq, rel_fwd, rel_rev, rel_excl, rel_other, rel_indep, relation)
                                            PRIMARY KEY (e1, e2), WITHOUT ROWID: one row per pair, the
                                            ids of its best foreign phrases (NULL: none), one column
                                            per stored model, and PPDB 2.0's layer: the well-formedness
                                            bitmask, the learned score, the six relation probabilities
                                            (per mille) and the argmax relation (pivot.pipeline.ppdb2)

`p_j` is model j's score of the pair, p(e2|e1), NULL where the model gives the pair zero.
Neither the rank nor the reverse probability is stored: a phrase has a few dozen pairs, all
in consecutive rows of `pair`, so the reader sorts them by the model's column (descending,
ties by e2 id ascending) and takes p(e1|e2) from the reverse pair's row through the primary
key (NULL when the reverse pair did not survive pruning or the model gives it zero). One row
per pair instead of one per (model, pair) keeps the file and the write several times smaller.

Combined models (General+X, kind "combined") store no column: their score is a logistic
regression over p_general and p_X of the same row, whose coefficients are in `model.params`,
so the reader computes it exactly (`lookup`, `scores`, `iter_pairs`).

The learned model ("ppdb2", kind "learned", PPDB2.0Score) is scored by the `ppdb2` column and
is the default model of a database that has it (meta "default_model"). Every lookup hides the
pairs with a HIDDEN_FORMS flag (edge punctuation, a function-word-only difference, a dangling
edge) unless asked for all of them.

The writer is `pivot.store.write.write_database`.
"""
from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pivot.errors import InputError
from pivot.store.write import FORM_NAMES, HIDDEN_FORMS, RELATION_COLUMNS, RELATION_NAMES, SCHEMA_VERSION


@dataclass(frozen=True)
class Paraphrase:
    """One answer of a lookup, best first.

    ``form``: the names of the pair's well-formedness flags; ``ppdb2``: its learned score
    (None in a database without one); ``relation``: the most probable entailment relation and
    ``relations`` every relation's probability.
    """

    paraphrase: str
    score: float
    p_rev: float | None
    rank: int
    n_pivots: int
    pivots: tuple[str, ...]
    form: tuple[str, ...] = ()
    ppdb2: float | None = None
    relation: str | None = None
    relations: dict | None = None


def form_names(mask: int) -> tuple[str, ...]:
    """The names of the flags set in a `form` bitmask, in flag order."""
    return tuple(name for bit, name in FORM_NAMES.items() if mask & bit)


#: The layer's columns a lookup reads after a pair's own (see _layer).
_LAYER = ("form", "ppdb2", *RELATION_COLUMNS, "relation")


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


#: What a reader says of a file that lacks a table, a column or a readable value of the schema.
DAMAGED = "not a pivot paraphrase database, or a damaged one"

#: The columns every database has, table by table (`pair` has more: pivots and one per model).
SCHEMA_COLUMNS = {
    "meta": ("key", "value"),
    "model": ("id", "name", "kind", "description", "params", "score_column", "n_pairs"),
    "phrase": ("id", "text", "n_words", "count"),
    "foreign_phrase": ("id", "text"),
    "pair": ("e1", "e2", "n_pivots"),
}


def check_schema(conn: sqlite3.Connection, path) -> dict[str, list[str]]:
    """{table: its columns} of a paraphrase database, or InputError naming the first table or
    column of SCHEMA_COLUMNS it lacks (a dropped table would otherwise fail a later query,
    with a traceback, after part of the output was written)."""
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        out = {}
        for table, wanted in SCHEMA_COLUMNS.items():
            if table not in tables:
                raise InputError(f"{DAMAGED}: no table {table!r}", path)
            out[table] = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
            missing = [c for c in wanted if c not in out[table]]
            if missing:
                raise InputError(f"{DAMAGED}: table {table!r} lacks the columns {missing}", path)
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{DAMAGED}: {exc}", path) from exc
    return out


def _json_value(text, what: str, path):
    try:
        return json.loads(text)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{DAMAGED}: {what} is not JSON ({exc})", path) from None


def read_meta(conn: sqlite3.Connection, path) -> dict:
    """The `meta` table as {key: decoded JSON value}; InputError for a value that is not JSON."""
    try:
        rows = conn.execute("SELECT key, value FROM meta").fetchall()
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{DAMAGED}: {exc}", path) from exc
    return {k: _json_value(v, f"meta {k!r}", path) for k, v in rows}


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
        #: A database in parts (pivot.store.parts): its manifest, else None (a single file).
        self.manifest = None
        self._parts: dict[int, sqlite3.Connection] = {}
        self._shards: dict[int, sqlite3.Connection] = {}  # of the phrase index of a folder
        if self.path.is_dir():
            self._open_parts()
            return
        if not self.path.is_file():
            raise InputError("no such paraphrase database (build one with `pivot build`)", path)
        # A URI built from the resolved path (percent-encoded by pathlib): a file named
        # "a#b?.db" or "50%.db" opens that file, read-only, never another one.
        self._conn = sqlite3.connect(self.path.resolve().as_uri() + "?mode=ro", uri=True, check_same_thread=False)
        try:
            tables = check_schema(self._conn, path)
            self.meta = read_meta(self._conn, path)
            self._setup(tables["pair"], self._conn.execute(
                "SELECT id, name, kind, description, params, score_column, n_pairs FROM model ORDER BY id").fetchall())
        except InputError:
            self._conn.close()
            raise
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise InputError(f"{DAMAGED}: {exc}", path) from exc

    def _open_parts(self):
        """A folder: the manifest (every file present at its size); the phrase index's shards
        and the parts are opened when a query needs them (:meth:`_index`, :meth:`_pairs`)."""
        from pivot.store.parts import Manifest

        self.manifest = Manifest(self.path)
        self._conn = None  # no one file: a shard of the phrase index per text, a part per e1
        try:
            self.meta = self.manifest.data["meta"]
            if not isinstance(self.meta, dict):
                raise TypeError("the manifest's meta is not a JSON object")
            models = [(i, m["name"], m["kind"], m["description"], json.dumps(m["params"]), m["score_column"],
                       m["n_pairs"]) for i, m in enumerate(self.manifest.data["models"])]
            self._setup(list(self.manifest.data["pair_columns"]), models)
        except (KeyError, TypeError, ValueError) as exc:
            self.close()
            raise InputError(f"{DAMAGED}: unreadable manifest values ({type(exc).__name__}: {exc})",
                             self.path / "manifest.json") from None

    def _index(self, text: str) -> sqlite3.Connection:
        """The connection holding the phrase ``text`` if it is stored: the file, or the shard of
        the phrase index its hash names."""
        return self._conn if self.manifest is None else self._shard(self.manifest.shard_of(text))

    def _shard(self, j: int) -> sqlite3.Connection:
        """Shard j of the phrase index (opened on first use, its sha256, schema and meta checked)."""
        def has_phrases(conn, path):
            conn.execute("SELECT id, text, count FROM phrase LIMIT 1").fetchall()
        return self._member(self._shards, "shard", j, self.manifest.index_path, has_phrases)

    def _member(self, cache: dict, kind: str, k: int, path_of, check) -> sqlite3.Connection:
        """File k of a kind ("part", "shard") of the folder, from ``cache`` or opened read-only:
        its sha256 (``path_of``), its tables (``check``) and its meta's index and signature checked."""
        conn = cache.get(k)
        if conn is not None:
            return conn
        path = path_of(k)
        conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, check_same_thread=False)
        try:
            check(conn, path)
            meta = read_meta(conn, path)
            got = meta.get(kind) if isinstance(meta.get(kind), dict) else {}
            if got.get("index") != k or meta.get("signature") != self.meta.get("signature"):
                raise InputError(f"{DAMAGED}: the {kind}'s meta says {kind} {got.get('index')} of signature "
                                 f"{meta.get('signature')!r}, the manifest {kind} {k} of {self.meta.get('signature')!r}",
                                 path)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise InputError(f"{DAMAGED}: {exc}", path) from exc
        except BaseException:
            conn.close()
            raise
        cache[k] = conn
        return conn

    def _index_conns(self):
        """Every connection holding phrases: the file, or the phrase index's shards in turn."""
        return self._every(self._shard, "shards")

    def _every(self, open_one, files: str):
        """The file's connection, or each of the folder's ``files`` ("parts", "shards") in turn."""
        if self.manifest is None:
            yield self._conn
        else:
            for k in range(len(getattr(self.manifest, files))):
                yield open_one(k)

    def _pairs(self, e1: int) -> sqlite3.Connection | None:
        """The connection holding the pairs of phrase id e1: the file, or the one part whose range
        holds e1 (opened on first use, its sha256, schema and meta checked); None: no part does."""
        if self.manifest is None:
            return self._conn
        k = self.manifest.part_of(e1)
        return None if k is None else self._part(k)

    def _part(self, k: int) -> sqlite3.Connection:
        """Part k (opened on first use, its sha256, schema and meta checked)."""
        return self._member(self._parts, "part", k, self.manifest.part_path, check_schema)

    def _part_conns(self):
        """Every connection holding pairs, in key order (the file, or the parts in turn)."""
        return self._every(self._part, "parts")

    def _reverse(self, col: str, alias: str = "rv", key=("t.e2", "?1")) -> tuple[str, str]:
        """(the value, the joins) of `col` in the reverse pair's row: `pair`, and in a part also
        `reverse` (the rows of reverse pairs stored in another part)."""
        a, b = key
        join = f"LEFT JOIN pair {alias} ON {alias}.e1 = {a} AND {alias}.e2 = {b}"
        if self.manifest is None:
            return f"{alias}.{col}", join
        return (f"COALESCE({alias}.{col}, {alias}x.{col})",
                f"{join} LEFT JOIN reverse {alias}x ON {alias}x.e1 = {a} AND {alias}x.e2 = {b}")

    def _setup(self, pair_columns, model_rows):
        path = self.path
        try:
            version = self.meta.get("schema_version")
            if version != SCHEMA_VERSION:
                raise InputError(f"database schema version {version}, this pivot reads version {SCHEMA_VERSION}: "
                                 "rebuild it with `pivot build`", path)
            self._models = {}
            for i, name, kind, desc, params, column, n in model_rows:
                self._models[name] = {"id": i, "name": name, "kind": kind, "description": desc,
                                      "params": _json_value(params, f"model {name!r} params", path),
                                      "column": column, "n_pairs": n}
            # Column names are spliced into SQL text (a column cannot be a parameter): accept
            # only columns the table really has.
            for info in self._models.values():
                if info["kind"] != "combined" and info["column"] not in pair_columns:
                    raise InputError(f"model {info['name']!r} names a missing column {info['column']!r}", path)
            self._lang = self.meta.get("normalization", {}).get("lang", "en")
            # How many paraphrases a lookup shows by default: the recipe's top_n. The database
            # stores every pair above the probability floor, so this is a view, not a cut.
            pruning = self.meta.get("pruning") or {}
            self.default_k = int(pruning.get("lookup_top_n") or DEFAULT_K)
        except InputError:
            self.close()
            raise
        except sqlite3.DatabaseError as exc:
            self.close()
            raise InputError(f"{DAMAGED}: {exc}", path) from exc
        except (AttributeError, TypeError, ValueError) as exc:  # a meta value of the wrong shape
            self.close()
            raise InputError(f"{DAMAGED}: unreadable meta or model values ({type(exc).__name__}: {exc})",
                             path) from None
        pivots = [c for c in pair_columns if c.startswith("pivot") and c[5:].isdigit()]
        self._pivot_select = ", ".join(f"f{j}.text" for j in range(len(pivots)))
        self._pivot_join = " ".join(f"LEFT JOIN foreign_phrase f{j} ON f{j}.id = t.{c}"
                                    for j, c in enumerate(pivots))
        self._pivot_columns = ", ".join(pivots)
        self._n_pivot_columns = len(pivots)
        self._learned = bool((self.meta.get("ppdb2") or {}).get("learned"))
        self._classified = bool((self.meta.get("relations") or {}).get("classified"))
        default = self.meta.get("default_model")
        #: The model a lookup ranks by when none is named: the learned model when there is one.
        self.default_model = default if default in self._models else next(iter(self._models), None)

    def close(self):
        if self._conn is not None:
            self._conn.close()
        for conn in [*self._parts.values(), *self._shards.values()]:
            conn.close()
        self._parts, self._shards = {}, {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- models and phrases

    @property
    def models(self) -> list[str]:
        """Model names in build order; the first is General (the learned model comes last)."""
        return list(self._models)

    @property
    def stored_models(self) -> list[str]:
        """The models with a probability column p(e2|e1) (not combined, not learned), in column order."""
        return [m for m, info in self._models.items() if info["kind"] not in ("combined", "learned")]

    def _layer(self, values) -> dict:
        """Paraphrase fields from the _LAYER columns of a pair (a database without a learned
        score or a classifier reports None for them)."""
        form, ppdb2, *rel, relation = values
        out = {"form": form_names(form)}
        if self._learned:
            out["ppdb2"] = ppdb2
        if self._classified:
            if not 0 <= relation < len(RELATION_NAMES):
                raise InputError(f"{DAMAGED}: a pair's relation is {relation} (0..{len(RELATION_NAMES) - 1})", self.path)
            out["relation"] = RELATION_NAMES[relation]
            out["relations"] = {name: v / 1000 for name, v in zip(RELATION_NAMES, rel)}
        return out

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
        row = self._index(text).execute("SELECT id FROM phrase WHERE text = ?", (text,)).fetchone()
        return None if row is None else row[0]

    def phrase_ids(self, texts) -> dict[str, int]:
        """{text: id} of those of ``texts`` (normalised already) the database stores; one query
        per 500 texts of a file or of a shard of the phrase index."""
        by_conn: dict[int, tuple] = {}
        for t in dict.fromkeys(texts):
            conn = self._index(t)
            by_conn.setdefault(id(conn), (conn, []))[1].append(t)
        out = {}
        for conn, todo in by_conn.values():
            for x in range(0, len(todo), 500):
                chunk = todo[x:x + 500]
                q = "SELECT text, id FROM phrase WHERE text IN (%s)" % ",".join("?" * len(chunk))
                out.update(conn.execute(q, chunk))
        return out

    # -- queries

    def _combination(self, info: dict):
        """(base model column, other model column, fitted Combination) of a combined model."""
        from pivot.store.combined import Combination

        params = info["params"]
        return (self._model(params["base"])["column"], self._model(params["other"])["column"],
                Combination.from_meta(params["fit"]))

    def _details(self, e1: int, e2s) -> dict:
        """{e2: (text, n_pivots, pivots tuple, layer fields)} of the pairs (e1, e2) for e2 in e2s."""
        out = {}
        layer = ", ".join(f"t.{c}" for c in _LAYER)
        conn = self._pairs(e1)
        for e2 in e2s:
            row = conn.execute(
                f"""SELECT ph.text, t.n_pivots, {layer}{', ' if self._pivot_select else ''}{self._pivot_select}
                      FROM pair t JOIN phrase ph ON ph.id = t.e2 {self._pivot_join}
                     WHERE t.e1 = ? AND t.e2 = ?""", (e1, e2)).fetchone()
            k = 2 + len(_LAYER)
            out[e2] = (row[0], row[1], tuple(f for f in row[k:] if f is not None), self._layer(row[2:k]))
        return out

    def _combined_rows(self, info: dict, e1: int, all: bool = False):
        """(e2, score) of every pair of e1 that the base model proposes (and no HIDDEN_FORMS
        flag hides, unless all), best first."""
        base, other, fit = self._combination(info)
        hide = "" if all else f" AND (form & {HIDDEN_FORMS}) = 0"
        conn = self._pairs(e1)
        if conn is None:
            return []
        rows = conn.execute(
            f"SELECT e2, {base}, {other} FROM pair WHERE e1 = ? AND {base} IS NOT NULL{hide}", (e1,)).fetchall()
        if not rows:
            return []
        return self._rank_combined(fit, rows)

    @staticmethod
    def _rank_combined(fit, rows):
        """rows (e2, p_base, p_other or None, ...) -> [(e2, score, *rest)] best first, ties by e2."""
        score = fit.predict(np.array([r[1] for r in rows], dtype=np.float64),
                            np.array([0.0 if r[2] is None else r[2] for r in rows], dtype=np.float64))
        return sorted(((r[0], s, *r[3:]) for r, s in zip(rows, score.tolist())), key=lambda r: (-r[1], r[0]))

    def lookup(self, phrase: str, k: int | None = None, model: str | None = None, *,
               normalize: bool = True, all: bool = False) -> list[Paraphrase]:
        """The k best paraphrases of `phrase` under `model`, best first ([] if it has none).

        k=None: the database's default (the recipe's ``[pivot] top_n``; 10 for a database
        that does not record one). model=None: the database's default model (the learned
        score when it has one). Pairs with a HIDDEN_FORMS flag are left out unless ``all``.
        """
        if k is None:
            k = self.default_k
        info = self._model(self.default_model if model is None else model)
        e1 = self.phrase_id(phrase, normalize=normalize)
        if e1 is None or k <= 0:
            return []
        if info["kind"] == "combined":
            best = self._combined_rows(info, e1, all)[:k]
            details = self._details(e1, [e2 for e2, _ in best])
            return [Paraphrase(details[e2][0], score, None, rank, details[e2][1], details[e2][2], **details[e2][3])
                    for rank, (e2, score) in enumerate(best)]
        col = info["column"]
        hide = "" if all else f" AND (form & {HIDDEN_FORMS}) = 0"
        layer = ", ".join(_LAYER)
        # The inner query picks the k best rows of e1 (a primary-key range of a few dozen rows,
        # sorted); only those k are joined to their text, reverse pair and pivots.
        piv = f", {self._pivot_columns}" if self._pivot_columns else ""
        conn = self._pairs(e1)
        if conn is None:  # a phrase that is only ever a paraphrase (a database in parts has no part for it)
            return []
        rev, rev_join = self._reverse(col)
        rows = conn.execute(
            f"""SELECT ph.text, t.p, {rev}, t.n_pivots, {", ".join(f"t.{c}" for c in _LAYER)}
                       {', ' if self._pivot_select else ''}{self._pivot_select}
                  FROM (SELECT e2, {col} AS p, n_pivots, {layer}{piv} FROM pair
                         WHERE e1 = ?1 AND {col} IS NOT NULL{hide} ORDER BY {col} DESC, e2 LIMIT ?2) t
                  JOIN phrase ph ON ph.id = t.e2
                  {rev_join}
                  {self._pivot_join}
                 ORDER BY t.p DESC, t.e2""",
            (e1, k),
        )
        n = len(_LAYER)
        return [Paraphrase(text, p, p_rev, rank, n_piv, tuple(f for f in rest[n:] if f is not None),
                           **self._layer(rest[:n]))
                for rank, (text, p, p_rev, n_piv, *rest) in enumerate(rows)]

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
            conn = None if e1 is None or e2 is None else self._pairs(e1)
            if conn is None:
                continue
            row = conn.execute(f"SELECT {col} FROM pair WHERE e1 = ? AND e2 = ?", (e1, e2)).fetchone()
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
        stored = self.stored_models
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
                ids[text] = self._index(t).execute("SELECT id, count FROM phrase WHERE text = ?", (t,)).fetchone()
            return ids[text]

        for i, (a, b) in enumerate(pairs):
            ra, rb = phrase(a), phrase(b)
            out["count_e1"][i] = 0 if ra is None else ra[1]
            out["count_e2"][i] = 0 if rb is None else rb[1]
            conn = None if ra is None or rb is None else self._pairs(ra[0])
            if conn is None:
                continue
            row = conn.execute(sql, (ra[0], rb[0])).fetchone()
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
        return sum(conn.execute("SELECT count(*) FROM phrase").fetchone()[0] for conn in self._index_conns())

    def iter_pairs(self, model: str = "general"):
        """Every (e1, e2, p, p_rev, n_pivots, pivots) of a model, grouped by e1, best first.

        `pivots` is the pair's foreign phrases joined by "|" ("fr:traiter|fr:soigner").
        """
        info = self._model(model)
        if info["kind"] == "combined":
            yield from self._iter_combined(info)
            return
        col = info["column"]
        rev, rev_join = self._reverse(col, key=("t.e2", "t.e1"))
        for conn in self._part_conns():  # a folder's parts hold consecutive e1 ranges
            rows = conn.execute(
                f"""SELECT a.text, b.text, t.{col}, {rev}, t.n_pivots{', ' if self._pivot_select else ''}{self._pivot_select}
                      FROM pair t
                      JOIN phrase a ON a.id = t.e1
                      JOIN phrase b ON b.id = t.e2
                      {rev_join}
                      {self._pivot_join}
                     WHERE t.{col} IS NOT NULL
                     ORDER BY t.e1, t.{col} DESC, t.e2""")
            for a, b, p, p_rev, n_piv, *piv in rows:
                yield a, b, p, p_rev, n_piv, "|".join(f for f in piv if f is not None)

    def _iter_combined(self, info):
        """One pass over the base model's pairs in key order, scored and sorted one e1 at a time."""
        from itertools import groupby

        base, other, fit = self._combination(info)
        for conn in self._part_conns():
            rows = conn.execute(
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
