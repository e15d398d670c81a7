"""Recipes: TOML files that say which data a build reads and with which parameters.

`pivot build --domain bio` reads the shipped `bio.toml` (the repository's `recipes/` folder,
installed as the package data `pivot/recipes_data/`); `--recipe FILE` reads any other. Paths
inside a recipe are relative to the data root, which comes from `--data DIR` or the
PIVOT_DATA environment variable.

:func:`load_recipe` checks the whole recipe against :data:`SCHEMA` before anything runs:
unknown sections and keys (with a "did you mean"), types and ranges, so that a build never
starts with a recipe that would fail in a later stage. Every error names the recipe file and,
where it can be found, the line.
"""
from __future__ import annotations

import difflib
import hashlib
import json
import math
import os
import re
import tomllib
from pathlib import Path

from pivot.errors import InputError


def _recipes_dir() -> Path:
    """The shipped recipes: package data in an installed copy, else the repository's folder."""
    here = Path(__file__).resolve().parent
    packaged = here / "recipes_data"
    if packaged.is_dir() and any(packaged.glob("*.toml")):
        return packaged
    return here.parent / "recipes"


RECIPES_DIR = _recipes_dir()
DATA_ENV = "PIVOT_DATA"

# Every parameter a recipe may omit, with its default. The build records the merged values.
DEFAULTS = {
    "preprocess": {"max_tokens": 80, "max_ratio": 9.0, "dedup": True},
    "align": {"method": "ibm2", "model": 3, "length": 1.0, "pharaoh": {}},
    "extract": {"max_phrase_len": 5, "shard_sentences": 50_000, "shard_tokens": 250_000},
    "pivot": {"min_p_f_given_e": 0.001, "min_p_e_given_f": 0.001, "max_e_per_f": 100, "top_n": 20,
              "min_phrase_count": 2, "min_p_e2_given_e1": 0.0},
    # PPDB 2.0's layer (pivot.pipeline.ppdb2): the learned score, the relations, the sizes. It
    # needs the data root's PPDB 2.0 ratings and WordNet 3.0; a recipe whose data root has
    # neither says so with learn = false and wordnet = false (nothing falls back silently).
    # lhs: the phrases' PPDB labels (pivot.pipeline.lhs), from a tagger trained on the data
    # root's GENIA-pos and Brown; "x" writes [X] for every phrase (and the meta says so).
    "ppdb2": {"learn": True, "wordnet": True, "ratings": "gold/ppdb-human-dev.tsv", "seed": 0,
              "dev_fraction": 0.5, "relation_test_fraction": 0.3, "max_relation_pairs": 15_000,
              "lhs": "tagged"},
}


# Sections a recipe may leave out entirely; when present, missing keys get these defaults
# and keys marked None must be given. Without [domain] a build makes the General model only;
# without [combine] it makes no General+X combinations.
OPTIONAL = {
    "domain": {"in_domain": None, "general": {}, "order": 5, "estimator": "pivot", "seed": 0,
               "taus": [], "report_in_domain_sources": [], "matched": True, "vocab_min_count": 2},
    "combine": {"gold": None, "format": "simlex", "threshold": 6.0, "n_tune": 1000, "seed": 0},
    "eval": {"sets": []},
}


def available_domains() -> list[str]:
    return sorted(p.stem for p in RECIPES_DIR.glob("*.toml"))


def recipe_path(domain: str | None = None, recipe: str | os.PathLike | None = None) -> Path:
    if recipe is not None:
        path = Path(recipe)
        if not path.is_file():
            raise InputError("recipe file not found", path)
        return path
    path = RECIPES_DIR / f"{domain}.toml"
    if not path.is_file():
        raise InputError(
            f"no recipe for domain {domain!r} (known: {', '.join(available_domains()) or 'none'}); "
            "pass --recipe FILE for your own", path
        )
    return path


def load_recipe(path: Path) -> dict:
    """Parse and validate a recipe; fill in defaults; keep the file's hash for the signature."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read the recipe ({exc.strerror or exc})", path) from None
    try:
        text = raw.decode("utf-8")
        recipe = tomllib.loads(text)
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InputError(f"not a valid TOML recipe: not UTF-8 ({raw[exc.start:exc.start + 4]!r})",
                         path, line) from None
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        raise InputError(f"not a valid TOML recipe: {exc}", path, int(m.group(1)) if m else None) from None
    validate(recipe, path, text)
    for section, defaults in DEFAULTS.items():
        recipe[section] = {**defaults, **recipe.get(section, {})}
    for section, defaults in OPTIONAL.items():
        if section in recipe:
            recipe[section] = {**defaults, **recipe[section]}
    recipe.setdefault("name", path.stem)
    recipe["_path"] = str(path)
    recipe["_sha256"] = hashlib.sha256(raw).hexdigest()
    return recipe


# ----------------------------------------------------------------------------- schema

#: Top-level keys that are not tables.
TOP_KEYS = {"name": "a name (the default database and work folder names)", "description": "text"}
#: Every section a recipe may hold.
SECTIONS = ["bitext", *DEFAULTS, *OPTIONAL]

_INT, _NUM, _BOOL, _STR = "an integer", "a number", "true or false", "a string"
# section -> key -> (kind, low, high, choices); None: checked by a function below.
SCHEMA = {
    "preprocess": {"max_tokens": (_INT, 2, None, None), "max_ratio": (_NUM, 1, None, None),
                   "dedup": (_BOOL, None, None, None),
                   # A resample of the bitext (pivot.pipeline.corpus.sample_keeper); no default in
                   # DEFAULTS, so that a recipe without them records and builds what it always did.
                   "sample_fraction": (_NUM, 0, 1, None), "sample_seed": (_INT, 0, None, None)},
    "align": {"method": (_STR, None, None, ("ibm2", "eflomal", "pharaoh")), "model": (_INT, 1, 3, None),
              "length": (_NUM, 0, None, None), "pharaoh": None},
    "extract": {"max_phrase_len": (_INT, 1, None, None), "shard_sentences": (_INT, 1, None, None),
                "shard_tokens": (_INT, 1, None, None)},
    "pivot": {"min_p_f_given_e": (_NUM, 0, 1, None), "min_p_e_given_f": (_NUM, 0, 1, None),
              "max_e_per_f": (_INT, 0, None, None), "top_n": (_INT, 0, None, None),
              "min_phrase_count": (_INT, 0, None, None), "min_p_e2_given_e1": (_NUM, 0, 1, None)},
    "domain": {"in_domain": None, "general": None, "order": (_INT, 1, 9, None),
               "estimator": (_STR, None, None, ("pivot", "lmplz")), "seed": (_INT, 0, None, None),
               "taus": None, "report_in_domain_sources": None, "matched": (_BOOL, None, None, None),
               "vocab_min_count": (_INT, 1, None, None)},
    "ppdb2": {"learn": (_BOOL, None, None, None), "wordnet": (_BOOL, None, None, None),
              "ratings": (_STR, None, None, None), "seed": (_INT, 0, None, None),
              "dev_fraction": (_NUM, 0, 1, None), "relation_test_fraction": (_NUM, 0, 1, None),
              "max_relation_pairs": (_INT, 100, None, None), "lhs": (_STR, None, None, ("tagged", "x"))},
    "combine": {"gold": None, "format": (_STR, None, None, ("simlex", "ppdb-human", "pairs")),
                "threshold": (_NUM, None, None, None), "n_tune": (_INT, 1, None, None),
                "seed": (_INT, 0, None, None)},
    "eval": {"sets": None},
}
# Open lower bounds (a value must be strictly greater).
_OPEN_LOW = {("align", "length"), ("preprocess", "sample_fraction"), ("ppdb2", "dev_fraction"),
             ("ppdb2", "relation_test_fraction")}
GOLD_FORMATS = ("simlex", "ppdb-human", "pairs")
MONO_FORMATS = ("conll", "openstax", "brown", "lines", "tsv")


def _max_phrase_len() -> int:
    """The longest phrase the extraction kernel packs (its MAX_PHRASE_LEN)."""
    from pivot._native import _counts

    return int(_counts.MAX_PHRASE_LEN)


def toml_repr(value) -> str:
    """A value as TOML spells it (true, "text", nan), for messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_repr(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(toml_repr(v) for v in value) + "]"
    return str(value)


def _type_name(value) -> str:
    if isinstance(value, bool):
        return "a boolean"
    return {int: "an integer", float: "a decimal number", str: "a string", list: "an array",
            dict: "a table"}.get(type(value), type(value).__name__)


def did_you_mean(word: str, known) -> str:
    """" (did you mean 'x'?)" for the closest known word, or "" when none is close."""
    close = difflib.get_close_matches(str(word), [str(k) for k in known], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


class _Where:
    """Finds the line of a section, a key or a value in the recipe text (best effort)."""

    _HEADER = re.compile(r"^\s*\[(\[)?\s*([^\]]+?)\s*\]")

    def __init__(self, text: str | None):
        self.lines = (text or "").split("\n")
        self.headers = []  # (line index, section name, is an array of tables)
        for i, line in enumerate(self.lines):
            m = self._HEADER.match(line)
            if m:
                self.headers.append((i, m.group(2).strip().strip('"'), bool(m.group(1))))

    def _range(self, section, index=None):
        if section is None:
            return 0, self.headers[0][0] if self.headers else len(self.lines)
        found = [k for k, (_, name, _) in enumerate(self.headers) if name == section]
        if not found:
            return None
        k = found[index] if index is not None and index < len(found) else found[0]
        end = self.headers[k + 1][0] if k + 1 < len(self.headers) else len(self.lines)
        return self.headers[k][0], end

    def section(self, section, index=None):
        r = self._range(section, index)
        return r[0] + 1 if r else None

    def key(self, section, key, index=None, value=None):
        """Line of `key = ...` in the section (the first one whose line also holds `value`)."""
        r = self._range(section, index)
        if r is None:
            return None
        rx = re.compile(r"(^|[\s{,])[\"']?" + re.escape(str(key)) + r"[\"']?\s*=")
        hits = [i for i in range(*r) if rx.search(self.lines[i].split("#", 1)[0])]
        if value is not None:
            wanted = [i for i in hits if str(value) in self.lines[i]]
            hits = wanted or hits
        return hits[0] + 1 if hits else self.section(section, index)


class _Checker:
    def __init__(self, path, text):
        self.path = path
        self.where = _Where(text)

    def fail(self, message, line=None):
        raise InputError(message, self.path, line)

    def value(self, section, key, value, spec, *, label=None, index=None):
        """Check one scalar against (kind, low, high, choices)."""
        kind, low, high, choices = spec
        label = label or f"[{section}] {key}"
        line = self.where.key(section, key, index)
        shown = f"{label} = {toml_repr(value)}"
        if kind == _BOOL:
            if not isinstance(value, bool):
                self.fail(f"{shown}: must be true or false (got {_type_name(value)})", line)
            return
        if kind == _STR:
            if not isinstance(value, str):
                self.fail(f"{shown}: must be a string (got {_type_name(value)})", line)
            if choices and value not in choices:
                self.fail(f"{shown}: must be one of {', '.join(map(repr, choices))}"
                          f"{did_you_mean(value, choices)}", line)
            return
        if kind == _INT and (isinstance(value, bool) or not isinstance(value, int)):
            hint = " (write it without a decimal point)" if isinstance(value, float) and value.is_integer() else ""
            self.fail(f"{shown}: must be an integer (got {_type_name(value)}){hint}", line)
        if kind == _NUM and (isinstance(value, bool) or not isinstance(value, (int, float))):
            self.fail(f"{shown}: must be a number (got {_type_name(value)})", line)
        if isinstance(value, float) and not math.isfinite(value):
            self.fail(f"{shown}: must be a finite number", line)
        open_low = (section, key) in _OPEN_LOW
        too_low = low is not None and (value <= low if open_low else value < low)
        too_high = high is not None and value > high
        if too_low or too_high:
            if low is not None and high is not None:
                rule = f"greater than {low} and at most {high}" if open_low else f"between {low} and {high}"
            elif low is not None:
                rule = f"greater than {low}" if open_low else f"at least {low}"
            else:
                rule = f"at most {high}"
            self.fail(f"{shown} is out of range: must be {rule}", line)

    def table(self, value, label, line):
        if not isinstance(value, dict):
            self.fail(f"{label} must be a table (got {_type_name(value)})", line)

    def unknown(self, given, known, label, line_of):
        bad = [k for k in given if k not in known]
        if not bad:
            return
        hints = [(k, difflib.get_close_matches(str(k), [str(x) for x in known], n=1, cutoff=0.6)) for k in bad]
        if len(bad) == 1:
            hint = f" (did you mean {hints[0][1][0]!r}?)" if hints[0][1] else f"; known: {sorted(known)}"
        else:
            pairs = [f"{close[0]!r} for {k!r}" for k, close in hints if close]
            hint = f" (did you mean {', '.join(pairs)}?)" if pairs else f"; known: {sorted(known)}"
        self.fail(f"{label} has unknown keys {sorted(bad)}{hint}", line_of(bad[0]))

    def strings(self, value, label, line, *, allow_one=False, allow_empty=False):
        """A list of non-empty strings (or one string when allow_one)."""
        if allow_one and isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            self.fail(f"{label} = {toml_repr(value)}: must be an array of non-empty strings", line)
        if not value and not allow_empty:
            self.fail(f"{label} is empty: name at least one file", line)
        return value


def validate(recipe: dict, path: Path, text: str | None = None) -> None:
    """Check a parsed recipe against the schema; InputError (file, line) at the first problem.

    Checks unknown sections and keys (with the closest known name), the type and range of
    every parameter, the bitext sources (formats, their keys, row filters, unique names),
    the monolingual specifications, the gold and eval files' formats, and cross-references
    ([domain] report_in_domain_sources, [align] pharaoh files for every language).
    """
    c = _Checker(path, text)
    w = c.where
    for key, value in recipe.items():
        if key in TOP_KEYS:
            if not isinstance(value, str) or not value.strip():
                c.fail(f"{key} = {toml_repr(value)}: must be a non-empty string", w.key(None, key))
            continue
        if key not in SECTIONS:
            if isinstance(value, (dict, list)) and (isinstance(value, dict) or
                                                    (value and all(isinstance(v, dict) for v in value))):
                c.fail(f"unknown section {key!r}{did_you_mean(key, SECTIONS)}", w.section(key))
            c.fail(f"unknown key {key!r}{did_you_mean(key, [*TOP_KEYS, *SECTIONS])}", w.key(None, key))
    name = recipe.get("name")
    if name is not None and (name in (".", "..") or name.startswith(".") or re.search(r"[/\\\x00-\x1f]", name)):
        c.fail(f"name = {toml_repr(name)}: must be usable as a file name (no '/', no leading '.')",
               w.key(None, "name"))

    langs = _check_bitext(c, recipe.get("bitext"))
    source_names = {s["name"] for block in recipe["bitext"] for s in block["sources"]}

    for section, keys in SCHEMA.items():
        if section not in recipe:
            continue
        given = recipe[section]
        c.table(given, f"[{section}]", w.section(section))
        c.unknown(given, keys, f"[{section}]", lambda k, s=section: w.key(s, k))
        for key, spec in keys.items():
            if key in given and spec is not None:
                c.value(section, key, given[key], spec)
    if "extract" in recipe and "max_phrase_len" in recipe["extract"]:
        c.value("extract", "max_phrase_len", recipe["extract"]["max_phrase_len"],
                (_INT, 1, _max_phrase_len(), None))

    align = recipe.get("align", {})
    pharaoh = align.get("pharaoh", {})
    line = w.key("align", "pharaoh")
    c.table(pharaoh, "[align] pharaoh", line)
    for lang, file in pharaoh.items():
        if lang not in langs:
            c.fail(f"[align] pharaoh names language {lang!r}, which has no [[bitext]] block"
                   f"{did_you_mean(lang, langs)}", line)
        if not isinstance(file, str) or not file:
            c.fail(f"[align] pharaoh {lang} = {toml_repr(file)}: must be a file path (a string)", line)
    fraction = recipe.get("preprocess", {}).get("sample_fraction", 1)
    if fraction < 1 and align.get("method") == "pharaoh":
        c.fail(f"[preprocess] sample_fraction = {toml_repr(fraction)}: a resample changes the saved bitext, "
               "which an [align] pharaoh file is line-aligned with; align with method \"ibm2\" or \"eflomal\"",
               w.key("preprocess", "sample_fraction"))
    if align.get("method") == "pharaoh":
        missing = [lang for lang in langs if lang not in pharaoh]
        if missing:
            c.fail(f"[align] method 'pharaoh' needs an alignment file for every language; missing "
                   f"{missing}: pharaoh = {{ {missing[0]} = \"path\" }}", w.key("align", "method"))

    ppdb2 = recipe.get("ppdb2", {})
    if ppdb2.get("learn", True):
        if not ppdb2.get("wordnet", True):
            c.fail("[ppdb2] learn = true trains the relations on WordNet: it needs wordnet = true "
                   "(or learn = false for a database without the learned score and relations)",
                   w.key("ppdb2", "wordnet"))
        if not ppdb2.get("ratings", "x"):
            c.fail("[ppdb2] ratings is empty: name the PPDB 2.0 human ratings the score is fitted to "
                   "(or learn = false)", w.key("ppdb2", "ratings"))

    if "domain" in recipe:
        dom = recipe["domain"]
        if "in_domain" not in dom:
            c.fail("[domain] needs in_domain (the in-domain LM text, e.g. in_domain = "
                   "{ lines = [\"bio.txt\"] })", w.section("domain"))
        for key in ("in_domain", "general"):
            if key in dom:
                _check_mono(c, dom[key], key, allow_empty=key == "general")
        if "taus" in dom:
            taus, line = dom["taus"], w.key("domain", "taus")
            if not isinstance(taus, list):
                c.fail(f"[domain] taus = {toml_repr(taus)}: must be an array of numbers of words", line)
            for t in taus:
                c.value("domain", "taus", t, (_NUM, 0, None, None), label="[domain] taus value")
        if "report_in_domain_sources" in dom:
            line = w.key("domain", "report_in_domain_sources")
            names = c.strings(dom["report_in_domain_sources"], "[domain] report_in_domain_sources", line,
                              allow_empty=True)
            for n in names:
                if n not in source_names:
                    c.fail(f"[domain] report_in_domain_sources names {n!r}, which is no bitext source"
                           f"{did_you_mean(n, source_names)}", line)

    if "combine" in recipe:
        comb = recipe["combine"]
        if "gold" not in comb:
            c.fail("[combine] needs gold (the labelled in-domain pairs, e.g. gold = [\"gold/Bio-SimLex.txt\"])",
                   w.section("combine"))
        c.strings(comb["gold"], "[combine] gold", w.key("combine", "gold"))

    if "eval" in recipe:
        _check_eval(c, recipe["eval"].get("sets", []))


def _check_bitext(c: _Checker, bitexts) -> list[str]:
    from pivot.pipeline.corpus import SOURCE_KEYS, SOURCE_KINDS, compile_row_filter

    w = c.where
    if bitexts is None:
        c.fail("a recipe needs at least one [[bitext]] with a lang and sources")
    if not isinstance(bitexts, list) or not bitexts or not all(isinstance(b, dict) for b in bitexts):
        c.fail("bitext must be one or more [[bitext]] tables, each with a lang and sources",
               w.key(None, "bitext") or w.section("bitext"))
    langs = []
    for i, block in enumerate(bitexts):
        line = w.section("bitext", i)
        label = f"[[bitext]] number {i + 1}"
        c.unknown(block, ("lang", "sources"), label, lambda k: w.key("bitext", k, i))
        lang = block.get("lang")
        if not lang or not block.get("sources"):
            c.fail(f"{label} needs `lang` and `sources`", line)
        if not isinstance(lang, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", lang):
            c.fail(f"{label}: lang = {toml_repr(lang)} must be a language code (letters, digits, _ and -)",
                   w.key("bitext", "lang", i))
        if lang in langs or lang == "en":
            c.fail(f"[[bitext]] language {lang!r} is repeated or English", w.key("bitext", "lang", i))
        langs.append(lang)
        sources = block["sources"]
        if not isinstance(sources, list) or not all(isinstance(s, dict) for s in sources):
            c.fail(f"[[bitext]] {lang}: sources must be an array of tables "
                   "({ name = ..., format = ..., ... })", w.key("bitext", "sources", i))
        names = []
        for src in sources:
            name = src.get("name")
            sline = w.key("bitext", "name", i, value=json.dumps(name) if isinstance(name, str) else None)
            if not isinstance(name, str) or not name:
                c.fail(f"[[bitext]] {lang}: every source needs a name (a string)", sline)
            if name in names:
                c.fail(f"[[bitext]] {lang}: source name {name!r} is repeated", sline)
            names.append(name)
            what = f"[[bitext]] {lang} source {name!r}"
            fmt = src.get("format")
            if fmt not in SOURCE_KEYS:
                c.fail(f"{what}: format = {toml_repr(fmt)} must be one of {', '.join(map(repr, SOURCE_KEYS))}"
                       f"{did_you_mean(fmt, SOURCE_KEYS) if isinstance(fmt, str) else ''}", sline)
            c.unknown(src, SOURCE_KEYS[fmt], f"{what} (format {fmt!r})", lambda k: sline)
            need = {"parallel": ("en", "f"), "parallel-glob": ("en",), "tsv-zip": ("path",),
                    "tsv-gz": ("path",)}[fmt]
            for key in need:
                if key not in src:
                    c.fail(f"{what} lacks {key!r} (format {fmt!r} needs {', '.join(need)})", sline)
            for key in ("en", "f", "path", "member"):
                if key in src and (not isinstance(src[key], str) or not src[key]):
                    c.fail(f"{what}: {key} = {toml_repr(src[key])} must be a file path (a string)", sline)
            if fmt == "parallel-glob" and not src["en"].endswith(".en"):
                c.fail(f"{what}: the parallel-glob pattern must end in '.en' (got {src['en']!r})", sline)
            if "drop_headers" in src and not isinstance(src["drop_headers"], bool):
                c.fail(f"{what}: drop_headers = {toml_repr(src['drop_headers'])} must be true or false", sline)
            if src.get("kind", "sentences") not in SOURCE_KINDS:
                c.fail(f"{what}: kind = {toml_repr(src['kind'])} must be one of {list(SOURCE_KINDS)}"
                       f"{did_you_mean(src['kind'], SOURCE_KINDS) if isinstance(src['kind'], str) else ''}", sline)
            if "where" in src or "exclude" in src:
                try:
                    compile_row_filter(src.get("where"), src.get("exclude"), name)
                except InputError as exc:
                    c.fail(f"[[bitext]] {lang} {exc}", sline)
    return langs


def _check_mono(c: _Checker, spec, key: str, allow_empty: bool) -> None:
    line = c.where.key("domain", key)
    c.table(spec, f"[domain] {key}", line)
    if not spec and not allow_empty:
        c.fail(f"[domain] {key} is empty: name the in-domain text, e.g. {{ lines = [\"bio.txt\"] }}", line)
    for kind, patterns in spec.items():
        if kind not in MONO_FORMATS:
            c.fail(f"[domain] {key}: unknown text format {kind!r}{did_you_mean(kind, MONO_FORMATS)}; "
                   f"one of {', '.join(MONO_FORMATS)}", line)
        c.strings(patterns, f"[domain] {key} {kind}", line, allow_one=True)


def _check_eval(c: _Checker, sets) -> None:
    w = c.where
    line = w.key("eval", "sets")
    if not isinstance(sets, list) or not all(isinstance(s, dict) for s in sets):
        c.fail("[eval] sets must be an array of tables { name = ..., sources = [...] }", line)
    seen = set()
    for spec in sets:
        name = spec.get("name")
        sline = w.key("eval", "name", value=json.dumps(name) if isinstance(name, str) else None)
        c.unknown(spec, ("name", "exclude_tuning", "sources"), f"[eval] set {name!r}", lambda k: sline)
        if not isinstance(name, str) or not name:
            c.fail("[eval] every set needs a name (a string)", sline)
        if name in seen:
            c.fail(f"[eval] set name {name!r} is repeated", sline)
        seen.add(name)
        if not isinstance(spec.get("exclude_tuning", False), bool):
            c.fail(f"[eval] set {name!r}: exclude_tuning must be true or false", sline)
        sources = spec.get("sources")
        if not isinstance(sources, list) or not sources or not all(isinstance(s, dict) for s in sources):
            c.fail(f"[eval] set {name!r} needs sources = [{{ path = ..., format = ..., threshold = ... }}]", sline)
        for src in sources:
            c.unknown(src, ("path", "format", "threshold"), f"[eval] set {name!r} source", lambda k: sline)
            for key in ("path", "format", "threshold"):
                if key not in src:
                    c.fail(f"[eval] set {name!r}: a source lacks {key!r}", sline)
            if not isinstance(src["path"], str) or not src["path"]:
                c.fail(f"[eval] set {name!r}: path = {toml_repr(src['path'])} must be a file path", sline)
            c.value("eval", "format", src["format"], (_STR, None, None, GOLD_FORMATS),
                    label=f"[eval] set {name!r} format")
            c.value("eval", "threshold", src["threshold"], (_NUM, None, None, None),
                    label=f"[eval] set {name!r} threshold")


def resolve_data_root(data: str | os.PathLike | None) -> Path:
    """The data root from --data, else PIVOT_DATA; a clear error if neither points to a folder."""
    value = data if data is not None else os.environ.get(DATA_ENV)
    if not value:
        raise InputError(
            f"no data root: pass --data DIR or set {DATA_ENV}=DIR (for the shipped recipes, "
            "the folder that holds bitext/, mono/ and gold/, e.g. ../shared/data)"
        )
    root = Path(value).expanduser()
    if not root.is_dir():
        origin = "--data" if data is not None else DATA_ENV
        raise InputError(f"data root does not exist (set by {origin}); point it at the folder holding bitext/ and mono/", root)
    return root.resolve()


def fingerprint_files(paths: list[Path]) -> dict[str, str]:
    """sha256 of each file's bytes, so a changed corpus invalidates the stages built on it."""
    out = {}
    for p in paths:
        h = hashlib.sha256()
        with open(p, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        out[str(p)] = h.hexdigest()
    return out
