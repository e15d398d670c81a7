"""PPDB-style syntactic labels (the LHS field of a PPDB line) for the phrases of a database.

PPDB's left-hand side is the syntactic category that spans a paraphrase rule: a part-of-speech
tag for a single word ([NN], [VBZ], [JJ]) and a constituent for a phrase ([NP], [VP], [PP]).
pivot extracts phrases without a parser, so it labels them afterwards:

* a part-of-speech tagger, NLTK's averaged perceptron, trained on GENIA-pos (MEDLINE abstracts,
  Penn Treebank tags) from the data root: `mono/bio-ner/GENIA-pos/{train,devel}.tsv`, evaluated
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
from contextlib import contextmanager
from pathlib import Path

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
