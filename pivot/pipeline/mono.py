"""Monolingual English text for the two Moore-Lewis language models.

The in-domain LM is trained on biology text (the paper: GENIA abstracts and an introductory
biology textbook; here GENIA plus the other bio-ner corpora and the OpenStax biology books),
the general LM on a seeded random sample of the bitext's own English side holding about as
many tokens as the in-domain text (the classic Moore-Lewis choice), or on Brown.

Readers yield *raw* sentences; :func:`in_domain_text` and :func:`general_text` pass them
through :func:`pivot.text.normalize_many` (NFC, Moses tokens, lowercase), so an n-gram of
an LM is spelt exactly as the same n-gram of the bitext it will score.

Already-tokenised sources (CoNLL, Brown) are PTB-tokenised. :func:`ptb_join` maps the PTB
bracket and quote tokens back to characters and joins tokens with spaces; the normaliser then
re-tokenises that text the Moses way. What remains different from tokenising the raw text
(documented, not corrected, because it touches well under 0.1% of tokens):

* PTB splits "don't" as ``do n't``; Moses on the joined text gives ``do n 't``, Moses on the
  raw text ``don 't`` (4 ``n't`` tokens in all of bio-ner; Brown keeps ``didn't`` whole).
* PTB separates a sentence-final period that Moses would keep attached before a lowercase
  word; both sides still agree on ordinary sentence-final periods.

Recipe specification (paths relative to the data root, glob patterns, sorted matches)::

    {"conll":    ["mono/bio-ner/*/*.tsv"],
     "openstax": ["mono/openstax/openstax-biology-md.tar.gz"],
     "brown":    ["mono/general/brown.zip"],
     "lines":    ["some/plain.txt"],          # one raw sentence a line, UTF-8
     "tsv":      ["bitext/tico19/eng-fra.tsv.gz"]}   # column 1 of a TAB-separated file
"""
from __future__ import annotations

import glob
import html
import lzma
import os
import re
import struct
import tarfile
import zipfile
import zlib

import numpy as np

from pivot.errors import InputError
from pivot.text import _checked_lines, numbered_lines

# What a damaged archive raises before or while a member is read (a member's bad bytes are
# InputErrors of the line reader, which catches damaged compressed streams itself).
_ZIP_ERRORS = (zipfile.BadZipFile, OSError, EOFError, ValueError, struct.error, NotImplementedError,
               RuntimeError, zlib.error, lzma.LZMAError)
_TAR_ERRORS = (tarfile.TarError, OSError, EOFError, zlib.error, ValueError, struct.error)

# ----------------------------------------------------------------------------- CoNLL

# GENIA abstracts open with pseudo-sentences "UI - <medline id>", "TI - <title tokens>" and
# "AB - <first abstract sentence>": the two-token prefix is markup, the rest of TI and AB is
# real text. "UI", "TI" and "AB" also occur as ordinary tokens (AB = antibody, UI = urinary
# incontinence), so only a sentence that STARTS with one of them followed by "-" is touched.
_GENIA_FIELDS = ("UI", "TI", "AB")

# PTB escapes for brackets and the two-backtick / two-quote quotation marks.
_PTB_TOKENS = {
    "-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}",
    "``": '"', "''": '"',
}


def ptb_join(tokens):
    """Text of a PTB-tokenised sentence: PTB bracket/quote tokens unescaped, joined by spaces.

    >>> ptb_join(["``", "yes", "''", "-LRB-", "p", "-RRB-"])
    '" yes " ( p )'
    """
    return " ".join(_PTB_TOKENS.get(t, t) for t in tokens)


def _strip_genia(tokens):
    """Tokens of a sentence without GENIA's field markup; None for a sentence to drop."""
    if len(tokens) >= 2 and tokens[0] in _GENIA_FIELDS and tokens[1] == "-":
        if tokens[0] == "UI":       # "UI - 95369245": a record id, not text
            return None
        tokens = tokens[2:]         # "TI - IL-2 gene ..." -> "IL-2 gene ..."
    if tokens and tokens[0] == "-DOCSTART-":   # JNLPBA document separators
        return None
    return tokens or None


def read_conll_sentences(path):
    """Yield each sentence of a CoNLL file as a list of tokens (the first column).

    Layout: ``token<TAB>tag`` a line, a blank line after each sentence. GENIA's ``UI -``
    sentences and ``-DOCSTART-`` lines are dropped, the ``TI -`` / ``AB -`` prefixes
    stripped (see ``_strip_genia``). Bytes that are not UTF-8, a NUL byte, or a non-blank
    line without a TAB raise InputError naming the file and the 1-based line (the line
    reader of :mod:`pivot.text`, which also drops byte order marks at line starts).
    """
    path = str(path)
    tokens = []
    for number, line in numbered_lines(path):
        if not line.strip():
            if tokens:
                kept = _strip_genia(tokens)
                if kept:
                    yield kept
                tokens = []
            continue
        token, tab, _tag = line.partition("\t")
        if not tab or not token:
            raise InputError(f"expected token<TAB>tag, found {line[:60]!r}",
                             path=path, line=number)
        tokens.append(token)
    if tokens:                      # a last sentence without a trailing blank line
        kept = _strip_genia(tokens)
        if kept:
            yield kept


# ----------------------------------------------------------------------------- Brown

def read_brown(zip_path):
    """Yield each Brown sentence as a list of words (see :func:`read_brown_tagged`)."""
    for sentence in read_brown_tagged(zip_path):
        yield [word for word, _tag in sentence]


def read_brown_tagged(zip_path):
    """Yield each Brown sentence as a list of (word, tag) (NLTK layout, ``brown/c??NN`` members).

    Each non-blank line of a member is one sentence of ``word/tag`` tokens (as NLTK's
    reader takes it); the word is the text before the LAST ``/`` (words such as ``1/2/cd``
    hold slashes). Members other than ``brown/c[a-r]NN`` (README, cats.txt) are skipped.
    """
    zip_path = str(zip_path)
    if not os.path.isfile(zip_path):
        raise InputError("file not found", path=zip_path)
    member_re = re.compile(r"^(?:.*/)?brown/c[a-z]\d\d$")
    try:
        zf = zipfile.ZipFile(zip_path)
    except _ZIP_ERRORS as exc:
        raise InputError(f"not a readable zip file ({type(exc).__name__}: {exc})",
                         path=zip_path) from None
    with zf:
        for member in sorted(n for n in zf.namelist() if member_re.match(n)):
            where = f"{zip_path}:{member}"
            try:
                fh = zf.open(member)
            except _ZIP_ERRORS as exc:
                raise InputError(f"cannot read this member ({type(exc).__name__}: {exc}); the "
                                 "file is damaged: fetch it again", path=where) from None
            with fh:
                lines = list(_checked_lines(fh, where, bom="lines"))
            for number, line in lines:
                items = line.split()
                if not items:
                    continue
                tokens = []
                for item in items:
                    word, slash, tag = item.rpartition("/")
                    if not slash or not word:
                        raise InputError(f"expected word/tag, found {item[:40]!r}",
                                         path=where, line=number)
                    tokens.append((word, tag))
                yield tokens


# ----------------------------------------------------------------------------- OpenStax

# Whole-line markup of the OpenStax Markdown export: the page header ("index: hide",
# "name: <title>"), image placeholders, headings, table rows and rules of asterisks/dashes.
_SKIP_LINE = re.compile(r"^(?:index:|name:|\{image:|#|\||[*\-_=\s]+$)")
# List and quote markers at the start of a kept line.
_LINE_MARKER = re.compile(r"^(?:[*+\-]\s+|\d+\.\s+|>\s*)+")
# MathML, inline or display: an equation is not a sentence of English.
_MATH = re.compile(r"<math\b.*?</math>", re.S)
# A figure reference {'Figure_1_1_3 Figure 1.1.3} reads as its label "Figure 1.1.3" ...
_FIGREF = re.compile(r"\{'[^\s}]*\s*([^}]*)\}")
# ... and a parenthetical that only points at figures/tables "(Figure 1.1.3)", "(see Table 2)"
# is dropped with its space, so the sentence reads as it would without it.
_FIG_PAREN = re.compile(r"\s*\((?:see\s+)?(?:Figures?|Tables?)\b[^()]*\)", re.I)
_IMAGE = re.compile(r"\{image:[^}]*\}")
_BREAK = re.compile(r"<br\s*/?>", re.I)
_TAG = re.compile(r"</?[A-Za-z][^<>]*>")

# Sentence splitting: a candidate boundary is [.!?], optional closing quotes/brackets, white
# space, then (optionally an opening quote/bracket and) an uppercase letter or a digit.
_BOUNDARY = re.compile(r"[.!?][\"'\u201d\u2019)\]]*(\s+)(?=[\"'\u201c\u2018(\[]?[A-Z0-9])")
# Words after which a period does not end a sentence (lowercased, without the period).
_ABBREVIATIONS = frozenset(
    "e.g i.e u.s cf vs etc al fig figs no nos approx ca dr mr mrs ms prof st sp spp var "
    "jan feb mar apr jun jul aug sep sept oct nov dec".split())


def split_sentences(text):
    """Split a paragraph into sentences with a small rule-based splitter.

    A sentence ends at ``.``, ``!`` or ``?`` (plus any closing quotes or brackets) that is
    followed by white space and an uppercase letter or digit, unless the word before the
    period is an abbreviation from ``_ABBREVIATIONS`` or a single letter (initials and genus
    abbreviations: "E. Coli", "J. Smith"). "e.g. the" never splits (lowercase follows).

    >>> split_sentences("Cells divide. E. Coli is a bacterium (see Fig. 2). Why? Yes.")
    ['Cells divide.', 'E. Coli is a bacterium (see Fig. 2).', 'Why?', 'Yes.']
    """
    sentences, start = [], 0
    for m in _BOUNDARY.finditer(text):
        if text[m.start()] == ".":
            before = text[start:m.start()].rsplit(None, 1)
            word = before[-1].lower().lstrip("(\"'\u201c") if before else ""
            if word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha()):
                continue
        sentence = text[start:m.start(1)].strip()
        if sentence:
            sentences.append(sentence)
        start = m.end(1)
    sentence = text[start:].strip()
    if sentence:
        sentences.append(sentence)
    return sentences


def clean_openstax_page(text):
    """Plain paragraphs of one OpenStax Markdown page (a list of strings).

    Drops: the ``index:``/``name:`` header, ``{image:...}`` lines, headings (``#``), table
    rows (``|``), rules (``****``), MathML. Keeps the text of figure references
    (``{'Figure_1_1_3 Figure 1.1.3}`` -> ``Figure 1.1.3``) but drops parentheticals that
    only point at a figure or table. Removes list markers, ``**``/``*`` emphasis and HTML
    tags (keeping their content: ``H<sup>+</sup>`` -> ``H+``), unescapes HTML entities and
    collapses white space. One source line is one paragraph.
    """
    text = _MATH.sub(" ", text)
    paragraphs = []
    for line in text.split("\n"):
        line = line.strip()
        if not line or _SKIP_LINE.match(line):
            continue
        line = _LINE_MARKER.sub("", line)
        line = _IMAGE.sub(" ", line)
        line = _FIGREF.sub(r"\1", line)
        line = _FIG_PAREN.sub("", line)
        line = _BREAK.sub(" ", line)
        line = _TAG.sub("", line)
        line = line.replace("*", "")
        line = html.unescape(line)
        line = " ".join(line.split())
        if line:
            paragraphs.append(line)
    return paragraphs


def read_openstax(tar_gz_path):
    """Yield the sentences of the OpenStax Markdown tarball (``subnets/os-*/**.md``).

    Only ``.md`` pages are read, in sorted member order (``.i`` files are navigation and
    duplicate the introductions; ``Project`` files are metadata). Each page goes through
    :func:`clean_openstax_page` and :func:`split_sentences`; sentences without a letter
    (stray numbers, "Figure 1.1.3" captions) are dropped.
    """
    tar_gz_path = str(tar_gz_path)
    if not os.path.isfile(tar_gz_path):
        raise InputError("file not found", path=tar_gz_path)
    def unreadable(exc):
        return InputError(f"not a readable tar.gz archive ({type(exc).__name__}: {exc}); the file "
                          "is damaged: fetch it again", path=tar_gz_path)

    try:
        tf = tarfile.open(tar_gz_path, "r:gz")
    except _TAR_ERRORS as exc:
        raise unreadable(exc) from None
    with tf:
        try:
            members = sorted((m for m in tf.getmembers() if m.isfile() and m.name.endswith(".md")),
                             key=lambda m: m.name)
        except _TAR_ERRORS as exc:
            raise unreadable(exc) from None
        for member in members:
            where = f"{tar_gz_path}:{member.name}"
            try:
                lines = [line for _, line in _checked_lines(tf.extractfile(member), where, bom="lines")]
            except InputError:
                raise
            except _TAR_ERRORS as exc:
                raise InputError(f"corrupt or truncated archive data in this member "
                                 f"({type(exc).__name__}: {exc}); the file is damaged: fetch it "
                                 "again", path=where) from None
            text = "\n".join(lines)
            for paragraph in clean_openstax_page(text):
                for sentence in split_sentences(paragraph):
                    if any(c.isalpha() for c in sentence):
                        yield sentence


def read_lines(path):
    """Yield the non-blank lines of a UTF-8 text file, one raw sentence each."""
    for _, line in numbered_lines(path):
        if line.strip():
            yield line.strip()


def read_tsv_first_column(path):
    """Yield the first TAB-separated column of each line whose column is not blank.

    The data root's pair files (``bitext/*/eng-XXX.tsv.gz``) hold English in column 1, so the
    English side of an in-domain bitext (TICO-19's COVID-19 documents) serves as LM text
    without a copy of it on disk.
    """
    for _, line in numbered_lines(path):
        first = line.split("\t", 1)[0].strip()
        if first:
            yield first


# ----------------------------------------------------------------------------- recipes

# reader name -> function from a path to raw sentence strings
_READERS = {
    "conll": lambda p: (ptb_join(t) for t in read_conll_sentences(p)),
    "brown": lambda p: (ptb_join(t) for t in read_brown(p)),
    "openstax": read_openstax,
    "lines": read_lines,
    "tsv": read_tsv_first_column,
}


def expand(data_root, pattern, kind):
    """Sorted files matching ``pattern`` under ``data_root``; InputError if none."""
    full = os.path.join(str(data_root), pattern)
    paths = sorted(glob.glob(full))
    if not paths:
        raise InputError(f"the {kind!r} pattern {pattern!r} matches no file "
                         f"(the data root is {data_root})", path=full)
    return paths


def read_spec(data_root, spec):
    """Yield the raw sentences a recipe ``spec`` names, reader by reader in the spec's order."""
    for kind, patterns in spec.items():
        if kind not in _READERS:
            raise InputError(f"unknown monolingual format {kind!r}; one of {sorted(_READERS)}")
        if isinstance(patterns, str):
            patterns = [patterns]
        for pattern in patterns:
            for path in expand(data_root, pattern, kind):
                yield from _READERS[kind](path)


def dedup(sentences):
    """Sentences without repeats, each kept at its first occurrence (stable)."""
    seen = set()
    out = []
    for s in sentences:
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out


def _normalized(raw, normalize):
    """Normalised, non-empty sentences (the caller's normaliser or pivot.pipeline.corpus's)."""
    if normalize:
        from pivot.text import normalize_many
        raw = normalize_many(list(raw), "en")
    return [s for s in raw if s.strip()]


def in_domain_text(data_root, spec, normalize=True):
    """The in-domain LM text: every sentence of ``spec``, normalised, deduplicated.

    Deduplication runs on the normalised form (the bio-ner corpora share abstracts, with
    small tokenisation differences that normalisation removes) and keeps first occurrences,
    so the result is the same for the same spec and data. ``normalize=False`` returns the
    raw text (for tests and inspection).
    """
    return dedup(_normalized(read_spec(data_root, spec), normalize))


def n_tokens(sentences):
    """Number of white-space tokens in ``sentences``."""
    return sum(len(s.split()) for s in sentences)


def sample_indices_by_tokens(lengths, n_tokens, seed):
    """Indices (sorted, int64) of a seeded random sample holding about ``n_tokens`` tokens.

    ``lengths[i]`` is the number of tokens of sentence i (``len(s.split())``, as
    :func:`sample_by_tokens` counts). Sentences are visited in the order of
    ``numpy.random.default_rng(seed).permutation(len(lengths))`` and taken until the running
    token count first reaches ``n_tokens`` (the sentence that reaches it is included; all of
    them when the corpus holds fewer). The selection is exactly :func:`sample_by_tokens`'s,
    so a caller can stream a file twice (token counts, then the chosen lines) without a list.
    """
    if n_tokens < 0:
        raise ValueError(f"n_tokens must be >= 0, got {n_tokens}")
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.ndim != 1:
        raise ValueError("lengths must be a 1-d array, one token count per sentence")
    order = np.random.default_rng(seed).permutation(len(lengths))
    running = np.cumsum(lengths[order])
    # index of the first prefix whose total reaches n_tokens; all if none does
    n_take = int(np.searchsorted(running, n_tokens, side="left")) + 1 if n_tokens > 0 else 0
    return np.sort(order[:min(n_take, len(lengths))])


def sample_by_tokens(sentences, n_tokens, seed):
    """A seeded random sample of ``sentences`` holding about ``n_tokens`` tokens.

    Sentences are visited in the order of ``numpy.random.default_rng(seed).permutation``
    and taken until the running token count first reaches ``n_tokens`` (the sentence that
    reaches it is included, so the sample holds at least ``n_tokens`` tokens unless the
    corpus holds fewer, in which case all of it is returned). The sample is returned in
    corpus order. Repeated sentences stay repeated: the general LM should see the general
    distribution, repeats included. The selection is :func:`sample_indices_by_tokens`'s.
    """
    if n_tokens < 0:
        raise ValueError(f"n_tokens must be >= 0, got {n_tokens}")
    sentences = list(sentences)
    lengths = np.fromiter((len(s.split()) for s in sentences), dtype=np.int64,
                          count=len(sentences))
    return [sentences[i] for i in sample_indices_by_tokens(lengths, n_tokens, seed).tolist()]


# ----------------------------------------------------------------------------- matched LMs
#
# The Moore–Lewis method (2010) compares two LMs that differ only in their training text: the in-domain
# LM and the general LM are trained on samples of the same size, with one vocabulary fixed
# from the in-domain data, every other token replaced by one unknown-word token. With
# mismatched LMs (this project's first setup: 5.3M vs 1.7M tokens, vocabularies 92.9k vs
# 33.5k) sigma = H_tgt - H_gen also measures the difference in LM size and in OOV rate, and
# each model's <unk> stands for a different set of words.
#
# Here (recipe [domain] matched = true, the default):
# * both samples hold n_match tokens, the smaller of the in-domain text and each general
#   text (every cross-fitted fold), drawn with :func:`sample_by_tokens` (seeded);
# * the vocabulary V is the words seen at least ``vocab_min_count`` times in the in-domain
#   sample (sorted, so it is the same list on every run);
# * every token outside V becomes OOV_TOKEN, in both training texts and in every sentence
#   scored (pivot.pipeline.score). OOV_TOKEN is an ordinary, trained word of both LMs:
#   p(OOV_TOKEN | h) is how often each text uses a word outside the in-domain core
#   vocabulary in that context, one quantity defined alike in both models;
# * V and OOV_TOKEN are declared to the estimator (pivot.pipeline.lm.estimate_arpa's
#   ``vocab``), so both models have exactly the same unigrams and the same |V|; a word of V
#   that a general sample lacks gets the uniform share gamma()/|V| there, as any unseen word.
#   kenlm's own <unk> is then never queried.

#: The one token every word outside the shared vocabulary becomes (Moses tokenisation splits
#: "<" and ">" off, so normalised text never holds it as a word).
OOV_TOKEN = "<oov>"


def shared_vocabulary(sentences, min_count=2):
    """The words seen at least ``min_count`` times in ``sentences`` (white-space tokens), sorted.

    >>> shared_vocabulary(["a b a", "c b"], 2)
    ['a', 'b']
    """
    if min_count < 1:
        raise ValueError(f"min_count must be >= 1, got {min_count}")
    counts = {}
    for s in sentences:
        for w in s.split():
            counts[w] = counts.get(w, 0) + 1
    return sorted(w for w, c in counts.items() if c >= min_count and w != OOV_TOKEN)


def map_to_vocab(sentence, vocab):
    """``sentence`` with every white-space token outside ``vocab`` (a set) replaced by OOV_TOKEN.

    Tokens are joined by single spaces (the normalised text already is), so the number of
    words is unchanged. Returns (mapped sentence, number of tokens replaced).

    >>> map_to_vocab("the kinase binds", {"the", "binds"})
    ('the <oov> binds', 1)
    """
    words = sentence.split()
    out = [w if w in vocab else OOV_TOKEN for w in words]
    return " ".join(out), sum(1 for w in words if w not in vocab)


def general_text(data_root=None, spec=None, bitext_english=None, n_tokens=None, seed=0,
                 normalize=True):
    """The general LM text.

    Default (``spec`` empty or None): :func:`sample_by_tokens` over ``bitext_english``
    (already normalised: it is the bitext the LMs will score) with ``n_tokens`` tokens, the
    in-domain text's size. With a ``spec`` (e.g. ``{"brown": ["mono/general/brown.zip"]}``):
    that text, normalised and deduplicated like :func:`in_domain_text`; if ``n_tokens`` is
    also given it is sampled down to that size with the same rule.
    """
    if spec:
        text = in_domain_text(data_root, spec, normalize=normalize)
        return text if n_tokens is None else sample_by_tokens(text, n_tokens, seed)
    if bitext_english is None or n_tokens is None:
        raise ValueError("the default general text is a sample of the bitext's English side: "
                         "pass bitext_english and n_tokens (or a spec naming a corpus)")
    return sample_by_tokens(bitext_english, n_tokens, seed)
