"""Gold paraphrase pairs: readers, binarisation, and the tuning/test split.

Every reader returns a list of ``(e1, e2, score)`` tuples (score None where the file has none),
with the phrases as written in the file; normalise them with :func:`pivot.text.normalize`
before looking them up, as every other English text of the project is. Bad lines raise
:class:`pivot.errors.InputError` naming the file and line.

The split (paper: regression tuned on 1,000 labelled in-domain pairs disjoint from the test
pairs) is decided per pair by a hash of its normalised text, so it does not depend on file
order, on which other pairs are in the file, or on Python's per-process hash seed.
"""
from __future__ import annotations

import math

from pivot.errors import InputError
from pivot.hashes import unit_hash


def _lines(path):
    """(line_number, text) of the non-blank lines of a UTF-8 file; InputError on bad bytes."""
    from pivot.text import numbered_lines

    for number, line in numbered_lines(path):
        if line.strip():
            yield number, line


def _number(text):
    """float(text), or None if it is not a finite number."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def read_scored_pairs(path):
    """Pairs of ``w1<TAB>w2<TAB>score`` (SimLex-999, Bio-SimLex, Bio-SimVerb).

    Extra TAB fields after the third are ignored (the original SimLex-999 file has more). The
    first non-blank line is a header, and skipped, only if its score field is not a number
    (SimLex-999's ``word1 word2 POS SimLex999 ...``); any later non-numeric score is an error.
    """
    pairs = []
    first = True
    for number, line in _lines(path):
        fields = line.split("\t")
        if len(fields) < 3:
            raise InputError(f"expected w1<TAB>w2<TAB>score, found {len(fields)} field(s): "
                             f"{line[:60]!r}", path=path, line=number)
        w1, w2, score_text = fields[0].strip(), fields[1].strip(), fields[2].strip()
        score = _number(score_text)
        if score is None:
            if first:
                first = False
                continue
            raise InputError(f"score {score_text!r} is not a number", path=path, line=number)
        first = False
        if not w1 or not w2:
            raise InputError("empty word", path=path, line=number)
        pairs.append((w1, w2, score))
    return pairs


def read_ppdb_human(path):
    """Pairs of the PPDB 2.0 human ratings: ``mean<TAB>[LHS]<TAB>p1<TAB>p2<TAB>r1,r2,...``.

    Returns ``(p1, p2, mean)``; the LHS and the single ratings are not kept.
    """
    pairs = []
    for number, line in _lines(path):
        fields = line.split("\t")
        if len(fields) != 5:
            raise InputError(f"expected mean<TAB>[LHS]<TAB>p1<TAB>p2<TAB>ratings, found "
                             f"{len(fields)} field(s)", path=path, line=number)
        mean = _number(fields[0])
        if mean is None:
            raise InputError(f"mean {fields[0]!r} is not a number", path=path, line=number)
        p1, p2 = fields[2].strip(), fields[3].strip()
        if not p1 or not p2:
            raise InputError("empty phrase", path=path, line=number)
        pairs.append((p1, p2, mean))
    return pairs


def read_pairs(path):
    """Unscored pairs ``w1 w2`` (one space-separated pair a line, e.g. ppdb_synonyms.txt)."""
    pairs = []
    for number, line in _lines(path):
        fields = line.split()
        if len(fields) != 2:
            raise InputError(f"expected 'w1 w2', found {len(fields)} word(s): {line[:60]!r}",
                             path=path, line=number)
        pairs.append((fields[0], fields[1], None))
    return pairs


def binarize(pairs, threshold):
    """``(e1, e2, label)`` with label 1 if score >= threshold else 0; an unscored pair is 1.

    Unscored pairs come from synonym lists, where every listed pair is a positive.
    """
    return [(e1, e2, 1 if score is None or score >= threshold else 0) for e1, e2, score in pairs]


def pair_key(e1, e2):
    """The identity of a pair for splitting: lowercased, white space collapsed, unordered.

    (a, b) and (b, a) are one pair: a similarity judgement is symmetric, and tuning on one
    order while testing on the other would leak the label.
    """
    a, b = " ".join(e1.lower().split()), " ".join(e2.lower().split())
    return "\t".join(sorted((a, b)))


def tuning_test_split(pairs, n_tune=1000, seed=0):
    """Split ``pairs`` into (tune, test) by a hash of each pair's normalised text.

    A pair goes to the tuning part when unit_hash(pair_key, seed) < n_tune / n_distinct
    (:func:`pivot.hashes.unit_hash`), so the
    tuning part holds about ``n_tune`` pairs (binomial: +- sqrt(n_tune) or so) and a pair's side
    never depends on file order or on the other pairs' order. Repeated pairs (same key) land on
    the same side. Both parts keep the input order. ``n_tune >= len(pairs)`` puts all in tune.
    """
    keys = [pair_key(p[0], p[1]) for p in pairs]
    n_distinct = len(set(keys))
    if n_distinct == 0:
        return [], []
    fraction = min(1.0, n_tune / n_distinct)
    tune, test = [], []
    for pair, key in zip(pairs, keys):
        (tune if unit_hash(key, seed) < fraction else test).append(pair)
    assert_disjoint(tune, test)
    return tune, test


def assert_disjoint(tune, test):
    """Raise ValueError naming the pairs (by normalised text) that are in both parts."""
    overlap = sorted({pair_key(p[0], p[1]) for p in tune} & {pair_key(p[0], p[1]) for p in test})
    if overlap:
        shown = ", ".join(k.replace("\t", " / ") for k in overlap[:10])
        more = f" and {len(overlap) - 10} more" if len(overlap) > 10 else ""
        raise ValueError(f"{len(overlap)} pair(s) in both the tuning and the test part: "
                         f"{shown}{more}")


READERS = {"simlex": read_scored_pairs, "ppdb-human": read_ppdb_human, "pairs": read_pairs}


def read_gold(path, fmt):
    """Read a gold file in one of the formats of READERS (simlex, ppdb-human, pairs)."""
    if fmt not in READERS:
        raise InputError(f"unknown gold format {fmt!r} (one of {', '.join(READERS)})", path=path)
    return READERS[fmt](path)


def check_gold(files, fmt: str, what: str, tuning: dict | None = None) -> int:
    """Preflight of gold files (pivot.preflight): every file parses and together they hold
    pairs; returns how many. With ``tuning`` (the [combine] section of a recipe with domain
    models): the tuning part the build will fit the combination on (the same split,
    :func:`tuning_test_split`) holds good and bad pairs both. Whether enough of them are pairs
    of the built General model only the build knows."""
    pairs = []
    for g in files:
        pairs += read_gold(g, fmt)
    if not pairs:
        raise InputError(f"{what}: the gold files hold no pairs (format {fmt!r})", files[0])
    if tuning is not None:
        tune, _ = tuning_test_split(binarize(pairs, tuning["threshold"]), n_tune=tuning["n_tune"],
                                    seed=tuning["seed"])
        n_good = sum(label for _, _, label in tune)
        if n_good in (0, len(tune)):
            raise InputError(f"{what}: the {len(tune):,} tuning pairs are all "
                             f"{'bad' if n_good == 0 else 'good'} (score {'<' if n_good == 0 else '>='} "
                             f"threshold {tuning['threshold']}): fitting the combination needs good and bad "
                             "pairs; change [combine] threshold or add gold pairs", files[0])
    return len(pairs)
