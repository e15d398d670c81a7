"""Which rewrites do sentence-level paraphrases make? A rule model learned on paraphrase pairs.

iBLEU = 0.9 · BLEU(out, ref) − 0.1 · BLEU(out, src) pays for a rewrite only when it moves the
output toward the reference: a change that costs reference n-grams costs 9 times what it saves
against the source. The database says which rewrites *mean* the same; it cannot say which of
them a human paraphrase of a news sentence actually *makes* ("told" → "said" is frequent there,
"in" → "the" never). :class:`RuleModel` learns that from source → reference pairs (the MSRP
*training* positives; the test pairs are never seen) and gives each lattice option a log-odds
``rule`` that the decoder adds with weight ``Weights.rule``.

Label of an option (source words [i, j) → paraphrase e2, reference r): **good** when e2 with one
word of source context on either side occurs in r (``<s>``/``</s>`` pad both) and the source span
with the same context does not -- the rewrite creates a reference n-gram that the source lacked.

Features of an option (:meth:`RuleModel.features`, all known at decoding time):

    log p(e2|e1), log p(e1|e2), log(1 + pivots), rank, span length, length change, whether it
    only adds or removes words at the edges, function words only (span; paraphrase), same stem
    (a morphological variant), character similarity, and three statistics counted on the
    training pairs: the keep rate of the span's words (mean and min of P(w in ref | w in src)),
    and the rule's own good rate (smoothed toward the mean) with log(1 + its count)

Keep and rule rates are *sparse per-word and per-rule statistics learned on the training
pairs*. To tune the decoder on those same pairs without the statistics having seen the pair being
decoded, :func:`cross_fit` computes every pair's option values from models fitted on the other
folds (5-fold, seeded); the model used on new text is fitted on all the pairs.
The classifier is a logistic regression (StandardScaler, C = 1) over these features.
"""
from __future__ import annotations

import difflib
import json
import math
from collections import Counter

import numpy as np

from pivot.errors import InputError
from pivot.sentences.identify import stem
from pivot.sentences.rewrite import FUNCTION_WORDS, Weights, is_partial

SMOOTH = 5.0      # pseudo-counts pulling a rate toward its global mean: (k + a·p0) / (n + a)
FEATURES = ["logp", "logp_rev", "log_pivots", "rank", "span_len", "len_change", "partial", "span_function",
            "out_function", "same_stem", "char_ratio", "keep_mean", "keep_min", "rule_rate", "rule_log_count"]


def _logit(p: float) -> float:
    p = min(max(p, 1e-4), 1 - 1e-4)
    return math.log(p / (1 - p))


def _grams(tokens, n_max: int = 7) -> set:
    padded = ["<s>"] + list(tokens) + ["</s>"]
    return {" ".join(padded[i:j]) for i in range(len(padded)) for j in range(i + 1, min(len(padded), i + n_max) + 1)}


def option_label(src, i: int, j: int, out, ref_grams: set) -> bool:
    """Good rewrite (module docstring): e2 with a word of context is a reference n-gram, the span is not."""
    left = src[i - 1] if i > 0 else "<s>"
    right = src[j] if j < len(src) else "</s>"
    old, new = " ".join(src[i:j]), " ".join(out)
    old_in = f"{left} {old}" in ref_grams or f"{old} {right}" in ref_grams
    new_in = f"{left} {new}" in ref_grams or f"{new} {right}" in ref_grams
    return new_in and not old_in


def harmless_label(src, i: int, j: int, ref_words) -> bool:
    """A harmless rewrite of source words [i, j): none of them occurs in the reference.

    Every source n-gram that holds one of those words is then absent from the reference too, so
    replacing the span removes no matched n-gram: BLEU against the reference cannot drop (up to
    the brevity penalty) while BLEU against the source does, and iBLEU gains. The generation
    ceiling (bench/generation_ceiling.py) asks how well a selector can find such rewrites."""
    return not any(w in ref_words for w in src[i:j])


CONTEXT_FEATURES = ["start_share", "end_share", "src_len", "has_digit", "keep_left", "keep_right",
                    "capitalised", "before_punct", "content_words"]


class RuleModel:
    """Keep rates, rule rates and a logistic regression over option features (module docstring)."""

    def __init__(self):
        self.keep: dict = {}          # word -> [sentences with w in src, of which w in ref]
        self.rules: dict = {}         # "span\tparaphrase" -> [times offered, times good]
        self.keep0 = 0.5
        self.rule0 = 0.0
        self.mean = None
        self.scale = None
        self.coef = None
        self.intercept = 0.0
        # the decoder setting tuned with this model (bench_sentences --tune): Weights, gate, lattice filter
        self.weights = None
        self.gate = None
        self.drop_partial = True

    # -- statistics ------------------------------------------------------------------------
    def count(self, pairs, lattices) -> None:
        """Keep counts and rule counts of (src tokens, ref tokens) pairs with their lattices."""
        keep = Counter()
        seen = Counter()
        offered = Counter()
        good = Counter()
        for (src, ref), lattice in zip(pairs, lattices):
            ref_words = set(ref)
            for w in set(src):
                seen[w] += 1
                keep[w] += w in ref_words
            grams = _grams(ref)
            for opts in lattice:
                for o in opts:
                    if o.identity:
                        continue
                    key = " ".join(src[o.start:o.end]) + "\t" + " ".join(o.out)
                    offered[key] += 1
                    good[key] += option_label(src, o.start, o.end, o.out, grams)
        self.keep = {w: [seen[w], keep[w]] for w in seen}
        self.keep0 = sum(keep.values()) / max(sum(seen.values()), 1)
        self.rules = {k: [offered[k], good[k]] for k in offered}
        self.rule0 = sum(good.values()) / max(sum(offered.values()), 1)

    def keep_rate(self, w: str) -> float:
        n, k = self.keep.get(w, (0, 0))
        return (k + SMOOTH * self.keep0) / (n + SMOOTH)

    def features(self, table, src, o) -> list:
        """FEATURES of lattice option `o` over source tokens `src` (`table` gives pivots and rank)."""
        span = src[o.start:o.end]
        a, b = " ".join(span), " ".join(o.out)
        n_piv, rank = table.details.get((a, tuple(o.out)), (1, 0))
        keeps = [self.keep_rate(w) for w in span]
        n, k = self.rules.get(a + "\t" + b, (0, 0))
        rate = (k + SMOOTH * self.rule0) / (n + SMOOTH)
        return [o.logp, o.logp_rev, math.log1p(n_piv), float(rank), float(len(span)), float(len(o.out) - len(span)),
                float(is_partial(a, b)), float(all(w in FUNCTION_WORDS for w in span)),
                float(all(w in FUNCTION_WORDS for w in o.out)),
                float(len(span) == len(o.out) == 1 and stem(span[0]) == stem(o.out[0])),
                difflib.SequenceMatcher(None, a, b, autojunk=False).ratio(),
                sum(keeps) / len(keeps), min(keeps), _logit(rate), math.log1p(n)]

    def context_features(self, src, o, cased=None) -> list:
        """CONTEXT_FEATURES of option `o`: where the span sits and what surrounds it.

        Shares of the sentence before the span and after it, the sentence length, a digit in the
        span, the keep rates of the words on either side (1 at the sentence's edges), a
        capitalised span word after the first (from `cased`, the source's true-cased tokens; 0
        without them), a punctuation mark or the end right after the span, its content words."""
        n, span = len(src), src[o.start:o.end]
        upper = cased is not None and len(cased) == n and any(c[:1].isupper() for c in cased[max(o.start, 1):o.end])
        return [o.start / n, (n - o.end) / n, float(n), float(any(ch.isdigit() for w in span for ch in w)),
                self.keep_rate(src[o.start - 1]) if o.start > 0 else 1.0,
                self.keep_rate(src[o.end]) if o.end < n else 1.0, float(upper),
                float(o.end == n or not any(ch.isalnum() for ch in src[o.end])),
                float(sum(w not in FUNCTION_WORDS for w in span))]

    # -- classifier ------------------------------------------------------------------------
    def fit(self, pairs, lattices, table, seed: int = 0) -> "RuleModel":
        """Count the statistics on `pairs` and fit the classifier on their options' labels.

        The features of the classifier's training options are themselves cross-fitted (the
        statistics of the other folds), or the rule rate would just memorise each label."""
        x, y = [], []
        for inside, stats in statistics_folds(pairs, lattices, seed):
            for i in inside:
                (src, ref), lattice = pairs[i], lattices[i]
                grams = _grams(ref)
                for opts in lattice:
                    for o in opts:
                        if not o.identity:
                            x.append(stats.features(table, src, o))
                            y.append(option_label(src, o.start, o.end, o.out, grams))
        self.count(pairs, lattices)
        self._fit_classifier(np.array(x), np.array(y, dtype=int), seed)
        return self

    def _fit_classifier(self, x, y, seed):
        from sklearn.linear_model import LogisticRegression

        self.mean = x.mean(axis=0)
        self.scale = x.std(axis=0)
        self.scale[self.scale < 1e-9] = 1.0      # a constant feature (up to rounding) is left unscaled
        clf = LogisticRegression(C=1.0, max_iter=2000, random_state=seed).fit((x - self.mean) / self.scale, y)
        self.coef = clf.coef_[0]
        self.intercept = float(clf.intercept_[0])

    def log_odds(self, table, src, o) -> float:
        """The classifier's log-odds that option `o` is a good rewrite."""
        z = (np.array(self.features(table, src, o)) - self.mean) / self.scale
        return float(z @ self.coef + self.intercept)

    def annotate(self, table, src, lattice) -> list:
        """The lattice with every non-identity option's ``rule`` set to its log-odds."""
        from dataclasses import replace

        return [[o if o.identity else replace(o, rule=self.log_odds(table, src, o)) for o in opts]
                for opts in lattice]

    # -- persistence -----------------------------------------------------------------------
    def to_json(self) -> dict:
        return {"features": FEATURES, "keep": self.keep, "keep0": self.keep0, "rules": self.rules,
                "rule0": self.rule0, "mean": list(self.mean), "scale": list(self.scale), "coef": list(self.coef),
                "intercept": self.intercept, "smooth": SMOOTH, "gate": self.gate, "drop_partial": self.drop_partial,
                "weights": None if self.weights is None else self.weights.__dict__}

    def save(self, path) -> None:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(self.to_json(), fh)

    @classmethod
    def load(cls, path) -> "RuleModel":
        try:
            with open(path, encoding="utf-8") as fh:
                d = json.load(fh)
            if d.get("features") != FEATURES:
                raise ValueError("written for other features")
            m = cls()
            m.keep, m.keep0, m.rules, m.rule0 = d["keep"], d["keep0"], d["rules"], d["rule0"]
            m.mean, m.scale, m.coef = (np.array(d[k]) for k in ("mean", "scale", "coef"))
            m.intercept = d["intercept"]
            m.gate, m.drop_partial = d.get("gate"), bool(d.get("drop_partial", True))
            if d.get("weights"):
                m.weights = Weights(**d["weights"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InputError(f"not a rule model of this pivot version ({exc})", path) from None
        return m


def fold_of(n: int, seed: int, k: int = 5) -> np.ndarray:
    """Fold (0 .. k-1) of each of n items: a seeded permutation dealt round-robin."""
    folds = np.empty(n, dtype=int)
    folds[np.random.default_rng(seed).permutation(n)] = np.arange(n) % k
    return folds


def statistics_folds(pairs, lattices, seed: int, k: int = 5):
    """For each fold: (the indices of its pairs, a RuleModel whose statistics count the other folds)."""
    folds = fold_of(len(pairs), seed, k)
    for f in range(k):
        outside = np.flatnonzero(folds != f)
        stats = RuleModel()
        stats.count([pairs[i] for i in outside], [lattices[i] for i in outside])
        yield np.flatnonzero(folds == f), stats


def cross_fit(pairs, lattices, table, seed: int = 0, k: int = 5) -> list:
    """Every pair's lattice annotated by a RuleModel fitted on the other folds (for tuning)."""
    folds = fold_of(len(pairs), seed + 1, k)
    out = [None] * len(pairs)
    for f in range(k):
        inside, outside = np.flatnonzero(folds == f), np.flatnonzero(folds != f)
        model = RuleModel().fit([pairs[i] for i in outside], [lattices[i] for i in outside], table, seed)
        for i in inside:
            out[i] = model.annotate(table, pairs[i][0], lattices[i])
    return out
