"""WordNet 3.0 relations between phrases: the training labels of the entailment classifier.

PPDB 2.0 (Pavlick et al., ACL 2015, "Adding Semantics to Data-Driven Paraphrasing") gives every
pair one of six relations. WordNet's links supply labels for the pairs whose two phrases are
WordNet lemmas, in this order of precedence (the first that holds):

    Equivalence        a synset of e1 is a synset of e2 (synonyms)
    ForwardEntailment  a synset of e2 is a hypernym of one of e1, up to HYPERNYM_LEVELS links up
                       (instance hypernyms included): e1 is the specific phrase, and the specific
                       entails the general ("beef" -> "meat")
    ReverseEntailment  the same with e1 and e2 exchanged ("meat" -> "beef")
    Exclusion          an antonym link between a synset of e1 and one of e2, or co-hyponyms: a
                       synset of each with a direct hypernym in common (and none shared)
    OtherRelated       any other link between a synset of each (OTHER_POINTERS: derivation,
                       similar-to, also-see, meronymy/holonymy, attribute, entailment, cause,
                       verb group, pertainym, participle)
    Independent        none of these

Antonymy is a link between words in WordNet; here it relates the two synsets the words belong
to. A phrase's synsets are those of its text (spaces as "_", WordNet's collocations) and of the
text with its last word replaced by each of that word's lemmas (``lemmatizer``: "cells" ->
"cell", "hospital beds" -> "hospital bed"), the way WordNet's own morphy reads a collocation.

The database files are read directly (``index.*``, ``data.*`` and ``*.exc`` of a WordNet 3.0
folder, e.g. ``lexicon/nltk_data/corpora/wordnet`` under the data root; a data line is parsed
when a synset's links are first needed), with no state shared with NLTK and a fraction of its
start-up time. A synset is numbered ``pos * 10**8 + offset`` (pos 0 noun, 1 verb, 2 adjective
and satellite, 3 adverb; the offset is the byte position of its data line), unique and stable.
The same object serves pivot.pipeline.wellformed's lemmatizer (``all_lemma_names`` and
``_morphy``, NLTK 3.10's morphy on the same files).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pivot.errors import InputError

#: The six relations, in the order of the database's columns (pivot.store.write).
RELATIONS = ("Equivalence", "ForwardEntailment", "ReverseEntailment", "Exclusion", "OtherRelated", "Independent")
EQUIVALENCE, FORWARD, REVERSE, EXCLUSION, OTHER, INDEPENDENT = range(6)
#: Hypernym links followed up from a synset for the entailments ("a few levels": deeper
#: links reach very general synsets such as entity.n.01 and label almost anything).
HYPERNYM_LEVELS = 3
FILES = {0: "data.noun", 1: "data.verb", 2: "data.adj", 3: "data.adv"}
INDEX_FILES = {0: "index.noun", 1: "index.verb", 2: "index.adj", 3: "index.adv"}
_POS = {"n": 0, "v": 1, "a": 2, "s": 2, "r": 3}
EXCEPTION_FILES = {"n": "noun.exc", "v": "verb.exc", "a": "adj.exc", "r": "adv.exc"}
#: WordNet's detachment rules (morphy(7WN)), in NLTK's order.
MORPHY_RULES = {
    "n": [("s", ""), ("ses", "s"), ("ves", "f"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"),
          ("men", "man"), ("ies", "y")],
    "v": [("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"), ("ing", "")],
    "a": [("er", ""), ("est", ""), ("er", "e"), ("est", "e")],
    "r": [],
}
HYPERNYM = {"@", "@i"}
ANTONYM = {"!"}
OTHER_POINTERS = {"+", "&", "^", "%m", "%s", "%p", "#m", "#s", "#p", "=", "*", ">", "$", "\\", "<"}


#: WordNet 3.0 under the data root, laid out for NLTK (../shared/docs/DATA.md).
LEXICON = "lexicon/nltk_data"


def wordnet_folder(data_root, lexicon: str = LEXICON) -> Path:
    """The WordNet 3.0 database folder under an NLTK data folder (``lexicon``, relative to the
    data root, LEXICON by default): ``<lexicon>/corpora/wordnet``; InputError naming
    the first missing file."""
    folder = Path(data_root) / lexicon / "corpora" / "wordnet"
    for name in (*INDEX_FILES.values(), *FILES.values(), *EXCEPTION_FILES.values()):
        if not (folder / name).is_file():
            raise InputError(f"WordNet 3.0 database file missing (the data root's {lexicon} must hold "
                             f"corpora/wordnet/{name}); the data root is set by --data DIR or PIVOT_DATA",
                             folder / name)
    return folder


def wordnet_files(folder) -> list[Path]:
    """The files the labels and the lemmatizer read (fingerprinted by the build)."""
    return [Path(folder) / name for name in (*INDEX_FILES.values(), *FILES.values(), *EXCEPTION_FILES.values())]


class WordNet:
    """Lemmas (the index files) and synset links (the data files, parsed line by line on demand).

    ``synsets`` maps a lemma (lower case, "_" between words) to its synset ids in the index's
    order (most frequent sense first), ``pos_of`` to its parts of speech ("n", "v", "a", "r"),
    and ``exceptions[pos]`` holds the ``*.exc`` lists. A synset's links are read from its data
    line (found by the byte offset that is its number) the first time they are asked for.
    """

    def __init__(self, synsets: dict, pos_of: dict, exceptions: dict, data: dict, folder=None):
        self.synsets, self.pos_of, self.exceptions = synsets, pos_of, exceptions
        self._data = data     # pos number -> the data file's bytes
        self._folder = folder
        self._links: dict[int, tuple] = {}

    @classmethod
    def read(cls, folder) -> "WordNet":
        """Read ``index.*``, ``*.exc`` and the ``data.*`` bytes of a WordNet 3.0 folder (wndb(5))."""
        folder = Path(folder)
        synsets: dict[str, tuple] = {}
        pos_of: dict[str, set] = {}
        for pos, name in INDEX_FILES.items():
            path = folder / name
            base = pos * 10 ** 8
            with open(path, encoding="utf-8") as fh:
                for number, line in enumerate(fh, 1):
                    if line.startswith("  "):  # the licence header
                        continue
                    fields = line.split()
                    try:
                        lemma, n_synsets = fields[0], int(fields[2])
                        ids = tuple(base + int(x) for x in fields[len(fields) - n_synsets:])
                        if len(ids) != n_synsets or n_synsets < 1:
                            raise ValueError("fewer synsets than announced")
                    except (ValueError, IndexError) as exc:
                        raise InputError(f"not a WordNet index line ({exc})", path, number) from None
                    synsets[lemma] = synsets.get(lemma, ()) + ids
                    pos_of.setdefault(lemma, set()).add("nvar"[pos])
        exceptions = {}
        for pos, name in EXCEPTION_FILES.items():
            table = exceptions[pos] = {}
            with open(folder / name, encoding="utf-8") as fh:
                for line in fh:
                    terms = line.split()
                    if terms:
                        table[terms[0]] = terms[1:]
        data = {pos: (folder / name).read_bytes() for pos, name in FILES.items()}
        return cls(synsets, {k: frozenset(v) for k, v in pos_of.items()}, exceptions, data, folder)

    def links(self, sid: int) -> tuple:
        """(hypernyms, antonyms, others) of a synset: the ids its data line points to by a
        HYPERNYM, ANTONYM or OTHER_POINTERS symbol."""
        out = self._links.get(sid)
        if out is None:
            pos, offset = divmod(sid, 10 ** 8)
            raw = self._data[pos]
            end = raw.find(b"\n", offset)
            fields = raw[offset:end if end >= 0 else len(raw)].split(b" | ", 1)[0].decode("utf-8").split()
            try:
                if int(fields[0]) != offset:
                    raise ValueError(f"the line at byte {offset} is synset {fields[0]}")
                at = 4 + 2 * int(fields[3], 16)
                stop = at + 1 + 4 * int(fields[at])
                links = [(sym, _POS[p] * 10 ** 8 + int(t))
                         for sym, t, p in zip(fields[at + 1:stop:4], fields[at + 2:stop:4], fields[at + 3:stop:4])]
            except (ValueError, IndexError, KeyError) as exc:
                path = Path(self._folder or ".") / FILES[pos]
                raise InputError(f"not a WordNet data line at byte {offset} ({exc})", path) from None
            out = self._links[sid] = (tuple(t for sym, t in links if sym in HYPERNYM),
                                      frozenset(t for sym, t in links if sym in ANTONYM),
                                      frozenset(t for sym, t in links if sym in OTHER_POINTERS))
        return out

    def hypernyms(self, sid: int) -> tuple:
        return self.links(sid)[0]

    # -- what pivot.pipeline.wellformed.WordNetLemmatizer asks of NLTK's WordNet reader

    def all_lemma_names(self):
        """Every lemma ("_" between the words of a collocation)."""
        return iter(self.pos_of)

    def _morphy(self, form: str, pos: str) -> list[str]:
        """WordNet's base forms of ``form`` as part of speech ``pos``: NLTK 3.10's
        ``WordNetCorpusReader._morphy`` on the same files (the exception list when it has the
        form, else one round of MORPHY_RULES; the form itself and the results that are lemmas
        of that part of speech, in that order, each once)."""
        if form in self.exceptions[pos]:
            forms = self.exceptions[pos][form]
        else:
            forms = [form[: -len(old)] + new for old, new in MORPHY_RULES[pos] if form.endswith(old)]
        out = []
        for f in [form] + forms:
            if pos in self.pos_of.get(f, ()) and f not in out:
                out.append(f)
        return out

    def phrase_synsets(self, text: str, lemmatizer=None) -> tuple[int, ...]:
        """Synsets of a phrase (module docstring): of its text and of its last word's lemmas."""
        return self.many_phrase_synsets([text], lemmatizer)[0]

    def many_phrase_synsets(self, texts: list[str], lemmatizer=None) -> list[tuple[int, ...]]:
        """phrase_synsets of each text; the lemmatizer is asked once per distinct last word."""
        get = self.synsets.get
        out = [get(t.replace(" ", "_"), ()) for t in texts]
        if lemmatizer is None:
            return out
        last = [t.rpartition(" ")[2] for t in texts]
        extra = {w: sorted(lemmatizer(w) - {w}) for w in set(last)}
        for i in [i for i, w in enumerate(last) if extra[w]]:
            head = texts[i].rpartition(" ")[0]
            prefix = head.replace(" ", "_") + "_" if head else ""
            found = dict.fromkeys(out[i])
            for lemma in extra[last[i]]:
                found.update(dict.fromkeys(get(prefix + lemma, ())))
            out[i] = tuple(found)
        return out

    def up(self, synsets, levels: int = HYPERNYM_LEVELS) -> set[int]:
        """Hypernyms of the synsets reached in 1..levels links."""
        out, frontier = set(), set(synsets)
        for _ in range(levels):
            frontier = {h for s in frontier for h in self.hypernyms(s)}
            out |= frontier
        return out

    def profile(self, synsets) -> "Profile":
        """What the relation of a phrase to any other needs, computed once per phrase."""
        s = frozenset(synsets)
        links = [self.links(x) for x in s]
        return Profile(s, frozenset(self.up(s)), frozenset(h for up, _, _ in links for h in up),
                       frozenset(a for _, anti, _ in links for a in anti),
                       frozenset(o for _, _, other in links for o in other))

    def relation(self, a, b) -> int:
        """The relation index (RELATIONS) of two phrases given their synsets (module docstring)."""
        return relation(self.profile(a), self.profile(b))


@dataclass(frozen=True)
class Profile:
    """A phrase's synsets and the synsets its links reach."""

    synsets: frozenset
    up: frozenset        # hypernyms within HYPERNYM_LEVELS links
    parents: frozenset   # direct hypernyms
    antonyms: frozenset
    others: frozenset    # OTHER_POINTERS targets


def relation(a: Profile, b: Profile) -> int:
    """The relation of e1 (profile a) to e2 (profile b), the first that holds of the module docstring."""
    if a.synsets & b.synsets:
        return EQUIVALENCE
    if a.up & b.synsets:
        return FORWARD
    if b.up & a.synsets:
        return REVERSE
    if (a.antonyms & b.synsets) or (b.antonyms & a.synsets) or (a.parents & b.parents):
        return EXCLUSION
    if (a.others & b.synsets) or (b.others & a.synsets):
        return OTHER
    return INDEPENDENT
