"""Language-model stage: 5-gram modified Kneser-Ney LMs written as ARPA, queried with kenlm.

Moore-Lewis scoring (``pivot.pipeline.score``) needs an in-domain and a general n-gram
LM. kenlm on PyPI only *queries* models and no PyPI package ships kenlm's
estimator ``lmplz``, so :func:`estimate_arpa` estimates the model itself, the
way ``lmplz`` does, and writes an ARPA file that ``kenlm.Model`` loads.
:func:`estimate_with_lmplz` uses an installed ``lmplz`` instead
(``scripts/install_lmplz.sh`` builds one).

The model (interpolated modified Kneser-Ney, as ``lmplz`` computes it)
----------------------------------------------------------------------
Each sentence is padded ``<s> w1 .. wn </s>``; an empty sentence is ``<s> </s>``.

* Counts ``a(g)`` of an n-gram ``g``: the raw count at the highest order N;
  below N the *adjusted* (continuation) count, the number of distinct words
  ``x`` with ``x g`` seen; n-grams starting with ``<s>`` can have no left
  extension and keep their raw count. The unigrams ``<s>`` and ``<unk>`` get 0.
* Discounts per order n from the counts-of-counts ``t_k`` (number of order-n
  n-grams with ``a = k``)::

      Y = t1 / (t1 + 2 t2)
      D1 = 1 - 2 Y t2 / t1,   D2 = 2 - 3 Y t3 / t2,   D3+ = 3 - 4 Y t4 / t3

  One lmplz detail is kept on purpose (``lmplz_statistics=True``): for one
  n-gram per lower order (the last of lmplz's suffix-sorted stream) the raw
  count, not the adjusted one, enters ``t_k``; see
  :func:`_lmplz_statistics_corrections`. Invisible on millions of tokens, it
  decides agreement on small text.
  If ``t1``, ``t2`` or ``t3`` is 0, or some ``Dk`` falls outside ``[0, k]``,
  ``lmplz`` stops unless given ``--discount_fallback``; here the order falls
  back to ``discount_fallback`` with a warning (``None`` raises instead).
* Interpolation, for a context ``h`` with shortened context ``h'``::

      p(w | h) = (a(hw) - D(a(hw))) / S(h) + gamma(h) p(w | h')
      S(h)     = sum_w a(hw)
      gamma(h) = (D1 N1(h) + D2 N2(h) + D3+ N3+(h)) / S(h)

  with ``Nk(h)`` the number of words ``w`` with ``a(hw) = k`` (3+: ``>= 3``).
  Unigrams interpolate with the uniform distribution ``1/|V|`` over the
  vocabulary including ``<unk>`` and ``</s>`` but not ``<s>``, so
  ``p(<unk>) = gamma() / |V|``; ``<s>`` gets probability 1 (log10 0), as
  ``lmplz`` writes it (SRILM writes -99; either way it is never predicted,
  only conditioned on, and kenlm scores are the same).
* ARPA: the interpolated ``log10 p`` of every seen n-gram, and as backoff of
  every n-gram ``h`` below the highest order ``log10 gamma(h)``: for a word
  unseen after ``h`` the interpolated model is exactly ``gamma(h) p(w|h')``,
  so gamma *is* the back-off weight. n-grams that are never contexts (those
  ending in ``</s>``, and ``<unk>``) get backoff 0. Probabilities are clamped
  to ``<= 0`` like ``lmplz`` does against rounding.

Input tokens ``<s>``, ``</s>`` and ``<unk>`` are dropped with a warning, as
``lmplz`` treats them as whitespace.

How it is fast, and small
-------------------------
Words become integer ids; the padded corpus is one int32 array, built chunk by
chunk (:func:`estimate_arpa_file` streams a text file, so no list of sentences
is ever held). The n-gram starting at each position gets an id order by order:
the occurrences of order n are grouped by (id of the prefix (n-1)-gram, last
word) with two counting sorts in a compiled kernel (``count_ngrams`` in
``pivot/_lm.pyx``; the same types, counts and per-position type ids as
``np.unique`` over the int64 keys ``prefix * |V| + last``, in the same order).
The suffix (n-1)-gram of every type is the id of the position one to the
right, so adjusted counts are one ``bincount`` over suffix ids, and the
per-context sums ``S``, ``Nk`` are ``bincount`` over prefix ids. All per-type
arrays are int32. Probabilities follow order by order as array expressions,
and each order is written as soon as the gammas of its contexts are known,
then dropped: only the prefix links and last words of the written orders are
kept, to spell the rows. The ARPA text is formatted by a compiled kernel in
chunks. On 5.3M tokens at order 5 this peaks below 0.5 GB (1.4 GB with a
list of token lists and int64 ids).

>>> stats = estimate_arpa([["the", "cell"], ["a", "cell"]], "tiny.arpa", order=2)  # doctest: +SKIP
>>> model = load_model("tiny.arpa")                                                  # doctest: +SKIP
>>> model.score("the cell", bos=True, eos=True)  # log10, sentence boundaries added  # doctest: +SKIP
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, field
from itertools import chain, islice
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from pivot import portable
from pivot.pipeline.stage import VOLATILE, Stage

__all__ = [
    "LMStats",
    "DiscountFallbackWarning",
    "estimate_arpa",
    "estimate_arpa_file",
    "estimate_with_lmplz",
    "find_lmplz",
    "find_build_binary",
    "binarize",
    "load_model",
    "read_arpa",
]

UNK, BOS, EOS = 0, 1, 2
SPECIALS = ("<unk>", "<s>", "</s>")
# The repository's own tool folder, <repo>/.tools/bin, where scripts/install_lmplz.sh puts lmplz
# and build_binary (this file is <repo>/pivot/pipeline/lm.py). An installed wheel has no
# repository around it: the folder is then absent and only PATH is searched.
_TOOLS_BIN = Path(__file__).resolve().parents[2] / ".tools" / "bin"
# Rows of ARPA text formatted per call of the kernel: bounds the text buffer
# (~100 bytes a row, held twice while it becomes bytes) while keeping the
# per-call overhead negligible.
_WRITE_CHUNK = 1 << 17
# Rows per block of the probability arithmetic (bounds its float64 temporaries).
_BLOCK = 1 << 20
# Text read per chunk from a file (estimate_arpa_file): ~350k tokens held as str.
_READ_BYTES = 1 << 21
# Sentences per chunk taken from a list or iterator of token lists.
_READ_SENTENCES = 1 << 14


#: lmplz's --discount_fallback defaults: (D1, D2, D3+) for an order whose counts-of-counts fail.
DEFAULT_DISCOUNT_FALLBACK = (0.5, 1.0, 1.5)


class DiscountFallbackWarning(UserWarning):
    """The closed-form discounts failed for an order and the fallback was used."""


@dataclass
class LMStats:
    """What an estimate saw and produced.

    ``ngram_counts[n-1]`` is the number of n-grams written for order n;
    ``counts_of_counts[n-1]`` is ``(t1, t2, t3, t4)`` of the (adjusted) counts of
    order n; ``discounts[n-1]`` is ``(D1, D2, D3+)``; ``fallback_orders`` lists
    the orders (1-based) whose discounts came from the fallback.
    """

    order: int
    arpa_path: str
    n_sentences: int
    n_tokens: int
    vocab_size: int
    ngram_counts: tuple
    discounts: tuple
    counts_of_counts: tuple = ()
    fallback_orders: tuple = ()
    seconds: float = 0.0
    estimator: str = "pivot"
    n_declared: int = 0  # words of a declared vocabulary (0: none declared)
    n_declared_unseen: int = 0  # of those, words the text never holds
    extra: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        """The statistics as plain JSON values (lmplz's full log left out)."""
        out = {k: v for k, v in asdict(self).items() if k != "extra"}
        return json.loads(json.dumps(out))


# --------------------------------------------------------------------------
# Corpus to ids
# --------------------------------------------------------------------------

def _list_chunks(sentences):
    """Token lists in chunks of ``_READ_SENTENCES``; refuses strings for sentences."""
    if isinstance(sentences, (str, bytes)):
        raise TypeError("sentences must be token lists, not strings; split them first")
    it = iter(sentences)
    while True:
        chunk = list(islice(it, _READ_SENTENCES))
        if not chunk:
            return
        if any(isinstance(sentence, (str, bytes)) for sentence in chunk):
            raise TypeError("sentences must be token lists, not strings; split them first")
        yield chunk


def _file_chunks(text_path):
    """Token lists of a text file, one sentence a line, ~``_READ_BYTES`` of text at a time.

    Lines and tokens are exactly those of ``[line.split() for line in open(text_path,
    encoding="utf-8")]`` (universal newlines, ``str.split`` on any white space).
    """
    with open(text_path, encoding="utf-8") as fh:
        while True:
            lines = fh.readlines(_READ_BYTES)
            if not lines:
                return
            yield [line.split() for line in lines]


def _encode(chunks, check_tokens=True, declared=None):
    """Map tokens to ids and build the padded corpus ``<s> w.. </s> <s> ..``, chunk by chunk.

    ``chunks`` yields lists of token lists; only one chunk is held as Python
    strings at a time. Ids go by first occurrence, specials first (0, 1, 2);
    ``declared`` words (a declared vocabulary) take the ids right after the
    specials, in the given order, whether the text holds them or not.
    Returns (seq int32 of length T, vocabulary list, n_sentences, n_tokens,
    whether special tokens were dropped).
    """
    vocab = {word: i for i, word in enumerate(SPECIALS)}
    for word in declared or ():
        if word in SPECIALS or not word or any(c.isspace() for c in word):
            raise ValueError(f"declared vocabulary word {word!r} is a special token or holds white space")
        vocab.setdefault(word, len(vocab))
    parts, n_sentences, n_tokens, saw_specials = [], 0, 0, False
    for chunk in chunks:
        n = len(chunk)
        lengths = np.fromiter(map(len, chunk), dtype=np.int64, count=n)
        n_flat = int(lengths.sum())
        # New words in order of first occurrence: dict.fromkeys runs at C speed,
        # the Python-level loop only visits the chunk's distinct words.
        missing = [w for w in dict.fromkeys(chain.from_iterable(chunk)) if w not in vocab]
        vocab.update(zip(missing, range(len(vocab), len(vocab) + len(missing))))
        words = np.fromiter(map(vocab.__getitem__, chain.from_iterable(chunk)),
                            dtype=np.int32, count=n_flat)
        del chunk
        special = words < len(SPECIALS)
        if special.any():
            saw_specials = True
            keep = ~special
            sentence_of = np.repeat(np.arange(n), lengths)
            words = words[keep]
            lengths = np.bincount(sentence_of[keep], minlength=n).astype(np.int64)
        # Padded layout: sentence s occupies [start_s, start_s + len_s + 2).
        padded = lengths + 2
        ends = np.cumsum(padded)
        starts = ends - padded
        part = np.empty(int(ends[-1]) if n else 0, dtype=np.int32)
        is_word = np.ones(len(part), dtype=bool)
        is_word[starts] = False
        is_word[ends - 1] = False
        part[starts] = BOS
        part[ends - 1] = EOS
        part[is_word] = words
        parts.append(part)
        n_sentences += n
        n_tokens += len(words)
    if n_sentences == 0:
        raise ValueError("no sentences to estimate a language model from")
    vocab_list = list(vocab)
    del vocab
    if check_tokens:
        bad = [w for w in vocab_list[len(SPECIALS):] if not w or any(c.isspace() for c in w)]
        if bad:
            raise ValueError(f"tokens must be non-empty and contain no whitespace; got {bad[:5]!r}")
    seq = parts[0] if len(parts) == 1 else np.concatenate(parts)
    return seq, vocab_list, n_sentences, n_tokens, saw_specials


# --------------------------------------------------------------------------
# Counting
# --------------------------------------------------------------------------

def _count_orders(seq, vocab_size, order):
    """Types of every order with raw counts and prefix/suffix links.

    For order n the returned dict holds, per n-gram type t (sorted by
    (prefix id, last word)), int32 arrays ``raw[t]``, ``last[t]``,
    ``prefix[t]`` (id of w1..w_{n-1} in order n-1), ``suffix[t]`` (id of
    w2..wn in order n-1) and the bool ``bos[t]`` (w1 is <s>). Order 1 types
    are the word ids themselves (``prefix`` and ``suffix`` None).

    The n-gram at position i of ``seq`` lies inside its sentence iff no
    ``</s>`` is among seq[i .. i+n-2]: the start positions of order n are those
    of order n-1 whose (n-1)-gram does not end in ``</s>``.
    """
    from pivot._native import _lm

    if len(seq) >= 2**31 - 1:
        raise ValueError("the corpus is too large for the built-in estimator (2^31 positions); "
                         "use estimate_with_lmplz")
    raw1 = np.bincount(seq, minlength=vocab_size).astype(np.int32)
    word_ids = np.arange(vocab_size, dtype=np.int32)
    levels = [dict(raw=raw1, last=word_ids, prefix=None, suffix=None, bos=word_ids == BOS)]
    gid_prev = seq                  # id of the (n-1)-gram starting at each position (-1: none)
    positions = None
    for n in range(2, order + 1):
        if positions is None:
            positions = np.flatnonzero(seq != EOS).astype(np.int32)
        else:
            positions = positions[seq[positions + (n - 2)] != EOS]
        n_prefix = len(levels[-1]["raw"])
        prefix, last, suffix, raw, inverse = _lm.count_ngrams(
            gid_prev[positions], seq[positions + (n - 1)], gid_prev[positions + 1],
            n_prefix, vocab_size)
        levels.append(dict(raw=raw, last=last, prefix=prefix, suffix=suffix,
                           bos=levels[-1]["bos"][prefix]))
        if n < order:
            gid = np.full(len(seq), -1, dtype=np.int32)
            gid[positions] = inverse
            gid_prev = gid
        del inverse
    return levels


def _first_words(levels, n, index):
    """First word id of the order-n n-grams ``index`` (following prefix links down)."""
    for m in range(n, 1, -1):
        index = levels[m - 1]["prefix"][index]
    return index


def _adjust_counts(levels, lmplz_statistics=True):
    """Set ``a`` (the counts used for discounting) per level; return the counts-of-counts.

    a(g) = |{x : x g seen}| = number of order-(n+1) types whose suffix is g,
    except g starting with <s> (no left context exists: raw count), and the
    unigrams <s>, <unk>, which lmplz sets to 0; at the highest order a = raw.
    ``raw`` and ``bos`` are dropped from the levels afterwards.

    The counts-of-counts ``(t1, t2, t3, t4)`` per order are those of ``a``,
    except that with ``lmplz_statistics`` one n-gram per lower order enters
    with its raw count (see :func:`_lmplz_statistics_corrections`).
    """
    order = len(levels)
    levels[-1]["a"] = levels[-1]["raw"]
    for n in range(order - 1, 0, -1):                 # n = order of g (1-based)
        lev = levels[n - 1]
        continuation = np.bincount(levels[n]["suffix"], minlength=len(lev["raw"]))
        continuation[lev["bos"]] = lev["raw"][lev["bos"]]
        lev["a"] = continuation.astype(np.int32)
        del continuation
    levels[0]["a"] = levels[0]["a"].copy()
    levels[0]["a"][[UNK, BOS]] = 0
    corrections = _lmplz_statistics_corrections(levels) if lmplz_statistics else {}
    counts_of_counts = []
    for n in range(1, order + 1):
        a = levels[n - 1]["a"]
        t = [int(np.count_nonzero(a == k)) for k in (1, 2, 3, 4)]
        if n in corrections:
            g, raw_g = corrections[n]
            for k in (1, 2, 3, 4):
                t[k - 1] += int(raw_g == k) - int(a[g] == k)
        counts_of_counts.append(tuple(t))
    for lev in levels:
        del lev["raw"], lev["bos"]
    return counts_of_counts


def _lmplz_statistics_corrections(levels):
    """The n-grams whose raw count lmplz's counts-of-counts take: ``{order: (id, raw)}``.

    lmplz streams each lower order in suffix order (last word first, word ids
    by first appearance with <unk>, <s>, </s> = 0, 1, 2, as here) and, when it
    flushes the n-grams still open after the last N-gram, records their *raw*
    count in the statistics instead of the adjusted one (the probabilities
    still use the adjusted count). Those open n-grams are the suffixes of the
    last N-gram: g_1 = the word with the largest id, g_{n+1} = the left
    extension of g_n with the largest first word, stopping at an n-gram that
    starts with <s> (it has no left extension). On large text this moves a
    discount by ~1/t_k; on small text it decides whether lmplz and we agree.
    Orders whose n-gram has raw = adjusted count are left out.
    """
    order = len(levels)
    corrections = {}
    # The largest id of a word the text holds (declared words the text lacks have raw
    # count 0 and no n-gram to extend; without a declared vocabulary: the largest id).
    g = int(np.flatnonzero(levels[0]["raw"] > 0)[-1])
    for n in range(1, order):                         # orders below N only
        lev = levels[n - 1]
        if lev["raw"][g] != lev["a"][g]:
            corrections[n] = (int(g), int(lev["raw"][g]))
        if lev["bos"][g] or n + 1 == order:
            break
        extensions = np.flatnonzero(levels[n]["suffix"] == g)
        g = extensions[np.argmax(_first_words(levels, n + 1, extensions))]
    return corrections


def _discounts(t, n, fallback):
    """(D1, D2, D3+) of order n from counts-of-counts ``t = (t1, t2, t3, t4)``, or the fallback."""
    t = list(t)
    reason = None
    if t[0] == 0 or t[1] == 0 or t[2] == 0:
        k = 1 + [t[0], t[1], t[2]].index(0)
        reason = f"no {n}-grams with adjusted count {k}"
        d = None
    else:
        y = t[0] / (t[0] + 2.0 * t[1])
        d = tuple(k - (k + 1) * y * t[k] / t[k - 1] for k in (1, 2, 3))
        for k, dk in enumerate(d, start=1):
            if not 0.0 <= dk <= k:
                reason = f"{n}-gram discount D{k}={dk:.4f} out of range [0, {k}]"
                break
    if reason is None:
        return d, False
    if fallback is None:
        raise ValueError(
            f"cannot compute modified Kneser-Ney discounts: {reason}. Is the text small or "
            "artificial? Deduplicate it, or pass discount_fallback=(D1, D2, D3+)."
        )
    fb = tuple(float(x) for x in fallback)
    if len(fb) != 3:
        raise ValueError("discount_fallback must be three numbers (D1, D2, D3+)")
    warnings.warn(
        f"{reason}; using fallback discounts D1={fb[0]} D2={fb[1]} D3+={fb[2]} for order {n}",
        DiscountFallbackWarning,
        stacklevel=4,
    )
    return fb, True


def _discount_of(counts, d):
    """D(a) for an array of counts: 0 for a = 0, D1, D2, D3+ for a = 1, 2, >= 3."""
    table = np.array([0.0, d[0], d[1], d[2]])
    return table[np.minimum(counts, 3)]


# --------------------------------------------------------------------------
# Probabilities and ARPA output, one order at a time
# --------------------------------------------------------------------------

def _unigram_probs(levels, d):
    """p(w) = (a(w) - D(a(w))) / S + gamma() / |V|, |V| excluding <s>; p(<s>) = 1."""
    a1 = levels[0]["a"]
    vocab_size = len(a1)
    total = float(a1.sum())
    n_k = [np.count_nonzero(a1 == 1), np.count_nonzero(a1 == 2), np.count_nonzero(a1 >= 3)]
    gamma_empty = (d[0] * n_k[0] + d[1] * n_k[1] + d[2] * n_k[2]) / total
    p1 = (a1 - _discount_of(a1, d)) / total + gamma_empty / (vocab_size - 1)
    p1[BOS] = 1.0
    return p1


def _context_gammas(levels, n, d):
    """gamma(h) of the order-n n-grams as contexts (NaN when never a context), from order n+1.

    Returns (gamma, S) with S(h) = sum_w a(hw) and gamma(h) = sum_w D(a(hw)) / S(h),
    the sum of D(a) over the extensions hw being D1 N1(h) + D2 N2(h) + D3+ N3+(h).
    """
    nxt = levels[n]
    n_contexts = len(levels[n - 1]["last"])
    s_h = np.bincount(nxt["prefix"], weights=nxt["a"], minlength=n_contexts)
    gamma_num = np.bincount(nxt["prefix"], weights=_discount_of(nxt["a"], d), minlength=n_contexts)
    with np.errstate(invalid="ignore", divide="ignore"):
        gamma_num /= s_h
    gamma_num[~(s_h > 0)] = np.nan
    return gamma_num, s_h


def _next_probs(levels, n, d, gamma_h, s_h, probs_prev):
    """Interpolated p of the order-n n-grams from order n-1's p and gamma.

    p(w | h) = (a(hw) - D(a(hw))) / S(h) + gamma(h) p(w | h'), evaluated in
    blocks (the same element-wise operations as one whole-array expression).
    """
    lev = levels[n - 1]
    a, prefix, suffix = lev["a"], lev["prefix"], lev["suffix"]
    out = np.empty(len(a), dtype=np.float64)
    for lo in range(0, len(a), _BLOCK):
        hi = lo + _BLOCK
        p = prefix[lo:hi]
        x = a[lo:hi] - _discount_of(a[lo:hi], d)
        x /= s_h[p]
        y = gamma_h[p]
        y *= probs_prev[suffix[lo:hi]]
        np.add(x, y, out=out[lo:hi])
    return out


def _row_words(levels, n, lo, hi):
    """Word-id matrix (int32, one row per n-gram) of the order-n n-grams lo..hi-1."""
    lev = levels[n - 1]
    words = np.empty((len(lev["last"][lo:hi]), n), dtype=np.int32)
    words[:, n - 1] = lev["last"][lo:hi]
    if n > 1:
        index = lev["prefix"][lo:hi]
        for m in range(n - 1, 1, -1):
            words[:, m - 1] = levels[m - 1]["last"][index]
            index = levels[m - 1]["prefix"][index]
        words[:, 0] = index                   # unigram ids are word ids
    return words


def _write_arpa(path, levels, discounts, vocab_list):
    """Write the ARPA file: header, then each order's rows through the kernel.

    Order n's probabilities need order n-1's probabilities and gammas, and its
    rows need the gammas taken from order n+1: so each order is interpolated,
    written and dropped in turn (its counts, suffix links, probabilities), and
    only the prefix links and last words stay until the end, to spell the rows.
    """
    from pivot._native import _lm

    order = len(levels)
    encoded = [w.encode("utf-8") for w in vocab_list]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    blob = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    del encoded
    if len(blob) == 0:
        blob = np.zeros(1, dtype=np.uint8)
    empty = np.zeros(0, dtype=np.float64)

    tmp_path = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp_path, "wb") as out:
            out.write(b"\\data\\\n")
            for n in range(1, order + 1):
                out.write(f"ngram {n}={len(levels[n - 1]['last'])}\n".encode())
            out.write(b"\n")
            probs = _unigram_probs(levels, discounts[0])
            for n in range(1, order + 1):
                if n < order:
                    gamma_h, s_h = _context_gammas(levels, n, discounts[n])
                out.write(f"\\{n}-grams:\n".encode())
                for lo in range(0, len(probs), _WRITE_CHUNK):
                    hi = lo + _WRITE_CHUNK
                    # lmplz clamps to <= 0 against rounding; log10 of p = 1 for <s> is 0.
                    with np.errstate(divide="ignore"):
                        log_prob = np.minimum(0.0, portable.log10(probs[lo:hi]))
                    if n < order:
                        g = gamma_h[lo:hi]
                        log_backoff = np.where(np.isnan(g), 0.0,
                                               portable.log10(np.where(np.isnan(g), 1.0, g)))
                    else:
                        log_backoff = empty
                    out.write(_lm.format_arpa_rows(_row_words(levels, n, lo, hi), log_prob,
                                               log_backoff, blob, offsets))
                    del log_prob, log_backoff
                out.write(b"\n")
                if n < order:
                    probs = _next_probs(levels, n + 1, discounts[n], gamma_h, s_h, probs)
                    del gamma_h, s_h
                    nxt = levels[n]
                    del nxt["a"], nxt["suffix"]
            out.write(b"\\end\\\n")
        os.replace(tmp_path, path)
    except BaseException:
        if os.path.exists(tmp_path):
            os.unlink(tmp_path)
        raise


def _is_path(x):
    return isinstance(x, (str, os.PathLike))


def estimate_arpa(
    sentences: Iterable[Sequence[str]] | str | os.PathLike,
    arpa_path,
    order: int = 5,
    *,
    discount_fallback=DEFAULT_DISCOUNT_FALLBACK,
    prune=None,
    lmplz_statistics: bool = True,
    vocab: Sequence[str] | None = None,
) -> LMStats:
    """Estimate an interpolated modified Kneser-Ney LM as lmplz does; write it as ARPA.

    ``sentences``: token lists, already normalised, without ``<s>``/``</s>``
    (``[["the", "cell"]]``, not ``["the cell"]``); or the path (str or
    ``os.PathLike``) of a UTF-8 text file of one sentence a line, tokens
    separated by white space, which is read as :func:`estimate_arpa_file` does
    (the same model as for ``[line.split() for line in file]``, without
    holding that list). Values are log10 in the file.
    ``discount_fallback``: (D1, D2, D3+) used, with a
    :class:`DiscountFallbackWarning`, for an order whose closed-form discounts
    fail (lmplz ``--discount_fallback``); ``None`` raises ``ValueError`` instead.
    ``prune``: count pruning is not implemented (lmplz ``--prune``); must be None.
    ``lmplz_statistics``: take the counts-of-counts the way lmplz does, with
    one n-gram per lower order counted raw (see ``_lmplz_statistics_corrections``);
    False gives the textbook discounts from adjusted counts only.
    ``vocab``: a declared vocabulary (SRILM's ``-vocab``): every word of it is a
    unigram of the model, seen or not. An unseen one has adjusted count 0, so
    its probability is the uniform share ``gamma() / |V|`` (as ``<unk>``'s), and
    ``|V|`` counts every declared word: two models estimated with one declared
    vocabulary (and text restricted to it) have the same unigram set and the
    same ``|V|`` (the matched Moore-Lewis protocol, see pivot.pipeline.mono).
    The file is written to a temporary name and renamed into place.
    """
    if _is_path(sentences):
        chunks, check_tokens = _file_chunks(sentences), False
    else:
        chunks, check_tokens = _list_chunks(sentences), True
    return _estimate(chunks, check_tokens, arpa_path, order, discount_fallback, prune,
                     lmplz_statistics, vocab)


def estimate_arpa_file(
    text_path: str | os.PathLike,
    arpa_path,
    order: int = 5,
    *,
    discount_fallback=DEFAULT_DISCOUNT_FALLBACK,
    prune=None,
    lmplz_statistics: bool = True,
    vocab: Sequence[str] | None = None,
) -> LMStats:
    """:func:`estimate_arpa` on a text file of one sentence a line (UTF-8, white-space tokens).

    The file is streamed in chunks of ~2 MB into one int32 id array; no list of
    sentences is ever built. Lines and tokens are those of ``[line.split() for
    line in open(text_path, encoding="utf-8")]`` (an empty line is an empty
    sentence ``<s> </s>``), and the ARPA file is byte-identical to
    ``estimate_arpa`` on that list.
    """
    return _estimate(_file_chunks(text_path), False, arpa_path, order, discount_fallback,
                     prune, lmplz_statistics, vocab)


def _estimate(chunks, check_tokens, arpa_path, order, discount_fallback, prune, lmplz_statistics,
              vocab=None):
    if prune:
        raise NotImplementedError("count pruning is not implemented; use estimate_with_lmplz(..., prune=...)")
    if not 1 <= int(order) <= 9:
        raise ValueError(f"order must be between 1 and 9, got {order}")
    order = int(order)
    t0 = time.perf_counter()
    seq, vocab_list, n_sentences, n_tokens, saw_specials = _encode(chunks, check_tokens, vocab)
    if saw_specials:
        warnings.warn(
            "<s>, </s> or <unk> appear in the input; treating them as whitespace (as lmplz does)",
            stacklevel=3,
        )
    vocab_size = len(vocab_list)
    levels = _count_orders(seq, vocab_size, order)
    del seq
    # Declared words the text never holds (raw count 0; specials aside).
    n_unseen = int(np.count_nonzero(levels[0]["raw"][len(SPECIALS):] == 0))
    ngram_counts = tuple(len(lev["last"]) for lev in levels)
    counts_of_counts = _adjust_counts(levels, lmplz_statistics)
    discounts, fallback_orders = [], []
    for n in range(1, order + 1):
        d, fell_back = _discounts(counts_of_counts[n - 1], n, discount_fallback)
        discounts.append(tuple(float(x) for x in d))
        if fell_back:
            fallback_orders.append(n)
    arpa_path = str(arpa_path)
    _write_arpa(arpa_path, levels, discounts, vocab_list)
    return LMStats(
        order=order,
        arpa_path=arpa_path,
        n_sentences=n_sentences,
        n_tokens=n_tokens,
        vocab_size=vocab_size,
        ngram_counts=ngram_counts,
        discounts=tuple(discounts),
        counts_of_counts=tuple(counts_of_counts),
        fallback_orders=tuple(fallback_orders),
        seconds=time.perf_counter() - t0,
        n_declared=len(vocab) if vocab is not None else 0,
        n_declared_unseen=n_unseen if vocab is not None else 0,
    )


def estimate_model(name, text_path, out_dir, order, estimator, vocab_path=None) -> dict:
    """The lm stage's work for one model, as one task of the engine: estimate ``<name>.arpa`` in
    ``out_dir`` from ``text_path`` (streamed, never a list of sentences) with ``estimator``
    ("pivot": :func:`estimate_arpa_file` over the vocabulary of ``vocab_path``, one word a line;
    "lmplz": :func:`estimate_with_lmplz`, which takes no declared vocabulary: a shared word a
    sample lacks is that model's <unk>), and binarise it when kenlm's build_binary is installed
    (the ARPA then goes: the binary holds the same model and loads in a fraction of the time).

    Returns {"stats": what stats.json records of the model, "seconds": the wall time (kept
    outside the artifact's content), "fallback_orders": the orders whose discounts fell back}.
    """
    out_dir = Path(out_dir)
    arpa = out_dir / f"{name}.arpa"
    t0 = time.perf_counter()
    if estimator == "lmplz":
        s = estimate_with_lmplz(text_path, arpa, order)
        fallback = []  # lmplz reports its own
    else:
        vocab = Path(vocab_path).read_text(encoding="utf-8").split("\n")[:-1] if vocab_path else None
        # A small text leaves some order without the counts-of-counts that modified Kneser-Ney's
        # closed-form discounts need; the estimator then uses lmplz's --discount_fallback values
        # and warns once per order. The caller says it in one log line per model instead.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DiscountFallbackWarning)
            s = estimate_arpa_file(text_path, arpa, order, vocab=vocab)
        fallback = list(s.fallback_orders)
    binary = binarize(arpa, out_dir / f"{name}.binary")
    if binary is not None:
        arpa.unlink()
    # arpa_path is a temporary path; the seconds vary run to run and are returned apart (the
    # artifact's content key, and so every key downstream, must not change with them)
    fitted = {k: v for k, v in s.to_json().items() if k not in ("arpa_path", "seconds")}
    return {"stats": {"binary": binary is not None, **fitted}, "seconds": round(time.perf_counter() - t0, 2),
            "fallback_orders": fallback}


# --------------------------------------------------------------------------
# kenlm and its tools
# --------------------------------------------------------------------------

def load_model(path):
    """``kenlm.Model`` for an ARPA or kenlm binary file (scores are log10).

    Loaded without kenlm's progress bar and ARPA complaints on stderr: a build reports its
    stages in its own log, and `pivot build -q` promises a quiet terminal."""
    import kenlm

    config = kenlm.Config()
    config.show_progress = False
    config.arpa_complain = kenlm.ARPALoadComplain.NONE
    return kenlm.Model(str(path), config)


def _find_tool(name, explicit=None):
    """An explicit path or command name; else the repository's ``.tools/bin``; else PATH.

    The repository's copy comes first: it is the kenlm release that ``scripts/install_lmplz.sh``
    pins (KENLM_MAX_ORDER=6), the one the agreement test in tests/test_lm.py is measured against,
    whatever other kenlm a PATH may hold.
    """
    if explicit:
        return str(explicit) if Path(explicit).is_file() else shutil.which(str(explicit))
    local = _TOOLS_BIN / name
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    return shutil.which(name)


def find_lmplz(lmplz=None):
    """Path of kenlm's ``lmplz``: the given one, in ``<repo>/.tools/bin``, or on PATH; else None."""
    return _find_tool("lmplz", lmplz)


def find_build_binary(build_binary=None):
    """Path of kenlm's ``build_binary`` (same search as :func:`find_lmplz`), or None."""
    return _find_tool("build_binary", build_binary)


def binarize(arpa_path, out_path, *, build_binary=None):
    """Convert an ARPA file to kenlm's binary format with ``build_binary``.

    Returns ``out_path`` or None when ``build_binary`` is not installed, in
    which case the caller loads the ARPA (slower to load, same scores).
    """
    tool = find_build_binary(build_binary)
    if tool is None:
        return None
    subprocess.run([tool, str(arpa_path), str(out_path)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return str(out_path)


def estimate_with_lmplz(
    sentences: Iterable[Sequence[str]] | str | os.PathLike,
    arpa_path,
    order: int = 5,
    *,
    lmplz=None,
    discount_fallback=DEFAULT_DISCOUNT_FALLBACK,
    prune=None,
    memory: str = "2G",
    temp_dir=None,
) -> LMStats:
    """Estimate with an installed ``lmplz`` (text piped on stdin, one sentence a line).

    ``sentences``: token lists, or the path (str or ``os.PathLike``) of a UTF-8
    text file of one sentence a line. A file is streamed to lmplz in chunks of
    ~2 MB, each line re-spelt as its ``str.split()`` tokens joined by single
    spaces: lmplz gets exactly the bytes it gets for the list ``[line.split()
    for line in file]`` (for normalised text that is the file itself), and
    ``n_sentences``/``n_tokens`` count the same, without holding the list.
    ``discount_fallback`` is passed as ``--discount_fallback D1 D2 D3+``
    (``None``: not passed, lmplz stops on bad discounts); ``prune`` as
    ``--prune`` thresholds; ``memory`` as ``-S`` (lmplz otherwise takes 80% of RAM).
    """
    tool = find_lmplz(lmplz)
    if tool is None:
        raise FileNotFoundError("lmplz not found in .tools/bin or on PATH; run scripts/install_lmplz.sh")
    if _is_path(sentences):
        if not os.path.isfile(sentences):
            raise FileNotFoundError(f"text file not found: {sentences}")
        chunks = _file_chunks(sentences)
    else:
        chunks = _list_chunks(sentences)
    arpa_path = str(arpa_path)
    cmd = [tool, "-o", str(int(order)), "-S", str(memory), "--arpa", arpa_path]
    if discount_fallback is not None:
        cmd += ["--discount_fallback", *[repr(float(x)) for x in discount_fallback]]
    if prune:
        cmd += ["--prune", *[str(int(x)) for x in prune]]
    t0 = time.perf_counter()
    n_sentences = n_tokens = 0
    with tempfile.TemporaryDirectory(dir=temp_dir) as tmp:
        with open(Path(tmp) / "lmplz.log", "w+b") as log:
            proc = subprocess.Popen(cmd + ["-T", tmp], stdin=subprocess.PIPE,
                                    stdout=subprocess.DEVNULL, stderr=log)
            try:
                for chunk in chunks:
                    proc.stdin.write(("\n".join(map(" ".join, chunk)) + "\n").encode("utf-8"))
                    n_sentences += len(chunk)
                    n_tokens += sum(map(len, chunk))
            finally:
                proc.stdin.close()
                rc = proc.wait()
            log.seek(0)
            messages = log.read().decode("utf-8", "replace")
    if rc != 0:
        raise RuntimeError(f"lmplz failed (exit {rc}): {' '.join(cmd)}\n{messages[-2000:]}")
    counts, discounts = _parse_lmplz_statistics(messages, order)
    return LMStats(
        order=int(order), arpa_path=arpa_path, n_sentences=n_sentences, n_tokens=n_tokens,
        vocab_size=counts[0] if counts else 0, ngram_counts=tuple(counts),
        discounts=tuple(discounts), fallback_orders=tuple(
            int(x) + 1 for x in _fallback_orders(messages)),
        seconds=time.perf_counter() - t0, estimator="lmplz", extra={"log": messages},
    )


def _parse_lmplz_statistics(messages, order):
    """n-gram counts and discounts from lmplz's ``Statistics:`` block on stderr."""
    counts, discounts = [], []
    lines = messages.splitlines()
    try:
        at = lines.index("Statistics:")
    except ValueError:
        return counts, discounts
    for line in lines[at + 1: at + 1 + order]:
        parts = line.split()
        if len(parts) < 5:
            break
        counts.append(int(parts[1]))
        discounts.append(tuple(float(p.split("=")[1]) for p in parts[-3:]))
    return counts, discounts


def _fallback_orders(messages):
    """0-based orders lmplz reported substituting fallback discounts for."""
    out = []
    for line in messages.splitlines():
        if line.startswith("Substituting fallback discounts for order "):
            out.append(int(line.split("order ")[1].split(":")[0]))
    return out


def read_arpa(path):
    """Parse an ARPA file into ``{order: {ngram tuple: (log10 p, log10 backoff)}}``.

    A missing backoff column reads as 0.0 (no back-off penalty). Meant for
    tests and comparisons, not for querying (use :func:`load_model`).
    """
    tables: dict[int, dict] = {}
    current = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            if line.startswith("\\"):
                if line.endswith("-grams:"):
                    current = int(line[1:].split("-")[0])
                    tables[current] = {}
                else:
                    current = None
                continue
            if current is None:
                continue
            parts = line.split("\t")
            backoff = float(parts[2]) if len(parts) > 2 else 0.0
            tables[current][tuple(parts[1].split(" "))] = (float(parts[0]), backoff)
    return tables


def stage_params(recipe) -> dict:
    return {"order": recipe["domain"]["order"], "estimator": recipe["domain"]["estimator"]}


def run_stage(context) -> None:
    """The modified Kneser-Ney LMs (ARPA, binarised when kenlm's build_binary is installed):
    one task per model, so that on a cluster the models are estimated side by side."""
    import logging

    from pivot.pipeline.lmtext import lm_names

    text_dir, tmp = context.dir("lmtext"), context.tmp
    vocab_path = text_dir / "vocab.txt"
    vocab_path = str(vocab_path) if vocab_path.is_file() else None
    names = lm_names(text_dir)
    done = context.engine.map(estimate_model, [(name, text_dir / f"{name}.txt", tmp, context.params["order"],
                                                context.params["estimator"], vocab_path) for name in names], name="lm")
    for name, d in zip(names, done):
        if d["fallback_orders"]:
            logging.getLogger("pivot").warning(
                "lm %s: too little text for modified Kneser-Ney discounts at order %s; used the fallback "
                "discounts %s", name, ", ".join(map(str, d["fallback_orders"])), DEFAULT_DISCOUNT_FALLBACK)
    (tmp / "stats.json").write_text(json.dumps({name: d["stats"] for name, d in zip(names, done)},
                                               indent=1, default=str))
    # Timings vary run to run: kept beside the artifact, outside its content key.
    (tmp / VOLATILE).write_text(json.dumps({name: d["seconds"] for name, d in zip(names, done)}, indent=1))


def model_path(lm_dir, name: str) -> Path:
    """The LM ``name`` of the stage's folder: binarised when build_binary was found, else ARPA."""
    binary = Path(lm_dir) / f"{name}.binary"
    return binary if binary.is_file() else Path(lm_dir) / f"{name}.arpa"


STAGE = Stage("lm", 5, ("lmtext",), ("domain.order", "domain.estimator"), stage_params,
              ("*.arpa", "*.binary", "stats.json", VOLATILE), run_stage,
              "one per model (Dask)", "modified Kneser-Ney n-gram LMs", when=lambda recipe: recipe.get("domain"))
