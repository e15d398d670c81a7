"""A real combination model: PPDB 2.0-style features, a ridge logistic regression, tuned on dev.

PPDB 2.0 (2015) re-ranks paraphrases with a supervised regression over many
features of a pair instead of one probability. Here every gold pair is an *unordered* pair
{a, b} (similarity gold has no direction), so every feature is a symmetric function of the two
directions; swapping a and b never changes a feature (a test checks it).

Features (groups; a variant is a set of groups; ``general`` + ``domain`` is what a pivot-only
system knows):

``general`` (General's estimates and the strings) and ``domain`` (each Moore-Lewis model's
estimates): for every stored model M (General in ``general``, each Moore-Lewis model in
``domain``; not the General+X combinations, which are functions of these):
    log_pmax[M] = log max(p_M(b|a), p_M(a|b))   the better direction (natural log)
    log_pmin[M] = log min(p_M(b|a), p_M(a|b))   the worse one: a pair proposed both ways is
                                                 stronger evidence than a one-way pair
    missing[M]  = 1 if M proposes neither direction
  a direction M does not propose counts as p = FLOOR_P (log 1e-10 = -23.03), the same floor as
  the General+X regressions (pivot.store.combined); the indicator lets the fit learn its own
  offset for "no opinion" instead of trusting the floor;
    log1p_n_pivots      log(1 + the larger number of foreign phrases pivoting the pair)
    n_pivot_languages   distinct pivot languages among the stored best pivots (max over the
                        directions; at most 3 pivots are stored, so a lower bound)
    log1p_count_min/max log(1 + bitext support) of the rarer / commoner phrase (0: not a phrase)
    n_tokens_min, n_tokens_diff   the shorter phrase's tokens, |tokens(a) - tokens(b)|
    char3_jaccard       |G(a) & G(b)| / |G(a) | G(b)| over character trigrams of "#a#", "#b#"
    edit_ratio          1 - Levenshtein(a, b) / max(|a|, |b|)  (characters)
    token_jaccard       Jaccard of the two token sets
  The database stores no lexical weights and no per-pair counts, so those PPDB 2.0 features
  are absent; the phrase counts stand in for the counts.
  Every feature after the per-model triples above (pivots, languages, counts, lengths, strings)
  is in ``general``: none depends on a domain weighting.
The variant ``ppdb2-general`` (no ``domain`` group) is the domain ablation: ppdb2-pivot minus
ppdb2-general is what the domain-weighted estimates add to the same regression over General.
``ppmi``: ppmi_cos = cosine of the phrases' PPMI-SVD vectors trained on the build's in-domain
  text (pivot.eval.distributional), ppmi_missing = 1 when a phrase has no in-vocabulary word.
``minilm``: minilm_cos = cosine of all-MiniLM-L6-v2 embeddings (pivot.eval.rivals).

Model: P(positive | x) = 1 / (1 + exp(-(b0 + sum_j b_j z_j))), z_j = (x_j - mean_j) / sd_j
with the mean and sd of the training pairs (a column constant on them is dropped and recorded),
fitted by maximising the ridge-penalised log-likelihood (statsmodels' Logit supplies the
log-likelihood, its gradient and Hessian; Newton's method with step halving)

    l(b) - lambda/2 * sum_{j>=1} b_j^2          (intercept not penalised)

on the ontology gold's train part; lambda is chosen from a fixed grid by full-set AP on the dev
part (ties: the larger lambda), and the fit is reported on the test parts. Coefficients are per
training standard deviation; their standard errors are the ridge sandwich estimator
Var(b) = (I + L)^-1 I (I + L)^-1, I = X^T W X the Fisher information at the
estimate and L = diag(0, lambda, ..., lambda).
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

import numpy as np

from pivot.store.combined import FLOOR_LOG_P, symmetric_p
from pivot.text import edit_distance as levenshtein

log = logging.getLogger("pivot")

GROUPS = ("general", "domain", "ppmi", "minilm")
#: the variants the report shows: name -> feature groups
VARIANTS = {
    "ppdb2-general": ("general",),
    "ppdb2-pivot": ("general", "domain"),
    "ppdb2-pivot+ppmi": ("general", "domain", "ppmi"),
    "ppdb2-pivot+minilm": ("general", "domain", "minilm"),
    "ppdb2-all": ("general", "domain", "ppmi", "minilm"),
}
#: ridge penalties tried on dev (lambda of the module docstring)
LAMBDAS = (0.01, 0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0)


# ------------------------------------------------------------------------------ string features


def char_ngrams(text: str, n: int = 3) -> set[str]:
    """Character n-grams of "#text#" (the padding marks the word edges; a short text gives one)."""
    padded = f"#{text}#"
    return {padded[i:i + n] for i in range(max(1, len(padded) - n + 1))}


def jaccard(x: set, y: set) -> float:
    """|x & y| / |x | y| (1 for two empty sets)."""
    union = len(x | y)
    return len(x & y) / union if union else 1.0


def edit_ratio(a: str, b: str) -> float:
    """1 - Levenshtein(a, b) / max(|a|, |b|): 1 for equal strings, 0 for nothing in common."""
    longest = max(len(a), len(b))
    return 1.0 - levenshtein(a, b) / longest if longest else 1.0


def levenshtein_many(pairs, batch: int = 4096) -> np.ndarray:
    """levenshtein(a, b) of every pair, the same recurrence run on many pairs at once.

    D[i, j] = min(D[i-1, j] + 1, D[i, j-1] + 1, D[i-1, j-1] + [a_i != b_j]), D[i, 0] = i,
    D[0, j] = j, over numpy arrays of character codes (one row per pair, padded); a pair's
    row of D stops changing once i passes |a|, so the last row holds D[|a|, j] and D[|a|, |b|]
    is read from it. Pairs are batched by length so the padding stays short (the Python loop
    of :func:`levenshtein` over 100k gold pairs takes minutes).
    """
    n = len(pairs)
    out = np.zeros(n, dtype=np.int64)
    order = sorted(range(n), key=lambda i: (max(len(pairs[i][0]), len(pairs[i][1])), i))
    for start in range(0, n, batch):
        idx = order[start:start + batch]
        sa = [pairs[i][0] for i in idx]
        sb = [pairs[i][1] for i in idx]
        la = np.array([len(t) for t in sa])
        lb = np.array([len(t) for t in sb])
        wa, wb = max(1, int(la.max())), max(1, int(lb.max()))
        # character codes, padded with -1 and -2 (padding never matches anything)
        ca = np.full((len(idx), wa), -1, dtype=np.int64)
        cb = np.full((len(idx), wb), -2, dtype=np.int64)
        for r, (ta, tb) in enumerate(zip(sa, sb)):
            ca[r, :len(ta)] = [ord(c) for c in ta]
            cb[r, :len(tb)] = [ord(c) for c in tb]
        prev = np.tile(np.arange(wb + 1, dtype=np.int64), (len(idx), 1))
        for i in range(1, wa + 1):
            cur = np.empty_like(prev)
            cur[:, 0] = i
            sub = prev[:, :-1] + (ca[:, i - 1:i] != cb)        # diagonal + substitution cost
            up = prev[:, 1:] + 1
            best = np.minimum(sub, up)
            for j in range(1, wb + 1):                           # left neighbour is sequential
                cur[:, j] = np.minimum(best[:, j - 1], cur[:, j - 1] + 1)
            live = (i <= la)[:, None]
            prev = np.where(live, cur, prev)
        out[idx] = prev[np.arange(len(idx)), lb]
    return out


LEXICAL_NAMES = ["n_tokens_min", "n_tokens_diff", "char3_jaccard", "edit_ratio", "token_jaccard"]


def lexical_features(pairs) -> np.ndarray:
    """(n, 5) LEXICAL_NAMES of each unordered pair (each a symmetric function of a and b)."""
    out = np.zeros((len(pairs), len(LEXICAL_NAMES)))
    dist = levenshtein_many(pairs)
    for i, (a, b) in enumerate(pairs):
        ta, tb = a.split(), b.split()
        longest = max(len(a), len(b))
        out[i] = (min(len(ta), len(tb)), abs(len(ta) - len(tb)), jaccard(char_ngrams(a), char_ngrams(b)),
                  1.0 - dist[i] / longest if longest else 1.0, jaccard(set(ta), set(tb)))
    return out


# ------------------------------------------------------------------------------ database features


def _log_floor(p: np.ndarray) -> np.ndarray:
    """log p, FLOOR_LOG_P where p is NaN or <= 0 (not proposed)."""
    ok = p > 0
    return np.where(ok, np.log(np.where(ok, p, 1.0)), FLOOR_LOG_P)


def pivot_features(db, pairs) -> tuple[list[str], list[str], np.ndarray]:
    """The database features of the module docstring for each unordered (normalised) pair:
    (names, each name's group, matrix)."""
    fwd = db.pair_records(pairs, normalize=False)
    rev = db.pair_records([(b, a) for a, b in pairs], normalize=False)
    names, groups, cols = [], [], []
    with np.errstate(invalid="ignore"):
        for j, m in enumerate(fwd["stored_models"]):
            pf, pr_ = fwd["p"][:, j], rev["p"][:, j]
            has_f, has_r = pf > 0, pr_ > 0
            pmax = symmetric_p(pf, pr_)                          # the better direction, NaN: neither
            # the worse direction: floor unless both directions are proposed
            pmin = np.where(has_f & has_r, np.fmin(pf, pr_), np.nan)
            names += [f"log_pmax[{m}]", f"log_pmin[{m}]", f"missing[{m}]"]
            groups += ["general" if j == 0 else "domain"] * 3     # stored model 0 is General
            cols += [_log_floor(pmax), _log_floor(pmin), (~(has_f | has_r)).astype(np.float64)]
    counts = np.log1p(np.column_stack([fwd["count_e1"], fwd["count_e2"]]).astype(np.float64))
    names += ["log1p_n_pivots", "n_pivot_languages", "log1p_count_min", "log1p_count_max"]
    cols += [np.log1p(np.maximum(fwd["n_pivots"], rev["n_pivots"]).astype(np.float64)),
             np.maximum(fwd["n_pivot_languages"], rev["n_pivot_languages"]).astype(np.float64),
             counts.min(axis=1), counts.max(axis=1)]
    names += LEXICAL_NAMES
    groups += ["general"] * (len(names) - len(groups))
    return names, groups, np.column_stack(cols + [lexical_features(pairs)])


class FeatureExtractor:
    """Every feature of every group for unordered pairs, computed once per pair and kept.

    db: the ParaphraseDB; word_vectors: pivot.eval.distributional.WordVectors (group ppmi);
    minilm: an object with .score(pairs) -> cosines (group minilm). A group whose source is
    None cannot be asked for (ValueError), never silently zero.
    """

    def __init__(self, db, word_vectors=None, minilm=None):
        self.db, self.word_vectors, self.minilm = db, word_vectors, minilm
        self._rows: dict[tuple[str, str], np.ndarray] = {}
        self.names: list[str] | None = None
        self._group_of: dict[str, str] = {}

    def _compute(self, pairs) -> np.ndarray:
        names, groups, x = pivot_features(self.db, pairs)
        cols = [x]
        if self.word_vectors is not None:
            cos, miss = self.word_vectors.cosine(pairs)
            names, groups = names + ["ppmi_cos", "ppmi_missing"], groups + ["ppmi", "ppmi"]
            cols.append(np.column_stack([cos, miss.astype(np.float64)]))
        if self.minilm is not None:
            names, groups = names + ["minilm_cos"], groups + ["minilm"]
            cols.append(np.asarray(self.minilm.score(pairs), dtype=np.float64)[:, None])
        if self.names is None:
            self.names = names
            self._group_of = dict(zip(names, groups))
        return np.column_stack(cols)

    def columns(self, groups) -> list[str]:
        """Feature names of the groups, in matrix order."""
        if self.names is None:
            raise ValueError("no pair has been featurised yet")
        have = set(self._group_of.values())
        for g in groups:
            if g not in have:
                raise ValueError(f"feature group {g!r} has no source (have: {sorted(have)})")
        return [n for n in self.names if self._group_of[n] in groups]

    def matrix(self, pairs, groups=GROUPS) -> tuple[list[str], np.ndarray]:
        """(names, X): the features of the groups for the pairs (a key is the unordered pair)."""
        keys = [tuple(sorted(p)) for p in pairs]
        todo = sorted({k for k in keys if k not in self._rows})
        if todo:
            x = self._compute(todo)
            self._rows.update(zip(todo, x))
        names = self.columns(groups)
        idx = [self.names.index(n) for n in names]
        x = np.array([self._rows[k] for k in keys]).reshape(len(keys), len(self.names))
        return names, x[:, idx]


# ------------------------------------------------------------------------------ the regression


@dataclass
class RidgeFit:
    """A fitted ridge logit over standardised features (coefficients per training SD)."""

    names: list[str]            # kept features (constant ones dropped)
    mean: np.ndarray
    sd: np.ndarray
    params: np.ndarray          # [intercept, b_1 .. b_p]
    bse: np.ndarray             # ridge sandwich standard errors, same order
    lam: float
    converged: bool
    iterations: int
    n: int
    n_positive: int
    llf: float                  # unpenalised log-likelihood at the estimate
    dropped: list[str] = field(default_factory=list)

    def linear(self, names, x) -> np.ndarray:
        """b0 + sum_j b_j (x_j - mean_j) / sd_j for a matrix whose columns are `names`."""
        idx = [names.index(n) for n in self.names]
        z = (np.asarray(x, dtype=np.float64)[:, idx] - self.mean) / self.sd
        return self.params[0] + z @ self.params[1:]

    def predict(self, names, x) -> np.ndarray:
        """P(positive | x) = 1 / (1 + exp(-linear))."""
        return 1.0 / (1.0 + np.exp(-self.linear(names, x)))


def fit_ridge_logit(names, x, y, lam: float, maxiter: int = 100, tol: float = 1e-9) -> RidgeFit:
    """Ridge logit on standardised columns (see the module docstring): Newton's method on
    l(b) - lam/2 |b_1..p|^2 with step halving, sandwich standard errors."""
    import statsmodels.api as sm

    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.shape != (len(y), len(names)):
        raise ValueError(f"x is {x.shape}, expected ({len(y)}, {len(names)})")
    n_pos = int(y.sum())
    if n_pos in (0, len(y)):
        raise ValueError(f"labels hold one class only ({n_pos} positive of {len(y)})")
    sd = x.std(axis=0)
    # a constant column's computed sd is rounding noise (~1e-15 for a column of log floors),
    # not variation: such a column is dropped, not standardised into huge values
    keep = sd > 1e-9 * np.maximum(1.0, np.abs(x.mean(axis=0)))
    kept = [n for n, k in zip(names, keep) if k]
    dropped = [n for n, k in zip(names, keep) if not k]
    mean, sd = x.mean(axis=0)[keep], sd[keep]
    design = np.column_stack([np.ones(len(y)), (x[:, keep] - mean) / sd])
    model = sm.Logit(y, design)
    penalty = np.full(design.shape[1], float(lam))
    penalty[0] = 0.0

    def objective(b):
        return model.loglike(b) - 0.5 * float(penalty @ (b * b))

    beta = np.zeros(design.shape[1])
    value, converged, it = objective(beta), False, 0
    for it in range(1, maxiter + 1):
        grad = model.score(beta) - penalty * beta
        neg_hess = -model.hessian(beta) + np.diag(penalty)
        step = np.linalg.solve(neg_hess, grad)
        t = 1.0
        while True:   # the penalised log-likelihood is concave: halving finds an ascent
            cand = beta + t * step
            new = objective(cand)
            if new >= value - 1e-12 or t < 1e-8:
                break
            t /= 2
        beta, value = cand, new
        if np.max(np.abs(t * step)) < tol:
            converged = True
            break
    info = -model.hessian(beta)
    inv = np.linalg.inv(info + np.diag(penalty))
    cov = inv @ info @ inv
    return RidgeFit(kept, mean, sd, beta, np.sqrt(np.clip(np.diag(cov), 0, None)), float(lam), converged, it,
                    len(y), n_pos, float(model.loglike(beta)), dropped)


# ------------------------------------------------------------------------------ variants


@dataclass
class CombinationModel:
    """One variant fitted on train with lambda chosen on dev; scores pairs like a rival does."""

    name: str
    groups: tuple[str, ...]
    fit: RidgeFit
    dev_ap: dict[float, float]         # lambda -> dev full-set AP
    extractor: FeatureExtractor

    def score(self, pairs) -> np.ndarray:
        if not len(pairs):
            return np.zeros(0)
        names, x = self.extractor.matrix(pairs, self.groups)
        return self.fit.predict(names, x)


def fit_variants(extractor: FeatureExtractor, train, dev, variants=None, lambdas=LAMBDAS
                 ) -> list[CombinationModel]:
    """Each variant: a ridge fit on train per lambda; the lambda with the best full-set AP on dev
    (ties: the larger lambda, the simpler model). train, dev: pivot.eval.protocols.Gold."""
    from pivot.eval.evaluate import average_precision

    variants = VARIANTS if variants is None else variants
    out = []
    for name, groups in variants.items():
        cols, x_train = extractor.matrix(train.pairs, groups)
        _, x_dev = extractor.matrix(dev.pairs, groups)
        fits, aps = {}, {}
        for lam in lambdas:
            fits[lam] = fit_ridge_logit(cols, x_train, train.labels, lam)
            aps[lam] = average_precision(dev.labels, fits[lam].predict(cols, x_dev))
        best = max(lambdas, key=lambda lam: (round(aps[lam], 12), lam))
        log.info("%s: lambda %g (dev AP %.4f), %d features", name, best, aps[best], len(fits[best].names))
        out.append(CombinationModel(name, tuple(groups), fits[best], aps, extractor))
    return out


class CosineScorer:
    """A distributional score alone, as a rival: the PPMI-SVD cosine (missing phrase: -1,
    below every cosine, so those pairs tie last)."""

    def __init__(self, name, word_vectors):
        self.name, self.word_vectors = name, word_vectors

    def score(self, pairs) -> np.ndarray:
        cos, missing = self.word_vectors.cosine(pairs)
        return np.where(missing, -1.0, cos)


def _num(v: float, sign: str = "") -> str:
    """3 decimals, or 2 significant digits in e-notation below 0.0005 (so 0.00004 is not "0.000")."""
    return f"{v:{sign}.3f}" if v == 0 or abs(v) >= 5e-4 else f"{v:{sign}.1e}"


def coefficient_rows(models: list[CombinationModel]) -> list[str]:
    """Markdown: one row per feature, one column per variant: b (SE) per training SD."""
    features = list(dict.fromkeys(["(intercept)"] + [n for m in models for n in m.fit.names]
                                  + [n for m in models for n in m.fit.dropped]))
    rows = ["| feature | " + " | ".join(m.name for m in models) + " |", "|---|" + "---|" * len(models)]
    for f in features:
        cells = []
        for m in models:
            if f == "(intercept)":
                j = 0
            elif f in m.fit.names:
                j = m.fit.names.index(f) + 1
            else:
                cells.append("dropped (constant)" if f in m.fit.dropped else "–")
                continue
            b, se = m.fit.params[j], m.fit.bse[j]
            z = b / se if se > 0 else math.inf
            cells.append(f"{_num(b, '+')} ({_num(se)}){'*' if abs(z) >= 1.96 else ''}")
        rows.append(f"| {f} | " + " | ".join(cells) + " |")
    return rows
