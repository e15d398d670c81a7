"""Paraphrase identification (in the style of the 2005 identification paper): pair features + a linear classifier.

Each sentence is normalised like the build (:func:`pivot.text.normalize_many`: lower-cased
Moses tokens). Features of a pair (a, b) -- every directional feature is given as the min and
the max of its two directions, so a pair and its swap get the same vector:

String features (:func:`string_features`)
    word edit distance (Levenshtein over tokens) / longer length; character similarity
    (difflib ratio); length ratio (shorter / longer) and absolute length difference; word
    n-gram overlap, n = 1..4 (clipped counts shared / n-grams of the sentence, each direction);
    character 3- and 4-gram Jaccard; content-word overlap (stop words removed); number
    agreement (both have numbers, equal number sets, Jaccard of the sets, numbers in one only)
    and date-word agreement (month and weekday names, years); shared stems (overlap of the
    words' stems, :func:`stem`, a small suffix stripper) and the share of morphological
    variants (words matched only through their stem).

Then the alignment features without the database: the pair is aligned word to word by
    identity and then by morphological variant (:func:`align`, no links); the content words left
    unaligned on each side (min, max, sum, shares, none left); the seed paper's "lexical
    distance" (edit distance of the alphabetised unique words) and its composite matches per
    edit (aligned words / (word edit distance + 1)).

Database features (:class:`ParaphraseAligner`, one block per model)
    the same alignment with a third stage, as the seed paper on identification uses lexical
    paraphrase resources: spans of a and b (up to 4 words) that the database holds as a
    paraphrase pair are linked best score first. Features: content words still unaligned (what
    the paraphrases could not explain is what tells a non-paraphrase), content words the links
    aligned, the links' number, best and mean log score, and n-gram overlaps normalised by the
    paraphrases (each sentence with its linked spans replaced by the other's: BLEU-like mean,
    gains of the n-gram precisions).

The classifier is a scikit-learn pipeline: StandardScaler then LogisticRegression (or an RBF
SVM), its C chosen by 5-fold stratified cross-validation on the training pairs only.
"""
from __future__ import annotations

import difflib
import json
import math
import re
from collections import Counter

import numpy as np

from pivot.errors import InputError
from pivot.text import edit_distance

STOP = frozenset("""a an the of to in on at for from by with and or but as is are was were be been being it its
this that these those he she they we you i his her their our your my me him them us has have had do does did
will would can could should may might shall must not no 's 't n't , . ; : ! ? " ' ` `` '' - -- ( ) [ ] { }
""".split())
MONTHS = frozenset("""january february march april may june july august september october november december jan feb
mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday saturday sunday""".split())
_NUM = re.compile(r"\d")
_YEAR = re.compile(r"^(1[89]|20)\d\d$")
_SUFFIXES = ("ingly", "edly", "ations", "ation", "ments", "ment", "ings", "ing", "ies", "ied", "ers", "er",
             "ed", "es", "ly", "s")


def stem(word: str) -> str:
    """A small deterministic suffix stripper: "agreed", "agrees", "agreement" -> "agre"."""
    w = word.lower()
    vowel_suffix = False
    for suf in _SUFFIXES:
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            w = w[: -len(suf)]
            if suf in ("ies", "ied"):
                w += "y"
            vowel_suffix = suf[0] in "aei"
            break
    # "agree", "agreement" -> "agre" like "agreed", "agrees" (a vowel suffix took the e already)
    if not vowel_suffix and w.endswith("e") and len(w) > 3:
        w = w[:-1]
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeiousl":
        w = w[:-1]
    return w


def ngrams(tokens, n):
    return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


def _overlap(a: Counter, b: Counter):
    """(shared / |a|, shared / |b|) with clipped counts; 0 for an empty side."""
    shared = sum((a & b).values())
    na, nb = sum(a.values()), sum(b.values())
    return (shared / na if na else 0.0), (shared / nb if nb else 0.0)


def _minmax(x, y):
    return [min(x, y), max(x, y)]


def _jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if (a or b) else 1.0


STRING_FEATURES = (
    ["word_edit", "char_ratio", "len_ratio", "len_diff"]
    + [f"ngram{n}_{m}" for n in range(1, 5) for m in ("min", "max")]
    + ["char3_jaccard", "char4_jaccard", "content_min", "content_max",
       "num_both", "num_equal", "num_jaccard", "num_unmatched", "date_unmatched",
       "stem_min", "stem_max", "morph_variants",
       "align_unaligned_min", "align_unaligned_max", "align_unaligned_sum", "align_unaligned_share_min",
       "align_unaligned_share_max", "align_all_aligned", "lexical_distance", "aligned_per_edit"]
)
PARA_FEATURES = [
    "para_unaligned_min", "para_unaligned_max", "para_unaligned_sum", "para_unaligned_share_min",
    "para_unaligned_share_max", "para_all_aligned", "para_aligned_words", "para_links", "para_best_p",
    "para_mean_logp", "para_bleu_min", "para_bleu_max", "para_bleu_gain",
    "para_gain1", "para_gain2", "para_gain3", "para_gain4"]
DB_FEATURES = PARA_FEATURES      # for one model; several models: one block each


def string_features(a: list, b: list) -> list:
    """The string features of token lists a, b (order: STRING_FEATURES)."""
    la, lb = len(a), len(b)
    longer = max(la, lb, 1)
    led = edit_distance(a, b)
    f = [led / longer]
    sa, sb = " ".join(a), " ".join(b)
    f.append(difflib.SequenceMatcher(None, sa, sb, autojunk=False).ratio())
    f.append(min(la, lb) / longer)
    f.append(abs(la - lb))
    for n in range(1, 5):
        f.extend(_minmax(*_overlap(Counter(ngrams(a, n)), Counter(ngrams(b, n)))))
    for n in (3, 4):
        ca = {sa[i:i + n] for i in range(len(sa) - n + 1)}
        cb = {sb[i:i + n] for i in range(len(sb) - n + 1)}
        f.append(_jaccard(ca, cb))
    f.extend(_minmax(*_overlap(Counter(w for w in a if w not in STOP), Counter(w for w in b if w not in STOP))))
    na = {w for w in a if _NUM.search(w)}
    nb = {w for w in b if _NUM.search(w)}
    f.append(float(bool(na) and bool(nb)))
    f.append(float(na == nb))
    f.append(_jaccard(na, nb))
    f.append(len(na ^ nb))
    da = {w for w in a if w in MONTHS or _YEAR.match(w)}
    db_ = {w for w in b if w in MONTHS or _YEAR.match(w)}
    f.append(len(da ^ db_))
    sta, stb = Counter(stem(w) for w in a), Counter(stem(w) for w in b)
    f.extend(_minmax(*_overlap(sta, stb)))
    wa, wb = set(a), set(b)
    stems_b = {stem(w) for w in wb}
    variants = sum(1 for w in wa - wb if stem(w) in stems_b)
    f.append(variants / longer)
    # the alignment features without the database (identity and morphological variants only):
    # their DB counterparts (PARA_FEATURES) then measure what the paraphrases add, nothing else
    al = align(a, b, ())
    f.extend(_unaligned_features(a, b, al.aligned_a, al.aligned_b))
    # lexical distance of the seed paper on identification: word edit distance between the
    # alphabetised sets of unique words (order ignored), / the longer set
    ua, ub = sorted(wa), sorted(wb)
    f.append(edit_distance(ua, ub) / max(len(ua), len(ub), 1))
    # its composite "matches per edit": aligned words / (word edit distance + 1)
    f.append(sum(al.aligned_a) / (led + 1))
    return f


def _n_unaligned(tokens, aligned) -> int:
    """Content words (not in STOP) left unaligned."""
    return sum(1 for w, x in zip(tokens, aligned) if w not in STOP and not x)


def _unaligned_features(a, b, aligned_a, aligned_b) -> list:
    """Unaligned content words: min, max, sum of the two sides, min and max of their shares of
    the side's content words, and whether none is left (1.0 / 0.0)."""
    ua, ub = _n_unaligned(a, aligned_a), _n_unaligned(b, aligned_b)
    ca = sum(w not in STOP for w in a) or 1
    cb = sum(w not in STOP for w in b) or 1
    return [min(ua, ub), max(ua, ub), ua + ub, min(ua / ca, ub / cb), max(ua / ca, ub / cb), float(ua + ub == 0)]


class Alignment:
    """A one-to-one alignment of two token lists.

    ``aligned_a``/``aligned_b``: per token, aligned or not; ``by_identity``: the a-side flags
    after the identity and morphological stages (before any paraphrase); ``links``: the accepted
    paraphrase links (p, i, j, k, l): a[i:j] aligned to b[k:l] with DB score p.
    """

    __slots__ = ("aligned_a", "aligned_b", "before_a", "before_b", "links")

    def __init__(self, aligned_a, aligned_b, before_a, before_b, links):
        self.aligned_a, self.aligned_b = aligned_a, aligned_b
        self.before_a, self.before_b = before_a, before_b
        self.links = links


def align(a, b, links) -> Alignment:
    """Paraphrase-aware alignment of token lists a and b, greedy in three stages:

    1. identity: each word of a, left to right, to the first unaligned equal word of b;
    2. morphological variants: each still unaligned word of a to the first unaligned word of b
       with the same :func:`stem` ("agreed" / "agreement");
    3. paraphrases: candidate links (p, i, j, k, l) -- a[i:j] is a DB paraphrase of b[k:l] with
       score p -- best first (ties: leftmost in a, then in b). A link is taken when each span holds
       an unaligned word, one of them an unaligned content word, and neither span overlaps an
       earlier paraphrase link; its words are then aligned. Multi-word spans ("according to" /
       "reported") may hold words the identity stage aligned already.
    """
    aligned_a, aligned_b = [False] * len(a), [False] * len(b)
    free = {}
    for k, w in enumerate(b):
        free.setdefault(w, []).append(k)
    for i, w in enumerate(a):
        if free.get(w):
            aligned_a[i] = aligned_b[free[w].pop(0)] = True
    stems_b = [stem(w) for w in b]
    for i, w in enumerate(a):
        if aligned_a[i]:
            continue
        s = stem(w)
        k = next((k for k in range(len(b)) if not aligned_b[k] and stems_b[k] == s), None)
        if k is not None:
            aligned_a[i] = aligned_b[k] = True
    before_a, before_b = aligned_a[:], aligned_b[:]
    para_a, para_b = [False] * len(a), [False] * len(b)
    taken = []
    for p, i, j, k, l in sorted(links, key=lambda c: (-c[0], c[1], c[3], c[2], c[4])):
        if all(aligned_a[i:j]) or all(aligned_b[k:l]) or any(para_a[i:j]) or any(para_b[k:l]):
            continue
        if not (any(a[x] not in STOP and not aligned_a[x] for x in range(i, j))
                or any(b[x] not in STOP and not aligned_b[x] for x in range(k, l))):
            continue
        for x in range(i, j):
            aligned_a[x] = para_a[x] = True
        for x in range(k, l):
            aligned_b[x] = para_b[x] = True
        taken.append((p, i, j, k, l))
    return Alignment(aligned_a, aligned_b, before_a, before_b, taken)


def _bleu_like(x, y):
    """(geometric mean of the clipped n-gram precisions of x against y, n = 1..4, each floored
    at 1e-3; the four precisions)."""
    ps = [_overlap(Counter(ngrams(x, n)), Counter(ngrams(y, n)))[0] for n in range(1, 5)]
    return math.exp(sum(math.log(max(q, 1e-3)) for q in ps) / 4), ps


class ParaphraseAligner:
    """DB-backed features of a pair (PARA_FEATURES) from a paraphrase-aware alignment (:func:`align`).

    Candidate links are every pair (span of a, span of b), spans of up to ``max_span`` words, that
    the database holds as a paraphrase pair under ``model`` in either direction; a link's score is
    p = max(p(b-span | a-span), p(a-span | b-span)) (the paraphrase relation is symmetric, and
    pivoting often proposes a pair in one direction only). Pairs with p < ``min_p`` are left out.
    All links of a sentence pair come from one SQL query over the two sentences' phrase ids.
    """

    def __init__(self, db, model: str = "general", max_span: int = 4, min_p: float = 0.0):
        self.db = db
        self.model = model
        self.max_span = max_span
        self.min_p = min_p
        info = db.model_info(model)      # InputError for an unknown model
        self._combined = info["kind"] == "combined"
        # a combined model stores no column: its candidates are its base model's pairs, rescored
        self._column = db.model_info(info["params"]["base"])["column"] if self._combined else info["column"]
        self._ids: dict[str, int | None] = {}

    def _spans(self, tokens):
        n = len(tokens)
        return [(i, j) for i in range(n) for j in range(i + 1, min(n, i + self.max_span) + 1)]

    def prefetch(self, sentences):
        """Phrase ids of every span of the sentences (one query per 500 spans)."""
        todo = list(dict.fromkeys(" ".join(t[i:j]) for t in sentences for i, j in self._spans(t)
                                  if " ".join(t[i:j]) not in self._ids))
        found = self.db.phrase_ids(todo)
        for s in todo:
            self._ids[s] = found.get(s)

    def links(self, a, b) -> list:
        """Candidate links (p, i, j, k, l): a[i:j] and b[k:l] a DB paraphrase pair with score p."""
        self.prefetch([a, b])
        pos_a, pos_b = {}, {}
        for pos, t in ((pos_a, a), (pos_b, b)):
            for i, j in self._spans(t):
                pid = self._ids[" ".join(t[i:j])]
                if pid is not None:
                    pos.setdefault(pid, []).append((i, j))
        if not pos_a or not pos_b:
            return []
        qa, qb = ",".join(map(str, pos_a)), ",".join(map(str, pos_b))
        col = self._column
        sql = (f"SELECT e1, e2, {col} FROM pair WHERE {col} IS NOT NULL AND "
               f"((e1 IN ({qa}) AND e2 IN ({qb})) OR (e1 IN ({qb}) AND e2 IN ({qa})))")
        rows = [r for conn in self.db._part_conns() for r in conn.execute(sql).fetchall()]
        if self._combined:
            text = {v: k for k, v in self._ids.items() if v is not None}
            scores = self.db.scores([(text[e1], text[e2]) for e1, e2, _ in rows], self.model, normalize=False)
            rows = [(e1, e2, p) for (e1, e2, _), p in zip(rows, scores) if not math.isnan(p)]
        best: dict[tuple, float] = {}
        for e1, e2, p in rows:
            for x, y in ((e1, e2), (e2, e1)):       # both orientations: p is symmetrised by max
                if x in pos_a and y in pos_b and p >= self.min_p and p > best.get((x, y), 0.0):
                    best[(x, y)] = p
        return [(p, i, j, k, l) for (x, y), p in best.items() for i, j in pos_a[x] for k, l in pos_b[y]]

    def features(self, a, b) -> list:
        """PARA_FEATURES of the pair (a, b).

        After the alignment: unaligned content words (as :func:`_unaligned_features`); how many
        content words the paraphrase links aligned beyond identity and morphology; the number of
        links, their best p and mean log p (0 when none); then the paraphrase-normalised overlap:
        a' is a with each linked span replaced by its b-side span (b' likewise), and the BLEU-like
        mean of a' against b and of b' against a (min, max), the sum of their gains over the raw
        sentences', and the gain of each n-gram precision (n = 1..4, summed over the directions).
        """
        al = align(a, b, self.links(a, b))
        f = _unaligned_features(a, b, al.aligned_a, al.aligned_b)
        before = _n_unaligned(a, al.before_a) + _n_unaligned(b, al.before_b)
        f.append(before - f[2])
        ps = [p for p, *_ in al.links]
        f += [len(ps), max(ps, default=0.0), sum(math.log(p) for p in ps) / len(ps) if ps else 0.0]
        a2, b2 = list(a), list(b)
        for _, i, j, k, l in sorted(al.links, key=lambda c: -c[1]):     # right to left: indices stay valid
            a2[i:j] = b[k:l]
        for _, i, j, k, l in sorted(al.links, key=lambda c: -c[3]):
            b2[k:l] = a[i:j]
        g_a, p_a = _bleu_like(a2, b)
        g_b, p_b = _bleu_like(b2, a)
        r_a, q_a = _bleu_like(a, b)
        r_b, q_b = _bleu_like(b, a)
        f += _minmax(g_a, g_b) + [g_a - r_a + g_b - r_b] + [p_a[n] - q_a[n] + p_b[n] - q_b[n] for n in range(4)]
        return f


def featurize(pairs, aligner, lang: str = "en"):
    """(X string features, X DB features or None) for MSRP pairs; `aligner` a ParaphraseAligner, a list of
    them (one DB_FEATURES block each, side by side) or None."""
    from pivot.text import normalize_many

    s1 = [t.split() for t in normalize_many([p.s1 for p in pairs], lang)]
    s2 = [t.split() for t in normalize_many([p.s2 for p in pairs], lang)]
    xs = np.array([string_features(a, b) for a, b in zip(s1, s2)], dtype=np.float64)
    if aligner is None:
        return xs, None
    aligners = aligner if isinstance(aligner, (list, tuple)) else [aligner]
    blocks = []
    for al in aligners:
        al.prefetch(s1 + s2)
        blocks.append(np.array([al.features(a, b) for a, b in zip(s1, s2)], dtype=np.float64))
    return xs, np.hstack(blocks)


def make_classifier(kind: str = "logreg", seed: int = 0):
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    if kind == "logreg":
        est = make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000))
        grid = {"logisticregression__C": [0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0]}
    elif kind == "svm":
        est = make_pipeline(StandardScaler(), SVC(kernel="rbf", gamma="scale"))
        grid = {"svc__C": [0.1, 0.3, 1.0, 3.0, 10.0]}
    else:
        raise ValueError(f"unknown classifier {kind!r}")
    cv = StratifiedKFold(n_splits=5, shuffle=True, random_state=seed)
    return GridSearchCV(est, grid, cv=cv, scoring="accuracy", n_jobs=1)


def _scores(clf, x):
    return clf.predict_proba(x)[:, 1] if hasattr(clf, "predict_proba") else clf.decision_function(x)


def metrics(y, pred) -> dict:
    y, pred = np.asarray(y), np.asarray(pred)
    tp = int(((pred == 1) & (y == 1)).sum())
    fp = int(((pred == 1) & (y == 0)).sum())
    fn = int(((pred == 0) & (y == 1)).sum())
    prec = tp / (tp + fp) if tp + fp else 0.0
    rec = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    return {"accuracy": float((y == pred).mean()), "precision": prec, "recall": rec, "f1": f1}


def bootstrap_difference(y, pred_a, pred_b, n_boot: int = 1000, seed: int = 0) -> dict:
    """Paired bootstrap over test pairs of accuracy(a) - accuracy(b) and F1(a) - F1(b)."""
    rng = np.random.default_rng(seed)
    y, pa, pb = map(np.asarray, (y, pred_a, pred_b))
    n = len(y)
    acc, f1 = [], []
    for _ in range(n_boot):
        idx = rng.integers(0, n, n)
        ma, mb = metrics(y[idx], pa[idx]), metrics(y[idx], pb[idx])
        acc.append(ma["accuracy"] - mb["accuracy"])
        f1.append(ma["f1"] - mb["f1"])
    full_a, full_b = metrics(y, pa), metrics(y, pb)
    return {"accuracy_diff": full_a["accuracy"] - full_b["accuracy"],
            "accuracy_diff_ci95": [float(np.percentile(acc, 2.5)), float(np.percentile(acc, 97.5))],
            "f1_diff": full_a["f1"] - full_b["f1"],
            "f1_diff_ci95": [float(np.percentile(f1, 2.5)), float(np.percentile(f1, 97.5))],
            "n_boot": n_boot}


def mcnemar(y, pred_a, pred_b) -> dict:
    """Exact McNemar test of two classifiers on the same pairs: n_a (a right, b wrong) and n_b
    (b right, a wrong); under H0 each discordant pair is a fair coin, so the two-sided p-value
    is min(1, 2 * P(Binomial(n_a + n_b, 1/2) <= min(n_a, n_b)))."""
    y, pa, pb = map(np.asarray, (y, pred_a, pred_b))
    n_a = int(((pa == y) & (pb != y)).sum())
    n_b = int(((pb == y) & (pa != y)).sum())
    n = n_a + n_b
    tail = sum(math.comb(n, i) for i in range(min(n_a, n_b) + 1)) / 2 ** n if n else 1.0
    return {"a_only_right": n_a, "b_only_right": n_b, "p_value": min(1.0, 2 * tail)}


def evaluate(db, train, test, *, model: str = "general", classifier: str = "logreg", n_boot: int = 1000,
             seed: int = 0, progress=None):
    """Train on `train` pairs, evaluate on `test` pairs: a result dict (see run_command)."""
    import time

    t0 = time.perf_counter()
    lang = db.meta.get("normalization", {}).get("lang", "en")
    models = [m.strip() for m in model.split(",") if m.strip()]
    aligner = [ParaphraseAligner(db, m) for m in models]
    xs_tr, xd_tr = featurize(train, aligner, lang)
    xs_te, xd_te = featurize(test, aligner, lang)
    t_feat = time.perf_counter() - t0
    y_tr = np.array([p.label for p in train])
    y_te = np.array([p.label for p in test])
    majority = int(round(y_tr.mean()))
    results = {"n_train": len(train), "n_test": len(test), "model": model, "classifier": classifier,
               "features": {"string": STRING_FEATURES, "db": [f"{m}:{f}" for m in models for f in DB_FEATURES]},
               "majority_baseline": {**metrics(y_te, np.full(len(y_te), majority)), "label": majority}}
    preds = {}
    for name, (xtr, xte) in {"string_only": (xs_tr, xs_te),
                             "string+db": (np.hstack([xs_tr, xd_tr]), np.hstack([xs_te, xd_te]))}.items():
        clf = make_classifier(classifier, seed).fit(xtr, y_tr)
        pred = clf.predict(xte)
        preds[name] = (pred, _scores(clf, xte))
        results[name] = {**metrics(y_te, pred), "cv_accuracy": float(clf.best_score_),
                         "best_params": {k.split("__")[-1]: v for k, v in clf.best_params_.items()}}
    results["db_minus_string"] = bootstrap_difference(y_te, preds["string+db"][0], preds["string_only"][0],
                                                      n_boot, seed)
    results["db_minus_string"]["mcnemar"] = mcnemar(y_te, preds["string+db"][0], preds["string_only"][0])
    results["seconds"] = {"features": round(t_feat, 2), "total": round(time.perf_counter() - t0, 2)}
    return results, preds["string+db"]


def run_command(args) -> int:
    """`pivot identify`: see pivot.cli."""
    import sys

    from pivot.sentences.msrp import read_msrp
    from pivot.store.db import ParaphraseDB

    try:
        import sklearn  # noqa: F401
    except ImportError as exc:
        raise InputError(f"pivot identify needs scikit-learn ({exc}): "
                         "pip install 'pivot-paraphrase[sentences]'") from None
    from pivot import outputs

    # checked before any work: not a file this command reads, not a device (pivot/outputs.py)
    predictions = outputs.check_target(
        args.predictions, "--predictions",
        [(args.db, "the database"), (args.train, "the training file"), (args.test, "the test file")],
    ) if args.predictions else None
    train, test = read_msrp(args.train), read_msrp(args.test)
    if not train or not test:
        raise InputError("no pairs", args.train if not train else args.test)
    if len({p.label for p in train}) < 2:
        raise InputError("the training pairs must hold both labels (0 and 1)", args.train)
    n_min = min(sum(p.label == c for p in train) for c in (0, 1))
    if n_min < 5:
        raise InputError(f"5-fold cross-validation needs at least 5 training pairs of each label, "
                         f"one label has {n_min}", args.train)
    with ParaphraseDB(args.db) as db:
        for m in args.model.split(","):
            db.model_info(m.strip())            # InputError naming an unknown model
        res, (pred, score) = evaluate(db, train, test, model=args.model, classifier=args.classifier,
                                      n_boot=args.n_boot, seed=args.seed)
    if predictions:
        with outputs.writing(predictions) as fh:   # a temporary file, renamed once complete
            for label, s in zip(pred, score):
                fh.write(f"{int(label)}\t{float(s):.6f}\n")
    if args.format == "json":
        json.dump(res, sys.stdout, indent=1)
        print()
        return 0
    print(f"MSRP identification: {res['n_train']} train pairs, {res['n_test']} test pairs; "
          f"{res['classifier']}, DB model {res['model']}")
    print(f"{'system':<22}{'accuracy':>10}{'F1':>8}{'precision':>11}{'recall':>8}")
    for name, key in (("majority baseline", "majority_baseline"), ("string overlap only", "string_only"),
                      ("string + DB", "string+db")):
        r = res[key]
        print(f"{name:<22}{100 * r['accuracy']:>10.1f}{100 * r['f1']:>8.1f}{100 * r['precision']:>11.1f}"
              f"{100 * r['recall']:>8.1f}")
    d = res["db_minus_string"]
    lo, hi = d["accuracy_diff_ci95"]
    flo, fhi = d["f1_diff_ci95"]
    print(f"DB features: accuracy {100 * d['accuracy_diff']:+.1f} points (95% CI {100 * lo:+.1f} .. {100 * hi:+.1f}), "
          f"F1 {100 * d['f1_diff']:+.1f} (95% CI {100 * flo:+.1f} .. {100 * fhi:+.1f}); paired bootstrap over "
          f"test pairs, {d['n_boot']} resamples; McNemar exact p = {d['mcnemar']['p_value']:.3f} "
          f"({d['mcnemar']['a_only_right']} pairs right only with DB, {d['mcnemar']['b_only_right']} only without)")
    return 0
