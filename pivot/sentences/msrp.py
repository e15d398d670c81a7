"""The Microsoft Research Paraphrase Corpus (MSRP) reader.

Layout: a header line ``Quality<TAB>#1 ID<TAB>#2 ID<TAB>#1 String<TAB>#2 String``, then one pair
per line with the same five TAB-separated fields; UTF-8, usually with a byte-order mark, often
without a final newline. Quoting is off: a ``"`` is an ordinary character of the sentence
(reading it with csv's default quoting would swallow TABs and lines).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pivot.errors import InputError

HEADER = ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]


@dataclass(frozen=True)
class Pair:
    label: int
    id1: str
    id2: str
    s1: str
    s2: str


def read_msrp(path) -> list[Pair]:
    """The pairs of an MSRP file, in file order; InputError (file, line) on a malformed line."""
    from pivot.text import numbered_lines

    path = Path(path)
    pairs = []
    header_seen = False
    for number, line in numbered_lines(path):
        if not header_seen:
            fields = [f.strip() for f in line.split("\t")]
            if fields != HEADER:
                raise InputError("not an MSRP file: the first line must be the header "
                                 + "<TAB>".join(HEADER), path, number)
            header_seen = True
            continue
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 5:
            raise InputError(f"{len(fields)} TAB-separated fields, MSRP lines have 5", path, number)
        label = fields[0].strip()
        if label not in ("0", "1"):
            raise InputError(f"Quality must be 0 or 1, not {label!r}", path, number)
        pairs.append(Pair(int(label), fields[1].strip(), fields[2].strip(), fields[3].strip(), fields[4].strip()))
    if not header_seen:
        raise InputError("empty file: an MSRP file starts with its header line", path)
    return pairs
