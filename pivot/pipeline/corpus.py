"""Corpus stage: read, validate, normalise, filter and deduplicate bitext.

Every English or foreign sentence that enters the project (both sides of the bitext,
language-model text, gold phrases) goes through :func:`normalize`, so a phrase in the
paraphrase database, a word in a gold pair and an n-gram in a language model are spelt
the same way.

Data flow of :func:`load_bitext` for one pivot language:

    recipe sources --read_parallel / read_tsv_zip--> raw (line, english, foreign)
                   --is_section_header, blanks------> dropped, counted
                   --normalize_many------------------> NFC, Moses tokens, lowercase
                   --clean_pairs---------------------> length / ratio filter, exact dedup
                   --> Bitext (en, f, origin)

Readers split lines on ``\\n`` only (never on ``\\r``, U+2028 or U+0085, which Python's
universal-newline mode and ``str.splitlines`` treat as line ends): line-aligned corpora
must be read with the same line boundaries on both sides, and with the same numbering
that ``wc -l`` and ``sed -n Np`` show to a user following an error message.
"""
from __future__ import annotations

import glob
import gzip
import json
import os
import re
import sys
import unicodedata
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pivot.errors import InputError
from pivot.text import (_PUNCT_MAP, _count_lines, _iter_lines, _open_binary, normalize,  # noqa: F401
                         normalize_many, numbered_lines)

# The reasons a raw line or pair is not kept, in the order clean_pairs tests them.
STAT_KEYS = ("read", "blank", "header", "empty", "too_long", "ratio", "duplicate", "kept")

DATA_ROOT_HINT = "the data root is set by `--data DIR` or the PIVOT_DATA environment variable"


def _new_stats():
    return {k: 0 for k in STAT_KEYS}


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


def read_parallel(en_path, f_path, drop_headers=True, stats=None):
    """Yield (line_number, english, foreign) from two line-aligned files (Moses ``stem.lang``).

    Files ending in ``.gz`` are read through gzip. Both files are counted before the
    first pair is yielded, so a line-count mismatch raises InputError (naming both files
    and both counts) before the caller has anything. A line that is blank on both sides
    (a document separator in the WMT biomedical files) is skipped; with ``drop_headers``
    a pair for which :func:`is_section_header` holds is skipped. Trailing whitespace is
    removed from every line.

    ``stats``, when given, is a dict whose "read", "blank" and "header" entries are
    incremented (lines read, blank separators, headers dropped).
    """
    n_en, n_f = _count_lines(en_path), _count_lines(f_path)
    if n_en != n_f:
        raise InputError(
            f"line counts differ: {en_path} has {n_en} lines, {f_path} has {n_f}; "
            "the two sides of a parallel corpus must be line-aligned", path=en_path)
    stats = stats if stats is not None else _new_stats()
    with _open_binary(en_path) as fe, _open_binary(f_path) as ff:
        for (number, en), (_, f) in zip(_iter_lines(fe, en_path), _iter_lines(ff, f_path)):
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


def read_tsv_zip(zip_path, member=None, stats=None):
    """Yield (line_number, english, foreign) from ``english<TAB>foreign[<TAB>...]`` lines in a zip.

    This is the Tatoeba/manythings.org layout (``fra-eng/fra.txt``, ``deu.txt``); fields
    after the second (attribution) are ignored. macOS ``__MACOSX/`` entries and
    ``_about.txt`` are never read. A line with fewer than two fields raises InputError
    naming ``zip:member`` and the line. ``stats`` as in :func:`read_parallel` ("read").
    """
    stats = stats if stats is not None else _new_stats()
    if not Path(zip_path).is_file():
        raise InputError("file not found", path=zip_path)
    with zipfile.ZipFile(zip_path) as zf:
        member = _zip_text_member(zf, zip_path, member)
        where = f"{zip_path}:{member}"
        with zf.open(member) as fh:
            for number, line in _iter_lines(fh, where):
                stats["read"] += 1
                fields = line.split("\t")
                if len(fields) < 2:
                    raise InputError(
                        f"expected english<TAB>foreign, found {len(fields)} field: {line[:60]!r}",
                        path=where, line=number)
                yield number, fields[0].strip(), fields[1].strip()


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
        n_en, n_f = _n_tokens(en), _n_tokens(f)
        if n_en == 0 or n_f == 0:
            yield "empty"
        elif n_en > max_tokens or n_f > max_tokens:
            yield "too_long"
        elif n_en > max_ratio * n_f or n_f > max_ratio * n_en:
            yield "ratio"
        elif (en, f) in seen:
            yield "duplicate"
        else:
            seen.add((en, f))
            yield "kept"


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

@dataclass
class Bitext:
    """A normalised, cleaned bitext for one pivot language.

    ``en[k]`` and ``f[k]`` are space-tokenised sentences; ``origin[k]`` is the index into
    ``source_names`` of the recipe source pair k came from; ``stats`` holds the counts of
    :data:`STAT_KEYS` overall ("total") and per source ("sources").
    """

    lang: str
    en: list
    f: list
    origin: np.ndarray
    source_names: list
    stats: dict = field(default_factory=dict)

    def __post_init__(self):
        self.origin = np.asarray(self.origin, dtype=np.int16)
        if not (len(self.en) == len(self.f) == len(self.origin)):
            raise ValueError(f"en, f and origin differ in length: "
                             f"{len(self.en)}, {len(self.f)}, {len(self.origin)}")

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
        meta = {"lang": self.lang, "n_pairs": len(self), "source_names": self.source_names,
                "stats": self.stats}
        (d / "meta.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n",
                                     encoding="utf-8")

    @classmethod
    def load(cls, directory):
        """Read a directory written by :meth:`save`, checking the files agree in length."""
        d = Path(directory)
        meta_path = d / "meta.json"
        if not meta_path.is_file():
            raise InputError("no meta.json: not a saved bitext directory", path=d)
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
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
        return cls(lang, sides[0], sides[1], origin, meta["source_names"], meta["stats"])


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


def _source_readers(source, index, lang, data_root):
    """The list of zero-argument reader factories (stats -> iterator) for one recipe source."""
    name = _need(source, "name", index)
    fmt = _need(source, "format", index)
    if fmt == "parallel":
        en = _data_file(data_root, _need(source, "en", index), name)
        f = _data_file(data_root, _need(source, "f", index), name)
        drop = source.get("drop_headers", True)
        return [lambda st, en=en, f=f: read_parallel(en, f, drop_headers=drop, stats=st)]
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
            readers.append(lambda st, en=en, f=f: read_parallel(en, f, drop_headers=drop, stats=st))
        return readers
    if fmt == "tsv-zip":
        path = _data_file(data_root, _need(source, "path", index), name)
        member = source.get("member")
        return [lambda st, path=path: read_tsv_zip(path, member, stats=st)]
    raise InputError(f"recipe source {name!r}: unknown format {fmt!r} "
                     "(parallel, parallel-glob or tsv-zip)")


def _progress(quiet, **kwargs):
    from tqdm import tqdm
    return tqdm(disable=quiet or not sys.stderr.isatty(), file=sys.stderr, **kwargs)


def load_bitext(sources, lang, data_root, max_tokens=80, max_ratio=9.0, quiet=False,
                backend="moses-cpp"):
    """Read, normalise, filter and deduplicate every recipe source of one pivot language.

    ``sources`` are recipe dicts (``name``, ``format`` and the format's keys; see the
    module docstring and ``recipes/bio.toml``); paths are relative to ``data_root``. All
    files are checked to exist before any is read. Deduplication runs across all sources
    of the language, so a pair present in two sources is credited to the first one.
    """
    data_root = Path(data_root)
    if len(sources) > np.iinfo(np.int16).max:
        raise InputError(f"too many sources ({len(sources)}) for int16 origin ids")
    readers = [_source_readers(s, k, lang, data_root) for k, s in enumerate(sources)]
    names = [s["name"] for s in sources]
    if len(set(names)) != len(names):
        raise InputError(f"recipe source names repeat: {names}")

    triples, source_stats = [], []
    with _progress(quiet, desc=f"read {lang}-en", unit=" lines") as bar:
        for k, source_readers in enumerate(readers):
            st = _new_stats()
            for reader in source_readers:
                raw_en, raw_f = [], []
                for _, en, f in reader(st):
                    raw_en.append(en)
                    raw_f.append(f)
                bar.update(len(raw_en))
                triples.extend(zip(normalize_many(raw_en, "en", backend),
                                   normalize_many(raw_f, lang, backend), [k] * len(raw_en)))
            source_stats.append(st)

    kept = []
    for triple, reason in zip(triples, _clean_reasons(triples, max_tokens, max_ratio)):
        source_stats[triple[2]][reason] += 1
        if reason == "kept":
            kept.append(triple)
    total = _new_stats()
    for st in source_stats:
        for key in STAT_KEYS:
            total[key] += st[key]
    stats = {"total": total, "sources": dict(zip(names, source_stats)),
             "max_tokens": max_tokens, "max_ratio": max_ratio, "tokenizer": backend}
    return Bitext(lang, [t[0] for t in kept], [t[1] for t in kept],
                  np.fromiter((t[2] for t in kept), np.int16, len(kept)), names, stats)
