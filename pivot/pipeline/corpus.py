"""Corpus stage: read, validate, normalise, filter and deduplicate bitext.

Every English or foreign sentence that enters the project (both sides of the bitext,
language-model text, gold phrases) goes through :func:`pivot.text.normalize`, so a phrase in the
paraphrase database, a word in a gold pair and an n-gram in a language model are spelt
the same way.

Data flow for one pivot language (:func:`write_bitext` streams it to a folder in bounded
memory; :func:`load_bitext` builds the same result in memory as a :class:`Bitext`):

    recipe sources --read_parallel / read_tsv_zip / read_tsv_gz--> raw (line, english, foreign)
                   --row filters, blanks, is_section_header------> dropped, counted
                   --normalize_many (batches)--------------------> NFC, Moses tokens, lowercase
                   --length / ratio filter, dedup----------------> dropped, counted
                   --resample (sample_fraction < 1 only)---------> dropped, counted
                   --> bitext.en, bitext.<lang>, origin.npy, meta.json

Recipe sources (one ``[[bitext]]`` block per pivot language holds a list of them; paths are
relative to the data root). Keys every format accepts: ``name`` (unique within the block),
``format``, and ``kind`` = ``"sentences"`` (the default) or ``"terms"`` (a term list: short
noun phrases, one translation each; recorded per source in ``meta.json["source_kinds"]`` so
the build can take such pairs as phrase pairs directly).

* ``format = "parallel"``: ``en``, ``f`` = two line-aligned files (``.gz`` read through
  gzip); ``drop_headers`` (default true) drops abstract section headers.
* ``format = "parallel-glob"``: ``en`` = a pattern ending in ``.en``; each match ``X.en``
  pairs with ``X.<lang>``; ``drop_headers`` as above.
* ``format = "tsv-zip"``: ``path`` = a zip holding ``english<TAB>foreign[<TAB>...]`` lines
  (Tatoeba/manythings.org); ``member`` names the text member when there is more than one.
* ``format = "tsv-gz"``: ``path`` = a TSV file, gzip when it ends in ``.gz``, no header line,
  English in column 1, the foreign sentence in column 2, further columns free (the layout
  of every ``*.tsv.gz`` of the data's second batch). ``path`` may be a glob (``*``, ``?``,
  ``[...]``): the matches are read in sorted order. Optional row filters, columns numbered
  from 1 (1 = English, 2 = foreign), values compared with the field trimmed of surrounding
  spaces, a ``*`` in a value matching any run of characters (a value without ``*`` must
  match exactly), a list meaning any of its values:

      where = { 4 = "rdfs:label" }                 # keep a row only if EVERY listed column matches
      exclude = { 6 = "machine", 3 = ["x", "y*"] } # drop a row if ANY listed column matches

  Rows dropped by the filters are counted as ``filtered``; ``drop_headers`` (default false)
  drops abstract section headers as for ``parallel``.

The foreign side is tokenised with the Moses rules of :func:`tokenizer_lang` ``(lang)``: the
block's code itself when Moses knows it (``fr``, ``de``), its ISO 639-1 equivalent for an ISO
639-3 code (``fra`` -> ``fr``, ``por_BR`` -> ``pt``), else English rules (which is what the
Moses scripts fall back to for a language without a non-breaking-prefix list).

Readers split lines on ``\\n`` only (never on ``\\r``, U+2028 or U+0085, which Python's
universal-newline mode and ``str.splitlines`` treat as line ends): line-aligned corpora
must be read with the same line boundaries on both sides, and with the same numbering
that ``wc -l`` and ``sed -n Np`` show to a user following an error message. A damaged gzip
or zip stream raises InputError naming the file and the line where reading broke.
"""
from __future__ import annotations

import glob
import hashlib
import itertools
import json
import math
import os
import re
import struct
import sys
import zipfile
import zlib
from array import array
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pivot.atomic import atomic_path
from pivot.errors import InputError
from pivot.hashes import hash64
from pivot.pipeline.stage import Stage
from pivot.text import _checked_lines, _count_lines_checked, _iter_lines, _open_binary, normalize_many

# The reasons a raw line or pair is not kept, in the order clean_pairs tests them.
STAT_KEYS = ("read", "blank", "header", "empty", "too_long", "ratio", "duplicate", "kept")
# Rows a tsv-gz source's where/exclude filters drop; only tsv-gz sources (and the total of a
# language that has one) carry this count, right after "read", so the statistics of the
# other formats are as they always were.
FILTERED = "filtered"

# Pairs a resample of the bitext leaves out ([preprocess] sample_fraction < 1, see
# sample_keeper); only a resampled corpus carries this count, right after "duplicate", so the
# statistics of a full corpus are as they always were.
SAMPLED_OUT = "sampled_out"

# Kinds of recipe source: sentence bitext, or a term list (dictionary of names).
SOURCE_KINDS = ("sentences", "terms")

DATA_ROOT_HINT = "the data root is set by `--data DIR` or the PIVOT_DATA environment variable"

# Lines read and normalised at a time by write_bitext / load_bitext.
BATCH_LINES = 20_000


def _new_stats(filtered=False, sampled=False):
    keys = STAT_KEYS[:1] + (FILTERED,) + STAT_KEYS[1:] if filtered else STAT_KEYS
    if sampled:
        keys = keys[:-1] + (SAMPLED_OUT,) + keys[-1:]
    return {k: 0 for k in keys}


# ----------------------------------------------------------------------------- resampling

#: The [preprocess] keys of a resample of the bitext, with their defaults (fraction 1: every
#: pair, no hashing, and neither key in the corpus stage's parameters: see sample_params).
SAMPLE_DEFAULTS = {"sample_fraction": 1.0, "sample_seed": 0}


def sample_params(preprocess: dict) -> dict:
    """The corpus stage's [preprocess] parameters: the table as the recipe gives it when it
    keeps every pair (fraction 1, or no sample key), so that the stage key, its artifact and
    the database are those of a recipe without the keys; with a fraction below 1, both sample
    keys (the seed defaulted), so that each resample has its own key and signature."""
    out = {k: v for k, v in preprocess.items() if k not in SAMPLE_DEFAULTS}
    fraction = preprocess.get("sample_fraction", SAMPLE_DEFAULTS["sample_fraction"])
    if fraction < 1:
        out["sample_fraction"] = fraction
        out["sample_seed"] = preprocess.get("sample_seed", SAMPLE_DEFAULTS["sample_seed"])
    return out


def sample_limit(fraction: float) -> int:
    """The 64-bit hash values a resample keeps are those below this: ceil(fraction * 2^64).

    A pair is kept iff h < fraction * 2^64, i.e. iff h / 2^64 (uniform on [0, 1) over pairs)
    < fraction; for an integer h that is h < ceil(fraction * 2^64). fraction * 2^64 is exact
    in floating point (a power-of-two scaling), so the limit is exact too.
    """
    return math.ceil(fraction * 2.0 ** 64)


def sample_keeper(fraction: float, seed: int):
    """The resample rule as a predicate ``keep(english, foreign)`` on a normalised pair.

    h = :func:`pivot.hashes.hash64` of english + "\\t" + foreign (the first 8 bytes of
    blake2b(str(seed) + "\\n" + english + "\\t" + foreign), read as a big-endian integer);
    the pair is kept iff h < ceil(fraction * 2^64) (:func:`sample_limit`).
    The hash of the pair's own text (the house rule of pivot.pipeline.lmtext.cross_fit_folds):
    each pair is kept with probability ``fraction`` independently of the others, the same
    pairs on every run, machine and worker count, whatever the order of the input; a pair
    repeated (in one source or several) is kept or left out as a whole. Seeds give
    independent resamples of the same size in expectation.
    """
    limit = sample_limit(fraction)

    def keep(en: str, f: str) -> bool:
        return pair_sample_hash(en, f, seed) < limit

    return keep


def pair_sample_hash(en: str, f: str, seed: int) -> int:
    """The resample's hash of a normalised pair (:func:`sample_keeper`)."""
    return hash64(f"{en}\t{f}", seed)


# ----------------------------------------------------------------------------- damaged files

# Reading a damaged compressed stream, and bad bytes in any text: pivot.text decides both for
# every reader (see the notes at the top of its readers section): the readers here call its
# _checked_lines and _count_lines_checked.

# What a damaged zip archive may raise before its member is read: a bad central directory or
# local header (BadZipFile, ValueError, struct.error, EOFError, OSError), an unsupported
# compression method (NotImplementedError), an encrypted member (RuntimeError).
_ZIP_OPEN_ERRORS = (zipfile.BadZipFile, OSError, EOFError, ValueError, struct.error,
                    NotImplementedError, RuntimeError, zlib.error)


# ----------------------------------------------------------------------------- readers

# Section headers of biomedical abstracts, as they stand alone on a line in the WMT
# biomedical files (English and French, including the misspellings found there). A line
# is a header when every word of it is in HEADER_WORDS or HEADER_GLUE and at least one is
# in HEADER_WORDS: "Abstract", "PATIENTS AND METHODS", "Matériel et méthodes",
# "Relevant changes", "Leçons tirées", "Discussion-Conclusion".
HEADER_WORDS = frozenset("""
abstract title summary highlights introduction background context purpose aim aims goal
objective objectives object obejctive objetif method methods methodology material materials
materiel patients patient participants subjects design setting settings local study selection
results result findings key main outcome outcomes measurements data synthesis extraction
discussion conclusion conclusions comments implications limitations lessons lesson learnt
learned relevant changes approach problem case report presentation presenting concerns
clinical observation observations interventions intervention diagnosis diagnoses literature
review evaluation interpretation registration trial level evidence backgroud indroduction
résumé titre contexte objectif objectifs objet but buts méthode méthodes méthodologie
matériel matériels patientes sujets schéma cadre environnement type étude études sélection
résultats résultat résultants principaux principales données synthèse commentaires
conclusion limites leçons enseignements tirées tirés changements modifications significatifs
pertinents pertinentes démarche approche problème problématique cas clinique cliniques
présentation observation diagnostic interventions caractéristiques mesures revue
littérature recherche évaluation intérêt mots-clés mots clés
""".split())
HEADER_GLUE = frozenset("and or of the a in with et ou de du des la le les l' d' en au aux".split())

# Trailing characters a header may carry: colon (with the French space before it), period,
# no-break spaces.
_HEADER_STRIP = " \t:.\u00a0\u202f"
_WORD_SPLIT = re.compile(r"[\s/\-–]+")
_SENTENCE_PUNCT = re.compile(r"[.?!;,\d]")


def _is_header_text(text):
    """Is one side of a pair, on its own, a section header? See :func:`is_section_header`."""
    if "\t" in text:
        # "RESULTS\tRÉSULTATS": a header pair pasted into one side. Every field a header.
        fields = [x for x in text.split("\t") if x.strip()]
        return bool(fields) and all(_is_header_text(x) for x in fields)
    core = text.strip(_HEADER_STRIP)
    words = [w for w in _WORD_SPLIT.split(core.replace("\u2019", "'")) if w]
    if not words or len(words) > 6:
        return False
    lowered = [w.lower() for w in words]
    if all(w in HEADER_WORDS or w in HEADER_GLUE for w in lowered) and any(
            w in HEADER_WORDS for w in lowered):
        return True
    # A short all-capitals line with no sentence punctuation and no digits:
    # "EPIDEMIOLOGICAL DATA:", "CLINICAL FEATURES", "PERCEPTION DU SOURIRE :". Only a
    # colon may end it: "HIV INFECTION IS RISING." is a sentence.
    caps = text.strip(" \t:\u00a0\u202f")
    return caps.upper() == caps and caps.lower() != caps and not _SENTENCE_PUNCT.search(caps)


def is_section_header(en, f):
    """True when the pair (en, f) is a section header of an abstract, not a sentence.

    Rule (designed on the WMT biomedical train and test files), applied to each side after
    stripping surrounding spaces, a trailing colon or period and no-break spaces; the pair
    is a header when EITHER side is one (a header facing a sentence is a misalignment and
    is dropped with it):

    1. at most 6 words (split on spaces, ``/`` and dashes), each a known header word
       (``HEADER_WORDS``, English and French, case-insensitive) or a joining word
       (``HEADER_GLUE``: and, of, et, de, ...), at least one a header word:
       "Abstract", "RESULTS", "Methods:", "Matériel et méthodes", "Lessons learnt";
    2. or at most 6 words, all in capitals, without digits or sentence punctuation
       (``.?!;,``, a final period included): "CLINICAL FEATURES", "PERCEPTION OF
       SMILING:" (but not "HIV INFECTION IS RISING.");
    3. or the side holds an internal TAB and every TAB-separated field is a header by
       rules 1-2: "RESULTS\\tRÉSULTATS". (A TAB line whose other fields are text, such as
       "MATERIALS AND METHODS:\\tStandard digital photographs ...", is a sentence: the
       tokenizer treats the TAB as a space.)

    Real titles ("Traumatic avulsions of permanent teeth") and short sentences
    ("Total drug costs declined.") are kept.

    >>> is_section_header("PATIENTS AND METHODS", "PATIENTS ET MÉTHODES")
    True
    >>> is_section_header("Methods:", "Méthodes :")
    True
    >>> is_section_header("Results were poor.", "Les résultats étaient mauvais.")
    False
    """
    return _is_header_text(en) or _is_header_text(f)


#: A bitext file without a line: a download that failed, or the wrong file; never a corpus.
_EMPTY = "holds no line: an empty bitext file (a failed download, or the wrong file?)"


def _window(lines) -> tuple[int, float]:
    """(first, stop) of a reader's ``lines`` window; None: every line (1 to the end)."""
    if lines is None:
        return 1, math.inf
    first, stop = lines
    return first, math.inf if stop is None else stop


def read_parallel(en_path, f_path, drop_headers=True, stats=None, lines=None):
    """Yield (line_number, english, foreign) from two line-aligned files (Moses ``stem.lang``).

    Files ending in ``.gz`` are read through gzip. Both files are counted before the
    first pair is yielded, so a line-count mismatch raises InputError (naming both files
    and both counts) before the caller has anything. A line that is blank on both sides
    (a document separator in the WMT biomedical files) is skipped; with ``drop_headers``
    a pair for which :func:`is_section_header` holds is skipped. Trailing whitespace is
    removed from every line. Two files without a line raise InputError (an empty bitext is
    a failed download, never a corpus).

    ``stats``, when given, is a dict whose "read", "blank" and "header" entries are
    incremented (lines read, blank separators, headers dropped).

    ``lines``: (first, stop), the window of 1-based line numbers first <= n < stop (stop None:
    to the end) whose pairs are yielded and counted; the lines before it are read past
    without a look, and reading ends at ``stop`` (a chunk of the corpus stage's tasks).
    """
    first, stop = _window(lines)
    n_en, n_f = _count_lines_checked(en_path), _count_lines_checked(f_path)
    if n_en != n_f:
        raise InputError(
            f"line counts differ: {en_path} has {n_en} lines, {f_path} has {n_f}; "
            "the two sides of a parallel corpus must be line-aligned", path=en_path)
    if n_en == 0:
        raise InputError(f"{_EMPTY} (and so is {f_path})", path=en_path)
    stats = stats if stats is not None else _new_stats()
    with _open_binary(en_path) as fe, _open_binary(f_path) as ff:
        for (number, en), (_, f) in zip(_checked_lines(fe, en_path, bom="lines"),
                                        _checked_lines(ff, f_path, bom="lines")):
            if number < first:
                continue
            if number >= stop:
                break
            stats["read"] += 1
            en, f = en.rstrip(), f.rstrip()
            if not en and not f:
                stats["blank"] += 1
                continue
            if drop_headers and is_section_header(en, f):
                stats["header"] += 1
                continue
            yield number, en, f


def _zip_text_member(zf, zip_path, member):
    """The member to read: ``member`` if given, else the single .txt that is not _about.txt."""
    names = [n for n in zf.namelist()
             if not n.startswith("__MACOSX/") and not n.endswith("/")]
    if member is not None:
        if member not in names:
            raise InputError(f"no member {member!r} in the zip (it holds {names})", path=zip_path)
        return member
    candidates = [n for n in names
                  if n.endswith(".txt") and os.path.basename(n) != "_about.txt"]
    if len(candidates) != 1:
        raise InputError(
            f"cannot choose the text member: {len(candidates)} candidates {candidates}; "
            "name it with member=...", path=zip_path)
    return candidates[0]


def read_tsv_zip(zip_path, member=None, stats=None, lines=None):
    """Yield (line_number, english, foreign) from ``english<TAB>foreign[<TAB>...]`` lines in a zip.

    This is the Tatoeba/manythings.org layout (``fra-eng/fra.txt``, ``deu.txt``); fields
    after the second (attribution) are ignored. macOS ``__MACOSX/`` entries and
    ``_about.txt`` are never read. A line with fewer than two fields raises InputError
    naming ``zip:member`` and the line, and so does a member without a line. ``stats`` and
    ``lines`` as in :func:`read_parallel` ("read").
    """
    first, stop = _window(lines)
    stats = stats if stats is not None else _new_stats()
    if not Path(zip_path).is_file():
        raise InputError("file not found", path=zip_path)
    try:
        zf = zipfile.ZipFile(zip_path)
    except _ZIP_OPEN_ERRORS as exc:
        raise InputError(f"not a readable zip file ({type(exc).__name__}: {exc})",
                         path=zip_path) from None
    with zf:
        member = _zip_text_member(zf, zip_path, member)
        where = f"{zip_path}:{member}"
        try:
            fh = zf.open(member)
        except _ZIP_OPEN_ERRORS as exc:
            raise InputError(f"cannot read member {member!r} of the zip ({type(exc).__name__}: "
                             f"{exc}); the file is damaged: fetch it again", path=zip_path) from None
        with fh:
            number = 0
            for number, line in _checked_lines(fh, where, bom="lines"):
                if number < first:
                    continue
                if number >= stop:
                    break
                stats["read"] += 1
                fields = line.split("\t")
                if len(fields) < 2:
                    raise InputError(
                        f"expected english<TAB>foreign, found {len(fields)} field: {line[:60]!r}",
                        path=where, line=number)
                yield number, fields[0].strip(), fields[1].strip()
            if number == 0:
                raise InputError(_EMPTY, path=where)


def _value_matcher(values):
    """A predicate on one field: equal to a value, or matching a value with ``*`` wildcards."""
    literals = frozenset(v for v in values if "*" not in v)
    patterns = [v for v in values if "*" in v]
    if not patterns:
        return literals.__contains__
    rx = re.compile("|".join("(?:" + ".*".join(map(re.escape, p.split("*"))) + ")"
                             for p in patterns), re.DOTALL)
    return lambda value: value in literals or rx.fullmatch(value) is not None


def compile_row_filter(where=None, exclude=None, name="?"):
    """The row predicate of a tsv-gz source's ``where`` / ``exclude`` tables, or None.

    Each table maps a column number (1-based; an int, or a string of digits as TOML bare
    keys give them) to a value or a list of values; a value with ``*`` is a pattern (``*``
    = any run of characters, everything else literal), any other value must match
    exactly; fields are trimmed of surrounding spaces before matching. A row is kept when
    every ``where`` column matches one of its values and no ``exclude`` column matches
    one of its values. Returns ``(n_columns, keep)``: ``keep(fields)`` -> bool for a row
    of at least ``n_columns`` fields. A malformed table raises InputError naming the source.

    >>> n, keep = compile_row_filter({"4": "rdfs:label"}, {6: ["machine", "auto*"]})
    >>> n, keep(["a", "b", "HP:1", "rdfs:label", "OK", "human"]), keep(["a", "b", "", "rdfs:label", "", "automatic"])
    (6, True, False)
    """
    tables = []
    for key, table in (("where", where), ("exclude", exclude)):
        if table is None:
            tables.append([])
            continue
        if not isinstance(table, dict) or not table:
            raise InputError(f"recipe source {name!r}: {key} must be a table of column number "
                             f"= value(s), e.g. {key} = {{ 4 = \"rdfs:label\" }} (got {table!r})")
        rules = []
        for column, values in table.items():
            text = str(column).strip()
            if not text.isdigit() or int(text) < 1:
                raise InputError(f"recipe source {name!r}: {key} column {column!r} is not a "
                                 "column number (1 = english, 2 = foreign, 3 = the first "
                                 "extra column, ...)")
            values = [values] if isinstance(values, str) else values
            if not isinstance(values, list) or not values or \
                    not all(isinstance(v, str) for v in values):
                raise InputError(f"recipe source {name!r}: {key} column {text} needs a string "
                                 f"or a non-empty list of strings (got {values!r})")
            rules.append((int(text) - 1, _value_matcher(values)))
        tables.append(rules)
    keep_rules, drop_rules = tables
    if not keep_rules and not drop_rules:
        return None
    n_columns = 1 + max(i for i, _ in keep_rules + drop_rules)

    def keep(fields):
        for i, match in keep_rules:
            if not match(fields[i].strip()):
                return False
        for i, match in drop_rules:
            if match(fields[i].strip()):
                return False
        return True
    return n_columns, keep


def read_tsv_gz(path, where=None, exclude=None, drop_headers=False, stats=None, name="?", lines=None):
    """Yield (line_number, english, foreign) from a TSV file, gzip when it ends in ``.gz``.

    The layout of the data's second batch: no header line, ``english<TAB>foreign`` then any
    further columns. ``where`` / ``exclude`` are row filters (see :func:`compile_row_filter`);
    an empty line, or a row whose two sides are blank, is counted "blank" and skipped; with
    ``drop_headers`` a pair for which :func:`is_section_header` holds is skipped. A row with
    fewer than two fields, or fewer than a filter's column, raises InputError naming the file
    and the line; so do bytes that are not UTF-8, a corrupt or truncated gzip stream and a
    file without a line (a 0-byte ``.gz`` is not gzip data: pivot.text._open_binary).

    ``stats``: the "read", "filtered", "blank" and "header" entries are incremented. ``lines``
    as in :func:`read_parallel`.
    """
    first, stop = _window(lines)
    stats = stats if stats is not None else _new_stats(filtered=True)
    stats.setdefault(FILTERED, 0)
    rule = compile_row_filter(where, exclude, name)
    n_columns, keep = rule if rule is not None else (2, None)
    with _open_binary(path) as fh:
        number = 0
        for number, line in _checked_lines(fh, path, bom="lines"):
            if number < first:
                continue
            if number >= stop:
                break
            stats["read"] += 1
            if not line.strip():
                stats["blank"] += 1
                continue
            fields = line.split("\t")
            if len(fields) < n_columns:
                need = ("english<TAB>foreign" if len(fields) < 2 else
                        f"{n_columns} columns for the source's where/exclude filters")
                raise InputError(f"expected {need}, found {len(fields)} field"
                                 f"{'s' if len(fields) != 1 else ''}: {line[:60]!r}",
                                 path=path, line=number)
            if keep is not None and not keep(fields):
                stats[FILTERED] += 1
                continue
            en, f = fields[0].strip(), fields[1].strip()
            if not en and not f:
                stats["blank"] += 1
                continue
            if drop_headers and is_section_header(en, f):
                stats["header"] += 1
                continue
            yield number, en, f
        if number == 0:
            raise InputError(_EMPTY, path=path)


# ----------------------------------------------------------------------------- cleaning

def _n_tokens(text):
    return text.count(" ") + 1 if text else 0


def _clean_reasons(pairs, max_tokens, max_ratio):
    """Yield, per pair, the reason it is dropped ("empty", "too_long", "ratio", "duplicate")
    or "kept". Rules in this order, as Moses clean-corpus-n.perl applies them:
    a side has 0 tokens; a side has more than ``max_tokens`` tokens;
    n_en / n_f > max_ratio or n_f / n_en > max_ratio; the same (en, f) was kept before.
    """
    seen = set()
    for pair in pairs:
        en, f = pair[0], pair[1]
        reason = _filter_reason(en, f, max_tokens, max_ratio)
        if reason is not None:
            yield reason
        elif (en, f) in seen:
            yield "duplicate"
        else:
            seen.add((en, f))
            yield "kept"


def _filter_reason(en, f, max_tokens, max_ratio):
    """"empty", "too_long" or "ratio" when a normalised pair fails the length rules, else None."""
    n_en, n_f = _n_tokens(en), _n_tokens(f)
    if n_en == 0 or n_f == 0:
        return "empty"
    if n_en > max_tokens or n_f > max_tokens:
        return "too_long"
    if n_en > max_ratio * n_f or n_f > max_ratio * n_en:
        return "ratio"
    return None


def clean_pairs(pairs, max_tokens=80, max_ratio=9.0, stats=None):
    """Filter normalised pairs and drop exact duplicates, keeping the first occurrence.

    ``pairs`` is a sequence of tuples whose first two items are the normalised
    (english, foreign) sentences; further items ride along unchanged (load_bitext passes
    the source index). A pair is dropped when a side is empty, a side is longer than
    ``max_tokens`` tokens, or the token-length ratio exceeds ``max_ratio`` (the Moses
    clean-corpus-n rule: strictly longer, strictly greater), then when the same
    (english, foreign) was already kept. Order is preserved.

    Returns (kept, stats); stats holds every key of STAT_KEYS, starting from ``stats``
    when given (the readers' read/blank/header counts). "read" counts the pairs given
    here when no starting stats are passed.
    """
    out_stats = _new_stats()
    if stats is not None:
        out_stats.update(stats)
    pairs = list(pairs)
    if stats is None:
        out_stats["read"] = len(pairs)
    kept = []
    for pair, reason in zip(pairs, _clean_reasons(pairs, max_tokens, max_ratio)):
        out_stats[reason] += 1
        if reason == "kept":
            kept.append(pair)
    return kept, out_stats


# ----------------------------------------------------------------------------- vocabulary

class Vocab:
    """Token <-> int32 id. Ids are given in order of first occurrence, so the same
    sentences in the same order always give the same ids (no hashing, no sorting pass).

    >>> v = Vocab()
    >>> tokens, offsets = v.encode(["a b", "b c"])
    >>> tokens.tolist(), offsets.tolist()
    ([0, 1, 1, 2], [0, 2, 4])
    """

    def __init__(self, tokens=()):
        self.id_of = {}
        self.tokens = []
        for t in tokens:
            self.add(t)

    def add(self, token):
        """The id of ``token``, given the next free id if new."""
        i = self.id_of.get(token)
        if i is None:
            if not token or token != token.strip() or len(token.split()) != 1:
                raise ValueError(f"a token must be non-empty and hold no whitespace: {token!r}")
            i = self.id_of[token] = len(self.tokens)
            self.tokens.append(token)
        return i

    def __len__(self):
        return len(self.tokens)

    def __contains__(self, token):
        return token in self.id_of

    def __getitem__(self, token):
        return self.id_of[token]

    def encode(self, sentences, grow=True):
        """Ragged encoding of space-tokenised sentences: (tokens int32, offsets int64).

        Sentence s is ``tokens[offsets[s]:offsets[s+1]]``; ``len(offsets) == n + 1``.
        With ``grow=False`` an unknown token raises KeyError instead of getting a new id.
        """
        ids, offsets = [], [0]
        lookup = self.add if grow else self.id_of.__getitem__
        for s in sentences:
            ids.extend(lookup(t) for t in s.split())
            offsets.append(len(ids))
        return np.asarray(ids, dtype=np.int32), np.asarray(offsets, dtype=np.int64)

    def decode(self, ids):
        """Space-joined tokens of a sequence of ids."""
        return " ".join(self.tokens[i] for i in ids)

    def save(self, path):
        """One token per line, line k holding id k (UTF-8, ``\\n`` line ends)."""
        with open(path, "w", encoding="utf-8", newline="\n") as fh:
            for t in self.tokens:
                fh.write(t + "\n")

    @classmethod
    def load(cls, path):
        """Read a file written by :meth:`save`; a blank or duplicate line is an InputError."""
        vocab = cls()
        with open(path, "rb") as fh:
            for number, token in _iter_lines(fh, path):
                if token in vocab.id_of or not token or len(token.split()) != 1 \
                        or token != token.strip():
                    raise InputError(f"bad vocabulary entry {token!r} (blank, spaced or repeated)",
                                     path=path, line=number)
                vocab.add(token)
        return vocab


# ----------------------------------------------------------------------------- bitext

def _bitext_meta(lang, n_pairs, source_names, source_kinds, stats):
    return {"lang": lang, "n_pairs": n_pairs, "source_names": list(source_names),
            "source_kinds": list(source_kinds), "stats": stats}


def _write_meta(directory, meta):
    (Path(directory) / "meta.json").write_text(
        json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def read_meta(corpus_dir):
    """The ``meta.json`` of a saved bitext folder, as a dict.

    Keys: ``lang``, ``n_pairs``, ``source_names`` (origin id k -> recipe source name),
    ``source_kinds`` (origin id k -> "sentences" or "terms"; a folder written before kinds
    were recorded reads as all "sentences") and ``stats`` (per source and "total": the
    counts of :data:`STAT_KEYS`, plus "filtered" for tsv-gz sources; ``max_tokens``,
    ``max_ratio``, ``tokenizer``, and ``dedup`` = false when written without dedup).
    A missing or unreadable meta.json raises InputError.
    """
    d = Path(corpus_dir)
    path = d / "meta.json"
    if not path.is_file():
        raise InputError("no meta.json: not a saved bitext directory", path=d)
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"meta.json is not valid JSON ({exc})", path=path) from None
    missing = [k for k in ("lang", "n_pairs", "source_names", "stats") if k not in meta]
    if missing:
        raise InputError(f"meta.json lacks {missing}", path=path)
    meta.setdefault("source_kinds", ["sentences"] * len(meta["source_names"]))
    return meta


def iter_bitext(corpus_dir, start=0, stop=None):
    """Stream (english, foreign) of pairs ``start`` .. ``stop - 1`` of a saved bitext folder.

    Reads ``bitext.en`` and ``bitext.<lang>`` line by line (constant memory); ``stop=None``
    means to the end (``n_pairs`` of meta.json), a larger ``stop`` is clamped to it, and
    ``start >= stop`` yields nothing. Pair k has origin ``origin.npy[k]``. The
    folder is checked (meta.json, both files) before this returns; a file shorter than
    meta.json says, or (when read to the end) longer, raises InputError while iterating.

    >>> for en, f in iter_bitext(corpus_dir, 0, 2): ...      # doctest: +SKIP
    """
    d = Path(corpus_dir)
    meta = read_meta(d)
    n = meta["n_pairs"]
    start = int(start)
    stop = n if stop is None else min(int(stop), n)
    if start < 0 or stop < 0:
        raise ValueError(f"start and stop must be >= 0 (got {start}, {stop})")
    paths = (d / "bitext.en", d / f"bitext.{meta['lang']}")
    for p in paths:
        if not p.is_file():
            raise InputError("missing from the saved bitext directory", path=p)
    return _iter_pairs(paths, n, start, stop)


def _iter_pairs(paths, n, start, stop):
    if start >= stop:
        return
    with _open_binary(paths[0]) as fe, _open_binary(paths[1]) as ff:
        sides = itertools.zip_longest(_checked_lines(fe, paths[0]), _checked_lines(ff, paths[1]))
        k = start
        for a, b in itertools.islice(sides, start, stop):
            if a is None or b is None:
                short = paths[0] if a is None else paths[1]
                raise InputError(f"ends after {k} lines, but meta.json says n_pairs={n}",
                                 path=short)
            yield a[1], b[1]
            k += 1
        if k < stop:
            raise InputError(f"ends after {k} lines, but meta.json says n_pairs={n}",
                             path=paths[0])
        if stop == n:
            extra = next(sides, None)
            if extra is not None:
                longer = paths[0] if extra[0] is not None else paths[1]
                raise InputError(f"has more lines than meta.json's n_pairs={n}", path=longer)


@dataclass
class Bitext:
    """A normalised, cleaned bitext for one pivot language.

    ``en[k]`` and ``f[k]`` are space-tokenised sentences; ``origin[k]`` is the index into
    ``source_names`` of the recipe source pair k came from, and ``source_kinds[origin[k]]``
    says whether that source is sentence bitext ("sentences") or a term list ("terms");
    ``stats`` holds the counts of :data:`STAT_KEYS` overall ("total") and per source
    ("sources").
    """

    lang: str
    en: list
    f: list
    origin: np.ndarray
    source_names: list
    stats: dict = field(default_factory=dict)
    source_kinds: list | None = None

    def __post_init__(self):
        self.origin = np.asarray(self.origin, dtype=np.int16)
        if not (len(self.en) == len(self.f) == len(self.origin)):
            raise ValueError(f"en, f and origin differ in length: "
                             f"{len(self.en)}, {len(self.f)}, {len(self.origin)}")
        if self.source_kinds is None:
            self.source_kinds = ["sentences"] * len(self.source_names)
        if len(self.source_kinds) != len(self.source_names):
            raise ValueError(f"{len(self.source_kinds)} source kinds for "
                             f"{len(self.source_names)} sources")

    def __len__(self):
        return len(self.en)

    def lengths(self):
        """(English lengths, foreign lengths) in tokens, int32 arrays."""
        return (np.fromiter((_n_tokens(s) for s in self.en), np.int32, len(self.en)),
                np.fromiter((_n_tokens(s) for s in self.f), np.int32, len(self.f)))

    def save(self, directory):
        """Write ``bitext.en``, ``bitext.<lang>``, ``origin.npy`` and ``meta.json`` there."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        for name, lines in (("bitext.en", self.en), (f"bitext.{self.lang}", self.f)):
            with open(d / name, "w", encoding="utf-8", newline="\n") as fh:
                fh.writelines(s + "\n" for s in lines)
        np.save(d / "origin.npy", self.origin)
        _write_meta(d, _bitext_meta(self.lang, len(self), self.source_names, self.source_kinds,
                                    self.stats))

    @classmethod
    def load(cls, directory):
        """Read a directory written by :meth:`save`, checking the files agree in length."""
        d = Path(directory)
        meta = read_meta(d)
        lang = meta["lang"]
        sides = []
        for name in ("bitext.en", f"bitext.{lang}"):
            with _open_binary(d / name) as fh:
                sides.append([line for _, line in _iter_lines(fh, d / name)])
        origin = np.load(d / "origin.npy")
        for name, n in (("bitext.en", len(sides[0])), (f"bitext.{lang}", len(sides[1])),
                        ("origin.npy", len(origin))):
            if n != meta["n_pairs"]:
                raise InputError(f"{n} entries but meta.json says n_pairs={meta['n_pairs']}",
                                 path=d / name)
        return cls(lang, sides[0], sides[1], origin, meta["source_names"], meta["stats"],
                   meta["source_kinds"])


# ----------------------------------------------------------------------------- tokenizer language

# Languages with a Moses non-breaking-prefix list in the C++ tokenizer (opus-fast-mosestokenizer
# 0.0.8); the C++ port refuses any other code.
MOSES_LANGS = frozenset("as bn ca cs de el en es et fi fr ga gu hi hu is it kn lt lv ml mni "
                        "mr nl or pa pl pt ro ru sk sl sv ta te yue zh".split())
# ISO 639-3 (and 639-2/B) codes of those languages, macro-language codes included.
ISO3_TO_MOSES = {
    "asm": "as", "ben": "bn", "cat": "ca", "ces": "cs", "cze": "cs", "deu": "de", "ger": "de",
    "ell": "el", "gre": "el", "eng": "en", "spa": "es", "est": "et", "ekk": "et", "fin": "fi",
    "fra": "fr", "fre": "fr", "gle": "ga", "guj": "gu", "hin": "hi", "hun": "hu", "isl": "is",
    "ice": "is", "ita": "it", "kan": "kn", "lit": "lt", "lav": "lv", "lvs": "lv", "mal": "ml",
    "mar": "mr", "nld": "nl", "dut": "nl", "ori": "or", "ory": "or", "pan": "pa", "pol": "pl",
    "por": "pt", "ron": "ro", "rum": "ro", "rus": "ru", "slk": "sk", "slo": "sk", "slv": "sl",
    "swe": "sv", "tam": "ta", "tel": "te", "zho": "zh", "chi": "zh", "cmn": "zh",
}


def tokenizer_lang(lang):
    """The Moses language whose rules tokenise the foreign side of bitext ``lang``.

    The code itself when Moses has rules for it (``fr``, ``de``, ``yue``); else the part
    before ``_``/``-`` (``por_BR`` -> ``por``) mapped from ISO 639-3 to Moses' ISO 639-1
    (``fra`` -> ``fr``, ``zho`` -> ``zh``); else ``en``, the Moses scripts' own fallback
    for a language without a non-breaking-prefix list (``tur``, ``jpn``, ``tir``).

    >>> [tokenizer_lang(x) for x in ("fr", "fra", "por_BR", "zho", "tur")]
    ['fr', 'fr', 'pt', 'zh', 'en']
    """
    code = str(lang).strip()
    if code in MOSES_LANGS:
        return code
    base = re.split(r"[_-]", code, maxsplit=1)[0].lower()
    if base in MOSES_LANGS:
        return base
    return ISO3_TO_MOSES.get(base, "en")


# ----------------------------------------------------------------------------- recipe sources

# Keys each source format accepts (a misspelt filter would otherwise keep every row).
_COMMON_KEYS = {"name", "format", "kind"}
SOURCE_KEYS = {
    "parallel": _COMMON_KEYS | {"en", "f", "drop_headers"},
    "parallel-glob": _COMMON_KEYS | {"en", "drop_headers"},
    "tsv-zip": _COMMON_KEYS | {"path", "member"},
    "tsv-gz": _COMMON_KEYS | {"path", "where", "exclude", "drop_headers"},
}


def _need(source, key, index):
    if key not in source:
        raise InputError(f"recipe source #{index + 1} ({source.get('name', '?')}) lacks {key!r}")
    return source[key]


def _data_file(data_root, rel, name):
    """Absolute path of a recipe file; InputError naming the source and the data root if absent."""
    full = Path(rel) if Path(rel).is_absolute() else Path(data_root) / rel
    if not full.is_file():
        raise InputError(f"recipe source {name!r}: file not found: {full} "
                         f"(data root {data_root}; {DATA_ROOT_HINT})", path=full)
    return full


def _is_glob(pattern):
    return any(c in pattern for c in "*?[")


def _source_readers(source, index, lang, data_root):
    """The list of reader factories ((stats, lines=None) -> iterator) for one recipe source; every file the
    source names is checked to exist, and its keys to be known, before anything is read."""
    name = _need(source, "name", index)
    fmt = _need(source, "format", index)
    if fmt not in SOURCE_KEYS:
        raise InputError(f"recipe source {name!r}: unknown format {fmt!r} "
                         "(parallel, parallel-glob, tsv-zip or tsv-gz)")
    unknown = sorted(set(source) - SOURCE_KEYS[fmt])
    if unknown:
        raise InputError(f"recipe source {name!r}: unknown keys {unknown} for format {fmt!r} "
                         f"(known: {sorted(SOURCE_KEYS[fmt])})")
    source_kind(source)
    if fmt == "parallel":
        en = _data_file(data_root, _need(source, "en", index), name)
        f = _data_file(data_root, _need(source, "f", index), name)
        drop = source.get("drop_headers", True)
        return [lambda st, lines=None, en=en, f=f: read_parallel(en, f, drop_headers=drop, stats=st, lines=lines)]
    if fmt == "parallel-glob":
        pattern = _need(source, "en", index)
        if not pattern.endswith(".en"):
            raise InputError(f"recipe source {name!r}: the parallel-glob pattern must end in "
                             f"'.en' (got {pattern!r})")
        en_files = sorted(glob.glob(str(Path(data_root).absolute() / pattern)))
        if not en_files:
            raise InputError(f"recipe source {name!r}: no file matches "
                             f"{Path(data_root) / pattern} ({DATA_ROOT_HINT})")
        drop = source.get("drop_headers", True)
        readers = []
        for en in en_files:
            f = _data_file(data_root, en[:-3] + "." + lang, name)
            readers.append(lambda st, lines=None, en=en, f=f: read_parallel(en, f, drop_headers=drop, stats=st,
                                                                             lines=lines))
        return readers
    if fmt == "tsv-zip":
        path = _data_file(data_root, _need(source, "path", index), name)
        member = source.get("member")
        return [lambda st, lines=None, path=path: read_tsv_zip(path, member, stats=st, lines=lines)]
    # tsv-gz
    pattern = _need(source, "path", index)
    where, exclude = source.get("where"), source.get("exclude")
    compile_row_filter(where, exclude, name)          # a malformed filter fails here, early
    drop = source.get("drop_headers", False)
    if _is_glob(pattern):
        paths = sorted(glob.glob(str(Path(data_root).absolute() / pattern)))
        if not paths:
            raise InputError(f"recipe source {name!r}: no file matches "
                             f"{Path(data_root) / pattern} ({DATA_ROOT_HINT})")
        paths = [Path(p) for p in paths]
    else:
        paths = [_data_file(data_root, pattern, name)]
    return [lambda st, lines=None, path=path: read_tsv_gz(path, where, exclude, drop_headers=drop, stats=st,
                                                          name=name, lines=lines)
            for path in paths]


def source_kind(source):
    """``kind`` of a recipe source: "sentences" (the default) or "terms"."""
    kind = source.get("kind", "sentences")
    if kind not in SOURCE_KINDS:
        raise InputError(f"recipe source {source.get('name', '?')!r}: kind must be one of "
                         f"{list(SOURCE_KINDS)} (got {kind!r})")
    return kind


def _plan(sources, lang, data_root, sampled=False):
    """(readers per source, names, kinds, fresh stats per source), all checked up front."""
    data_root = Path(data_root)
    if len(sources) > np.iinfo(np.int16).max:
        raise InputError(f"too many sources ({len(sources)}) for int16 origin ids")
    readers = [_source_readers(s, k, lang, data_root) for k, s in enumerate(sources)]
    names = [s["name"] for s in sources]
    if len(set(names)) != len(names):
        raise InputError(f"recipe source names repeat: {names}")
    kinds = [source_kind(s) for s in sources]
    stats = [_new_stats(filtered=s["format"] == "tsv-gz", sampled=sampled) for s in sources]
    return readers, names, kinds, stats


def _progress(quiet, **kwargs):
    from tqdm import tqdm
    return tqdm(disable=quiet or not sys.stderr.isatty(), file=sys.stderr, **kwargs)


def _kept_batches(readers, source_stats, lang, max_tokens, max_ratio, dedup, quiet, backend,
                  batch_lines, sample=None):
    """Yield lists of kept (english, foreign, source index), in source order.

    Reads ``batch_lines`` raw pairs at a time, normalises them, applies the length rules
    and deduplication, and counts every reason in ``source_stats[k]``. ``dedup``: "exact"
    (a set of the kept (english, foreign) strings), "digest" (a set of 8-byte blake2b
    digests of "english<TAB>foreign": a fixed 8 bytes of key per kept pair; two different
    pairs collide with probability about n^2 / 2^65, 3e-8 for a million pairs) or None.
    ``sample``: (fraction, seed) of a resample (:func:`sample_keeper`), applied last, to the
    pairs the rules and deduplication keep (the stats of each source then hold "sampled_out");
    None keeps them all.
    """
    seen = set()
    keep = sample_keeper(*sample) if sample is not None else None
    with _progress(quiet, desc=f"read {lang}-en", unit=" lines") as bar:
        for k, source_readers in enumerate(readers):
            st = source_stats[k]
            for reader in source_readers:
                for batch in _normalised(reader(st), lang, backend, batch_lines, max_tokens, max_ratio, st, bar):
                    kept = []
                    for en, f in batch:
                        reason = None
                        if dedup is not None:
                            key = (en, f) if dedup == "exact" else pair_digest(en, f)
                            if key in seen:
                                reason = "duplicate"
                            else:
                                seen.add(key)
                        if reason is None and keep is not None and not keep(en, f):
                            reason = SAMPLED_OUT
                        if reason is None:
                            reason = "kept"
                            kept.append((en, f, k))
                        st[reason] += 1
                    if kept:
                        yield kept


def _normalised(pairs, lang, backend, batch_lines, max_tokens, max_ratio, st, bar=None):
    """Lists of the (english, foreign) a reader's ``pairs`` give, normalised ``batch_lines`` at a
    time, that pass the length rules; every pair the rules drop is counted in ``st`` under its
    reason. ``bar``: a progress bar told each batch's raw pairs."""
    f_lang = tokenizer_lang(lang)
    while raw := list(itertools.islice(pairs, batch_lines)):
        if bar is not None:
            bar.update(len(raw))
        ens = normalize_many([t[1] for t in raw], "en", backend)
        fs = normalize_many([t[2] for t in raw], f_lang, backend)
        passed = []
        for en, f in zip(ens, fs):
            reason = _filter_reason(en, f, max_tokens, max_ratio)
            if reason is None:
                passed.append((en, f))
            else:
                st[reason] += 1
        yield passed


def pair_digest(en: str, f: str) -> bytes:
    """The 8-byte deduplication key of a normalised pair ("digest" deduplication): blake2b of
    "english<TAB>foreign"."""
    return hashlib.blake2b(f"{en}\t{f}".encode(), digest_size=8).digest()


def _summary(names, source_stats, max_tokens, max_ratio, backend):
    total = _new_stats(filtered=any(FILTERED in st for st in source_stats),
                       sampled=any(SAMPLED_OUT in st for st in source_stats))
    for st in source_stats:
        for key, value in st.items():
            total[key] += value
    return {"total": total, "sources": dict(zip(names, source_stats)),
            "max_tokens": max_tokens, "max_ratio": max_ratio, "tokenizer": backend}


def load_bitext(sources, lang, data_root, max_tokens=80, max_ratio=9.0, quiet=False,
                backend="moses-cpp"):
    """Read, normalise, filter and deduplicate every recipe source of one pivot language.

    ``sources`` are recipe dicts (``name``, ``format`` and the format's keys; see the
    module docstring and ``recipes/bio.toml``); paths are relative to ``data_root``. All
    files are checked to exist before any is read. Deduplication runs across all sources
    of the language, so a pair present in two sources is credited to the first one.
    The whole bitext is held in memory: for a large one, :func:`write_bitext` writes the
    same folder as ``load_bitext(...).save(dir)`` in bounded memory.
    """
    readers, names, kinds, source_stats = _plan(sources, lang, data_root)
    en, f, origin = [], [], array("h")
    for batch in _kept_batches(readers, source_stats, lang, max_tokens, max_ratio, "exact",
                               quiet, backend, BATCH_LINES):
        en.extend(t[0] for t in batch)
        f.extend(t[1] for t in batch)
        origin.extend(t[2] for t in batch)
    stats = _summary(names, source_stats, max_tokens, max_ratio, backend)
    return Bitext(lang, en, f, np.array(origin, dtype=np.int16), names, stats, kinds)


def write_bitext(sources, lang, data_root, out_dir, max_tokens=80, max_ratio=9.0, dedup=True,
                 quiet=False, backend="moses-cpp", batch_lines=BATCH_LINES,
                 sample_fraction=SAMPLE_DEFAULTS["sample_fraction"], sample_seed=SAMPLE_DEFAULTS["sample_seed"]):
    """Stream the corpus stage of one pivot language into ``out_dir``; return its meta dict.

    Writes ``bitext.en``, ``bitext.<lang>``, ``origin.npy`` and ``meta.json``, byte for byte
    what ``load_bitext(...).save(out_dir)`` writes (with ``dedup=True``), but in bounded
    memory: raw lines are read and normalised ``batch_lines`` at a time and each kept pair
    is written at once; what grows with the corpus is 2 bytes of origin id per kept pair
    and, for deduplication, one 8-byte digest per kept pair in a set (about 70 bytes with
    Python's overhead) instead of the sentences themselves.

    ``dedup=False`` keeps repeated pairs (every "duplicate" count stays 0 and meta.json's
    stats say ``"dedup": false``): the scale benchmark feeds one corpus several times.
    ``sample_fraction`` < 1 writes a resample of the bitext: of the pairs the rules and
    deduplication keep, those :func:`sample_keeper` keeps for ``sample_seed`` (meta.json's
    stats count the others as "sampled_out" and record ``"sample": {"fraction", "seed"}``);
    at 1 (the default) nothing is hashed and the folder is that of a full corpus.
    Every file a source names is checked to exist before anything is written.
    """
    sample = (sample_fraction, sample_seed) if sample_fraction < 1 else None
    readers, names, kinds, source_stats = _plan(sources, lang, data_root, sampled=sample is not None)
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    origin = array("h")
    with open(d / "bitext.en", "w", encoding="utf-8", newline="\n") as fe, \
            open(d / f"bitext.{lang}", "w", encoding="utf-8", newline="\n") as ff:
        for batch in _kept_batches(readers, source_stats, lang, max_tokens, max_ratio,
                                   "digest" if dedup else None, quiet, backend, batch_lines, sample):
            fe.writelines(t[0] + "\n" for t in batch)
            ff.writelines(t[1] + "\n" for t in batch)
            origin.extend(t[2] for t in batch)
    return _finish_bitext(d, lang, origin, names, kinds, source_stats, max_tokens, max_ratio, backend, dedup, sample)


def _finish_bitext(d, lang, origin, names, kinds, source_stats, max_tokens, max_ratio, backend, dedup, sample):
    """``origin.npy`` and ``meta.json`` of a corpus folder whose bitext files are written."""
    np.save(d / "origin.npy", np.array(origin, dtype=np.int16))
    stats = _summary(names, source_stats, max_tokens, max_ratio, backend)
    if not dedup:
        stats["dedup"] = False
    if sample:
        stats["sample"] = {"fraction": sample[0], "seed": sample[1]}
    meta = _bitext_meta(lang, len(origin), names, kinds, stats)
    _write_meta(d, meta)
    return meta


# ----------------------------------------------------------------------------- on a cluster
#
# write_bitext reads one language's sources in one task. On a cluster the same folder is
# written in two steps: every source's files are cut into chunks of lines, each normalised and
# filtered by the length rules in a task of its own (normalise_chunk, all languages' at once),
# then one task per language (join_chunks) reads the chunks' pairs in the corpus's order
# (source, file, chunk, line) and applies what depends on the pairs before: deduplication and
# the resample. The same pairs in the same order meet the same rules, so the folder is byte
# for byte write_bitext's (tests/test_corpus_chunks.py); a chunk's cut never reaches it.

#: Lines of a source's file one chunk task reads (the file's last chunk takes what is left).
CHUNK_LINES = 100_000

#: Chunks of one file at most. A chunk reads its file from the start (a gzip or zip stream cannot
#: be entered in the middle; read_parallel also counts both files' lines to check they align),
#: so a file of m chunks is read about (m + 1) / 2 times over: with at most 8, 4.5 times at
#: most, a constant factor of the reading (a tenth of a chunk's work: Tatoeba fr 0.15 s read
#: against 1.3 s normalised), where chunks of a fixed size would make it grow with the square of
#: the file. A larger file gets longer chunks.
MAX_FILE_CHUNKS = 8

#: Bytes a line is taken to hold when a file's lines are estimated from its size, to cut it into
#: chunks before reading it. An estimate only sets how many chunks there are; a file of longer
#: lines has fewer lines than estimated: its last chunk is shorter, or reads past the end to
#: nothing (a read without normalising, ~1/10 of a chunk's work).
LINE_BYTES = 64


def _text_bytes(path: Path) -> int:
    """The bytes of text in a file: a gzip stream's (its trailer holds the size modulo 2^32; the
    file's own size when that is smaller), a plain file's size."""
    size = path.stat().st_size
    if path.suffix == ".gz" and size >= 4:
        with open(path, "rb") as fh:
            fh.seek(-4, os.SEEK_END)
            return max(size, struct.unpack("<I", fh.read(4))[0])
    return size


def chunk_plan(sources, lang, data_root, chunk_lines: int = CHUNK_LINES) -> list[tuple[int, int, tuple, int]]:
    """The chunks of one language's corpus, in its order: (source index, file index within the
    source, (first line, stop line or None), estimated bytes). A file's chunks are windows of
    ``chunk_lines`` lines, as many as its size at :data:`LINE_BYTES` a line fills, at most
    :data:`MAX_FILE_CHUNKS` (longer windows then); the last one is open-ended, so the chunks
    cover every line whatever the estimate."""
    data_root = Path(data_root)
    out = []
    for k, source in enumerate(sources):
        files = source_files(source, data_root, lang)
        fmt = source["format"]
        if fmt in ("parallel", "parallel-glob"):
            sizes = [_text_bytes(en) for en in files[0::2]]    # the English side of each pair of files
        elif fmt == "tsv-zip":
            sizes = [_zip_text_bytes(files[0], source.get("member"))]
        else:
            sizes = [_text_bytes(path) for path in files]
        for r, size in enumerate(sizes):
            lines = math.ceil(size / LINE_BYTES)
            n = min(max(1, math.ceil(lines / chunk_lines)), MAX_FILE_CHUNKS)
            step = max(chunk_lines, math.ceil(lines / n))
            for j in range(n):
                stop = 1 + (j + 1) * step if j + 1 < n else None
                out.append((k, r, (1 + j * step, stop), min(size, step * LINE_BYTES)))
    return out


def _zip_text_bytes(path: Path, member: str | None) -> int:
    """The size of the text member a tsv-zip source reads (``member``, or the one
    :func:`_zip_text_member` chooses), from the archive's directory."""
    with zipfile.ZipFile(path) as zf:
        return zf.getinfo(_zip_text_member(zf, path, member)).file_size


def normalise_chunk(sources, lang, data_root, k: int, r: int, lines, out: str, max_tokens=80, max_ratio=9.0,
                    dedup=True, backend="moses-cpp", batch_lines=BATCH_LINES,
                    sample_fraction=SAMPLE_DEFAULTS["sample_fraction"], sample_seed=SAMPLE_DEFAULTS["sample_seed"]):
    """A chunk task: the lines ``lines`` of file ``r`` of source ``k``, read, normalised and
    filtered by the length rules. The pairs they keep go to ``out.en`` / ``out.f`` (a line
    each), with what the join decides by, hashed here: with ``dedup``, each pair's 8-byte
    deduplication digest (:func:`pair_digest`) in ``out.digest.npy``; for a resample, its
    :func:`sample_keeper` hash in ``out.sample.npy``. The chunk's counts go to ``out.json``, written last and
    atomically (a chunk whose json is on disk is done: an interrupted stage resumes after it).
    The keywords are :func:`write_bitext`'s."""
    sampled = sample_fraction < 1
    readers, _, _, stats = _plan(sources, lang, data_root, sampled=sampled)
    st = stats[k]
    digests, hashes, n = bytearray(), array("Q"), 0
    with open(f"{out}.en", "w", encoding="utf-8", newline="\n") as fe, \
            open(f"{out}.f", "w", encoding="utf-8", newline="\n") as ff:
        for batch in _normalised(readers[k][r](st, lines), lang, backend, batch_lines, max_tokens, max_ratio, st):
            for en, f in batch:
                fe.write(en + "\n")
                ff.write(f + "\n")
                if dedup:
                    digests += pair_digest(en, f)
                if sampled:
                    hashes.append(pair_sample_hash(en, f, sample_seed))
            n += len(batch)
    if dedup:
        np.save(f"{out}.digest.npy", np.frombuffer(bytes(digests), dtype=np.uint64))
    if sampled:
        np.save(f"{out}.sample.npy", np.array(hashes, np.uint64))
    with atomic_path(Path(f"{out}.json")) as tmp:
        tmp.write_text(json.dumps({"source": k, "pairs": n, "stats": st}))


def join_chunks(sources, lang, data_root, chunk_paths: list[str], out_dir, max_tokens=80, max_ratio=9.0,
                dedup=True, backend="moses-cpp", sample_fraction=SAMPLE_DEFAULTS["sample_fraction"],
                sample_seed=SAMPLE_DEFAULTS["sample_seed"]) -> dict:
    """The join task of one language: its chunks' pairs (``chunk_paths``, in the corpus's
    order) through deduplication and the resample into ``out_dir``, the folder
    :func:`write_bitext` writes for the same arguments; returns its meta dict.

    write_bitext keeps a pair iff its digest was not seen before it (deduplication), then iff
    its sample hash h < :func:`sample_limit` (the resample). Over the chunks' digests in the
    corpus's order, "not seen before" is "at the first index of its value" (np.unique's
    ``return_index``), so both rules are array operations here, and each chunk's kept lines
    are copied as bytes."""
    sample = (sample_fraction, sample_seed) if sample_fraction < 1 else None
    _, names, kinds, source_stats = _plan(sources, lang, data_root, sampled=sample is not None)
    chunks = [json.loads(Path(f"{stem}.json").read_text()) for stem in chunk_paths]

    def column(name):
        return np.concatenate([np.load(f"{stem}.{name}.npy") for stem in chunk_paths])

    source = np.repeat(np.array([c["source"] for c in chunks], np.int16), [c["pairs"] for c in chunks])
    # deduplication keeps a pair at the first index of its digest; without it, every pair
    first = np.zeros(len(source), bool) if dedup else np.ones(len(source), bool)
    if dedup:
        first[np.unique(column("digest"), return_index=True)[1]] = True
    kept = first & (column("sample") < np.uint64(sample_limit(sample_fraction))) if sample else first
    counts = {"duplicate": ~first, "kept": kept, **({SAMPLED_OUT: first & ~kept} if sample else {})}
    for c in chunks:
        for key, value in c["stats"].items():
            source_stats[c["source"]][key] += value
    for reason, mask in counts.items():
        for k, n in enumerate(np.bincount(source[mask], minlength=len(names)).tolist()):
            source_stats[k][reason] += n
    d = Path(out_dir)
    pos = 0
    with open(d / "bitext.en", "wb") as fe, open(d / f"bitext.{lang}", "wb") as ff:
        for stem, c in zip(chunk_paths, chunks):
            take = kept[pos:pos + c["pairs"]].tolist()
            pos += c["pairs"]
            for suffix, fh in (("en", fe), ("f", ff)):
                lines = Path(f"{stem}.{suffix}").read_bytes().split(b"\n")[:-1]
                fh.writelines(line + b"\n" for line in itertools.compress(lines, take))
    return _finish_bitext(d, lang, source[kept], names, kinds, source_stats, max_tokens, max_ratio, backend,
                          dedup, sample)


# ----------------------------------------------------------------------------- the stage


def stage_params(recipe, lang) -> dict:
    # A resample of the bitext ([preprocess] sample_fraction < 1) enters the key; the full
    # bitext's parameters are the table as always (sample_params).
    [spec] = [s for s in recipe["bitext"] if s["lang"] == lang]
    return {"lang": lang, "sources": spec["sources"], "preprocess": sample_params(recipe["preprocess"])}


def source_files(source: dict, data_root: Path, lang: str) -> list[Path]:
    """The files one recipe source reads, in a fixed order (for fingerprints and readers)."""
    fmt = source.get("format")
    if fmt == "parallel":
        files = [data_root / source["en"], data_root / source["f"]]
    elif fmt == "parallel-glob":
        ens = sorted(data_root.glob(source["en"]))
        if not ens:
            raise InputError(
                f"source {source.get('name')!r}: no file matches {source['en']!r} under the data root "
                f"(set by --data or PIVOT_DATA)", data_root
            )
        files = [p for en in ens for p in (en, en.with_suffix("." + lang))]
    elif fmt == "tsv-zip":
        files = [data_root / source["path"]]
    elif fmt == "tsv-gz":
        # `path` may be a glob (*, ?, [...]): its matches, sorted, as the reader takes them.
        if any(c in source["path"] for c in "*?["):
            files = sorted(data_root.glob(source["path"]))
            if not files:
                raise InputError(
                    f"source {source.get('name')!r}: no file matches {source['path']!r} under the "
                    f"data root (set by --data or PIVOT_DATA)", data_root
                )
        else:
            files = [data_root / source["path"]]
    else:
        raise InputError(f"source {source.get('name')!r}: unknown format {fmt!r} "
                         "(parallel, parallel-glob, tsv-zip, tsv-gz)")
    for f in files:
        if not f.is_file():
            raise InputError(
                f"source {source.get('name')!r}: file missing; the data root is set by --data DIR "
                f"or PIVOT_DATA", f
            )
    return files


def stage_data(params, data_root) -> list[Path]:
    return [f for src in params["sources"] for f in source_files(src, data_root, params["lang"])]


def run_stage(context):
    """One pivot language's bitext; a language of which no pair is left stops the build here.

    In one process, one task (write_bitext). On a cluster, a task per chunk of every source's
    files (normalise_chunk, beside the other languages' and the tagger), then the join
    (join_chunks): the same folder. The chunks live in the stage's partial folder until the
    join has read them; a chunk finished by an interrupted run is not read again."""
    import shutil
    from functools import partial

    from pivot.pipeline.engine import Batch

    sources, lang, root, preprocess = context.params["sources"], context.lang, context.data_root, \
        context.params["preprocess"]
    if context.engine.in_process:
        write = partial(write_bitext, quiet=context.quiet, **preprocess)
        yield Batch(write, [(sources, lang, root, context.tmp)], name=context.name)
    else:
        folder = context.tmp / ".chunks"
        folder.mkdir(exist_ok=True)
        plan = chunk_plan(sources, lang, root)
        stems = [str(folder / f"chunk-{k:05d}-{r:05d}-{lines[0]:012d}") for k, r, lines, _ in plan]
        todo = [j for j, stem in enumerate(stems) if not Path(f"{stem}.json").is_file()]
        yield Batch(partial(normalise_chunk, **preprocess),
                    [(sources, lang, root, *plan[j][:3], stems[j]) for j in todo],
                    name=f"{context.name}-chunks", cost=[plan[j][3] for j in todo])
        yield Batch(partial(join_chunks, **preprocess), [(sources, lang, root, stems, context.tmp)],
                    name=f"{context.name}-join")
        shutil.rmtree(folder)
    check_kept(read_meta(context.tmp), context.recipe_file)


def check_kept(meta: dict, recipe_file) -> None:
    """A pivot language whose corpus stage kept no sentence pair stops the build here, in one
    line, before its alignment and the later stages meet an empty bitext (an LM "with no
    sentences", an empty table). Preflight refuses the plain cases (every pair surely too long
    or empty); this is the rest, which only tokenising decides."""
    if meta["n_pairs"] > 0:
        return
    total = meta["stats"]["total"]
    dropped = ", ".join(f"{total[k]:,} {k.replace('_', ' ')}" for k in
                        ("blank", "header", "empty", "too_long", "ratio", "duplicate", "sampled_out")
                        if total.get(k))
    raise InputError(f"[[bitext]] {meta['lang']}: no sentence pair is left after the [preprocess] rules "
                     f"({total['read']:,} read: {dropped or 'none kept'}); raise max_tokens or max_ratio, "
                     "or check the files", recipe_file)


def stage_check(recipe, data_root, plan) -> list:
    """Preflight of the corpus stages (pivot.preflight): every bitext file into the plan, by the
    stage's own planner (same keys, same globs, same messages); returns the read-through checks,
    one read of each distinct file. A tsv-gz file named by several sources is read once, with
    the largest column count their row filters need."""
    import glob

    root = Path(data_root)
    checks = []
    tsv_columns: dict[Path, int] = {}
    tsv_langs: dict[Path, set] = {}      # the languages of the sources naming a tsv-gz file
    seen: set = set()
    for block in recipe["bitext"]:
        lang = block["lang"]
        _plan(block["sources"], lang, root)   # keys, names, files exist, globs match
        for k, src in enumerate(block["sources"]):
            fmt = src["format"]
            if fmt == "parallel":
                pairs = [(_data_file(root, src["en"], src["name"]), _data_file(root, src["f"], src["name"]))]
            elif fmt == "parallel-glob":
                ens = sorted(glob.glob(str(root.absolute() / src["en"])))
                pairs = [(Path(en), _data_file(root, en[:-3] + "." + lang, src["name"])) for en in ens]
            else:
                pairs = []
            for en, f in pairs:
                if _same_file(en, f):
                    raise InputError(f"recipe source {src['name']!r}: the English and the {lang} side are the "
                                     f"same file ({f}); a bitext pairs each sentence with its translation", en)
                for p in (en, f):
                    plan.add_input(Path(p), "bitext", lang)
                if (en, f) not in seen:
                    seen.add((en, f))
                    checks.append(lambda en=en, f=f, lang=lang: _check_parallel(plan, en, f, lang))
            if fmt == "tsv-zip":
                path = _data_file(root, src["path"], src["name"])
                plan.add_input(path, "bitext", lang)
                key = (path, src.get("member"))
                if key not in seen:
                    seen.add(key)
                    checks.append(lambda path=path, member=src.get("member"), lang=lang:
                                  _check_rows(plan, f"{path}:{member}" if member else path, {lang},
                                              read_tsv_zip(path, member)))
            elif fmt == "tsv-gz":
                if _is_glob(src["path"]):
                    paths = [Path(p) for p in sorted(glob.glob(str(root.absolute() / src["path"])))]
                else:
                    paths = [_data_file(root, src["path"], src["name"])]
                rule = compile_row_filter(src.get("where"), src.get("exclude"), src["name"])
                n_columns = rule[0] if rule else 2
                for path in paths:
                    plan.add_input(path, "bitext", lang)
                    if path not in tsv_columns:
                        checks.append(lambda path=path: _check_tsv(plan, path, tsv_columns[path], tsv_langs[path]))
                    tsv_columns[path] = max(tsv_columns.get(path, 2), n_columns)
                    tsv_langs.setdefault(path, set()).add(lang)
    return checks


def _same_file(a, b) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


class LengthRule:
    """Does any sentence pair of each pivot language pass the build's length rules?

    The corpus stage drops a pair whose normalised (Moses-tokenised) sides are empty or longer
    than ``max_tokens`` tokens (:func:`_filter_reason`). Tokenising is the
    corpus stage's work, too slow to repeat here, but tokenising never merges two
    whitespace-separated words and never drops a word holding a letter or a digit. So a raw
    side with more than ``max_tokens`` such words is surely too long, and a blank side surely
    empty: a language all of whose pairs are one or the other leaves no pair, and the build
    would stop only when a later stage finds nothing (an LM "with no sentences", an empty
    alignment). Any other pair may pass; once one does, a language's pairs are not looked at
    again. What only tokenising decides (a pair just over the limit once punctuation is split
    off, the length ratio, duplicates, a resample) the build checks after its corpus stage.
    """

    def __init__(self, max_tokens: int):
        self.max_tokens = max_tokens
        self.read: dict[str, int] = {}
        self.may_pass: set[str] = set()
        self.example: dict[str, tuple] = {}   # lang -> (path, line, what is wrong) of its first pair

    def pending(self, langs) -> bool:
        """Some of ``langs`` has no pair yet that may pass."""
        return not langs <= self.may_pass

    def count(self, langs, n: int) -> None:
        for lang in langs:
            self.read[lang] = self.read.get(lang, 0) + n

    def observe(self, langs, en: str, f: str, paths, line: int) -> None:
        """One pair, read at ``line`` of ``paths`` (English file, foreign file: one file twice
        for a TSV), for the languages of the sources that read it."""
        for lang in langs:
            if lang in self.may_pass:
                continue
            wrong = self._surely_dropped(en, f)
            if wrong is None:
                self.may_pass.add(lang)
            elif lang not in self.example:
                self.example[lang] = (paths[wrong[0]], line, wrong[1])

    def _surely_dropped(self, en: str, f: str) -> tuple[int, str] | None:
        """(side, why) of a pair the length rules surely drop (side 0: English, 1: foreign)."""
        for side, text in enumerate((en, f)):
            if not text.strip():
                return side, f"its {('English', 'foreign')[side]} side is empty"
        for side, text in enumerate((en, f)):
            words = text.split()
            if len(words) > self.max_tokens:
                n = sum(1 for w in words if any(c.isalnum() for c in w))
                if n > self.max_tokens:
                    return side, f"its {('English', 'foreign')[side]} side has {n} words"
        return None

    def verify(self) -> None:
        for lang, n in self.read.items():
            if lang not in self.may_pass:
                path, line, wrong = self.example[lang]
                raise InputError(f"[[bitext]] {lang}: none of its {n:,} sentence pairs can pass the [preprocess] "
                                 f"length rules (a side empty or longer than max_tokens = {self.max_tokens} "
                                 f"tokens); here {wrong}: raise max_tokens, or check the files", path, line)


def _check_rows(plan, where, langs, rows, f_path=None) -> None:
    """Count the (number, english, foreign) rows of one bitext file (or file pair); refuse one
    without a pair, or whose two sides are identical on every line (the same text twice, not a
    translation); show the length rule its rows until each of ``langs`` has one that may pass."""
    n, identical = 0, True
    pending = plan.lengths.pending(langs)
    for number, en, f in rows:
        n += 1
        if identical and en != f:
            identical = False
        if pending:
            plan.lengths.observe(langs, en, f, (where, f_path or where), number)
            pending = plan.lengths.pending(langs)
    if n == 0:   # lines, but blank ones only (a file without a line is refused by its reader)
        raise InputError("holds only blank lines: no sentence pair", where)
    plan.lengths.count(langs, n)
    if identical:
        sides = (f"identical, line for line, to its {'/'.join(sorted(langs))} side {f_path}" if f_path else
                 "the English and the foreign column are identical")
        raise InputError(f"{sides} on all {n:,} lines: the same text twice is not a translation", where)
    plan.count("bitext lines", n)


def _check_parallel(plan, en: Path, f: Path, lang: str) -> None:
    # line counts first (both files), then every line of both: the reader of the build
    _check_rows(plan, en, {lang}, read_parallel(en, f, drop_headers=False), f_path=f)


def _check_tsv(plan, path: Path, n_columns: int, langs: set) -> None:
    # A where-filter matching anything in column n_columns: no row is filtered, but every row
    # must have the columns the strictest of the file's sources needs, as in the build. The
    # length rule then sees rows a source's filter would drop: it may only say "may pass"
    # too often, never "none passes" wrongly.
    where = {str(n_columns): "*"} if n_columns > 2 else None
    _check_rows(plan, path, langs, read_tsv_gz(path, where=where))


def english_texts(corpus_dirs) -> list[tuple[str, int]]:
    """(bitext.en, sentence pairs) of each language's corpus folder, in recipe order: the English
    side the encode stage concatenates into english.txt, read as it is by the LM branch."""
    return [(str(Path(d) / "bitext.en"), int(read_meta(d)["n_pairs"])) for d in corpus_dirs]


STAGE = Stage("corpus", 1, (), ("bitext", "preprocess"), stage_params,
              ("bitext.en", "bitext.*", "origin.npy", "meta.json"), run_stage,
              "one per chunk of 100,000 lines of every source file, then a join per language (Dask); "
              "one per language in one process", "read, normalise (Moses tokenizer, lower case), filter, deduplicate",
              data=stage_data, per_language=True, check=stage_check)
