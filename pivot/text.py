"""Text every stage reads the same way: UTF-8 lines with numbered errors, and normalisation.

Every English or foreign sentence that enters the project (both sides of the bitext,
language-model text, gold phrases, lookups) goes through :func:`normalize`, so a phrase in
the paraphrase database, a word in a gold pair and an n-gram in a language model are spelt
the same way. Readers split lines on ``\\n`` only (never on ``\\r``, U+2028 or U+0085, which
Python's universal-newline mode treats as line ends): line-aligned corpora must be read with
the same line boundaries on both sides, and with the numbering that ``wc -l`` shows.
"""
from __future__ import annotations

import gzip
import lzma
import unicodedata
import zipfile
import zlib
from pathlib import Path

from pivot.errors import InputError


# ----------------------------------------------------------------------------- readers
#
# Bad input, decided once for every reader of external text (corpora, LM text, gold files):
#
# * bytes that are not UTF-8: InputError naming the file, the line and the byte;
# * a NUL byte: InputError naming the line (a binary file, or UTF-16 text; NUL is never text,
#   and the tokenizer would cut the line there);
# * UTF-16 text (a file starting with the UTF-16 byte order mark FF FE or FE FF): InputError
#   saying to convert it to UTF-8;
# * a UTF-8 byte order mark (EF BB BF, U+FEFF) at the start of the file is dropped; at the
#   start of a later line (files concatenated with their marks) it is dropped too. A U+FEFF
#   inside a line is not a byte order mark but the ZERO WIDTH NO-BREAK SPACE, and stays, like
#   the U+200E/U+200F marks real data holds around it (TICO-19 eng-prs.tsv.gz line 460);
# * a damaged gzip/zip stream: InputError at the line where reading broke.
#
# Files the pipeline writes itself (bitext.en, vocabularies) are read with ``bom="file"``:
# only a mark at the start of line 1 is dropped, every other character is data.

_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")

# What reading a damaged compressed stream raises: a bad gzip header or CRC (BadGzipFile, an
# OSError), a truncated stream (EOFError), a corrupt deflate block (zlib.error), a bad zip
# member (BadZipFile, e.g. "Bad CRC-32"), a corrupt xz/lzma member of a zip (LZMAError).
_DAMAGED = (OSError, EOFError, zlib.error, zipfile.BadZipFile, lzma.LZMAError)


def _damaged(path, line, exc):
    return InputError(f"corrupt or truncated compressed data at or after this line "
                      f"({type(exc).__name__}: {exc}); the file is damaged: fetch it again",
                      path=path, line=line)


def _open_binary(path):
    """Open a file for reading bytes; gzip when the name ends in ``.gz``."""
    path = Path(path)
    try:
        found = path.is_file()
    except (OSError, ValueError) as exc:     # a name too long, or holding a NUL
        raise InputError(f"cannot open ({exc})", path=path) from None
    if not found:
        raise InputError("file not found", path=path)
    if path.suffix == ".gz" and path.stat().st_size == 0:
        # gzip reads an empty file as an empty stream; gzip -t calls it "unexpected end of file".
        raise InputError("empty file (0 bytes), not gzip data: a download that failed or was cut short; "
                         "fetch it again", path=path)
    try:
        return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")
    except OSError as exc:
        raise InputError(f"cannot open ({exc.strerror or exc})", path=path) from None


def _count_lines(path):
    """Number of lines as ``wc -l`` counts them, plus one for an unterminated last line; a
    damaged stream raises InputError naming the file and the first line of the failed block."""
    n_lines, last = 0, b"\n"
    with _open_binary(path) as fh:
        try:
            while True:
                chunk = fh.read(1 << 20)
                if not chunk:
                    break
                n_lines += chunk.count(b"\n")
                last = chunk[-1:]
        except _DAMAGED as exc:
            raise _damaged(path, n_lines + 1, exc) from None
    return n_lines + (last != b"\n")


_count_lines_checked = _count_lines


#: Bytes read at a time by :func:`_iter_lines`: a block is decoded and split in C, not line by
#: line. Small enough that a damaged compressed stream is still reported near its damage (the
#: error names the first line of the block whose read failed).
_BLOCK = 1 << 16


def _iter_lines(fh, path, bom="file", start=1):
    """Yield (1-based line number, decoded line without its end) from a binary file.

    A trailing ``\\r`` (Windows line end) is dropped. ``bom="file"``: a UTF-8 byte order mark
    at the start of line 1 is dropped; ``bom="lines"`` (external text): at the start of any
    line. Bytes that are not UTF-8, a NUL byte, or UTF-16 text raise InputError naming the
    file and line (see the notes above). ``start``: the number of the stream's first line
    (a stream that begins inside the file).

    The stream is read in blocks cut after their last ``\\n`` (a newline byte never falls inside
    a UTF-8 sequence, so a block decodes alone): a clean block is decoded and split at once;
    a block with something to report or remove (a NUL, bytes that are not UTF-8, a byte order
    mark where one may be dropped) goes line by line through :func:`_lines_one_by_one`, which
    decides every line as the rules above say. Both give the same lines and the same errors.
    """
    every_line = bom == "lines"
    number = start          # the number of the next line to yield
    carry = b""
    while True:
        chunk = fh.read(_BLOCK)
        if not chunk:
            break
        data = carry + chunk if carry else chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            carry = data
            continue
        block, carry = data[:cut], data[cut + 1:]
        yield from _block_lines(block, number, path, every_line)
        number += block.count(b"\n") + 1
    if carry:               # an unterminated last line
        yield from _block_lines(carry, number, path, every_line)


def _block_lines(block: bytes, first: int, path, every_line: bool):
    """The lines of ``block`` (lines joined by ``\\n``, no final one), numbered from ``first``."""
    text = None
    if b"\0" not in block and not (first == 1 and block[:2] in _UTF16_BOMS) \
            and not ((first == 1 or every_line) and block.startswith(_BOM)) \
            and not (every_line and b"\n" + _BOM in block):
        try:
            text = block.decode("utf-8")
        except UnicodeDecodeError:
            pass
    if text is None:
        yield from _lines_one_by_one(block.split(b"\n"), first, path, every_line)
        return
    lines = text.split("\n")
    if "\r" in text:
        lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    yield from zip(range(first, first + len(lines)), lines)


def _lines_one_by_one(raws, first, path, every_line):
    """Each raw line decided alone: byte order marks dropped, errors raised at their line."""
    for number, raw in enumerate(raws, start=first):
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        shift = 0
        if (number == 1 or every_line) and raw.startswith(_BOM):
            raw, shift = raw[3:], 3
        elif number == 1 and raw[:2] in _UTF16_BOMS:
            raise InputError("UTF-16 text (the file starts with a UTF-16 byte order mark); convert "
                             "it to UTF-8, e.g. iconv -f UTF-16 -t UTF-8", path=path, line=number)
        nul = raw.find(b"\0")
        if nul >= 0:
            raise InputError(f"NUL byte at byte {nul + shift + 1} of the line "
                             "(a binary file, or UTF-16 text?)", path=path, line=number)
        try:
            yield number, raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(
                f"not UTF-8 (byte {exc.start + shift + 1} of the line, "
                f"{raw[exc.start:exc.start + 4]!r})",
                path=path, line=number) from None


def _checked_lines(fh, path, bom="file"):
    """``_iter_lines`` (number, line), a damaged stream raised as InputError at its line."""
    number = 0
    try:
        for number, line in _iter_lines(fh, path, bom):
            yield number, line
    except _DAMAGED as exc:
        raise _damaged(path, number + 1, exc) from None


def numbered_lines(path):
    """(1-based line number, line) of a UTF-8 text file, gzip by its suffix; the one reader of
    plain text lines in the project, so every format names a bad byte the same way."""
    path = Path(path)
    with _open_binary(path) as fh:
        yield from _checked_lines(fh, path, bom="lines")


# ----------------------------------------------------------------------------- normalisation

# Characters mapped before tokenisation. The C++ Moses port treats the typographic
# apostrophe as punctuation ("l’homme" -> "l ’ homme") but the ASCII one as an elision
# ("l'homme" -> "l' homme"); the WMT French side uses ’ (17.9k times in medline) and
# Tatoeba mostly ' (140k vs 0.9k), so without this map the same word would be two
# tokens in two spellings. No-break spaces (French typography before : ; ! ?) become
# spaces, as both tokenizers would split there anyway.
_PUNCT_MAP = str.maketrans({
    "\u2019": "'", "\u2018": "'", "\u02bc": "'", "\u00b4": "'",
    "\u00a0": " ", "\u202f": " ", "\u2007": " ",
})

_TOKENIZERS = {}


def _tokenizer(lang, backend):
    """One tokenizer per (language, backend), built on first use.

    ``backend="moses-cpp"``: the C++ port (opus-fast-mosestokenizer), ~0.7 s for 167k
    Tatoeba lines. ``backend="sacremoses"``: the pure-Python port, ~10x slower, used only
    when asked for by name. Both with XML escaping OFF: "&" stays "&", "'" stays "'".
    """
    key = (lang, backend)
    if key not in _TOKENIZERS:
        if backend == "moses-cpp":
            try:
                from mosestokenizer import MosesTokenizer
            except ImportError as exc:
                raise ImportError(
                    "the C++ Moses tokenizer (pip package opus-fast-mosestokenizer) is not "
                    "importable; install it, or choose the slower pure-Python tokenizer "
                    "explicitly with backend='sacremoses'") from exc
            tok = MosesTokenizer(lang, escape_xml=False)
            _TOKENIZERS[key] = tok.tokenize
        elif backend == "sacremoses":
            from sacremoses import MosesTokenizer
            tok = MosesTokenizer(lang)
            _TOKENIZERS[key] = lambda text: tok.tokenize(text, escape=False)
        else:
            raise ValueError(f"unknown tokenizer backend {backend!r} (moses-cpp or sacremoses)")
    return _TOKENIZERS[key]


def normalize_many(texts, lang, backend="moses-cpp"):
    """Normalise many sentences of one language; see :func:`normalize`."""
    tokenize = _tokenizer(lang, backend)
    nfc = unicodedata.normalize
    out = []
    for text in texts:
        text = nfc("NFC", text).translate(_PUNCT_MAP)
        # Re-split on Python whitespace: every later stage (and eflomal) splits on it, so a
        # token must not hide a character such as U+0085 that str.split() would cut at.
        out.append(" ".join(" ".join(tokenize(text)).split()).lower())
    return out


def normalize(text, lang, backend="moses-cpp"):
    """Normalised form of a sentence: NFC, apostrophes unified, Moses tokens, lowercase.

    Steps: Unicode NFC; typographic apostrophes to ``'`` and no-break spaces to spaces
    (see ``_PUNCT_MAP``); Moses tokenisation for ``lang`` without XML escaping; lowercase;
    tokens joined by single spaces. Lowercasing comes AFTER tokenisation on purpose: Moses
    keeps a period attached to a word when the next word starts in lowercase (it takes it
    for an abbreviation), so lowercasing first would glue sentence-final periods inside
    multi-sentence lines ("high. patients" instead of "high . patients").

    >>> normalize("L'analyse d'ADN n'est pas finie.", "fr")
    "l' analyse d' adn n' est pas finie ."
    """
    return normalize_many([text], lang, backend)[0]


def edit_distance(a, b) -> int:
    """Levenshtein distance between two sequences (characters of strings, tokens of lists):
    insertions, deletions and substitutions of one item, each cost 1."""
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]
