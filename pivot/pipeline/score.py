"""Moore-Lewis scores: how much more a sentence looks like the target domain than general text.

For an English sentence s of n words w_1..w_n, scored by an n-gram LM M,

    H_M(s) = -1/(n+1) * [ sum_{i=1..n} log2 p_M(w_i | history) + log2 p_M(</s> | history) ]

is the per-word cross-entropy in bits, and the Moore-Lewis score is

    sigma(s) = H_tgt(s) - H_gen(s)

(the paper's equation 2): lower sigma = more like the in-domain text. Sorting the bitext by
sigma ascending puts the most domain-like sentence pairs first.

Decisions (implementations differ on each; these are tested in tests/test_score.py):

* **Log base 2.** kenlm returns log10 probabilities; log2 p = log10 p * log2(10), applied to the
  sentence total (one multiplication, so no per-word rounding). Bits make sigma directly the
  base-2 log of the perplexity ratio: PP_tgt/PP_gen = 2^sigma.
* **</s> counts as a word.** ``model.score(s, bos=True, eos=True)`` conditions the first word
  on <s> and includes log p(</s> | last words); the divisor is therefore n_words + 1. The end
  of sentence is a real prediction (a domain LM knows how its sentences end), and the "+1"
  keeps an empty sentence defined (H = -log2 p(</s> | <s>)).
* **OOVs, matched LMs** (the default; the Moore–Lewis protocol of 2010, pivot.pipeline.mono):
  both LMs are trained on equal-size samples over one vocabulary V fixed from the in-domain
  sample, every other word written as ``<oov>``. A scored sentence is mapped the same way
  (``vocab``: every token outside V becomes ``<oov>``, one token for one word, so n_words and
  the divisor do not change), so an out-of-vocabulary word costs -log2 p(<oov> | history)
  under each model: a trained probability with the same meaning in both. A sentence full of
  words the in-domain text never uses gets a high H_tgt (the in-domain sample rarely says
  <oov>) against a lower H_gen: the evidence Moore-Lewis is after, now measured on equal
  terms. ``n_oov`` (tokens mapped per sentence) is kept beside the scores.
* **OOVs, unmatched LMs** (``matched = false``): every word is scored as it is; an unknown
  word gets its own model's <unk> probability (times the backoff of the context, as kenlm
  does). The two models then have different vocabularies and <unk> means different things
  in each, so sigma also measures the OOV rate and the LM sizes. Dropping OOV words instead
  would judge a sentence by the words a model knows, its function words alone for a
  sentence of unknown content words.
  A model without a <unk> entry (kenlm then silently substitutes log10 p = -100, about 332
  bits per unknown word) is refused with an InputError.
* **Ties** in sigma keep corpus order (stable sort) in :func:`ranking`, so a ranking and every
  top-tau subsample are reproducible.
* **Words** are the white-space tokens of the normalised sentence, exactly what kenlm splits
  on; ``n_words`` is returned so the top-tau subsamples count the same words.

Streaming: :func:`moore_lewis_file` scores a text file of one sentence a line chunk by chunk,
each sentence with the general LM of its fold, and :func:`write_ranked_file` writes the ranking
reading the sentences back from that file; both give exactly (bit for bit, byte for byte) what
the list-based :func:`moore_lewis` per fold and :func:`write_ranked` give, without a list of
the corpus.
"""
from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

import numpy as np

from pivot.errors import InputError
from pivot.pipeline.bundle import write_npy_header
from pivot.pipeline.stage import Stage

# log2 p = log10 p * log2(10)
LOG2_10 = math.log2(10.0)

# A token no LM vocabulary holds (kenlm splits on white space only, so it is one token).
_OOV_PROBE = "\x01pivot-oov-probe\x01"

# Sentences held at a time by the streaming scorer and ranked writer (~100 bytes each).
_CHUNK_LINES = 1 << 16
# Bytes read at a time when indexing the lines of a text file.
_INDEX_BYTES = 1 << 24


@dataclass
class MooreLewisScores:
    """Per-sentence Moore-Lewis quantities, aligned with the scored sentences.

    ``h_tgt``, ``h_gen``: per-word cross-entropies in bits (float64); ``sigma = h_tgt - h_gen``;
    ``n_words``: white-space words per sentence (int64, </s> not included).
    """
    h_tgt: np.ndarray
    h_gen: np.ndarray
    sigma: np.ndarray
    n_words: np.ndarray
    n_oov: np.ndarray | None = None  # tokens outside the shared vocabulary (matched LMs only)

    def __len__(self):
        return len(self.sigma)


def load_lm(lm):
    """A kenlm.Model from a model or an ARPA/binary path, refusing a model without <unk>."""
    from pivot.pipeline.lm import load_model

    if isinstance(lm, (str, os.PathLike)):
        if not os.path.isfile(lm):
            raise InputError("language model file not found", path=str(lm))
        model = load_model(lm)
    else:
        model = lm
    # With bos=eos=False and a null context, the probe's score is log10 p(<unk>) exactly.
    (log10_p, _ngram_len, oov), = model.full_scores(_OOV_PROBE, bos=False, eos=False)
    if oov and log10_p <= -99.5:
        raise InputError("the language model has no <unk> entry (kenlm substitutes log10 p = -100 "
                         "for every unknown word); estimate it with <unk>",
                         path=getattr(model, "path", None))
    return model


def _log10_probs(sentences, model):
    """log10 p(s </s> | <s>) of each sentence: the bare kenlm loop, nothing else in it."""
    score = model.score
    return np.fromiter((score(s, True, True) for s in sentences), dtype=np.float64,
                       count=len(sentences))


# The white space kenlm splits on: its Python binding encodes a sentence to UTF-8 and calls
# bytes.split(), whose separators are the six ASCII bytes 9-13 and 32 (never U+00A0 and the
# like), tested as (b == 32) | (9 <= b <= 13) in count_words.


def count_words(sentences):
    """Words per sentence (int64) exactly as kenlm splits them (</s> not included).

    Vectorised: the sentences are joined with "\\n" into one UTF-8 buffer; a word starts at
    a non-space byte that follows a space byte or a sentence start, and the starts are summed
    between the joining newlines. Sentences that themselves hold a newline fall back to
    ``len(s.encode().split())``.
    """
    n = len(sentences)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    buf = np.frombuffer("\n".join(sentences).encode("utf-8"), dtype=np.uint8)
    newlines = np.flatnonzero(buf == 10)
    if len(newlines) != n - 1:
        return np.fromiter((len(s.encode("utf-8").split()) for s in sentences),
                           dtype=np.int64, count=n)
    if len(buf) == 0:
        return np.zeros(n, dtype=np.int64)
    is_space = (buf == 32) | ((buf >= 9) & (buf <= 13))
    starts = ~is_space
    starts[1:] &= is_space[:-1]
    start_at = np.flatnonzero(starts)
    # words of sentence k = word starts between newline k-1 and newline k
    bounds = np.concatenate(([0], newlines, [len(buf)]))
    return np.diff(np.searchsorted(start_at, bounds)).astype(np.int64)


def cross_entropy(sentences, lm, n_words=None):
    """Per-word cross-entropy in bits of each sentence under ``lm`` (float64 array).

    H(s) = -log10 p(s </s> | <s>) * log2(10) / (n_words(s) + 1).
    """
    sentences = sentences if isinstance(sentences, list) else list(sentences)
    if n_words is None:
        n_words = count_words(sentences)
    return -_log10_probs(sentences, load_lm(lm)) * LOG2_10 / (n_words + 1)


def moore_lewis(sentences, lm_tgt, lm_gen):
    """Moore-Lewis scores of ``sentences`` (normalised, space-tokenised strings).

    ``lm_tgt``: the in-domain LM, ``lm_gen``: the general LM (kenlm.Model or path).
    Returns :class:`MooreLewisScores` with sigma = H_tgt - H_gen in bits.

    >>> ml = moore_lewis(["the cell divides ."], "bio.arpa", "gen.arpa")  # doctest: +SKIP
    >>> ml.sigma[0] < 0        # more like biology than like general text   # doctest: +SKIP
    """
    if isinstance(sentences, str):
        raise TypeError("sentences must be a sequence of strings, not one string")
    sentences = sentences if isinstance(sentences, list) else list(sentences)
    model_tgt, model_gen = load_lm(lm_tgt), load_lm(lm_gen)
    # One word count for both models: the per-sentence Python work beyond the two kenlm
    # calls is this split, which keeps the pass near the speed of a bare scoring loop.
    n_words = count_words(sentences)
    h_tgt = -_log10_probs(sentences, model_tgt) * LOG2_10 / (n_words + 1)
    h_gen = -_log10_probs(sentences, model_gen) * LOG2_10 / (n_words + 1)
    return MooreLewisScores(h_tgt=h_tgt, h_gen=h_gen, sigma=h_tgt - h_gen, n_words=n_words)


def ranking(sigma):
    """Sentence indices from most to least domain-like: sigma ascending, ties in corpus order."""
    return np.argsort(np.asarray(sigma, dtype=np.float64), kind="stable")


#: Sorted positions between two bounds of RankBuckets: an open bucket holds fewer sentences.
BUCKET_STEP = 1 << 16


def _same(a, b):
    """a == b as NumPy's sorts order floats: NaN equals NaN (they sort last, in corpus order)."""
    return (a == b) | (np.isnan(a) & np.isnan(b))


class RankBuckets:
    """Sigma's values cut into buckets that follow the ranking (sigma ascending, NaN last).

    bounds: the sorted sigma's values at every ``step``-th position and its last value, distinct
    (b_0 = min < b_1 < ... < b_last = max). Bucket 2p + 1 holds the sentences with sigma = b_p
    (ties: ranked in corpus order), bucket 2p those with b_(p-1) < sigma < b_p (fewer than
    ``step``: they lie strictly between two sampled sorted positions, and never NaN). So every
    sentence of bucket j ranks before every sentence of bucket j + 1.
    """

    def __init__(self, sorted_sigma, step=BUCKET_STEP):
        from pivot.arrays import unique

        self.bounds = unique(np.concatenate((sorted_sigma[::step], sorted_sigma[-1:])))
        self.n_buckets = 2 * len(self.bounds) + 1

    def of(self, sigma):
        """The bucket of each sentence (int64)."""
        b = self.bounds
        p = np.searchsorted(b, sigma, side="left")   # NumPy's search orders NaN last, as its sort
        if len(b) == 0:
            return 2 * p
        return 2 * p + (_same(b[np.minimum(p, len(b) - 1)], sigma) & (p < len(b)))


def write_ranked(path, scores, sentences):
    """Write ``sigma<TAB>h_tgt<TAB>h_gen<TAB>sentence`` lines, sigma ascending (stable).

    Numbers are written with 6 decimals (bits). A sentence holding a TAB or a line break
    would corrupt the file and raises ValueError.
    """
    if len(sentences) != len(scores):
        raise ValueError(f"{len(sentences)} sentences but {len(scores)} scores")
    order = ranking(scores.sigma)
    with open(path, "w", encoding="utf-8") as out:
        for i in order.tolist():
            s = sentences[i]
            if "\t" in s or "\n" in s or "\r" in s:
                raise ValueError(f"sentence {i} holds a TAB or line break: {s[:60]!r}")
            out.write(f"{scores.sigma[i]:.6f}\t{scores.h_tgt[i]:.6f}\t{scores.h_gen[i]:.6f}\t{s}\n")


# ----------------------------------------------------------------------------- streaming

def _line_chunks(text_path, chunk_lines):
    """The lines of a UTF-8 text file without their "\\n", ``chunk_lines`` at a time.

    Only "\\n" ends a line (a "\\r" stays in the sentence), so a file written as
    ``"\\n".join(sentences) + "\\n"`` gives back exactly ``sentences`` (none may hold "\\n").
    """
    with open(text_path, encoding="utf-8", newline="\n") as fh:
        while True:
            lines = list(islice(fh, chunk_lines))
            if not lines:
                return
            last = lines[-1]
            lines = [line[:-1] for line in lines]
            if not last.endswith("\n"):      # the file's last line, unterminated
                lines[-1] = last
            yield lines
            del lines, last


def moore_lewis_file(text_path, folds, lm_tgt, lm_gen, *, chunk_lines=None, vocab=None) -> MooreLewisScores:
    """Moore-Lewis scores of the sentences of a text file, streamed ``chunk_lines`` at a time.

    ``text_path``: UTF-8, one normalised sentence a line ("\\n" ends a line, see
    :func:`_line_chunks`). ``folds``: one int per line (np.int8 0/1 in the pipeline):
    sentence i is scored by the general LM ``lm_gen[folds[i]]``; ``lm_gen`` is a mapping
    fold -> LM (kenlm.Model or path), or one LM for every fold. ``lm_tgt``: the in-domain LM.

    Returns :class:`MooreLewisScores` aligned with the lines, each value bit-identical to
    what :func:`moore_lewis` gives for the sentence when called on the list of the
    sentences of its fold (every sentence's score depends on that sentence only). The
    corpus is never held as a list: memory is the four result arrays plus one chunk.
    ``vocab`` (a set, matched LMs): each sentence is scored with its tokens outside the
    set replaced by ``<oov>`` (pivot.pipeline.mono.map_to_vocab), and ``n_oov`` counts them.
    """
    folds = np.asarray(folds)
    if folds.ndim != 1:
        raise ValueError("folds must be a 1-d array, one fold per line")
    n = len(folds)
    chunk_lines = int(chunk_lines or _CHUNK_LINES)
    fold_ids = np.unique(folds).tolist()
    if not isinstance(lm_gen, Mapping):
        lm_gen = {k: lm_gen for k in fold_ids}
    missing = [k for k in fold_ids if k not in lm_gen]
    if missing:
        raise ValueError(f"no general LM for fold(s) {missing}")
    model_tgt = load_lm(lm_tgt)
    loaded = {}                   # one kenlm.Model per distinct path or model
    models_gen = {}
    for k in fold_ids:
        key = os.fspath(lm_gen[k]) if isinstance(lm_gen[k], (str, os.PathLike)) else id(lm_gen[k])
        if key not in loaded:
            loaded[key] = load_lm(lm_gen[k])
        models_gen[k] = loaded[key]
    h_tgt, h_gen, sigma = np.zeros(n), np.zeros(n), np.zeros(n)
    n_words = np.zeros(n, dtype=np.int64)
    n_oov = np.zeros(n, dtype=np.int64) if vocab is not None else None
    if vocab is not None:
        from pivot.pipeline.mono import map_to_vocab
    lo = 0
    for chunk in _line_chunks(text_path, chunk_lines):
        hi = lo + len(chunk)
        if hi > n:
            raise ValueError(f"{text_path} holds more lines than the {n} folds")
        if vocab is not None:
            # Mapped sentences are the str.split() tokens joined by single spaces (the tokens
            # the LMs were trained on); the words are counted on what kenlm is given.
            mapped = [map_to_vocab(x, vocab) for x in chunk]
            chunk = [m for m, _ in mapped]
            n_oov[lo:hi] = [k for _, k in mapped]
            del mapped
        nw = count_words(chunk)
        ht = -_log10_probs(chunk, model_tgt) * LOG2_10 / (nw + 1)
        f = folds[lo:hi]
        for k in fold_ids:
            idx = np.flatnonzero(f == k)
            if len(idx) == 0:
                continue
            sub = [chunk[i] for i in idx.tolist()]
            hg = -_log10_probs(sub, models_gen[k]) * LOG2_10 / (nw[idx] + 1)
            h_gen[lo + idx] = hg
            sigma[lo + idx] = ht[idx] - hg
        h_tgt[lo:hi] = ht
        n_words[lo:hi] = nw
        lo = hi
        del chunk
    if lo != n:
        raise ValueError(f"{text_path} holds {lo} lines but there are {n} folds")
    return MooreLewisScores(h_tgt=h_tgt, h_gen=h_gen, sigma=sigma, n_words=n_words, n_oov=n_oov)


def _line_ends(text_path):
    """Byte offset of the end of each line (its "\\n", or the end of a last unterminated line).

    Line i spans bytes [ends[i-1] + 1, ends[i]) (line 0 starts at 0); int64.
    """
    parts, base = [], 0
    with open(text_path, "rb") as fh:
        while True:
            buf = fh.read(_INDEX_BYTES)
            if not buf:
                break
            parts.append(np.flatnonzero(np.frombuffer(buf, dtype=np.uint8) == 10) + base)
            base += len(buf)
            last = buf[-1:]
            del buf
    ends = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    if base and last != b"\n":
        ends = np.append(ends, base)
    return ends.astype(np.int64, copy=False)


def write_ranked_file(path, scores, text_path, *, chunk_lines=None):
    """:func:`write_ranked` with the sentences read from ``text_path`` (one a line, as in
    :func:`moore_lewis_file`), or from a list of such files read in turn: the same
    ``ranked.tsv`` bytes, without a list of sentences.

    One pass indexes where each line ends; then the output is written a block of
    ``chunk_lines`` ranks at a time, reading the block's lines in file order with
    ``os.pread``. Memory: the line index and the ranking (8 bytes a sentence each) and
    one block of text.
    """
    paths = [text_path] if isinstance(text_path, (str, os.PathLike)) else list(text_path)
    line_ends = [_line_ends(p) for p in paths]
    # ends[i]: where sentence i ends in its own file; first[k]: the first sentence of file k
    ends = np.concatenate(line_ends) if line_ends else np.zeros(0, dtype=np.int64)
    first = np.cumsum([0] + [len(e) for e in line_ends])[:-1]
    if len(ends) != len(scores):
        raise ValueError(f"{len(ends)} sentences but {len(scores)} scores")
    chunk_lines = int(chunk_lines or _CHUNK_LINES)
    order = ranking(scores.sigma)
    sources = [open(p, "rb", buffering=0) for p in paths]
    try:
        fds = [src.fileno() for src in sources]
        with open(path, "w", encoding="utf-8") as out:
            for lo in range(0, len(order), chunk_lines):
                idx = order[lo:lo + chunk_lines]
                file_of = np.searchsorted(first, idx, side="right") - 1
                stop = ends[idx]
                start = np.where(idx > first[file_of], ends[np.maximum(idx - 1, 0)] + 1, 0)
                text = [None] * len(idx)
                for j in np.lexsort((start, file_of)).tolist():      # file order
                    text[j] = os.pread(fds[file_of[j]], int(stop[j] - start[j]), int(start[j])).decode("utf-8")
                rows = zip(idx.tolist(), text, scores.sigma[idx].tolist(), scores.h_tgt[idx].tolist(),
                           scores.h_gen[idx].tolist())
                for i, s, sg, ht, hg in rows:
                    if "\t" in s or "\n" in s or "\r" in s:
                        raise ValueError(f"sentence {i} holds a TAB or line break: {s[:60]!r}")
                    out.write(f"{sg:.6f}\t{ht:.6f}\t{hg:.6f}\t{s}\n")
                del text, rows
    finally:
        for src in sources:
            src.close()


# ------------------------------------------------------------------ the score stage as tasks

#: Sentences per scoring task. Loading an ARPA model costs seconds (bio's in-domain 5-gram: ~4 s),
#: scoring a million sentences with it about as much: a task scores a large range with one
#: model, and the tasks of the different models run side by side.
TASK_SENTENCES = 1_000_000


def _text_lines(texts, lo, hi, chunk_lines=_CHUNK_LINES):
    """Lines [lo, hi) of the concatenation of ``texts`` ((path, n_lines) pairs: the first n_lines
    lines of each), without their "\\n", at most ``chunk_lines`` at a time."""
    start = 0
    for path, n in texts:
        a, b = max(lo, start), min(hi, start + n)
        if a < b:
            with open(path, encoding="utf-8", newline="\n") as fh:
                lines = islice(fh, a - start, b - start)
                got = 0
                while True:
                    chunk = [line[:-1] if line.endswith("\n") else line for line in islice(lines, chunk_lines)]
                    if not chunk:
                        break
                    got += len(chunk)
                    yield chunk
                if got != b - a:
                    raise ValueError(f"{path}: ends before line {b - start}, expected {n} lines")
        start += n


def _read_vocab(vocab_path):
    """The shared vocabulary (vocab.txt: one word a line, <oov> last) as a set, or None."""
    if not vocab_path:
        return None
    with open(vocab_path, encoding="utf-8", newline="\n") as fh:
        return frozenset(fh.read().split("\n")[:-1])


def score_part(texts, lo, hi, lm_path, fold, folds_path, vocab_path, out_path) -> str:
    """One scoring task: the per-word cross-entropy (bits, </s> counted) under the LM at
    ``lm_path`` of the sentences [lo, hi) of ``texts`` whose fold (``folds_path``) is ``fold``,
    or of all of them when ``fold`` is None (the in-domain LM).

    Writes ``out_path`` (.npz, atomically): ``h``, one value per sentence scored, in sentence
    order; with ``fold`` None also ``n_words`` and (matched LMs, ``vocab_path`` given) ``n_oov``.
    Each value is computed as :func:`moore_lewis_file` computes it (a sentence's score depends on
    that sentence only), so the stage's arrays are the same bits however the work is cut.
    """
    from pivot.atomic import save_npz

    if os.path.isfile(out_path):
        return out_path  # written by an earlier run of this task
    vocab = _read_vocab(vocab_path)
    if vocab is not None:
        from pivot.pipeline.mono import map_to_vocab
    model = load_lm(lm_path)
    folds = np.load(folds_path, mmap_mode="r")
    h, n_words, n_oov = [], [], []
    at = lo
    for chunk in _text_lines(texts, lo, hi):
        n = len(chunk)
        if fold is not None:
            chunk = [chunk[i] for i in np.flatnonzero(np.asarray(folds[at:at + n]) == fold).tolist()]
        at += n
        if vocab is not None:
            mapped = [map_to_vocab(x, vocab) for x in chunk]
            chunk = [m for m, _ in mapped]
            n_oov.append(np.array([k for _, k in mapped], dtype=np.int64))
        nw = count_words(chunk)
        h.append(-_log10_probs(chunk, model) * LOG2_10 / (nw + 1))
        n_words.append(nw)
    cat = (lambda xs, dtype: np.concatenate(xs) if xs else np.zeros(0, dtype))
    arrays = {"h": cat(h, np.float64)}
    if fold is None:
        arrays["n_words"] = cat(n_words, np.int64)
        if vocab is not None:
            arrays["n_oov"] = cat(n_oov, np.int64)
    save_npz(out_path, **arrays)
    return out_path


def _range_scores(part, folds_path, folds_of, names) -> dict:
    """The arrays ``names`` (h_tgt, h_gen, sigma = h_tgt - h_gen, n_words, n_oov) of the sentences
    of one range, from its parts (score_part): h_gen sentence by sentence from its fold's part."""
    from pivot.pipeline.pivoting import npy_slice

    (lo, hi), tgt_path, gen_paths = part
    out = {}
    if {"h_tgt", "sigma", "n_words", "n_oov"} & set(names):
        with np.load(tgt_path) as z:
            out["h_tgt"] = z["h"]
            out.update({name: z[name] for name in ("n_words", "n_oov") if name in names})
    if {"h_gen", "sigma"} & set(names):
        folds = npy_slice(folds_path, lo, hi)
        out["h_gen"] = np.zeros(hi - lo)
        for k, path in zip(folds_of, gen_paths):
            with np.load(path) as z:
                out["h_gen"][np.flatnonzero(folds == k)] = z["h"]
    if "sigma" in names:
        out["sigma"] = out["h_tgt"] - out["h_gen"]
    for name, a in out.items():
        if len(a) != hi - lo:
            raise ValueError(f"{tgt_path}: {name} holds {len(a)} sentences, the range {hi - lo}")
    return {name: out[name] for name in names}


def sorted_sigma(blocks, n: int, words: bool = False):
    """Sigma of the n sentences of ``blocks()`` ((lo, {"sigma", ...}) in corpus order), sorted
    ascending (NaN last): the one array of the corpus' size a streamed pass over the scores holds
    (8 bytes a sentence). With ``words``, (sorted sigma, the blocks' total of "n_words")."""
    out = np.empty(n, dtype=np.float64)
    total, seen = 0, 0
    for lo, b in blocks():
        if lo != seen or lo + len(b["sigma"]) > n:
            raise ValueError(f"the blocks hold sentences {lo}..{lo + len(b['sigma'])}, expected {seen}.. of {n}")
        out[lo:lo + len(b["sigma"])] = b["sigma"]
        if words:
            total += int(b["n_words"].sum())
        seen = lo + len(b["sigma"])
    if seen != n:
        raise ValueError(f"the blocks hold {seen} sentences, expected {n}")
    out.sort()
    return (out, total) if words else out


def _line_spans(paths):
    """(file k, starts, stops) of the lines of the files ``paths`` in turn, a read buffer at a
    time: a line spans bytes [start, stop) of its file, without its "\n" (as :func:`_line_ends`:
    a last unterminated line ends at the end of the file)."""
    for k, path in enumerate(paths):
        base, prev, last = 0, -1, b""            # prev: the previous line's "\n"
        with open(path, "rb") as fh:
            while True:
                buf = fh.read(_INDEX_BYTES)
                if not buf:
                    break
                ends = np.flatnonzero(np.frombuffer(buf, dtype=np.uint8) == 10) + base
                base, last = base + len(buf), buf[-1:]
                del buf
                if len(ends):
                    yield k, np.concatenate(([prev + 1], ends[:-1] + 1)), ends
                    prev = int(ends[-1])
        if base and last != b"\n":
            yield k, np.array([prev + 1], dtype=np.int64), np.array([base], dtype=np.int64)


class _Lines:
    """The next k lines' (file, start, stop) of a :func:`_line_spans` stream, any k at a time."""

    def __init__(self, spans):
        self._spans, self._held, self.read = spans, [], 0

    def take(self, k: int):
        got, parts = 0, []
        while got < k:
            if not self._held:
                nxt = next(self._spans, None)
                if nxt is None:
                    break
                f, a, b = nxt
                self._held = [np.full(len(a), f, dtype=np.int32), a, b]
            m = min(k - got, len(self._held[1]))
            parts.append([x[:m] for x in self._held])
            self._held = [x[m:] for x in self._held] if m < len(self._held[1]) else []
            got += m
        self.read += got
        if not parts:
            return np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.int64)
        return tuple(np.concatenate(x) for x in zip(*parts))

    def count_rest(self) -> int:
        """Lines left (for an error message): the stream is read to its end."""
        rest = len(self._held[1]) if self._held else 0
        rest += sum(len(a) for _, a, _ in self._spans)
        self._held = []
        return rest


#: One entry of a run of the ranked file (write_ranked_runs): a sentence's numbers and its line.
_RUN_ENTRY = np.dtype([("sigma", "<f8"), ("h_tgt", "<f8"), ("h_gen", "<f8"), ("index", "<i8"),
                       ("start", "<i8"), ("stop", "<i8"), ("file", "<i4")])


def _write_rows(out, entries, fds) -> None:
    """ranked.tsv's lines of ``entries`` (in their order), the texts read in file order."""
    file_of, start, stop = entries["file"], entries["start"], entries["stop"]
    text = [None] * len(entries)
    order = np.lexsort((start, file_of)).tolist()        # file order
    # as Python ints: indexing the entries' fields one number at a time costs more than the read
    file_of, start, stop = file_of.tolist(), start.tolist(), stop.tolist()
    pread = os.pread
    for j in order:
        text[j] = pread(fds[file_of[j]], stop[j] - start[j], start[j]).decode("utf-8")
    rows = zip(entries["index"].tolist(), text, entries["sigma"].tolist(), entries["h_tgt"].tolist(),
               entries["h_gen"].tolist())
    for i, s, sg, ht, hg in rows:
        if "\t" in s or "\n" in s or "\r" in s:
            raise ValueError(f"sentence {i} holds a TAB or line break: {s[:60]!r}")
        out.write(f"{sg:.6f}\t{ht:.6f}\t{hg:.6f}\t{s}\n")


def write_ranked_runs(path, blocks, n, text_paths, runs_path, *, step=BUCKET_STEP, chunk_lines=None):
    """:func:`write_ranked_file`'s bytes with no array of the corpus' size held but the sorted sigma
    for a moment: an external sort by :class:`RankBuckets`.

    ``blocks()``: (lo, {"sigma", "h_tgt", "h_gen"}) of the n sentences in corpus order, each call
    a new pass; ``text_paths``: the files of their lines, in turn. Pass 1 sorts a copy of sigma
    (8 bytes a sentence) for the buckets' bounds and drops it. Pass 2 writes each block as a run
    to ``runs_path``: its sentences' entries (_RUN_ENTRY: the numbers and where the line lies)
    sorted stably by bucket, so in corpus order within a bucket. Pass 3 writes the buckets in
    turn: an equal bucket's sentences are tied, ranked in corpus order, that is run after run as
    they are; an open bucket's (fewer than ``step``) are gathered from the runs and sorted stably
    by sigma. Memory: a block, its entries, a bucket's and ``chunk_lines`` lines' worth.
    """
    chunk_lines = int(chunk_lines or _CHUNK_LINES)
    paths = [text_paths] if isinstance(text_paths, (str, os.PathLike)) else list(text_paths)
    buckets = RankBuckets(sorted_sigma(blocks, n), step)
    lines = _Lines(_line_spans(paths))
    counts, sizes = [], []                 # per run: its entries per bucket, and in all
    try:
        with open(runs_path, "wb") as runs:
            for lo, b in blocks():
                k = len(b["sigma"])
                file_of, start, stop = lines.take(k)
                if len(start) != k:
                    raise ValueError(f"{lines.read} sentences but {n} scores")
                bucket = buckets.of(b["sigma"])
                order = np.argsort(bucket, kind="stable")
                for a in range(0, k, chunk_lines):
                    sel = order[a:a + chunk_lines]
                    e = np.empty(len(sel), dtype=_RUN_ENTRY)
                    for name in ("sigma", "h_tgt", "h_gen"):
                        e[name] = b[name][sel]
                    e["index"], e["start"], e["stop"], e["file"] = lo + sel, start[sel], stop[sel], file_of[sel]
                    runs.write(e.tobytes())
                counts.append(np.bincount(bucket, minlength=buckets.n_buckets))
                sizes.append(k)
                del bucket, order, file_of, start, stop
        rest = lines.count_rest()
        if rest:
            raise ValueError(f"{lines.read + rest} sentences but {n} scores")
        counts = np.array(counts, dtype=np.int64).reshape(len(sizes), buckets.n_buckets)
        # first[r, j]: the entry of run r where its bucket j starts, counted in the whole file
        first = np.cumsum(counts, axis=1) - counts + (np.cumsum(sizes) - sizes)[:, None]
        width = _RUN_ENTRY.itemsize
        sources = [open(p, "rb", buffering=0) for p in paths]
        try:
            fds = [src.fileno() for src in sources]
            with open(runs_path, "rb", buffering=0) as runs, open(path, "w", encoding="utf-8") as out:
                fd = runs.fileno()

                def read(at, m):
                    return np.frombuffer(os.pread(fd, m * width, at * width), dtype=_RUN_ENTRY)

                for j in range(buckets.n_buckets):
                    if j % 2 == 1:                       # tied: corpus order, run after run
                        for r in np.flatnonzero(counts[:, j]).tolist():
                            for a in range(0, int(counts[r, j]), chunk_lines):
                                _write_rows(out, read(int(first[r, j]) + a, min(chunk_lines, int(counts[r, j]) - a)), fds)
                    elif counts[:, j].any():
                        held = np.concatenate([read(int(first[r, j]), int(counts[r, j]))
                                               for r in np.flatnonzero(counts[:, j]).tolist()])
                        held = held[np.argsort(held["sigma"], kind="stable")]
                        for a in range(0, len(held), chunk_lines):
                            _write_rows(out, held[a:a + chunk_lines], fds)
                        del held
        finally:
            for src in sources:
                src.close()
    finally:
        Path(runs_path).unlink(missing_ok=True)


def _savez_by_ranges(path, arrays) -> None:
    """np.savez(path, **arrays)'s bytes (its zip64 members, in order; the members' times are the
    time of writing, as np.savez's) from ``arrays``: name -> (dtype, n, a function giving the
    array's pieces in order), each member written a piece at a time."""
    import zipfile

    with zipfile.ZipFile(path, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, (dtype, n, pieces) in arrays.items():
            with zf.open(name + ".npy", "w", force_zip64=True) as fid:
                write_npy_header(fid, dtype, (n,))
                written = 0
                for a in pieces():
                    a = np.ascontiguousarray(a, dtype=dtype)
                    fid.write(a.tobytes())
                    written += len(a)
                if written != n:
                    raise ValueError(f"{path}: {name} holds {written} entries, expected {n}")


def join_scores(out_dir, texts, parts, folds_path, folds_of, vocab_path) -> dict:
    """The score stage's files from its tasks' parts: ``scores.npz`` (h_tgt, h_gen, sigma =
    h_tgt - h_gen, n_words and, matched, n_oov), ``oov.json`` (matched) and ``ranked.tsv``
    (:func:`write_ranked_file`), the same bytes as :func:`moore_lewis_file` and
    :func:`write_ranked_file` over one file of all the sentences give.

    ``parts``: per range (lo, hi), the in-domain LM's part and the general LMs' parts (paths
    of :func:`score_part`), ``folds_of[j]`` the fold the general part j scored. Returns the
    number of sentences.

    A range at a time: scores.npz's arrays are written range by range (_savez_by_ranges), the
    ranking by runs (:func:`write_ranked_runs`); the one array of the corpus' size held is its
    sorted sigma, while the ranking's buckets are cut (8 bytes a sentence).
    """
    from pivot.pipeline.bundle import read_npy_header

    out_dir = Path(out_dir)
    with open(folds_path, "rb") as fh:
        n = read_npy_header(fh)[0][0]

    def ranges(*names):
        def blocks():
            for part in parts:
                yield part[0][0], _range_scores(part, folds_path, folds_of, names)
        return blocks

    def pieces(name):
        return lambda: (b[name] for _, b in ranges(name)())

    names = ["h_tgt", "h_gen", "sigma", "n_words"] + (["n_oov"] if vocab_path else [])
    if vocab_path:
        n_words = n_oov = 0
        for _, b in ranges("n_words", "n_oov")():
            n_words, n_oov = n_words + int(b["n_words"].sum()), n_oov + int(b["n_oov"].sum())
        # np.int64 operands, as the sums of the arrays were: the same division
        (out_dir / "oov.json").write_text(json.dumps({
            "bitext_tokens": n_words, "bitext_oov_tokens": n_oov,
            "bitext_oov_rate": round(float(np.int64(n_oov) / max(np.int64(n_words), 1)), 6)}, indent=1))
    _savez_by_ranges(out_dir / "scores.npz", {name: (np.int64 if name in ("n_words", "n_oov") else np.float64, n,
                                                     pieces(name)) for name in names})
    write_ranked_runs(out_dir / "ranked.tsv", ranges("sigma", "h_tgt", "h_gen"), n, [path for path, _ in texts],
                      out_dir / "ranked.runs", step=BUCKET_STEP)
    return n


def score_stage(out_dir, texts, folds_path, lm_tgt, lm_gen, vocab_path, engine) -> None:
    """Write the score stage into ``out_dir``: sigma = H_tgt - H_gen of every sentence of
    ``texts`` ((path, n_lines) of each language's English side, in order), H_gen from
    ``lm_gen[fold]`` (fold -> LM path; the folds of lmtext's ``folds_path``).

    Tasks (``engine``): per range of :data:`TASK_SENTENCES` sentences, one for the in-domain
    LM and one per general LM (each loads its model once, and they run side by side), then
    one task joins them (:func:`join_scores`). The parts live in ``out_dir/parts`` until then.
    """
    out_dir = Path(out_dir)
    texts = [(str(p), int(k)) for p, k in texts]
    n = sum(k for _, k in texts)
    (out_dir / "parts").mkdir(exist_ok=True)
    fold_ids = sorted(lm_gen)
    ranges = [(lo, min(lo + TASK_SENTENCES, n)) for lo in range(0, n, TASK_SENTENCES)]
    tasks, parts = [], []
    for r, (lo, hi) in enumerate(ranges):
        tgt = out_dir / "parts" / f"{r:04d}-in_domain.npz"
        gen = [out_dir / "parts" / f"{r:04d}-fold{k}.npz" for k in fold_ids]
        tasks.append((texts, lo, hi, str(lm_tgt), None, str(folds_path), vocab_path, str(tgt)))
        tasks += [(texts, lo, hi, str(lm_gen[k]), k, str(folds_path), vocab_path, str(path))
                  for k, path in zip(fold_ids, gen)]
        parts.append(((lo, hi), str(tgt), [str(p) for p in gen]))
    engine.map(score_part, tasks, name="score")
    engine.map(join_scores, [(str(out_dir), texts, parts, str(folds_path), fold_ids, vocab_path)], name="score-join")
    shutil.rmtree(out_dir / "parts")


def stage_params(recipe) -> dict:
    return {}  # the LMs and the English side are its inputs; it has no setting of its own


def run_stage(context) -> None:
    """sigma = H_tgt - H_gen (bits per word, </s> counted) for every English sentence; H_gen from
    the general LM that did not see the sentence (pivot.pipeline.lmtext)."""
    from pivot.pipeline.corpus import english_texts
    from pivot.pipeline.lm import model_path
    from pivot.pipeline.lmtext import lm_names

    text_dir, lm_dir = context.dir("lmtext"), context.dir("lm")
    general = ({0: model_path(lm_dir, "general")} if "general" in lm_names(text_dir)
               else {k: model_path(lm_dir, f"general.{1 - k}") for k in (0, 1)})
    vocab_path = text_dir / "vocab.txt"
    score_stage(context.tmp, english_texts(context.dir("corpus").values()), text_dir / "folds.npy",
                model_path(lm_dir, "in_domain"), general, str(vocab_path) if vocab_path.is_file() else None,
                context.engine)


def read_scores(score_dir) -> MooreLewisScores:
    z = np.load(Path(score_dir) / "scores.npz")
    return MooreLewisScores(h_tgt=z["h_tgt"], h_gen=z["h_gen"], sigma=z["sigma"], n_words=z["n_words"])


def score_blocks(score_dir, names, block: int):
    """``(lo, {name: array})`` for the sentences lo, lo + 1, ... of scores.npz, ``block`` at a
    time: the arrays ``names`` read side by side from the archive's members (np.savez stores
    them uncompressed, so each is read through in order), never a whole array at once."""
    import zipfile

    from pivot.pipeline.bundle import read_npy_header

    with zipfile.ZipFile(Path(score_dir) / "scores.npz") as zf:
        members, sizes = [], set()
        for name in names:
            fh = zf.open(name + ".npy")
            shape, fortran, dtype = read_npy_header(fh)
            if fortran or len(shape) != 1:
                raise ValueError(f"{score_dir}/scores.npz: {name} is not a 1-d array")
            members.append((name, fh, dtype))
            sizes.add(shape[0])
        if len(sizes) != 1:
            raise ValueError(f"{score_dir}/scores.npz: arrays {list(names)} differ in length")
        n = sizes.pop()
        for lo in range(0, n, block):
            k = min(block, n - lo)
            out = {}
            for name, fh, dtype in members:
                data = fh.read(k * dtype.itemsize)
                if len(data) != k * dtype.itemsize:
                    raise ValueError(f"{score_dir}/scores.npz: {name} ends before sentence {lo + k}")
                out[name] = np.frombuffer(data, dtype=dtype)
            yield lo, out


STAGE = Stage("score", 4, ("lm", "lmtext", "corpus"), (), stage_params, ("scores.npz", "ranked.tsv", "oov.json"),
              run_stage, "one per LM and range of 1M sentences, then one join (Dask)",
              "Moore-Lewis sigma = H_tgt - H_gen per English sentence", when=lambda recipe: recipe.get("domain"))
