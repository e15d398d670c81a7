"""PPDB-style syntactic labels (the LHS field of a PPDB line) for the phrases of a database.

PPDB's left-hand side is the syntactic category that spans a paraphrase rule: a part-of-speech
tag for a single word ([NN], [VBZ], [JJ]) and a constituent for a phrase ([NP], [VP], [PP]).
pivot extracts phrases without a parser, so it labels them afterwards. Two taggers:

* the build's (pivot.pipeline.lhs): :class:`LexiconTagger`, a lexicon (GENIA-pos, then the Brown
  corpus), a suffix/shape model of unknown words and contextual rules, trained in seconds and
  applied to each distinct token once (96.8% of GENIA test's tokens in lower-cased spans, 96.0%
  of lone words); see its docstring;
* for tagging text in context (a sentence given to nlpaug, docs/ecosystem.md) and as the
  reference the build's tagger was measured against: NLTK's averaged perceptron, trained on
  GENIA-pos (MEDLINE abstracts, Penn Treebank tags) from the data root:
  `mono/bio-ner/GENIA-pos/{train,devel}.tsv`, evaluated
  on `test.tsv`. Training is deterministic (NLTK shuffles the sentences between iterations with
  the global `random`; here that shuffle uses a private `random.Random(seed)`). The model is
  never shipped: it is trained on demand and cached as gzipped JSON in the user cache folder
  ($PIVOT_CACHE, else $XDG_CACHE_HOME/pivot, else ~/.cache/pivot), under a key made of the
  sha256 of the training files, the training settings and the NLTK version;
* a phrase is tagged as it is stored (lower-cased, Moses-tokenised, without sentence context).
  A tagger trained on whole sentences tags such fragments badly (84% of GENIA's test words
  tagged one by one, lower-cased, against 98% in context: a lone word looks sentence-initial),
  so the training set also holds, per sentence, SPANS_PER_SENTENCE random lower-cased spans of
  1-5 tokens with their gold tags, the shape of the database's phrases (95% of lone words).
  A phrase of one word is looked up first in a lexicon of the training words seen at least
  LEXICON_MIN times (lower-cased, most frequent tag), which recovers rare words that context
  would have decided ("treat": 5 times VB in GENIA, NN for the tagger alone): 96% of lone words;
* a single word's label is its tag; a phrase's label comes from rules on its tag sequence
  (`constituent`): [NP] for determiners/adjectives/nouns ending in a noun, [VP] for a verb
  (optionally after adverbs, a modal or "to"), [PP] for a preposition first, [ADJP]/[ADVP]
  for adjective or adverb runs, else [X].

A pair's LHS is the label of its first phrase e1 (`PhraseLabeler.label`). In PPDB both sides
of a rule share one LHS by construction (the grammar rewrites one nonterminal into two
phrases); a pivoted pair has no such guarantee, so pivot labels the phrase being paraphrased:
that is what a consumer such as nlpaug matches against the part of speech of the word it
replaces. `same_class` tells whether two labels are of one broad class (noun, verb,
adjective, adverb, preposition), which the export can require (`--agree`).
"""
from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
import random
import re
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from pivot.atomic import atomic_path
from pivot.errors import InputError

log = logging.getLogger(__name__)

GENIA_DIR = Path("mono") / "bio-ner" / "GENIA-pos"
TRAIN_FILES = ("train.tsv", "devel.tsv")
TEST_FILE = "test.tsv"
SEED = 0
N_ITER = 5
SPANS_PER_SENTENCE = 4
MAX_SPAN = 5  # pivot's default maximum phrase length
LEXICON_MIN = 2
FORMAT = 2  # of the cached model file; bump when training or the file layout changes
PSEUDO = ("UI", "TI", "AB")  # GENIA's abstract headers: "UI - <id>", "TI - <title>", "AB - <text>"

# Penn Treebank tags by role (GENIA uses PTB tags, with "(" and ")" for brackets).
NOUN = {"NN", "NNS", "NNP", "NNPS"}
VERB = {"VB", "VBD", "VBG", "VBN", "VBP", "VBZ"}
ADJ = {"JJ", "JJR", "JJS"}
ADV = {"RB", "RBR", "RBS"}
NP_TAGS = NOUN | ADJ | {"DT", "PDT", "PRP$", "WP$", "POS", "CD", "FW", "CC"}
# PPDB writes PTB bracket labels the way the Stanford/Berkeley parsers do.
TAG_LABEL = {"(": "-LRB-", ")": "-RRB-"}
# Broad classes, matching nlpaug's PartOfSpeech groups (n, v, a, r) plus prepositions.
_CLASS = {**{t: "n" for t in NOUN | {"NP"}}, **{t: "v" for t in VERB | {"MD", "VP"}},
          **{t: "a" for t in ADJ | {"ADJP"}}, **{t: "r" for t in ADV | {"ADVP"}},
          "IN": "p", "PP": "p"}


# ------------------------------------------------------------------------------------ corpus


def read_conll(path) -> list[list[tuple[str, str]]]:
    """The tagged sentences of a CoNLL `token<TAB>tag` file (blank line ends a sentence).

    GENIA's header pseudo-sentences are removed: the `UI - <id>` sentence entirely, and the
    `TI -` / `AB -` markers (tagged LS and ":") that precede an abstract's title and its first
    sentence.
    """
    path = Path(path)
    sentences, current = [], []

    def flush():
        if current and current[0][0] in PSEUDO and current[0][1] == "LS" and len(current) > 1 \
                and current[1][0] == "-":
            if current[0][0] != "UI":
                rest = current[2:]
                if rest:
                    sentences.append(rest)
        elif current:
            sentences.append(list(current))
        current.clear()

    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                flush()
                continue
            fields = line.split("\t")
            if len(fields) < 2 or not fields[0] or not fields[-1]:
                raise InputError("expected `token<TAB>tag`", path, n)
            current.append((fields[0], fields[-1]))
    flush()
    return sentences


# ------------------------------------------------------------------------------------ tagger


@contextmanager
def _seeded_shuffle(seed: int):
    """NLTK's trainer calls `random.shuffle` of the module `random`: give it a seeded generator."""
    from nltk.tag import perceptron

    saved = perceptron.random
    perceptron.random = random.Random(seed)
    try:
        yield
    finally:
        perceptron.random = saved


def phrase_spans(sentences, rng: random.Random, *, per_sentence: int = SPANS_PER_SENTENCE,
                 max_len: int = MAX_SPAN) -> list[list[tuple[str, str]]]:
    """`per_sentence` random spans of 1..max_len tokens of each sentence, lower-cased, with
    their gold tags: training (and test) examples shaped like the phrases of a database."""
    out = []
    for sent in sentences:
        for _ in range(per_sentence if sent else 0):
            n = rng.randint(1, min(max_len, len(sent)))
            i = rng.randint(0, len(sent) - n)
            out.append([(w.lower(), t) for w, t in sent[i:i + n]])
    return out


def train_tagger(sentences, *, seed: int = SEED, nr_iter: int = N_ITER,
                 spans_per_sentence: int = SPANS_PER_SENTENCE):
    """An averaged perceptron tagger trained on `sentences` ([(word, tag), ...] lists) and on
    `spans_per_sentence` lower-cased spans of each (see phrase_spans).

    Equal sentences, settings and NLTK version give equal weights: the spans are drawn from
    random.Random(seed), the only randomness of NLTK's trainer (the shuffle between
    iterations) is seeded too, and its ties break by tag name.
    """
    from nltk.tag.perceptron import PerceptronTagger

    sentences = [list(s) for s in sentences if s]
    if not sentences:
        raise ValueError("no tagged sentences to train on")
    examples = sentences + phrase_spans(sentences, random.Random(seed), per_sentence=spans_per_sentence)
    tagger = PerceptronTagger(load=False)
    with _seeded_shuffle(seed):
        tagger.train(examples, nr_iter=nr_iter)
    tagger.lexicon = word_lexicon(sentences)
    return tagger


def word_lexicon(sentences, min_count: int = LEXICON_MIN) -> dict[str, str]:
    """{lower-cased word: its most frequent tag (ties: the first by name)} over words seen
    at least min_count times: the label of a phrase of one word (PhraseLabeler)."""
    from collections import Counter, defaultdict

    counts = defaultdict(Counter)
    for sent in sentences:
        for word, tag in sent:
            counts[word.lower()][tag] += 1
    return {w: min(c.items(), key=lambda kv: (-kv[1], kv[0]))[0]
            for w, c in sorted(counts.items()) if sum(c.values()) >= min_count}


def tagger_to_json(tagger) -> dict:
    """The model's parameters as plain JSON (sorted, so equal models give equal bytes)."""
    return {"weights": {f: dict(sorted(w.items())) for f, w in sorted(tagger.model.weights.items()) if w},
            "tagdict": dict(sorted(tagger.tagdict.items())),
            "lexicon": dict(sorted(getattr(tagger, "lexicon", {}).items())),
            "classes": sorted(tagger.classes)}


def tagger_from_json(obj: dict):
    from nltk.tag.perceptron import PerceptronTagger

    tagger = PerceptronTagger(load=False)
    tagger.model.weights = obj["weights"]
    tagger.tagdict = obj["tagdict"]
    tagger.classes = tagger.model.classes = set(obj["classes"])
    tagger.lexicon = obj.get("lexicon", {})
    return tagger


def save_tagger(tagger, path, info: dict | None = None) -> Path:
    """Write the model (and `info`) as gzipped JSON, atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp, open(tmp, "wb") as raw, \
            gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as gz:
        gz.write(json.dumps({"format": FORMAT, "info": info or {}, "model": tagger_to_json(tagger)},
                            sort_keys=True, separators=(",", ":")).encode("utf-8"))
    return path


def load_tagger(path):
    """(tagger, info) from a file written by `save_tagger`."""
    with gzip.open(path, "rb") as f:
        obj = json.loads(f.read().decode("utf-8"))
    if obj.get("format") != FORMAT:
        raise InputError(f"tagger model format {obj.get('format')}, this pivot reads {FORMAT}", path)
    return tagger_from_json(obj["model"]), obj["info"]


def accuracy(tagger, sentences, *, lowercase: bool = False) -> float:
    """Token accuracy of `tagger` on tagged sentences (optionally lower-cased first)."""
    if isinstance(tagger, LexiconTagger):
        return tagger.accuracy(sentences, lowercase=lowercase)
    right = total = 0
    for sent in sentences:
        words = [w.lower() if lowercase else w for w, _ in sent]
        for (_, guess), (_, gold) in zip(tagger.tag(words), sent):
            right += guess == gold
            total += 1
    return right / total if total else float("nan")


def cache_dir() -> Path:
    """$PIVOT_CACHE, else $XDG_CACHE_HOME/pivot, else ~/.cache/pivot."""
    if os.environ.get("PIVOT_CACHE"):
        return Path(os.environ["PIVOT_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "pivot"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def genia_tagger(data_root, *, cache: str | os.PathLike | None = None, seed: int = SEED,
                 nr_iter: int = N_ITER):
    """(tagger, info): the GENIA-pos tagger of `data_root`, trained once and then cached.

    info holds the cache file, the training files' sha256, the sentence and token counts and
    the accuracy on GENIA's test split (as written and lower-cased). A missing data root or
    GENIA folder is an InputError that says what is needed; nothing falls back silently.
    """
    import nltk

    root = Path(data_root)
    folder = root / GENIA_DIR
    train_files = [folder / name for name in TRAIN_FILES]
    missing = [str(p) for p in train_files if not p.is_file()]
    if missing:
        raise InputError(f"the part-of-speech tagger trains on GENIA-pos, but {', '.join(missing)} is missing; "
                         "point --data (or PIVOT_DATA) at the data root holding mono/bio-ner/GENIA-pos", root)
    shas = {p.name: _sha256(p) for p in train_files}
    key_text = json.dumps({"format": FORMAT, "files": shas, "seed": seed, "nr_iter": nr_iter,
                           "spans": [SPANS_PER_SENTENCE, MAX_SPAN], "lexicon_min": LEXICON_MIN,
                           "nltk": nltk.__version__}, sort_keys=True)
    key = hashlib.sha256(key_text.encode()).hexdigest()
    path = Path(cache) if cache is not None else cache_dir()
    path = path / "taggers" / f"genia-pos-{key[:16]}.json.gz"
    if path.is_file():
        try:
            tagger, info = load_tagger(path)
            if info.get("key") == key:
                log.info("part-of-speech tagger: %s (GENIA-pos test accuracy %.4f)", path,
                         info.get("test_accuracy", float("nan")))
                return tagger, {**info, "path": str(path)}
        except (OSError, ValueError, KeyError, EOFError) as exc:
            log.warning("ignoring unreadable cached tagger %s (%s): retraining", path, exc)
    log.info("training the part-of-speech tagger on %s (%d iterations, seed %d)", folder, nr_iter, seed)
    sentences = [s for p in train_files for s in read_conll(p)]
    tagger = train_tagger(sentences, seed=seed, nr_iter=nr_iter)
    info = {"key": key, "files": shas, "seed": seed, "nr_iter": nr_iter, "nltk": nltk.__version__,
            "spans_per_sentence": SPANS_PER_SENTENCE, "max_span": MAX_SPAN, "lexicon_min": LEXICON_MIN,
            "train_sentences": len(sentences), "train_tokens": sum(map(len, sentences))}
    test = folder / TEST_FILE
    if test.is_file():
        gold = read_conll(test)
        words = [[(w.lower(), t)] for s in gold for w, t in s]
        info.update(test_sha256=_sha256(test), test_sentences=len(gold), test_tokens=sum(map(len, gold)),
                    test_accuracy=accuracy(tagger, gold),
                    test_accuracy_lowercased=accuracy(tagger, gold, lowercase=True),
                    test_accuracy_spans=accuracy(tagger, phrase_spans(gold, random.Random(seed + 1))),
                    test_accuracy_words=accuracy(tagger, words),
                    test_accuracy_words_lexicon=accuracy(PhraseLabeler(tagger), words))
        log.info("GENIA-pos test accuracy: sentences %.4f (lower-cased %.4f), lower-cased spans of 1-%d tokens "
                 "%.4f, lone words %.4f (with the lexicon %.4f)", info["test_accuracy"],
                 info["test_accuracy_lowercased"], MAX_SPAN, info["test_accuracy_spans"],
                 info["test_accuracy_words"], info["test_accuracy_words_lexicon"])
    save_tagger(tagger, path, info)
    return tagger, {**info, "path": str(path)}


# ------------------------------------------------------------------------------------ labels


def constituent(tags) -> str:
    """A PPDB-style label for a tag sequence: the tag of one word, a constituent for a phrase.

    NP: determiners, possessives, numbers, adjectives, nouns (and "and"/"or" inside) ending in
        a noun; VP: a verb or modal first, possibly after adverbs, or "to" + verb;
    PP: a preposition first (or "to" + anything but a verb); ADJP: adverbs/adjectives ending
        in an adjective; ADVP: adverbs only; anything else X.
    """
    tags = list(tags)
    if not tags:
        return "X"
    if len(tags) == 1:
        return TAG_LABEL.get(tags[0], tags[0])
    first = tags[0]
    lead = 0
    while lead < len(tags) and tags[lead] in ADV:
        lead += 1
    if all(t in NP_TAGS for t in tags) and tags[-1] in NOUN and first != "CC":
        return "NP"
    if lead < len(tags) and (tags[lead] in VERB or tags[lead] == "MD"):
        return "VP"
    if first == "TO" and tags[1] == "VB":
        return "VP"
    if first in ("IN", "TO"):
        return "PP"
    if all(t in ADV | ADJ for t in tags) and tags[-1] in ADJ:
        return "ADJP"
    if lead == len(tags):
        return "ADVP"
    return "X"


def label_class(label: str) -> str:
    """The broad class of a label without brackets: n, v, a, r, p; else the label itself."""
    return _CLASS.get(label.strip("[]"), label.strip("[]"))


def same_class(a: str, b: str) -> bool:
    return label_class(a) == label_class(b)


class PhraseLabeler:
    """Labels phrases as stored in the database (lower-cased, space-separated tokens).

    >>> labeler = PhraseLabeler(tagger)          # doctest: +SKIP
    >>> labeler.label("treat"), labeler.label("the drug")   # doctest: +SKIP
    ('[VB]', '[NP]')
    """

    def __init__(self, tagger):
        self.tagger = tagger
        self.lexicon = getattr(tagger, "lexicon", {})
        self._cache: dict[str, str] = {}

    def tags(self, phrase: str) -> list[str]:
        words = phrase.split()
        if len(words) == 1 and words[0] in self.lexicon:
            return [self.lexicon[words[0]]]
        return [t for _, t in self.tagger.tag(words)] if words else []

    def tag(self, words):
        """[(word, tag)] like a tagger (used by `accuracy`); one word goes through the lexicon."""
        return list(zip(words, self.tags(" ".join(words))))

    def label(self, phrase: str) -> str:
        """The bracketed label, e.g. "[NN]", "[NP]", "[X]"."""
        out = self._cache.get(phrase)
        if out is None:
            out = self._cache[phrase] = f"[{constituent(self.tags(phrase))}]"
        return out


# ------------------------------------------------------------------ the build's tagger: lexicon + suffixes

#: Brown (NLTK layout, general American English of 1961): the lexicon's back-off for words
#: GENIA never saw (pronouns, everyday verbs and nouns, names: a quarter of the tokens of bio's
#: stored phrases).
BROWN_ZIP = Path("mono") / "general" / "brown.zip"
#: Bump when the lexicon tagger's training or rules change what it tags: the build's lhs stage
#: key holds it, so a database is never labelled by a tagger other than the one its meta names.
LEXICON_TAGGER_VERSION = 1
#: Unknown words: the last SUFFIX_MAX characters at most, a suffix needs SUFFIX_MIN_COUNT rare
#: training tokens behind it, and a training word is rare when seen at most RARE_MAX times (the
#: words a tagger meets unseen look like the words it saw once, not like "the" or "cells").
SUFFIX_MAX = 5
SUFFIX_MIN_COUNT = 2
RARE_MAX = 2
#: Contextual rules (learn_rules): at most MAX_RULES, each correcting at least MIN_RULE_GAIN
#: training tokens net; learned on the training sentences cut into pieces (window_spans).
MAX_RULES = 30
MIN_RULE_GAIN = 10

# Brown's tags (lower-case in NLTK's files) to the Penn Treebank's. Brown's VB covers PTB's VB
# and VBP, HV/DO/BE are its forms of have/do/be, PP* its pronouns, QL its qualifiers ("very"),
# AP its post-determiners ("many", "other"), OD ordinals (PTB: JJ), NR adverbial nouns
# ("home", "today"; PTB: NN), PN nominal pronouns ("nothing"; PTB: NN), "*" the negation.
BROWN_PTB = {
    "nn": "NN", "nns": "NNS", "np": "NNP", "nps": "NNPS", "nr": "NN", "nrs": "NNS", "pn": "NN",
    "vb": "VB", "vbd": "VBD", "vbg": "VBG", "vbn": "VBN", "vbz": "VBZ",
    "be": "VB", "bed": "VBD", "bedz": "VBD", "beg": "VBG", "bem": "VBP", "ben": "VBN", "ber": "VBP", "bez": "VBZ",
    "hv": "VB", "hvd": "VBD", "hvg": "VBG", "hvn": "VBN", "hvz": "VBZ", "do": "VBP", "dod": "VBD", "doz": "VBZ",
    "md": "MD", "at": "DT", "dt": "DT", "dti": "DT", "dts": "DT", "dtx": "DT", "abn": "PDT", "abx": "DT",
    "abl": "RB", "ap": "JJ", "cc": "CC", "cs": "IN", "in": "IN", "to": "TO", "rp": "RP",
    "jj": "JJ", "jjr": "JJR", "jjs": "JJS", "jjt": "JJS", "od": "JJ", "cd": "CD",
    "rb": "RB", "rbr": "RBR", "rbt": "RBS", "rn": "RB", "ql": "RB", "qlp": "RB", "*": "RB",
    "pp$": "PRP$", "pp$$": "PRP", "ppl": "PRP", "ppls": "PRP", "ppo": "PRP", "pps": "PRP", "ppss": "PRP",
    "wdt": "WDT", "wp$": "WP$", "wpo": "WP", "wps": "WP", "wql": "WRB", "wrb": "WRB", "ex": "EX", "uh": "UH",
    ".": ".", ",": ",", ":": ":", "(": "(", ")": ")", "--": ":", "``": "``", "''": "''", "'": "''",
}
_BROWN_MARKS = re.compile(r"-(tl|hl|nc)\b")  # title, headline, cited: the tag is the same word class


def brown_token(word: str, tag: str) -> list[tuple[str, str]]:
    """One Brown `word/tag` as the lower-cased tokens the database stores, with PTB tags.

    The database's text is Moses-tokenised, which splits a letter-apostrophe-letter word
    before the apostrophe ("don't" -> "don 't", "it's" -> "it 's"); Brown tags such a word
    once, with a compound tag ("pps+bez"), a negation ("do*") or a possessive ("nn$"), so it is
    split the same way: it/PRP 's/VBZ, don/VBP 't/RB, man/NN 's/POS. Foreign words ("fw-...")
    are FW. Anything else with no PTB equivalent (Brown's "nil", "gonna"/vbg+to, "o'clock")
    gives no token, and the lexicon does without it.
    """
    word, tag = word.lower(), tag.lower()
    simple = BROWN_PTB.get(tag)
    if simple is not None and "'" not in word:  # the common case, no rewriting
        return [(word, simple)]
    tag = _BROWN_MARKS.sub("", tag)
    if tag.startswith("fw-"):
        return [] if "'" in word else [(word, "FW")]
    parts = tag.split("+")
    m = re.fullmatch(r"([^\W\d_]+)('[^\W\d_]+)", word)
    if m:
        head, clitic = m.groups()
        if len(parts) == 2 and parts[0] in BROWN_PTB and parts[1] in BROWN_PTB:
            return [(head, BROWN_PTB[parts[0]]), (clitic, BROWN_PTB[parts[1]])]
        if len(parts) == 1 and tag.endswith("*") and tag[:-1] in BROWN_PTB and clitic == "'t":
            return [(head, BROWN_PTB[tag[:-1]]), (clitic, "RB")]
        if len(parts) == 1 and tag.endswith("$") and tag[:-1] in BROWN_PTB and clitic == "'s":
            return [(head, BROWN_PTB[tag[:-1]]), (clitic, "POS")]
        return []
    if "'" in word.strip("'") or len(parts) != 1 or tag not in BROWN_PTB:
        return []
    return [(word, BROWN_PTB[tag])]


def word_shape(word: str) -> str:
    """A word's shape for the unknown-word model: "p" without letters or digits, else "d" if
    it holds a digit, "h" a hyphen, "a" a letter, in that order ("il-2" -> "dha")."""
    if not any(c.isalnum() for c in word):
        return "p"
    return ("d" if any(c.isdigit() for c in word) else "") + ("h" if "-" in word else "") \
        + ("a" if any(c.isalpha() for c in word) else "")


def _by_word(pairs) -> dict:
    """{word: {tag: count}} of a Counter of (word, tag) pairs."""
    out: dict = {}
    for (word, tag), c in pairs.items():
        out.setdefault(word, {})[tag] = c
    return out


def _most_frequent(counts) -> str:
    """The most frequent tag of a {tag: count} mapping; ties: the first by name (no order of
    insertion)."""
    return min(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0]


#: The context value of a phrase's first word's left and its last word's right.
EDGE = "<edge>"


def _context(tags: np.ndarray, side: str) -> np.ndarray:
    """Per position of a (n, L) tag-code matrix (-1 padding at the end of a row), the code of
    the previous ("prev") or next ("next") word's tag, -2 at a phrase's edge."""
    out = np.full(tags.shape, -2, tags.dtype)
    if side == "prev":
        out[:, 1:] = tags[:, :-1]
    else:
        out[:, :-1] = np.where(tags[:, 1:] >= 0, tags[:, 1:], -2)
    return out


def window_spans(sentences, max_len: int = MAX_SPAN) -> list[list[tuple[str, str]]]:
    """Each sentence cut into consecutive lower-cased pieces of 1, 2, ..., max_len, 1, 2, ...
    tokens (the cycle restarting per sentence): phrase-shaped training spans that hold every
    token once, with no random choice."""
    out = []
    for sent in sentences:
        i, n = 0, 1
        while i < len(sent):
            out.append([(w.lower(), t) for w, t in sent[i:i + n]])
            i, n = i + n, n % max_len + 1
    return out


def learn_rules(tagger, spans, *, max_rules: int, min_gain: int) -> list[tuple]:
    """Contextual rules learned by transformation (Brill, 1995) on tagged spans: starting from
    `tagger`'s tags, repeatedly add the rule "tag A becomes B when the previous (next) word's
    tag is C (or the phrase's edge)" that corrects the most tokens net of those it breaks,
    good(A, B, C) - bad(A, C), and apply it; stop at max_rules or below min_gain. Ties: the
    first rule in (side, A, B, C) order."""
    words = [w for sp in spans for w, _ in sp]
    gold_tags = [t for sp in spans for _, t in sp]
    distinct = sorted(set(words))
    guess = [tagger.tag_word(w) for w in distinct]
    tag_names = sorted(set(gold_tags) | set(guess))
    code = {t: i for i, t in enumerate(tag_names)}
    word_code = dict(zip(distinct, (code[t] for t in guess)))
    lengths = np.array([len(sp) for sp in spans], np.int64)
    width = int(lengths.max()) if len(lengths) else 0
    row = np.repeat(np.arange(len(spans)), lengths)
    col = np.arange(len(words)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    gold = np.full((len(spans), width), -1, np.int64)
    tags = np.full((len(spans), width), -1, np.int64)
    gold[row, col] = [code[t] for t in gold_tags]
    tags[row, col] = [word_code[w] for w in words]
    real = tags >= 0
    n = len(tag_names) + 2  # context codes: -2 (edge), then the tags, shifted by 2
    rules = []
    for _ in range(max_rules):
        best = None
        for side in ("next", "prev"):
            ctx = _context(tags, side) + 2
            wrong = real & (tags != gold)
            right = real & (tags == gold)
            good = np.bincount((tags[wrong] * n + gold[wrong]) * n + ctx[wrong], minlength=n ** 3)
            bad = np.bincount(tags[right] * n + ctx[right], minlength=n * n)
            gain = (good.reshape(n, n, n) - bad.reshape(n, 1, n)).reshape(-1)  # [A, B, C]
            k = int(np.argmax(gain))  # the first maximum: the lowest (A, B, C)
            if best is None or gain[k] > best[0]:
                best = (int(gain[k]), side, k)
        if best[0] < min_gain:
            break
        _, side, k = best
        a, b, c = k // (n * n), (k // n) % n, k % n - 2
        tags[real & (tags == a) & (_context(tags, side) == c)] = b
        rules.append((side, tag_names[a], tag_names[b], EDGE if c == -2 else tag_names[c]))
    return rules


class LexiconTagger:
    """A part-of-speech tagger for phrases without context: a lexicon, then suffixes.

    * a known word (lower-cased) gets its most frequent tag in the in-domain corpus (GENIA),
      else in the back-off corpus (Brown): a word of the domain keeps the domain's reading
      ("expression" NN) and a word the domain never uses still gets one ("you" PRP);
    * an unknown word gets the most frequent tag of the rare in-domain training words (seen at
      most RARE_MAX times) that share its shape and its longest suffix of at most SUFFIX_MAX
      characters seen on at least SUFFIX_MIN_COUNT of them ("-ated" VBN, "-ase" NN,
      "-ically" RB); a shape alone when no suffix is frequent enough; the corpus's most
      frequent tag when the shape was never seen.

    A stored phrase is a fragment without its sentence, the case a context model cannot use
    (labels.py's perceptron: 98% of GENIA's test words in their sentences, 84% as lone words),
    so each word is tagged alone and the labeller tags each distinct token once
    (:meth:`label_rows`). Deterministic: every choice is a count, ties by tag name.
    """

    def __init__(self, lexicon: dict, suffixes: dict, default: str, rules=()):
        self.lexicon = lexicon      # word -> tag
        self.suffixes = suffixes    # "shape|suffix" (suffix may be "") -> tag
        self.default = default
        self.rules = [tuple(r) for r in rules]  # (side, from, to, context tag or EDGE), in order

    @classmethod
    def train(cls, sentences, backoff=(), *, suffix_max: int = SUFFIX_MAX,
              suffix_min_count: int = SUFFIX_MIN_COUNT, rare_max: int = RARE_MAX) -> "LexiconTagger":
        """From tagged sentences ([(word, tag), ...] lists, in-domain) and back-off tokens
        ((word, tag) pairs): the lexicon of both, the suffixes of the in-domain rare words."""
        from collections import Counter, defaultdict

        pairs = Counter((w.lower(), t) for sent in sentences for w, t in sent)
        if not pairs:
            raise ValueError("no tagged words to train on")
        counts = defaultdict(dict)  # word -> {tag: count}
        for (word, tag), c in pairs.items():
            counts[word][tag] = c
        lexicon = {w: _most_frequent(c) for w, c in _by_word(Counter(backoff)).items()}
        lexicon.update((w, _most_frequent(c)) for w, c in counts.items())
        by_key = defaultdict(Counter)
        for word, c in counts.items():
            if sum(c.values()) > rare_max:
                continue
            shape = word_shape(word)
            for k in range(min(suffix_max, len(word)) + 1):
                by_key[f"{shape}|{word[len(word) - k:]}"].update(c)
        suffixes = {key: _most_frequent(c) for key, c in sorted(by_key.items())
                    if sum(c.values()) >= suffix_min_count or key.endswith("|")}
        total = Counter()
        for (_, tag), c in pairs.items():
            total[tag] += c
        return cls(dict(sorted(lexicon.items())), suffixes, _most_frequent(total))

    def with_rules(self, spans, *, max_rules: int = MAX_RULES, min_gain: int = MIN_RULE_GAIN) -> "LexiconTagger":
        """This tagger and the contextual rules learned on `spans` (see learn_rules)."""
        return LexiconTagger(self.lexicon, self.suffixes, self.default,
                             learn_rules(self, spans, max_rules=max_rules, min_gain=min_gain))

    def tag_word(self, word: str) -> str:
        tag = self.lexicon.get(word)
        if tag is not None:
            return tag
        shape = word_shape(word)
        for k in range(min(SUFFIX_MAX, len(word)), -1, -1):
            tag = self.suffixes.get(f"{shape}|{word[len(word) - k:]}")
            if tag is not None:
                return tag
        return self.default

    def tag(self, words):
        """[(word, tag)] like NLTK's taggers (used by `accuracy`): each word's tag, then the rules."""
        tags = [self.tag_word(w) for w in words]
        for side, a, b, c in self.rules:
            ctx = [EDGE, *tags[:-1]] if side == "prev" else [*tags[1:], EDGE]
            tags = [b if t == a and x == c else t for t, x in zip(tags, ctx)]
        return list(zip(words, tags))

    def tag_names(self, more=()) -> list[str]:
        """Every tag this tagger can give (and ``more``), sorted: the codes of the array methods."""
        return sorted(set(self.lexicon.values()) | set(self.suffixes.values()) | {self.default}
                      | {t for r in self.rules for t in r[1:] if t != EDGE} | set(more))

    def _apply_rules(self, tags: np.ndarray, code_of: dict) -> np.ndarray:
        """The rules on a (n, L) matrix of tag codes (-1 padding at a row's end), in place: each
        rule at once on every position, as :meth:`tag` applies it to one phrase."""
        for side, a, b, c in self.rules:
            ctx = _context(tags, side)
            tags[(tags == code_of[a]) & (ctx == (-2 if c == EDGE else code_of[c]))] = code_of[b]
        return tags

    def accuracy(self, sentences, *, lowercase: bool = False) -> float:
        """labels.accuracy of this tagger, on arrays: each distinct word tagged once, the rules
        on a matrix of the sentences (the tags of :meth:`tag`, sentence by sentence)."""
        words = [w.lower() if lowercase else w for sent in sentences for w, _ in sent]
        if not words:
            return float("nan")
        gold = [t for sent in sentences for _, t in sent]
        tag_names = self.tag_names(gold)
        code_of = {t: i for i, t in enumerate(tag_names)}
        distinct = {w: i for i, w in enumerate(dict.fromkeys(words))}
        word_code = np.array([code_of[self.tag_word(w)] for w in distinct], np.int64)
        lengths = np.array([len(sent) for sent in sentences], np.int64)
        row = np.repeat(np.arange(len(lengths)), lengths)
        col = np.arange(len(words)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        tags = np.full((len(lengths), int(lengths.max())), -1, np.int64)
        tags[row, col] = word_code[np.fromiter(map(distinct.__getitem__, words), np.int64, count=len(words))]
        guess = self._apply_rules(tags, code_of)[row, col]
        right = int((guess == np.fromiter(map(code_of.__getitem__, gold), np.int64, count=len(gold))).sum())
        return right / len(words)

    def label(self, phrase: str) -> str:
        """The bracketed label of a stored phrase, e.g. "[NN]", "[NP]", "[X]"."""
        return f"[{constituent(t for _, t in self.tag(phrase.split()))}]"

    def label_rows(self, rows: np.ndarray, tokens: list[str]) -> tuple[np.ndarray, list[str]]:
        """(codes, names): the label of each phrase given as a row of token ids (-1 padded at
        the end) into `tokens`; label i is `names[codes[i]]` ("[NP]"), names sorted.

        Each distinct token is tagged once and each distinct tag sequence labelled once
        (constituent's rules), so the cost is the vocabulary's and a few array passes.
        """
        rows = np.asarray(rows)
        if not len(rows):
            return np.zeros(0, np.uint16), []
        ids, inverse = np.unique(rows, return_inverse=True)
        inverse = inverse.reshape(rows.shape)
        tag_names = self.tag_names()
        code_of = {t: i for i, t in enumerate(tag_names)}
        token_tag = np.array([code_of[self.tag_word(tokens[i])] if i >= 0 else -1 for i in ids.tolist()], np.int16)
        tags = self._apply_rules(token_tag[inverse], code_of)
        # one integer per tag sequence (the codes + 1, 0 for padding, in base len(tag_names) + 1):
        # a 1-d unique instead of a row-wise one, several times faster
        base = len(tag_names) + 1
        if base ** tags.shape[1] >= 2 ** 63:
            raise ValueError(f"{tags.shape[1]} tokens of {len(tag_names)} tags do not fit a 64-bit key")
        key = np.zeros(len(tags), np.int64)
        for j in range(tags.shape[1]):
            key = key * base + (tags[:, j].astype(np.int64) + 1)
        keys, seq_of_row = np.unique(key, return_inverse=True)
        seqs = (keys[:, None] // base ** np.arange(tags.shape[1] - 1, -1, -1, dtype=np.int64)) % base - 1
        seq_labels = [f"[{constituent(tag_names[t] for t in s if t >= 0)}]" for s in seqs.tolist()]
        names = sorted(set(seq_labels))
        code_of_label = np.array([names.index(lab) for lab in seq_labels], np.uint16)
        return code_of_label[seq_of_row.reshape(-1)], names
