"""Word-alignment links: the Pharaoh format and grow-diag-final-and, in Python.

Convention everywhere in pivot: Pharaoh ``i-j`` links, 0-based, i = ENGLISH position,
j = FOREIGN position. A bitext's links are ragged arrays ``(link_e, link_f,
link_offsets)``: the links of sentence s are ``link_e[a:b], link_f[a:b]`` with
``a, b = link_offsets[s], link_offsets[s + 1]``, sorted by (i, j), no duplicates.

The align stage (pivot.pipeline.align) reads and writes links with these functions and
symmetrises eflomal's two directions with :func:`symmetrize`; the project's own aligner
(pivot.pipeline.ibm) runs the same grow-diag-final-and natively and checks itself against
this one. A leaf module: it imports nothing of pivot's but the errors and the atomic writer.
"""
from __future__ import annotations

import heapq
import re
from pathlib import Path

import numpy as np

from pivot.atomic import atomic_path
from pivot.errors import InputError

# The 8 neighbours of a link, in the order the textbook pseudo-code lists them (the 4 sides
# first, then the 4 diagonals). The order decides which of two competing links is added
# first, so it is part of the algorithm's definition here.
NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))

# ASCII digits only (\d also takes other scripts' digits), at most 9 of them: no int64 overflow.
_PHARAOH_LINE = re.compile(r"(?:[0-9]{1,9}-[0-9]{1,9}(?: [0-9]{1,9}-[0-9]{1,9})*)?")


def write_lines(path, lines):
    """Write each string of ``lines`` and a ``\\n`` (UTF-8, no translation of line ends)."""
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        for s in lines:
            fh.write(s + "\n")


def read_lines(path):
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
        write_lines(tmp, format_pharaoh(link_e, link_f, link_offsets))


def read_pharaoh(path, e_lengths, f_lengths):
    """Read and validate a Pharaoh file (see :func:`parse_pharaoh`)."""
    path = Path(path)
    if not path.is_file():
        raise InputError("alignment file not found", path=path)
    return parse_pharaoh(read_lines(path), e_lengths, f_lengths, path=path)
