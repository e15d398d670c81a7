"""Phrase search over a paraphrase database through an SQLite FTS5 index.

`pivot search bio.db 'tumo*r'` lists the stored phrases that contain a word matching the
pattern, most frequent first, with their support count and their number of paraphrases.

Patterns are matched against the phrases as stored (lower-cased, Moses-tokenised, one space
between tokens). A pattern is one or more words; each word is a glob on one token of the
phrase (`*` any run of characters within the token, `?` one character), and the words must
be consecutive tokens of the phrase, in order. `whole=True` asks the pattern to cover the
whole phrase instead.

The index is an external-content FTS5 table `phrase_fts` over `phrase.text` (no copy of the
text; `detail=none`, so it only answers "which phrases hold this token or token prefix",
which is all the search needs). The pattern is turned into an FTS5 query that every match
satisfies (whole tokens and token prefixes: `tumo*r` -> `"tumo"*`), and the candidates are
then checked against the exact pattern, so the index only narrows the search. A pattern
with no usable prefix (`*mab`) scans the phrase table.

The index is built by `build_phrase_index(path)` (at build time, or on the first search when
the file is writable; one transaction, so a reader never sees half an index). The database
is otherwise read-only here. Paths are never parsed as SQLite URIs: a file named `a#b?.db`
opens that file.
"""
from __future__ import annotations

import os
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from pivot.errors import InputError
from pivot.store.db import check_schema, read_meta
from pivot.store.write import FTS_SQL, FTS_TABLE  # noqa: F401 (serve reads them here)



def connect(path, *, write: bool = False, timeout: float = 60.0) -> sqlite3.Connection:
    """A connection to the database file `path`, read-only unless `write`.

    The file name is percent-encoded into a `file:` URI (Path.as_uri), so "#", "?" and "%" in
    it are part of the name; a plain name would be read as a URI anyway when it starts with
    "file:" and SQLite was built with SQLITE_USE_URI (Debian's is).
    """
    path = Path(path)
    if not path.is_file():
        raise InputError("no such paraphrase database (build one with `pivot build`)", path)
    mode = "rw" if write else "ro"
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode={mode}", uri=True, timeout=timeout,
                           check_same_thread=False)


def has_phrase_index(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                        (FTS_TABLE,)).fetchone() is not None


def _check_database(conn: sqlite3.Connection, path) -> None:
    check_schema(conn, path)
    read_meta(conn, path)


def build_phrase_index(path) -> bool:
    """Add the FTS5 phrase index to the database at `path`; False if it already has one.

    One IMMEDIATE transaction: concurrent builders wait for each other and the second finds
    the index made. Deterministic: the same database gives the same bytes. Raises InputError
    when the file (or its folder, where SQLite puts its journal) is not writable.
    """
    path = Path(path)
    probe = connect(path)
    try:
        _check_database(probe, path)
        if has_phrase_index(probe):
            return False
    finally:
        probe.close()
    if not os.access(path, os.W_OK) or not os.access(path.resolve().parent, os.W_OK):
        raise InputError(
            "the phrase search index is not built and this database is read-only (the file or its folder): "
            f"copy it (cp '{path}' mine.db) and search the copy, or build the index where it is writable "
            "with `pivot search DB --build-index`", path)
    conn = connect(path, write=True)
    try:
        conn.isolation_level = None
        conn.execute("BEGIN IMMEDIATE")
        try:
            if has_phrase_index(conn):
                conn.execute("ROLLBACK")
                return False
            conn.execute(FTS_SQL)
            conn.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('rebuild')")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    except sqlite3.OperationalError as exc:
        raise InputError(f"cannot add the phrase search index ({exc}); search a writable copy", path) from exc
    finally:
        conn.close()
    return True


# ------------------------------------------------------------------------------------ patterns


def _token_terms(segment: str, at_word_start: bool, at_word_end: bool) -> list[str]:
    """FTS5 terms that every token string matching `segment` in that position must hold.

    FTS5's unicode61 tokenizer splits at every ASCII character that is not a letter or digit;
    what it does with other characters depends on their Unicode class, so a run next to a
    non-ASCII character is treated as possibly continuing across it (neither anchored there).
    A run anchored on both sides is a whole token ("il"), on the left only a prefix ("tumo"*);
    a run not anchored on the left cannot be asked of the index and is left to the check.
    """
    terms = []
    for m in re.finditer(r"[A-Za-z0-9]+", segment):
        before = segment[m.start() - 1] if m.start() > 0 else None
        after = segment[m.end()] if m.end() < len(segment) else None
        left = at_word_start if before is None else before.isascii()
        right = at_word_end if after is None else after.isascii()
        if left:
            term = m.group().lower()
            terms.append(f'"{term}"' if right else f'"{term}"*')
    return terms


@dataclass(frozen=True)
class Pattern:
    """A compiled search pattern: the FTS5 query that narrows (None: scan), an SQLite GLOB
    that every match satisfies (checked in SQL, cheaper than Python per row) and the exact check."""

    text: str
    fts: str | None
    glob: str
    regex: re.Pattern

    def matches(self, phrase: str) -> bool:
        return self.regex.search(phrase) is not None


def compile_pattern(pattern: str, *, whole: bool = False, lowercase: bool = True) -> Pattern:
    """`tumo*r` -> FTS5 `"tumo"*` and the regex `(?:^| )tumo[^ ]*r(?: |$)`.

    The pattern is lower-cased like the stored phrases unless `lowercase` is False (a database
    built without lower-casing); FTS5 ignores case either way.
    """
    words = (pattern.lower() if lowercase else pattern).split()
    if not words:
        raise InputError("empty search pattern")
    regex_words, terms = [], []
    for word in words:
        regex_words.append("".join("[^ ]*" if c == "*" else "[^ ]" if c == "?" else re.escape(c) for c in word))
        pieces = re.split(r"([*?])", word)
        for i in range(0, len(pieces), 2):
            segment = pieces[i]
            if segment:
                terms += _token_terms(segment, at_word_start=i == 0, at_word_end=i == len(pieces) - 1)
    body = " ".join(regex_words)
    regex = re.compile(f"^{body}$" if whole else f"(?:^| ){body}(?: |$)")
    fts = " AND ".join(dict.fromkeys(terms)) or None
    glob = " ".join(words).replace("[", "[[]")  # GLOB's * and ? may also match spaces: a superset
    return Pattern(" ".join(words), fts, glob if whole else f"*{glob}*", regex)


# ------------------------------------------------------------------------------------ search


@dataclass(frozen=True)
class Match:
    phrase: str
    count: int
    n_words: int
    n_paraphrases: int


@dataclass(frozen=True)
class SearchResult:
    pattern: str
    model: str
    fts_query: str | None  # None: the phrase table was scanned
    n_matches: int
    matches: list[Match]


def _model_column(conn: sqlite3.Connection, model: str, path) -> str:
    """The pair column holding `model`'s pairs (a combined model's: its base model's)."""
    import json

    rows = {name: (kind, column, params) for name, kind, column, params in
            conn.execute("SELECT name, kind, score_column, params FROM model")}
    if model not in rows:
        raise InputError(f"unknown model {model!r}; this database has: {', '.join(rows)}", path)
    kind, column, params = rows[model]
    if kind == "combined":
        base = json.loads(params).get("base")
        if base not in rows:
            raise InputError(f"combined model {model!r} names a missing base model {base!r}", path)
        column = rows[base][1]
    pair_columns = {r[1] for r in conn.execute("PRAGMA table_info(pair)")}
    if column not in pair_columns:  # column names are spliced into SQL: only real ones
        raise InputError(f"model {model!r} names a missing column {column!r}", path)
    return column


def _lowercased(conn: sqlite3.Connection) -> bool:
    """Whether the database's phrases were lower-cased (meta normalization; pivot's default)."""
    import json

    row = conn.execute("SELECT value FROM meta WHERE key = 'normalization'").fetchone()
    try:
        return bool(json.loads(row[0]).get("lowercase", True)) if row else True
    except (ValueError, AttributeError):
        return True


def search(path, pattern: str, *, model: str = "general", limit: int | None = 50, whole: bool = False,
           build_index: bool = True) -> SearchResult:
    """The phrases matching `pattern`, most frequent first (ties by text), at most `limit`.

    Each match carries the phrase's support count and its number of paraphrases under `model`;
    ``limit`` None shows every match. Builds the FTS5 index first when it is missing and
    `build_index` (see build_phrase_index).
    """
    if limit is not None and limit < 0:
        raise InputError(f"the limit must be at least 0, or None for every match (got {limit})")
    path = Path(path)
    if path.is_dir():
        return _search_parts(path, pattern, model=model, limit=limit, whole=whole)
    conn = connect(path)
    try:
        _check_database(conn, path)
        compiled = compile_pattern(pattern, whole=whole, lowercase=_lowercased(conn))
        column = _model_column(conn, model, path)
        if compiled.fts is not None and not has_phrase_index(conn):
            if not build_index:
                raise InputError("no phrase search index: build it with `pivot search DB --build-index`", path)
            conn.close()
            build_phrase_index(path)
            conn = connect(path)
        hits = _phrase_hits(conn, compiled)
        shown = hits if limit is None else hits[:limit]
        count_sql = f"SELECT count(*) FROM pair WHERE e1 = ? AND {column} IS NOT NULL"
        matches = [Match(text, count, n_words, conn.execute(count_sql, (pid,)).fetchone()[0])
                   for pid, text, count, n_words in shown]
    except sqlite3.OperationalError as exc:
        raise InputError(f"search failed ({exc})", path) from exc
    finally:
        conn.close()
    return SearchResult(compiled.text, model, compiled.fts, len(hits), matches)


def _phrase_hits(conn, compiled) -> list[tuple]:
    """(id, text, count, n_words) of the phrase table's matches, most frequent first (ties by
    text): through the FTS5 index when the pattern has a token it can use, else by GLOB alone;
    either way the compiled pattern has the last word (FTS5 and GLOB only narrow)."""
    if compiled.fts is None:
        rows = conn.execute("SELECT id, text, count, n_words FROM phrase WHERE text GLOB ?", (compiled.glob,))
    else:
        rows = conn.execute(
            f"""SELECT p.id, p.text, p.count, p.n_words FROM {FTS_TABLE} f JOIN phrase p ON p.id = f.rowid
                 WHERE {FTS_TABLE} MATCH ? AND p.text GLOB ?""", (compiled.fts, compiled.glob))
    return sorted((r for r in rows if compiled.matches(r[1])), key=lambda r: (-r[2], r[1]))


def _search_parts(path: Path, pattern: str, *, model: str, limit: int | None, whole: bool) -> SearchResult:
    """:func:`search` of a database in parts: the phrases (and their FTS5 index, built with the
    folder) are in the shards of its phrase index, each searched, their matches merged in the
    same order; a match's paraphrases are counted in the part of its id."""
    from pivot.store.db import ParaphraseDB

    with ParaphraseDB(path) as db:
        compiled = compile_pattern(pattern, whole=whole,
                                   lowercase=bool((db.meta.get("normalization") or {}).get("lowercase", True)))
        info = db.model_info(model)
        column = db.model_info(info["params"]["base"])["column"] if info["kind"] == "combined" else info["column"]
        try:
            hits = sorted((h for conn in db._index_conns() for h in _phrase_hits(conn, compiled)),
                          key=lambda r: (-r[2], r[1]))
            shown = hits if limit is None else hits[:limit]
            count_sql = f"SELECT count(*) FROM pair WHERE e1 = ? AND {column} IS NOT NULL"
            matches = []
            for pid, text, count, n_words in shown:
                part = db._pairs(pid)
                n = 0 if part is None else part.execute(count_sql, (pid,)).fetchone()[0]
                matches.append(Match(text, count, n_words, n))
        except sqlite3.OperationalError as exc:
            raise InputError(f"search failed ({exc})", path) from exc
    return SearchResult(compiled.text, model, compiled.fts, len(hits), matches)
