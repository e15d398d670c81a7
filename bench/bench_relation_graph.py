"""Relation composition over the training graph (issue 22 item 3, session 12): measured, not integrated.

    python bench/bench_relation_graph.py --work WORK --data DIR [--cache ROWS.pkl] \
        [-o bench/results/relations-session12.json]

WORK: a bio work folder with a finished ppdb2 stage; its relation rows are rebuilt with the
stage's own functions (bench_relation_features.relation_rows, which reproduces the build's
0.387 validation / 0.385 test; --cache keeps them in a pickle so a rerun skips the ~150 s).

**Why the labelled graph cannot touch a test pair directly.** The split is by each phrase's key
synset: a test pair has both phrases held out, a training pair neither, so a test phrase is in
no training-side labelled pair. A path e1 -r1- x -r2- e2 whose hops are labelled pairs has no
instance for a test row (each hop has a held-out end); computed out of fold for the training
rows as the test sees them it is empty there too. (Counted on bio's rows: 0 of the test
phrases occur in a training-side pair, "test_phrases_in_training_pairs" in the results.) What
remains is paths whose end hops are the database's own paraphrase edges and whose middle hop is
labelled:

    e1 --p(x|e1)--> x --r(x, y)-- y <--p(y|e2)-- e2,      x, y training-side phrases.

With both paraphrase hops read as equivalence (the natural-logic join of = with r is r, and
of r with = is r; MacCartney and Manning 2009), the path says r(e1, e2) = r(x, y), with weight
p(x|e1) p(y|e2). Three feature groups per pair (e1, e2):

* **transfer** (:func:`transfer_mass`): T_c = sum_{x, y} p(x|e1) [r(x, y) = c] p(y|e2) over
  the labelled ordered pairs (x, y) (a labelled (a, b) of relation r also gives (b, a) the
  converse relation: Forward <-> Reverse, the others symmetric, unless (b, a) has its own
  label); features log(1 + 100 T_c), the shares T_c / sum T, and sum T > 0;
* **roles** (:func:`role_shares`): the relations of each side's paraphrases with everything
  else labelled: R_c(e) = sum_x p(x|e) s_c(x), s_c(x) the share of x's labelled pairs (x, .)
  of relation c, and the coverage sum_x p(x|e) [x labelled]; for e1 and e2 (the relation
  distribution of a phrase's labelled neighbours, one paraphrase hop away);
* **inclusion** (:func:`neighbour_inclusion`): label-free direction asymmetry of the
  paraphrase graph: I(e1 -> e2) = sum_{x in N(e2) + e2} p(x|e1) / sum_x p(x|e1) (how much of
  e1's paraphrase mass lands in e2's neighbourhood), I(e2 -> e1), and their difference.

**No leakage.** A row's features never read its own label or any label of a pair with a phrase
of its own key synsets' fold: every training-side phrase gets a fold by its key synset,
floor(K * hash(key, seed + 7)) (the split's unit); a training-side row whose phrases are in
folds a, b reads only labelled pairs with both phrases outside {a, b}, as a test row reads only
pairs with both phrases outside the held-out synsets. Test rows read every training-side label
(the 64,710 pairs, never a test label). The masses of a training row are scaled by
(labelled pairs) / (labelled pairs it may read), so that their level matches the test rows'.

Each group is added to the build's features (and, for the string-only classifier, to the
string features) and fitted over the build's (lambda, beta) grid, the setting chosen on the
build's validation part (its 3,024 pairs), the held-out test read once per variant; beside it a
validation grouped by key synset (:func:`grouped_validation`). Two more ideas, sections below:
the nearest labelled pairs in the build's word vectors (**knn**, **knn_offset**), and the
converse pair (augmented fit, symmetrised prediction).

Results on bio (bench/results/relations-session12.json; validation / test macro-F1): the build's
features 0.387 / 0.385, string-only 0.326 / 0.324; + transfer 0.395 / 0.381, + roles 0.392 /
0.380, + inclusion 0.394 / 0.386, + knn 0.395 / 0.388, all four 0.407 / 0.380; the converse
augmentation 0.408 / 0.389; string-only + all four 0.364 / 0.361. None near the +10 target
(0.424); the graph's signal is real (+3.6 test points over string-only) but the build's
features already hold it. Not integrated.
"""
import json
import pickle
import sys
import time
from pathlib import Path

import numpy as np
from scipy import sparse

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import write_json  # noqa: E402

#: The relation of (b, a) given that of (a, b), in RELATIONS order (Equivalence, Forward,
#: Reverse, Exclusion, OtherRelated, Independent): the entailments swap, the rest are symmetric.
CONVERSE = np.array([0, 2, 1, 3, 4, 5])
N_CLASSES = 6
FOLDS = 10
FOLD_SEED_OFFSET = 7
TRANSFER_SCALE = 100.0


def paraphrase_matrix(e1, e2, p, n: int) -> sparse.csr_matrix:
    """W (n, n): W[e, x] = p(x|e), the database's stored pairs (one value per pair)."""
    return sparse.csr_matrix((np.asarray(p, np.float64), (np.asarray(e1, np.int64), np.asarray(e2, np.int64))),
                             shape=(n, n))


def labelled_pairs(a, b, y) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The labelled ordered pairs (a, b, y) and their converses (b, a, CONVERSE[y]) where (b, a)
    has no label of its own; sorted by a * 2^32 + b."""
    a, b, y = (np.asarray(v, np.int64) for v in (a, b, y))
    key = a << 32 | b
    rkey = b << 32 | a
    add = ~np.isin(rkey, key)
    aa, bb, yy = np.concatenate([a, b[add]]), np.concatenate([b, a[add]]), np.concatenate([y, CONVERSE[y[add]]])
    _, first = np.unique(aa << 32 | bb, return_index=True)
    return aa[first], bb[first], yy[first]


def label_matrices(a, b, y, n: int, keep=None) -> list[sparse.csr_matrix]:
    """L_c (n, n), c in 0..5: 1 at the ordered labelled pairs (a, b) of relation c (the output of
    :func:`labelled_pairs`), those with keep[a] and keep[b] only when ``keep`` (per phrase) is given."""
    a, b, y = (np.asarray(v, np.int64) for v in (a, b, y))
    if keep is not None:
        ok = keep[a] & keep[b]
        a, b, y = a[ok], b[ok], y[ok]
    return [sparse.csr_matrix((np.ones(int((y == c).sum())), (a[y == c], b[y == c])), shape=(n, n))
            for c in range(N_CLASSES)]


def _rowdot(u: sparse.csr_matrix, v: sparse.csr_matrix) -> np.ndarray:
    return np.asarray(u.multiply(v).sum(axis=1)).ravel()


def transfer_mass(W, L, e1, e2) -> np.ndarray:
    """(n, 6): T_c = sum_{x, y} W[e1, x] L_c[x, y] W[e2, y] (module docstring, **transfer**)."""
    u, v = W[np.asarray(e1)], W[np.asarray(e2)]
    return np.column_stack([_rowdot(u @ Lc, v) for Lc in L])


def role_shares(W, L, e) -> np.ndarray:
    """(n, 7): R_c(e) = sum_x W[e, x] s_c(x), c = 0..5, s_c(x) = L_c's row sum at x over the sum
    of the six; then the coverage sum_x W[e, x] [x has a labelled pair] (module docstring, **roles**)."""
    counts = np.column_stack([np.asarray(Lc.sum(axis=1)).ravel() for Lc in L])
    total = counts.sum(axis=1)
    shares = np.divide(counts, total[:, None], out=np.zeros_like(counts), where=total[:, None] > 0)
    u = W[np.asarray(e)]
    return np.column_stack([u @ shares, u @ (total > 0).astype(np.float64)])


def neighbour_inclusion(W, e1, e2) -> np.ndarray:
    """(n, 3): I(e1 -> e2), I(e2 -> e1), their difference (module docstring, **inclusion**); 0
    for a phrase with no stored paraphrase."""
    n = W.shape[0]
    B = ((W > 0).astype(np.float64) + sparse.identity(n, format="csr")).tocsr()
    B.data[:] = 1.0
    e1, e2 = np.asarray(e1), np.asarray(e2)
    u, v = W[e1], W[e2]
    su, sv = np.asarray(u.sum(axis=1)).ravel(), np.asarray(v.sum(axis=1)).ravel()
    i12 = np.divide(_rowdot(u, B[e2]), su, out=np.zeros(len(e1)), where=su > 0)
    i21 = np.divide(_rowdot(v, B[e1]), sv, out=np.zeros(len(e1)), where=sv > 0)
    return np.column_stack([i12, i21, i12 - i21])


def phrase_folds(phrases, keys, k: int, seed: int) -> dict:
    """{phrase: fold}: floor(k * unit_hash(str(key synset), seed)) of each phrase."""
    from pivot.hashes import unit_hash

    out = {}
    for e, key in zip(np.asarray(phrases).tolist(), np.asarray(keys).tolist()):
        if e not in out:
            out[e] = min(int(k * unit_hash(str(key), seed)), k - 1)
    return out


TRANSFER_FEATURES = ([f"tr_log_mass[{c}]" for c in range(N_CLASSES)] + [f"tr_share[{c}]" for c in range(N_CLASSES)]
                     + ["tr_any"])
ROLE_FEATURES = [f"role_{s}[{c}]" for s in ("e1", "e2") for c in range(N_CLASSES + 1)]
INCLUSION_FEATURES = ["nb_incl_12", "nb_incl_21", "nb_incl_diff"]


def _transfer_columns(t: np.ndarray, scale) -> np.ndarray:
    t = t * np.asarray(scale, np.float64).reshape(-1, 1)
    s = t.sum(axis=1)
    shares = np.divide(t, s[:, None], out=np.zeros_like(t), where=s[:, None] > 0)
    return np.column_stack([np.log1p(TRANSFER_SCALE * t), shares, (s > 0).astype(np.float64)])


def graph_features(W, lab, e1, e2, fold1=None, fold2=None, n_folds: int = FOLDS) -> dict:
    """{group: (n, k)} of the module docstring's groups for rows (e1, e2). lab: (a, b, y, fold)
    of the training-side labelled pairs (with converses: :func:`labelled_pairs`) and a fold per
    phrase (array indexed by phrase id, -1 for phrases in no labelled pair). With fold1/fold2
    (the rows' phrases' folds: training-side rows) each row reads only the labelled pairs with
    both phrases outside its folds, its masses scaled by (all pairs) / (pairs it may read);
    without (test rows) every labelled pair."""
    a, b, y, fold = lab
    n = W.shape[0]
    e1, e2 = np.asarray(e1, np.int64), np.asarray(e2, np.int64)
    out = {"transfer": np.zeros((len(e1), len(TRANSFER_FEATURES))),
           "roles": np.zeros((len(e1), len(ROLE_FEATURES))),
           "inclusion": neighbour_inclusion(W, e1, e2)}
    if fold1 is None:
        groups = [(np.arange(len(e1)), np.ones(n, bool))]
    else:
        lo, hi = np.minimum(fold1, fold2), np.maximum(fold1, fold2)
        groups = []
        for f in np.unique(lo * n_folds + hi).tolist():
            rows = np.flatnonzero(lo * n_folds + hi == f)
            groups.append((rows, (fold >= 0) & (fold != f // n_folds) & (fold != f % n_folds)))
    n_all = len(a)
    for rows, keep in groups:
        L = label_matrices(a, b, y, n, keep)
        n_kept = sum(Lc.nnz for Lc in L)
        scale = n_all / n_kept if n_kept else 0.0
        out["transfer"][rows] = _transfer_columns(transfer_mass(W, L, e1[rows], e2[rows]), scale)
        out["roles"][rows] = np.hstack([role_shares(W, L, e1[rows]), role_shares(W, L, e2[rows])])
    return out


# ------------------------------------------------------------------------------------ nearest labelled pairs
#
# The same transfer with similarity in the build's own word vectors (pivot.pipeline.vectors, the
# vec_e1[i] / vec_e2[i] columns) in place of the paraphrase hops: a labelled pair (x, y) votes
# for r(x, y) on (e1, e2) when x is near e1 and y near e2. The pair similarity is
#
#     s((e1, e2), (x, y)) = (cos(e1, x) + cos(e2, y)) / 2,
#
# one product of the unit vectors [u1, u2] / sqrt(2) (a phrase without a vector: a zero row,
# similarity 0 on its side). Over the K most similar readable labelled pairs (the same
# readability rule as the transfer: out of fold for training rows, every training-side pair for
# test rows; converses included, with their converse relation) the features are the vote shares
# sum_{k: r_k = c} s_k / sum_k s_k, the largest similarity and the mean. A linear model on v1
# and v2 cannot express "e1 like x and e2 like y": this is the nonlinear pair-space vote, which
# the offsets of the word-vector round (v1 * v2, |v1 - v2|) approach only through fixed products.

KNN_K = 20
KNN_FEATURES = [f"knn_share[{c}]" for c in range(N_CLASSES)] + ["knn_max_sim", "knn_mean_sim"]
KNN_BLOCK = 256


def unit_rows(v: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(v, axis=1, keepdims=True)
    return np.divide(v, norm, out=np.zeros_like(v, dtype=np.float64), where=norm > 0)


def knn_votes(q: np.ndarray, keys: np.ndarray, y: np.ndarray, readable: np.ndarray, k: int = KNN_K) -> np.ndarray:
    """(n, 8) per query row q_i (pair representation): the class shares of the similarity mass of
    the k keys with the largest q_i . key_j among those with readable[i, j] (a (n, m) bool, or
    (m,) for every row alike), the largest similarity and the mean of the k (which of equal
    similarities at the k-th place enter is np.argpartition's choice). Negative similarities
    count 0 in the shares."""
    out = np.zeros((len(q), N_CLASSES + 2))
    for lo in range(0, len(q), KNN_BLOCK):
        hi = min(lo + KNN_BLOCK, len(q))
        sim = q[lo:hi] @ keys.T
        ok = readable[lo:hi] if readable.ndim == 2 else np.broadcast_to(readable, sim.shape)
        sim = np.where(ok, sim, -np.inf)
        kk = min(k, sim.shape[1])
        # the k largest (np.argpartition: which of equal similarities at the k-th place enter
        # is its choice, deterministic for the same input)
        top = np.argpartition(-sim, kk - 1, axis=1)[:, :kk] if kk < sim.shape[1] else np.broadcast_to(
            np.arange(kk), sim.shape)
        s = np.take_along_axis(sim, top, axis=1)
        valid = np.isfinite(s)
        w = np.where(valid, np.maximum(s, 0.0), 0.0)
        cls = y[top]
        tot = w.sum(axis=1)
        for c in range(N_CLASSES):
            out[lo:hi, c] = np.divide((w * (cls == c)).sum(axis=1), tot, out=np.zeros(hi - lo), where=tot > 0)
        n_valid = valid.sum(axis=1)
        out[lo:hi, N_CLASSES] = np.where(n_valid > 0, np.where(valid, s, -np.inf).max(axis=1), 0.0)
        out[lo:hi, N_CLASSES + 1] = np.divide(np.where(valid, s, 0.0).sum(axis=1), n_valid,
                                              out=np.zeros(hi - lo), where=n_valid > 0)
    return out


def offset_rows(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """unit(unit(v) - unit(u)) per row; zero where either has no vector."""
    uu, vv = unit_rows(u), unit_rows(v)
    both = (np.abs(uu).sum(axis=1) > 0) & (np.abs(vv).sum(axis=1) > 0)
    return unit_rows(np.where(both[:, None], vv - uu, 0.0))


def knn_features(vec, lab, e1, e2, fold1=None, fold2=None, k: int = KNN_K, offset: bool = False) -> np.ndarray:
    """(n, 8) :data:`KNN_FEATURES` of rows (e1, e2); vec: (phrases, d) vectors by phrase id (zero
    rows for none); lab as :func:`graph_features`'s, readable by the same rule. With ``offset``
    the pair similarity is instead the cosine of the offsets unit(v2) - unit(v1) and unit(y) -
    unit(x) (:func:`offset_rows`; the vector offset of a relation, as in word analogies)."""
    a, b, y, fold = lab
    if offset:
        key, q = offset_rows(vec[a], vec[b]), offset_rows(vec[np.asarray(e1)], vec[np.asarray(e2)])
    else:
        key = np.hstack([unit_rows(vec[a]), unit_rows(vec[b])]) / np.sqrt(2.0)
        q = np.hstack([unit_rows(vec[np.asarray(e1)]), unit_rows(vec[np.asarray(e2)])]) / np.sqrt(2.0)
    if fold1 is None:
        return knn_votes(q, key, y, np.ones(len(a), bool), k)
    out = np.zeros((len(q), N_CLASSES + 2))
    lo, hi = np.minimum(fold1, fold2), np.maximum(fold1, fold2)
    n_folds = int(max(fold.max(), lo.max(), hi.max())) + 1
    for f in np.unique(lo * n_folds + hi).tolist():
        rows = np.flatnonzero(lo * n_folds + hi == f)
        fa, fb = f // n_folds, f % n_folds
        readable = (fold[a] != fa) & (fold[a] != fb) & (fold[b] != fa) & (fold[b] != fb)
        out[rows] = knn_votes(q[rows], key, y, readable, k)
    return out


# ------------------------------------------------------------------------------------ the converse pair
#
# A pair read the other way round, (e2, e1), has the converse relation: Forward <-> Reverse, the
# others unchanged (CONVERSE). Its features are the row's own with the directions exchanged
# (:func:`converse_rows`): logp[m] <-> logp_rev[m], missing[m] <-> missing_rev[m],
# log1p_count_e1 <-> _e2, n_words_e1 <-> _e2, e1_contains_e2 <-> e2_contains_e1, vec_e1[i] <->
# vec_e2[i]; fwd_gt_rev becomes [logp_rev[General] > logp[General]]; the rest (logp_min, pivots,
# the Jaccards, the form flags, the cosine) are symmetric. Two uses, neither a new feature:
#
# * **augmented fit**: the fit sees every training row and its converse, labelled CONVERSE[y]:
#   twice the entailment rows for one direction-free pattern, and a model that treats (e1, e2)
#   and (e2, e1) alike;
# * **symmetrised prediction**: P'(c | e1, e2) = (P(c | e1, e2) + P(CONVERSE[c] | e2, e1)) / 2,
#   the model's two readings of one pair averaged.

def converse_rows(names: list[str], x: np.ndarray, general: str) -> np.ndarray:
    """The rows' converse features (section above); a column not named there is kept as is."""
    col = {n: j for j, n in enumerate(names)}
    out = np.array(x, dtype=np.float64, copy=True)
    pairs = [("log1p_count_e1", "log1p_count_e2"), ("n_words_e1", "n_words_e2"), ("e1_contains_e2", "e2_contains_e1")]
    for n in names:
        if n.startswith(("logp[", "missing[")):
            pairs.append((n, n.replace("[", "_rev[", 1)))
        elif n.startswith("vec_e1["):
            pairs.append((n, "vec_e2[" + n[len("vec_e1["):]))
        elif n.startswith(("tr_log_mass[", "tr_share[", "knn_share[", "knn_offset_share[")):
            c = int(n[n.index("[") + 1:-1])
            if c == 1:
                pairs.append((n, n.replace("[1]", "[2]")))
        elif n.startswith("role_e1["):
            pairs.append((n, n.replace("role_e1", "role_e2")))
    pairs.append(("nb_incl_12", "nb_incl_21"))
    for a, b in pairs:
        if a in col and b in col:
            out[:, col[a]], out[:, col[b]] = x[:, col[b]], x[:, col[a]]
    if "fwd_gt_rev" in col and f"logp[{general}]" in col:
        out[:, col["fwd_gt_rev"]] = (x[:, col[f"logp_rev[{general}]"]] > x[:, col[f"logp[{general}]"]]).astype(np.float64)
    if "nb_incl_diff" in col:
        out[:, col["nb_incl_diff"]] = -x[:, col["nb_incl_diff"]]
    return out


class ConverseModel:
    """A fitted model whose probabilities are the symmetrised prediction (section above)."""

    def __init__(self, model, general: str):
        self.model, self.general = model, general

    def probabilities(self, names, x) -> np.ndarray:
        p = self.model.probabilities(names, x)
        q = self.model.probabilities(names, converse_rows(names, x, self.general))
        return (p + q[:, CONVERSE]) / 2.0


def fit_converse(names, x, y, setting, augment: bool, symmetrise: bool, general: str):
    """The build's softmax at ``setting`` on the rows (and their converses when ``augment``),
    its prediction symmetrised when ``symmetrise``."""
    import bench_relation_features as rf

    if augment:
        x, y = np.vstack([x, converse_rows(names, x, general)]), np.concatenate([y, CONVERSE[y]])
    m = rf.fit_linear(names, x, y, setting)
    return ConverseModel(m, general) if symmetrise else m


# ------------------------------------------------------------------------------------ the measurement


def load_rows(work: Path, data: Path, cache: Path | None):
    """bench_relation_features.relation_rows, pickled at ``cache`` (read back when present)."""
    import bench_relation_features as rf

    if cache is not None and cache.is_file():
        with open(cache, "rb") as fh:
            return pickle.load(fh)
    r = rf.relation_rows(work, data)
    r.pop("f_lang_of")
    if cache is not None:
        with open(cache, "wb") as fh:
            pickle.dump(r, fh, protocol=pickle.HIGHEST_PROTOCOL)
    return r


def report(y, pred) -> dict:
    from pivot.pipeline import ppdb2 as P

    rep = P.classification_report(y, pred)
    return {"macro_f1": rep["macro_f1"],
            "per_class": {c: {k: d[k] for k in ("precision", "recall", "f1", "support")}
                          for c, d in rep["per_class"].items()}}


def evaluate(r, names, x_all, x_test, fit=None) -> dict:
    """bench_relation_features.evaluate's protocol (the build's grid fitted on the build's fitting
    rows, chosen on its validation part, refitted on every build row, the test read once), with
    per-class precision / recall / F1 of the chosen setting on validation and test."""
    import bench_relation_features as rf

    fit = fit or rf.fit_linear
    y, v, inb = r["y_all"], r["validation_all"], r["in_build"]
    fit_rows = inb & ~v
    grid = []
    for s in rf.linear_grid():
        m = fit(names, x_all[fit_rows], y[fit_rows], s)
        pred = m.probabilities(names, x_all[v & inb]).argmax(axis=1)
        grid.append((report(y[v & inb], pred), s))
    val, best = max(grid, key=lambda g: (round(g[0]["macro_f1"], 12), g[1]["lambda"], g[1]["balance"]))
    t0 = time.process_time()
    m = fit(names, x_all[inb], y[inb], best)
    cpu = time.process_time() - t0
    test = report(r["y_test"], m.probabilities(names, x_test).argmax(axis=1))
    return {**best, "validation": val, "test": test, "refit_cpu_seconds": round(cpu, 1),
            "grid_validation_macro_f1": [g[0]["macro_f1"] for g in grid]}


#: The grouped validation's folds: the build's rows with both phrases' key synsets in these
#: folds (3 of FOLDS, the split's relation_test_fraction 0.3) are scored, those with neither
#: are fitted (as the test is to the training side).
GROUPED_FOLDS = (0, 1, 2)


def grouped_validation(r, names, x_all, fit=None) -> dict:
    """The build's grid fitted on the build's rows with neither phrase in GROUPED_FOLDS, scored on
    those with both: a validation split by key synset, like the test's, beside the build's split
    by pair hash (which puts a pair and its converse on either side: a fit that reads the
    converse, or its features, then sees a validation row's mirror). The best setting's report."""
    import bench_relation_features as rf

    fit = fit or rf.fit_linear
    y, inb = r["y_all"], r["in_build"]
    g1, g2 = np.isin(r["fold1_all"], GROUPED_FOLDS), np.isin(r["fold2_all"], GROUPED_FOLDS)
    fit_rows, val_rows = inb & ~g1 & ~g2, inb & g1 & g2
    grid = []
    for s in rf.linear_grid():
        m = fit(names, x_all[fit_rows], y[fit_rows], s)
        grid.append((report(y[val_rows], m.probabilities(names, x_all[val_rows]).argmax(axis=1)), s))
    val, best = max(grid, key=lambda g: (round(g[0]["macro_f1"], 12), g[1]["lambda"], g[1]["balance"]))
    return {**best, "fit_rows": int(fit_rows.sum()), "validation_rows": int(val_rows.sum()), **val,
            "grid_macro_f1": [g[0]["macro_f1"] for g in grid]}


def main(argv=None) -> int:
    import bench_relation_features as rf

    from pivot.pipeline import ppdb2 as P

    ap = rf.relation_parser(__doc__.split("\n")[0], cache=True)
    ap.add_argument("--folds", type=int, default=FOLDS, help="out-of-fold folds of the training rows (%(default)s)")
    ap.add_argument("--resume", action="store_true",
                    help="keep the variants --out already holds (the same rows and features: deterministic) and "
                         "fit only the others")
    a = ap.parse_args(argv)
    t_wall = time.perf_counter()
    r = load_rows(a.work, a.data, a.cache)
    seed = r["params"]["seed"]
    n = len(r["e_rows"])

    t0 = time.process_time()
    e1g, e2g, pg = [], [], []
    for _, z in r["table"].scan(("e1", "e2", "p")):
        e1g.append(z["e1"])
        e2g.append(z["e2"])
        pg.append(np.asarray(z["p"][:, 0], np.float64))     # General's p(e2|e1): models[0]
    W = paraphrase_matrix(np.concatenate(e1g), np.concatenate(e2g), np.concatenate(pg), n)
    del e1g, e2g, pg
    cpu_graph = time.process_time() - t0

    # the split's claim: no test phrase is in a training-side pair
    train_ph = np.union1d(r["e1_all"], r["e2_all"])
    test_ph = np.union1d(r["e1_test"], r["e2_test"])
    overlap = int(len(np.intersect1d(train_ph, test_ph)))

    t0 = time.process_time()
    folds = phrase_folds(np.concatenate([r["e1_all"], r["e2_all"]]), np.concatenate([r["key1_all"], r["key2_all"]]),
                         a.folds, seed + FOLD_SEED_OFFSET)
    fold = np.full(n, -1, np.int64)
    fold[np.array(list(folds), np.int64)] = np.array(list(folds.values()), np.int64)
    la, lb, ly = labelled_pairs(r["e1_all"], r["e2_all"], r["y_all"])
    lab = (la, lb, ly, fold)
    r["fold1_all"], r["fold2_all"] = fold[r["e1_all"]], fold[r["e2_all"]]
    f_all = graph_features(W, lab, r["e1_all"], r["e2_all"], fold[r["e1_all"]], fold[r["e2_all"]], a.folds)
    f_test = graph_features(W, lab, r["e1_test"], r["e2_test"])
    cpu_features = time.process_time() - t0

    # the nearest labelled pairs in the build's word vectors: the phrases' vectors from the rows'
    # own vec_e1 / vec_e2 columns, on compact ids (every labelled and test phrase); computed for
    # the build's rows (the fits read no other training-side row) and the test rows
    t0 = time.process_time()
    names = r["names"]
    dim = sum(m.startswith("vec_e1[") for m in names)
    c1 = [names.index(f"vec_e1[{i}]") for i in range(dim)]
    c2 = [names.index(f"vec_e2[{i}]") for i in range(dim)]
    ids = np.unique(np.concatenate([r["e1_all"], r["e2_all"], r["e1_test"], r["e2_test"]]))
    vec = np.zeros((len(ids), dim))
    for s in ("all", "test"):
        vec[np.searchsorted(ids, r[f"e1_{s}"])] = r[f"x_{s}"][:, c1]
        vec[np.searchsorted(ids, r[f"e2_{s}"])] = r[f"x_{s}"][:, c2]
    lab_c = (np.searchsorted(ids, la), np.searchsorted(ids, lb), ly, fold[ids])
    inb = r["in_build"]
    f_all["knn"] = np.zeros((len(r["y_all"]), len(KNN_FEATURES)))
    e1b, e2b = np.searchsorted(ids, r["e1_all"][inb]), np.searchsorted(ids, r["e2_all"][inb])
    f_all["knn"][inb] = knn_features(vec, lab_c, e1b, e2b, fold[r["e1_all"][inb]], fold[r["e2_all"][inb]])
    f_test["knn"] = knn_features(vec, lab_c, np.searchsorted(ids, r["e1_test"]), np.searchsorted(ids, r["e2_test"]))
    cpu_knn = time.process_time() - t0
    t0 = time.process_time()
    f_all["knn_offset"] = np.zeros((len(r["y_all"]), len(KNN_FEATURES)))
    f_all["knn_offset"][inb] = knn_features(vec, lab_c, e1b, e2b, fold[r["e1_all"][inb]], fold[r["e2_all"][inb]],
                                            offset=True)
    f_test["knn_offset"] = knn_features(vec, lab_c, np.searchsorted(ids, r["e1_test"]),
                                        np.searchsorted(ids, r["e2_test"]), offset=True)
    cpu_knn_offset = time.process_time() - t0
    gnames = {"transfer": TRANSFER_FEATURES, "roles": ROLE_FEATURES, "inclusion": INCLUSION_FEATURES,
              "knn": KNN_FEATURES, "knn_offset": [n.replace("knn", "knn_offset") for n in KNN_FEATURES]}

    coverage = {}
    for g, k in (("transfer", "tr_any"), ("roles", "role_e1[6]")):
        j = gnames[g].index(k)
        coverage[g] = {s: {P.RELATIONS[c]: round(float((f[g][:, j][r[f"y_{s}"] == c] > 0).mean()), 4)
                           for c in range(N_CLASSES)}
                       for s, f in (("all", f_all), ("test", f_test))}
    # the transfer's own vote: argmax of T_c where any, on the training side (out of fold) and test
    vote = {}
    for s, f in (("all", f_all), ("test", f_test)):
        has = f["transfer"][:, -1] > 0
        pred = f["transfer"][has][:, N_CLASSES:2 * N_CLASSES].argmax(axis=1)
        vote[s] = {"rows": int(has.sum()), **report(r[f"y_{s}"][has], pred)}
    # the nearest pairs' own vote (the largest share) on the build's validation part and the test
    knn_vote = {}
    for s, f, rows in (("build_validation", f_all, inb & r["validation_all"]), ("test", f_test, None)):
        y_s = r["y_all"][rows] if rows is not None else r["y_test"]
        k_s = f["knn"][rows] if rows is not None else f["knn"]
        knn_vote[s] = report(y_s, k_s[:, :N_CLASSES].argmax(axis=1))

    strings = [m for m in names if m in P.STRING_FEATURES]
    idx = [names.index(m) for m in strings]
    bases = {"build's features": (names, r["x_all"], r["x_test"]),
             "string only": (strings, r["x_all"][:, idx], r["x_test"][:, idx])}
    combos = {"": (), " + transfer": ("transfer",), " + roles": ("roles",), " + inclusion": ("inclusion",),
              " + transfer + roles": ("transfer", "roles"), " + all three": ("transfer", "roles", "inclusion"),
              " + knn": ("knn",), " + all four": ("transfer", "roles", "inclusion", "knn"),
              " + knn_offset": ("knn_offset",), " + knn + knn_offset": ("knn", "knn_offset"),
              " + all five": ("transfer", "roles", "inclusion", "knn", "knn_offset")}
    results = {}
    if a.resume and a.out is not None and a.out.is_file():
        results = json.loads(a.out.read_text())["variants"]

    def save():
        # after every variant: a stopped run keeps what it measured (--resume goes on from it)
        if a.out is None:
            return
        out = {"what": __doc__.split("\n")[0], "work": str(a.work), "folds": a.folds,
               "command": " ".join(["python", "bench/bench_relation_graph.py",
                                    *(argv if argv is not None else sys.argv[1:])]),
               "n": {"build_training_pairs": int(r["in_build"].sum()),
                     "build_validation": int((r["validation_all"] & r["in_build"]).sum()),
                     "all_training_pairs": int(len(r["y_all"])), "test": int(len(r["y_test"])),
                     "labelled_ordered_pairs_with_converses": int(len(la)),
                     "test_phrases_in_training_pairs": overlap},
               "cpu_seconds": {"graph": round(cpu_graph, 1), "features": round(cpu_features, 1),
                               "knn": round(cpu_knn, 1), "knn_offset": round(cpu_knn_offset, 1)},
               "coverage_share_by_class": coverage, "transfer_vote": vote, "knn_vote": knn_vote,
               "variants": results, "seconds": round(time.perf_counter() - t_wall, 1)}
        write_json(a.out, out)
    for base, (bn, bx, bt) in bases.items():
        for suffix, gs in combos.items():
            label = base + suffix
            nm = bn + sum((gnames[g] for g in gs), [])
            xa = np.hstack([bx] + [f_all[g] for g in gs])
            xt = np.hstack([bt] + [f_test[g] for g in gs])
            if label not in results:
                results[label] = evaluate(r, nm, xa, xt)
            if "grouped_validation" not in results[label]:
                results[label]["grouped_validation"] = grouped_validation(r, nm, xa)
                save()
            res = results[label]
            print(f"{label:40s} validation {res['validation']['macro_f1']:.4f} grouped "
                  f"{res['grouped_validation']['macro_f1']:.4f} test {res['test']['macro_f1']:.4f}  "
                  f"(lambda {res['lambda']}, beta {res['balance']})", flush=True)
    # the converse pair: augmented fit, symmetrised prediction, both (each base and each base with
    # every graph group)
    general = r["models"][0]
    modes = {"augmented": (True, False), "symmetrised": (False, True), "augmented + symmetrised": (True, True)}
    every = ("transfer", "roles", "inclusion", "knn")
    for base, (bn, bx, bt) in bases.items():
        for gs in ((), every):
            nm = bn + sum((gnames[g] for g in gs), [])
            xa = np.hstack([bx] + [f_all[g] for g in gs])
            xt = np.hstack([bt] + [f_test[g] for g in gs])
            for mode, (aug, sym) in modes.items():
                label = base + (" + all four" if gs else "") + f", {mode}"

                def fit(names_, x_, y_, s_, aug=aug, sym=sym):
                    return fit_converse(names_, x_, y_, s_, aug, sym, general)

                if label not in results:
                    results[label] = evaluate(r, nm, xa, xt, fit)
                if "grouped_validation" not in results[label]:
                    results[label]["grouped_validation"] = grouped_validation(r, nm, xa, fit)
                    save()
                res = results[label]
                print(f"{label:50s} validation {res['validation']['macro_f1']:.4f} grouped "
                      f"{res['grouped_validation']['macro_f1']:.4f} test {res['test']['macro_f1']:.4f}  "
                      f"(lambda {res['lambda']}, beta {res['balance']})", flush=True)
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
