"""Well-formedness labels of paraphrase pairs: a bitmask per pair, computed by array operations.

Bilingual pivoting proposes, beside real paraphrases, phrase fragments that share an aligned
foreign phrase with the query: *cells ,*, *) infection*, *the infection*, *cell counts were*,
*treatment of*. Nothing is deleted; every pair gets a bitmask (uint8) whose flags say what is
wrong with it or how it relates to its partner, and lookup/export hide ``HIDDEN`` by default.
A flag is set when EITHER phrase (or the pair) has the property:

=============  ===  =====================================================================
EDGE_PUNCT       1  a punctuation token is the first or last token of e1 or e2
FUNCTION_ONLY    2  e1 and e2 differ only by function words and punctuation: both have content
                    words, the same sequence of them, and different surfaces (*the disease* /
                    *disease*); or exactly one of them has no content word at all (*infection*
                    / *it*: the content was replaced by function words alone)
DANGLING         4  one phrase dangles at an edge where the other does not. A phrase's end
                    dangles on a word that cannot close it (auxiliary, transitive preposition,
                    determiner, conjunction), its start on one that cannot open it (coordinating
                    conjunction, auxiliary): *cell counts were*, *cells might be*, *treatment of*,
                    *and cells*. Compared edge by edge, so a dangling query keeps its like
                    answers (*associated with* / *linked to*, *by* / *through*) while *infection* /
                    *infection with* and *infection* / *by* are flagged. A phrase that WordNet
                    lists as a multiword unit (*carry out*, *get rid of*, *relate to*, matched
                    after lemmatising its tokens: *related to*) is neutral at its dangling edges:
                    it matches both a dangling phrase (*associated with* / *related to*) and a
                    whole one (*remove* / *get rid of*)
INFLECTION       8  the content-word sequences differ in surface but have the same length and
                    share a lemma at every position (*cells ,* / *cell*, *cell counts* / *cell
                    count*), or the phrases differ only by the genitive *'s* (*alzheimer 's
                    disease* / *alzheimer disease*: English's one case inflection, a spelling
                    variant of a name, not a function-word change); exclusive with FUNCTION_ONLY
                    and CONTAINMENT
CONTAINMENT     16  the shorter content-word sequence (at least one word) is a proper
                    subsequence of the longer one, a word matching when the two share a lemma
                    (*kidney* / *kidney disease*, *kidneys* / *disease of the kidney*)
=============  ===  =====================================================================

``HIDDEN = EDGE_PUNCT | FUNCTION_ONLY | DANGLING``: the default lookup and export hide these.

Phrases are the database's normalised text (lower-case, Moses tokens joined by spaces: "cells ,"
has a comma token, "( a )" bracket tokens, "can't" is "can 't"). Decisions, and why:

* **Punctuation token**: every character is Unicode punctuation (categories P*) or a symbol
  (S*), except the symbols read aloud as words: currency (Sc), mathematical operators (Sm, but
  not the separator ``|``), and ``% ‰ ‱ & # @ ° ′ ″``. A phrase fragment is cut at a comma,
  a bracket, a quote, a dash, a slash; *5 %*, *$ 5*, *a + b*, *r & d* are phrases whose symbol
  is a word ("percent", "dollars", "plus", "and"), not the debris of a cut.
* **Function words**: the closed classes of English, listed below by class (articles and other
  determiners, quantifiers, pronouns, prepositions, coordinating and subordinating conjunctions,
  auxiliaries and modals with their Moses-split contractions, the particles *to*, *not*, *'t*,
  existential *there*). Open-class words (nouns, verbs, adjectives, adverbs, numbers) are
  content words. *be*, *have* and *do* are listed whatever their use (main verb or auxiliary):
  without a parser the two cannot be told apart, and *have fever* against *fever* is not a
  paraphrase either.
* **A phrase without content words against one with them** is FUNCTION_ONLY: *associated with*
  / *to*, *infection* / *it*. The price is paid by queries that are themselves function words:
  *because of* / *due to* is hidden, because *due* is an adjective (complex prepositions such
  as *due to*, *owing to*, *thanks to* are not listed as units here, nor in WordNet).
* **Dangling edges, compared per pair**: a flag set when either phrase dangles would hide every
  answer to a query that dangles itself (PATO's *associated with*, whose curated synonym is
  *associated*, would show nothing); comparing the two phrases' edges flags exactly the pairs in
  which one side is a fragment of what the other says.
* **Dangling words**: the classes above, with two refinements. (1) Prepositions that English also
  uses as adverbial particles ending a phrase (*up, down, out, off, over, around, after, before,
  ...*: *broken down*, *shortly after*) do not dangle; the transitive ones (*of, to, for, with,
  from, at, in, on, by, about, ...*) do. *in*, *on* and *by* have particle uses too (*log in*),
  but after a noun, the shape the database proposes (*infection in*), they are fragments; the
  WordNet multiword units keep the lexicalised verbs (*carry on*, *stand by*). (2) Only
  coordinating conjunctions dangle at the start (*and cells*); subordinators open real phrases
  (*if necessary*, *when needed*). Among determiners, those that need a noun dangle at the end
  (articles, demonstratives, possessives, *every*, *whose*); quantifiers that can stand alone
  (*all*, *some*, *both*, *enough*) do not. A verb plus preposition not in WordNet (*deal with*)
  stays dangling: without a part-of-speech tag, "a content word then a preposition" is
  *treatment of* as often as *deal with*; bench/bench_junk.py counts what this rule costs (on
  General's top 10 for 715 ontology terms: 45 of 4,162 proposals, none an ontology synonym, and
  most fragments: *combined with*, *birth to*, *pain in*, *increase in*).
* **Letters**: *a* and *i* are the article and the pronoun, and the letters of names (*vitamin
  a*, *hepatitis a*, *type i diabetes*, *world war i*). Inside a span that WordNet lists as a
  unit, after a content word, they are letters: content words, and a phrase ending in one ends
  whole (*vitamin a* / *vitamin* is CONTAINMENT, not FUNCTION_ONLY; *vitamin a* / *retinol* is
  not DANGLING). Elsewhere they stay function words: the phrases the database proposes that end
  in a noun then *a* or *i* are nearly all fragments (*hours a*, *day i*; see LETTERS).
* **Inflection and containment on content words**, lemmas by WordNet's morphology
  (``wordnet_lemmatizer``: the word itself plus WordNet's morphy for each part of speech), so
  *cells ,* / *cell* is EDGE_PUNCT | INFLECTION and *the kidneys* / *kidney disease* is
  CONTAINMENT.

Speed: Python runs once per phrase (splitting its text) and once per distinct token (classes,
lemmas); every pair label is numpy operations over the e1/e2 index arrays.

Blocks: a phrase's arrays depend on its own words only, and a pair's label compares the two
phrases' rows (equal content, text, core), never a class numbered over all phrases; so a build
makes the forms of each block of its phrases in a task of its own (form_arrays, over the encode
stage's token ids, with lemma ids that every block gives alike: LemmaIndex) and labels pairs
across blocks (FormBlocks): the labels of one pass over all the phrases (from_texts).

>>> forms = PhraseForms.from_texts(["cell", "cells ,", "the cell"], lambda t: frozenset({t, t.rstrip("s")}))
>>> [describe(int(m)) for m in forms.pair_labels(np.array([0, 0]), np.array([1, 2]))]
[['edge-punct', 'inflection'], ['function-only']]
"""
from __future__ import annotations

import gc
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from itertools import chain, islice

import numpy as np


EDGE_PUNCT = 1
FUNCTION_ONLY = 2
DANGLING = 4
INFLECTION = 8
CONTAINMENT = 16
HIDDEN = EDGE_PUNCT | FUNCTION_ONLY | DANGLING
NAMES = {EDGE_PUNCT: "edge-punct", FUNCTION_ONLY: "function-only", DANGLING: "dangling",
         INFLECTION: "inflection", CONTAINMENT: "containment"}


def describe(mask: int) -> list[str]:
    """Names of the flags set in `mask`, in flag order: describe(5) == ["edge-punct", "dangling"]."""
    mask = int(mask)
    if mask < 0 or mask >= 32:
        raise ValueError(f"not a well-formedness mask: {mask} (0..31)")
    return [name for bit, name in NAMES.items() if mask & bit]


# ------------------------------------------------------------------------ the closed classes
#
# Lower-case, as the database stores text; contractions as Moses splits them ("can't" -> "can 't",
# "doesn't" -> "doesn 't", "I'm" -> "i 'm").

ARTICLES = frozenset("a an the".split())
DEMONSTRATIVES = frozenset("this that these those".split())
POSSESSIVE_DETERMINERS = frozenset("my your his its our their whose".split())  # "her": also an object pronoun
QUANTIFIERS = frozenset(
    "all another any both each either enough every few fewer least less many more most much "
    "neither no none other several some such".split())
DETERMINERS = ARTICLES | DEMONSTRATIVES | POSSESSIVE_DETERMINERS | QUANTIFIERS

PRONOUNS = frozenset(
    "i me mine myself you yours yourself yourselves he him himself she her hers herself it itself we us "
    "ours ourselves they them theirs themselves oneself who whom what which whoever whomever whatever "
    "whichever someone somebody something anyone anybody anything everyone everybody everything "
    "nobody nothing".split())

PREPOSITIONS = frozenset(
    "aboard about above across after against along alongside amid amidst among amongst around as at atop "
    "before behind below beneath beside besides between beyond by despite down during except for from in "
    "inside into near of off on onto opposite out outside over past per since than through throughout till "
    "to toward towards under underneath unlike until unto up upon versus via vs vs. with within without "
    "'til".split())
# Prepositions that also end a phrase as adverbial particles ("broken down", "shortly after",
# "as above"): not dangling at the end.
PARTICLE_PREPOSITIONS = frozenset(
    "aboard above across after along alongside around atop before behind below beneath beside besides "
    "beyond down inside near off opposite out outside over past since throughout underneath up "
    "within without".split())

COORDINATORS = frozenset("and or but nor".split())
SUBORDINATORS = frozenset(
    "although because if lest so than that though unless whereas whether while whilst once when where "
    "whenever wherever".split())
CONJUNCTIONS = COORDINATORS | SUBORDINATORS
# Subordinators that also end a phrase ("for a while", "at once", "even though" ends a clause
# adverbially, "where" / "when" as relative adverbs: "the place where"): not dangling at the end.
_FREE_END_SUBORDINATORS = frozenset("though while once when where whenever wherever".split())

AUXILIARIES = frozenset(
    # be, have, do (all forms that serve as auxiliaries) and the modals
    "be am is are was were been being have has had having do does did "
    "can could may might must shall should will would ought "
    # Moses-split contractions: the clitic ("'s", "'re", ...) and the host of a negation
    # ("doesn 't", "isn 't": "doesn", "isn"); "won 't" leaves "won", a verb, so it is not here
    "'m 're 's 've 'd 'll ca don doesn didn isn aren wasn weren hasn haven hadn couldn shouldn wouldn "
    "mustn needn mightn shan".split())

PARTICLES = frozenset("to not n't 't there".split())

#: Function words that are also letters: in a name (vitamin A, hepatitis A, type I, World War I)
#: they are content. Told apart only inside a WordNet unit, after a content word: in the bio
#: build's phrases, 168 end in a noun-only word then "a", nearly all fragments ("hours a" of
#: "twice ... a day", "days a", "dollars a"), and 141 in one then "i" ("day i", "money i"); a
#: rule on the word before alone would show those. WordNet's 15 units that end in " a" are
#: names but for "quite a" and "hardly a" (an adverb before it), its 67 ending in " i" all are.
LETTERS = frozenset("a i".split())

FUNCTION_WORDS = DETERMINERS | PRONOUNS | PREPOSITIONS | CONJUNCTIONS | AUXILIARIES | PARTICLES

#: Words that cannot close a phrase: auxiliary, transitive preposition, noun-needing determiner, conjunction.
DANGLING_END = (AUXILIARIES | (PREPOSITIONS - PARTICLE_PREPOSITIONS)
                | ARTICLES | DEMONSTRATIVES | POSSESSIVE_DETERMINERS | frozenset({"every"})
                | (CONJUNCTIONS - _FREE_END_SUBORDINATORS))
#: Words that cannot open a phrase: a coordinating conjunction or an auxiliary.
DANGLING_START = COORDINATORS | AUXILIARIES

#: The genitive clitic as Moses splits it ("alzheimer's" -> "alzheimer 's"): a difference in it
#: alone is an inflection (see INFLECTION), not a function-word change.
GENITIVE = "'s"

# Symbols that are read as words ("5 %" = "5 percent"): not punctuation tokens.
_SPOKEN_SYMBOLS = frozenset("%‰‱&#@°′″")


def is_punctuation(token: str) -> bool:
    """True when every character of `token` is punctuation (P*) or a symbol (S*) that is not read
    as a word (currency Sc, math Sm other than "|", and % ‰ ‱ & # @ ° ′ ″ are words)."""
    if not token:
        return False
    for ch in token:
        cat = unicodedata.category(ch)
        if cat[0] not in "PS" or ch in _SPOKEN_SYMBOLS or cat == "Sc" or (cat == "Sm" and ch != "|"):
            return False
    return True


# ------------------------------------------------------------------------------ the lemmatizer


class WordNetLemmatizer:
    """token -> frozenset of its lemmas: the token itself and WordNet's base forms of it as a noun,
    verb, adjective and adverb (morphy: exception lists, then suffix rules, kept only when WordNet
    has the result; ``wordnet`` is pivot.pipeline.wordnet.WordNet or NLTK's corpus reader). "cells" -> {"cells", "cell"}; "saw" -> {"saw", "see"}.

    ``units`` holds WordNet's multiword lemmas ("carry out", "get rid of", "human being",
    space-separated): phrases that are lexicalised units, whose edges do not dangle.
    """

    def __init__(self, wordnet, data_root=None):
        self._wn = wordnet
        self.data_root = data_root
        self.units = frozenset(name.replace("_", " ") for name in wordnet.all_lemma_names() if "_" in name)

    def __reduce__(self):
        # The WordNet files' bytes need not travel to a Dask worker; the data root does, and
        # the worker reads WordNet from it.
        if self.data_root is None:
            raise TypeError("this WordNetLemmatizer was built without a data root and cannot be pickled")
        return wordnet_lemmatizer, (self.data_root,)

    def __call__(self, token: str) -> frozenset:
        morphy = self._wn._morphy
        out = {token}
        for pos in "nvar":
            out.update(morphy(token, pos))
        return frozenset(out)


def wordnet_lemmatizer(data_root) -> WordNetLemmatizer:
    """The WordNet 3.0 lemmatizer of the data root's ``lexicon/nltk_data`` (see DATA.md), over the
    build's own reader of the database files (pivot.pipeline.wordnet: NLTK's morphy on the same
    files, tested against NLTK itself)."""
    from pivot.pipeline.wordnet import WordNet, wordnet_folder

    return WordNetLemmatizer(WordNet.read(wordnet_folder(data_root)), str(data_root))


# ---------------------------------------------------------------------------- phrases and pairs


def _padded(rows: list[list[int]], width: int) -> np.ndarray:
    """int32 matrix of the rows, padded with -1 to `width` columns."""
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    flat = np.fromiter(chain.from_iterable(rows), dtype=np.int32, count=int(lengths.sum()))
    return _padded_flat(flat, lengths, width)


def _padded_flat(flat: np.ndarray, lengths: np.ndarray, width: int) -> np.ndarray:
    """int32 matrix of rows given as one flat array and their lengths, padded with -1 to `width`."""
    out = np.full((len(lengths), max(width, 1)), -1, dtype=np.int32)
    if len(flat):
        rr = np.repeat(np.arange(len(lengths)), lengths)
        cc = np.arange(len(flat)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        out[rr, cc] = flat
    return out


#: Phrases PhraseForms.from_texts splits into words at a time (their lists of word strings).
FORM_BLOCK = 65_536


# Per-phrase bits packed into one byte, so that a pair needs one gather per side.
_P_EDGE = EDGE_PUNCT          # the first or last token is punctuation
_P_END = 2                    # the end dangles (not a unit)
_P_START = 4                  # the start dangles (not a unit)
_P_END_WHOLE = 8              # the end does not dangle (no dangling word there); a unit has neither bit
_P_START_WHOLE = 16           # the start does not dangle
_P_NO_CONTENT = 32            # no content word at all
_P_GENITIVE = 64              # a token is the genitive 's: the core (tokens without it) is not the tokens


class LemmaIndex:
    """Ids of lemma strings that every block of phrases gives alike, with no table built over
    all of them: a lemma among ``names`` (a list every block reads the same: WordNet's lemma
    names, in its index files' order) is its position there; any other lemma must be the
    token's own text, and is len(names) + the token's id. Two tokens then share a lemma id iff
    they share the lemma string, given ids of a vocabulary of distinct words (the encode
    stage's English ids: Vocab refuses a duplicate): a name has one position, and a lemma
    outside the names is the text of one token, which has one id.

    WordNetLemmatizer's lemmas are the token and morphy's results, which morphy keeps only
    when WordNet lists them (WordNet._morphy), so ``names = wordnet.all_lemma_names()`` covers
    every lemma; identity_lemmas' one lemma is the token (``names = ()``). Another lemma
    outside the names is refused (ValueError): its id would depend on the block.

    >>> index = LemmaIndex(["cell", "see"])
    >>> index("cell", "cells", 7), index("cells", "cells", 7), index("see", "saw", 9)
    (0, 9, 1)
    """

    def __init__(self, names=()):
        self.index: dict[str, int] = {}
        for name in names:
            self.index.setdefault(name, len(self.index))

    def __call__(self, lemma: str, word: str, token_id: int) -> int:
        i = self.index.get(lemma)
        if i is not None:
            return i
        if lemma != word:
            raise ValueError(f"lemma {lemma!r} of {word!r} is neither a listed name nor the token itself: "
                             "its id would not be the same in every block of phrases")
        return len(self.index) + token_id


class _PairLabels:
    """pair_labels over per-phrase arrays that a subclass gathers by phrase index (_rows):
    PhraseForms holds them whole, FormBlocks as blocks of phrases. ``lemma_ids`` (V, L): the
    lemma ids of each token id (PhraseForms)."""

    lemma_ids: np.ndarray

    def __len__(self) -> int:
        raise NotImplementedError

    def _rows(self, idx: np.ndarray, names) -> dict:
        """{name: the named per-phrase array's rows of phrases idx}; "odd" only when the texts
        were not all canonical (PhraseForms.odd)."""
        raise NotImplementedError

    def _share(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Elementwise: content tokens a and b share a lemma (False where either is -1)."""
        la = self.lemma_ids[np.maximum(a, 0)]
        lb = self.lemma_ids[np.maximum(b, 0)]
        hit = a == b        # a token's own text is one of its lemmas
        width = la.shape[-1]
        # L x L comparisons of 1-d arrays rather than one (m, L, L) array: memory stays that
        # of the inputs (lemma rows are sorted and -1 padded at the end).
        for x in range(width):
            lx = la[..., x]
            valid = lx >= 0
            for y in range(width):
                hit |= valid & (lx == lb[..., y])
        return hit & (a >= 0) & (b >= 0)

    def pair_labels(self, e1_idx: np.ndarray, e2_idx: np.ndarray) -> np.ndarray:
        """The uint8 well-formedness mask of each pair (e1_idx[i], e2_idx[i]) of phrase indices."""
        e1 = np.asarray(e1_idx)
        e2 = np.asarray(e2_idx)
        if e1.shape != e2.shape or e1.ndim != 1:
            raise ValueError(f"e1_idx and e2_idx must be 1-d arrays of one length (got {e1.shape}, {e2.shape})")
        if len(e1) == 0:
            return np.zeros(0, dtype=np.uint8)
        if not (np.issubdtype(e1.dtype, np.integer) and np.issubdtype(e2.dtype, np.integer)):
            raise ValueError(f"phrase indices must be integers (got {e1.dtype}, {e2.dtype})")
        if min(e1.min(), e2.min()) < 0 or max(e1.max(), e2.max()) >= len(self):
            raise ValueError(f"phrase index out of range 0..{len(self) - 1}")
        names = ("bits", "n_content", "content")
        s1, s2 = self._rows(e1, names), self._rows(e2, names)
        b1, b2 = s1["bits"], s2["bits"]
        none1 = (b1 & _P_NO_CONTENT) != 0
        none2 = (b2 & _P_NO_CONTENT) != 0
        out = (b1 | b2) & EDGE_PUNCT
        # DANGLING: an edge dangles on one side and is whole on the other. Shifting the "whole"
        # bits (8, 16) down by 2 lines them up with the "dangles" bits (2, 4) of the same edge.
        dangles = _P_END | _P_START
        mismatch = ((b1 & dangles) & ((b2 >> 2) & dangles)) | ((b2 & dangles) & ((b1 >> 2) & dangles))
        out |= np.where(mismatch != 0, DANGLING, 0).astype(np.uint8)

        # Equal content sequences, texts and cores are equal rows (-1 padded alike), compared
        # here pair by pair: no numbering of classes over all the phrases, so that each block
        # of phrases makes its rows alone. Two texts are equal iff their token rows are and so
        # are their "odd" ids (a text that is not its words joined by single spaces).
        c1, c2 = s1["content"], s2["content"]
        same_content = (c1 == c2).all(axis=1)
        # GENITIVE: equal cores (the tokens without the genitive), different texts. Cores are
        # equal where the tokens are, or, where either phrase holds the genitive, where the
        # core rows are (without it in neither, a core is its token row).
        # FUNCTION_ONLY: equal content, different texts, not genitive only. Equal tokens give
        # equal content, so the token rows are read only where the content is equal; a pair
        # of unequal content may still have equal cores (a letter is content after a content
        # word only: "vitamin 's a" / "vitamin a"), so the cores where either has the genitive.
        core_equal = np.zeros(len(e1), dtype=bool)
        same_surface = np.zeros(len(e1), dtype=bool)
        alike = np.flatnonzero(same_content & ~none1)
        if len(alike):
            t1, t2 = self._rows(e1[alike], ("tokens", "odd")), self._rows(e2[alike], ("tokens", "odd"))
            same_tokens = (t1["tokens"] == t2["tokens"]).all(axis=1)
            core_equal[alike] = same_tokens
            same_surface[alike] = same_tokens & (t1["odd"] == t2["odd"]) if "odd" in t1 else same_tokens
            del t1, t2
        cand = np.flatnonzero(~core_equal & ~none1 & (((b1 | b2) & _P_GENITIVE) != 0))
        if len(cand):
            core_equal[cand] = (self._rows(e1[cand], ("core",))["core"]
                                == self._rows(e2[cand], ("core",))["core"]).all(axis=1)
        genitive_only = core_equal & ~same_surface & ~none1
        function_only = (same_content & ~none1 & ~same_surface & ~genitive_only) | (none1 != none2)
        out |= np.where(function_only, FUNCTION_ONLY, 0).astype(np.uint8)
        out |= np.where(genitive_only, INFLECTION, 0).astype(np.uint8)

        n1, n2 = s1["n_content"], s2["n_content"]
        # INFLECTION: equal content lengths, different content, a shared lemma at every position.
        # Candidates are filtered position by position, so later positions see few rows.
        cand = np.flatnonzero((n1 == n2) & ~none1 & ~same_content)
        for j in range(c1.shape[1]):
            if not len(cand):
                break
            a, b = c1[cand, j], c2[cand, j]
            cand = cand[self._share(a, b) | (a < 0)]    # a < 0: past the end (b too: equal lengths)
        out[cand] |= INFLECTION

        # CONTAINMENT: the shorter content sequence (>= 1 word) is a proper subsequence of the
        # longer one. Greedy leftmost matching decides subsequence for any match predicate: if
        # short[i] can match long[j], matching it there leaves a superset of later positions.
        # A row leaves the loop once it has matched everything (contained) or once too few
        # positions remain for what it still needs (not contained).
        cand = np.flatnonzero((n1 != n2) & ~none1 & ~none2)
        swap = (n1[cand] > n2[cand])[:, None]
        short = np.where(swap, c2[cand], c1[cand])
        long = np.where(swap, c1[cand], c2[cand])
        n_short = np.minimum(n1[cand], n2[cand])
        n_long = np.maximum(n1[cand], n2[cand])
        matched = np.zeros(len(cand), dtype=np.int32)
        for j in range(c1.shape[1]):
            if not len(cand):
                break
            want = short[np.arange(len(cand)), matched]
            matched = matched + self._share(want, long[:, j])
            done = matched == n_short
            out[cand[done]] |= CONTAINMENT
            keep = ~done & (n_short - matched <= n_long - (j + 1))
            cand, short, long, n_short, n_long, matched = (
                cand[keep], short[keep], long[keep], n_short[keep], n_long[keep], matched[keep])
        return out


class PhraseForms(_PairLabels):
    """Per-phrase arrays from which pair labels are computed by gathers and comparisons.

    tokens        (n, T) int32 token ids, -1 padded
    content       (n, C) int32 ids of the content tokens (not function words, not punctuation),
                  in order, -1 padded; n_content (n,) their number
    core          (n, T) int32: the token ids without the genitive 's, in order, -1 padded
    bits          (n,) uint8: 1 edge punctuation, 2 / 4 the end / start dangles, 8 / 16 the end /
                  start is whole (a unit's dangling edge has neither), 32 no content word,
                  64 a token is the genitive
    lemma_ids     (V, L) int32: ids of each content token's lemmas (its own text among them),
                  sorted, -1 padded; all -1 for function words and punctuation
    odd           (n,) int32 or None: -1 where the text is its words joined by single spaces
                  (canonical), else an id that equal non-canonical texts share; None: every
                  text canonical (from_rows)
    vocab         the V distinct tokens, by id (from_texts; None from_rows)

    Equal texts, content sequences and cores are told by comparing rows (pair_labels); the
    class ids ``content_class``, ``core_class`` and ``surface`` are derived for inspection.
    """

    def __init__(self, tokens, content, n_content, core, bits, lemma_ids, odd=None, vocab=None):
        self.tokens = tokens
        self.content = content
        self.n_content = n_content
        self.core = core
        self.bits = bits
        self.lemma_ids = lemma_ids
        self.odd = odd
        self.vocab = vocab

    def __len__(self):
        return len(self.tokens)

    def _rows(self, idx, names) -> dict:
        return {name: getattr(self, name)[idx] for name in names if name != "odd" or self.odd is not None}

    @property
    def edge_punct(self) -> np.ndarray:
        return (self.bits & _P_EDGE) != 0

    @property
    def dangling(self) -> np.ndarray:
        """(n,) bool: the phrase has a dangling end or start (a multiword unit has none)."""
        return (self.bits & (_P_END | _P_START)) != 0

    @property
    def content_class(self) -> np.ndarray:
        """(n,) int32: phrases with equal content sequences share it (exact, no hashing)."""
        return _row_classes(self.content)

    @property
    def core_class(self) -> np.ndarray:
        """(n,) int32: phrases with equal token sequences once the genitive 's is dropped."""
        return _row_classes(self.core)

    @property
    def surface(self) -> np.ndarray:
        """(n,) int32: phrases with equal texts share it, numbered by first occurrence."""
        rows = self.tokens if self.odd is None else np.column_stack([self.odd, self.tokens])
        return _first_occurrence(_row_classes(rows))

    @classmethod
    def from_texts(cls, texts: Iterable[str], lemmatizer: Callable[[str], frozenset]) -> PhraseForms:
        """The forms of normalised phrases (lower-case, Moses tokens joined by spaces).

        lemmatizer: token -> frozenset of lemmas (``wordnet_lemmatizer(data_root)``, or any
        function for tests); called once per distinct content token. If it has a ``units``
        attribute (multiword lemmas, space-separated), phrases found there do not dangle.
        texts: any iterable, read FORM_BLOCK texts at a time (a generator over a file's lines is
        never held whole). Token ids by first occurrence, lemma strings interned by first use.
        """
        with _collector_paused():
            return cls._from_texts(iter(texts), lemmatizer)

    @classmethod
    def _from_texts(cls, texts: Iterator[str], lemmatizer) -> PhraseForms:
        # Ids by first occurrence, looked up through C-level map() calls, not a Python loop per token.
        # The texts are read FORM_BLOCK at a time, each block's new words numbered after the
        # earlier blocks' (the ids of one pass by first occurrence), and never held together:
        # with a list of word strings per phrase for all of them at once, the texts and a dict
        # of them, the forms task of bio-multi's 2.37M phrases took 2.09 GiB (max RSS), 0.70 so.
        # A phrase's words are later read back from its token ids.
        words: list[str] = []
        vocab: dict[str, int] = {}
        # A text is its words joined by single spaces ("canonical": every text a build makes),
        # or not ("a  b", " a"): equal canonical texts are equal token rows; the others are
        # numbered apart, so that the surfaces are those of the texts themselves.
        odd: dict[str, int] = {}
        flat_parts, length_parts, odd_parts = [], [], []
        while block := list(islice(texts, FORM_BLOCK)):
            rows = [t.split() for t in block]
            length_parts.append(np.fromiter(map(len, rows), dtype=np.int64, count=len(rows)))
            odd_parts.append(np.fromiter((-1 if t == " ".join(r) else odd.setdefault(t, len(odd))
                                          for t, r in zip(block, rows)), dtype=np.int32, count=len(block)))
            del block
            flat_words = list(chain.from_iterable(rows))
            del rows
            new = [w for w in dict.fromkeys(flat_words) if w not in vocab]
            vocab.update(zip(new, range(len(words), len(words) + len(new))))
            words += new
            flat_parts.append(np.fromiter(map(vocab.__getitem__, flat_words), dtype=np.int32, count=len(flat_words)))
            del flat_words
        lengths = np.concatenate(length_parts) if length_parts else np.zeros(0, np.int64)
        flat = np.concatenate(flat_parts) if flat_parts else np.zeros(0, np.int32)
        odd_of = np.concatenate(odd_parts) if odd_parts else np.zeros(0, np.int32)
        del length_parts, flat_parts, odd_parts, odd, vocab
        tokens = _padded_flat(flat, lengths, int(lengths.max()) if len(lengths) else 1)
        del flat
        # lemma strings interned by first use (their ids matter only by equality)
        lemma_index: dict[str, int] = {}
        arrays = _phrase_arrays(tokens, lengths, words, lemmatizer,
                                lambda lemma, i: lemma_index.setdefault(lemma, len(lemma_index)))
        return cls(**arrays, odd=odd_of, vocab=words)

    @classmethod
    def from_rows(cls, rows: np.ndarray, words, lemmatizer, lemma_index: LemmaIndex) -> PhraseForms:
        """The forms of phrases given as rows of token ids (form_arrays), lemma_ids the table of
        ids 0..(largest id) (dense_lemmas). The labels of any pairs are those of from_texts over
        the rows' texts (a canonical text per row)."""
        arrays = form_arrays(rows, words, lemmatizer, lemma_index)
        lemma_ids = dense_lemmas([(arrays.pop("lemma_tokens"), arrays.pop("lemma_rows"))])
        return cls(**arrays, lemma_ids=lemma_ids)


def form_arrays(rows: np.ndarray, words, lemmatizer, lemma_index: LemmaIndex) -> dict:
    """PhraseForms' arrays of phrases given as rows of token ids (-1 padded at the end; a block
    of the stored phrases in the encode stage's English ids), ``words[i]`` the text of id i (a
    list, or a dict holding the rows' ids; distinct ids, distinct texts): tokens, content,
    n_content, core, bits in those ids, and the lemma rows of the rows' distinct ids as
    ``lemma_tokens`` (k,) int32 ascending and ``lemma_rows`` (k, L) int32, lemma ids by
    ``lemma_index``.

    A phrase's arrays are functions of its own words, and every id is the vocabulary's or the
    lemma index's: the phrases cut into blocks anyhow give, block by block, the rows of one
    block, and a token's lemma row is the same in every block (FormBlocks labels over them).
    """
    with _collector_paused():
        return _form_arrays(np.asarray(rows), words, lemmatizer, lemma_index)


def _form_arrays(rows: np.ndarray, words, lemmatizer, lemma_index: LemmaIndex) -> dict:
    if rows.ndim != 2:
        raise ValueError(f"token rows must be a 2-d array (got shape {rows.shape})")
    present = rows >= 0
    if present.shape[1] > 1 and (present[:, 1:] & ~present[:, :-1]).any():
        raise ValueError("token rows must hold their tokens first and the -1 padding after them")
    ids = np.unique(rows[present]).astype(np.int32)
    # local ids 0..k-1 of the rows' distinct ids (the vocabulary of the block): the per-token
    # tables below are the block's size, not the vocabulary's
    local = np.where(present, np.searchsorted(ids, np.where(present, rows, 0)), -1).astype(np.int32)
    if local.shape[1] == 0:
        local = np.full((len(local), 1), -1, np.int32)
    id_list = ids.tolist()
    block_words = [words[i] for i in id_list]
    arrays = _phrase_arrays(local, present.sum(axis=1), block_words, lemmatizer,
                            lambda lemma, i: lemma_index(lemma, block_words[i], id_list[i]))
    to_id = np.append(ids, np.int32(-1))        # local -1 (padding) -> -1
    for name in ("tokens", "content", "core"):
        arrays[name] = to_id[arrays[name]]
    arrays["lemma_tokens"] = ids
    arrays["lemma_rows"] = arrays.pop("lemma_ids")
    return arrays


def dense_lemmas(parts) -> np.ndarray:
    """The (V, L) lemma table of token ids 0..V-1 from blocks' (lemma_tokens, lemma_rows)
    (form_arrays): V the largest id + 1, L the widest row, ids no block holds all -1. A token
    of several blocks has the same row in each (its lemmas' LemmaIndex ids, sorted)."""
    parts = list(parts)
    n = max((int(t.max()) + 1 for t, _ in parts if len(t)), default=1)
    width = max((r.shape[1] for _, r in parts), default=1)
    out = np.full((n, width), -1, np.int32)
    for t, r in parts:
        out[t, :r.shape[1]] = r
    return out


class FormBlocks(_PairLabels):
    """Pair labels over blocks of phrases: ``blocks`` each hold form_arrays' per-phrase arrays
    (tokens, content, n_content, core, bits; maps of files will do) of consecutive phrases,
    phrase i of the whole being the i-th of the blocks one after another; ``lemma_ids`` the
    blocks' dense_lemmas. A pair's rows are gathered from their blocks and -1 padded to the
    widest block's: the labels are PhraseForms.pair_labels of the same phrases in one block."""

    def __init__(self, blocks: list, lemma_ids: np.ndarray):
        self.blocks = list(blocks)
        self.starts = np.zeros(len(self.blocks) + 1, np.int64)
        np.cumsum([len(b["bits"]) for b in self.blocks], out=self.starts[1:])
        self.lemma_ids = lemma_ids
        self.widths = {name: max((b[name].shape[1] for b in self.blocks), default=1)
                       for name in ("tokens", "content", "core")}

    def __len__(self):
        return int(self.starts[-1])

    def _rows(self, idx, names) -> dict:
        names = [n for n in names if n != "odd"]    # every text canonical
        if len(self.blocks) == 1:
            return {name: self.blocks[0][name][idx] for name in names}
        block = np.searchsorted(self.starts, idx, side="right") - 1
        # the pairs grouped by block: a stable sort of small integers (radix, linear in the pairs)
        order = np.argsort(block.astype(np.uint16 if len(self.blocks) < 1 << 16 else np.int64), kind="stable")
        cuts = np.searchsorted(block[order], np.arange(len(self.blocks) + 1))
        out = {}
        for name in names:
            dtype = self.blocks[0][name].dtype
            out[name] = (np.full((len(idx), self.widths[name]), -1, dtype) if name in self.widths
                         else np.zeros(len(idx), dtype))
        for k, arrays in enumerate(self.blocks):
            sel = order[cuts[k]:cuts[k + 1]]
            if not len(sel):
                continue
            at = idx[sel] - self.starts[k]
            for name in names:
                src = arrays[name]
                if name in self.widths:
                    out[name][sel, :src.shape[1]] = src[at]
                else:
                    out[name][sel] = src[at]
        return out


def _phrase_arrays(tokens: np.ndarray, lengths: np.ndarray, words: list[str], lemmatizer, lemma_of) -> dict:
    """PhraseForms' arrays (but odd and vocab) of token rows ``tokens`` (n, T) -1 padded, ids
    into ``words`` (distinct), each phrase's ``lengths``; ``lemma_of(lemma, i)`` the id of a
    lemma of token i."""
    n_vocab = len(words)
    punct = np.fromiter((is_punctuation(w) for w in words), dtype=bool, count=n_vocab)
    function = np.fromiter((w in FUNCTION_WORDS for w in words), dtype=bool, count=n_vocab)
    end_dangles = np.fromiter((w in DANGLING_END for w in words), dtype=bool, count=n_vocab)
    start_dangles = np.fromiter((w in DANGLING_START for w in words), dtype=bool, count=n_vocab)
    is_content = ~punct & ~function

    # Lemmas of content tokens only (function words and punctuation never take part in
    # INFLECTION or CONTAINMENT), each lemma string given an id by lemma_of.
    lemma_sets: list[frozenset] = [frozenset()] * n_vocab
    for i in np.flatnonzero(is_content).tolist():
        lemma_sets[i] = frozenset(lemmatizer(words[i])) | {words[i]}
    lemma_rows = [sorted(lemma_of(x, i) for x in s) for i, s in enumerate(lemma_sets)]
    lemma_ids = _padded(lemma_rows, max((len(s) for s in lemma_sets), default=1))
    del lemma_rows

    n = len(lengths)
    present = tokens >= 0
    safe = np.where(present, tokens, 0)
    nonempty = lengths > 0
    first = safe[:, 0]
    last = safe[np.arange(n), np.maximum(lengths - 1, 0)]
    edge_punct = nonempty & (punct[first] | punct[last])
    end = nonempty & end_dangles[last]
    start = nonempty & start_dangles[first]
    end_whole = nonempty & ~end        # an empty phrase has no edge at all
    start_whole = nonempty & ~start

    def choices(p: int) -> list:
        # phrase p's tokens, each as the lemmas a unit may match it by (itself if it has none)
        return [lemma_sets[i] or (words[i],) for i in tokens[p, :lengths[p]].tolist()]

    units = getattr(lemmatizer, "units", None)
    if units:
        # A lexicalised multiword unit ("get rid of", "relate to") is neutral at its dangling
        # edges (neither bit); its tokens are matched in any of their lemmas ("related to").
        # Only phrases whose first and last tokens can be a unit's first and last words
        # (in some lemma) and whose length is a unit's are tried, one by one.
        unit_words = [u.split() for u in units]
        firsts = {w[0] for w in unit_words}
        lasts = {w[-1] for w in unit_words}
        unit_lengths = np.fromiter({len(w) for w in unit_words}, dtype=np.int64)
        first_ok = np.fromiter((bool((lemma_sets[i] or {w}) & firsts) for i, w in enumerate(words)),
                               dtype=bool, count=n_vocab)
        last_ok = np.fromiter((bool((lemma_sets[i] or {w}) & lasts) for i, w in enumerate(words)),
                              dtype=bool, count=n_vocab)
        maybe = (end | start) & first_ok[first] & last_ok[last] & np.isin(lengths, unit_lengths)
        for p in np.flatnonzero(maybe).tolist():
            if _any_unit(choices(p), units):
                end[p] = start[p] = False

    cmask = present & is_content[safe]
    if units:
        # A letter in a name (LETTERS): "a" / "i" after a content word, inside a span that
        # WordNet lists as a unit ("vitamin a", "hepatitis a supplementation", "type i
        # diabetes"), is content; the phrase's end is then whole, not dangling.
        letter = np.fromiter((w in LETTERS for w in words), dtype=bool, count=n_vocab)
        after_content = np.zeros_like(present)
        after_content[:, 1:] = present[:, 1:] & letter[safe[:, 1:]] & cmask[:, :-1]
        max_unit = int(unit_lengths.max())
        for p, j in zip(*(a.tolist() for a in np.nonzero(after_content))):
            row = choices(p)
            if any(_any_unit(row[s:e], units) for s in range(max(0, j + 1 - max_unit), j)
                   for e in range(j + 1, min(len(row), s + max_unit) + 1)):
                cmask[p, j] = True
                if j == len(row) - 1:
                    end[p], end_whole[p] = False, True
    n_content = cmask.sum(axis=1).astype(np.int32)
    # Compact content tokens to the left, keeping their order (stable sort on "not content").
    order = np.argsort(~cmask, axis=1, kind="stable")
    content = np.where(np.take_along_axis(cmask, order, axis=1), np.take_along_axis(tokens, order, axis=1), -1)
    content = np.ascontiguousarray(content[:, :max(int(n_content.max()) if n else 0, 1)], dtype=np.int32)
    # The token sequence without the genitive, compacted the same way.
    genitive = words.index(GENITIVE) if GENITIVE in words else -2
    is_genitive = tokens == genitive
    kept = present & ~is_genitive
    order = np.argsort(~kept, axis=1, kind="stable")
    core = np.where(np.take_along_axis(kept, order, axis=1), np.take_along_axis(tokens, order, axis=1), -1)
    bits = (np.where(edge_punct, _P_EDGE, 0) | np.where(end, _P_END, 0) | np.where(start, _P_START, 0)
            | np.where(end_whole, _P_END_WHOLE, 0) | np.where(start_whole, _P_START_WHOLE, 0)
            | np.where(n_content == 0, _P_NO_CONTENT, 0)
            | np.where(is_genitive.any(axis=1), _P_GENITIVE, 0)).astype(np.uint8)
    return {"tokens": tokens, "content": content, "n_content": n_content, "core": np.ascontiguousarray(core, np.int32),
            "bits": bits, "lemma_ids": lemma_ids}


@contextmanager
def _collector_paused():
    """Python's cyclic garbage collector off for the block (restored as it was).

    from_texts allocates a list per phrase (millions on a build) and no reference cycles; each
    collection pass walks every live container, so with the collector on, splitting 448k
    phrases takes ~4x longer than the split itself. Reference counting still frees everything.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _row_classes(matrix: np.ndarray) -> np.ndarray:
    """(n,) int32: one id per distinct row of `matrix`, equal rows sharing it (exact comparison)."""
    n = len(matrix)
    if not n:
        return np.zeros(0, dtype=np.int32)
    # Sort the rows (lexsort: last key primary, so the columns reversed), then number the runs
    # of equal rows; np.unique(axis=0) does the same through a structured view, ~10x slower.
    order = np.lexsort(matrix.T[::-1])
    rows = matrix[order]
    new = np.ones(n, dtype=bool)
    new[1:] = (rows[1:] != rows[:-1]).any(axis=1)
    out = np.empty(n, dtype=np.int32)
    out[order] = np.cumsum(new) - 1
    return out


def _first_occurrence(classes: np.ndarray) -> np.ndarray:
    """(n,) int32: the classes renumbered by first occurrence (the first row's class 0, the next
    new class 1, ...), as ids given while reading the rows in order."""
    if not len(classes):
        return np.zeros(0, dtype=np.int32)
    _, first = np.unique(classes, return_index=True)
    rank = np.empty(len(first), dtype=np.int32)
    rank[np.argsort(first)] = np.arange(len(first), dtype=np.int32)
    return rank[classes]


def _any_unit(choices: list, units) -> bool:
    """Whether some choice of one lemma per position, joined by spaces, is in `units`."""
    prefixes = [""]
    for k, options in enumerate(choices):
        prefixes = [f"{p} {o}" if k else o for p in prefixes for o in options]
    return any(p in units for p in prefixes)
