"""Measured feature groups for the relation classifier (issue 22 item 3), not integrated.

    python bench/bench_relation_features.py --work WORK --data DIR [-o bench/results/relations-session7.json]
    python bench/bench_relation_features.py --work WORK --data DIR --model mlp \
        [-o bench/results/relations-mlp-session7.json]

WORK: a bio work folder with a finished ppdb2 stage (its relation rows are rebuilt here with the
stage's own functions: pivot.pipeline.ppdb2.phrase_side, the synset split, the WordNet labels, the
well-formedness masks the stage wrote). Three feature groups in the spirit of Pavlick et al.
(ACL 2015), each added to the build's features and fitted over the build's (lambda, beta) grid
(pivot.pipeline.ppdb2.relation_validation_f1):

* **patterns**: Hearst patterns and coordination in the bitext's English (:class:`PatternCounts`);
* **inclusion**: distributional inclusion over the words' PPMI context rows of
  pivot.pipeline.vectors (the same counts; a phrase's row is the mean of its words'):
  WeedsPrec(u -> v) = sum_{f: v_f > 0} u_f / sum_f u_f, ClarkeDE(u -> v) = sum_f min(u_f, v_f) /
  sum_f u_f, both directions, their differences, and log(1 + contexts of u) - log(1 + contexts of v)
  (:func:`inclusion_features`);
* **translation**: per pivot language L, General's p(f|e) over L's foreign phrases f:
  the share of e1's mass on foreign phrases e2 also translates to, the same for e2, the Jaccard of
  the two translation sets, log(1 + translations) of each (:func:`translation_features`).

Selection on validation only: each variant's best grid point on the build's validation part
(RELATION_VALIDATION of its 15,000 training pairs); the same fits also scored on the larger
validation part of every training-side pair (the same hash rule: it contains the build's, and
no pair of the build's fitting rows), for a figure with less noise. The held-out test macro-F1
of each variant's selected fit is reported once, after the choice. A group is worth integrating
at +1 validation point (issue 22's brief for this round).

With ``--model mlp``, no feature group: the build's softmax against a one-hidden-layer network
(:class:`MLPModel`, section "a nonlinear classifier") on the same rows, each on the build's
features and on the string features only, each over its own grid (the network's: MLP_HIDDEN x
MLP_LAMBDAS x the build's RELATION_BALANCE, 12 settings), selected the same way; with the fits'
CPU seconds and the apply cost of both (:func:`apply_cost`). Then each selected setting (no
new choice) on every training-side pair instead of the build's max_relation_pairs: fitted on
those outside the larger validation part and scored on it, refitted on all, the test read once.

Nothing is written but the JSON.
"""
import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import write_json  # noqa: E402

# ------------------------------------------------------------------------------------ patterns
#
# Hearst (COLING 1992): "X such as Y", "Y and other X" say that Y is a kind of X; coordination
# ("X and Y", "X or Y", "X , Y") joins things of one kind, co-hyponyms more than anything else
# (Widdows and Dorow, COLING 2002). Pavlick et al.'s (ACL 2015) relation classifier has such
# "path" features over a parsed corpus; here they are surface patterns over the text every stored
# phrase comes from (the encode stage's English shards, pivot.pipeline.vectors.EnglishShards),
# read shard by shard.
#
# An occurrence of a pattern  PRE X MID Y  (PRE, MID fixed token sequences, PRE possibly empty)
# in one sentence, with X and Y stored phrases of up to L tokens (every split of the text around
# MID into a phrase ending just before it and one starting just after it counts once), adds 1 to
# the count of the ordered pair (X, Y) in the pattern's class:
#
#     HYPONYM_FIRST   X is a kind of Y:  X and other Y, X or other Y, X is a Y, X is an Y
#     HYPERNYM_FIRST  Y is a kind of X:  X such as Y, X , such as Y, X including Y, X , including Y,
#                                        X , especially Y, X especially Y, such X as Y
#     COORDINATION    X and Y, X or Y, X , Y, either X or Y, neither X nor Y, X but not Y, not X but Y
#
# The counts are kept as a sparse table (:class:`PatternCounts`: the sorted keys X * 2^32 + Y of the
# pairs with a hit and one count column per class), looked up per pair; a pair's features
# (:func:`pattern_features`) are
#
#     pat_hyponym   log(1 + n(e1 is a kind of e2))      n = HYPONYM_FIRST(e1, e2) + HYPERNYM_FIRST(e2, e1)
#     pat_hypernym  log(1 + n(e2 is a kind of e1))      the same with e1 and e2 exchanged
#     pat_coord     log(1 + COORDINATION(e1, e2) + COORDINATION(e2, e1))
#
# Counts are integers summed shard by shard: the same table however the text is cut (tested).

HYPONYM_FIRST, HYPERNYM_FIRST, COORDINATION = range(3)
#: (class, PRE, MID): the patterns of the module docstring, as token texts.
PATTERNS = (
    (HYPONYM_FIRST, (), ("and", "other")),
    (HYPONYM_FIRST, (), ("or", "other")),
    (HYPONYM_FIRST, (), ("is", "a")),
    (HYPONYM_FIRST, (), ("is", "an")),
    (HYPERNYM_FIRST, (), ("such", "as")),
    (HYPERNYM_FIRST, (), (",", "such", "as")),
    (HYPERNYM_FIRST, (), ("including",)),
    (HYPERNYM_FIRST, (), (",", "including")),
    (HYPERNYM_FIRST, (), (",", "especially")),
    (HYPERNYM_FIRST, (), ("especially",)),
    (HYPERNYM_FIRST, ("such",), ("as",)),
    (COORDINATION, (), ("and",)),
    (COORDINATION, (), ("or",)),
    (COORDINATION, (), (",",)),
    (COORDINATION, ("either",), ("or",)),
    (COORDINATION, ("neither",), ("nor",)),
    (COORDINATION, (), ("but", "not")),
    (COORDINATION, ("not",), ("but",)),
)
N_CLASSES = 3
PATTERN_FEATURES = ("pat_hyponym", "pat_hypernym", "pat_coord")


class PhraseIndex:
    """Token sequences -> stored phrase ids, as a trie on sorted integer keys: the node of a
    prefix of length k + 1 is found by looking up (node of its first k tokens) * 2^32 + token
    among the sorted keys of level k + 1; a node's phrase is the id whose tokens end there."""

    def __init__(self, rows: np.ndarray, ids: np.ndarray | None = None):
        """rows: (n, L) token ids, -1 padded (a phrase's tokens first); ids: their phrase ids
        (default 0..n-1)."""
        rows = np.asarray(rows, np.int64)
        ids = np.arange(len(rows), dtype=np.int64) if ids is None else np.asarray(ids, np.int64)
        self.width = rows.shape[1] if rows.ndim == 2 else 0
        self.keys, self.phrase = [], []
        node = np.zeros(len(rows), np.int64)
        length = (rows >= 0).sum(axis=1) if len(rows) else np.zeros(0, np.int64)
        for k in range(self.width):
            alive = length > k
            key = node[alive] << 32 | rows[alive, k]
            keys, inverse = np.unique(key, return_inverse=True)
            node = np.full(len(rows), -1, np.int64)
            node[alive] = inverse.reshape(-1)
            phrase = np.full(len(keys), -1, np.int64)
            ends = alive & (length == k + 1)
            phrase[node[ends]] = ids[ends]
            self.keys.append(keys)
            self.phrase.append(phrase)

    def ngrams(self, ids: np.ndarray, sentence: np.ndarray) -> np.ndarray:
        """(n, L): entry [p, k] the phrase id of tokens p .. p + k of one text (token ids and
        each token's sentence), -1 when those tokens are no stored phrase or cross a sentence."""
        ids, sentence = np.asarray(ids, np.int64), np.asarray(sentence)
        n = len(ids)
        out = np.full((n, self.width), -1, np.int64)
        node = np.zeros(n, np.int64)
        alive = np.ones(n, bool)
        for k in range(self.width):
            at = np.arange(n) + k
            alive &= at < n
            ok = np.flatnonzero(alive)
            ok = ok[sentence[at[ok]] == sentence[ok]]
            alive[:] = False
            keys = self.keys[k]
            if not len(ok) or not len(keys):
                break
            query = node[ok] << 32 | ids[at[ok]]
            found = np.minimum(np.searchsorted(keys, query), len(keys) - 1)
            hit = keys[found] == query
            ok, found = ok[hit], found[hit]
            node[ok] = found
            alive[ok] = True
            out[ok, k] = self.phrase[k][found]
        return out


def _matches(ids: np.ndarray, sentence: np.ndarray, seq) -> np.ndarray:
    """Positions p where tokens p .. p + len(seq) - 1 are ``seq`` (token ids) in one sentence."""
    n, m = len(ids), len(seq)
    if n < m:
        return np.zeros(0, np.int64)
    ok = np.ones(n - m + 1, bool)
    for j, t in enumerate(seq):
        ok &= ids[j:n - m + 1 + j] == t
        ok &= sentence[j:n - m + 1 + j] == sentence[:n - m + 1]
    return np.flatnonzero(ok)


class PatternCounts:
    """The sparse (X, Y) -> counts per class table of the module docstring."""

    def __init__(self, keys: np.ndarray, counts: np.ndarray):
        self.keys = np.asarray(keys, np.int64)            # sorted, distinct: X * 2^32 + Y
        self.counts = np.asarray(counts, np.int64)        # (len(keys), N_CLASSES)

    @classmethod
    def count(cls, pieces, index: PhraseIndex, token_of: dict) -> "PatternCounts":
        """The table over ``pieces`` (a re-iterable of (ids, sentence) of whole sentences,
        pivot.pipeline.vectors.EnglishShards); ``token_of``: token text -> id (a pattern with a
        word the text does not have never matches)."""
        patterns = [(c, [token_of.get(t, -1) for t in pre], [token_of.get(t, -1) for t in mid])
                    for c, pre, mid in PATTERNS]
        patterns = [(c, pre, mid) for c, pre, mid in patterns if min(pre + mid) >= 0]
        keys, counts = [np.zeros(0, np.int64)], [np.zeros((0, N_CLASSES), np.int64)]
        for ids, sentence in pieces:
            ids, sentence = np.asarray(ids, np.int64), np.asarray(sentence)
            grams = index.ngrams(ids, sentence)
            n = len(ids)
            found = [], []
            for c, pre, mid in patterns:
                at = _matches(ids, sentence, mid)
                after = at + len(mid)
                for kx in range(1, index.width + 1):
                    start = at - kx
                    ok = start >= 0
                    s = np.where(ok, start, 0)
                    ok &= sentence[s] == sentence[np.minimum(at, n - 1)]
                    if pre:
                        p0 = s - len(pre)
                        ok &= p0 >= 0
                        p0 = np.where(ok, p0, 0)
                        for j, t in enumerate(pre):
                            ok &= (ids[p0 + j] == t) & (sentence[p0 + j] == sentence[s])
                    x = np.where(ok, grams[s, kx - 1], -1)
                    for ky in range(1, index.width + 1):
                        okay = ok & (x >= 0) & (after < n)
                        a = np.where(okay, after, 0)
                        okay &= sentence[a] == sentence[np.minimum(at, n - 1)]
                        y = np.where(okay, grams[a, ky - 1], -1)
                        hit = (x >= 0) & (y >= 0)
                        found[0].append(x[hit] << 32 | y[hit])
                        found[1].append(np.full(int(hit.sum()), c, np.int64))
            if found[0]:
                key = np.concatenate(found[0])
                cls_ = np.concatenate(found[1])
                k, inv = np.unique(key, return_inverse=True)
                cnt = np.zeros((len(k), N_CLASSES), np.int64)
                np.add.at(cnt, (inv.reshape(-1), cls_), 1)
                keys.append(k)
                counts.append(cnt)
        key = np.concatenate(keys)
        cnt = np.concatenate(counts)
        k, inv = np.unique(key, return_inverse=True)
        total = np.zeros((len(k), N_CLASSES), np.int64)
        np.add.at(total, inv.reshape(-1), cnt)
        return cls(k, total)

    def lookup(self, a, b) -> np.ndarray:
        """(n, N_CLASSES) counts of the ordered pairs (a_i, b_i) (0 without a hit)."""
        q = np.asarray(a, np.int64) << 32 | np.asarray(b, np.int64)
        out = np.zeros((len(q), N_CLASSES), np.int64)
        if not len(self.keys):
            return out
        found = np.minimum(np.searchsorted(self.keys, q), len(self.keys) - 1)
        hit = self.keys[found] == q
        out[hit] = self.counts[found[hit]]
        return out


def pattern_features(table: PatternCounts, e1, e2) -> list[np.ndarray]:
    """[pat_hyponym, pat_hypernym, pat_coord] of pairs (e1, e2) (module docstring)."""
    ab, ba = table.lookup(e1, e2), table.lookup(e2, e1)
    hypo = ab[:, HYPONYM_FIRST] + ba[:, HYPERNYM_FIRST]
    hyper = ba[:, HYPONYM_FIRST] + ab[:, HYPERNYM_FIRST]
    coord = ab[:, COORDINATION] + ba[:, COORDINATION]
    return [np.log1p(hypo.astype(np.float64)), np.log1p(hyper.astype(np.float64)),
            np.log1p(coord.astype(np.float64))]


# ------------------------------------------------------------------------------------ inclusion


def context_rows(pieces, n_tokens: int):
    """(PPMI matrix, word): the words' PPMI context rows exactly as pivot.pipeline.vectors.train
    builds them before its SVD (vocabulary: MIN_COUNT occurrences; window WINDOW; CDS), and the
    token id -> row map (-1: not in the vocabulary)."""
    from pivot.eval.distributional import ppmi
    from pivot.pipeline import vectors

    counts = np.zeros(n_tokens, np.int64)
    for ids, _ in pieces:
        if len(ids):
            counts += np.bincount(ids, minlength=n_tokens)[:n_tokens]
    vocab = np.flatnonzero(counts >= vectors.MIN_COUNT)
    word = np.full(n_tokens, -1, np.int64)
    word[vocab] = np.arange(len(vocab))
    cooc = None
    for ids, sentence in pieces:
        piece = vectors.cooccurrence(ids, sentence, word)
        cooc = piece if cooc is None else cooc + piece
    return ppmi(cooc, vectors.CDS).tocsr(), word


def phrase_rows(m, word, e_rows, e):
    """The phrases e's context rows: the mean of their vocabulary words' rows of m (sparse)."""
    from scipy import sparse

    rows = np.asarray(e_rows)[e]
    w = np.where(rows >= 0, word[np.where(rows >= 0, rows, 0)], -1)
    r, c = np.nonzero(w >= 0)
    n = np.maximum((w >= 0).sum(axis=1), 1)
    a = sparse.csr_matrix((1.0 / n[r], (r, w[r, c])), shape=(len(e), m.shape[0]))
    return (a @ m).tocsr()


def _ratio(a, b):
    return np.divide(a, b, out=np.zeros(len(a)), where=b > 0)


def inclusion_features(u, v) -> np.ndarray:
    """(n, 7) per pair of sparse rows u_i, v_i (non-negative weights): WeedsPrec(u -> v),
    WeedsPrec(v -> u), ClarkeDE(u -> v), ClarkeDE(v -> u), the two differences, and
    log(1 + nnz u) - log(1 + nnz v) (module docstring; 0 for an empty row)."""
    su, sv = np.asarray(u.sum(axis=1)).ravel(), np.asarray(v.sum(axis=1)).ravel()
    ub, vb = (u > 0).astype(np.float64), (v > 0).astype(np.float64)
    u_on_v = np.asarray(u.multiply(vb).sum(axis=1)).ravel()
    v_on_u = np.asarray(v.multiply(ub).sum(axis=1)).ravel()
    shared = np.asarray(u.minimum(v).sum(axis=1)).ravel()
    w12, w21, c12, c21 = _ratio(u_on_v, su), _ratio(v_on_u, sv), _ratio(shared, su), _ratio(shared, sv)
    nu, nv = np.asarray(ub.sum(axis=1)).ravel(), np.asarray(vb.sum(axis=1)).ravel()
    return np.column_stack([w12, w21, c12, c21, w12 - w21, c12 - c21, np.log1p(nu) - np.log1p(nv)])


INCLUSION_FEATURES = ("weeds_12", "weeds_21", "clarke_12", "clarke_21", "weeds_diff", "clarke_diff",
                      "log_contexts_diff")


# ------------------------------------------------------------------------------------ translation


def translation_features(p_fe, f_lang, e1, e2) -> np.ndarray:
    """(n, 5 x languages) per pair: for each language L (ascending), with U, V the rows of the
    sparse (phrases x foreign phrases) p(f|e) restricted to L's foreign phrases: the share of
    e1's mass on e2's translations sum_{f: V_f > 0} U_f / sum_f U_f, the same for e2, the Jaccard
    of the two translation sets, log(1 + |translations of e1|), log(1 + |of e2|)."""
    from scipy import sparse

    cols = []
    for lang in np.unique(f_lang).tolist():
        sub = p_fe @ sparse.diags((np.asarray(f_lang) == lang).astype(np.float64))
        u, v = sub[e1].tocsr(), sub[e2].tocsr()
        su, sv = np.asarray(u.sum(axis=1)).ravel(), np.asarray(v.sum(axis=1)).ravel()
        ub, vb = (u > 0).astype(np.float64), (v > 0).astype(np.float64)
        nu, nv = np.asarray(ub.sum(axis=1)).ravel(), np.asarray(vb.sum(axis=1)).ravel()
        both = np.asarray(ub.multiply(vb).sum(axis=1)).ravel()
        cols += [_ratio(np.asarray(u.multiply(vb).sum(axis=1)).ravel(), su),
                 _ratio(np.asarray(v.multiply(ub).sum(axis=1)).ravel(), sv),
                 _ratio(both, nu + nv - both), np.log1p(nu), np.log1p(nv)]
    return np.column_stack(cols)


# ------------------------------------------------------------------------------------ a nonlinear classifier
#
# One hidden layer between the standardised features z (p columns) and the classes (C):
#
#     a = z W1' + b1            (H hidden units)
#     h = tanh(a)
#     eta = h W2' + b2,         P(c | pair) = softmax(eta)_c
#
# fitted as the build's softmax is (pivot.pipeline.ppdb2.softmax_fit): the class-weighted mean
# cross-entropy, w_i = n_{y_i}^-beta normalised to sum 1, plus lam / 2 (|W1|^2 + |W2|^2) (the
# biases are not penalised), by L-BFGS. tanh, not ReLU: the objective is then smooth, which
# L-BFGS assumes. The gradient (R = (P - onehot(y)) * w, per row):
#
#     dW2 = R' h + lam W2,   db2 = sum_i R_i
#     dA  = (R W2) * (1 - h^2)
#     dW1 = dA' z + lam W1,  db1 = sum_i dA_i
#
# The start is random (a zero start has every hidden unit the same, and they stay so), drawn
# from np.random.default_rng(seed): W1 ~ N(0, 1/p), W2 ~ N(0, 1/H), zero biases. The products
# run in BLAS limited to one thread (threadpoolctl, as pivot.pipeline.vectors does): one
# summation order, and no threads spinning on a busy machine; the same inputs give the same
# weights.
#
# Applied to a stored pair, a's phrase-vector part is linear in each phrase's vector, so it can
# be computed once per phrase, as the linear model's terms are (RelationModel.phrase_terms):
# a = b1 + W1_pair z_pair + t1[e1] + t2[e2] with t1, t2 (phrases, H) (:meth:`MLPModel.hidden_terms`);
# per pair, the pair columns' product, two gathers of H numbers, H tanh and an (H x C) product.

MLP_HIDDEN = (32, 128)
MLP_LAMBDAS = (3e-3, 1e-2, 3e-2)
MLP_MAXITER = 300
MLP_SEED = 1


def mlp_unpack(flat: np.ndarray, p: int, hidden: int, n_classes: int):
    """(W1 (H, p), b1 (H,), W2 (C, H), b2 (C,)) from the flat parameter vector, in that order."""
    i = 0
    out = []
    for shape in ((hidden, p), (hidden,), (n_classes, hidden), (n_classes,)):
        k = int(np.prod(shape))
        out.append(flat[i:i + k].reshape(shape))
        i += k
    return tuple(out)


def mlp_forward(z: np.ndarray, W1, b1, W2, b2) -> tuple[np.ndarray, np.ndarray]:
    """(h, eta): the hidden units tanh(z W1' + b1) and the class scores h W2' + b2."""
    h = np.tanh(z @ W1.T + b1)
    return h, h @ W2.T + b2


def mlp_objective(flat, z, onehot, w, hidden: int, lam: float) -> tuple[float, np.ndarray]:
    """(loss, gradient) of the section's objective; w: the rows' weights (summing to 1)."""
    p = z.shape[1]
    n_classes = onehot.shape[1]
    W1, b1, W2, b2 = mlp_unpack(flat, p, hidden, n_classes)
    h, eta = mlp_forward(z, W1, b1, W2, b2)
    eta = eta - eta.max(axis=1, keepdims=True)
    logz = np.log(np.exp(eta).sum(axis=1))
    loss = float(w @ (logz - (eta * onehot).sum(axis=1))) + 0.5 * lam * float((W1 * W1).sum() + (W2 * W2).sum())
    r = (np.exp(eta - logz[:, None]) - onehot) * w[:, None]
    da = (r @ W2) * (1.0 - h * h)
    grad = np.concatenate([(da.T @ z + lam * W1).ravel(), da.sum(axis=0), (r.T @ h + lam * W2).ravel(),
                           r.sum(axis=0)])
    return loss, grad


def class_weights(y: np.ndarray, n_classes: int, balance: float) -> np.ndarray:
    """w_i = n_{y_i}^-balance / sum_j n_{y_j}^-balance (the build's softmax_fit weights)."""
    counts = np.bincount(y, minlength=n_classes).astype(np.float64)
    w = (np.where(counts > 0, counts, 1.0) ** -float(balance))[y]
    return w / w.sum()


def mlp_fit(z: np.ndarray, y: np.ndarray, n_classes: int, hidden: int, lam: float, balance: float,
            seed: int = MLP_SEED, maxiter: int = MLP_MAXITER) -> tuple:
    """(W1, b1, W2, b2) minimising the section's objective from the seeded start."""
    from scipy.optimize import minimize
    from threadpoolctl import threadpool_limits

    n, p = z.shape
    w = class_weights(y, n_classes, balance)
    onehot = np.zeros((n, n_classes))
    onehot[np.arange(n), y] = 1.0
    rng = np.random.default_rng(seed)
    start = np.concatenate([rng.normal(0.0, 1.0 / np.sqrt(p), hidden * p), np.zeros(hidden),
                            rng.normal(0.0, 1.0 / np.sqrt(hidden), n_classes * hidden), np.zeros(n_classes)])
    with threadpool_limits(limits=1, user_api="blas"):
        res = minimize(mlp_objective, start, args=(np.ascontiguousarray(z, np.float64), onehot, w, hidden, lam),
                       jac=True, method="L-BFGS-B", options={"maxiter": maxiter, "gtol": 1e-5, "ftol": 1e-9})
    return mlp_unpack(res.x, p, hidden, n_classes)


class MLPModel:
    """A fitted network with the stage's Standardiser in front (the relation models' interface:
    probabilities(names, x))."""

    def __init__(self, std, weights):
        self.std, self.weights = std, weights

    @classmethod
    def fit(cls, names, x, y, hidden, lam, balance, seed: int = MLP_SEED) -> "MLPModel":
        from pivot.pipeline import ppdb2 as P

        std = P.Standardiser.fit(names, x)
        return cls(std, mlp_fit(std.transform(names, x), y, len(P.RELATIONS), hidden, lam, balance, seed))

    def probabilities(self, names, x) -> np.ndarray:
        from threadpoolctl import threadpool_limits

        from pivot.pipeline.ppdb2 import softmax

        with threadpool_limits(limits=1, user_api="blas"):
            return softmax(mlp_forward(self.std.transform(names, x), *self.weights)[1])

    def hidden_terms(self, vec: np.ndarray) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
        """(pair columns, their W1 part (H, k), t1, t2): t1[e] = sum_i W1[:, vec_e1[i]] (vec[e, i] -
        mean) / sd over phrase e's vector, t2 likewise with vec_e2[i] (the section's per-phrase terms)."""
        from pivot.pipeline.ppdb2 import PHRASE_PREFIXES, is_phrase_feature

        W1 = self.weights[0]
        pair = [j for j, n in enumerate(self.std.names) if not is_phrase_feature(n)]
        t = []
        for prefix in PHRASE_PREFIXES:
            js = [j for j, n in enumerate(self.std.names) if n.startswith(prefix)]
            coord = [int(self.std.names[j][len(prefix):-1]) for j in js]
            zv = (np.asarray(vec, np.float64)[:, coord] - self.std.mean[js]) / self.std.sd[js]
            t.append(zv @ W1[:, js].T)
        return [self.std.names[j] for j in pair], W1[:, pair], t[0], t[1]


# ------------------------------------------------------------------------------------ the measurement


def relation_rows(work: Path, data_root: Path, extra=None):
    """The stage's relation rows of a finished work folder, rebuilt with its functions: every
    training-side pair ("all", its features, labels and validation flags), the build's cut of
    them ("build": max_relation_pairs by the stage's hash rule) and the test pairs. ``extra``:
    called as extra(out, ctx) before the phrase files are let go, ctx holding the stage's
    objects (table, ph, labels, lex, texts, slot, e1_all, e2_all, params, data_root): more rows for a
    benchmark, their features made by the same functions."""
    from pivot.hashes import unit_hash
    from pivot.pipeline import pivoting, translation
    from pivot.pipeline import ppdb2 as P
    from pivot.pipeline.bundle import save_bundle
    from pivot.pipeline.corpus import Vocab
    from pivot.pipeline.encode import phrase_texts, read_shards
    from pivot.pipeline.weights import read_models
    from pivot.pipeline.wordnet import WordNet, relation, wordnet_folder

    d = {}
    for p in Path(work).iterdir():
        if p.is_dir() and (p / "DONE").is_file():
            d[p.name.rsplit("-", 1)[0]] = p
    params = json.loads((d["ppdb2"] / "DONE").read_text())["params"]
    e_rows, e_count = translation.english_phrases(d["translation"])
    f_keys = np.load(d["translation"] / "structure" / "f_key.npy")
    f_lang_tok = np.load(d["encode"] / "f_lang.npy")

    def f_lang_of(ids):
        return f_lang_tok[translation.foreign_rows(translation.part_paths(d["translation"], "f"), f_keys[ids])[:, 0]]

    e_tokens = Vocab.load(d["encode"] / "vocab.en").tokens
    shards = [d["encode"] / s["file"] for s in read_shards(d["encode"])["shards"]]
    models = [m["name"] for m in read_models(d["weights"])]
    table = P.PairTable.read(pivoting.part_paths(d["pivot"]))
    used = table.used_phrases(len(e_rows))
    text_of = phrase_texts(e_rows, e_tokens, used)
    texts = [text_of[i] for i in used.tolist()]
    slot = np.full(len(e_rows), -1, np.int32)
    slot[used] = np.arange(len(used))
    # the stage's files per part hold each pair's form, as its label files did (P.LABEL_FIELDS)
    labels = sorted(d["ppdb2"].glob("x-*.arrays"))
    # the phrase side as the stage runs it (ppdb2._build_job): the word vectors (vectors_task) into
    # one file, the rest of the Phrases into another, read back as the stage's PhraseFile
    scratch = Path(tempfile.mkdtemp(prefix="pivot-relation-features-"))
    tokens, counts = np.asarray(e_rows[used], np.int32), np.asarray(e_count[used], np.float64)
    phrases_paths = (scratch / "phrases.arrays", scratch / "vectors.arrays")
    save_bundle(scratch / "tokens.arrays", tokens=tokens)
    P.vectors_task(list(map(str, shards)), len(e_tokens), scratch / "tokens.arrays", phrases_paths[1])
    lex = P.phrase_side(table, texts, slot, tokens, e_tokens, counts, f_lang_of, data_root, params, phrases_paths,
                        with_vectors=True)
    wn = WordNet.read(wordnet_folder(data_root, P.LEXICON))
    ph = P.PhraseFile(*phrases_paths)
    # every pair's slots at once (this benchmark's rows are bio's; the stage reads them part by part)
    e1_all, e2_all = (np.concatenate([z[f] for _, z in table.scan((f,))]) for f in ("e1", "e2"))
    s1, s2 = lex.slots(e1_all, e2_all)
    seed = params["seed"]
    cand = lex.has[s1] & lex.has[s2]
    test_rows = np.flatnonzero(cand & lex.held[s1] & lex.held[s2])
    train_rows = np.flatnonzero(cand & ~lex.held[s1] & ~lex.held[s2])
    out = {"names": P.feature_names(models, ph.dim), "e_rows": e_rows, "e_tokens": e_tokens, "shards": shards,
           "structure": d["translation"] / "structure", "f_lang_of": f_lang_of, "params": params,
           "table": table, "models": models}
    # each slot's key synset (its smallest, the split's unit; -1: no synsets): the segments of
    # the slots with synsets are contiguous in syn_ids, so a min over each one's start is the key
    key_of_slot = np.full(len(lex.has), -1, np.int64)
    if lex.has.any():
        key_of_slot[lex.has] = np.minimum.reduceat(lex.syn_ids, lex.syn_ptr[:-1][lex.has])
    for name, lim in (("build", params["max_relation_pairs"]), ("all", None)):
        rows = train_rows
        if lim is not None and len(rows) > lim:
            h = np.array([unit_hash(f"{texts[s1[r]]}\t{texts[s2[r]]}", seed) for r in rows.tolist()])
            rows = np.sort(rows[np.argsort(h, kind="stable")[:lim]])
        out[name] = rows
    out["test"] = test_rows
    every = np.unique(np.concatenate([out["all"], test_rows]))
    profiles = {i: wn.profile(lex.synsets(i)) for i in np.unique(np.concatenate([s1[every], s2[every]])).tolist()}
    for name in ("all", "test"):
        rows = out[name]
        out[f"y_{name}"] = np.array([relation(profiles[a], profiles[b]) for a, b in
                                     zip(s1[rows].tolist(), s2[rows].tolist())], np.int64)
        out[f"x_{name}"] = P._rows_features(table, ph, labels, rows)
        out[f"e1_{name}"], out[f"e2_{name}"] = e1_all[rows], e2_all[rows]
        out[f"key1_{name}"], out[f"key2_{name}"] = key_of_slot[s1[rows]], key_of_slot[s2[rows]]
    out["validation_all"] = np.array([unit_hash(f"{texts[s1[r]]}\t{texts[s2[r]]}", seed + 1) < P.RELATION_VALIDATION
                                      for r in out["all"].tolist()], dtype=bool)
    out["in_build"] = np.isin(out["all"], out["build"])
    out["n_pairs"] = int(len(e1_all))
    out["used"] = used
    if extra is not None:
        extra(out, {"table": table, "ph": ph, "labels": labels, "lex": lex, "texts": texts, "slot": slot,
                    "e1_all": e1_all, "e2_all": e2_all, "params": params, "s1": s1, "s2": s2,
                    "data_root": data_root})
    del ph
    shutil.rmtree(scratch)  # the features are computed: the phrase files are no longer read
    return out


def group_features(r) -> dict:
    """{group: (names, {"all": (n, k), "test": (n, k)}, CPU seconds)} of the three groups."""
    from scipy import sparse

    from pivot.pipeline import vectors

    groups = {}
    pieces = vectors.EnglishShards(r["shards"])
    t0 = time.process_time()
    counts = PatternCounts.count(pieces, PhraseIndex(r["e_rows"]), {t: i for i, t in enumerate(r["e_tokens"])})
    f = {s: np.column_stack(pattern_features(counts, r[f"e1_{s}"], r[f"e2_{s}"])) for s in ("all", "test")}
    groups["patterns"] = (list(PATTERN_FEATURES), f, time.process_time() - t0,
                          {"pairs_with_a_hit": int(len(counts.keys)),
                           "hits_by_class": dict(zip(("hyponym_first", "hypernym_first", "coordination"),
                                                     counts.counts.sum(axis=0).tolist()))})
    t0 = time.process_time()
    m, word = context_rows(pieces, len(r["e_tokens"]))
    f = {s: inclusion_features(phrase_rows(m, word, r["e_rows"], r[f"e1_{s}"]),
                               phrase_rows(m, word, r["e_rows"], r[f"e2_{s}"])) for s in ("all", "test")}
    groups["inclusion"] = (list(INCLUSION_FEATURES), f, time.process_time() - t0, {})
    t0 = time.process_time()
    st = r["structure"]
    row_ptr, row_f = np.load(st / "row_ptr.npy"), np.load(st / "row_f.npy")
    p = np.asarray(np.load(st / "p_fe.npy", mmap_mode="r")[:, 0], np.float64)
    n_f = len(np.load(st / "f_key.npy", mmap_mode="r"))
    p_fe = sparse.csr_matrix((p, row_f.astype(np.int64), row_ptr), shape=(len(row_ptr) - 1, n_f))
    f_lang = r["f_lang_of"](np.arange(n_f))
    f = {s: translation_features(p_fe, f_lang, r[f"e1_{s}"], r[f"e2_{s}"]) for s in ("all", "test")}
    langs = np.unique(f_lang).tolist()
    groups["translation"] = ([f"{k}[{lang}]" for lang in langs for k in ("trans_incl_12", "trans_incl_21",
                                                                          "trans_jaccard", "log1p_trans_e1",
                                                                          "log1p_trans_e2")],
                             f, time.process_time() - t0, {})
    return groups


def linear_grid() -> list[dict]:
    """The build's (lambda, beta) grid."""
    from pivot.pipeline import ppdb2 as P

    return [{"lambda": lam, "balance": beta} for lam in P.RELATION_LAMBDAS for beta in P.RELATION_BALANCE]


def mlp_grid() -> list[dict]:
    """hidden units x lambda x beta (12 settings)."""
    from pivot.pipeline import ppdb2 as P

    return [{"hidden": h, "lambda": lam, "balance": beta}
            for h in MLP_HIDDEN for lam in MLP_LAMBDAS for beta in P.RELATION_BALANCE]


def fit_linear(names, x, y, s):
    from pivot.pipeline import ppdb2 as P

    return P._softmax(names, x, y, s["lambda"], s["balance"])


def fit_mlp(names, x, y, s):
    return MLPModel.fit(names, x, y, s["hidden"], s["lambda"], s["balance"])


def evaluate(r, names, x_all, x_test, fit=fit_linear, grid=None) -> dict:
    """The grid (default: the build's) fitted on the build's fitting rows, each setting scored on
    the build's validation part and the larger one; the setting chosen on the build's (ties: the
    larger lambda, then the larger beta, then fewer hidden units); refitted on every build row;
    its test macro-F1, read once."""
    from pivot.pipeline import ppdb2 as P

    y, v, inb = r["y_all"], r["validation_all"], r["in_build"]
    fit_rows = inb & ~v
    rows = []
    for setting in grid or linear_grid():
        t0 = time.process_time()
        m = fit(names, x_all[fit_rows], y[fit_rows], setting)
        cpu = time.process_time() - t0
        pred = m.probabilities(names, x_all[v]).argmax(axis=1)
        val = P.classification_report(y[v & inb], pred[inb[v]])
        rows.append({**setting, "validation_macro_f1": val["macro_f1"],
                     "all_validation_macro_f1": P.classification_report(y[v], pred)["macro_f1"],
                     "fit_cpu_seconds": round(cpu, 1),
                     "validation_f1": {c: d["f1"] for c, d in val["per_class"].items()}})
    best = max(rows, key=lambda g: (round(g["validation_macro_f1"], 12), g["lambda"], g["balance"],
                                    -g.get("hidden", 0)))
    setting = {k: best[k] for k in grid[0]} if grid else {"lambda": best["lambda"], "balance": best["balance"]}
    t0 = time.process_time()
    refit = fit(names, x_all[inb], y[inb], setting)
    cpu = time.process_time() - t0
    test = P.classification_report(r["y_test"], refit.probabilities(names, x_test).argmax(axis=1))
    return {**setting, "validation_macro_f1": best["validation_macro_f1"],
            "all_validation_macro_f1": best["all_validation_macro_f1"],
            "validation_f1": best["validation_f1"],
            "grid": [{k: g for k, g in row.items() if k != "validation_f1"} for row in rows],
            "refit_rows": int(inb.sum()), "refit_cpu_seconds": round(cpu, 1),
            "test_macro_f1": test["macro_f1"],
            "test_f1": {c: d["f1"] for c, d in test["per_class"].items()}, "_model": refit}


def apply_cost(r, names, linear_model, mlp_model, n_rows: int = 500_000, seed: int = MLP_SEED) -> dict:
    """CPU seconds of applying each model to n_rows pairs as the stage's apply does: the pair
    columns standardised from a list of columns, the phrase-vector part from per-phrase terms
    gathered by the pairs' phrase ids (the linear model: RelationModel.pair_part + phrase_terms,
    (phrases, 6) tables; the network: MLPModel.hidden_terms, (phrases, H) tables), in blocks of
    the stage's APPLY_ROWS; and of computing the terms over every English phrase of the work
    folder. The pairs: rows of the relation rows drawn at random, their phrases ids drawn at
    random over every phrase (the gathers touch the tables as a full apply does)."""
    from threadpoolctl import threadpool_limits

    from pivot.pipeline import ppdb2 as P

    rng = np.random.default_rng(seed)
    x = np.vstack([r["x_all"], r["x_test"]])
    x = x[rng.integers(0, len(x), n_rows)]
    n_e = len(r["e_rows"])
    v1 = [j for j, n in enumerate(names) if n.startswith(P.PHRASE_PREFIXES[0])]
    vec = x[rng.integers(0, n_rows, n_e)][:, v1]           # a vector per phrase (real coordinates)
    e1, e2 = rng.integers(0, n_e, n_rows), rng.integers(0, n_e, n_rows)
    out = {"rows": n_rows, "phrases": n_e, "pairs_in_work_folder": r["n_pairs"]}
    pair_names = [n for n in names if not P.is_phrase_feature(n)]
    pcols = [x[:, names.index(n)] for n in pair_names]

    t0 = time.process_time()
    t1, t2 = linear_model.phrase_terms(vec)
    out["linear_terms_cpu_seconds"] = time.process_time() - t0
    part = linear_model.pair_part()
    t0 = time.process_time()
    for a in range(0, n_rows, P.APPLY_ROWS):
        b = min(a + P.APPLY_ROWS, n_rows)
        part.probabilities_columns(pair_names, [c[a:b] for c in pcols], (t1[e1[a:b]], t2[e2[a:b]]))
    out["linear_pairs_cpu_seconds"] = time.process_time() - t0

    with threadpool_limits(limits=1, user_api="blas"):
        t0 = time.process_time()
        kept, W1p, h1, h2 = mlp_model.hidden_terms(vec)
        out["mlp_terms_cpu_seconds"] = time.process_time() - t0
        _, b1, W2, b2 = mlp_model.weights
        std = mlp_model.std
        pair_std = [(n, std.mean[j], std.sd[j]) for j, n in enumerate(std.names) if n in kept]
        t0 = time.process_time()
        for a in range(0, n_rows, P.APPLY_ROWS):
            b = min(a + P.APPLY_ROWS, n_rows)
            z = np.column_stack([(pcols[pair_names.index(n)][a:b] - m) / sd for n, m, sd in pair_std])
            h = np.tanh(z @ W1p.T + b1 + h1[e1[a:b]] + h2[e2[a:b]])
            P.softmax(h @ W2.T + b2)
        out["mlp_pairs_cpu_seconds"] = time.process_time() - t0
        # the same network over every column of each pair (no per-phrase terms), for reference
        t0 = time.process_time()
        for a in range(0, n_rows, P.APPLY_ROWS):
            b = min(a + P.APPLY_ROWS, n_rows)
            mlp_model.probabilities(names, x[a:b])
        out["mlp_all_columns_cpu_seconds"] = time.process_time() - t0
    scale = r["n_pairs"] / n_rows
    for k in ("linear", "mlp"):
        out[f"{k}_projected_cpu_seconds"] = out[f"{k}_pairs_cpu_seconds"] * scale + out[f"{k}_terms_cpu_seconds"]
    out["mlp_minus_linear_projected_cpu_seconds"] = (out["mlp_projected_cpu_seconds"]
                                                     - out["linear_projected_cpu_seconds"])
    return {k: round(v, 2) if isinstance(v, float) else v for k, v in out.items()}


def relation_parser(description: str, cache: bool = False) -> argparse.ArgumentParser:
    """The arguments every relation benchmark takes: --work (a finished ppdb2 stage), --data,
    -o/--out, and with ``cache`` --cache (a pickle of the relation rows, written if absent)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--work", type=Path, required=True, help="a work folder with a finished ppdb2 stage")
    ap.add_argument("--data", type=Path, required=True, help="the data root (WordNet, the ratings)")
    ap.add_argument("-o", "--out", type=Path, default=None, help="results JSON")
    if cache:
        ap.add_argument("--cache", type=Path, default=None, help="pickle of the relation rows (written if absent)")
    return ap


def main(argv=None) -> int:
    from pivot.pipeline import ppdb2 as P

    ap = relation_parser(__doc__.split("\n")[0])
    ap.add_argument("--model", choices=("groups", "mlp"), default="groups",
                    help="groups: the three feature groups with the build's softmax (default); mlp: the "
                         "one-hidden-layer network against the build's softmax, on the build's features and "
                         "on the string features only")
    ap.add_argument("--apply-rows", type=int, default=500_000, help="--model mlp: pairs the apply cost is timed on")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    r = relation_rows(a.work, a.data)
    if a.model == "mlp":
        return main_mlp(a, r, t0)
    groups = group_features(r)
    names = r["names"]
    strings = [n for n in names if n in P.STRING_FEATURES]
    idx = [names.index(n) for n in strings]
    variants = {"build's features": ((), names, r["x_all"], r["x_test"]),
                "string only": ((), strings, r["x_all"][:, idx], r["x_test"][:, idx])}
    for g in groups:
        variants[f"+ {g}"] = ((g,), None, None, None)
    variants["+ all three"] = (tuple(groups), None, None, None)
    results = {}
    for label, (gs, n, x_all, x_test) in variants.items():
        if gs:
            n = names + sum((groups[g][0] for g in gs), [])
            x_all = np.hstack([r["x_all"]] + [groups[g][1]["all"] for g in gs])
            x_test = np.hstack([r["x_test"]] + [groups[g][1]["test"] for g in gs])
        results[label] = evaluate(r, n, x_all, x_test)
        del results[label]["_model"]
        print(f"{label:20s} validation {results[label]['validation_macro_f1']:.4f} "
              f"(larger part {results[label]['all_validation_macro_f1']:.4f}) test {results[label]['test_macro_f1']:.4f}",
              flush=True)
    v = r["validation_all"]
    # how many pairs a group says anything about: the share of the training-side pairs of each
    # class with a non-zero value, per feature (the pattern counts are sparse)
    for g, (gnames, f, _, extra) in groups.items():
        extra["nonzero_share_by_class"] = {
            P.RELATIONS[c]: dict(zip(gnames, np.round((f["all"][r["y_all"] == c] != 0).mean(axis=0), 4).tolist()))
            for c in range(len(P.RELATIONS))}
    out = {"what": __doc__.split("\n")[0], "work": str(a.work),
           "n": {"build_training_pairs": int(r["in_build"].sum()), "build_validation": int((v & r["in_build"]).sum()),
                 "all_training_pairs": int(len(v)), "all_validation": int(v.sum()), "test": int(len(r["y_test"]))},
           "groups": {g: {"features": f[0], "cpu_seconds": round(f[2], 1), **f[3]} for g, f in groups.items()},
           "variants": results, "seconds": round(time.perf_counter() - t0, 1)}
    if a.out:
        write_json(a.out, out)
    return 0


def main_mlp(a, r, t0) -> int:
    """--model mlp: linear and network, on the build's features and on the string features."""
    from pivot.pipeline import ppdb2 as P

    names = r["names"]
    strings = [n for n in names if n in P.STRING_FEATURES]
    idx = [names.index(n) for n in strings]
    sides = {"full": (names, r["x_all"], r["x_test"]),
             "string only": (strings, r["x_all"][:, idx], r["x_test"][:, idx])}
    results, models = {}, {}
    for side, (n, x_all, x_test) in sides.items():
        for kind, fit, grid in (("linear", fit_linear, None), ("mlp", fit_mlp, mlp_grid())):
            label = f"{kind}, {side}"
            res = evaluate(r, n, x_all, x_test, fit, grid)
            models[label] = res.pop("_model")
            results[label] = res
            print(f"{label:20s} validation {res['validation_macro_f1']:.4f} (larger part "
                  f"{res['all_validation_macro_f1']:.4f}) test {res['test_macro_f1']:.4f}  "
                  f"grid {sum(g['fit_cpu_seconds'] for g in res['grid']):.0f} CPU s, "
                  f"refit {res['refit_cpu_seconds']} CPU s",
                  flush=True)
    t = {k: v["test_macro_f1"] for k, v in results.items()}
    val = {k: v["validation_macro_f1"] for k, v in results.items()}
    compare = {f"{a_} minus {b_}": {"test": round(t[a_] - t[b_], 4), "validation": round(val[a_] - val[b_], 4)}
               for a_, b_ in (("linear, full", "linear, string only"), ("mlp, full", "linear, string only"),
                              ("mlp, full", "mlp, string only"), ("mlp, full", "linear, full"),
                              ("mlp, string only", "linear, string only"))}
    # every training-side pair, not the build's max_relation_pairs: each variant's selected
    # setting (no new choice) fitted on the pairs outside the larger validation part and scored
    # on it, then refitted on all of them and the test read once more
    y, v_all = r["y_all"], r["validation_all"]
    for label, res in results.items():
        n, x_all, x_test = sides[label.split(", ", 1)[1]]
        fit = fit_mlp if label.startswith("mlp") else fit_linear
        setting = {k: res[k] for k in ("hidden", "lambda", "balance") if k in res}
        t0_ = time.process_time()
        m = fit(n, x_all[~v_all], y[~v_all], setting)
        cpu = time.process_time() - t0_
        val = P.classification_report(y[v_all], m.probabilities(n, x_all[v_all]).argmax(axis=1))
        m = fit(n, x_all, y, setting)
        test = P.classification_report(r["y_test"], m.probabilities(n, x_test).argmax(axis=1))
        res["every_training_pair"] = {
            "fit_rows": int((~v_all).sum()), "fit_cpu_seconds": round(cpu, 1),
            "all_validation_macro_f1": val["macro_f1"], "refit_rows": len(y), "test_macro_f1": test["macro_f1"],
            "test_f1": {c: d["f1"] for c, d in test["per_class"].items()}}
        print(f"{label:20s} every training-side pair: larger validation {val['macro_f1']:.4f} test "
              f"{test['macro_f1']:.4f} ({cpu:.0f} CPU s on {int((~v_all).sum())} rows)", flush=True)
    cost = apply_cost(r, names, models["linear, full"], models["mlp, full"], a.apply_rows)
    print(json.dumps(compare), json.dumps(cost), sep="\n", flush=True)
    v = r["validation_all"]
    out = {"what": "The relation classifier as a one-hidden-layer network (bench_relation_features.py --model "
                   "mlp), against the build's softmax, on the build's features and the string features; not "
                   "integrated.", "work": str(a.work),
           "n": {"build_training_pairs": int(r["in_build"].sum()), "build_validation": int((v & r["in_build"]).sum()),
                 "all_training_pairs": len(v), "all_validation": int(v.sum()), "test": len(r["y_test"])},
           "mlp": {"hidden": list(MLP_HIDDEN), "lambdas": list(MLP_LAMBDAS), "balances": list(P.RELATION_BALANCE),
                   "maxiter": MLP_MAXITER, "seed": MLP_SEED, "activation": "tanh"},
           "variants": results, "differences": compare, "apply_cost": cost,
           "seconds": round(time.perf_counter() - t0, 1)}
    if a.out:
        write_json(a.out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
