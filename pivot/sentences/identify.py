"""Paraphrase identification (Brockett & Dolan 2005 style): pair features + a linear classifier.

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

Database features (:class:`DBAligner`)
    for each direction, the share of a's content words (stop words left out) covered by an
    identity (the word occurs in b) or by a DB paraphrase: a span of a (up to 3 words, holding a
    content word) one of whose top-k paraphrases under the model occurs as a word n-gram of b;
    the share covered by paraphrases only (not identity); the content words left uncovered
    (sum and max of the directions) and those only a paraphrase covers; the best score
    p(e2|e1) among the matched paraphrases (0 when none); log(1 + matched spans).

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


def edit_distance(a, b) -> int:
    """Levenshtein distance between two sequences."""
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


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
       "stem_min", "stem_max", "morph_variants"]
)
ALIGN_FEATURES = ["db_cover_min", "db_cover_max", "db_para_min", "db_para_max", "db_uncovered_sum",
                  "db_uncovered_max", "db_para_words", "db_best_score", "db_log_matched"]
REWRITE_FEATURES = (
    [f"rw_{kind}{n}_{m}" for n in range(1, 5) for kind in ("ngram", "gain") for m in ("min", "max")]
    + ["rw_bleu_min", "rw_bleu_max", "rw_bleu_gain_min", "rw_bleu_gain_max",
       "rw_n", "rw_n_content", "rw_log_n", "rw_unmatched_sum", "rw_unmatched_max", "rw_unmatched_gain",
       "rw_best_logp", "rw_sum_p"]
)
DB_FEATURES = ALIGN_FEATURES + REWRITE_FEATURES      # for one model; several models: one block each


def string_features(a: list, b: list) -> list:
    """The string features of token lists a, b (order: STRING_FEATURES)."""
    la, lb = len(a), len(b)
    longer = max(la, lb, 1)
    f = [edit_distance(a, b) / longer]
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
    return f


class DBAligner:
    """DB-backed lexical alignment features (see the module docstring)."""

    def __init__(self, db, model: str = "general", k: int = 20, max_span: int = 3, rewrite_span: int = 4):
        from pivot.sentences.paraphrase import PhraseTable

        self.table = PhraseTable(db, model, k, drop_partial=False)
        self.max_span = max_span
        self.rewrite_span = rewrite_span

    def _spans(self, tokens, width=None):
        n, width = len(tokens), width or self.max_span
        return [(i, j) for i in range(n) for j in range(i + 1, min(n, i + width) + 1)]

    def prefetch(self, sentences):
        width = max(self.max_span, self.rewrite_span)
        self.table.prefetch(" ".join(t[i:j]) for t in sentences for i, j in self._spans(t, width))

    def direction(self, a, b):
        """Coverage of a's content words by b: (covered share, share covered by a paraphrase only,
        uncovered content words, content words only a paraphrase covers, best score, matched spans)."""
        content = [w not in STOP for w in a]
        n_content = sum(content)
        if not n_content:
            return 1.0, 0.0, 0, 0, 0.0, 0
        words_b = set(b)
        grams_b = {" ".join(b[i:j]) for i in range(len(b)) for j in range(i + 1, min(len(b), i + 5) + 1)}
        ident = [w in words_b for w in a]
        para = [False] * len(a)
        best, matched = 0.0, 0
        for i, j in self._spans(a):
            if not any(content[i:j]):
                continue
            for out, logp, _ in self.table.options(" ".join(a[i:j])):
                if " ".join(out) in grams_b:
                    matched += 1
                    best = max(best, math.exp(logp))
                    for x in range(i, j):
                        para[x] = True
                    break
        covered = sum(c and (x or y) for c, x, y in zip(content, ident, para))
        by_para = sum(c and y and not x for c, x, y in zip(content, ident, para))
        return covered / n_content, by_para / n_content, n_content - covered, by_para, best, matched

    def rewrite(self, a, b):
        """a rewritten toward b with the database: left to right, the longest span of a (up to
        ``rewrite_span`` words) holding a word absent from b whose paraphrase (best first) occurs
        as an n-gram of b is replaced by that paraphrase. Returns (tokens, rewrites, rewrites of
        spans with a content word, log p(e2|e1) of each rewrite)."""
        words_b = set(b)
        grams_b = {" ".join(b[i:j]) for i in range(len(b)) for j in range(i + 1, min(len(b), i + 6) + 1)}
        out, logps, n_content = [], [], 0
        i, n = 0, len(a)
        while i < n:
            for j in range(min(n, i + self.rewrite_span), i, -1):
                span = a[i:j]
                if all(w in words_b for w in span):
                    continue
                hit = next(((o, lp) for o, lp, _ in self.table.options(" ".join(span)) if " ".join(o) in grams_b),
                           None)
                if hit is not None:
                    out.extend(hit[0])
                    logps.append(hit[1])
                    n_content += any(w not in STOP for w in span)
                    i = j
                    break
            else:
                out.append(a[i])
                i += 1
        return out, len(logps), n_content, logps

    def rewrite_features(self, a, b) -> list:
        """REWRITE_FEATURES: the string overlaps again after paraphrase normalisation.

        Each sentence is rewritten toward the other (:meth:`rewrite`); then, per direction, the
        clipped n-gram precision of the rewritten sentence against the other one (n = 1..4), its
        gain over the raw precision, a BLEU-like geometric mean of the four (precisions floored at
        1e-3) and its gain, the number of rewrites (all; of spans with a content word; log(1+n)),
        the content words matched neither as words, stems nor paraphrases (sum, max of the
        directions, and how many the rewriting matched), the best log p(e2|e1) of a rewrite (-10
        when none) and the sum of their p. A paraphrase pair the string features cannot see
        ("chief" / "head") raises the overlaps exactly where the pair's words differ.
        """
        ra, n_a, c_a, lp_a = self.rewrite(a, b)
        rb, n_b, c_b, lp_b = self.rewrite(b, a)
        raw = [_overlap(Counter(ngrams(a, n)), Counter(ngrams(b, n))) for n in range(1, 5)]
        na_ = [_overlap(Counter(ngrams(ra, n)), Counter(ngrams(b, n)))[0] for n in range(1, 5)]
        nb_ = [_overlap(Counter(ngrams(rb, n)), Counter(ngrams(a, n)))[0] for n in range(1, 5)]
        f = []
        for n in range(4):
            f += _minmax(na_[n], nb_[n]) + _minmax(na_[n] - raw[n][0], nb_[n] - raw[n][1])

        def geo(ps):
            return math.exp(sum(math.log(max(p, 1e-3)) for p in ps) / 4)
        ba, bb = geo(na_), geo(nb_)
        f += _minmax(ba, bb) + _minmax(ba - geo([r[0] for r in raw]), bb - geo([r[1] for r in raw]))
        f += [n_a + n_b, c_a + c_b, math.log1p(n_a + n_b)]

        def unmatched(x, y):
            stems_y, words_y = {stem(w) for w in y}, set(y)
            return sum(1 for w in x if w not in STOP and w not in words_y and stem(w) not in stems_y)
        ua, ub = unmatched(ra, b), unmatched(rb, a)
        f += [ua + ub, max(ua, ub), unmatched(a, b) + unmatched(b, a) - ua - ub]
        lps = lp_a + lp_b
        f += [max(lps) if lps else -10.0, sum(math.exp(x) for x in lps)]
        return f

    def features(self, a, b) -> list:
        """DB_FEATURES of the pair (a, b)."""
        x, y = self.direction(a, b), self.direction(b, a)
        return (_minmax(x[0], y[0]) + _minmax(x[1], y[1]) + [x[2] + y[2], max(x[2], y[2]), x[3] + y[3],
                max(x[4], y[4]), math.log1p(x[5] + y[5])] + self.rewrite_features(a, b))


def featurize(pairs, aligner, lang: str = "en"):
    """(X string features, X DB features or None) for MSRP pairs; `aligner` a DBAligner, a list of
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


def evaluate(db, train, test, *, model: str = "general", classifier: str = "logreg", n_boot: int = 1000,
             seed: int = 0, progress=None):
    """Train on `train` pairs, evaluate on `test` pairs: a result dict (see run_command)."""
    import time

    t0 = time.perf_counter()
    lang = db.meta.get("normalization", {}).get("lang", "en")
    models = [m.strip() for m in model.split(",") if m.strip()]
    aligner = [DBAligner(db, m) for m in models]
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
    if args.predictions:
        with open(args.predictions, "w", encoding="utf-8") as fh:
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
          f"test pairs, {d['n_boot']} resamples")
    return 0
