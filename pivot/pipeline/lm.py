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
  :func:`_lmplz_statistics_counts`. Invisible on millions of tokens, it
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

How it is fast
--------------
Words become integer ids; the padded corpus is one int array. The n-gram
starting at each position gets an id order by order: the key of an n-gram is
``id(prefix (n-1)-gram) * |V| + last word`` (fits 64 bits), and ``np.unique``
over the keys of all positions gives the types, their raw counts and, per
position, the type id. The suffix (n-1)-gram of every type is the id of the
position one to the right, so adjusted counts are one ``bincount`` over
suffix ids, and the per-context sums ``S``, ``Nk`` are ``bincount`` over prefix
ids. Probabilities follow order by order as array expressions. Only the text
of the ARPA is written by a compiled kernel (``pivot/_lm.pyx``).

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
from itertools import chain
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

__all__ = [
    "LMStats",
    "DiscountFallbackWarning",
    "estimate_arpa",
    "estimate_with_lmplz",
    "find_lmplz",
    "find_build_binary",
    "binarize",
    "load_model",
    "read_arpa",
]

UNK, BOS, EOS = 0, 1, 2
SPECIALS = ("<unk>", "<s>", "</s>")
# The repository's own tool folder, where scripts/install_lmplz.sh puts lmplz.
_TOOLS_BIN = Path(__file__).resolve().parent.parent / ".tools" / "bin"
# Rows of ARPA text formatted per call of the kernel: bounds the text buffer
# (~100 bytes a row) while keeping the per-call overhead negligible.
_WRITE_CHUNK = 1 << 19


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
    extra: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        """The statistics as plain JSON values (lmplz's full log left out)."""
        out = {k: v for k, v in asdict(self).items() if k != "extra"}
        return json.loads(json.dumps(out))


# --------------------------------------------------------------------------
# Corpus to ids
# --------------------------------------------------------------------------

def _encode(sentences: Iterable[Sequence[str]]):
    """Map tokens to ids and build the padded corpus ``<s> w.. </s> <s> ..``.

    Returns (seq int32 of length T, room int32: tokens left in the sentence from
    each position (the n-gram at i exists iff room[i] >= n), vocabulary list,
    n_sentences, n_tokens).
    """
    if not isinstance(sentences, (list, tuple)):
        sentences = list(sentences)
    if any(isinstance(sentence, (str, bytes)) for sentence in sentences):
        raise TypeError("sentences must be token lists, not strings; split them first")
    n_sentences = len(sentences)
    if n_sentences == 0:
        raise ValueError("no sentences to estimate a language model from")
    lengths_arr = np.fromiter(map(len, sentences), dtype=np.int64, count=n_sentences)
    n_flat = int(lengths_arr.sum())
    # Ids by first occurrence, specials first: dict.fromkeys runs at C speed,
    # a per-token Python loop would cost ~1 s per million tokens.
    vocab = dict.fromkeys(SPECIALS)
    vocab.update(dict.fromkeys(chain.from_iterable(sentences)))
    for i, word in enumerate(vocab):
        vocab[word] = i
    words = np.fromiter(map(vocab.__getitem__, chain.from_iterable(sentences)),
                        dtype=np.int32, count=n_flat)

    special = words < len(SPECIALS)
    if special.any():
        warnings.warn(
            "<s>, </s> or <unk> appear in the input; treating them as whitespace (as lmplz does)",
            stacklevel=3,
        )
        sentence_of = np.repeat(np.arange(n_sentences), lengths_arr)
        keep = ~special
        words = words[keep]
        lengths_arr = np.bincount(sentence_of[keep], minlength=n_sentences).astype(np.int64)

    vocab_list = list(vocab)
    bad = [w for w in vocab_list[len(SPECIALS):] if not w or any(c.isspace() for c in w)]
    if bad:
        raise ValueError(f"tokens must be non-empty and contain no whitespace; got {bad[:5]!r}")

    # Padded layout: sentence s occupies [start_s, start_s + len_s + 2).
    padded = lengths_arr + 2
    total = int(padded.sum())
    ends = np.cumsum(padded)
    starts = ends - padded
    seq = np.empty(total, dtype=np.int32)
    is_word = np.ones(total, dtype=bool)
    is_word[starts] = False
    is_word[ends - 1] = False
    seq[starts] = BOS
    seq[ends - 1] = EOS
    seq[is_word] = words
    room = (np.repeat(ends, padded) - np.arange(total)).astype(np.int32)
    return seq, room, vocab_list, n_sentences, int(len(words))


# --------------------------------------------------------------------------
# Counting
# --------------------------------------------------------------------------

def _count_orders(seq, room, vocab_size, order):
    """Types of every order with raw counts, prefix/suffix links and first words.

    For order n the returned dict holds, per n-gram type t (sorted by
    (prefix id, last word)): ``raw[t]``, ``last[t]``, ``prefix[t]`` (id of
    w1..w_{n-1} in order n-1), ``suffix[t]`` (id of w2..wn in order n-1) and
    ``first[t]`` (w1). Order 1 types are the word ids themselves.
    """
    levels = []
    raw1 = np.bincount(seq, minlength=vocab_size).astype(np.int64)
    word_ids = np.arange(vocab_size, dtype=np.int64)
    levels.append(dict(raw=raw1, last=word_ids, first=word_ids, prefix=None, suffix=None))
    gid_prev = seq.astype(np.int64)          # id of the (n-1)-gram starting at each position
    positions = np.arange(len(seq), dtype=np.int64)
    for n in range(2, order + 1):
        positions = positions[room[positions] >= n]     # n-gram at i inside its sentence
        key = gid_prev[positions] * vocab_size + seq[positions + n - 1]
        uniq, inverse, raw = np.unique(key, return_inverse=True, return_counts=True)
        del key
        inverse = inverse.ravel()
        prefix = uniq // vocab_size
        last = uniq % vocab_size
        del uniq
        suffix = np.empty(len(prefix), dtype=np.int64)
        # Every occurrence of type t has the same suffix (n-1)-gram: the one at i+1.
        suffix[inverse] = gid_prev[positions + 1]
        first = levels[-1]["first"][prefix]
        levels.append(dict(raw=raw.astype(np.int64), last=last, first=first,
                           prefix=prefix, suffix=suffix))
        if n < order:
            gid = np.full(len(seq), -1, dtype=np.int64)
            gid[positions] = inverse
            gid_prev = gid
        del inverse
    return levels


def _adjusted_counts(levels):
    """Counts ``a`` used for discounting: raw at the top, continuation counts below.

    a(g) = |{x : x g seen}| = number of order-(n+1) types whose suffix is g,
    except g starting with <s> (no left context exists: raw count), and the
    unigrams <s>, <unk>, which lmplz sets to 0.
    """
    order = len(levels)
    adjusted = [None] * order
    adjusted[-1] = levels[-1]["raw"]
    for n in range(order - 1, 0, -1):                 # n = order of g (1-based)
        lev = levels[n - 1]
        continuation = np.bincount(levels[n]["suffix"], minlength=len(lev["raw"])).astype(np.int64)
        starts_bos = lev["first"] == BOS
        continuation[starts_bos] = lev["raw"][starts_bos]
        adjusted[n - 1] = continuation
    adjusted[0] = adjusted[0].copy()
    adjusted[0][[UNK, BOS]] = 0
    return adjusted


def _lmplz_statistics_counts(levels, adjusted):
    """The counts lmplz's counts-of-counts are taken from (not the probabilities').

    lmplz streams each lower order in suffix order (last word first, word ids
    by first appearance with <unk>, <s>, </s> = 0, 1, 2, as here) and, when it
    flushes the n-grams still open after the last N-gram, records their *raw*
    count in the statistics instead of the adjusted one (the probabilities
    still use the adjusted count). Those open n-grams are the suffixes of the
    last N-gram: g_1 = the word with the largest id, g_{n+1} = the left
    extension of g_n with the largest first word, stopping at an n-gram that
    starts with <s> (it has no left extension). On large text this moves a
    discount by ~1/t_k; on small text it decides whether lmplz and we agree.
    """
    order = len(levels)
    stats_counts = list(adjusted)
    g = len(levels[0]["raw"]) - 1                     # largest word id
    for n in range(1, order):                         # orders below N only
        lev = levels[n - 1]
        if lev["raw"][g] != adjusted[n - 1][g]:
            stats_counts[n - 1] = adjusted[n - 1].copy()
            stats_counts[n - 1][g] = lev["raw"][g]
        if lev["first"][g] == BOS or n + 1 == order:
            break
        extensions = np.flatnonzero(levels[n]["suffix"] == g)
        g = extensions[np.argmax(levels[n]["first"][extensions])]
    return stats_counts


def _discounts(counts, n, fallback):
    """(D1, D2, D3+) of order n from counts-of-counts, or the fallback."""
    t = [int(np.count_nonzero(counts == k)) for k in (1, 2, 3, 4)]
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
        return d, tuple(t), False
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
        stacklevel=3,
    )
    return fb, tuple(t), True


def _discount_of(counts, d):
    """D(a) for an array of counts: 0 for a = 0, D1, D2, D3+ for a = 1, 2, >= 3."""
    table = np.array([0.0, d[0], d[1], d[2]])
    return table[np.minimum(counts, 3)]


# --------------------------------------------------------------------------
# Probabilities
# --------------------------------------------------------------------------

def _interpolate(levels, adjusted, discounts):
    """Interpolated probabilities per order and gamma (backoff) per context.

    Returns (prob list, gamma list) where gamma[n-1][g] is gamma of the order-n
    n-gram g as a context (NaN when g is never a context).
    """
    order = len(levels)
    vocab_size = len(levels[0]["raw"])
    probs, gammas = [], []

    # Unigrams: p(w) = (a(w) - D(a(w))) / S + gamma() / |V|, |V| excluding <s>.
    a1 = adjusted[0]
    d = discounts[0]
    total = float(a1.sum())
    n_k = [np.count_nonzero(a1 == 1), np.count_nonzero(a1 == 2), np.count_nonzero(a1 >= 3)]
    gamma_empty = (d[0] * n_k[0] + d[1] * n_k[1] + d[2] * n_k[2]) / total
    p1 = (a1 - _discount_of(a1, d)) / total + gamma_empty / (vocab_size - 1)
    p1[BOS] = 1.0
    probs.append(p1)

    for n in range(2, order + 1):
        lev = levels[n - 1]
        a = adjusted[n - 1]
        d = discounts[n - 1]
        n_contexts = len(levels[n - 2]["raw"])
        prefix = lev["prefix"]
        # S(h) and the numerator of gamma(h), summed over the extensions hw.
        s_h = np.bincount(prefix, weights=a, minlength=n_contexts)
        d_of_a = _discount_of(a, d)
        # D(a) summed over hw equals D1 N1(h) + D2 N2(h) + D3+ N3+(h).
        gamma_num = np.bincount(prefix, weights=d_of_a, minlength=n_contexts)
        with np.errstate(invalid="ignore", divide="ignore"):
            gamma_h = np.where(s_h > 0, gamma_num / s_h, np.nan)
        gammas.append(gamma_h)
        probs.append((a - d_of_a) / s_h[prefix] + gamma_h[prefix] * probs[n - 2][lev["suffix"]])
    return probs, gammas


# --------------------------------------------------------------------------
# ARPA output
# --------------------------------------------------------------------------

def _write_arpa(path, levels, probs, gammas, vocab_list):
    """Write the ARPA file: header, then each order's rows through the kernel."""
    from pivot._lm import format_arpa_rows

    order = len(levels)
    encoded = [w.encode("utf-8") for w in vocab_list]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    blob = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    if len(blob) == 0:
        blob = np.zeros(1, dtype=np.uint8)
    empty = np.zeros(0, dtype=np.float64)

    tmp_path = f"{path}.tmp{os.getpid()}"
    with open(tmp_path, "wb") as out:
        out.write(b"\\data\\\n")
        for n in range(1, order + 1):
            out.write(f"ngram {n}={len(levels[n - 1]['raw'])}\n".encode())
        out.write(b"\n")
        words = None
        for n in range(1, order + 1):
            lev = levels[n - 1]
            # Word matrix of order n from order n-1's: [words(prefix) | last].
            if n == 1:
                words = lev["last"].astype(np.int32).reshape(-1, 1)
            else:
                words = np.concatenate(
                    [words[lev["prefix"]], lev["last"].astype(np.int32).reshape(-1, 1)], axis=1
                )
            # lmplz clamps to <= 0 against rounding; log10 of p = 1 for <s> is 0.
            with np.errstate(divide="ignore"):
                log_prob = np.minimum(0.0, np.log10(probs[n - 1]))
            if n < order:
                g = gammas[n - 1]
                log_backoff = np.where(np.isnan(g), 0.0, np.log10(np.where(np.isnan(g), 1.0, g)))
            else:
                log_backoff = empty
            out.write(f"\\{n}-grams:\n".encode())
            for lo in range(0, len(log_prob), _WRITE_CHUNK):
                hi = lo + _WRITE_CHUNK
                out.write(format_arpa_rows(
                    np.ascontiguousarray(words[lo:hi]),
                    np.ascontiguousarray(log_prob[lo:hi]),
                    np.ascontiguousarray(log_backoff[lo:hi]) if n < order else empty,
                    blob, offsets))
            out.write(b"\n")
        out.write(b"\\end\\\n")
    os.replace(tmp_path, path)


def estimate_arpa(
    sentences: Iterable[Sequence[str]],
    arpa_path,
    order: int = 5,
    *,
    discount_fallback=(0.5, 1.0, 1.5),
    prune=None,
    lmplz_statistics: bool = True,
) -> LMStats:
    """Estimate an interpolated modified Kneser-Ney LM as lmplz does; write it as ARPA.

    ``sentences``: token lists, already normalised, without ``<s>``/``</s>``
    (``[["the", "cell"]]``, not ``["the cell"]``). Values are log10 in the file.
    ``discount_fallback``: (D1, D2, D3+) used, with a
    :class:`DiscountFallbackWarning`, for an order whose closed-form discounts
    fail (lmplz ``--discount_fallback``); ``None`` raises ``ValueError`` instead.
    ``prune``: count pruning is not implemented (lmplz ``--prune``); must be None.
    ``lmplz_statistics``: take the counts-of-counts the way lmplz does, with
    one n-gram per lower order counted raw (see ``_lmplz_statistics_counts``);
    False gives the textbook discounts from adjusted counts only.
    The file is written to a temporary name and renamed into place.
    """
    if prune:
        raise NotImplementedError("count pruning is not implemented; use estimate_with_lmplz(..., prune=...)")
    if not 1 <= int(order) <= 9:
        raise ValueError(f"order must be between 1 and 9, got {order}")
    order = int(order)
    t0 = time.perf_counter()
    seq, room, vocab_list, n_sentences, n_tokens = _encode(sentences)
    vocab_size = len(vocab_list)
    levels = _count_orders(seq, room, vocab_size, order)
    del seq, room
    adjusted = _adjusted_counts(levels)
    stats_counts = _lmplz_statistics_counts(levels, adjusted) if lmplz_statistics else adjusted
    discounts, counts_of_counts, fallback_orders = [], [], []
    for n in range(1, order + 1):
        d, t, fell_back = _discounts(stats_counts[n - 1], n, discount_fallback)
        discounts.append(tuple(float(x) for x in d))
        counts_of_counts.append(t)
        if fell_back:
            fallback_orders.append(n)
    probs, gammas = _interpolate(levels, adjusted, discounts)
    arpa_path = str(arpa_path)
    _write_arpa(arpa_path, levels, probs, gammas, vocab_list)
    return LMStats(
        order=order,
        arpa_path=arpa_path,
        n_sentences=n_sentences,
        n_tokens=n_tokens,
        vocab_size=vocab_size,
        ngram_counts=tuple(len(lev["raw"]) for lev in levels),
        discounts=tuple(discounts),
        counts_of_counts=tuple(counts_of_counts),
        fallback_orders=tuple(fallback_orders),
        seconds=time.perf_counter() - t0,
    )


# --------------------------------------------------------------------------
# kenlm and its tools
# --------------------------------------------------------------------------

def load_model(path):
    """``kenlm.Model`` for an ARPA or kenlm binary file (scores are log10)."""
    import kenlm

    return kenlm.Model(str(path))


def _find_tool(name, explicit=None):
    if explicit:
        return str(explicit) if Path(explicit).is_file() else shutil.which(str(explicit))
    found = shutil.which(name)
    if found:
        return found
    local = _TOOLS_BIN / name
    return str(local) if local.is_file() and os.access(local, os.X_OK) else None


def find_lmplz(lmplz=None):
    """Path of kenlm's ``lmplz``: the given one, on PATH, or in ``<repo>/.tools/bin``; else None."""
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
    sentences: Iterable[Sequence[str]],
    arpa_path,
    order: int = 5,
    *,
    lmplz=None,
    discount_fallback=(0.5, 1.0, 1.5),
    prune=None,
    memory: str = "2G",
    temp_dir=None,
) -> LMStats:
    """Estimate with an installed ``lmplz`` (text piped on stdin, one sentence a line).

    ``discount_fallback`` is passed as ``--discount_fallback D1 D2 D3+``
    (``None``: not passed, lmplz stops on bad discounts); ``prune`` as
    ``--prune`` thresholds; ``memory`` as ``-S`` (lmplz otherwise takes 80% of RAM).
    """
    tool = find_lmplz(lmplz)
    if tool is None:
        raise FileNotFoundError("lmplz not found on PATH or in .tools/bin; run scripts/install_lmplz.sh")
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
                lines = []
                for sentence in sentences:
                    if isinstance(sentence, (str, bytes)):
                        raise TypeError("sentences must be token lists, not strings")
                    lines.append(" ".join(sentence))
                    n_sentences += 1
                    n_tokens += len(sentence)
                    if len(lines) >= 10000:
                        proc.stdin.write(("\n".join(lines) + "\n").encode("utf-8"))
                        lines = []
                if lines:
                    proc.stdin.write(("\n".join(lines) + "\n").encode("utf-8"))
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
