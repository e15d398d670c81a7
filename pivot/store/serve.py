"""Browse a paraphrase database with datasette (`pivot serve bio.db`).

The database is served read-only and immutable (it is written once by `pivot build`), with
metadata generated from the file itself: a description of every table and column, every
model (name, kind, description, pair count, column) from the `model` table, and two canned
queries: `paraphrases` (the paraphrases of a phrase under a model, best first, the same
ranking as `pivot lookup`, combined models included) and `models`.

Datasette opens its files as `file:{path}?immutable=1` URIs without escaping them, so a path
holding "#", "?" or "%" is served through a symlink with a plain name in a private temporary
folder; the file itself is never parsed as a URI.
"""
from __future__ import annotations

import html
import json
import re
import sqlite3
import tempfile
from pathlib import Path

from pivot.errors import InputError
from pivot.store.db import DAMAGED, check_schema, read_meta
from pivot.store.search import FTS_TABLE, connect

PAGE_SIZE = 50
URI_CHARS = set("#?%")

TABLES = {
    "meta": ("How the database was built: one JSON value per key (signature, recipe, parameters, "
             "pruning, versions, corpus statistics).",
             {"key": "name of the entry", "value": "its JSON value"}),
    "model": ("The paraphrase models, in build order; the first is General.",
              {"id": "model number", "name": "model name (the --model of pivot lookup)",
               "kind": "general, top-tau, change-point, weighted, weighted-ppl or combined",
               "description": "how the model weights the bitext",
               "params": "JSON parameters (a combined model: its base, other and logistic fit)",
               "score_column": "the column of pair holding the model's scores (NULL: combined, computed)",
               "n_pairs": "pairs the model proposes"}),
    "phrase": ("English phrases (lower-cased, Moses-tokenised) that take part in a pair.",
               {"id": "phrase id (pair.e1, pair.e2)", "text": "the phrase as stored",
                "n_words": "number of tokens", "count": "support of the phrase in the bitext"}),
    "foreign_phrase": ("Pivot (foreign-language) phrases, prefixed by their language.",
                       {"id": "foreign phrase id (pair.pivot1, ...)", "text": "language:phrase, e.g. fr:traiter"}),
    "pair": ("One row per paraphrase pair e1 -> e2, with one score column per stored model. "
             "Read it through the canned query 'paraphrases' for text and rankings.",
             {"e1": "phrase id of the phrase (phrase.id)", "e2": "phrase id of its paraphrase (phrase.id)",
              "n_pivots": "number of foreign phrases shared by e1 and e2"}),
}


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _has_math(conn: sqlite3.Connection) -> bool:
    try:
        conn.execute("SELECT ln(1.0), exp(0.0)").fetchone()
        return True
    except sqlite3.OperationalError:
        return False


def _models(conn):
    return [{"id": i, "name": name, "kind": kind, "description": desc, "params": json.loads(params),
             "column": column, "n_pairs": n}
            for i, name, kind, desc, params, column, n in
            conn.execute("SELECT id, name, kind, description, params, score_column, n_pairs FROM model ORDER BY id")]


def _combined_sql(fit: dict, base: str, other: str) -> str | None:
    """The combined model's score as SQL: 1 / (1 + exp(-beta . x)), as pivot.store.combined."""
    from pivot.store.combined import FLOOR_LOG_P

    feature_sql = {"const": "1.0", "log_p_general": f"ln(t.{base})",
                   "log_p_x": f"coalesce(ln(t.{other}), {FLOOR_LOG_P!r})",
                   "x_missing": f"(t.{other} IS NULL)"}
    terms = []
    for name in fit.get("features", []):
        coef = float(fit["params"][name])
        if name not in feature_sql or coef != coef or coef in (float("inf"), float("-inf")):
            return None
        terms.append(f"({coef!r}) * {feature_sql[name]}")
    if not terms:
        return None
    return f"1.0 / (1.0 + exp(-({' + '.join(terms)})))"


def paraphrases_sql(conn: sqlite3.Connection) -> str:
    """The canned query: paraphrases of :phrase under :model, best first (ties by e2 id).

    Column names come from the model table and are checked against the pair table; model
    names reach the SQL only as quoted string literals.
    """
    pair_columns = [r[1] for r in conn.execute("PRAGMA table_info(pair)")]
    # a part of a database in parts holds the reverse rows of other parts in `reverse`
    in_parts = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'reverse'").fetchone()
    models = _models(conn)
    by_name = {m["name"]: m for m in models}
    math_ok = _has_math(conn)
    score, reverse = [], []
    for m in models:
        if m["kind"] == "combined":
            params = m["params"]
            base, other = by_name.get(params.get("base")), by_name.get(params.get("other"))
            if not math_ok or base is None or other is None or not {base["column"], other["column"]} <= set(pair_columns):
                continue
            expr = _combined_sql(params.get("fit", {}), base["column"], other["column"])
            if expr is not None:
                score.append(f"WHEN {_sql_string(m['name'])} THEN {expr}")
        elif m["column"] in pair_columns:
            score.append(f"WHEN {_sql_string(m['name'])} THEN t.{m['column']}")
            reverse.append(f"WHEN {_sql_string(m['name'])} THEN "
                           + (f"COALESCE(rv.{m['column']}, rx.{m['column']})" if in_parts else f"rv.{m['column']}"))
    pivots = [c for c in pair_columns if c.startswith("pivot") and c[5:].isdigit()]
    pivot_select = "".join(f", f{j}.text AS {c}" for j, c in enumerate(pivots))
    pivot_join = "".join(f"\n  LEFT JOIN foreign_phrase f{j} ON f{j}.id = t.{c}" for j, c in enumerate(pivots))
    rx_join = "\n  LEFT JOIN reverse rx ON rx.e1 = t.e2 AND rx.e2 = t.e1" if in_parts else ""
    score_case = "CASE :model " + " ".join(score) + " END" if score else "NULL"
    reverse_case = "CASE :model " + " ".join(reverse) + " END" if reverse else "NULL"
    return f"""SELECT paraphrase, score, p_rev, n_pivots{''.join(', ' + c for c in pivots)}
FROM (
  SELECT b.text AS paraphrase, t.e2 AS e2,
         {score_case} AS score,
         {reverse_case} AS p_rev,
         t.n_pivots AS n_pivots{pivot_select}
  FROM phrase a
  JOIN pair t ON t.e1 = a.id
  JOIN phrase b ON b.id = t.e2
  LEFT JOIN pair rv ON rv.e1 = t.e2 AND rv.e2 = t.e1{rx_join}{pivot_join}
  WHERE a.text = lower(trim(:phrase))
)
WHERE score IS NOT NULL
ORDER BY score DESC, e2
LIMIT 100"""


def metadata(path, name: str | None = None) -> dict:
    """Datasette metadata for the database at `path`, served under `name` (default: file stem)."""
    path = Path(path)
    name = name or _db_name(path)
    conn = connect(path)
    try:
        check_schema(conn, path)
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        meta = read_meta(conn, path)
        try:
            models = _models(conn)
        except ValueError as exc:  # a model's params that are not JSON
            raise InputError(f"{DAMAGED}: a model's params are not JSON ({exc})", path) from None
        sql = paraphrases_sql(conn)
        math_ok = _has_math(conn)
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{DAMAGED}: {exc}", path) from exc
    finally:
        conn.close()
    signature = meta.get("signature", "unknown")
    column_model = {m["column"]: m for m in models if m["column"]}
    table_meta = {}
    for table, (description, columns) in TABLES.items():
        cols = dict(columns)
        if table == "pair":
            for col, m in column_model.items():
                cols[col] = (f"model {m['name']} ({m['kind']}): {m['description']}. p(e2|e1); "
                             "NULL where the model does not propose the pair")
            cols.update({f"pivot{j}": f"foreign_phrase.id of the pair's {j}. best pivot phrase (NULL: none)"
                         for j in range(1, 10)})
        table_meta[table] = {"description": description, "columns": cols}
    table_meta["phrase"].update(label_column="text", sort_desc="count")
    table_meta["model"]["sort"] = "id"
    if FTS_TABLE in tables:
        table_meta[FTS_TABLE] = {"hidden": True}
    table_meta["sqlite_stat1"] = {"hidden": True}

    rows = "".join(
        f"<tr><td>{html.escape(m['name'])}</td><td>{html.escape(m['kind'])}</td>"
        f"<td>{html.escape(m['description'])}</td><td>{m['n_pairs']:,}</td>"
        f"<td>{html.escape(m['column'] or 'computed')}</td></tr>" for m in models)
    models_html = ("<table><tr><th>model</th><th>kind</th><th>description</th><th>pairs</th><th>column</th></tr>"
                   f"{rows}</table>")
    example = next((m["name"] for m in models), "general")
    combined_note = "" if math_ok else (" Combined models need SQLite's math functions (ln, exp), which this "
                                        "SQLite lacks: use `pivot lookup` for them.")
    return {
        "title": f"pivot paraphrase database: {name}",
        "description_html": (f"<p>Built by pivot (weighted bilingual pivoting). Signature: "
                             f"<code>{html.escape(str(signature))}</code></p>"),
        "databases": {
            name: {
                "description_html": f"<p>{len(models)} models:</p>{models_html}",
                "tables": table_meta,
                "queries": {
                    "paraphrases": {
                        "title": "Paraphrases of a phrase under a model",
                        "description": ("The best paraphrases of a phrase (as stored: lower-case, tokenised) under "
                                        f"a model (e.g. {example}), best first: the ranking of `pivot lookup`. "
                                        "score is p(e2|e1) (a combined model: its logistic score), p_rev p(e1|e2)."
                                        + combined_note),
                        "sql": sql,
                        "hide_sql": True,  # one CASE arm per model: long
                    },
                    "models": {
                        "title": "Models",
                        "description": "Every model of the database with its description and number of pairs.",
                        "sql": "SELECT name, kind, description, n_pairs, score_column FROM model ORDER BY id",
                    },
                },
            }
        },
    }


def _db_name(path: Path) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", path.stem) or "paraphrases"


#: The extra that brings datasette (and with it uvicorn, the server it runs on).
SERVE_HINT = "pip install 'pivot-paraphrase[serve]' (from a checkout: pip install -e '.[serve]')"


def make_datasette(path, *, settings: dict | None = None):
    """A Datasette instance serving `path` read-only (immutable) with pivot's metadata."""
    try:
        from datasette.app import Datasette
    except ImportError as exc:
        raise InputError(f"pivot serve needs datasette ({exc}): {SERVE_HINT}") from None
    path = Path(path)
    if path.is_dir():
        return _datasette_parts(Datasette, path, settings)
    if not path.is_file():
        raise InputError("no such paraphrase database (build one with `pivot build`)", path)
    name = _db_name(path)
    meta = metadata(path, name)
    served, tmp = path.resolve(), None
    if URI_CHARS & set(str(served)) or served.stem != name:
        tmp = tempfile.TemporaryDirectory(prefix="pivot-serve-")
        if URI_CHARS & set(tmp.name):
            raise InputError(f"the temporary folder {tmp.name!r} holds one of {''.join(sorted(URI_CHARS))}: "
                             "set TMPDIR to a plain folder", path)
        link = Path(tmp.name) / f"{name}.db"
        link.symlink_to(served)
        served = link
    ds = Datasette(immutables=[str(served)], metadata=meta,
                   settings={"default_page_size": PAGE_SIZE, "suggest_facets": False, **(settings or {})})
    ds._pivot_tmp = tmp  # the symlink's folder lives as long as the server
    return ds


def _datasette_parts(Datasette, folder: Path, settings: dict | None):
    """A database in parts served as its parts, one datasette database each (every part is a
    whole schema-3 database of its English range, with the `paraphrases` query for the phrases
    of that range; its description names the range), and the phrase index."""
    from pivot.store.parts import Manifest

    m = Manifest(folder)
    stem = _db_name(folder)
    tmp = tempfile.TemporaryDirectory(prefix="pivot-serve-")
    if URI_CHARS & set(tmp.name):
        raise InputError(f"the temporary folder {tmp.name!r} holds one of {''.join(sorted(URI_CHARS))}: "
                         "set TMPDIR to a plain folder", folder)
    served, meta = [], None
    for k, part in enumerate(m.parts):
        name = f"{stem}-{Path(part['file']).stem}"
        link = Path(tmp.name) / f"{name}.db"
        link.symlink_to(m.part_path(k).resolve())  # its sha256 checked first
        served.append(str(link))
        part_meta = metadata(m.part_path(k), name)
        first, last = part["first"]["text"], part["last"]["text"]
        part_meta["databases"][name]["description_html"] = (
            f"<p>Part {k + 1} of {len(m.parts)}: the phrases with ids {part['e1_range'][0]} to "
            f"{part['e1_range'][1] - 1} (from {html.escape(str(first))!r} to {html.escape(str(last))!r}); "
            f"`pivot lookup {html.escape(str(folder))} PHRASE` finds any phrase's part.</p>"
            + part_meta["databases"][name]["description_html"])
        if meta is None:
            meta = part_meta
        else:
            meta["databases"].update(part_meta["databases"])
    for j, shard in enumerate(m.shards):
        index = Path(tmp.name) / f"{stem}-{Path(shard['file']).stem}.db"
        index.symlink_to(m.index_path(j).resolve())
        served.append(str(index))
        meta["databases"][index.stem] = {
            "description_html": f"<p>Shard {j + 1} of {len(m.shards)} of the phrase index: the English phrases "
                                "whose text hashes here (phrase.id is pair.e1 and pair.e2 of the parts; a "
                                "part's own phrase and foreign_phrase tables name the phrases of its pairs).</p>"}
    meta["title"] = f"pivot paraphrase database in {len(m.parts)} parts: {stem}"
    ds = Datasette(immutables=served, metadata=meta,
                   settings={"default_page_size": PAGE_SIZE, "suggest_facets": False, **(settings or {})})
    ds._pivot_tmp = tmp
    return ds


def serve(path, host: str = "127.0.0.1", port: int = 8001) -> None:
    """Run datasette on host:port until interrupted."""
    import asyncio

    try:
        import uvicorn
    except ImportError as exc:
        raise InputError(f"pivot serve needs uvicorn, which datasette brings ({exc}): {SERVE_HINT}") from None
    ds = make_datasette(path)
    if port == 0:  # any free port, known before uvicorn starts so that it can be printed
        import socket

        with socket.socket() as sock:
            sock.bind((host, 0))
            port = sock.getsockname()[1]
    asyncio.run(ds.invoke_startup())
    print(f"serving {path} at http://{host}:{port}/{_db_name(Path(path))} (Ctrl-C stops)", flush=True)
    uvicorn.run(ds.app(), host=host, port=port, log_level="warning")
