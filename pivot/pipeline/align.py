"""Alignment stage: eflomal in both directions, then grow-diag-final-and.

Convention everywhere in pivot: Pharaoh ``i-j`` links, 0-based, i = ENGLISH position,
j = FOREIGN position. A bitext's links are ragged arrays ``(link_e, link_f,
link_offsets)``: the links of sentence s are ``link_e[a:b], link_f[a:b]`` with
``a, b = link_offsets[s], link_offsets[s + 1]``, sorted by (i, j), no duplicates.

:func:`align_corpus` is the out-of-core form of the stage: it reads a saved corpus folder
line by line and writes the links in chunks of sentences (``links-00000.npz``, ...,
``links.json``); with the default aligner its memory is one chunk plus the model's tables.

eflomal is run as a separate program (its ``eflomal-align`` command line), never
imported: eflomal is GPL-3.0 and pivot is MIT, and exchanging files with a separate
program keeps the two works separate.
"""
from __future__ import annotations

import heapq
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from pivot.atomic import atomic_path, save_npz, write_text
from pivot.errors import InputError

# The 8 neighbours of a link, in the order the textbook pseudo-code lists them (the 4 sides
# first, then the 4 diagonals). The order decides which of two competing links is added
# first, so it is part of the algorithm's definition here.
NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))

# ASCII digits only (\d also takes other scripts' digits), at most 9 of them: no int64 overflow.
_PHARAOH_LINE = re.compile(r"(?:[0-9]{1,9}-[0-9]{1,9}(?: [0-9]{1,9}-[0-9]{1,9})*)?")


# ----------------------------------------------------------------------------- eflomal

def find_eflomal():
    """Path of ``eflomal-align``: beside the running Python (a virtualenv's bin), else on PATH."""
    beside = Path(sys.executable).parent / "eflomal-align"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("eflomal-align")
    if found is None:
        raise FileNotFoundError(
            "the eflomal-align program was found neither beside the Python interpreter "
            f"({beside.parent}) nor on PATH; install it with `pip install eflomal` "
            "or use precomputed alignments (align method 'pharaoh')")
    return found


def _write_lines(path, lines):
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        for s in lines:
            fh.write(s + "\n")


def _read_lines(path):
    """Lines of a UTF-8 file, split on ``\\n`` only (see pivot.pipeline.corpus), line ends removed."""
    with open(path, "rb") as fh:
        data = fh.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError("not UTF-8", path=path, line=line) from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [s[:-1] if s.endswith("\r") else s for s in lines]


def run_eflomal(en_lines, f_lines, workdir, quiet=True, model=3, length=1.0):
    """Align with eflomal, English as source: returns (forward, reverse) Pharaoh lines.

    Both outputs use the English-foreign ``i-j`` convention (eflomal writes source-target
    in both files). Forward is the English->foreign model (each foreign word linked to at
    most one English word), reverse the foreign->English one.

    ``model=3`` (IBM1 + HMM + fertility, eflomal's default and best). eflomal has no seed
    option: its samplers seed from /dev/urandom, so two runs on the same text differ
    (measured on 2,000 medline pairs with length=0.2: 86% of the links of one run are in
    the other). Reproducibility therefore comes from caching the alignment (the caller's
    job), not from rerunning.

    ``length`` scales eflomal's sampling iterations (its ``--length``). eflomal picks
    n = max(2, round(length * 5000 / sqrt(n_sentences))) fertility iterations and about
    n / 4 IBM1 and HMM ones (its binary ran with -1 2 -2 2 -3 11 on 204k pairs): 11 for
    200k pairs but 158 for 1,000, so a small corpus costs more per sentence than a large
    one. The input and output files stay in ``workdir`` (``en.txt``, ``f.txt``,
    ``fwd.align``, ``rev.align``).
    """
    if len(en_lines) != len(f_lines):
        raise ValueError(f"{len(en_lines)} English and {len(f_lines)} foreign sentences")
    for side, lines in (("English", en_lines), ("foreign", f_lines)):
        for k, s in enumerate(lines):
            if not s.strip() or "\n" in s:
                raise ValueError(f"{side} sentence {k + 1} is empty or holds a line break: {s!r}")
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    en_path, f_path = workdir / "en.txt", workdir / "f.txt"
    fwd_path, rev_path = workdir / "fwd.align", workdir / "rev.align"
    _write_lines(en_path, en_lines)
    _write_lines(f_path, f_lines)
    cmd = [find_eflomal(), "-s", str(en_path), "-t", str(f_path),
           "-f", str(fwd_path), "-r", str(rev_path), "-m", str(model), "--length", str(length),
           "--overwrite"]
    if not quiet:
        cmd.append("-v")
    proc = subprocess.run(cmd, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE if quiet else None, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"eflomal-align failed (exit {proc.returncode}): {' '.join(cmd)}\n"
                           f"{proc.stderr or ''}{proc.stdout or ''}")
    forward, reverse = _read_lines(fwd_path), _read_lines(rev_path)
    for path, lines in ((fwd_path, forward), (rev_path, reverse)):
        if len(lines) != len(en_lines):
            raise RuntimeError(f"eflomal-align wrote {len(lines)} lines to {path}, "
                               f"expected {len(en_lines)}")
    return forward, reverse


# ----------------------------------------------------------------------------- symmetrisation

def grow_diag_final_and(forward, reverse, len_e, len_f):
    """Symmetrise one sentence's two directional alignments (the grow-diag-final-and heuristic of phrase-based MT, as Moses' symal).

    ``forward`` and ``reverse`` are iterables of (i, j) links, i English, j foreign.
    Returns the sorted list of (i, j) links. ``len_e`` and ``len_f`` bound the matrix;
    links outside it raise ValueError. Exactly this procedure (it is pinned by a test,
    because public implementations differ in their scan order):

    1. A = forward ∩ reverse.  U = forward ∪ reverse.
    2. GROW-DIAG. Repeat passes until a pass adds nothing. One pass scans the matrix in
       row-major order, i = 0..len_e-1 outer, j = 0..len_f-1 inner; at each (i, j) that is
       in A *at the moment the scan reaches it*, for each neighbour (i+di, j+dj) in the
       order of NEIGHBOURS [(-1,0), (0,-1), (1,0), (0,1), (-1,-1), (-1,1), (1,-1), (1,1)]:
       add it to A if it is in U, not in A, and its English word i+di OR its foreign word
       j+dj is unaligned in A. A link added ahead of the scan position is therefore grown
       from in the same pass; one added behind it waits for the next pass.
    3. FINAL-AND(forward), then FINAL-AND(reverse): for each link (i, j) of that direction
       in (i, j) order, add it if BOTH English word i and foreign word j are unaligned.

    Moses ``symal`` and several other versions scan differently (a set ordered by foreign
    position, or the union rather than each direction in FINAL), so they can disagree on
    a few percent of sentences; this is the textbook procedure above.

    >>> grow_diag_final_and([(0, 0), (1, 1)], [(0, 0), (1, 0)], 2, 2)
    [(0, 0), (1, 0), (1, 1)]
    """
    forward = set(forward)
    reverse = set(reverse)
    for i, j in forward | reverse:
        if not (0 <= i < len_e and 0 <= j < len_f):
            raise ValueError(f"link {i}-{j} outside a {len_e}x{len_f} sentence")
    return _gdfa(forward, reverse)


def _gdfa(forward, reverse):
    """grow-diag-final-and on two sets of (i, j); see grow_diag_final_and for the procedure."""
    alignment = forward & reverse
    candidates = (forward | reverse) - alignment    # U \ A: the only links grow can add
    aligned_e = {i for i, _ in alignment}
    aligned_f = {j for _, j in alignment}
    if candidates:
        # Only links next to a candidate can grow anything; the others are skipped in the
        # scan, which visits the same links in the same order as the full matrix scan.
        hot = {(i + di, j + dj) for i, j in candidates for di, dj in NEIGHBOURS}
        added = True
        while added and candidates:
            added = False
            # A heap over the links still to visit in this pass replaces the row-major
            # matrix scan: pop the smallest (i, j); push a new link only if it lies ahead.
            heap = sorted(p for p in alignment if p in hot)
            while heap:
                here = heapq.heappop(heap)
                i, j = here
                for di, dj in NEIGHBOURS:
                    point = (i + di, j + dj)
                    if point in candidates and (point[0] not in aligned_e
                                                or point[1] not in aligned_f):
                        candidates.discard(point)
                        alignment.add(point)
                        aligned_e.add(point[0])
                        aligned_f.add(point[1])
                        added = True
                        if point > here and point in hot:
                            heapq.heappush(heap, point)
    for direction in (forward, reverse):
        for i, j in sorted(direction):
            if i not in aligned_e and j not in aligned_f:
                alignment.add((i, j))
                aligned_e.add(i)
                aligned_f.add(j)
    return sorted(alignment)


def symmetrize(forward_lines, reverse_lines, e_lengths, f_lengths,
               forward_path="<forward>", reverse_path="<reverse>"):
    """grow-diag-final-and over a whole bitext: (link_e int32, link_f int32, link_offsets int64).

    ``forward_lines`` and ``reverse_lines`` are Pharaoh lines (English-foreign ``i-j``),
    one per sentence pair, validated by :func:`parse_pharaoh` against the sentence
    lengths (errors name ``forward_path`` / ``reverse_path``). Sentences whose two
    directions agree need no symmetrisation and are copied.
    """
    fe, ff, fo = parse_pharaoh(forward_lines, e_lengths, f_lengths, path=forward_path)
    re_, rf, ro = parse_pharaoh(reverse_lines, e_lengths, f_lengths, path=reverse_path)
    fe_l, ff_l, fo_l = fe.tolist(), ff.tolist(), fo.tolist()
    re_l, rf_l, ro_l = re_.tolist(), rf.tolist(), ro.tolist()
    out_e, out_f, offsets = [], [], [0]
    for s in range(len(fo_l) - 1):
        a, b = fo_l[s], fo_l[s + 1]
        c, d = ro_l[s], ro_l[s + 1]
        fwd = list(zip(fe_l[a:b], ff_l[a:b]))
        rev = list(zip(re_l[c:d], rf_l[c:d]))
        if fwd == rev:            # both already sorted and unique: A = U, nothing to grow
            links = fwd
        else:
            links = _gdfa(set(fwd), set(rev))
        for i, j in links:
            out_e.append(i)
            out_f.append(j)
        offsets.append(len(out_e))
    return (np.asarray(out_e, dtype=np.int32), np.asarray(out_f, dtype=np.int32),
            np.asarray(offsets, dtype=np.int64))


# ----------------------------------------------------------------------------- Pharaoh IO

def parse_pharaoh(lines, e_lengths, f_lengths, path="<alignment>"):
    """Parse Pharaoh ``i-j`` lines into ragged arrays (link_e, link_f, link_offsets).

    Line k belongs to sentence pair k, whose lengths are ``e_lengths[k]`` (English) and
    ``f_lengths[k]`` (foreign). Links are sorted by (i, j) and repeated links dropped.
    Raises InputError (``path``, 1-based line) for a wrong number of lines, a token that
    is not ``<int>-<int>`` or a link outside the sentence.
    """
    lines = list(lines)
    e_lengths = np.asarray(e_lengths, dtype=np.int64)
    f_lengths = np.asarray(f_lengths, dtype=np.int64)
    if not (len(lines) == len(e_lengths) == len(f_lengths)):
        raise InputError(f"{len(lines)} alignment lines for {len(e_lengths)} sentence pairs",
                         path=path)
    counts = np.empty(len(lines), dtype=np.int64)
    clean = []
    for k, line in enumerate(lines):
        line = " ".join(line.split())
        if not _PHARAOH_LINE.fullmatch(line):
            bad = next(t for t in line.split() if not re.fullmatch(r"[0-9]{1,9}-[0-9]{1,9}", t))
            raise InputError(f"malformed link {bad!r} (expected i-j with 0-based integers below 10^9)",
                             path=path, line=k + 1)
        clean.append(line)
        counts[k] = line.count("-")
    numbers = np.array(" ".join(clean).replace("-", " ").split(), dtype=np.int64)
    link_e, link_f = numbers[0::2], numbers[1::2]
    offsets = np.zeros(len(lines) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    sent = np.repeat(np.arange(len(lines)), counts)
    bad = np.flatnonzero((link_e >= e_lengths[sent]) | (link_f >= f_lengths[sent]))
    if len(bad):
        x = bad[0]
        s = int(sent[x])
        raise InputError(
            f"link {link_e[x]}-{link_f[x]} is outside the sentence pair "
            f"({e_lengths[s]} English, {f_lengths[s]} foreign tokens)", path=path, line=s + 1)
    # Sort by (sentence, i, j) and drop repeats; a stable lexsort keeps it deterministic.
    order = np.lexsort((link_f, link_e, sent))
    sent, link_e, link_f = sent[order], link_e[order], link_f[order]
    keep = np.ones(len(sent), dtype=bool)
    keep[1:] = (np.diff(sent) != 0) | (np.diff(link_e) != 0) | (np.diff(link_f) != 0)
    sent, link_e, link_f = sent[keep], link_e[keep], link_f[keep]
    offsets = np.zeros(len(lines) + 1, dtype=np.int64)
    np.cumsum(np.bincount(sent, minlength=len(lines)), out=offsets[1:])
    return link_e.astype(np.int32), link_f.astype(np.int32), offsets


def format_pharaoh(link_e, link_f, link_offsets):
    """Pharaoh lines (without line ends) of ragged link arrays."""
    e, f = np.asarray(link_e).tolist(), np.asarray(link_f).tolist()
    o = np.asarray(link_offsets).tolist()
    return [" ".join(f"{e[x]}-{f[x]}" for x in range(o[s], o[s + 1])) for s in range(len(o) - 1)]


def write_pharaoh(path, link_e, link_f, link_offsets):
    """Write ragged links as Pharaoh lines, one per sentence pair (written whole, then renamed)."""
    with atomic_path(path) as tmp:
        _write_lines(tmp, format_pharaoh(link_e, link_f, link_offsets))


def read_pharaoh(path, e_lengths, f_lengths):
    """Read and validate a Pharaoh file (see :func:`parse_pharaoh`)."""
    path = Path(path)
    if not path.is_file():
        raise InputError("alignment file not found", path=path)
    return parse_pharaoh(_read_lines(path), e_lengths, f_lengths, path=path)


# ----------------------------------------------------------------------------- stage entry

def align_ibm2(bitext, n_threads=1):
    """The project's own aligner: IBM Model 2 with a diagonal prior, trained by EM both ways.

    EM has no random step and its expected counts are summed in fixed point, so the links
    are the same bytes for any thread count, run and machine (see ``pivot.pipeline.ibm``).
    """
    from pivot.pipeline import ibm
    from pivot.pipeline.corpus import Vocab

    e_vocab, f_vocab = Vocab(), Vocab()
    e_tokens, e_offsets = e_vocab.encode(bitext.en)
    f_tokens, f_offsets = f_vocab.encode(bitext.f)
    return ibm.align_both(e_tokens, e_offsets, f_tokens, f_offsets, len(e_vocab), len(f_vocab),
                          n_threads=n_threads)


def align_bitext(bitext, workdir, method="ibm2", pharaoh_path=None, quiet=True, model=3, length=1.0,
                 n_threads=1):
    """Word-align a :class:`pivot.pipeline.corpus.Bitext`: ragged (link_e, link_f, link_offsets).

    ``method="ibm2"`` (the default): the project's deterministic aligner (:func:`align_ibm2`).
    ``method="eflomal"``: run eflomal both ways (its sampler seeds itself from the operating
    system: two runs give different links) in ``workdir`` and symmetrise with
    grow-diag-final-and. ``method="pharaoh"``: read precomputed, already symmetrised
    links from ``pharaoh_path``, line-aligned with the bitext as saved (``bitext.en``),
    and validate them against the sentence lengths. Nothing is cached here.
    """
    e_lengths, f_lengths = bitext.lengths()
    if method == "ibm2":
        return align_ibm2(bitext, n_threads=n_threads)
    if method == "eflomal":
        forward, reverse = run_eflomal(bitext.en, bitext.f, workdir, quiet=quiet, model=model,
                                       length=length)
        return symmetrize(forward, reverse, e_lengths, f_lengths,
                          Path(workdir) / "fwd.align", Path(workdir) / "rev.align")
    if method == "pharaoh":
        if pharaoh_path is None:
            raise InputError("align method 'pharaoh' needs a path to the alignment file")
        return read_pharaoh(pharaoh_path, e_lengths, f_lengths)
    raise InputError(f"unknown align method {method!r} (ibm2, eflomal or pharaoh)")


# ----------------------------------------------------------------------------- chunked stage

LINKS_MANIFEST = "links.json"


def links_chunk_name(k):
    """File name of chunk ``k`` of :func:`align_corpus`'s output."""
    return f"links-{k:05d}.npz"


def _corpus_meta(corpus_dir):
    """(lang, n_pairs, English path, foreign path) of a folder written by Bitext.save."""
    d = Path(corpus_dir)
    meta_path = d / "meta.json"
    if not meta_path.is_file():
        raise InputError("no meta.json: not a saved bitext directory", path=d)
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    try:
        lang, n_pairs = str(meta["lang"]), int(meta["n_pairs"])
    except (KeyError, TypeError, ValueError):
        raise InputError("meta.json lacks lang or n_pairs", path=meta_path) from None
    return lang, n_pairs, d / "bitext.en", d / f"bitext.{lang}"


def iter_corpus_chunks(corpus_dir, chunk_sentences):
    """Yield lists (english lines, foreign lines) of up to ``chunk_sentences`` pairs, in order.

    Reads the two files of a saved corpus folder line by line (the lines as
    :meth:`pivot.pipeline.corpus.Bitext.load` reads them), never holding more than one chunk;
    InputError when a file has a different number of lines than meta.json's n_pairs.
    """
    from pivot.text import _iter_lines, _open_binary

    chunk_sentences = int(chunk_sentences)
    if chunk_sentences < 1:
        raise ValueError(f"chunk_sentences must be >= 1, got {chunk_sentences}")
    _, n_pairs, en_path, f_path = _corpus_meta(corpus_dir)
    with _open_binary(en_path) as fe, _open_binary(f_path) as ff:
        lines_e, lines_f = _iter_lines(fe, en_path), _iter_lines(ff, f_path)
        done = 0
        while True:
            en, f = [], []
            ended = False
            while len(en) < chunk_sentences:
                e_item, f_item = next(lines_e, None), next(lines_f, None)
                if e_item is None or f_item is None:
                    if e_item is not None or f_item is not None:
                        n_e = done + len(en) + (e_item is not None) + sum(1 for _ in lines_e)
                        n_f = done + len(en) + (f_item is not None) + sum(1 for _ in lines_f)
                        raise InputError(f"{en_path.name} has {n_e} lines but {f_path.name} "
                                         f"{n_f}: the sides must be line-aligned", path=en_path)
                    ended = True
                    break
                en.append(e_item[1])
                f.append(f_item[1])
            done += len(en)
            if done > n_pairs or (ended and done != n_pairs):
                raise InputError(f"{'at least ' if done > n_pairs else ''}{done} lines but "
                                 f"meta.json says n_pairs={n_pairs}", path=en_path)
            if en:
                yield en, f
            if ended:
                return


def _encode_corpus(corpus_dir, chunk_sentences, scratch):
    """Encode a corpus folder into ``scratch/enc-<k>.npz`` chunks: (n_pairs, n_chunks, n_e, n_f).

    Ids are given in order of first occurrence over the whole corpus (one
    :class:`pivot.pipeline.corpus.Vocab` per side, grown chunk by chunk), hence the very ids
    :func:`align_ibm2` gives; each file holds one chunk's int32 tokens and chunk-local int64
    offsets of both sides. Only the vocabularies outlive a chunk.
    """
    from pivot.pipeline.corpus import Vocab

    e_vocab, f_vocab = Vocab(), Vocab()
    n_pairs = n_chunks = 0
    for en, f in iter_corpus_chunks(corpus_dir, chunk_sentences):
        e_tokens, e_offsets = e_vocab.encode(en)
        f_tokens, f_offsets = f_vocab.encode(f)
        n_pairs += len(en)
        del en, f
        save_npz(Path(scratch) / f"enc-{n_chunks:05d}.npz", e_tokens=e_tokens,
                    e_offsets=e_offsets, f_tokens=f_tokens, f_offsets=f_offsets)
        n_chunks += 1
    return n_pairs, n_chunks, len(e_vocab), len(f_vocab)


def _split_links(link_e, link_f, link_offsets, n_pairs, chunk_sentences):
    """Yield (k, link_e, link_f, chunk-local link_offsets) of whole-corpus ragged links."""
    link_offsets = np.asarray(link_offsets, dtype=np.int64)
    for k, a in enumerate(range(0, n_pairs, chunk_sentences)):
        b = min(a + chunk_sentences, n_pairs)
        lo, hi = int(link_offsets[a]), int(link_offsets[b])
        yield (k, np.asarray(link_e[lo:hi], dtype=np.int32),
               np.asarray(link_f[lo:hi], dtype=np.int32), link_offsets[a:b + 1] - lo)


def align_corpus(corpus_dir, out_dir, *, method="ibm2", chunk_sentences=50000, n_threads=1,
                 pharaoh_path=None, quiet=True, model=3, length=1.0, scratch_dir=None,
                 index_cache=True):
    """Word-align a saved corpus folder chunk by chunk; write the links in chunks of sentences.

    ``corpus_dir`` is a folder written by :meth:`pivot.pipeline.corpus.Bitext.save`
    (``bitext.en``, ``bitext.<lang>``, ``meta.json`` with "lang" and "n_pairs"). Writes to
    ``out_dir``:

    * ``links-00000.npz``, ``links-00001.npz``, ...: chunk k covers sentence pairs
      [k * chunk_sentences, min((k + 1) * chunk_sentences, n_pairs)) and holds int32
      ``link_e``, int32 ``link_f`` (0-based positions in the sentence, English first) and
      int64 ``link_offsets`` (chunk-local: from 0, one more than the chunk's sentences);
    * ``links.json``: {"n_pairs", "chunk_sentences", "n_chunks"}, written last (a folder
      without it is unfinished; an earlier one is removed first).

    Each file is written under a temporary name and renamed (``os.replace``); chunk files
    left over from an earlier run with more chunks are removed. Returns the links.json dict.

    ``method="ibm2"`` (default): the corpus is read line by line and encoded once into
    chunked int32 arrays in a scratch folder, then both EM trainings stream those chunks in
    every iteration (:func:`pivot.pipeline.ibm.align_both_chunked`); memory is one chunk plus
    the model's tables. The links are the same bytes as :func:`align_bitext`'s (``ibm2``) on
    the same corpus, for any ``chunk_sentences`` and ``n_threads``. ``index_cache`` keeps the
    E-step's table indices on the scratch disk between EM iterations (faster, same links).
    ``method="eflomal"`` or ``"pharaoh"``: the corpus is loaded whole and aligned as by
    :func:`align_bitext`; only the output is chunked.

    ``scratch_dir``: where the temporary folder goes (default ``out_dir``); it is removed
    at the end, also on error.
    """
    chunk_sentences = int(chunk_sentences)
    if chunk_sentences < 1:
        raise ValueError(f"chunk_sentences must be >= 1, got {chunk_sentences}")
    if method not in ("ibm2", "eflomal", "pharaoh"):
        raise InputError(f"unknown align method {method!r} (ibm2, eflomal or pharaoh)")
    _, n_pairs_meta, _, _ = _corpus_meta(corpus_dir)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    manifest = out / LINKS_MANIFEST
    if manifest.exists():
        manifest.unlink()
    scratch_parent = Path(scratch_dir) if scratch_dir is not None else out
    scratch_parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".align-scratch-", dir=scratch_parent))
    written = []

    def write(k, link_e, link_f, link_offsets):
        if k != len(written):
            raise RuntimeError(f"chunk {k} written out of order")
        save_npz(out / links_chunk_name(k), link_e=np.asarray(link_e, dtype=np.int32),
                    link_f=np.asarray(link_f, dtype=np.int32),
                    link_offsets=np.asarray(link_offsets, dtype=np.int64))
        written.append(len(link_offsets) - 1)

    try:
        if method == "ibm2":
            from pivot.pipeline import ibm

            n_pairs, n_chunks, n_e, n_f = _encode_corpus(corpus_dir, chunk_sentences, scratch)

            def load_chunk(k):
                with np.load(scratch / f"enc-{k:05d}.npz", allow_pickle=False) as z:
                    return z["e_tokens"], z["e_offsets"], z["f_tokens"], z["f_offsets"]

            ibm.align_both_chunked(load_chunk, n_chunks, n_e, n_f, write, scratch,
                                   n_threads=n_threads, index_cache=index_cache, quiet=quiet)
        else:
            from pivot.pipeline.corpus import Bitext

            bitext = Bitext.load(corpus_dir)
            n_pairs = len(bitext)
            links = align_bitext(bitext, scratch / "work", method=method,
                                 pharaoh_path=pharaoh_path, quiet=quiet, model=model,
                                 length=length, n_threads=n_threads)
            del bitext
            for k, *chunk in _split_links(*links, n_pairs, chunk_sentences):
                write(k, *chunk)
            n_chunks = len(written)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    expected = [min(chunk_sentences, n_pairs - a) for a in range(0, n_pairs, chunk_sentences)]
    if n_pairs != n_pairs_meta or written != expected:
        raise RuntimeError(f"wrote chunks of {written} sentences for {n_pairs} pairs "
                           f"(meta.json: {n_pairs_meta})")
    for stale in out.glob("links-*.npz"):
        suffix = stale.name[len("links-"):-len(".npz")]
        if suffix.isdigit() and int(suffix) >= n_chunks:
            stale.unlink()
    info = {"n_pairs": n_pairs, "chunk_sentences": chunk_sentences, "n_chunks": n_chunks}
    write_text(manifest, json.dumps(info, indent=2) + "\n")
    return info


def read_links(out_dir):
    """All links of an :func:`align_corpus` folder as whole-corpus ragged arrays (for tests and
    small corpora: it holds everything in memory)."""
    out = Path(out_dir)
    info = json.loads((out / LINKS_MANIFEST).read_text(encoding="utf-8"))
    es, fs, offs, base = [], [], [np.zeros(1, dtype=np.int64)], 0
    for k in range(info["n_chunks"]):
        with np.load(out / links_chunk_name(k), allow_pickle=False) as z:
            es.append(z["link_e"])
            fs.append(z["link_f"])
            offs.append(z["link_offsets"][1:] + base)
            base += int(z["link_offsets"][-1])
    return (np.concatenate(es) if es else np.zeros(0, np.int32),
            np.concatenate(fs) if fs else np.zeros(0, np.int32), np.concatenate(offs))
