"""PPDB 2.0 for a domain: the learned paraphrase score, entailment relations and sizes.

PPDB 2.0 (Pavlick, Rastogi, Ganitkevitch, Van Durme, Callison-Burch, ACL 2015) ranks a pair by
``PPDB2.0Score``, a regression fitted to human ratings of paraphrase quality over the pair's
features, gives it the probabilities of six entailment relations from a classifier (Pavlick
et al., ACL 2015 long paper), and cuts the ranked list into sizes S ... XXXL. This stage does
the same for the pairs a build stores, with the build's own models as features, so the domain
still moves the ranking.

Features of a directed pair (e1, e2) (:func:`pair_features`; natural logs):

    logp[m], logp_rev[m]        log p_m(e2|e1), log p_m(e1|e2) for every stored model m;
    logp_min[m]                 min of the two: the pair is strong both ways
    missing[m], missing_rev[m]  a direction m does not propose gets log FLOOR_P and indicator 1
                                (pivot.store.combined's floor), so the fit learns the offset of
                                "no opinion" instead of trusting the floor
    log1p_n_pivots              log(1 + foreign phrases the pair pivots through)
    n_pivot_languages           distinct languages among the pair's stored best pivots (<= 3)
    log1p_count_e1, _e2         log(1 + bitext support) of each phrase
    n_words_e1, _e2, n_words_absdiff
    token_jaccard               shared token positions / (n1 + n2 - shared)
    char3_jaccard               Jaccard of the character trigram sets of "#e1#" and "#e2#" (the
                                first TRIGRAM_CHARS characters)
    e1_contains_e2, e2_contains_e1   every token of one phrase occurs in the other (and it is shorter)
    edge_punct, function_only, dangling, inflection, containment
                                the well-formedness flags (pivot.pipeline.wellformed)
    fwd_gt_rev                  General's p(e2|e1) > p(e1|e2): the direction of a pair's asymmetry
    vec_cos, vec_missing        with word vectors (pivot.pipeline.vectors: PPMI-SVD of the bitext's
                                English, trained once per build): the cosine of the two phrases'
                                vectors (each the mean of its words'), and "either has none"
    vec_e1[i], vec_e2[i]        each phrase's vector itself, coordinate i (the relations only: what
                                kind of thing a phrase names tells which relations it enters; with
                                the cosine, +3.6 macro-F1 points on held-out synsets of the bio
                                build: 0.385, string-only 0.324; the cosine alone gave +1)

The phrase coordinates cost nothing per pair at apply time: their part of the softmax's linear
predictor is a sum over one phrase's coordinates, computed once per phrase
(RelationModel.phrase_terms), so a pair adds two looked-up rows. (Measured on the bio build
and left out: the product v1 * v2 of the two vectors (dim more columns; validation -0.3
points), |v1 - v2| (+0.7 validation, -0.7 test), the vectors' norms, cosine bins, the cosine
times the direction features. For the relations, also left out, none worth
half a macro-F1 point on validation: each phrase's number of translations and the stored
pivots' share of them, the paraphrase graph's degrees and ranks, gradient-boosted trees over
these features, distributional inclusion measures; README, the PPDB 2.0 layer. Measured
beside the word vectors and left out, none +1 validation point: Hearst-pattern and
coordination counts of the pair in the bitext's English (hits for 1-2% of the labelled pairs),
WeedsPrec / ClarkeDE over the vectors' own PPMI context rows, and per pivot language the
inclusion and Jaccard of the two phrases' translation sets; bench/bench_relation_features.py.)

**Score** (``PPDB2.0Score``, higher is better, on the ratings' 1-5 scale): a linear score over
the standardised features of :func:`score_features` (every feature),

    score = b0 + sum_j b_j z_j,   z_j = (x_j - mean_j) / sd_j   (mean, sd of the rated training rows),

fitted to two things at once, the ratings across pairs and the order inside candidate lists:

    b = argmin  sum_i (y_i - score_i)^2                                        (ratings)
              + gamma n (1/L) sum_l w_l sum_{s in S_l, t in T_l} (1 - (score_s - score_t))^2   (lists)
              + lambda (sum_General b_j^2 + mu sum_others b_j^2)

Ratings: the train part of the PPDB 2.0 human ratings (``[ppdb2] ratings``) restricted to the
pairs the database stores (each stored direction of a rated pair is a row; n rows). The rated
pairs are split into train and dev by a seeded hash of the unordered normalised pair
(pivot.eval.gold.pair_key / pivot.hashes.unit_hash, the split every gold of the project uses).

Lists: what a lookup shows is one phrase's candidates in order, which a few hundred rated pairs
of many different phrases do not see. WordNet does: for training-side WordNet phrases (the
relation split's, so no held-out synset), the candidate list (pairs no HIDDEN flag hides) with
S_l its WordNet synonyms and T_l the other candidates; every synonym should score
WITHIN_MARGIN = 1 rating point above every other candidate of its list, a squared pairwise
loss (RankRLS, Pahikkala et al. 2009) with each list weighing the same (w_l = 1/(|S_l||T_l|)).
Squared, the objective stays a ridge regression with a closed form (``_ridge``): the list
term adds gamma n A to Z'Z and gamma n c to Z'y, A and c the lists' pair moments
(WithinLists.pair_moments), computed once on the raw features and rescaled per standardiser.
Without the list term the ratings taught weights that lift rare fragments inside a list
(across rated pairs, rarer and longer phrases and a high p(e1|e2) go with higher ratings; in
one phrase's list those weights put *blood pressure ; high* above *hypertension*), which is why
an earlier version left counts, lengths and the reverse direction out; the lists now set those
weights' within-list sign, and keeping them gains on held-out lists (SCORE_EXCLUDED).

General's features form the anchor group (penalty lambda), every other feature (the domain
models', the pivots', the strings', the flags') has lambda * mu: with a few hundred rated pairs,
seven collinear domain models and a dozen string features would fit noise.

lambda, mu and gamma (SCORE_LAMBDAS, SCORE_MULTIPLIERS, SCORE_GAMMAS; gamma = 0 is the ratings
alone) are chosen on training data only: WITHIN_VALIDATION of the lists are held back (by a
hash of the query), and each setting gets the WordNet synonyms its fit ranks into their top
WITHIN_K, and the mean Spearman rho of 5-fold cross-validation on the rated training rows (folds
by the same hash with seeds 1..5, the pooled out-of-fold predictions; the list term in every
fold's fit). Chosen: the best rho among the settings whose held-back hits are within one
binomial standard error of the best hits (the lists decide first, since they are what a lookup
shows and they are thousands; the ratings decide among what the lists cannot tell apart). The
fit is then reported on the dev ratings (rho, against General's p(e2|e1)) and on the lists of the
held-out synsets (synonyms in the top WITHIN_K, against p(e2|e1)'s order; at most
MAX_HELD_QUERIES lists, those of the smallest hash(seed, query text)).

**Relations**: a multinomial logistic regression (softmax, L2 penalty lambda on the
standardised non-constant features, class weights w_c proportional to n_c^-beta, L-BFGS) over
the same features, trained on the pairs the database stores whose two phrases are WordNet 3.0 lemmas, labelled by
WordNet's links (pivot.pipeline.wordnet). Held-out evaluation by synset: a phrase's key is its
smallest synset id; a key is held out when hash(seed, key) < ``relation_test_fraction``; the
test pairs have both keys held out, the training pairs neither (the rest is not used), so no
test synset is seen in training; at most ``max_relation_pairs`` training pairs and
MAX_RELATION_TEST_PAIRS test pairs, those of the smallest hash(seed, "e1\te2") of each side. lambda and beta are chosen by macro-F1 on a validation part of
train (the same rule with seed + 1). beta = 1 is full class balance: with Independent 60-70% of the
pairs and four classes near 5% each, it predicts the small classes for most Independent pairs
(on the bio build: Independent recall 0.38, and a string-only classifier that calls 60% of the
pairs Exclusion); beta = 1/2 or 3/4 scores higher for both classifiers (RELATION_BALANCE), so
both are selected over the same grid, the fair comparison. Reported against the majority class and a classifier
over the string features only (STRING_FEATURES), with each one's confusion matrix.

**Sizes**: over the pairs no HIDDEN flag hides, ordered by score, S holds the best 1/32, M 1/16,
L 1/8, XL 1/4, XXL 1/2; a pair is in size X iff score >= cut[X]; XXXL's cut is the lowest score
of all, so it holds every pair.

The stage makes the phrases' forms a block of phrases at a time (:func:`forms_task`) and labels
the pairs per range of the pivot stage's rows (:func:`label_range`), Dask tasks, while tasks read
the phrases' trigrams and WordNet synsets a block of phrases at a time
(:func:`phrase_side_task`) and tasks make the phrases' word vectors (pivot.pipeline.vectors: counts by
shard, PPMI and SVD from the stage's start, beside the stored phrases' ids; phrase means by
block once the phrases' rows are written: _build_job); fits the relation classifier's grid
and refits as tasks (:func:`relation_task`) beside the score's fit, a task too
(:func:`score_side_task`); and applies the
fit per range of rows (:func:`apply_range`). Every number is a function of the inputs only: the
same bytes for any number of workers (each fit is the same arithmetic in whichever process runs
it, and the applied sums run in a fixed order, one feature after another).

Memory: this process holds no array with an entry per stored phrase, phrase id or stored pair.
The stored phrases' ids, each phrase id's slot and the pivots' ids are written to a file by
windows of ids (write_ids), the pivots' languages, the trigram pointers and the WordNet side
by blocks of phrases (_phrase_side_job, write_lexical), the texts' starts as the texts are
written (write_text_file); the fits read the slots, synsets and texts of the rows they select
from those files (LexicalFile, TextFile.many), the phrases' rows and pivots' languages too
(_rows_features). What it holds beyond a block or a window is the rows the relations' fit selects
(the score's fit, a task since session 16, holds its own likewise), each
capped whatever the corpus: the rated rows (the ratings file's), the relation training rows
(max_relation_pairs) and test rows (MAX_RELATION_TEST_PAIRS), the training lists
(MAX_WITHIN_QUERIES lists, MAX_WITHIN_ROWS rows, their features made by blocks into one
array: _rows_columns) and the held-out lists (MAX_HELD_QUERIES, without features); the
survey's selections are folded in as each part's comes (SelectionFold), and the reports score
their rows by blocks of REPORT_ROWS (_rows_map). Left growing: a few numbers per pivot part
(PairTable's bounds, the tasks' small results) and the words' arrays (the vocabulary's). The
peak was the score's fit (the training lists' features and their held-back copy, WordNet's
profiles of the relations' selected phrases beside them; since session 16 the fit is a task, so
in one process (--workers 1) only), measured by role
(bench/measure_roles.py, the stage rerun beside lhs and combine, --workers 2): bio 0.517 ->
0.456 GiB RSS, bio-multi 0.633 -> 0.536 (from bio's 448k stored phrases to bio-multi's 2.37M,
65 -> 45 bytes a stored phrase; what is left of that slope is the training lists filling
towards their cap, 87,647 -> 137,243 of MAX_WITHIN_ROWS' 150,000 rows, ~0.02 GiB more at the
cap). Never one entry per stored pair: the phrases' token rows come a block of ids
at a time (write_phrase_rows), and the tasks read their part's phrases alone (gathered_forms,
part_lexical, PhraseFile.rows_of); every pass over the pairs reads one pivot part at a time
(:class:`PairTable`), the labels stay in their per-part files, and the size cuts are selected
exactly over the parts' scores (:func:`size_cuts_parts`). The per-phrase feature arrays
(:class:`Phrases`: trigram codes, vectors, tokens) go to a file as soon as they are made; the
fits read their pairs' phrases' rows from it (:class:`PhraseFile`), and an apply task each
block's phrases' rows, through maps of a bounded window of the file (PhraseFile.gather):
mapped whole, each worker's resident set held most of the file's pages (a block's e2 are
anywhere; 1.1 GB on bio-multi).
A forms task reads its block of texts, an apply task a block of its part at a time, and every
task gives its freed heap back when it ends. On bio-multi (2.37M phrases, 32.4M
pairs; the stage rerun beside lhs and combine, --workers 2) the peak summed over the processes
went from 3.50 to 2.13 GiB PSS sampled every 0.5 s (a transient: sampled every 2 s, the
forms task beside the phrase side went from 3.47 to 1.45 GiB, the apply tasks beside this
process from 2.59 to 1.79).
"""
from __future__ import annotations

import functools
import itertools
import json
import logging
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pivot import portable
from pivot.arrays import unique
from pivot.errors import InputError
from pivot.pipeline.bundle import IDS_WINDOW, Blocks, open_bundle, present_windows, save_bundle
from pivot.pipeline.engine import release_heap
from pivot.pipeline.stage import Stage
from pivot.pipeline.wordnet import LEXICON, RELATIONS
from pivot.store.combined import FLOOR_LOG_P

log = logging.getLogger("pivot")


def _heap_released(task):
    """The task, then its freed heap back to the system (release_heap). A worker runs the
    stage's tasks one after another, and glibc keeps what a task freed resident in the
    worker beside the next task (the forms task's ~0.4 GB beside the label tasks on bio-multi)."""
    @functools.wraps(task)
    def run(*args, **kwargs):
        try:
            return task(*args, **kwargs)
        finally:
            release_heap()
    return run


#: Characters of a phrase whose trigrams char3_jaccard compares (longer phrases are cut).
TRIGRAM_CHARS = 40
#: The ratings' pairs split into train and dev; cross-validation folds on train.
CV_FOLDS = 5
CV_SEEDS = (1, 2, 3, 4, 5)
#: The penalty grids: lambda for the score and the relations, mu for the score's non-General group.
SCORE_LAMBDAS = (1.0, 10.0, 100.0)
SCORE_MULTIPLIERS = (10.0, 100.0, 1000.0)
RELATION_LAMBDAS = (1e-3, 1e-2)
#: The class-weight exponents beta of the relation fit (w_c proportional to n_c^-beta). Full
#: balance (1) is left out: on the bio build's validation part it scored 0.303 (0.250 string-only)
#: against 0.362 (0.326) for the best of these, and each setting costs two fits (~1.5 CPU s each).
RELATION_BALANCE = (0.5, 0.75)
#: Validation share of the relation training pairs (lambda's choice).
RELATION_VALIDATION = 0.2
#: Fewest training rows a fit accepts: below this it is noise, and the build says so.
MIN_RATED_PAIRS = 20
MIN_RELATION_PAIRS = 60
#: The sizes, smallest first, and the share of the visible pairs each holds.
SIZES = ("s", "m", "l", "xl", "xxl", "xxxl")
SIZE_SHARES = (1 / 32, 1 / 16, 1 / 8, 1 / 4, 1 / 2, 1.0)
#: Pairs an apply task turns into features at a time (its memory, not its result: rows are independent).
APPLY_ROWS = 1 << 16

#: The within-list term of the score (module docstring, **Score**): WordNet synonyms in the
#: top WITHIN_K of a WordNet phrase's candidate list; at most MAX_WITHIN_QUERIES training-side
#: lists (the smallest slots; MAX_WITHIN_ROWS rows), WITHIN_VALIDATION of them (by a hash of the query) held back to
#: choose the penalties; a synonym should score WITHIN_MARGIN (one rating point) above another
#: candidate of its list; SCORE_GAMMAS: the weight of that term per rated row (0: ratings only).
WITHIN_K = 10
MAX_WITHIN_QUERIES = 4000
#: The held-out evaluations' samples (the survey's: survey_range, SelectionFold), so that what
#: the fits' reports hold is bounded whatever the corpus: at most MAX_HELD_QUERIES held-out
#: within lists (of the held-out side's queries, those of the smallest hash of the query's
#: text) and MAX_RELATION_TEST_PAIRS relation test pairs (the smallest hash of the pair's
#: texts, as the training pairs' max_relation_pairs). Set above what bio-multi has (4,439
#: held-out lists, 35,883 test pairs; bio 2,266 and 14,465), so that both report on every one
#: of theirs, as before the caps. A list holds at most the stored models / min_p_e2_given_e1
#: rows (the pivot stage's recall floor; bio-multi's average 34). Changing either changes
#: what a larger build writes: bump the stage's version (STAGE).
MAX_HELD_QUERIES = 8_000
MAX_RELATION_TEST_PAIRS = 50_000
#: The training lists' rows: at most MAX_WITHIN_ROWS (their score features, ~0.8 kB a row, are
#: held through the score's fit and its copies), the lists of the smallest query slots whose
#: rows fit, MAX_WITHIN_QUERIES at most. Lists grow with the corpus (bio 87,647 rows in its
#: 4,000 lists, bio-multi 137,243): set above bio-multi's, so that both keep every one of
#: their 4,000 lists, as before the cap.
MAX_WITHIN_ROWS = 150_000
WITHIN_VALIDATION = 0.3
WITHIN_MARGIN = 1.0
SCORE_GAMMAS = (0.0, 1.0, 3.0, 10.0, 30.0)
FORM_FEATURES = ("edge_punct", "function_only", "dangling", "inflection", "containment")
#: Pair features the relations use but the score does not (the phrase vectors' coordinates are
#: never the score's). Of the others none since the score has its within-list term: without it, the ratings (rarer and longer phrases rated higher across pairs) taught
#: weights that lift rare, long fragments above the synonyms inside one phrase's list, and the
#: counts, lengths and the reverse direction alone were left out (WordNet synonyms in the top
#: 10 of the WordNet queries: 271 by p(e2|e1), 216 with them, 277 without); with the term, the
#: lists themselves fix those weights' within-list sign, and the held-out lists gain from them
#: (fits on the bio build's work folder over the same 12 settings, lambda 1/10, mu 10/100,
#: gamma 1/3/10: 4,391-4,504 WordNet synonyms of held-out synsets in the top 10 with them,
#: 4,196-4,311 without, 3,975 by p(e2|e1); dev rho 0.542-0.578 with, 0.490-0.571 without).
#: The word vectors' cosine (and its missing flag), "distributional similarity in the in-domain
#: text", measured as a score feature on the bio build and left out: dev rho 0.556 with it,
#: 0.560 without, the same 4,483 held-out synonyms in the top 10 (it correlates little with the
#: ratings once the pivots are in, as pivot.eval.distributional's cosine did).
SCORE_EXCLUDED: tuple = ("vec_cos", "vec_missing")
#: The string features: what a classifier that sees only the two strings knows.
STRING_FEATURES = ("n_words_e1", "n_words_e2", "n_words_absdiff", "token_jaccard", "char3_jaccard",
                   "e1_contains_e2", "e2_contains_e1", *FORM_FEATURES)
SHARED_FEATURES = ("log1p_n_pivots", "n_pivot_languages", "log1p_count_e1", "log1p_count_e2",
                   *STRING_FEATURES[:7], *FORM_FEATURES, "fwd_gt_rev")
#: The word vectors' pair features (pivot.pipeline.vectors; a build with vectors only).
VECTOR_PAIR_FEATURES = ("vec_cos", "vec_missing")
#: The phrase-vector columns' prefixes: vec_e1[i], vec_e2[i] are coordinate i of each phrase's vector.
PHRASE_PREFIXES = ("vec_e1[", "vec_e2[")


def pair_feature_names(models: list[str], dim: int = 0) -> list[str]:
    """The columns pair_features gives for stored models ``models`` (General first) and word
    vectors of dimension ``dim`` (0: none), in order."""
    names = []
    for m in models:
        names += [f"logp[{m}]", f"logp_rev[{m}]", f"logp_min[{m}]", f"missing[{m}]", f"missing_rev[{m}]"]
    return names + list(SHARED_FEATURES) + (list(VECTOR_PAIR_FEATURES) if dim else [])


def feature_names(models: list[str], dim: int = 0) -> list[str]:
    """Every feature column (the fits' matrices): pair_feature_names, then each phrase's vector
    coordinates, e1's and e2's (vec_e1[0..dim-1], vec_e2[0..dim-1])."""
    return pair_feature_names(models, dim) + [f"{p}{i}]" for p in PHRASE_PREFIXES for i in range(dim)]


def is_phrase_feature(name: str) -> bool:
    return name.startswith(PHRASE_PREFIXES)


def score_features(models: list[str], dim: int = 0) -> list[str]:
    """The score's features: the pair features without SCORE_EXCLUDED (the phrase vectors'
    coordinates are the relations' alone: a few hundred ratings cannot fit 2 x dim weights)."""
    return [n for n in pair_feature_names(models, dim) if n not in SCORE_EXCLUDED]


def anchor_features(models: list[str]) -> set[str]:
    """General's features: the score's anchor group (penalty lambda; every other feature has
    lambda * mu)."""
    m = models[0]
    return {f"logp[{m}]", f"logp_min[{m}]", f"missing[{m}]", f"missing_rev[{m}]"}


# ------------------------------------------------------------------------------------ phrases


@dataclass
class Phrases:
    """What the features need of the English phrases the pairs hold, one row per phrase
    (``rows``: a phrase id's row; the build keeps rows for the stored phrases only, a third of
    the translation table's ids on bio-multi, whose (ids x dim) vectors were 1.35 GB)."""

    n_words: np.ndarray      # (n,) int8
    log_count: np.ndarray    # (n,) float64: log(1 + bitext support)
    tokens: np.ndarray       # (n, L) int32 token ids, -1 padded
    tri_ptr: np.ndarray      # (n + 1,) int64: trigrams of row i are tri[tri_ptr[i]:tri_ptr[i+1]]
    tri: np.ndarray          # trigram codes (uint32, or int64: char_trigrams), ascending, distinct within a phrase
    f_lang: np.ndarray       # (n_f,) int16 language index of each foreign phrase id (-1: unknown)
    row_of: np.ndarray       # (n_e,) int32 the row of each English phrase id (-1: none)
    vec: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    #                          (n, dim) float32 word-vector mean of each phrase (pivot.pipeline.vectors;
    #                          dim 0: a build without vectors)
    vec_has: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))   # (n,) the phrase has one

    def rows(self, ids) -> np.ndarray:
        """The rows of phrase ids (int64); an id without a row is an error."""
        rows = np.asarray(self.row_of)[np.asarray(ids, np.int64)].astype(np.int64)
        if len(rows) and rows.min() < 0:
            raise ValueError("phrase ids without a row in the phrases' arrays")
        return rows

    @property
    def dim(self) -> int:
        return int(self.vec.shape[1]) if self.vec.ndim == 2 else 0

    def save(self, path) -> None:
        save_bundle(path, **{k: getattr(self, k) for k in self.__dataclass_fields__})

    @classmethod
    def load(cls, *paths, mmap: bool = False) -> "Phrases":
        """Read the arrays from the bundle(s) ``paths`` (each array from the first that holds
        it; mmap: map them, so a task touches only the pages of its pairs' phrases and the
        workers share the page cache)."""
        found = {}
        for path in paths:
            with open_bundle(path) as b:
                found.update((k, b.memmap(k) if mmap else b[k]) for k in cls.__dataclass_fields__
                             if k in b and k not in found)
        return cls(**found)


#: The Phrases arrays with a row per phrase (PhraseFile.take gathers these rows).
PHRASE_ROW_ARRAYS = ("n_words", "log_count", "tokens", "vec", "vec_has")


class PhraseFile:
    """The stage's Phrases, in their file (Phrases.save), as this process reads them: the rows
    of the phrases a fit's pairs hold (:meth:`take`), mapped for the read and unmapped after it.

    The fits read a few hundred thousand pairs' phrases; held whole, the arrays (trigram codes,
    vectors, tokens: 1.1 GiB on bio-multi's 2.37M phrases) stayed in this process through the
    fits and beside the label tasks' workers. A map kept open would keep every page a read
    touched in this process's resident set (as PairTable's reads)."""

    def __init__(self, *paths, lookup: bool = True):
        """lookup = False: neither row_of nor f_lang is read (a caller that reads the rows of
        its phrase ids and its pivots' languages alone: rows_of, pivot_languages)."""
        self.paths = [Path(p) for p in paths]
        #: the bundle each array is read from (the first of ``paths`` that holds it)
        self.where = {}
        for path in self.paths:
            with open_bundle(path) as b:
                self.where.update((k, path) for k in Phrases.__dataclass_fields__ if k in b and k not in self.where)
        with open_bundle(self.where["row_of"]) as b:
            self.row_of = b["row_of"] if lookup else None
            self.f_lang = b["f_lang"] if lookup else None
            self.n = int(b.shape("n_words")[0])
        with open_bundle(self.where["vec"]) as b:
            shape = b.shape("vec")
            self.dim = int(shape[1]) if len(shape) == 2 else 0

    def rows(self, ids) -> np.ndarray:
        """The rows of phrase ids (int64); an id without a row is an error."""
        rows = self.row_of[np.asarray(ids, np.int64)].astype(np.int64)
        if len(rows) and rows.min() < 0:
            raise ValueError("phrase ids without a row in the phrases' arrays")
        return rows

    def rows_of(self, ids) -> np.ndarray:
        """The rows of phrase ids ``ids`` (ascending, distinct; int64) read from the file's
        row_of through bounded windows (Bundle.rows); an id without a row is an error."""
        with open_bundle(self.where["row_of"]) as b:
            rows = b.rows("row_of", np.asarray(ids, np.int64)).astype(np.int64)
        if len(rows) and rows.min() < 0:
            raise ValueError("phrase ids without a row in the phrases' arrays")
        return rows

    def pivot_languages(self, pivots) -> tuple[np.ndarray, np.ndarray]:
        """(f_lang, numbers): the languages of the distinct foreign ids of ``pivots`` (>= 0;
        -1 pads), read through bounded windows of the file's f_lang, and ``pivots`` with each id
        replaced by its number among them (-1 kept): f_lang[numbers] is the file's
        f_lang[pivots]. A file without languages gives an empty f_lang (pair_features: -1)."""
        pivots = np.asarray(pivots)
        with open_bundle(self.where["f_lang"]) as b:
            if not b.shape("f_lang")[0]:
                return np.zeros(0, np.int16), pivots
            known = pivots >= 0
            distinct, number = np.unique(pivots[known].astype(np.int64), return_inverse=True)
            out = np.full(pivots.shape, -1, np.int64)
            out[known] = number
            return b.rows("f_lang", distinct), out

    def take(self, ids) -> Phrases:
        """The Phrases of phrase ids ``ids`` alone: their rows (ascending), ``row_of`` renumbered
        to them (-1 for every other id). A feature of a pair is a function of its two phrases'
        rows, so it is the same computed on these as on the whole."""
        ids = np.asarray(ids, np.int64)
        whole = self.rows(ids)
        rows = unique(whole)
        row_of = np.full(len(self.row_of), -1, np.int32)
        row_of[ids] = np.searchsorted(rows, whole)
        part = self.gather(rows)
        part.row_of = row_of
        return part

    def gather(self, rows) -> Phrases:
        """The Phrases of rows ``rows`` (ascending, distinct) of the file alone, numbered 0..n-1
        in that order (``row_of``: the identity; pair features then take these numbers as phrase
        ids). Each array's rows are read through bounded windows of the file (Bundle.rows), so
        however widely the rows are spread, this process never maps the whole file: an apply
        task's blocks reach most rows of every array (each block's e2 is anywhere), and with
        the file mapped whole each worker's resident set held most of its pages (1.1 GB
        shared on bio-multi, the build's peak: both workers' maps at once)."""
        rows = np.asarray(rows, np.int64)
        if len(rows) and (rows[0] < 0 or rows[-1] >= self.n or np.any(rows[1:] <= rows[:-1])):
            raise ValueError(f"phrase rows must be distinct, ascending and in 0..{self.n - 1}")
        part = {}
        for k in PHRASE_ROW_ARRAYS:
            with open_bundle(self.where[k]) as b:
                if k in ("vec", "vec_has") and not self.dim:
                    part[k] = b[k]                                # a build without vectors: empty
                    continue
                part[k] = b.rows(k, rows)
        with open_bundle(self.where["tri"]) as b:
            # ptr[r] and ptr[r + 1] of each row r in one ascending pass (r0, r0 + 1, r1, r1 + 1, ...)
            bounds = b.rows("tri_ptr", np.stack([rows, rows + 1], axis=1).ravel())
            start, count = bounds[0::2], bounds[1::2] - bounds[0::2]
            del bounds
            tri_ptr = _offsets(count)
            # the codes of the rows, in row order (ascending positions of the file's codes)
            at = np.arange(int(tri_ptr[-1]), dtype=np.int64) + np.repeat(start - tri_ptr[:-1], count)
            tri = b.rows("tri", at)
        return Phrases(part["n_words"], part["log_count"], part["tokens"], tri_ptr, tri, self.f_lang,
                       np.arange(len(rows), dtype=np.int32), part["vec"], part["vec_has"])

    def vectors(self, a: int, b: int) -> np.ndarray:
        """Rows a:b of the phrase vectors (a copy; the map goes with the call)."""
        with open_bundle(self.where["vec"]) as z:
            return z.take("vec", slice(a, b))


#: Texts per block of char_trigrams: its (texts x width) int64 temporaries are ~20 MB a block,
#: where the whole of bio's 448k phrases at once took ~0.5 GB of the build's peak.
TRIGRAM_BLOCK = 65_536


def trigram_alphabet(pieces) -> np.ndarray:
    """The code points, ascending, of "#" and every character of the strings ``pieces``: the
    alphabet of char_trigrams. The stage gives the words its phrases are made of and " " (a
    superset of the cut texts' characters, which codes the trigrams as well: below)."""
    return np.array(sorted({"#"}.union(*pieces)), dtype="<U1").view(np.uint32)


def trigram_dtype(alphabet: np.ndarray):
    """The codes' dtype of char_trigrams over ``alphabet``: uint32 when A^3 <= 2^32, else int64."""
    return np.uint32 if len(alphabet) ** 3 <= 1 << 32 else np.int64


def char_trigrams(texts: list[str], width: int = TRIGRAM_CHARS, alphabet=None) -> tuple[np.ndarray, np.ndarray]:
    """(ptr, codes): the distinct character trigrams of each "#text#" (text cut to width - 2
    characters), CSR by text, ascending within a text.

    A trigram's code is r0 A^2 + r1 A + r2, r_k the rank of its k-th character among the A
    characters of ``alphabet`` (default: the distinct characters of the cut texts and "#", by
    code point): equal trigrams have equal codes, and the codes sort as the trigrams do (by
    code points, first character first), so two phrases' sets meet in the same trigrams as
    with the code points themselves, over any alphabet that holds their characters: the
    features (counts and overlaps of the sets) are the same for every such alphabet. uint32 when
    A^3 <= 2^32 (A <= 1625; bio-multi's English vocabulary has 393 characters), else int64
    (A <= 2^21 code points: A^3 < 2^63). On bio-multi's 2.37M phrases the codes were 0.65 GiB
    as int64 (c0 2^42 + c1 2^21 + c2), held by the stage's process and mapped by every apply task.
    A text's trigrams depend on it and the alphabet alone: the texts go TRIGRAM_BLOCK at a time
    (and the stage's tasks take a block of phrases each, phrase_side_task)."""
    n = len(texts)
    if alphabet is None:
        alphabet = trigram_alphabet(t[:width - 2] for t in texts)
    dtype = trigram_dtype(alphabet)
    if n == 0:
        return np.zeros(1, np.int64), np.zeros(0, dtype)
    # the blocks' codes go straight into one array of room for width - 2 a text (the most a
    # text has): pages past the last code are never touched, so never resident; the blocks
    # kept and then concatenated held the codes twice
    codes = np.empty(n * (width - 2), dtype)
    counts, at = [], 0
    for a in range(0, n, TRIGRAM_BLOCK):
        c, t = _char_trigrams_block(texts[a:a + TRIGRAM_BLOCK], width, alphabet)
        counts.append(c)
        codes[at:at + len(t)] = t
        at += len(t)
    return _offsets(np.concatenate(counts)), codes[:at]


def _char_trigrams_block(texts: list[str], width: int, alphabet: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(trigrams per text, their int64 codes in text order) of char_trigrams, for a non-empty
    list; ``alphabet``: the distinct characters' code points, ascending."""
    n = len(texts)
    padded = np.array(["#" + t[:width - 2] + "#" for t in texts], dtype=f"<U{width}")
    points = padded.view(np.uint32).reshape(n, width)
    # each character's rank (the padding after a text's end gets some rank: it is cut below)
    codes = np.searchsorted(alphabet, points).astype(np.int64)
    lens = np.char.str_len(padded)
    del padded
    inside = np.arange(width)[None, :] < lens[:, None]
    if not (alphabet[np.minimum(codes, len(alphabet) - 1)] == points)[inside].all():
        raise ValueError("char_trigrams: a text has a character outside the alphabet")
    del points, inside
    size = len(alphabet)
    tri = (codes[:, :-2] * size + codes[:, 1:-1]) * size + codes[:, 2:]
    del codes
    none = np.iinfo(np.int64).max
    tri[np.arange(width - 2)[None, :] >= (lens - 2)[:, None]] = none
    tri.sort(axis=1)
    tri[:, 1:][tri[:, 1:] == tri[:, :-1]] = none      # repeats within a text
    tri.sort(axis=1)
    valid = tri != none
    return valid.sum(axis=1), tri[valid]


def string_overlaps(ph: "Phrases", e1: np.ndarray, e2: np.ndarray):
    """(a_in_b, b_in_a, shared) of pivot._counts.pair_overlaps for the phrases of rows e1, e2
    (checked)."""
    from pivot._native import _counts

    e1 = np.ascontiguousarray(e1, dtype=np.int64)
    e2 = np.ascontiguousarray(e2, dtype=np.int64)
    n_e = ph.tokens.shape[0]
    for ids in (e1, e2):
        if len(ids) and (ids.min() < 0 or ids.max() >= n_e):
            raise ValueError(f"phrase rows out of range 0..{n_e - 1}")
    if len(ph.tri_ptr) != n_e + 1 or (len(ph.tri) and ph.tri_ptr[-1] != len(ph.tri)):
        raise ValueError("trigram pointers do not match the phrases")
    tri = np.ascontiguousarray(ph.tri)
    if tri.dtype not in (np.uint32, np.int64):
        raise ValueError(f"trigram codes must be uint32 or int64 (got {tri.dtype})")
    return _counts.pair_overlaps(np.ascontiguousarray(ph.tokens, dtype=np.int32),
                                 np.ascontiguousarray(ph.tri_ptr, dtype=np.int64), tri, e1, e2)


def n_distinct_languages(langs: np.ndarray) -> np.ndarray:
    """Distinct values >= 0 per row of a small (n, k) int array: entry j counts when it is >= 0
    and differs from entries 0..j-1 (k(k-1)/2 comparisons of columns; a sort of every row
    along its k entries cost ~15 times as much for k = 3)."""
    langs = np.asarray(langs)
    count = np.zeros(len(langs), np.int64)
    for j in range(langs.shape[1] if langs.ndim == 2 else 0):
        new = langs[:, j] >= 0
        for i in range(j):
            new &= langs[:, j] != langs[:, i]
        count += new
    return count


# ------------------------------------------------------------------------------------ features


def _log_floor(p: np.ndarray) -> np.ndarray:
    """log p, FLOOR_LOG_P where p <= 0 (or NaN), by pivot.portable.log (numpy's log loop
    differs by CPU): pivot._counts.log_floor, portable's fast path in C for the normal positive
    entries (the same operations, so the same bits) in one pass with the floor, and
    portable.log itself for the rare other positive ones (subnormal, inf). The numpy form
    (every entry's log, 63% of bio's p being 0, then np.where) was 8-13% of an apply task's
    CPU; an apply block's call (8 x 65,536 entries) went from 8.5 to 3.9 ms."""
    from pivot._native import _counts

    p = np.asarray(p, np.float64)
    # portable's coefficients and constants, so that the two stay one method
    out, odd = _counts.log_floor(np.ascontiguousarray(p).reshape(-1), FLOOR_LOG_P,
                                 np.asarray(portable._LOG_R, np.float64), portable._LN2_HI, portable._LN2_LO,
                                 portable._SQRT_HALF)
    out = out.reshape(p.shape)
    if odd:
        rest = (p > 0) & ~((p >= portable._TINY) & (p <= np.finfo(np.float64).max))
        out[rest] = portable.log(p[rest])
    return out


def pair_features(ph: Phrases, e1, e2, p, p_rev, n_pivots, pivots, form) -> list[np.ndarray]:
    """The feature columns of the module docstring for directed pairs, in feature_names order.

    p, p_rev: (n, K) p_m(e2|e1) and p_m(e1|e2) per stored model (0: not proposed); pivots:
    (n, 3) foreign phrase ids (-1: none); form: (n,) the well-formedness bitmask. Columns, not
    a matrix: the apply step sums them one by one and never copies a (pairs x features) block.
    """
    from pivot.pipeline.wellformed import CONTAINMENT, DANGLING, EDGE_PUNCT, FUNCTION_ONLY, INFLECTION

    e1, e2 = ph.rows(e1), ph.rows(e2)            # from here on, rows of ph's arrays
    # (K, n): a model's columns are rows, contiguous (the sums read each column whole)
    p, p_rev = np.asarray(p, np.float64).T.copy(), np.asarray(p_rev, np.float64).T.copy()
    log_p, log_rev = _log_floor(p), _log_floor(p_rev)
    log_min = np.minimum(log_p, log_rev)
    missing, missing_rev = (p <= 0).astype(np.float64), (p_rev <= 0).astype(np.float64)
    cols = []
    for m in range(len(p)):
        cols += [log_p[m], log_rev[m], log_min[m], missing[m], missing_rev[m]]
    pivots = np.asarray(pivots)
    langs = np.where(pivots >= 0, ph.f_lang[np.maximum(pivots, 0)], -1) if len(ph.f_lang) else np.full(pivots.shape, -1)
    n1, n2 = ph.n_words[e1].astype(np.float64), ph.n_words[e2].astype(np.float64)
    a_in_b, b_in_a, shared = (c.astype(np.float64) for c in string_overlaps(ph, e1, e2))
    tri1 = (ph.tri_ptr[e1 + 1] - ph.tri_ptr[e1]).astype(np.float64)
    tri2 = (ph.tri_ptr[e2 + 1] - ph.tri_ptr[e2]).astype(np.float64)
    form = np.asarray(form)
    # log1p of a count as portable.log(1 + n): 1 + n is exact, numpy's log1p loop differs by CPU
    cols += [portable.log(1.0 + np.asarray(n_pivots, np.float64)), n_distinct_languages(langs).astype(np.float64),
             ph.log_count[e1], ph.log_count[e2], n1, n2, np.abs(n1 - n2),
             a_in_b / np.maximum(n1 + n2 - a_in_b, 1.0),
             shared / np.maximum(tri1 + tri2 - shared, 1.0),
             ((b_in_a == n2) & (n2 < n1)).astype(np.float64), ((a_in_b == n1) & (n1 < n2)).astype(np.float64)]
    cols += [((form & flag) > 0).astype(np.float64) for flag in (EDGE_PUNCT, FUNCTION_ONLY, DANGLING, INFLECTION,
                                                                 CONTAINMENT)]
    cols.append((p[0] > p_rev[0]).astype(np.float64))
    if ph.dim:
        cols += vector_pair_columns(ph, e1, e2)
    return cols


def vector_pair_columns(ph: Phrases, e1, e2) -> list[np.ndarray]:
    """[vec_cos, vec_missing] of the phrases of rows e1, e2: the cosine of the two phrases' vectors (0 when either has none or
    is zero) and whether either has none. The dot product and the squared norms are one
    float32 sum along each row (einsum: the same loop for every row wherever it starts, so the
    same value however the rows are cut; tested), then float64."""
    v1, v2 = np.asarray(ph.vec[e1]), np.asarray(ph.vec[e2])
    dot = np.einsum("nd,nd->n", v1, v2).astype(np.float64)
    if len(ph.vec) <= len(e1) + len(e2):
        # each phrase's squared norm once, then looked up: the same float32 sum per row, and a
        # block's pairs hold fewer phrases than pairs (bio: 51k phrases, 65,536 pairs, e1 ~6.5k)
        sq = np.einsum("nd,nd->n", np.asarray(ph.vec), np.asarray(ph.vec))
        sq1, sq2 = sq[e1], sq[e2]
    else:
        sq1, sq2 = np.einsum("nd,nd->n", v1, v1), np.einsum("nd,nd->n", v2, v2)
    norm = np.sqrt(sq1.astype(np.float64) * sq2)
    cos = np.divide(dot, norm, out=np.zeros(len(dot)), where=norm > 0)
    missing = ~(np.asarray(ph.vec_has)[e1] & np.asarray(ph.vec_has)[e2])
    return [cos, missing.astype(np.float64)]


def phrase_columns(ph: Phrases, e1, e2) -> np.ndarray:
    """The phrase-vector columns of pairs (e1, e2): (n, 2 dim), e1's vector then e2's (float64)."""
    e1, e2 = ph.rows(e1), ph.rows(e2)
    return np.hstack([np.asarray(ph.vec[e1], np.float64), np.asarray(ph.vec[e2], np.float64)])


def feature_matrix(cols: list[np.ndarray]) -> np.ndarray:
    """The columns as an (n, features) matrix (the fits' training rows)."""
    return np.column_stack(cols) if len(cols[0]) else np.zeros((0, len(cols)))


# ------------------------------------------------------------------------------------ linear models


@dataclass
class Standardiser:
    """z_j = (x_j - mean_j) / sd_j over the kept columns (constant ones on train are dropped)."""

    names: list[str]       # kept columns
    mean: np.ndarray
    sd: np.ndarray
    dropped: list[str]

    @classmethod
    def fit(cls, names, x) -> "Standardiser":
        mean, sd = x.mean(axis=0), x.std(axis=0)
        # a constant column's computed sd is rounding noise: dropped, not blown up
        keep = sd > 1e-9 * np.maximum(1.0, np.abs(mean))
        return cls([n for n, k in zip(names, keep) if k], mean[keep], sd[keep],
                   [n for n, k in zip(names, keep) if not k])

    def transform(self, names, x) -> np.ndarray:
        """The standardised kept columns of a matrix whose columns are ``names``."""
        return np.column_stack(self.columns(names, [x[:, j] for j in range(x.shape[1])])) if len(x) else \
            np.zeros((0, len(self.names)))

    def columns(self, names, cols) -> list[np.ndarray]:
        """The standardised kept columns from a list of columns named ``names``."""
        return [(cols[names.index(n)] - m) / s for n, m, s in zip(self.names, self.mean.tolist(), self.sd.tolist())]


def linear(z: list[np.ndarray], intercept: float, coef) -> np.ndarray:
    """intercept + sum_j coef_j z_j, summed feature after feature (a fixed order, no BLAS)."""
    out = np.full(len(z[0]) if z else 0, float(intercept))
    for c, col in zip(np.asarray(coef, np.float64).tolist(), z):
        out += c * col
    return out


def standardised_matrix(std: "Standardiser", names, cols, intercepts, coefs) -> np.ndarray:
    """(n, K): column k is linear(std.columns(names, cols), intercepts[k], coefs[k]), the same
    operations in the same order for every element (the same bytes):

        s_k = b_k;  for j in std's order:  z_j = (x_j - mean_j) / sd_j;  s_k = s_k + c_kj z_j

    (coefs[k] may be shorter than std's columns: its sum stops there), every step rounded to
    double as numpy's ufuncs round it. Computed by pivot._counts.standardised_sums, a block of
    rows at a time: the numpy form (each z_j made once, c_kj z_j added to every sum before the
    next column) made 2 + 2K passes over memory per column, 15% of an apply task's CPU on bio
    (58 columns, K = 1 for the score and 6 for the relations); in the kernel a block's sums
    stay in the cache. The columns are float64 (pair_features' and the fits' matrices) or
    integer / bool (exactly float64 then, as numpy's ufuncs take them); float32 is refused
    (numpy would subtract the mean in float32)."""
    from pivot._native import _counts

    x = []
    for name in std.names:
        col = np.asarray(cols[names.index(name)])
        if col.dtype != np.float64:
            if col.dtype.kind not in "biu":
                raise TypeError(f"standardised_matrix: column {name!r} is {col.dtype}, not float64")
            col = col.astype(np.float64)
        x.append(np.ascontiguousarray(col))
    n = len(x[0]) if x else len(cols[0]) if len(cols) else 0
    intercepts = np.ascontiguousarray(intercepts, dtype=np.float64).reshape(-1)
    # one coefficient row per intercept (a sum without a row is its intercept, as zip() left it)
    coefs = [np.asarray(c, np.float64).reshape(-1) for c in coefs][:len(intercepts)]
    coefs += [np.zeros(0)] * (len(intercepts) - len(coefs))
    coef = np.zeros((len(coefs), len(x)))
    for k, c in enumerate(coefs):
        coef[k, :min(len(c), len(x))] = c[:len(x)]
    n_terms = np.array([min(len(c), len(x)) for c in coefs], np.int64)
    return _counts.standardised_sums(x, n, np.ascontiguousarray(std.mean, np.float64),
                                     np.ascontiguousarray(std.sd, np.float64), coef, n_terms, intercepts)


def ridge_fit(z: np.ndarray, y: np.ndarray, penalty: np.ndarray) -> tuple[float, np.ndarray]:
    """argmin_b sum (y - b0 - z b)^2 + sum_j penalty_j b_j^2 on centred columns: b0 = mean(y),
    b = (Z'Z + diag(penalty))^-1 Z'(y - mean(y)) (z is standardised on the same rows)."""
    zc = z - z.mean(axis=0)
    # einsum, not BLAS (as softmax_fit): a product this small costs more in thread wake-ups;
    # the solve and the intercept's dot product by pivot.portable, not LAPACK and BLAS (whose
    # kernels, and so whose roundings, depend on the CPU)
    b = portable.solve(np.einsum("ni,nj->ij", zc, zc, optimize=False) + np.diag(penalty),
                       np.einsum("ni,n->i", zc, y - y.mean(), optimize=False))
    return float(y.mean() - portable.fsum(z.mean(axis=0) * b)), b


def average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n of x, ties sharing the mean of their ranks."""
    order = np.argsort(x, kind="stable")
    xs = x[order]
    new = np.concatenate([[True], xs[1:] != xs[:-1]])
    group = np.cumsum(new) - 1
    first = np.flatnonzero(new)
    last = np.concatenate([first[1:], [len(x)]]) - 1
    out = np.empty(len(x))
    out[order] = ((first + last) / 2.0 + 1.0)[group]
    return out


def spearman(x, y) -> float:
    """Spearman's rho: Pearson's r of the average ranks; nan for fewer than 3 pairs or a constant side."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    rx, ry = average_ranks(x), average_ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    return float((rx * ry).sum() / np.sqrt((rx * rx).sum() * (ry * ry).sum()))


def softmax(eta: np.ndarray) -> np.ndarray:
    """exp(eta_c - max_c' eta_c') / sum_c exp(...), row by row of (n, C). The rows' maxima are
    C - 1 np.maximum of columns (a max is exact, and NaN propagates as in eta.max(axis=1)),
    a quarter of eta.max(axis=1)'s time on rows this short (an apply block's (65,536, 6))."""
    top = eta[:, 0].copy() if eta.shape[1] else np.full(len(eta), -np.inf)
    for c in range(1, eta.shape[1]):
        np.maximum(top, eta[:, c], out=top)
    eta = eta - top[:, None]
    e = np.exp(eta)
    return e / e.sum(axis=1, keepdims=True)


def softmax_fit(z: np.ndarray, y: np.ndarray, n_classes: int, lam: float, maxiter: int = 300,
                balance: float = 1.0) -> np.ndarray:
    """W (n_classes, 1 + p): minimises the class-weighted mean cross-entropy
    (1 / sum w) sum_i w_i (-log softmax(W [1, z_i])_{y_i}) + lam / 2 * |W[:, 1:]|^2 with
    w_i = n_{y_i}^-balance (balance 1: every class weighs the same in total; 0: every pair
    does), by L-BFGS from W = 0 (deterministic)."""
    from scipy.optimize import minimize

    n, p = z.shape
    x = np.column_stack([np.ones(n), z])
    counts = np.bincount(y, minlength=n_classes).astype(np.float64)
    present = counts > 0
    w = (np.where(present, counts, 1.0) ** -float(balance))[y]
    w = w / w.sum()
    onehot = np.zeros((n, n_classes))
    onehot[np.arange(n), y] = 1.0
    mask = np.ones((n_classes, p + 1))
    mask[:, 0] = 0.0

    # einsum, not BLAS: no threads (a matrix product on a busy machine's two cores could spin
    # for many times its work) and one summation order on every machine.
    def objective(flat):
        W = flat.reshape(n_classes, p + 1)
        eta = np.einsum("nk,ck->nc", x, W, optimize=False)
        eta -= eta.max(axis=1, keepdims=True)
        logz = np.log(np.exp(eta).sum(axis=1))
        loss = float((w * (logz - (eta * onehot).sum(axis=1))).sum()) + 0.5 * lam * float(((W * mask) ** 2).sum())
        resid = (np.exp(eta - logz[:, None]) - onehot) * w[:, None]
        grad = np.einsum("nc,nk->ck", resid, x, optimize=False) + lam * W * mask
        return loss, grad.ravel()

    res = minimize(objective, np.zeros(n_classes * (p + 1)), jac=True, method="L-BFGS-B",
                   options={"maxiter": maxiter, "gtol": 1e-5, "ftol": 1e-9})
    return res.x.reshape(n_classes, p + 1)


def classification_report(y_true, y_pred, n_classes: int = len(RELATIONS)) -> dict:
    """Per-class precision, recall, F1 and support; macro-F1 over the classes with test support;
    the confusion matrix (row: true class, column: predicted, RELATIONS order)."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    per, f1s = {}, []
    for c in range(n_classes):
        tp = int(((y_pred == c) & (y_true == c)).sum())
        n_pred, n_true = int((y_pred == c).sum()), int((y_true == c).sum())
        prec = tp / n_pred if n_pred else 0.0
        rec = tp / n_true if n_true else 0.0
        f1 = 2 * prec * rec / (prec + rec) if prec + rec > 0 else 0.0
        per[RELATIONS[c]] = {"precision": round(prec, 4), "recall": round(rec, 4), "f1": round(f1, 4),
                             "support": n_true, "predicted": n_pred}
        if n_true:
            f1s.append(f1)
    confusion = np.zeros((n_classes, n_classes), np.int64)
    np.add.at(confusion, (y_true.astype(np.int64), y_pred.astype(np.int64)), 1)
    return {"per_class": per, "macro_f1": round(float(np.mean(f1s)), 4) if f1s else float("nan"),
            "confusion": confusion.tolist(),
            "accuracy": round(float((y_true == y_pred).mean()), 4) if len(y_true) else float("nan"),
            "n": int(len(y_true))}


# ------------------------------------------------------------------------------------ the fits


@dataclass
class ScoreModel:
    """The fitted PPDB2.0Score regression (coefficients per training SD)."""

    std: Standardiser
    intercept: float
    coef: np.ndarray

    def predict(self, names, x) -> np.ndarray:
        """The score of the rows of a matrix whose columns are ``names``."""
        return self.predict_columns(names, [x[:, j] for j in range(x.shape[1])])

    def predict_columns(self, names, cols) -> np.ndarray:
        return standardised_matrix(self.std, names, cols, [self.intercept], [self.coef])[:, 0]

    def to_json(self) -> dict:
        return {"features": self.std.names, "mean": self.std.mean.tolist(), "sd": self.std.sd.tolist(),
                "intercept": self.intercept, "coefficients": dict(zip(self.std.names, self.coef.tolist())),
                "dropped": self.std.dropped}

    @classmethod
    def from_json(cls, d) -> "ScoreModel":
        names = d["features"]
        return cls(Standardiser(names, np.array(d["mean"]), np.array(d["sd"]), d["dropped"]), d["intercept"],
                   np.array([d["coefficients"][n] for n in names]))


@dataclass
class RelationModel:
    """The fitted softmax over RELATIONS (row c of W: intercept, then one weight per feature)."""

    std: Standardiser
    W: np.ndarray

    def probabilities(self, names, x) -> np.ndarray:
        """P(relation | pair), (n, len(RELATIONS)), rows of a matrix whose columns are ``names``."""
        return self.probabilities_columns(names, [x[:, j] for j in range(x.shape[1])])

    def probabilities_columns(self, names, cols, phrase_terms=None) -> np.ndarray:
        """P(relation | pair) from the pair's columns; phrase_terms: (t1[e1], t2[e2]) of
        :meth:`phrase_terms` when the model is the :meth:`pair_part` of one with phrase columns."""
        eta = standardised_matrix(self.std, names, cols, self.W[:, 0], self.W[:, 1:])
        if phrase_terms is not None:
            eta += phrase_terms[0]
            eta += phrase_terms[1]
        return softmax(eta)

    def pair_part(self) -> "RelationModel":
        """The model without its phrase-vector columns (vec_e1[i], vec_e2[i])."""
        keep = [j for j, n in enumerate(self.std.names) if not is_phrase_feature(n)]
        return RelationModel(Standardiser([self.std.names[j] for j in keep], self.std.mean[keep], self.std.sd[keep],
                                          self.std.dropped), self.W[:, [0] + [1 + j for j in keep]])

    def phrase_terms(self, vec: np.ndarray, rows=None, sides=(0, 1)) -> tuple[np.ndarray, ...]:
        """(t1, t2), each (n, classes): the phrase-vector columns' part of the linear predictor,
        per phrase (rows of ``vec``; ``rows``: only those, the others 0):

            t1[e, c] = sum_i W[c, vec_e1[i]] (vec[e, i] - mean) / sd,   t2 likewise with vec_e2[i],

        so that eta_c(e1, e2) = pair_part's eta_c + t1[e1, c] + t2[e2, c]: a pair costs two
        lookups instead of 2 x dim columns (summed coordinate after coordinate, a fixed order).
        ``sides``: those of (t1, t2) to compute and return (each one's sums are its own)."""
        rows = np.arange(len(vec)) if rows is None else np.asarray(rows, np.int64)
        n_classes = self.W.shape[0]
        out = (np.zeros((len(vec), n_classes)), np.zeros((len(vec), n_classes)))
        # APPLY_ROWS phrases at a time (a row's terms are its own: the same bytes), not a
        # (dim, phrases) float64 copy of every vector at once (0.25 GB of the stage's peak on bio)
        for a in range(0, len(rows), APPLY_ROWS):
            block = rows[a:a + APPLY_ROWS]
            x = np.asarray(vec[block]).T.astype(np.float64)      # (dim, block): a coordinate is a row
            acc = np.zeros((2, n_classes, len(block)))
            for j, name in enumerate(self.std.names):
                if is_phrase_feature(name):
                    side = PHRASE_PREFIXES.index(name[:len(PHRASE_PREFIXES[0])])
                    if side not in sides:
                        continue
                    z = (x[int(name[len(PHRASE_PREFIXES[0]):-1])] - self.std.mean[j]) / self.std.sd[j]
                    for c in range(n_classes):
                        acc[side, c] += self.W[c, 1 + j] * z
            out[0][block], out[1][block] = acc[0].T, acc[1].T
        return tuple(out[k] for k in sides)

    def to_json(self) -> dict:
        return {"features": self.std.names, "mean": self.std.mean.tolist(), "sd": self.std.sd.tolist(),
                "dropped": self.std.dropped, "classes": list(RELATIONS),
                "intercepts": dict(zip(RELATIONS, self.W[:, 0].tolist())),
                "coefficients": {c: dict(zip(self.std.names, self.W[k, 1:].tolist()))
                                 for k, c in enumerate(RELATIONS)}}

    @classmethod
    def from_json(cls, d) -> "RelationModel":
        names = d["features"]
        W = np.array([[d["intercepts"][c]] + [d["coefficients"][c][n] for n in names] for c in RELATIONS])
        return cls(Standardiser(names, np.array(d["mean"]), np.array(d["sd"]), d["dropped"]), W)


def top_k_hits(group, score, tiebreak, positive, k: int = WITHIN_K) -> int:
    """Positives among the k best of each group: rows sorted by score (descending), ties by
    ``tiebreak`` ascending, as a lookup ranks a phrase's paraphrases."""
    group = np.asarray(group)
    if not len(group):
        return 0
    order = np.lexsort((tiebreak, -np.asarray(score, np.float64), group))
    g = group[order]
    start = np.flatnonzero(np.concatenate([[True], g[1:] != g[:-1]]))
    rank = np.arange(len(g)) - np.repeat(start, np.diff(np.concatenate([start, [len(g)]])))
    return int(np.asarray(positive)[order][rank < k].sum())


@dataclass
class WithinLists:
    """Candidate lists of WordNet phrases for the score's within-list term (one row per pair).

    x: the score features; group: the list (the query's phrase id); tiebreak: e2's id (a lookup's
    tie order); positive: e2 is a WordNet synonym of the query; p_general: General's p(e2|e1),
    the ranking to beat; validation: the row's list is held back to choose the penalties.
    """

    x: np.ndarray
    group: np.ndarray
    tiebreak: np.ndarray
    positive: np.ndarray
    p_general: np.ndarray
    validation: np.ndarray

    def part(self, rows) -> "WithinLists":
        return WithinLists(*(getattr(self, f)[rows] for f in self.__dataclass_fields__))

    def hits(self, score) -> int:
        """Synonyms in the top WITHIN_K of the lists ranked by ``score``."""
        return top_k_hits(self.group, score, self.tiebreak, self.positive)

    def pair_moments(self) -> tuple[np.ndarray, np.ndarray, int]:
        """(A, c, L) of the within-list term on the raw features, d = x_s - x_t:

            A = (1/L) sum_l w_l sum_{s in S_l, t in T_l} d d',   c = (1/L) sum_l w_l sum_{s,t} d,

        over the L lists with both synonyms S_l and other candidates T_l, w_l = 1/(|S_l| |T_l|)
        (every list weighs the same). Without enumerating pairs: sum_{s,t} d d' =
        |T| sum_s x_s x_s' + |S| sum_t x_t x_t' - X_S X_T' - X_T X_S' (X_S, X_T the lists' sums),
        sum_{s,t} d = |T| X_S - |S| X_T. Standardising z = (x - mean) / sd scales d by 1/sd (the
        mean cancels), so A_z = A / (sd sd'), c_z = c / sd: one pass serves every fold.
        """
        p = self.x.shape[1]
        _, g = np.unique(self.group, return_inverse=True)
        n_lists = int(g.max()) + 1 if len(g) else 0
        pos = self.positive.astype(bool)
        n_s = np.bincount(g[pos], minlength=n_lists).astype(np.float64)
        n_t = np.bincount(g[~pos], minlength=n_lists).astype(np.float64)
        live = (n_s > 0) & (n_t > 0)
        if not live.any():
            return np.zeros((p, p)), np.zeros(p), 0
        w = np.where(live, 1.0 / np.maximum(n_s * n_t, 1.0), 0.0)
        a = np.where(pos, w[g] * n_t[g], w[g] * n_s[g])      # each row's weight in the squares
        sum_s, sum_t = _group_sums(self.x, g, pos, n_lists), _group_sums(self.x, g, ~pos, n_lists)
        # einsum, not BLAS (as softmax_fit): no threads, one summation order on every machine
        cross = np.einsum("l,li,lj->ij", w, sum_s, sum_t, optimize=False)
        big_a = np.einsum("n,ni,nj->ij", a, self.x, self.x, optimize=False) - cross - cross.T
        c = np.einsum("l,li->i", n_t * w, sum_s, optimize=False) - np.einsum("l,li->i", n_s * w, sum_t, optimize=False)
        n_live = int(live.sum())
        return big_a / n_live, c / n_live, n_live


def _group_sums(x, g, sel, n_groups) -> np.ndarray:
    """(n_groups, p): the sums of the rows of x selected by sel, per group id g (0 for none)."""
    out = np.zeros((n_groups, x.shape[1]))
    rows = np.flatnonzero(sel)
    if not len(rows):
        return out
    rows = rows[np.argsort(g[rows], kind="stable")]
    gs = g[rows]
    start = np.flatnonzero(np.concatenate([[True], gs[1:] != gs[:-1]]))
    out[gs[start]] = np.add.reduceat(x[rows], start, axis=0)
    return out


def fit_score(names, x, y, keys, anchor: set[str], *, within: WithinLists | None = None, lambdas=SCORE_LAMBDAS,
              multipliers=SCORE_MULTIPLIERS, gammas=SCORE_GAMMAS) -> tuple[ScoreModel, dict]:
    """The score of the module docstring; (model, the selection table).

    keys: the unordered pair key of each row (its folds). anchor: the features penalised by
    lambda (General's); the others get lambda * mu. within: the WordNet candidate lists (None:
    ratings only, gamma = 0). For every (lambda, mu, gamma): the mean cross-validated Spearman
    rho on the ratings (the list term, on the lists not held back, in every fold's fit) and the
    synonyms in the top WITHIN_K of the held-back lists (fit on every training row). Chosen:
    among the settings whose held-back hits are within one binomial standard error of the
    best, sqrt(h (P - h) / P) for the best h of P synonyms (the "one standard error" rule:
    closer settings are not told apart by these lists), the best rho (ties: larger penalties,
    then the smaller gamma); refitted on every training row and every list.
    """
    from pivot.hashes import unit_hash

    y = np.asarray(y, np.float64)
    if all(n in anchor for n in names):
        multipliers = (1.0,)
    if within is None:
        gammas = (0.0,)
    folds = {seed: np.array([min(int(unit_hash(k, seed) * CV_FOLDS), CV_FOLDS - 1) for k in keys])
             for seed in CV_SEEDS}
    if within is not None:
        fit_part, held = within.part(~within.validation), within.part(within.validation)
        moments_fit = fit_part.pair_moments()
        del fit_part                # (its rows' copy, not needed by the grid's fits)
        moments_all = within.pair_moments()
        baseline = held.hits(held.p_general)
    cv, hits = {}, {}
    for lam in lambdas:
        for mu in multipliers:
            for gamma in gammas:
                rhos = []
                for seed in CV_SEEDS:
                    fold = folds[seed]
                    pred = np.zeros(len(y))
                    for f in range(CV_FOLDS):
                        test = fold == f
                        if test.all() or not test.any():
                            continue
                        pred[test] = _ridge(names, x[~test], y[~test], lam, mu, anchor, gamma,
                                            moments_fit if gamma else None).predict(names, x[test])
                    rhos.append(spearman(pred, y))
                key = (lam, mu, gamma)
                cv[key] = float(np.nanmean(rhos)) if not np.all(np.isnan(rhos)) else float("nan")
                if within is not None:
                    model = _ridge(names, x, y, lam, mu, anchor, gamma, moments_fit if gamma else None)
                    hits[key] = held.hits(model.predict(names, held.x))
    if within is not None and hits:
        top, n_syn = max(hits.values()), int(held.positive.sum())
        tolerance = math.sqrt(top * max(n_syn - top, 0) / n_syn) if n_syn else 0.0
        eligible = [k for k in cv if hits[k] >= top - tolerance]
    else:
        eligible = list(cv)

    def rank(k):
        return (round(-1.0 if math.isnan(cv[k]) else cv[k], 12), k[0], k[1], -k[2])

    best = max(eligible, key=rank)
    lam, mu, gamma = best
    model = _ridge(names, x, y, lam, mu, anchor, gamma, moments_all if gamma else None)
    table = {"lambda": lam, "multiplier": mu, "gamma": gamma, "cv_spearman": round(cv[best], 4),
             "grid": [{"lambda": k[0], "multiplier": k[1], "gamma": k[2], "cv_spearman": round(v, 4),
                       **({"validation_top_k_synonyms": hits[k]} if hits else {})}
                      for k, v in sorted(cv.items())]}
    if within is not None:
        table["within"] = {"k": WITHIN_K, "margin": WITHIN_MARGIN, "n_lists": int(len(np.unique(within.group))),
                           "n_rows": int(len(within.group)), "n_synonyms": int(np.sum(within.positive)),
                           "n_pair_lists": moments_all[2],
                           "validation": {"n_lists": int(len(np.unique(held.group))), "n_synonyms": n_syn,
                                          "p_general_top_k_synonyms": int(baseline),
                                          "best_top_k_synonyms": int(top), "tolerance": round(tolerance, 2),
                                          "score_top_k_synonyms": int(hits[best])}}
    return model, table


def _ridge(names, x, y, lam, mu, anchor, gamma=0.0, moments=None) -> ScoreModel:
    """The score's fit for one setting: on the standardised rated rows Z (centred Zc),

        b = (Zc'Zc + gamma n A_z + diag(penalty))^-1 (Zc'(y - mean y) + gamma n WITHIN_MARGIN c_z),

    the minimiser of sum_i (y_i - b0 - z_i b)^2 + sum_j penalty_j b_j^2
    + gamma n (1/L) sum_l w_l sum_{s,t} (WITHIN_MARGIN - (z_s - z_t) b)^2, b0 = mean y - mean z b
    (A, c: WithinLists.pair_moments; n rated rows, so gamma is the lists' weight per rated row)."""
    std = Standardiser.fit(names, x)
    z = std.transform(names, x)
    penalty = np.array([lam * (1.0 if n in anchor else mu) for n in std.names])
    if not gamma or moments is None:
        b0, b = ridge_fit(z, y, penalty)
        return ScoreModel(std, b0, b)
    keep = [names.index(n) for n in std.names]
    big_a, c, _ = moments
    big_a = big_a[np.ix_(keep, keep)] / np.outer(std.sd, std.sd)
    c = c[keep] / std.sd
    zc = z - z.mean(axis=0)
    scale = gamma * len(y)
    gram = np.einsum("ni,nj->ij", zc, zc, optimize=False)
    b = portable.solve(gram + scale * big_a + np.diag(penalty),          # as ridge_fit
                       np.einsum("ni,n->i", zc, y - y.mean(), optimize=False) + scale * WITHIN_MARGIN * c)
    return ScoreModel(std, float(y.mean() - portable.fsum(z.mean(axis=0) * b)), b)


def fit_relations(names, x, y, validation, *, lambdas=RELATION_LAMBDAS,
                  balances=RELATION_BALANCE) -> tuple[RelationModel, dict]:
    """The softmax of the module docstring; (lambda, beta) by macro-F1 on the rows marked
    validation (ties: the larger lambda, then the larger beta), then refitted on every training row.
    (The build runs the same steps as tasks: relation_task, relation_selection.)"""
    scores = {(lam, beta): relation_validation_f1(names, x, y, validation, lam, beta)
              for lam in lambdas for beta in balances}
    best, table = relation_selection(scores)
    return _softmax(names, x, y, *best), table


def relation_validation_f1(names, x, y, validation, lam, beta) -> float:
    """Macro-F1 on the validation rows of the softmax (lam, beta) fitted on the other rows."""
    m = _softmax(names, x[~validation], y[~validation], lam, beta)
    pred = m.probabilities(names, x[validation]).argmax(axis=1)
    return classification_report(y[validation], pred)["macro_f1"]


def relation_selection(scores: dict) -> tuple[tuple, dict]:
    """((lambda, beta), selection table) of validation macro-F1s {(lambda, beta): f1}: the best
    (ties: the larger lambda, then the larger beta)."""
    best = max(scores, key=lambda k: (round(scores[k], 12), k[0], k[1]))
    return best, {"lambda": best[0], "balance": best[1],
                  "grid": [{"lambda": lam, "balance": beta, "validation_macro_f1": v}
                           for (lam, beta), v in sorted(scores.items())]}


@_heap_released
def relation_task(path, columns, names, lam, beta, refit: bool):
    """One relation fit of the build (a task): the training rows of ``path`` (x, y, validation),
    the feature columns ``columns`` of x (None: all) named ``names``; refit: the model on every
    row, else relation_validation_f1."""
    with open_bundle(path) as z:
        x, y, validation = z["x"], z["y"], z["validation"]
    if columns is not None:
        x = x[:, columns]
    if refit:
        return _softmax(names, x, y, lam, beta)
    return relation_validation_f1(names, x, y, validation, lam, beta)


def _softmax(names, x, y, lam, balance=1.0) -> RelationModel:
    std = Standardiser.fit(names, x)
    return RelationModel(std, softmax_fit(std.transform(names, x), y, len(RELATIONS), lam, balance=balance))


def per_mille(prob: np.ndarray) -> np.ndarray:
    """Probabilities (n, C) as integers 0..1000 that sum to 1000: floor(1000 p), then the
    remaining units to the largest remainders (ties to the lower class index)."""
    scaled = prob * 1000.0
    base = np.floor(scaled).astype(np.int64)
    short = 1000 - base.sum(axis=1)
    key = -(scaled - base)
    if np.isnan(key).any():
        # NaN keys sort last in their rows: the stable argsort's ranks
        order = np.argsort(key, axis=1, kind="stable")
        rank = np.empty_like(order)
        rank[np.arange(len(prob))[:, None], order] = np.arange(prob.shape[1])[None, :]
    else:
        rank = _stable_ranks(key)
    return (base + (rank < short[:, None])).astype(np.uint16)


def _stable_ranks(key: np.ndarray) -> np.ndarray:
    """rank[i, c]: the position of c in the stable ascending argsort of row i of ``key`` (n, C)
    without NaN, counted instead of sorted:

        rank[i, c] = #{d : key[i, d] < key[i, c]} + #{d < c : key[i, d] == key[i, c]}

    one comparison of two columns per pair d > c (d goes first iff key_d < key_c, else c does).
    The stable argsort of per_mille's (65,536, 6) blocks sorted each 6-entry row on its own,
    ~6% of an apply task's CPU on bio; these 15 column comparisons cost a fifth of that."""
    cols = np.ascontiguousarray(key.T)
    rank = np.zeros(cols.shape, np.int8 if len(cols) <= 127 else np.int64)
    for c in range(len(cols)):
        for d in range(c + 1, len(cols)):
            first = cols[d] < cols[c]
            rank[c] += first
            rank[d] += ~first
    return rank.T


def size_cuts(scores: np.ndarray, visible: np.ndarray) -> dict:
    """{size: cut}: the score of the last pair of each share of the visible pairs, best first;
    xxxl: the lowest score of all pairs (every pair is in xxxl)."""
    ordered = np.sort(scores[visible])[::-1]
    out = {}
    for name, share in zip(SIZES, SIZE_SHARES):
        if name == "xxxl" or not len(ordered):
            out[name] = float(scores.min()) if len(scores) else 0.0
        else:
            out[name] = float(ordered[max(1, int(math.ceil(share * len(ordered)))) - 1])
    return out


#: Bits of the order key (order_keys) that one pass of size_cuts_parts settles: 4 passes of
#: 2^16 counts per size settle all 64.
CUT_BITS = 16


def order_keys(x) -> np.ndarray:
    """uint64 keys that sort as the float64 values x: the IEEE-754 bits with the sign bit set
    for a positive number (above every negative one) and all bits flipped for a negative one
    (a larger magnitude, a smaller key). A NaN is NaN's positive key, above +inf (where
    np.sort puts every NaN); -0.0 is the key just below +0.0."""
    x = np.asarray(x, np.float64)
    bits = np.where(np.isnan(x), np.nan, x).view(np.uint64)
    return np.where(bits >> np.uint64(63) == 1, ~bits, bits | np.uint64(1 << 63))


def key_value(key: int) -> float:
    """The float64 whose order key (order_keys) is ``key``."""
    bits = key & ~(1 << 63) if key >> 63 else ~key & (2 ** 64 - 1)
    return float(np.array(bits, np.uint64).view(np.float64))


def size_cuts_parts(parts) -> tuple[dict, dict]:
    """(size_cuts, {size: visible pairs scoring >= its cut}) over pairs read in parts, the same
    floats as size_cuts over all of them at once, without ever holding them all:
    ``parts()`` gives an iterator of (scores, visible) per part, read anew for every pass (in
    this process; the stage's passes are tasks per apply file: _size_cuts_job).

    The cut of a share is the k-th largest visible score, k = max(1, ceil(share n)): the
    value of ascending rank r = n - k (from 0) among the n visible scores. It is found on the
    scores' order keys (order_keys: integers ordered as the floats), CUT_BITS bits a pass, a
    radix selection: a pass counts, among the keys whose higher bits are the prefix settled so
    far, each value of the next CUT_BITS bits; the bucket holding rank r becomes the prefix and
    r the rank inside it (r minus the keys of the lower buckets). After 64 / CUT_BITS passes the
    key is whole: the cut is its float. A last pass counts the visible scores >= each cut."""
    def count(shift, prefixes):
        return _merge_cut_counts([cut_counts(*sv, shift, prefixes) for sv in parts()], prefixes)
        yield  # unreachable: a generator, as _size_cuts_job's

    def pairs(cuts):
        return _merge_size_pairs([size_pairs_of(*sv, cuts) for sv in parts()], cuts)
        yield  # unreachable

    job = _radix_cuts(count, pairs)
    try:
        next(job)
    except StopIteration as stop:
        return stop.value
    raise RuntimeError("size_cuts_parts: a pass asked for tasks")


def _size_cuts_job(paths):
    """A job of Engine.run: size_cuts_parts over the apply tasks' files, each pass a task per
    file (cut_counts_file, size_pairs_file) and their counts summed here (sparse: a pass's
    buckets hold the few prefixes the scores reach)."""
    from pivot.pipeline.engine import Batch

    def count(shift, prefixes):
        done = yield Batch(cut_counts_file, [(path, shift, prefixes) for path in paths], name="ppdb2-sizes", quiet=True)
        return _merge_cut_counts(done, prefixes)

    def pairs(cuts):
        done = yield Batch(size_pairs_file, [(path, cuts) for path in paths], name="ppdb2-sizes", quiet=True)
        return _merge_size_pairs(done, cuts)

    return (yield from _radix_cuts(count, pairs))


def _radix_cuts(count, pairs):
    """size_cuts_parts' selection, a generator: ``count(shift, prefixes)`` and ``pairs(cuts)``
    are generators (jobs of Engine.run, or none that yield) returning the passes' sums."""
    n, low, any_pair = 0, np.inf, False
    names = SIZES[:-1]
    prefix, rank = dict.fromkeys(names, 0), {}
    for level in range(64 // CUT_BITS):
        shift = 64 - CUT_BITS * (level + 1)
        # one count per distinct prefix (sizes whose cuts share the bits so far share it)
        counts, stats = yield from count(shift, sorted(set(prefix.values())))
        if level == 0:
            n, low, any_pair = stats
            if not n:
                break
            rank = {name: n - max(1, int(math.ceil(share * n))) for name, share in zip(names, SIZE_SHARES)}
        for name in names:
            below = np.cumsum(counts[prefix[name]])     # keys in this bucket and the lower ones
            digit = int(np.searchsorted(below, rank[name], side="right"))
            rank[name] -= int(below[digit - 1]) if digit else 0
            prefix[name] = prefix[name] << CUT_BITS | digit
    lowest = float(low) if any_pair else 0.0
    cuts = {name: key_value(prefix[name]) if n else lowest for name in names}
    cuts[SIZES[-1]] = lowest
    return cuts, (yield from pairs(cuts))


def cut_counts(scores, visible, shift: int, prefixes) -> tuple[dict, tuple]:
    """One part's share of a pass of size_cuts_parts: for each prefix (the key bits above
    ``shift`` + CUT_BITS), the visible scores' keys under it counted by their next CUT_BITS bits
    (sparse: (buckets, counts)); and (visible scores, their lowest, any pair)."""
    digits = np.uint64((1 << CUT_BITS) - 1)
    top = order_keys(scores[visible]) >> np.uint64(shift)      # the prefix's bits, then the next CUT_BITS
    high = top >> np.uint64(CUT_BITS)
    out = {}
    for p in prefixes:
        c = np.bincount((top[high == np.uint64(p)] & digits).astype(np.int64), minlength=1 << CUT_BITS)
        nz = np.flatnonzero(c)
        out[p] = (nz, c[nz])
    stats = (int(visible.sum()), float(np.min(scores)) if len(scores) else np.inf, bool(len(scores)))
    return out, stats


def _merge_cut_counts(done, prefixes) -> tuple[dict, tuple]:
    """The parts' cut_counts summed: {prefix: counts (2^CUT_BITS,)}, (n, lowest, any pair)."""
    counts = {p: np.zeros(1 << CUT_BITS, np.int64) for p in prefixes}
    n, low, any_pair = 0, np.inf, False
    for part, (m, lo, anyp) in done:
        for p, (nz, c) in part.items():
            counts[p][nz] += c
        n, low, any_pair = n + m, min(low, lo), any_pair or anyp
    return counts, (n, low, any_pair)


def size_pairs_of(scores, visible, cuts: dict) -> dict:
    """One part's visible pairs scoring >= each size's cut."""
    v = scores[visible]
    return {name: int((v >= cut).sum()) for name, cut in cuts.items()}


def _merge_size_pairs(done, cuts) -> dict:
    return {name: sum(d[name] for d in done) for name in cuts}


def _scores_and_visible(path) -> tuple[np.ndarray, np.ndarray]:
    """(ppdb2 score, visible: no HIDDEN flag) of the pairs of an apply task's file."""
    from pivot.pipeline.wellformed import HIDDEN

    with open_bundle(path) as z:
        return z["ppdb2"], (z["form"] & HIDDEN) == 0


def cut_counts_file(path, shift: int, prefixes) -> tuple[dict, tuple]:
    """cut_counts of an apply task's file (a task)."""
    return cut_counts(*_scores_and_visible(path), shift, prefixes)


def size_pairs_file(path, cuts: dict) -> dict:
    """size_pairs_of an apply task's file (a task)."""
    return size_pairs_of(*_scores_and_visible(path), cuts)


# ------------------------------------------------------------------------------------ the stage


def data_files(params: dict, data_root) -> list[Path]:
    """The data files the stage reads under its settings (fingerprinted by the build)."""
    from pivot.pipeline.wordnet import wordnet_files, wordnet_folder

    files = []
    if params["learn"]:
        files.append(Path(data_root) / params["ratings"])
    if params["wordnet"]:
        files += wordnet_files(wordnet_folder(data_root, LEXICON))
    return files


class CachedLemmas:
    """A lemmatizer asked at most once per token (the labels and the relation labels share it);
    it keeps the wrapped lemmatizer's ``units`` (pivot.pipeline.wellformed)."""

    def __init__(self, lemmatizer):
        self._lemmatizer = lemmatizer
        self._cache: dict[str, frozenset] = {}
        self.units = getattr(lemmatizer, "units", None)

    def __call__(self, token: str) -> frozenset:
        out = self._cache.get(token)
        if out is None:
            out = self._cache[token] = self._lemmatizer(token)
        return out


def identity_lemmas(token: str) -> frozenset:
    """The lemmatizer of a build without WordNet (``[ppdb2] wordnet = false``): every token is
    its own lemma, so the INFLECTION flag is never set (the database's meta says so)."""
    return frozenset((token,))


@dataclass
class PairTable:
    """Every stored pair of the pivot stage, in key order e1 * 2^32 + e2: the parts' files and
    their boundaries (part j holds the global rows bounds[j]:bounds[j+1], the parts ascending
    key ranges), never the pairs themselves.

    Nothing here holds an array with an entry per stored pair: a pass over the table reads one
    part at a time (:meth:`scan`), and the fits read the rows they select (:meth:`rows`,
    :meth:`p_rows`, :meth:`find`). The build's process then grows with the phrases and the
    selected rows, not with the pairs (bio-multi's 32.4M pairs held as whole columns here, their
    keys, slots and labels took the stage's process to 6.0 GiB). Each read of selected rows
    maps the part and unmaps it when done: a map kept open keeps every page a read touched in
    this process's resident set."""

    part_paths: list         # the pivot parts: e1, e2, n_pivots, pivots (n, 3) and p (n, K), p_m(e2|e1)
    n_models: int            # K
    bounds: np.ndarray       # (n_parts + 1,) global row offsets
    first_keys: np.ndarray   # the first key of each non-empty part, ascending
    nonempty: np.ndarray     # those parts' indices

    @classmethod
    def read(cls, part_paths) -> "PairTable":
        """The parts' sizes and first keys (each part's e1 and e2 mapped, two entries read)."""
        bounds, n_models, first, nonempty = [0], 0, [], []
        for j, path in enumerate(part_paths):
            with open_bundle(path) as z:
                e1, e2 = z.memmap("e1"), z.memmap("e2")
                if j == 0 and "p" in z:
                    n_models = z.memmap("p").shape[1]
                if len(e1):
                    first.append(int(e1[0]) << 32 | int(e2[0]))
                    nonempty.append(j)
                bounds.append(bounds[-1] + len(e1))
                del e1, e2
        return cls(list(part_paths), n_models, np.array(bounds, np.int64), np.array(first, np.int64),
                   np.array(nonempty, np.int64))

    @property
    def n_pairs(self) -> int:
        return int(self.bounds[-1])

    def scan(self, fields, labels=None):
        """(first global row, {field: array}) of each part in turn, its fields read whole; with
        ``labels`` (the label files, one per part), the fields named in LABEL_FIELDS come from
        part j's label file."""
        for j, path in enumerate(self.part_paths):
            yield int(self.bounds[j]), _read_fields(path, labels[j] if labels else None, fields)

    def rows(self, rows, fields, labels=None) -> list[np.ndarray]:
        """The fields (as :meth:`scan`'s) of the given global rows, in their order. The rows are
        sorted once and cut at the parts' bounds; each part's are read in ascending order through
        one map of it that goes with the read (comparing every row with every part, and reading
        a part's rows in the given order, cost an apply task's reverse rows ~25% more CPU on
        bio-multi's 44 parts, mostly the maps' page faults)."""
        rows = np.asarray(rows, np.int64)
        # any order of equal rows does (they get the same values): not a stable sort, 3.5 times
        # the time on an apply task's reverse rows
        order = np.argsort(rows)
        ordered = rows[order]
        cuts = np.searchsorted(ordered, self.bounds).tolist()
        out = []
        for f in fields:
            sources = labels if labels and f in LABEL_FIELDS else self.part_paths
            with open_bundle(sources[0]) as z:
                m = z.memmap(f)
                got = np.zeros((len(rows), *m.shape[1:]), m.dtype)
                del m
            for j, (lo, hi) in enumerate(itertools.pairwise(cuts)):
                if lo == hi:
                    continue
                with open_bundle(sources[j]) as z:
                    m = z.memmap(f)
                    got[order[lo:hi]] = m[ordered[lo:hi] - self.bounds[j]]
                    del m                                     # the map goes here
            out.append(got)
        return out

    def p_rows(self, rows, column=None) -> np.ndarray:
        """p of the given rows, (len(rows), K) (or one model's column), float64."""
        p = self.rows(rows, ("p",))[0].astype(np.float64, copy=False)
        return p if column is None else p[:, column]

    def find(self, a, b) -> np.ndarray:
        """Row of each pair (a_i, b_i); -1 where the table does not store it. The queries are
        sorted once; the parts being ascending key ranges, those of part j are the sorted
        queries from its first key to the next part's, searched in part j's keys (one part's
        keys held at a time)."""
        q = np.asarray(a, np.int64) << 32 | np.asarray(b, np.int64)
        order = np.argsort(q, kind="stable")
        qs = q[order]
        at = np.full(len(q), -1, np.int64)
        starts = np.searchsorted(qs, self.first_keys)      # queries below the first key: absent
        ends = np.append(starts[1:], len(qs))
        for j, lo, hi in zip(self.nonempty.tolist(), starts.tolist(), ends.tolist()):
            if lo == hi:
                continue
            with open_bundle(self.part_paths[j]) as z:
                keys = z["e1"].astype(np.int64) << 32 | z["e2"].astype(np.int64)
            pos = np.minimum(np.searchsorted(keys, qs[lo:hi]), len(keys) - 1)
            at[lo:hi] = np.where(keys[pos] == qs[lo:hi], pos + self.bounds[j], -1)
            del keys
        out = np.empty_like(at)
        out[order] = at
        return out

    def reverse_p(self, e1, e2) -> np.ndarray:
        """p_m(e1|e2) of pairs (e1, e2): the row of (e2, e1); 0 where it is not stored."""
        rev = self.find(e2, e1)
        return np.where(rev[:, None] >= 0, self.p_rows(np.maximum(rev, 0)), 0.0)

    def used_phrases(self, n_e: int) -> np.ndarray:
        """The phrase ids some stored pair holds (as e1 or e2), ascending (ids_range, part by part)."""
        return _present(n_e, (ids_range(path)[0] for path in self.part_paths))

    def pivot_ids(self) -> np.ndarray:
        """The distinct foreign phrase ids of the pairs' stored pivots, ascending (ids_range, part
        by part)."""
        f = [ids_range(path)[1] for path in self.part_paths]
        return _present(max((int(a[-1]) + 1 for a in f if len(a)), default=0), f)


def ids_range(part_path) -> tuple[np.ndarray, np.ndarray]:
    """The distinct English phrase ids (e1 or e2) and foreign pivot ids of one pivot part,
    ascending (a task: PairTable.used_phrases and pivot_ids, part by part)."""
    with open_bundle(part_path) as z:
        e = unique(np.concatenate([z["e1"], z["e2"]]).astype(np.int64))
        pivots = z["pivots"]
    return e, unique(pivots[pivots >= 0].astype(np.int64))


def _present(n: int, pieces) -> np.ndarray:
    """The ids 0..n-1 that some array of ``pieces`` holds, ascending (a presence mark per id)."""
    seen = np.zeros(n, dtype=bool)
    for ids in pieces:
        seen[ids] = True
    return np.flatnonzero(seen)


def ids_file(part_path, out_path) -> int:
    """ids_range of one pivot part written to ``out_path`` (``e``, ``f``); returns the largest
    foreign id + 1 (0: none) (a task)."""
    e, f = ids_range(part_path)
    save_bundle(out_path, e=e, f=f)
    return int(f[-1]) + 1 if len(f) else 0


def write_ids(out_path, n_e: int, n_f: int, paths, window: int = IDS_WINDOW) -> int:
    """The stored phrases' ids from the parts' ids files ``paths`` (ids_file's ``e`` and ``f``)
    to ``out_path``: ``used`` (the English ids some pair holds, ascending, int64), ``slot``
    (n_e int32: slot[used[k]] = k, -1 for every other id) and ``f_used`` (the pivots' foreign
    ids, ascending, int64), a window of ids at a time (present_windows: a count pass, then the
    blocks of each member as save_bundle writes them). Returns the number of stored phrases."""
    counts = [len(ids) for _, ids in present_windows(n_e, paths, "e", window)]
    before = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).tolist()
    n_f_used = sum(len(ids) for _, ids in present_windows(n_f, paths, "f", window))

    def slots():
        for k, (a, ids) in enumerate(present_windows(n_e, paths, "e", window)):
            block = np.full(min(a + window, n_e) - a, -1, np.int32)
            block[ids - a] = before[k] + np.arange(len(ids))
            yield block
    save_bundle(out_path, used=Blocks(np.int64, (before[-1],), (ids for _, ids in present_windows(n_e, paths, "e", window))),
                slot=Blocks(np.int32, (n_e,), slots()),
                f_used=Blocks(np.int64, (n_f_used,), (ids for _, ids in present_windows(n_f, paths, "f", window))))
    return before[-1]


def _ids_job(table: PairTable, n_e: int, tmp, out_path):
    """A job of Engine.run: the stored phrases' and pivots' ids (PairTable.used_phrases(n_e) and
    pivot_ids()) from a task per pivot part (ids_file, in a scratch file of ``tmp`` each),
    written to ``out_path`` by windows of ids (write_ids); returns the number of stored phrases.
    (Returned by the tasks, every part's distinct ids came back at once and stayed until the
    stage's next batch, as a job's sent value does: 221 MiB on bio-multi's 44 parts, ~120
    bytes a stored phrase; then a presence mark per phrase id and per foreign id, and the
    used ids, slots and pivots held through the stage: 20 bytes a stored phrase and more.)"""
    from pivot.pipeline.engine import Batch

    paths = [Path(tmp) / f".ids-{j:04d}.arrays" for j in range(len(table.part_paths))]
    n_f = max((yield Batch(ids_file, list(zip(table.part_paths, paths)), name="ppdb2-ids")), default=0)
    try:
        return write_ids(out_path, n_e, n_f, paths)
    finally:
        for path in paths:
            path.unlink(missing_ok=True)


#: The fields of a pair's label file (label_range: one per pivot part): the well-formedness
#: mask and the global row of the pair's reverse (-1: not stored).
LABEL_FIELDS = ("form", "rev")


def _read_fields(path, label_path, fields) -> dict:
    """The named fields of one part, whole: the label fields from ``label_path``, the others
    from the pivot part ``path``."""
    out = {}
    for sources, names in ((label_path, [f for f in fields if f in LABEL_FIELDS and label_path]),
                           (path, [f for f in fields if f not in LABEL_FIELDS or not label_path])):
        if names:
            with open_bundle(sources) as z:
                out.update((f, z[f]) for f in names)
    return out


#: The per-phrase arrays of a block's forms file (forms_task: pivot.pipeline.wellformed.form_arrays)
#: that a labelling task reads (FormBlocks.pair_labels); the file also holds the block's lemma
#: rows (lemma_tokens, lemma_rows), which lemmas_task gathers into one table.
FORM_ARRAYS = ("tokens", "content", "n_content", "core", "bits")


def build(tmp: Path, *, part_paths: list[Path], n_e: int, e_phrases, e_tokens: list[str],
          f_lang_of, models: list[str], params: dict, data_root: Path, engine, shard_paths=()) -> dict:
    """The stage: labels, fits, applies; writes ``x-NNNN.arrays`` per pivot part and
    ``ppdb2.json`` (what the database's meta records). ``n_e``: the English phrase ids
    0..n_e-1; ``e_phrases(ids)`` gives the (token rows, counts) of the English phrase ids
    ``ids`` (ascending), asked for PHRASE_BLOCK stored phrases at a time: every phrase's rows
    at once were n_e x 36 bytes in this process (126 MB on bio-multi's 3.49M ids, and the lhs
    stage beside it read them too); ``f_lang_of(ids)`` gives the language index of foreign phrase ids;
    ``models``: the stored models, General first; ``shard_paths``:
    the encode stage's shards, whose English the relations' word vectors are trained on
    (pivot.pipeline.vectors; none: no vector features).

    What is independent runs side by side (pivot.pipeline.engine.Engine.run): the pairs' labels
    per pivot part on the workers beside the phrases' trigrams and synsets per block; the
    relation classifier's fits and the score's on the workers, this process reading WordNet for the
    former meanwhile; then the apply tasks. In one process the same steps run one after another:
    the same bytes."""
    return engine.run(_build_job(tmp, part_paths=part_paths, n_e=n_e, e_phrases=e_phrases, e_tokens=e_tokens,
                                 f_lang_of=f_lang_of, models=models, params=params, data_root=data_root,
                                 shard_paths=list(shard_paths)))[0]


def _build_job(tmp: Path, *, part_paths, n_e, e_phrases, e_tokens, f_lang_of, models, params, data_root,
               shard_paths=()):
    from pivot.pipeline import vectors, wellformed
    from pivot.pipeline.engine import Batch, Signal, Together

    t0 = time.perf_counter()
    table = PairTable.read(part_paths)
    ids_path = tmp / ".ids.arrays"
    texts_path, starts_path, tokens_path = tmp / ".texts.txt", tmp / ".texts-starts.arrays", tmp / ".tokens.arrays"
    # the Phrases' arrays, the vectors in a file of their own (written before the codes are made)
    phrases_paths = (tmp / ".phrases.arrays", tmp / ".vectors.arrays")
    # the labels stay in their per-part files until the stage ends: the fits read the rows they
    # select, each apply task its own part's
    labels = [tmp / f".form-{j:04d}.arrays" for j in range(len(part_paths))]
    # The word vectors' training (counts, co-occurrences, sums, PPMI and SVD: the encode stage's
    # shards alone) runs from the stage's start, beside the ids' tasks and this process's writing
    # of the phrases' rows and texts (the workers' idle time: bio-multi's ~6.5 s), and only the
    # means, which read the phrases' rows, run with the labels and the phrase side. The means
    # wait for the training through a Signal (pivot.pipeline.engine), not a Together: a Together
    # of the training and the ids would hold the labels and the phrase side until the training
    # ended, one of the means after them all would hold the survey. The writing is an Aside (a
    # thread): as a job's own code it held the training's next steps back until it ended (bio:
    # the SVD then ran after the forms' and phrase side's tasks, the means after the labels).
    # The training comes first: in one process the jobs run in their order, and the means' wait
    # finds it done.
    trained = Signal()
    with_vectors = bool(params["learn"] and shard_paths)
    training = [vectors.train_job(shard_paths, len(e_tokens), phrases_paths[1], trained)] if with_vectors else []
    *_, (n_used, lex_path) = yield Together(*training, _phrases_job(
        table, n_e, tmp, ids_path, tokens_path, texts_path, starts_path, phrases_paths, labels, e_phrases, e_tokens,
        f_lang_of, params, data_root, trained if with_vectors else None))
    texts = TextFile(texts_path, starts_path)
    if params["learn"]:
        # the fits read their rows' phrases and pivots' languages alone (_rows_features)
        ph = PhraseFile(*phrases_paths, lookup=False)
    tokens_path.unlink()
    if params["learn"]:
        # one pass over the parts as tasks: the forms' counts and what the fits select (the
        # within lists' and the relations' rows), folded here as each part's comes (_survey_job)
        # the fits read the slots and synsets of the phrases they select from the file
        # (LexicalFile): every phrase's synsets, split and keys were ~30 bytes a stored phrase
        # held through the fits, its slot by id 4 bytes a phrase id
        lex = LexicalFile(lex_path)
        survey, listed = yield from _survey_job(table, labels, lex_path, texts_path, starts_path, params["seed"],
                                                params["max_relation_pairs"])
        counts, hidden = survey["counts"], survey["hidden"]
    else:
        # the forms' counts, a task per label file
        done = yield Batch(form_counts_file, [(path,) for path in labels], name="ppdb2-counts")
        counts = {name: sum(c[name] for c, _ in done) for name in wellformed.NAMES.values()}
        hidden = sum(h for _, h in done)
    log.info("ppdb2: %d pairs of %d phrases labelled in %.1f s", table.n_pairs, n_used, time.perf_counter() - t0)
    meta = {"forms": {"lemmatizer": ("WordNet 3.0 (NLTK's morphy on the data files, pivot.pipeline.wordnet)"
                                     if params["wordnet"] else "none ([ppdb2] wordnet = false): INFLECTION is never set"),
                      "counts": counts, "hidden": hidden, "n_pairs": table.n_pairs}}
    parts = [tmp / f"x-{j:04d}.arrays" for j in range(len(part_paths))]
    if not params["learn"]:
        texts.close()
        for path in (texts_path, starts_path, ids_path):
            path.unlink()
        for label, path in zip(labels, parts):
            with open_bundle(label) as z:
                save_bundle(path, form=z["form"])
            label.unlink()
        meta["ppdb2"] = {"learned": False, "why": "[ppdb2] learn = false in the recipe"}
        meta["relations"] = {"classified": False, "why": "[ppdb2] learn = false in the recipe"}
        (tmp / "ppdb2.json").write_text(json.dumps(meta, indent=1, sort_keys=True))
        return meta

    fit_path = tmp / ".fit.json"
    names = feature_names(models, ph.dim)
    fit = {"models": models, "features": names}
    # The score's fit and the relation classifier's grid on the workers. The score's is one task,
    # submitted first: this process then reads WordNet's links of the relations' selected phrases
    # and their features (1.7 s on bio) while a worker fits the score. Run here, the score's fit
    # (5.3 s on bio) kept this process from the relations' results until it ended: their refits
    # waited for it, and a core stood idle.
    score_job = _score_job(table, ph, labels, lex_path, models, texts, ids_path, listed, params, data_root)
    relations_job = _relations_job(table, ph, labels, names, texts, lex, survey, params, data_root, tmp)
    (score, fit["score"]), (relations, fit["relations"]) = yield Together(score_job, relations_job)
    del survey, listed
    del relations_job, score_job
    log.info("ppdb2: fitted in %.1f s (dev Spearman %.3f; relations macro-F1 %.3f)", time.perf_counter() - t0,
             fit["score"]["dev"]["spearman"], fit["relations"]["eval"]["full"]["macro_f1"])
    fit_path.write_text(json.dumps({"score": score.to_json(), "relations": relations.to_json(),
                                    "names": pair_feature_names(models, ph.dim)}))
    terms_path = tmp / ".terms.arrays" if ph.dim else None
    if ph.dim:
        # the phrase vectors' part of the relations' linear predictor, once per phrase (the
        # apply tasks add t1[e1] + t2[e2] to the pair part's); APPLY_ROWS phrases' vectors read
        # at a time (a phrase's terms are its own: the same bytes)
        # (written a block at a time, one side after the other: never an array of every phrase's)
        shape = (ph.n, len(RELATIONS))
        save_bundle(terms_path, t1=Blocks(np.float64, shape, _term_blocks(relations, ph, 0)),
                    t2=Blocks(np.float64, shape, _term_blocks(relations, ph, 1)))
    # The apply tasks read all they need from these files: what the labels and fits held here
    # (the list and lexicon features) goes before the tasks run beside it.
    texts.close()
    del lex, ph, texts
    for path in (texts_path, starts_path, ids_path, lex_path):
        path.unlink()
    release_heap()          # the fits' freed heap, before the apply tasks run beside this process
    done = yield Batch(apply_range, [(part_paths, j, phrases_paths, labels[j], fit_path, parts[j], terms_path)
                                     for j in range(len(part_paths))], name="ppdb2")
    log.info("ppdb2: applied to %d ranges, %.1f CPU s in the tasks", len(done),
             sum(d.get("cpu_seconds", 0.0) for d in done))
    sizes, size_pairs = yield from _size_cuts_job(parts)
    for p in (fit_path, *phrases_paths, *labels, *([terms_path] if terms_path else [])):
        p.unlink()
    meta["ppdb2"] = {"learned": True, **fit["score"], "sizes": sizes, "size_pairs": size_pairs,
                     "n_pairs": int(sum(d["n_pairs"] for d in done))}
    meta["relations"] = {"classified": True, **fit["relations"]}
    (tmp / "ppdb2.json").write_text(json.dumps(meta, indent=1, sort_keys=True))
    return meta


def _phrases_job(table, n_e, tmp, ids_path, tokens_path, texts_path, starts_path, phrases_paths, labels, e_phrases,
                 e_tokens, f_lang_of, params, data_root, trained):
    """A job of Engine.run, _build_job's from its start to the survey, beside the word vectors'
    training (``trained``: the Signal it sets; None: no vectors): the stored phrases' ids (tasks),
    their rows and texts (here), then the labels, the phrase side and (with vectors) the means
    side by side. Returns the number of stored phrases and the Lexical file's path (None
    without learning)."""
    from pivot.pipeline.engine import Aside, Together

    # the stored phrases (and pivots) from a task per pivot part, not a pass over every pair
    # here, to ids_path: their ids (used), each phrase id's slot (int32: the pairs' slots are
    # this array at a part's e1 and e2) and the pivots' ids, each read by blocks or windows
    n_used = yield from _ids_job(table, n_e, tmp, ids_path)
    # The phrases' forms (a task per block of phrases) and then the pairs' labels (and each
    # pair's reverse row, per pivot part) on the workers, beside what the fits need of the
    # phrases (their trigrams and WordNet synsets, a task per block of phrases). Each of these
    # tasks reads WordNet (0.7 CPU s). The forms' tasks read their blocks' token rows (the
    # encode stage's English ids) from tokens_path, which the vectors' means read too.
    # The stored phrases' token rows and counts (what the features need of the translation
    # stage's phrases) to tokens_path, PHRASE_BLOCK phrases read at a time; then their texts
    # straight to their file, a block of rows at a time (never a list of every text here), and
    # their starts to theirs. The rows of a phrase are its own: the same bytes as the rows of
    # every id indexed by ``used``.
    # In a thread (Aside): the training's next steps are submitted meanwhile.
    blocks, alphabet = yield Aside(_write_phrases, tokens_path, e_phrases, ids_path, texts_path, starts_path, n_used,
                                   e_tokens, params["learn"])
    labelled = _label_job(texts_path, blocks, tokens_path, ids_path, labels, table.part_paths,
                          str(data_root) if params["wordnet"] else None)
    if not params["learn"]:
        yield Together(labelled)
        return n_used, None
    # the vectors' means as tasks too (their training ran meanwhile), beside the forms tasks and
    # the phrase side's; the phrases' token rows go to them through a file
    jobs = [labelled]
    if trained is not None:
        jobs.append(_vector_means_job(tokens_path, phrases_paths[1], trained))
    done = yield Together(*jobs, _phrase_side_job(ids_path, texts_path, blocks, alphabet, tokens_path,
                                                  f_lang_of, data_root, params, phrases_paths, trained is not None))
    return n_used, done[-1]


def _write_phrases(tokens_path, e_phrases, ids_path, texts_path, starts_path, n_used, e_tokens, learn):
    """The stored phrases' token rows and counts (write_phrase_rows) and texts (write_text_file);
    returns the texts' blocks and (learn) the trigrams' alphabet of their words (else None)."""
    from pivot.pipeline.encode import phrase_text_list

    write_phrase_rows(tokens_path, e_phrases, ids_path)
    blocks = write_text_file(texts_path, (phrase_text_list(rows, e_tokens, np.arange(len(rows)))
                                          for rows in member_blocks(tokens_path, "tokens")), starts_path, n_used)
    return blocks, words_alphabet_of(member_blocks(tokens_path, "tokens"), e_tokens) if learn else None


def _term_blocks(relations: "RelationModel", ph: "PhraseFile", side: int):
    """One side's phrase terms (RelationModel.phrase_terms) of every stored phrase, APPLY_ROWS
    phrases' vectors read at a time."""
    for a in range(0, ph.n, APPLY_ROWS):
        yield relations.phrase_terms(ph.vectors(a, a + APPLY_ROWS), sides=(side,))[0]


def _label_job(texts_path, blocks, tokens_path, slot_path, label_paths, part_paths, data_root):
    """A job of Engine.run: the phrases' forms (a task per block of phrases, ``blocks`` as
    _write_texts gives them), their lemma rows in one table (one task), then the pairs' labels
    per part."""
    from pivot.pipeline.engine import Batch

    tmp = Path(texts_path).parent
    form_paths = [tmp / f".forms-{k:04d}.arrays" for k in range(len(blocks))]
    lemmas_path = tmp / ".lemmas.arrays"
    yield Batch(forms_task, [(texts_path, block, tokens_path, data_root, path)
                             for block, path in zip(blocks, form_paths)], name="ppdb2-forms")
    yield Batch(lemmas_task, [(form_paths, lemmas_path)], name="ppdb2-lemmas")
    done = yield Batch(label_range, [(form_paths, lemmas_path, slot_path, part_paths, j, label_paths[j])
                                     for j in range(len(part_paths))], name="ppdb2-labels")
    for path in (*form_paths, lemmas_path):
        path.unlink()
    return done


#: Stored phrases per task of the phrase side (phrase_side_task): each task reads WordNet (0.7
#: CPU s), and a block's trigrams and synsets are ~5 CPU s on this project's machines.
PHRASE_BLOCK = 500_000


def words_alphabet(tokens: np.ndarray, e_tokens: list[str]) -> np.ndarray:
    """The trigrams' alphabet of the phrases of token rows ``tokens`` (-1 padded; ids of the
    words ``e_tokens``): their words' characters and the space that joins them (a text's cut
    holds no others), so that every block of phrases is coded alike (phrase_side_task)."""
    return words_alphabet_of([tokens], e_tokens)


def words_alphabet_of(blocks, e_tokens: list[str]) -> np.ndarray:
    """words_alphabet of the phrases whose token rows are the blocks of rows ``blocks``: the
    union of each block's words is every phrase's (each block's distinct ids, merged)."""
    ids = np.zeros(0, np.int64)
    for tokens in blocks:
        ids = np.union1d(ids, np.unique(np.asarray(tokens)[np.asarray(tokens) >= 0]).astype(np.int64))
    return trigram_alphabet([" ", *(e_tokens[w] for w in ids.tolist())])


def write_phrase_rows(path, e_phrases, ids, block: int = PHRASE_BLOCK) -> None:
    """``tokens`` (int32 token rows) and ``counts`` (float64 bitext counts) of the phrase ids
    ``ids`` (ascending; an array, or the path of write_ids' file: its ``used``, read a block at
    a time) to ``path``, e_phrases(ids[a:a + block]) asked for a block at a time and written
    as it comes (bundle.Blocks): this process holds one block's rows, not every id's."""
    if isinstance(ids, (str, Path)):
        with open_bundle(ids) as z:
            n = z.shape("used")[0]
        path_of_ids = ids

        def pieces():
            return (np.asarray(x, np.int64) for x in member_blocks(path_of_ids, "used", block))
    else:
        ids = np.asarray(ids, np.int64)
        n = len(ids)

        def pieces():
            return (ids[a:a + block] for a in range(0, n, block))
    width = e_phrases(np.zeros(0, np.int64))[0].shape[1]
    save_bundle(path, tokens=Blocks(np.int32, (n, width), (e_phrases(x)[0] for x in pieces())),
                counts=Blocks(np.float64, (n,), (e_phrases(x)[1] for x in pieces())))


def member_blocks(path, name: str, block: int = PHRASE_BLOCK):
    """Rows a:a + block of member ``name`` of bundle ``path``, for a = 0, block, ... (copies; the
    map of each goes with its read)."""
    with open_bundle(path) as z:
        n = z.shape(name)[0]
    for a in range(0, n, block):
        with open_bundle(path) as z:
            yield z.take(name, slice(a, a + block))


def phrase_side(table, texts, slot, tokens, e_tokens, counts, f_lang_of, data_root, params, phrases_paths,
                with_vectors: bool = False) -> Lexical:
    """The stage's phrase side (_phrase_side_job) run in this process, the texts through a scratch
    file beside ``phrases_paths[0]`` (for the benchmarks that rebuild the stage's rows)."""
    from pivot.pipeline.engine import Engine

    texts_path = Path(phrases_paths[0]).parent / ".texts.txt"
    tokens_path = Path(phrases_paths[0]).parent / ".tokens.arrays"
    ids_path = Path(phrases_paths[0]).parent / ".ids.arrays"
    blocks = _write_texts(texts_path, texts)
    save_bundle(tokens_path, tokens=np.asarray(tokens, np.int32), counts=np.asarray(counts, np.float64))
    save_bundle(ids_path, slot=np.asarray(slot, np.int32), f_used=table.pivot_ids())
    try:
        lex_path = Engine(workers=1).run(_phrase_side_job(ids_path, texts_path, blocks,
                                                          words_alphabet(tokens, e_tokens), tokens_path, f_lang_of,
                                                          data_root, params, phrases_paths, with_vectors))[0]
        lex = Lexical.load(lex_path)
        lex_path.unlink()
        return lex
    finally:
        for path in (texts_path, tokens_path, ids_path):
            path.unlink()


def _write_texts(path: Path, texts: list[str], block: int = PHRASE_BLOCK) -> list[tuple[int, int, int, int]]:
    """Write "\n".join(texts) to ``path`` (UTF-8 bytes, no newline translation) a block of
    ``block`` texts at a time; return each block's (first text, texts, byte offset, bytes), by
    which a task reads its block alone (read_text_block)."""
    return write_text_blocks(path, (texts[a:a + block] for a in range(0, len(texts), block)))[0]


def write_text_blocks(path: Path, pieces) -> tuple[list[tuple[int, int, int, int]], np.ndarray]:
    """Write the texts of ``pieces`` (lists of texts, one block each, none holding a newline)
    to ``path`` as "\n".join of them all; return each block's (first text, texts, byte offset,
    bytes) and every text's start (n + 1 int64, the last one the file's size + 1: text i is
    the bytes starts[i]:starts[i + 1] - 1), the newlines found in each block's bytes."""
    blocks = []
    starts = np.concatenate(list(_text_starts(path, pieces, blocks)))
    return blocks, starts


def write_text_file(path: Path, pieces, starts_path: Path, n: int) -> list[tuple[int, int, int, int]]:
    """write_text_blocks with the ``n`` texts' starts written to ``starts_path`` (member
    ``starts``, n + 1 int64) a block at a time as the texts are (never every text's start in
    this process); returns the blocks."""
    blocks = []
    save_bundle(starts_path, starts=Blocks(np.int64, (n + 1,), _text_starts(path, pieces, blocks)))
    return blocks


def _text_starts(path: Path, pieces, blocks: list):
    """write_text_blocks' work, a generator: writes the texts, appends each block to ``blocks``
    and yields the starts a block at a time (the first text's 0, then each block's ends + 1)."""
    at, first = 0, 0
    yield np.zeros(1, np.int64)
    with open(path, "wb") as fh:
        for piece in pieces:
            if not len(piece):
                continue
            data = "\n".join(piece).encode("utf-8")
            skip = 1 if first else 0
            fh.write(b"\n" * skip + data)
            blocks.append((first, len(piece), at + skip, len(data)))
            newlines = np.flatnonzero(np.frombuffer(data, np.uint8) == 10)
            if len(newlines) != len(piece) - 1:
                raise ValueError(f"{path}: a text of block {len(blocks) - 1} holds a newline")
            yield at + skip + np.append(newlines, len(data)) + 1
            at += skip + len(data)
            first += len(piece)


class TextFile:
    """The stored phrases' texts, read from a file write_text_blocks wrote (by slot: the file's
    order), through the texts' starts and positioned reads of the file: the build's process
    reads the few texts it hashes (the fits' splits) without holding every text (bio-multi's
    2.37M as Python strings were ~0.25 GB; hundreds of millions at PPDB scale). Read, not
    mapped: a map open through the fits kept every page that the rated texts' scan (blocks)
    and the hashed texts touched in the process's resident set, the whole file's.

    ``starts``: the starts as an array (a task's map of them), or the path of the bundle
    write_text_file wrote them to: then the starts a read needs are read with it, through
    bounded windows of that file (the build's process: no start per stored phrase held)."""

    def __init__(self, path, starts):
        self.path = Path(path)
        if isinstance(starts, (str, Path)):
            self.starts, self.starts_path = None, Path(starts)
            with open_bundle(self.starts_path) as z:
                self._n = z.shape("starts")[0] - 1
        else:
            self.starts, self.starts_path, self._n = starts, None, len(starts) - 1
        self._fd = os.open(self.path, os.O_RDONLY)

    def __len__(self) -> int:
        return self._n

    def _starts_at(self, idx) -> np.ndarray:
        """starts[idx] (idx ascending), from the array or through windows of its file."""
        idx = np.asarray(idx, np.int64)
        if self.starts_path is None:
            return np.asarray(self.starts[idx], np.int64)
        with open_bundle(self.starts_path) as z:
            return z.rows("starts", idx)

    def _pread(self, lo: int, hi: int) -> str:
        return os.pread(self._fd, hi - lo, lo).decode("utf-8") if hi > lo else ""

    def _read(self, a: int, b: int) -> str:
        """Texts a..b-1 joined by newlines (bytes starts[a]:starts[b] - 1)."""
        lo, hi = self._starts_at([a, b]).tolist()
        return self._pread(lo, hi - 1)

    def __getitem__(self, i: int) -> str:
        return self._read(i, i + 1)

    def many(self, slots) -> list[str]:
        """The texts of ``slots`` (any order, repeats allowed), in that order: the starts of their
        distinct slots read in one ascending pass (s, s + 1 of each), then a read per text."""
        slots = np.asarray(slots, np.int64)
        distinct, k = np.unique(slots, return_inverse=True)
        bounds = self._starts_at(np.stack([distinct, distinct + 1], axis=1).ravel()).tolist()
        texts = [self._pread(lo, hi - 1) for lo, hi in zip(bounds[0::2], bounds[1::2])]
        return [texts[i] for i in k.tolist()]

    def blocks(self, size: int = PHRASE_BLOCK):
        """(first slot, texts) of each ``size`` texts in turn."""
        for a in range(0, len(self), size):
            b = min(a + size, len(self))
            yield a, self._read(a, b).split("\n")

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def read_text_block(path, offset: int, size: int, n: int) -> list[str]:
    """The ``n`` texts of the ``size`` bytes at ``offset`` of a file _write_texts wrote."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        texts = fh.read(size).decode("utf-8").split("\n")
    if len(texts) != n:
        raise ValueError(f"{path}: {len(texts)} texts at byte {offset}, {n} expected")
    return texts


@_heap_released
def phrase_side_task(texts_path, block: tuple, alphabet: np.ndarray, data_root, seed: int, test_fraction: float,
                     out_path) -> dict:
    """The phrase side of a block of stored phrases (a task; ``block`` as _write_texts gives it):
    their character trigrams (char_trigrams over the stage's ``alphabet``: tri_count, tri), their
    WordNet synsets (WordNet.many_phrase_synsets with the lemmatizer of its morphy:
    syn_count, syn_ids) and the relation split's side of each (held: the phrase's key synset, its
    smallest, is held out with probability ``test_fraction``, by unit_hash(str(key), seed)),
    written to ``out_path``. A phrase's rows depend on its text, the alphabet and WordNet alone:
    the same bytes for any cut into blocks."""
    from pivot.hashes import unit_hash
    from pivot.pipeline import wellformed
    from pivot.pipeline.wordnet import WordNet, wordnet_folder

    out_path = Path(out_path)
    if out_path.is_file():
        return {"reused": True}
    _, n, offset, size = block
    texts = read_text_block(texts_path, offset, size, n)
    tri_ptr, tri = char_trigrams(texts, alphabet=alphabet)
    wn = WordNet.read(wordnet_folder(data_root, LEXICON))
    synsets = wn.many_phrase_synsets(texts, CachedLemmas(wellformed.WordNetLemmatizer(wn)))
    del wn, texts
    syn_count = np.fromiter(map(len, synsets), np.int32, count=len(synsets))
    syn_ids = np.fromiter((x for ids in synsets for x in ids), np.int64, count=int(syn_count.sum()))
    held = np.array([bool(ids) and unit_hash(str(min(ids)), seed) < test_fraction for ids in synsets], dtype=bool)
    save_bundle(out_path, tri_count=np.diff(tri_ptr), tri=tri, syn_count=syn_count, syn_ids=syn_ids, held=held)
    return {"reused": False, "n_phrases": n}


def _phrase_side_job(ids_path, texts_path, blocks, alphabet, tokens_path, f_lang_of, data_root, params,
                     phrases_paths, with_vectors: bool = False):
    """A job of Engine.run: what the fits need of the phrases. The trigrams and WordNet synsets
    of each block of phrases are tasks (phrase_side_task); here, the per-phrase feature inputs
    (shared with the apply tasks through ``phrases_paths[0]``, a row per stored phrase in slot
    order: the rows of a phrase id are its slots), the blocks' trigrams copied into that file
    one block at a time, and the synsets to the Lexical file whose path it returns (beside
    ``texts_path``: write_lexical); the phrases' token rows and counts (``tokens_path``:
    write_phrase_rows') go to that file a block at a time too, and the slots (``slot``) and
    the pivots' ids (``f_used``) come from ``ids_path`` (write_ids') by blocks: this process
    holds no array with an entry per stored phrase or pivot. The vectors go to
    ``phrases_paths[1]``: written by _vector_means_job's tasks (with_vectors), else empty here."""
    from pivot.pipeline.engine import Batch

    tmp = Path(texts_path).parent
    paths = [tmp / f".phrases-{k:04d}.arrays" for k in range(len(blocks))]
    yield Batch(phrase_side_task, [(texts_path, block, alphabet, str(data_root), params["seed"],
                                    params["relation_test_fraction"], path) for block, path in zip(blocks, paths)],
                name="ppdb2-phrases")
    phrases_path, vectors_path = phrases_paths
    if not with_vectors:
        save_bundle(vectors_path, vec=np.zeros((0, 0), np.float32), vec_has=np.zeros(0, bool))
    with open_bundle(ids_path) as z:
        n_f_used, n_e = z.shape("f_used")[0], z.shape("slot")[0]
        n_f = int(z.take("f_used", slice(n_f_used - 1, n_f_used))[0]) + 1 if n_f_used else 0
    n_codes = sum(int(_members([path], "tri_count", np.int64).sum()) for path in paths)
    codes = Blocks(trigram_dtype(alphabet), (n_codes,), (_members([path], "tri") for path in paths))
    with open_bundle(tokens_path) as z:
        shape = z.shape("tokens")
    # each phrase's words and log(1 + count) are its own: block by block, the same bytes
    n_words = Blocks(np.int8, shape[:1], ((t >= 0).sum(axis=1).astype(np.int8)
                                          for t in member_blocks(tokens_path, "tokens")))
    log_count = Blocks(np.float64, shape[:1], (portable.log(1.0 + c) for c in member_blocks(tokens_path, "counts")))
    save_bundle(phrases_path, n_words=n_words, log_count=log_count,
                tokens=Blocks(np.int32, shape, member_blocks(tokens_path, "tokens")),
                tri_ptr=Blocks(np.int64, (shape[0] + 1,), _offset_blocks(paths, "tri_count")), tri=codes,
                f_lang=Blocks(np.int16, (n_f,), _language_blocks(ids_path, n_f, f_lang_of)),
                row_of=Blocks(np.int32, (n_e,), member_blocks(ids_path, "slot", IDS_WINDOW)))
    lex_path = tmp / ".lexical.arrays"
    write_lexical(lex_path, paths, ids_path)
    for path in paths:
        path.unlink()
    release_heap()          # the blocks' temporaries, before the fits' own
    return lex_path


def _offset_blocks(paths, name: str):
    """The CSR pointer (_offsets) of the counts ``name`` of the bundles ``paths`` one after
    another, a block (one bundle's) at a time: 0, then each bundle's running sums."""
    at = 0
    yield np.zeros(1, np.int64)
    for path in paths:
        ptr = at + np.cumsum(_members([path], name, np.int64), dtype=np.int64)
        at = int(ptr[-1]) if len(ptr) else at
        yield ptr


def _language_blocks(ids_path, n_f: int, f_lang_of, window: int = IDS_WINDOW):
    """f_lang (n_f int16: the language of each pivot id of ``f_used`` of ``ids_path``, -1 for
    every other foreign id), a window of ids at a time: f_lang_of asked for a window's pivots."""
    with open_bundle(ids_path) as z:
        n = z.shape("f_used")[0]
    at = 0
    for a in range(0, n_f, window):
        b = min(a + window, n_f)
        with open_bundle(ids_path) as z:
            m = z.memmap("f_used")
            hi = at + int(np.searchsorted(m[at:n], b)) if n else 0
            ids = np.array(m[at:hi], np.int64)
            del m
        block = np.full(b - a, -1, np.int16)
        if len(ids):
            block[ids - a] = f_lang_of(ids)
        at = hi
        yield block


def write_lexical(path, paths, ids_path) -> None:
    """The stored phrases' Lexical (Lexical.save's members: syn_ptr, syn_ids, held, slot, keys)
    from the phrase side's block files ``paths`` (phrase_side_task's, one after another in slot
    order) and the slots of ``ids_path``, written a block at a time. share_synset's keys (slot *
    2^32 + synset id, distinct, ascending) of a block's slots lie between those of the blocks
    before and after it: each block's own sorted keys, one after another, are the whole's."""
    firsts = np.concatenate([[0], np.cumsum([_members([p], "syn_count", np.int32).shape[0] for p in paths],
                                            dtype=np.int64)]).tolist()

    def keys(k):
        count = _members([paths[k]], "syn_count", np.int64)
        slots = firsts[k] + np.arange(len(count), dtype=np.int64)
        return unique(np.repeat(slots, count) << 32 | _members([paths[k]], "syn_ids", np.int64))
    n_keys = sum(len(keys(k)) for k in range(len(paths)))
    n_syn = sum(int(_members([p], "syn_count", np.int64).sum()) for p in paths)
    with open_bundle(ids_path) as z:
        n_e = z.shape("slot")[0]
    save_bundle(path, syn_ptr=Blocks(np.int64, (firsts[-1] + 1,), _offset_blocks(paths, "syn_count")),
                syn_ids=Blocks(np.int64, (n_syn,), (_members([p], "syn_ids", np.int64) for p in paths)),
                held=Blocks(bool, (firsts[-1],), (_members([p], "held", bool) for p in paths)),
                slot=Blocks(np.int32, (n_e,), member_blocks(ids_path, "slot", IDS_WINDOW)),
                keys=Blocks(np.int64, (n_keys,), (keys(k) for k in range(len(paths)))))


def _members(paths, name, dtype=None) -> np.ndarray:
    """Member ``name`` of the bundles ``paths``, concatenated (none: empty, of ``dtype``)."""
    if not paths:
        return np.zeros(0, dtype)
    parts = []
    for path in paths:
        with open_bundle(path) as z:
            parts.append(z[name])
    return np.concatenate(parts)


def _offsets(counts: np.ndarray) -> np.ndarray:
    """The CSR pointer (n + 1, int64) of per-row counts."""
    ptr = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=ptr[1:])
    return ptr


@_heap_released
def vectors_task(shard_paths, n_tokens: int, tokens_path, out_path) -> dict:
    """The stored phrases' word vectors (a task): the words' (vectors.train on the English of
    the encode stage's shards ``shard_paths``, ``n_tokens`` token ids), then each phrase's mean
    of its words' (vectors.phrase_vectors; the phrases' token rows: ``tokens`` of
    ``tokens_path``), written to ``out_path`` as ``vec`` and ``vec_has``.

    The one-task form of the stage's vectors (the benchmarks' and the tests' reference): the
    stage runs the same steps as tasks (vectors.train_job, then _vector_means_job), to the same
    bytes. In any process the same bytes: the training's BLAS runs on one thread
    (vectors.train) and the rest is exact integer sums and numpy's fixed-order sums."""
    from pivot.pipeline import vectors

    out_path = Path(out_path)
    if out_path.is_file():
        return {"reused": True}
    t0 = time.process_time()
    words = vectors.train(vectors.EnglishShards(shard_paths), n_tokens)
    release_heap()      # the training's co-occurrence counts, before the vectors are made
    with open_bundle(tokens_path) as z:
        tokens = z["tokens"]
    # the phrases' vectors written PHRASE_BLOCK rows at a time as they are made (a row's mean
    # is its own: the same bytes), never held whole
    has = []

    def blocks():
        for a in range(0, len(tokens), vectors.PHRASE_BLOCK):
            vec, vec_has = vectors.phrase_vectors(tokens[a:a + vectors.PHRASE_BLOCK], words)
            has.append(vec_has)
            yield vec
    # (vec_has is written after vec, its blocks made by then)
    save_bundle(out_path, vec=Blocks(np.float32, (len(tokens), words.shape[1]), blocks()),
                vec_has=Blocks(bool, (len(tokens),), has))
    return {"reused": False, "words": int(np.any(words != 0, axis=1).sum()), "dim": int(words.shape[1]),
            "cpu_seconds": round(time.process_time() - t0, 2)}


def _vectors_job(shard_paths, n_tokens, tokens_path, out_path):
    """A job of Engine.run: the phrases' vectors as vectors_task writes them, its steps as tasks
    (pivot.pipeline.vectors.job: the counts per group of shards and per range of words, the PPMI
    and SVD, the means per PHRASE_BLOCK phrases); logs what it trained. The whole chain in one
    job (the tests'); the stage runs its training and its means apart (_build_job)."""
    from pivot.pipeline import vectors

    done = yield from vectors.job(shard_paths, n_tokens, tokens_path, out_path, PHRASE_BLOCK)
    _log_vectors(done)
    return done


def _vector_means_job(tokens_path, out_path, trained):
    """A job of Engine.run: the phrases' means of the vectors trained beside it (the Signal
    ``trained``: pivot.pipeline.vectors.means_job) per PHRASE_BLOCK phrases; logs what the two did."""
    from pivot.pipeline import vectors

    done = yield from vectors.means_job(tokens_path, out_path, PHRASE_BLOCK, trained)
    _log_vectors(done)
    return done


def _log_vectors(done: dict) -> None:
    """The word vectors' log line (the wall time from the training's start to the means' end)."""
    if not done["reused"]:
        cpu, n = done["cpu_seconds"], done["tasks"]
        log.info("ppdb2: word vectors (%d words, %d dimensions) in %.1f s: %.1f CPU s in %d tasks (counts %.1f, "
                 "PPMI and SVD %.2f, phrase means %.2f)", done["words"] or 0, done["dim"],
                 done["seconds"], sum(cpu.values()), sum(n.values()),
                 cpu["occurrences"] + cpu["cooccurrences"] + cpu["sums"], cpu["ppmi_svd"], cpu["phrases"])


def _score_job(table: "PairTable", ph: "PhraseFile", labels, lex_path, models, texts: "TextFile", ids_path, listed,
               params, data_root):
    """A job of Engine.run: the score's fit (_score_side) as one task, handed the paths of what it
    reads (a file handle or a map does not cross to a worker); returns (ScoreModel, its report)."""
    from pivot.pipeline.engine import Batch

    (fitted,) = yield Batch(score_side_task, [(table.part_paths, ph.paths, labels, lex_path, models, texts.path,
                                               texts.starts_path, ids_path, listed, params, data_root)],
                            name="ppdb2-score")
    return fitted


@_heap_released
def score_side_task(part_paths, phrases_paths, labels, lex_path, models, texts_path, starts_path, ids_path, listed,
                    params, data_root):
    """_score_side on the files the build's process reads them from (PairTable, PhraseFile,
    LexicalFile and TextFile opened here): the same arithmetic, in whichever process runs it."""
    texts = TextFile(texts_path, starts_path)
    try:
        return _score_side(PairTable.read(part_paths), PhraseFile(*phrases_paths, lookup=False), labels,
                           LexicalFile(lex_path), models, texts, ids_path, listed, params, data_root)
    finally:
        texts.close()


def _score_side(table, ph, labels, lex, models, texts, ids_path, listed, params, data_root):
    """The score's within lists (training side, and the held-out side it is reported on; their
    rows ``listed`` as _survey_job found them) and fit."""
    # the training lists made by _fit_score (a function of none: they are its own, and go before
    # its report scores the held-out lists); the held-out side's lists without their features:
    # the report scores them a block of rows at a time once the fit is made
    held_lists = _within_lists(table, ph, labels, lex, models, texts, params["seed"], listed["held"], held_out=True,
                               features=False)
    return _fit_score(table, ph, labels, models, texts, ids_path, params, data_root,
                      functools.partial(_within_lists, table, ph, labels, lex, models, texts, params["seed"],
                                        listed["train"]), held_lists, listed["held"][0])


@_heap_released
def forms_task(texts_path, block: tuple, tokens_path, data_root, out_path) -> dict:
    """The forms of a block of stored phrases (a task; ``block`` as _write_texts gives it):
    wellformed.form_arrays of their token rows (rows block[0]:block[0] + block[1] of
    ``tokens`` in ``tokens_path``: the encode stage's English ids), the words' texts read from
    the block's texts, with WordNet's lemmatizer of ``data_root`` and its lemma names' ids
    (None: every token its own lemma, its id), written to ``out_path``. Every array is a
    function of the block's phrases alone (form_arrays): the same labels for any cut."""
    from pivot.pipeline import wellformed
    from pivot.pipeline.wordnet import WordNet, wordnet_folder

    out_path = Path(out_path)
    if out_path.is_file():
        return {"reused": True}
    first, n, offset, size = block
    texts = read_text_block(texts_path, offset, size, n)
    with open_bundle(tokens_path) as z:
        rows = np.array(z.memmap("tokens")[first:first + n])
    words = _block_words(texts, rows)
    del texts
    if data_root is None:
        lemmatizer, index = identity_lemmas, wellformed.LemmaIndex()
    else:
        wn = WordNet.read(wordnet_folder(data_root, LEXICON))
        lemmatizer = CachedLemmas(wellformed.WordNetLemmatizer(wn))
        index = wellformed.LemmaIndex(wn.all_lemma_names())
        del wn
    arrays = wellformed.form_arrays(rows, words, lemmatizer, index)
    save_bundle(out_path, **arrays)
    return {"reused": False, "n_phrases": n}


def _block_words(texts: list[str], rows: np.ndarray) -> dict:
    """{token id: its text} of the ids of ``rows``, read from the phrases' ``texts`` (each the
    texts of its row's words joined by spaces: phrase_text_list; a word holds no whitespace,
    Vocab refuses it). The words of all texts in order are the ids of all rows in order."""
    flat = rows[rows >= 0]                  # row by row: the padding is at each row's end
    words = " ".join(texts).split()
    if len(words) != len(flat):
        raise ValueError(f"{len(words)} words in the block's texts, {len(flat)} token ids in its rows")
    ids, first = np.unique(flat, return_index=True)
    return dict(zip(ids.tolist(), (words[i] for i in first.tolist())))


@_heap_released
def lemmas_task(form_paths, out_path) -> dict:
    """The blocks' lemma rows (forms_task's files ``form_paths``) as one table indexed by token
    id (wellformed.dense_lemmas), written to ``out_path`` as ``lemma_ids`` (a task). The work
    is the blocks' vocabularies', not their phrases'."""
    from pivot.pipeline.wellformed import dense_lemmas

    out_path = Path(out_path)
    if out_path.is_file():
        return {"reused": True}
    parts = []
    for path in form_paths:
        with open_bundle(path) as z:
            parts.append((z["lemma_tokens"], z["lemma_rows"]))
    lemma_ids = dense_lemmas(parts)
    save_bundle(out_path, lemma_ids=lemma_ids)
    return {"reused": False, "n_tokens": int(len(lemma_ids))}


#: Pairs a labelling task labels at a time (its memory: a pair's rows are gathered whole; the
#: labels of a pair are its own).
LABEL_ROWS = 1 << 20


@_heap_released
def label_range(form_paths, lemmas_path, slot_path, part_paths, j: int, out_path) -> dict:
    """The well-formedness mask of every pair of pivot part j (FormBlocks.pair_labels over the
    forms of the blocks ``form_paths`` (forms_task's) and the lemma table of ``lemmas_path``
    (lemmas_task's), phrase ids through the ``slot`` of ``slot_path``), and the global row of
    each pair's reverse (e2, e1) (-1: not stored; PairTable.find, one part's keys held at a
    time); written to ``out_path`` as LABEL_FIELDS (a task).

    The task reads the slots and the form rows of its part's distinct phrases alone (through
    bounded windows of the files: Bundle.rows), numbered 0..n-1 in id order, and labels the
    pairs by those numbers: its memory is its part's, not the stored phrases'. (With the slot
    array read whole and the forms' files mapped whole, a part's e2 anywhere, each task held a
    slot per phrase id and touched most pages of every forms file: 0.26 GiB a task on
    bio-multi's 2.37M phrases.) A pair's label is a function of its two phrases' rows alone,
    so the numbering changes nothing (FormBlocks pads every block's rows to the widest)."""
    out_path = Path(out_path)
    if out_path.is_file():
        return {"reused": True}
    with open_bundle(part_paths[j]) as z:
        e1, e2 = z["e1"].astype(np.int64), z["e2"].astype(np.int64)
    ids, local = np.unique(np.concatenate([e1, e2]), return_inverse=True)
    with open_bundle(slot_path) as z:
        # slot[used] = 0, 1, ...: ascending ids have ascending slots
        slots = z.rows("slot", ids).astype(np.int64)
    forms = gathered_forms(form_paths, lemmas_path, slots)
    del ids, slots
    form = np.zeros(len(e1), np.uint8)
    l1, l2 = local[:len(e1)], local[len(e1):]
    for a in range(0, len(e1), LABEL_ROWS):
        form[a:a + LABEL_ROWS] = forms.pair_labels(l1[a:a + LABEL_ROWS], l2[a:a + LABEL_ROWS])
    del forms, local, l1, l2
    save_bundle(out_path, form=form, rev=PairTable.read(part_paths).find(e2, e1))
    return {"reused": False, "n_pairs": int(len(form))}


def gathered_forms(form_paths, lemmas_path, slots):
    """The FormBlocks of the phrases of slots ``slots`` (ascending, distinct) alone, as one
    block numbered 0..n-1 in that order: each forms file's (forms_task's: its block of slots,
    one after another) rows of the slots it holds, read through bounded windows (Bundle.rows),
    the 2-D arrays -1 padded to the widest file's (as FormBlocks pads its blocks' rows)."""
    from pivot.pipeline.wellformed import FormBlocks

    slots = np.asarray(slots, np.int64)
    with open_bundle(lemmas_path) as z:
        lemma_ids = z["lemma_ids"]
    shapes, lo = [], 0
    for path in form_paths:
        with open_bundle(path) as z:
            shapes.append({k: z.shape(k) for k in FORM_ARRAYS})
    widths = {k: max((sh[k][1] for sh in shapes), default=1) for k in FORM_ARRAYS if len(shapes[0][k]) == 2} \
        if shapes else {}
    if not shapes:
        return FormBlocks([], lemma_ids)
    out = {}
    with open_bundle(form_paths[0]) as z:
        for k in FORM_ARRAYS:
            dtype = z.dtype(k)
            out[k] = np.full((len(slots), widths[k]), -1, dtype) if k in widths else np.zeros(len(slots), dtype)
    for path, sh in zip(form_paths, shapes):
        hi = lo + sh["bits"][0]
        a, b = np.searchsorted(slots, [lo, hi])
        if a < b:
            with open_bundle(path) as z:
                for k in FORM_ARRAYS:
                    rows = z.rows(k, slots[a:b] - lo)
                    if k in widths:
                        out[k][a:b, :rows.shape[1]] = rows
                    else:
                        out[k][a:b] = rows
        lo = hi
    return FormBlocks([out], lemma_ids)


def _rows_features(table: PairTable, ph, labels, rows, phrases: bool = True) -> np.ndarray:
    """The feature matrix of the global rows ``rows`` (their form from the label files
    ``labels``), feature_names(models, ph.dim) order (phrases = False: without the phrase-vector
    columns, pair_feature_names order). ph: Phrases, or a PhraseFile (the rows' phrases read)."""
    with_rev = bool(labels) and _holds(labels[0], "rev")
    got = table.rows(rows, ("e1", "e2", "n_pivots", "pivots", "form", *(("rev",) if with_rev else ())), labels)
    e1, e2, n_pivots, pivots, form = got[:5]
    # p_m(e1|e2): the row of (e2, e1) as the label tasks found it (label_range: PairTable.find,
    # the same rows), else found here (reverse_p: a find reads the keys of every part the rows
    # reach, for each block of a report: most of its CPU at blocks of REPORT_ROWS)
    p_rev = (np.where(got[5][:, None] >= 0, table.p_rows(np.maximum(got[5], 0)), 0.0) if with_rev
             else table.reverse_p(e1, e2))
    del got
    if isinstance(ph, PhraseFile):
        # the rows' phrases alone, numbered 0..m-1 in id order (the pairs' e1, e2 then their
        # numbers), and their pivots' languages alone (the pivots numbered among them), read
        # through bounded windows: no lookup array with an entry per phrase id or foreign id
        ids, k = np.unique(np.concatenate([e1, e2]).astype(np.int64), return_inverse=True)
        part = ph.gather(ph.rows_of(ids))
        part.f_lang, pivots = ph.pivot_languages(pivots)
        ph, e1, e2 = part, k[:len(e1)], k[len(e1):]
    x = feature_matrix(pair_features(ph, e1, e2, table.p_rows(rows), p_rev, n_pivots, pivots, form))
    return np.hstack([x, phrase_columns(ph, e1, e2)]) if ph.dim and phrases else x


def _holds(path, name: str) -> bool:
    """Bundle ``path`` has a member ``name``."""
    with open_bundle(path) as z:
        return name in z


#: Rows a fit's report turns into features at a time (_rows_map: the held-out lists' scores, the
#: relations' held-out predictions; a row's features and predictions are its own). A block's
#: feature columns, matrix, selected columns and standardised copy are ~4 x 8 bytes x ~100-200
#: features a row: 1 << 16 rows were ~0.2 GB of the build process's peak on bio-multi.
REPORT_ROWS = 1 << 14


def _rows_map(fn, table: PairTable, ph, labels, rows, phrases: bool = True, block: int = REPORT_ROWS,
              empty=None) -> np.ndarray:
    """fn(x) of the feature matrix x (_rows_features) of each ``block`` of ``rows`` in turn,
    concatenated: for a row-wise ``fn`` the array fn gives on every row's matrix at once, with
    one block's matrix held (``empty``: the result of no rows; default float64 (0,))."""
    out = [np.zeros(0) if empty is None else empty]
    rows = np.asarray(rows, np.int64)
    for a in range(0, len(rows), block):
        out.append(fn(_rows_features(table, ph, labels, rows[a:a + block], phrases=phrases)))
    return np.concatenate(out)


def _rows_columns(table: PairTable, ph, labels, rows, columns, block: int = REPORT_ROWS) -> np.ndarray:
    """The columns ``columns`` (indices into pair_feature_names) of the feature matrix of
    ``rows`` (_rows_features, phrases = False), made a ``block`` of rows at a time into one
    array: the whole matrix's columns (a row's features are its own), without the whole matrix
    and its column list beside them (three matrices of every row at once: the training lists'
    ~0.3 GB on bio-multi). In Fortran order, as matrix[:, columns] gives them: the fits' sums
    (einsum) over another layout round differently (the bio score's last digits)."""
    rows = np.asarray(rows, np.int64)
    out = np.empty((len(rows), len(columns)), np.float64, order="F")
    for a in range(0, len(rows), block):
        out[a:a + block] = _rows_features(table, ph, labels, rows[a:a + block], phrases=False)[:, columns]
    return out


@dataclass
class Lexical:
    """The WordNet side of the stored phrases: synsets, the held-out split (per phrase: a pair's
    side is read from its phrases' slots, part by part)."""

    syn_ptr: np.ndarray      # (n + 1,) int64: the synset ids of slot i are syn_ids[syn_ptr[i]:syn_ptr[i+1]]
    syn_ids: np.ndarray      # int64 synset ids (WordNet.synsets' values), by slot
    held: np.ndarray         # per slot: its key synset is held out (relation test side)
    slot: np.ndarray         # per phrase id: its slot (-1: in no stored pair)

    @classmethod
    def from_synsets(cls, synsets: list, held, slot) -> "Lexical":
        """From a tuple of synset ids per slot."""
        count = np.fromiter(map(len, synsets), np.int64, count=len(synsets))
        ids = np.fromiter((x for s in synsets for x in s), np.int64, count=int(count.sum()))
        return cls(_offsets(count), ids, np.asarray(held, bool), np.asarray(slot))

    def __post_init__(self):
        self.has = self.syn_ptr[1:] > self.syn_ptr[:-1]     # per slot: the phrase has synsets

    def save(self, path) -> None:
        """The arrays (and share_synset's sorted keys) as one bundle: what the scan tasks read."""
        save_bundle(path, syn_ptr=self.syn_ptr, syn_ids=self.syn_ids, held=self.held, slot=self.slot,
                    keys=self._synset_keys())

    @classmethod
    def load(cls, path) -> "Lexical":
        with open_bundle(path) as z:
            lex = cls(z["syn_ptr"], z["syn_ids"], z["held"], z["slot"])
            lex.__dict__["_keys"] = z["keys"]
        return lex

    def _synset_keys(self) -> np.ndarray:
        """slot * 2^32 + synset id of every (slot, synset), sorted (computed once)."""
        keys = self.__dict__.get("_keys")
        if keys is None:
            ptr = self.syn_ptr
            keys = self.__dict__["_keys"] = unique(np.repeat(np.arange(len(ptr) - 1), np.diff(ptr)) << 32
                                                   | self.syn_ids)
        return keys

    def synsets(self, i: int) -> tuple:
        """The synset ids of slot i."""
        return tuple(self.syn_ids[self.syn_ptr[i]:self.syn_ptr[i + 1]].tolist())

    def synsets_of(self, slots) -> dict:
        """{slot: its synset ids} of the distinct ``slots``, ascending."""
        return {i: self.synsets(i) for i in unique(np.asarray(slots, np.int64)).tolist()}


    def slots(self, e1, e2) -> tuple[np.ndarray, np.ndarray]:
        """The slots of pairs' phrases (s1, s2)."""
        return self.slot[e1], self.slot[e2]

    def share_synset(self, a, b) -> np.ndarray:
        """Per pair of slots (a_i, b_i): the two phrases share a synset (WordNet synonyms), on
        arrays: each synset s of a_i is looked up among b_i's as the key b_i * 2^32 + s."""
        a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
        ptr, ids = self.syn_ptr, self.syn_ids
        keys = self._synset_keys()
        count = ptr[a + 1] - ptr[a]
        pair = np.repeat(np.arange(len(a)), count)
        at = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count) + np.repeat(ptr[a], count)
        query = b[pair] << 32 | ids[at]
        found = np.searchsorted(keys, query)
        hit = keys[np.minimum(found, len(keys) - 1)] == query if len(keys) else np.zeros(len(query), bool)
        return np.bincount(pair[hit], minlength=len(a)) > 0


class LexicalFile:
    """A Lexical's file (Lexical.save) as the build's process reads it during the fits: the
    slots of the phrase ids a fit selects (:meth:`slots`) and the synsets of their slots
    (:meth:`synsets_of`), read through bounded windows of the file (as PhraseFile.gather), never
    every phrase's synsets, split and keys, nor a slot per phrase id."""

    def __init__(self, path):
        self.path = Path(path)

    def slots(self, e1, e2) -> tuple[np.ndarray, np.ndarray]:
        """The slots of pairs' phrases (s1, s2): the file's slot at their distinct ids, read in
        one ascending pass."""
        e = np.concatenate([np.asarray(e1, np.int64).ravel(), np.asarray(e2, np.int64).ravel()])
        ids, k = np.unique(e, return_inverse=True)
        with open_bundle(self.path) as b:
            s = b.rows("slot", ids)[k]
        return s[:np.size(e1)], s[np.size(e1):]

    def synsets_of(self, slots) -> dict:
        """{slot: its synset ids} of the distinct ``slots``, ascending (Lexical.synsets_of): the
        pointers ptr[s], ptr[s + 1] of each slot in one ascending pass, then the ids at those
        ranges (ascending positions)."""
        slots = unique(np.asarray(slots, np.int64))
        with open_bundle(self.path) as b:
            bounds = b.rows("syn_ptr", np.stack([slots, slots + 1], axis=1).ravel())
            start, count = bounds[0::2], bounds[1::2] - bounds[0::2]
            ptr = _offsets(count)
            ids = b.rows("syn_ids", np.arange(int(ptr[-1]), dtype=np.int64) + np.repeat(start - ptr[:-1], count))
        flat, ptr = ids.tolist(), ptr.tolist()
        return {s: tuple(flat[ptr[k]:ptr[k + 1]]) for k, s in enumerate(slots.tolist())}


def part_lexical(lex_path, e1, e2) -> tuple["Lexical", np.ndarray, np.ndarray, np.ndarray]:
    """(lex, s1, s2, slots): the Lexical (Lexical.save's file ``lex_path``) of the distinct
    phrases of pairs (e1, e2) alone, numbered 0..m-1 in id order (slots follow ids, so in slot
    order too); the pairs' numbers s1, s2; each number's slot. Read through bounded windows of
    the file (Bundle.rows): a scan task's memory is its part's, not every phrase's (the whole
    Lexical was ~50 bytes a stored phrase in each task). Synonymy, sides and candidates are
    functions of a pair's two phrases' synsets and sides: the same on the numbers."""
    e1, e2 = np.asarray(e1, np.int64), np.asarray(e2, np.int64)
    ids, k = np.unique(np.concatenate([e1, e2]), return_inverse=True)
    with open_bundle(lex_path) as b:
        slots = b.rows("slot", ids).astype(np.int64)
        if len(slots) and slots.min() < 0:
            raise ValueError("a pair's phrase without a slot")
        bounds = b.rows("syn_ptr", np.stack([slots, slots + 1], axis=1).ravel())
        start, count = bounds[0::2], bounds[1::2] - bounds[0::2]
        ptr = _offsets(count)
        syn_ids = b.rows("syn_ids", np.arange(int(ptr[-1]), dtype=np.int64) + np.repeat(start - ptr[:-1], count))
        held = b.rows("held", slots)
    lex = Lexical(ptr, syn_ids, held, np.arange(len(ids), dtype=np.int64))
    return lex, k[:len(e1)], k[len(e1):], slots


def _visible_synonyms(lex: Lexical, s1, s2, visible, rows, held_out: bool) -> np.ndarray:
    """The rows (of ``rows``) whose pair is a visible WordNet synonym pair of one side of the
    relation split (held_out: the held-out side, else the training side)."""
    side = lex.held[s1[rows]] if held_out else ~lex.held[s1[rows]]
    both = rows[visible[rows] & lex.has[s1[rows]] & lex.has[s2[rows]] & side]
    return both[lex.share_synset(s1[both], s2[both])]


@_heap_released
def survey_range(part_path, label_path, lex_path, texts_path, starts_path, lo: int, seed: int, limit: int,
                 test_limit: int = MAX_RELATION_TEST_PAIRS, query_limit: int = MAX_WITHIN_QUERIES,
                 held_limit: int = MAX_HELD_QUERIES) -> dict:
    """What the fits need of one pivot part (global rows from ``lo``), in one pass (a task):

    - its pairs' form counts (per wellformed flag, and the HIDDEN ones);
    - the within lists' queries: the slots (e1's) of its visible WordNet synonym pairs, of the
      relation split's training side (the ``query_limit`` smallest slots, with the visible
      pairs of each in this part: its list's rows here) and of its held-out side (the ``held_limit`` smallest (hash, slot), the hash of the query's text with
      ``seed``) (_within_lists);
    - the relation candidates (both phrases have synsets): their number, and the ``limit``
      smallest (hash, row) of the training side's (neither held out) and the ``test_limit``
      smallest of the held-out side's (both held out), the hash of "e1 text\te2 text" with
      ``seed`` (smallest_by_hash).

    Each is a sum or the smallest of this part's (a set's k smallest are among the k smallest
    of any part that holds them): the build's process folds them over the parts (SelectionFold)
    into what one pass over every part gives (the same rows, the same order)."""
    from pivot.hashes import unit_hash
    from pivot.pipeline import wellformed

    z = _read_fields(part_path, label_path, ("e1", "e2", "form"))
    # the part's phrases alone, numbered 0..m-1 (s1, s2); ``slots``: each number's slot
    lex, s1, s2, slots = part_lexical(lex_path, z["e1"], z["e2"])
    form = z["form"]
    del z
    counts, hidden = form_counts(form)
    visible = (form & wellformed.HIDDEN) == 0
    every = np.arange(len(s1))
    numbers = {side: unique(s1[_visible_synonyms(lex, s1, s2, visible, every, side)]) for side in (False, True)}
    queries = {side: slots[numbers[side]] for side in (False, True)}
    # the rows of each training query's list in this part: its visible pairs (list_rows_range)
    query_rows = np.bincount(s1[visible], minlength=len(slots))[numbers[False]][:query_limit]
    cand = lex.has[s1] & lex.has[s2]
    test = np.flatnonzero(cand & lex.held[s1] & lex.held[s2])
    train = np.flatnonzero(cand & ~lex.held[s1] & ~lex.held[s2])
    with open_bundle(starts_path) as zs:
        texts = TextFile(texts_path, zs.memmap("starts"))
        try:
            def pair_hashes(rows):
                t1, t2 = texts.many(slots[s1[rows]]), texts.many(slots[s2[rows]])
                return np.array([unit_hash(f"{a}\t{b}", seed) for a, b in zip(t1, t2)], dtype=np.float64)
            train_h, train_rows = smallest_by_hash(pair_hashes(train), lo + train, limit)
            test_h, test_rows = smallest_by_hash(pair_hashes(test), lo + test, test_limit)
            held = queries[True]
            held_h = np.array([unit_hash(t, seed) for t in texts.many(held)], dtype=np.float64)
            held_h, held = smallest_by_hash(held_h, held, held_limit)
        finally:
            texts.close()
    return {"counts": counts, "hidden": hidden, "queries": queries[False][:query_limit],
            "query_rows": query_rows.astype(np.int64), "held_h": held_h, "held_queries": held, "n_candidates": int(cand.sum()),
            "test_h": test_h, "test_rows": test_rows, "train_h": train_h, "train_rows": train_rows}


class SelectionFold:
    """survey_range's pieces folded in as each part's comes, in any order (_survey_job): the sums,
    the ``query_limit`` smallest training queries (with their lists' rows, summed over the parts
    a list crosses), and the smallest (hash, row or slot) of the
    relation training rows (``limit``), test rows (``test_limit``) and held-out queries
    (``held_limit``; a query whose list crosses two parts comes from both, once kept). Each is
    the same for any order of the pieces, and this process holds the kept ones and one piece,
    not every part's."""

    def __init__(self, limit: int, test_limit: int = MAX_RELATION_TEST_PAIRS,
                 query_limit: int = MAX_WITHIN_QUERIES, held_limit: int = MAX_HELD_QUERIES,
                 row_limit: int = MAX_WITHIN_ROWS):
        from pivot.pipeline import wellformed

        self.limits = {"train": limit, "test": test_limit, "held": held_limit}
        self.query_limit, self.row_limit = query_limit, row_limit
        self.counts = dict.fromkeys(wellformed.NAMES.values(), 0)
        self.hidden = self.n_candidates = 0
        self.queries, self.query_rows = np.zeros(0, np.int64), np.zeros(0, np.int64)
        self.kept = {k: (np.zeros(0), np.zeros(0, np.int64)) for k in self.limits}

    def add(self, d: dict) -> None:
        for name in self.counts:
            self.counts[name] += d["counts"][name]
        self.hidden += d["hidden"]
        self.n_candidates += d["n_candidates"]
        # a query kept is among the query_limit smallest of every piece that holds it: its
        # rows are summed over all of them
        q, at = np.unique(np.concatenate([self.queries, np.asarray(d["queries"], np.int64)]), return_inverse=True)
        rows = np.bincount(at, weights=np.concatenate([self.query_rows, d["query_rows"]]), minlength=len(q))
        self.queries, self.query_rows = q[:self.query_limit], rows[:self.query_limit].astype(np.int64)
        for k, (hk, rk) in (("train", ("train_h", "train_rows")), ("test", ("test_h", "test_rows")),
                            ("held", ("held_h", "held_queries"))):
            h = np.concatenate([self.kept[k][0], d[hk]])
            r = np.concatenate([self.kept[k][1], np.asarray(d[rk], np.int64)])
            if k == "held":
                # a query slot is one list: its hash is its text's, the same from either part
                r, first = np.unique(r, return_index=True)
                h = h[first]
            self.kept[k] = smallest_by_hash(h, r, self.limits[k])

    def finish(self) -> tuple[dict, np.ndarray, np.ndarray]:
        """(survey: counts, hidden, n_candidates, test_rows, train_rows, each set of rows
        ascending; the training queries ascending, those of the smallest slots whose lists' rows
        sum to row_limit or less; the held-out queries ascending)."""
        survey = {"counts": self.counts, "hidden": self.hidden, "n_candidates": self.n_candidates,
                  "test_rows": np.sort(self.kept["test"][1]), "train_rows": np.sort(self.kept["train"][1])}
        fit = int(np.searchsorted(np.cumsum(self.query_rows), self.row_limit, side="right"))
        return survey, self.queries[:fit], np.sort(self.kept["held"][1])


def form_counts(form: np.ndarray) -> tuple[dict, int]:
    """({form name: pairs with its flag}, pairs with a HIDDEN flag) of pairs' well-formedness masks."""
    from pivot.pipeline import wellformed

    return ({name: int(((form & flag) > 0).sum()) for flag, name in wellformed.NAMES.items()},
            int(((form & wellformed.HIDDEN) > 0).sum()))


def form_counts_file(label_path) -> tuple[dict, int]:
    """form_counts of a label file (a task)."""
    with open_bundle(label_path) as z:
        return form_counts(z["form"])


@_heap_released
def list_rows_range(part_path, label_path, lex_path, lo: int, queries, held_queries) -> dict:
    """The within lists' rows of one pivot part (a task): the global rows of its visible pairs
    whose e1 is a query (``queries``, ``held_queries``: sorted slots), and whether each is a
    WordNet synonym pair of that side (_within_lists)."""
    from pivot.pipeline.wellformed import HIDDEN

    z = _read_fields(part_path, label_path, ("e1", "e2", "form"))
    lex, s1, s2, slots = part_lexical(lex_path, z["e1"], z["e2"])
    visible = (z["form"] & HIDDEN) == 0
    del z
    out = {}
    for name, q, side in (("train", queries, False), ("held", held_queries, True)):
        # per number of the part's phrases: its slot is a query (q: sorted slots)
        q = np.asarray(q, np.int64)
        at = np.minimum(np.searchsorted(q, slots), max(len(q) - 1, 0))
        is_query = q[at] == slots if len(q) else np.zeros(len(slots), dtype=bool)
        listed = np.flatnonzero(visible & is_query[s1])
        out[name] = (lo + listed, np.isin(listed, _visible_synonyms(lex, s1, s2, visible, listed, side)))
    return out


def _survey_job(table, labels, lex_path, texts_path, starts_path, seed: int, limit: int,
                test_limit: int = MAX_RELATION_TEST_PAIRS, held_limit: int = MAX_HELD_QUERIES,
                row_limit: int = MAX_WITHIN_ROWS):
    """A job of Engine.run: survey_range per pivot part, each part's folded in as it comes (a job
    per part: SelectionFold), then the within lists' rows per part (list_rows_range) of the queries
    that survey kept. Returns the survey (its training and test rows ascending) and the lists'
    rows of each side. (Returned by one batch, every part's piece came back at once: its
    queries, test rows and ``limit`` training rows, a few MB a part on bio-multi, and the parts
    grow with the pairs.)"""
    from pivot.pipeline.engine import Batch, Together

    lows = [int(lo) for lo in table.bounds[:-1]]
    fold = SelectionFold(limit, test_limit, MAX_WITHIN_QUERIES, held_limit, row_limit)

    def part(args):
        (piece,) = yield Batch(survey_range, [args], name="ppdb2-survey", quiet=True)
        fold.add(piece)

    t0 = time.perf_counter()
    yield Together(*(part((path, label, lex_path, texts_path, starts_path, lo, seed, limit, test_limit,
                           MAX_WITHIN_QUERIES, held_limit))
                     for path, label, lo in zip(table.part_paths, labels, lows)))
    log.info("  ppdb2-survey: %d tasks in %.1f s", len(lows), time.perf_counter() - t0)
    survey, queries, held_queries = fold.finish()
    del fold
    empty = (np.zeros(0, np.int64), np.zeros(0, bool))
    lists = yield Batch(list_rows_range, [(path, label, lex_path, lo, queries, held_queries)
                                          for path, label, lo in zip(table.part_paths, labels, lows)],
                        name="ppdb2-lists")
    # (global rows ascending, positive) of each side's lists
    return survey, {side: tuple(np.concatenate([empty[k], *(d[side][k] for d in lists)]) for k in (0, 1))
                    for side in ("train", "held")}


def _within_lists(table, ph, labels, lex: Lexical, models, texts, seed: int, listed,
                  held_out: bool = False, features: bool = True) -> WithinLists:
    """The candidate lists of fit_score's within-list term: the lists (pairs no HIDDEN flag hides)
    of training-side WordNet phrases (the relation split's, so no held-out synset is seen) that
    have a WordNet synonym among them, at most MAX_WITHIN_QUERIES lists and MAX_WITHIN_ROWS rows
    (the lists of the smallest slots), WITHIN_VALIDATION of them held back by hash(query text, seed + 1). held_out: the lists of
    the held-out side instead, at most MAX_HELD_QUERIES of them (the smallest hash(query text,
    seed)), none held back (the score's report, never its fit).

    ``listed``: (global rows ascending, positive) of those lists, as _survey_job's tasks found
    them (two passes over the parts: the queries, then their lists' rows). features = False:
    ``x`` has no columns (a report scores the rows by blocks instead: _rows_map)."""
    from pivot.hashes import unit_hash

    rows, positive = listed
    all_names, names = pair_feature_names(models, ph.dim), score_features(models, ph.dim)
    x = (_rows_columns(table, ph, labels, rows, [all_names.index(n) for n in names])
         if features else np.zeros((len(rows), 0)))
    e1, e2 = table.rows(rows, ("e1", "e2"))
    query_slots = lex.slots(e1, e2)[0]
    distinct = unique(query_slots)
    # (the held-out side's lists are never held back: their texts are not read)
    held_back = dict(zip(distinct.tolist(), [False] * len(distinct) if held_out else
                         [unit_hash(t, seed + 1) < WITHIN_VALIDATION for t in texts.many(distinct)]))
    validation = np.array([held_back[q] for q in query_slots.tolist()], dtype=bool)
    return WithinLists(x, e1, e2, positive, table.p_rows(rows, 0), validation)


#: Texts the rated texts' scan (_fit_score) reads at a time: a block's texts as Python strings are
#: the scan's memory (~60 bytes a text; PHRASE_BLOCK's 500k were ~30 MB beside the fits).
TEXT_SCAN_BLOCK = 1 << 16


def _fit_score(table, ph, labels, models, texts, ids_path, params, data_root, within, held_lists=None,
               held_rows=None):
    """The ratings' rows (each stored direction of a rated pair), split, fitted, evaluated
    (texts: the stored phrases' texts, by slot; ``ids_path``: write_ids' file, whose ``used``
    gives each slot's phrase id); ``within``: the training lists (WithinLists), or a function
    of none that makes them (then they go once fitted: the report runs without them); the
    report's held-out lists ``held_lists`` (their rows ``held_rows``) scored by blocks of rows
    (_rows_map)."""
    from pivot.eval.gold import pair_key, read_gold
    from pivot.hashes import unit_hash
    from pivot.text import normalize_many

    path = Path(data_root) / params["ratings"]
    rated = read_gold(path, "ppdb-human")
    norm = normalize_many([t for a, b, _ in rated for t in (a, b)], "en")
    # the phrase id of each rated text the pairs hold (a dict of every stored text was ~0.2 GB
    # on bio-multi, for a few thousand lookups)
    rated_texts = set(norm)
    slot_of = {t: k for a, block in texts.blocks(TEXT_SCAN_BLOCK) for k, t in enumerate(block, a)
               if t in rated_texts}
    # their ids: ``used`` at their slots, read through windows of its file
    with open_bundle(ids_path) as z:
        found = np.array(sorted(slot_of.values()), np.int64)
        id_at = dict(zip(found.tolist(), z.rows("used", found).tolist()))
    id_of = {t: id_at[k] for t, k in slot_of.items()}
    del slot_of, id_at
    a_ids, b_ids, ratings, keys = [], [], [], []
    for (_, _, y), a, b in zip(rated, norm[0::2], norm[1::2]):
        if a in id_of and b in id_of and a != b:
            for x, z in ((a, b), (b, a)):
                a_ids.append(id_of[x])
                b_ids.append(id_of[z])
                ratings.append(y)
                keys.append(pair_key(a, b))
    rows = table.find(a_ids, b_ids) if a_ids else np.zeros(0, np.int64)
    found = rows >= 0
    # a pair rated twice (or listed both ways) is one row: its first rating
    first = {}
    for i in np.flatnonzero(found).tolist():
        first.setdefault(int(rows[i]), i)
    pick = np.array(sorted(first.values()), dtype=np.int64)
    rows, y = rows[pick], np.array(ratings, np.float64)[pick]
    keys = [keys[i] for i in pick.tolist()]
    dev = np.array([unit_hash(k, params["seed"]) < params["dev_fraction"] for k in keys], dtype=bool)
    n_train = int((~dev).sum())
    if n_train < MIN_RATED_PAIRS or len(set(np.array(keys)[~dev].tolist())) < MIN_RATED_PAIRS // 2:
        raise InputError(f"[ppdb2] ratings: only {n_train} rated directed pairs in the train part are stored by "
                         f"this database (at least {MIN_RATED_PAIRS} needed to fit the score); set "
                         "[ppdb2] learn = false for a database without the learned score", path)
    all_names = pair_feature_names(models, ph.dim)
    names = score_features(models, ph.dim)
    x = _rows_features(table, ph, labels, rows, phrases=False)[:, [all_names.index(n) for n in names]]
    within = within() if callable(within) else within
    model, cv = fit_score(names, x[~dev], y[~dev], [k for k, d in zip(keys, dev) if not d], anchor_features(models),
                          within=within)
    del within          # (the training lists' features: ~0.1 GB on bio-multi, not the report's)
    pred = model.predict(names, x)
    p_general = table.p_rows(rows, 0)
    info = {
        "target": "mean human rating (1-5) of the PPDB 2.0 ratings", "ratings_file": params["ratings"],
        "split": {"seed": params["seed"], "dev_fraction": params["dev_fraction"],
                  "by": "hash of the unordered normalised pair (pivot.eval.gold.pair_key)"},
        "n_rated": len(rated), "n_rows": int(len(rows)), "train": {"n_rows": n_train,
                                                                   "n_pairs": len(set(np.array(keys)[~dev].tolist())),
                                                                   "spearman": round(spearman(pred[~dev], y[~dev]), 4),
                                                                   "spearman_p_general": round(spearman(p_general[~dev], y[~dev]), 4)},
        "dev": {"n_rows": int(dev.sum()), "n_pairs": len(set(np.array(keys)[dev].tolist())),
                "spearman": round(spearman(pred[dev], y[dev]), 4),
                "spearman_p_general": round(spearman(p_general[dev], y[dev]), 4)},
        "selection": cv, "model": model.to_json(),
        **({"held_out_lists": _held_out_report(held_lists, _rows_map(
            lambda x: model.predict(names, x[:, [all_names.index(n) for n in names]]),
            table, ph, labels, held_rows, phrases=False))} if held_lists is not None else {}),
        "train_pairs": sorted({tuple(k.split("\t")) for k, d in zip(keys, dev) if not d}),
    }
    info["dev_spearman"] = info["dev"]["spearman"]
    return model, info


def _held_out_report(lists: WithinLists, score) -> dict:
    """WordNet synonyms in the top WITHIN_K of the held-out side's lists, by General's p(e2|e1) and
    by the score (synsets the fit never saw: the within-list figure the build reports)."""
    return {"k": WITHIN_K, "n_lists": int(len(np.unique(lists.group))), "n_rows": int(len(lists.group)),
            "n_synonyms": int(lists.positive.sum()), "p_general_top_k_synonyms": lists.hits(lists.p_general),
            "score_top_k_synonyms": lists.hits(score)}


def _relations_job(table, ph, labels, names, texts, lex: Lexical, survey: dict, params, data_root, tmp):
    """WordNet-labelled pairs the database stores: synset split, fit, held-out evaluation (a job of
    Engine.run: the grid's fits and the two refits are tasks, fit_relations' steps)."""
    from pivot.hashes import unit_hash
    from pivot.pipeline.engine import Batch
    from pivot.pipeline.wordnet import WordNet, relation, wordnet_folder

    seed, q = params["seed"], params["relation_test_fraction"]
    # At most max_relation_pairs training pairs, chosen by a hash of the pair (not by order): the
    # survey's, each part's ``limit`` smallest (hash, row) kept, then the smallest of those
    # (_survey_job), so the training side is never held whole; at most MAX_RELATION_TEST_PAIRS
    # held-out pairs, chosen alike.
    n_candidates, test_rows, train_rows = survey["n_candidates"], survey["test_rows"], survey["train_rows"]
    # the slots (s1, s2) of the selected rows' phrases
    train_slots, test_slots = (lex.slots(*table.rows(rows, ("e1", "e2"))) for rows in (train_rows, test_rows))
    # WordNet's links of the selected pairs' phrases, read here (0.12 GB) and let go before the fits
    wn = WordNet.read(wordnet_folder(data_root, LEXICON))
    profiles = {i: wn.profile(ids) for i, ids in lex.synsets_of(np.concatenate([*train_slots, *test_slots])).items()}
    del wn

    def relation_labels(s1, s2):
        return np.array([relation(profiles[a], profiles[b]) for a, b in zip(s1.tolist(), s2.tolist())],
                        dtype=np.int64)

    y_train, y_test = relation_labels(*train_slots), relation_labels(*test_slots)
    if len(train_rows) < MIN_RELATION_PAIRS or len(np.unique(y_train)) < 2 or not len(test_rows):
        raise InputError(f"[ppdb2]: only {len(train_rows)} training and {len(test_rows)} held-out pairs of WordNet "
                         f"lemmas (classes {sorted(set(y_train.tolist()))}) are stored by this database: too few to "
                         "train the relation classifier; set [ppdb2] learn = false",
                         Path(data_root) / LEXICON)
    validation = np.array([unit_hash(f"{a}\t{b}", seed + 1) < RELATION_VALIDATION
                           for a, b in zip(*(texts.many(s) for s in train_slots))], dtype=bool)
    x_train = _rows_features(table, ph, labels, train_rows)
    strings = [n for n in names if n in STRING_FEATURES]
    idx = [names.index(n) for n in strings]
    path = tmp / ".relations.arrays"
    save_bundle(path, x=x_train, y=y_train, validation=validation)
    # every (lambda, beta) of both classifiers, then each one's refit on every training row
    grid = [(lam, beta) for lam in RELATION_LAMBDAS for beta in RELATION_BALANCE]
    sides = ((None, names), (idx, strings))
    f1 = yield Batch(relation_task, [(path, cols, n, lam, beta, False) for cols, n in sides for lam, beta in grid],
                     name="ppdb2-relations")
    (best, selection), (string_best, string_selection) = (
        relation_selection(dict(zip(grid, f1[k * len(grid):(k + 1) * len(grid)]))) for k in range(2))
    model, string_model = yield Batch(relation_task, [(path, idx_, n, *b, True) for (idx_, n), b
                                                      in zip(sides, (best, string_best))], name="ppdb2-relations")
    path.unlink()
    majority = int(np.bincount(y_train, minlength=len(RELATIONS)).argmax())
    # the held-out rows' classes by both classifiers, their features made a block of rows at a
    # time (every held-out row's matrix grew with the corpus: 43.5 MiB on bio-multi)
    pred = _rows_map(lambda x: np.stack([model.probabilities(names, x).argmax(axis=1),
                                         string_model.probabilities(strings, x[:, idx]).argmax(axis=1)], axis=1),
                     table, ph, labels, test_rows, empty=np.zeros((0, 2), np.int64))
    ev = {"full": classification_report(y_test, pred[:, 0]),
          "string_only": classification_report(y_test, pred[:, 1]),
          "majority": classification_report(y_test, np.full(len(y_test), majority)),
          "majority_class": RELATIONS[majority]}
    ev["full_minus_string_macro_f1"] = round(ev["full"]["macro_f1"] - ev["string_only"]["macro_f1"], 4)
    info = {"classes": list(RELATIONS), "labels": "WordNet 3.0 links (pivot.pipeline.wordnet)",
            "split": {"seed": seed, "test_fraction_of_synsets": q,
                      "by": "hash of each phrase's smallest synset id; test: both held out, train: neither"},
            "n_candidates": n_candidates, "n_train": int(len(train_rows)), "n_test": int(len(test_rows)),
            "train_classes": dict(zip(RELATIONS, np.bincount(y_train, minlength=6).tolist())),
            "test_classes": dict(zip(RELATIONS, np.bincount(y_test, minlength=6).tolist())),
            "selection": selection, "string_only_selection": string_selection,
            "model": model.to_json(), "eval": ev}
    return model, info


def smallest_by_hash(h, rows, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """(h, rows) of the ``limit`` smallest (hash, row), in that order (all of them as given when
    there are no more): the rows a stable argsort of every row's hash (rows ascending) puts
    first. Fed lot by lot, each lot with what the last call kept, it keeps those of all lots:
    the ``limit`` smallest of all are among the ``limit`` smallest of any lots that hold them."""
    if len(rows) <= limit:
        return h, rows
    keep = np.lexsort((rows, h))[:limit]
    return h[keep], rows[keep]


def distinct_rows(r, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, local) of row numbers ``r`` in 0..n-1: their distinct values ascending and each
    one's index among them (np.unique(r, return_inverse=True)), by a mark per row instead of a
    sort (an apply block's 2 x APPLY_ROWS rows: a third of the sort's time on bio)."""
    return RowNumbers(n)(r)


class RowNumbers:
    """distinct_rows(r, n) for many ``r`` over the same n, its scratch kept between calls: a
    mark and a number per row, the marks cleared after each call. A call costs one pass over
    the n marks (np.flatnonzero) and O(len(r)) scatters and gathers; distinct_rows with an
    n-long cumsum (int64) per call, three calls per apply block, was 18% of an apply task's
    CPU on bio-multi (2.37M phrases)."""

    def __init__(self, n: int):
        self.mark = np.zeros(n, bool)
        self.number = np.zeros(n, np.int32 if n <= np.iinfo(np.int32).max else np.int64)

    def __call__(self, r) -> tuple[np.ndarray, np.ndarray]:
        r = np.asarray(r, np.int64)
        self.mark[r] = True
        rows = np.flatnonzero(self.mark)
        self.mark[rows] = False
        self.number[rows] = np.arange(len(rows))
        return rows, self.number[r].astype(np.int64)


@_heap_released
def apply_range(part_paths, j: int, phrases_path, label_path, fit_path, out_path, terms_path=None) -> dict:
    """One pivot part: features, score and relation probabilities of its pairs (a Dask task).
    ``phrases_path``: the Phrases' bundle, or their bundles (PhraseFile).

    Reads its own part and its labels (``label_path``: label_range's file of part j, the pairs'
    form and their reverses' global rows), the reverses' probabilities from their parts (and,
    with word vectors, the relations' per-phrase terms t1, t2 of
    ``terms_path``, RelationModel.phrase_terms); writes ``form``, ``ppdb2``, ``rel`` (per-mille, RELATIONS order) and
    ``relation`` (argmax, ties to the lower index) atomically.

    A block's phrases are read as the rows it needs alone (PhraseFile.gather, through bounded
    windows of the files; the terms likewise), never as maps of the whole phrase files: with the
    files mapped, each worker touched most of their pages (a block's e2 are anywhere), 1.1 GB on
    bio-multi in each of the two workers' resident sets at the stage's peak.
    """
    out_path = Path(out_path)
    if out_path.is_file():
        with open_bundle(out_path) as done:
            return {"reused": True, "n_pairs": int(done["ppdb2"].shape[0])}
    t0 = time.process_time()
    fit = json.loads(Path(fit_path).read_text())
    names = fit["names"]
    score = ScoreModel.from_json(fit["score"])
    relations = RelationModel.from_json(fit["relations"])
    phrases = PhraseFile(*([phrases_path] if isinstance(phrases_path, (str, Path)) else phrases_path), lookup=False)
    if phrases.dim:
        # the phrase vectors' terms, per row of the phrases (written next to them by the stage)
        relations = relations.pair_part()
    with open_bundle(part_paths[j]) as z:
        e1, e2 = z["e1"], z["e2"]
    with open_bundle(label_path) as z:
        form, rev = z["form"], z["rev"]
    # p_m(e1|e2): the row of (e2, e1), read from the part that holds it, one part's map at a
    # time (PairTable.p_rows): the reverses are spread over every part, and maps of all parts
    # held at once kept nearly every page of the whole table's p in the task's resident set
    # (0.29 GB on bio, 2 GB on bio-multi). Read for the whole part in one pass: a pass per
    # block mapped every part again for each block (twice the apply tasks' CPU on bio-multi).
    found = rev >= 0
    p_rev_found = PairTable.read(part_paths).p_rows(rev[found])
    at = np.cumsum(found) - 1                  # a found pair's row in p_rev_found
    # Blocks of APPLY_ROWS pairs: every feature, the score and the softmax are functions of one
    # row, so the blocks give the bytes of one pass over the part, and a task holds a block's
    # feature columns (~60 x 8 bytes a row) instead of its whole part's (0.7 GiB on bio), and
    # a block's p and pivots (with the part's whole p_rev as well, ~0.15 GB a task on
    # bio-multi, where two apply tasks beside this stage's process were the stage's peak).
    ppdb2, rel = [], []
    # The part's distinct phrases, numbered 0..m-1 in id order (k1, k2: each pair's numbers),
    # and their rows of the phrase files (read through bounded windows of row_of: ascending, as
    # rows follow ids): a block's phrases are then numbered among the part's m, not among every
    # stored phrase (row_of whole, a mark and a number per phrase: 13 bytes a phrase id).
    ids, k = np.unique(np.concatenate([e1, e2]).astype(np.int64), return_inverse=True)
    part_rows = phrases.rows_of(ids)
    del ids
    k1, k2 = k[:len(e1)], k[len(e1):]
    numbers = RowNumbers(len(part_rows))
    for a in range(0, len(e1), APPLY_ROWS):
        b = min(a + APPLY_ROWS, len(e1))
        with open_bundle(part_paths[j]) as z:
            p, n_pivots, pivots = (z.slice(f, a, b) for f in ("p", "n_pivots", "pivots"))
        p_rev = np.zeros_like(p)
        p_rev[found[a:b]] = p_rev_found[at[a:b][found[a:b]]]
        # the block's phrases, numbered 0..n-1 in row order: l1, l2 are each pair's numbers
        r1, r2 = k1[a:b], k2[a:b]
        rows, local = numbers(np.concatenate([r1, r2]))
        l1, l2 = local[:b - a], local[b - a:]
        ph = phrases.gather(part_rows[rows])
        # the languages of the block's pivots alone, the pivots numbered among them
        ph.f_lang, pivots = phrases.pivot_languages(pivots)
        cols = pair_features(ph, l1, l2, p, p_rev, n_pivots, pivots, form[a:b])
        del ph, rows, local, l1, l2
        ppdb2.append(score.predict_columns(names, cols))
        terms = None
        if phrases.dim:
            # t1 of the e1 rows, t2 of the e2 rows (each side's distinct rows alone)
            with open_bundle(terms_path) as z:
                terms = tuple(z.rows(t, part_rows[rows])[local] for t, rows, local in
                              (("t1", *numbers(r1)), ("t2", *numbers(r2))))
        rel.append(per_mille(relations.probabilities_columns(names, cols, terms)))
        del cols, p, p_rev, n_pivots, pivots, terms, r1, r2
    ppdb2 = np.concatenate(ppdb2) if ppdb2 else np.zeros(0, np.float64)
    rel = np.concatenate(rel) if rel else np.zeros((0, len(RELATIONS)), np.uint16)
    save_bundle(out_path, form=form, ppdb2=ppdb2, rel=rel, relation=rel.argmax(axis=1).astype(np.uint8))
    return {"reused": False, "n_pairs": int(len(e1)), "cpu_seconds": round(time.process_time() - t0, 2)}


def stage_params(recipe) -> dict:
    # lhs is the lhs stage's setting: the phrases' labels are no input of this one
    return {k: v for k, v in recipe["ppdb2"].items() if k != "lhs"}


def run_stage(context) -> None:
    """Every stored pair's well-formedness labels, learned score (PPDB2.0Score, fitted to the
    PPDB 2.0 ratings) and relation probabilities (fitted to WordNet), and the sizes; fitted
    once, applied per range of the pivot stage's rows (:func:`build`)."""
    from pivot.pipeline import pivoting, translation
    from pivot.pipeline.corpus import Vocab
    from pivot.pipeline.encode import read_shards
    from pivot.pipeline.weights import read_models

    encode_dir, translation_dir = context.dir("encode"), context.dir("translation")
    def f_lang_of(ids):
        # A foreign phrase's language is its first token's (ids are offset per language). The
        # foreign keys are mapped for the call only: held, they were 0.1 GB through the stage on
        # bio-multi (12.4M foreign phrases).
        f_keys = np.load(translation_dir / "structure" / "f_key.npy", mmap_mode="r")
        f_lang_of_token = np.load(encode_dir / "f_lang.npy")
        return f_lang_of_token[translation.foreign_rows(translation.part_paths(translation_dir, "f"),
                                                        np.asarray(f_keys[ids]))[:, 0]]

    def e_phrases(ids):
        return translation.english_rows(translation_dir, ids)

    build(context.tmp, part_paths=pivoting.part_paths(context.dir("pivot")), n_e=translation.n_phrases(translation_dir),
          e_phrases=e_phrases, e_tokens=Vocab.load(encode_dir / "vocab.en").tokens, f_lang_of=f_lang_of,
          models=[m["name"] for m in read_models(context.dir("weights"))], params=context.params,
          data_root=context.data_root, engine=context.engine,
          shard_paths=[encode_dir / shard["file"] for shard in read_shards(encode_dir)["shards"]])


def stage_check(recipe, data_root, plan) -> list:
    """Preflight of the layer's data: the PPDB 2.0 ratings parse (learn), WordNet 3.0's
    database files open as such (wordnet)."""
    from pivot.eval.gold import check_gold
    from pivot.recipes import DATA_ENV
    from pivot.pipeline.wordnet import wordnet_files, wordnet_folder

    p2, checks = recipe["ppdb2"], []
    if p2["learn"]:
        path = data_root / p2["ratings"]
        if not path.is_file():
            raise InputError(f"[ppdb2] ratings file missing; the data root is set by --data DIR or "
                             f"{DATA_ENV} (a data root without the PPDB 2.0 ratings needs [ppdb2] "
                             "learn = false)", path)
        plan.add_input(path, "gold")
        checks.append(lambda path=path: plan.count("gold pairs", check_gold([path], "ppdb-human", "[ppdb2] ratings")))
    if p2["wordnet"]:
        try:
            folder = wordnet_folder(data_root, LEXICON)
        except InputError as exc:
            raise InputError(f"{exc.message} (a data root without WordNet needs [ppdb2] wordnet = false and "
                             "learn = false)", exc.path) from None
        for path in wordnet_files(folder) + [folder / "index.noun"]:
            plan.add_input(path, "lexicon")
            checks.append(lambda path=path: _check_wordnet(plan, path))
    return checks


def _check_wordnet(plan, path: Path) -> None:
    """A WordNet database file: UTF-8 text whose first line after the licence header is an entry."""
    from pivot.text import numbered_lines

    for number, line in numbered_lines(path):
        if line.startswith("  "):
            continue
        if len(line.split()) < 2:
            raise InputError("not a WordNet 3.0 database file (an entry line of space-separated fields "
                             "expected)", path, number)
        plan.count("lexicon files", 1)
        return
    raise InputError("empty WordNet database file", path)


# version 6: the held-out samples capped (MAX_HELD_QUERIES, MAX_RELATION_TEST_PAIRS) and the
# training lists' rows (MAX_WITHIN_ROWS): a build with more than these reports on (fits to) a
# sample of them, where 5 took all
STAGE = Stage("ppdb2", 6, ("pivot", "translation", "encode", "weights"), ("ppdb2",), stage_params,
              ("x-*.arrays", "ppdb2.json"), run_stage,
              "forms: one per block of stored phrases; labels: one per range of English rows; "
              "fits: the relations' as tasks beside the score's; apply: one per range of English rows (Dask)",
              "well-formedness labels, PPDB2.0Score (ratings), relation probabilities (WordNet; word vectors "
              "of encode's English shards), sizes",
              data=data_files, check=stage_check)
