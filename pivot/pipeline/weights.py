"""Weights stage: one weight column per model, from the Moore-Lewis scores of the bitext.

Every model of the paper counts the same phrase pairs of the same bitext; they differ only in
how much sentence pair i counts (column k of the (n_sentences, K) weight matrix):

    general            w_i = 1
    ml-t<tau>          w_i = 1 for the top-ranked pairs holding tau English words, else 0
    ml-change-point    w_i = 1 if sigma_i < 0 else 0
    ml-weighted        w_i = H_gen(s_i) / H_tgt(s_i)          (the paper's text, verbatim)
    ml-weighted-ppl    w_i = 2^(-sigma_i) = PP_gen / PP_tgt   (per-word perplexity ratio)

The paper reports weights of 52 at the top and 0.0068 at the bottom for M-L Weighted. A ratio of
per-word cross-entropies rarely leaves [0.3, 3]; the ratio of per-word perplexities gives those
extremes for sigma between -5.7 and +7.2 bits. Both are built; the evaluation decides.

Model names: lowercase with hyphens. A top-tau model is named by its tau in English words of
THIS corpus with 3 significant digits and a k/m suffix (``ml-t8.72k``, ``ml-t1.5m``); when two
taus would print alike, their exact counts are used (``ml-t8721``). When tau is the paper's
value scaled to this corpus, the paper's tau is in ``params["paper_tau_words"]``, not the name:
a name must say what the model is here.
"""
from __future__ import annotations

import numpy as np

from pivot.pipeline.bundle import write_npy_header
from pivot.pipeline.score import BUCKET_STEP, RankBuckets, _same, ranking, sorted_sigma
from pivot.pipeline.stage import Stage

# The paper's top-tau subsamples, in English words of its 828M-word bitext.
PAPER_TOTAL_WORDS = 828_000_000
PAPER_TAUS = (1_500_000, 7_000_000, 35_000_000, 166_000_000)


def general(n):
    """The General model: every sentence pair counts 1."""
    return np.ones(n, dtype=np.float64)


def top_tau(sigma, n_words, tau):
    """1 for the top-ranked sentences holding at most ``tau`` English words, 0 for the rest.

    Boundary rule: sentences are taken in :func:`pivot.pipeline.score.ranking` order (sigma ascending,
    ties in corpus order) while the running word total stays <= tau; the first sentence that
    would push it above tau ends the subsample (no later, shorter sentence is taken instead,
    so the subsample is always a prefix of the ranking). Hence sum(n_words[w == 1]) <= tau,
    tau = 0 selects only leading zero-word sentences, and tau >= the corpus selects all.
    """
    sigma = np.asarray(sigma, dtype=np.float64)
    n_words = np.asarray(n_words, dtype=np.int64)
    if sigma.shape != n_words.shape:
        raise ValueError(f"sigma has shape {sigma.shape}, n_words {n_words.shape}")
    if tau < 0:
        raise ValueError(f"tau must be >= 0 words, got {tau}")
    order = ranking(sigma)
    running = np.cumsum(n_words[order])          # words in the top-(j+1) sentences
    weights = np.zeros(len(sigma), dtype=np.float64)
    weights[order[running <= tau]] = 1.0         # running is non-decreasing: a prefix
    return weights


def change_point(sigma):
    """1 where sigma < 0 (more like the target domain than general text); sigma = 0 is not."""
    return (np.asarray(sigma, dtype=np.float64) < 0).astype(np.float64)


def ml_weighted(h_gen, h_tgt):
    """M-L Weighted as the paper writes it: w_i = H_gen(s_i) / H_tgt(s_i)."""
    h_gen = np.asarray(h_gen, dtype=np.float64)
    h_tgt = np.asarray(h_tgt, dtype=np.float64)
    if np.any(h_tgt <= 0):
        raise ValueError("H_tgt must be > 0 for every sentence (a cross-entropy of 0 bits "
                         "means probability 1 for every word, which no smoothed LM gives)")
    return h_gen / h_tgt


def ml_weighted_ppl(sigma):
    """M-L Weighted by the per-word perplexity ratio: 2^(-sigma) = PP_gen / PP_tgt.

    By pivot.portable.exp2 (IEEE basic operations, within 0.8 ulp), not np.exp2, whose AVX-512
    loop (X86_V4 CPUs) and its other loops round 19,736 of the bio build's 373,778 weights (5%)
    differently in the last bit: the weights, and every table counted with them, must not
    depend on the machine.
    """
    from pivot import portable

    return portable.exp2(-np.asarray(sigma, dtype=np.float64))


def words_label(n):
    """Short count: 950 -> '950', 8721 -> '8.72k', 1500000 -> '1.5m' (3 significant digits)."""
    n = int(n)
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        value, suffix = n / 1e3, "k"
    else:
        value, suffix = n / 1e6, "m"
    if round(value, 2 - int(np.floor(np.log10(value)))) >= 1000 and suffix == "k":
        value, suffix = n / 1e6, "m"         # 999,999 reads 1m, not 1e+03k
    return f"{value:.3g}{suffix}"


def default_taus(total_words, extra_taus=()):
    """Top-tau settings: the paper's taus scaled to ``total_words``, then ``extra_taus``.

    The paper's tau / 828M fractions (1.5M, 7M, 35M, 166M words: 0.18%, 0.85%, 4.2%, 20%) times
    this corpus' English words, rounded to whole words; then the user's absolute taus (words).
    Returns a list of dicts ``{"tau_words": int, "paper_tau_words": int or None}``; a tau equal
    to an earlier one is dropped (the same model twice would only cost time).
    """
    taus = [{"tau_words": int(round(p * total_words / PAPER_TOTAL_WORDS)), "paper_tau_words": p}
            for p in PAPER_TAUS]
    taus += [{"tau_words": int(t), "paper_tau_words": None} for t in extra_taus]
    seen, out = set(), []
    for t in taus:
        if t["tau_words"] < 0:
            raise ValueError(f"tau must be >= 0 words, got {t['tau_words']}")
        if t["tau_words"] not in seen:
            seen.add(t["tau_words"])
            out.append(t)
    return out


def _tau_names(taus):
    """``ml-t<label>`` per tau; exact counts where two labels would collide."""
    labels = [words_label(t["tau_words"]) for t in taus]
    return [f"ml-t{t['tau_words'] if labels.count(lab) > 1 else lab}"
            for t, lab in zip(taus, labels)]


def model_specs(taus, total, selected):
    """The K models' JSON-able ``{name, kind, description, params}``, in the columns' order
    (general, ml-t<tau> for each tau, ml-change-point, ml-weighted, ml-weighted-ppl).

    ``total``: the corpus' English words; ``selected``: (sentences, words) each 0/1 model picks,
    the top-tau models' in ``taus``' order, then the change point's.
    """
    models = [{"name": "general", "kind": "general", "description": "every sentence pair, weight 1",
               "params": {}}]
    for t, name, (sentences, words) in zip(taus, _tau_names(taus), selected):
        paper = t.get("paper_tau_words")
        how = (f"the paper's T={words_label(paper)} of 828M words scaled to {total} words"
               if paper else "a user-given tau")
        models.append({"name": name, "kind": "top-tau",
                       "description": f"the top-ranked pairs (sigma ascending) holding at most "
                                      f"{t['tau_words']} English words ({how}), weight 1",
                       "params": {"tau_words": int(t["tau_words"]),
                                  "paper_tau_words": int(paper) if paper else None,
                                  "selected_sentences": sentences, "selected_words": words}})
    sentences, words = selected[len(taus)]
    models.append({"name": "ml-change-point", "kind": "change-point",
                   "description": "every pair with sigma < 0, weight 1",
                   "params": {"selected_sentences": sentences, "selected_words": words}})
    models.append({"name": "ml-weighted", "kind": "weighted",
                   "description": "every pair, weight H_gen/H_tgt (per-word cross-entropies)",
                   "params": {"formula": "H_gen/H_tgt"}})
    models.append({"name": "ml-weighted-ppl", "kind": "weighted-ppl",
                   "description": "every pair, weight 2^-sigma = PP_gen/PP_tgt (per-word perplexities)",
                   "params": {"formula": "2^(-sigma)"}})
    return models


def model_columns(scores, n_words=None, taus=None, extra_taus=()):
    """The weight matrix and model descriptions of every Moore-Lewis model.

    ``scores``: :class:`pivot.pipeline.score.MooreLewisScores` of the bitext's English side;
    ``n_words``: English words per sentence (default ``scores.n_words``); ``taus``: a list from
    :func:`default_taus` (default: the paper's scaled to this corpus, plus ``extra_taus``).

    Returns ``(weights, models)``: ``weights`` float64 of shape (n, K), columns in the order
    general, ml-t<tau> for each tau, ml-change-point, ml-weighted, ml-weighted-ppl; ``models``
    a list of K JSON-able dicts ``{name, kind, description, params}`` in the same order.
    """
    sigma = np.asarray(scores.sigma, dtype=np.float64)
    n_words = np.asarray(scores.n_words if n_words is None else n_words, dtype=np.int64)
    n = len(sigma)
    total = int(n_words.sum())
    if taus is None:
        taus = default_taus(total, extra_taus)
    columns = [general(n)] + [top_tau(sigma, n_words, t["tau_words"]) for t in taus] + [change_point(sigma)]
    selected = [(int(w.sum()), int(n_words[w > 0].sum())) for w in columns[1:]]
    columns += [ml_weighted(scores.h_gen, scores.h_tgt), ml_weighted_ppl(sigma)]
    models = model_specs(taus, total, selected)
    return np.column_stack(columns), models


def auc_mann_whitney(scores, positive):
    """P(score of a random positive > score of a random negative), ties counted 1/2.

    The Mann-Whitney U statistic over (n_pos * n_neg): U = sum of midranks of the positives
    - n_pos (n_pos + 1) / 2. NaN when either class is empty.
    """
    from scipy.stats import rankdata

    scores = np.asarray(scores, dtype=np.float64)
    positive = np.asarray(positive, dtype=bool)
    n_pos = int(positive.sum())
    n_neg = len(scores) - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata(scores)                     # midranks: ties share their mean rank
    u = ranks[positive].sum() - n_pos * (n_pos + 1) / 2
    return float(u / (n_pos * n_neg))


def weight_report(weights, models, scores, origin_is_in_domain=None, n_show=5):
    """What the weight columns select, as a JSON-able dict (for the build log and README).

    For the two weighted models: the ``n_show`` largest and smallest weights. With
    ``origin_is_in_domain`` (True for pairs whose source is in-domain, e.g. the WMT biomedical
    part of a mixed bitext): per 0/1 model, how many in-domain and other sentences it selects,
    and the AUC of -sigma for telling in-domain sentences from the rest (Mann-Whitney, ties 1/2;
    1.0 = every in-domain sentence ranks above every other one, 0.5 = chance).
    """
    report = {"n_sentences": int(weights.shape[0]), "models": {}}
    for k, model in enumerate(models):
        w = weights[:, k]
        entry = {"kind": model["kind"], "sum": float(w.sum())}
        if model["kind"] in ("weighted", "weighted-ppl"):
            ordered = np.sort(w)
            entry["top"] = [float(x) for x in ordered[::-1][:n_show]]
            entry["bottom"] = [float(x) for x in ordered[:n_show]]
        elif origin_is_in_domain is not None and model["kind"] in ("top-tau", "change-point"):
            inside = np.asarray(origin_is_in_domain, dtype=bool)
            chosen = w > 0
            entry["selected_in_domain"] = int((chosen & inside).sum())
            entry["selected_other"] = int((chosen & ~inside).sum())
        report["models"][model["name"]] = entry
    if origin_is_in_domain is not None:
        inside = np.asarray(origin_is_in_domain, dtype=bool)
        report["n_in_domain"] = int(inside.sum())
        report["auc_minus_sigma"] = auc_mann_whitney(-np.asarray(scores.sigma), inside)
    return report


# ------------------------------------------------------------------ the columns, a block at a time
#
# model_columns and weight_report hold every sentence's scores, each column and the sorts of
# sigma at once (about 160 bytes a sentence: 15 GiB at 100M sentence pairs). The stage computes
# the same files a block of sentences at a time: the top-tau columns need only where each
# subsample ends in the ranking (its cut), found from the sorted sigma (8 bytes a sentence, the
# one array of the corpus' size held) and a few passes over the blocks.

#: Sentences of a block of the streaming passes: 8 float64 columns of it are 4 MiB.
BLOCK = 1 << 16
def rank_cuts(blocks, buckets, tau_words):
    """Where each top-tau subsample ends: the first sentence of the ranking that
    :func:`top_tau` does not take, as (its bucket, its sigma, its index), or None when it takes
    every sentence. Then sentence i is taken iff bucket_i < bucket, or bucket_i = bucket and
    (sigma_i, i) < (sigma, index) (sigma_i = sigma compared as :func:`_same`).

    ``blocks()``: the sentences' (lo, {"sigma", "n_words"}) blocks in corpus order, each call a
    new pass. Pass 1 adds up the words of each bucket: the cut's bucket is the first whose
    running total W(j) exceeds tau. Pass 2 ranks that bucket: an open one (fewer than the step's
    sentences) is gathered and sorted stably by sigma; an equal one is already in ranking order
    (corpus order), so its running total is kept while it streams by. The cut is the bucket's
    first sentence whose running total, added to W(j - 1), exceeds tau: exactly where
    top_tau's cumsum over the whole ranking first exceeds tau (the words are >= 0, so the sums
    never decrease and the subsample is a prefix).
    """
    words = np.zeros(buckets.n_buckets, dtype=np.int64)
    for _, b in blocks():
        # float weights add whole numbers exactly below 2^53 words a block
        words += np.bincount(buckets.of(b["sigma"]), weights=b["n_words"],
                             minlength=buckets.n_buckets).astype(np.int64)
    running = np.cumsum(words)
    cuts, wanted = [None] * len(tau_words), {}
    for t, tau in enumerate(tau_words):
        j = int(np.searchsorted(running, tau, side="right"))   # first bucket with running > tau
        if j < buckets.n_buckets:
            wanted.setdefault(j, []).append((t, tau - (int(running[j - 1]) if j else 0)))
    gathered = {j: [] for j in wanted if j % 2 == 0}
    seen = {j: 0 for j in wanted if j % 2 == 1}                 # words of bucket j so far
    if wanted:
        for lo, b in blocks():
            bucket = buckets.of(b["sigma"])
            for j in wanted:
                at = np.flatnonzero(bucket == j)
                if len(at) == 0:
                    continue
                sigma, n_words = b["sigma"][at], b["n_words"][at].astype(np.int64)
                if j in gathered:
                    gathered[j].append((sigma, lo + at, n_words))
                    continue
                total = seen[j] + np.cumsum(n_words)
                for t, left in wanted[j]:
                    k = int(np.searchsorted(total, left, side="right"))
                    if cuts[t] is None and k < len(at):
                        cuts[t] = (j, float(sigma[k]), int(lo + at[k]))
                seen[j] = int(total[-1])
    for j, parts in gathered.items():
        sigma, index, n_words = (np.concatenate(x) for x in zip(*parts))
        order = np.argsort(sigma, kind="stable")                # index ascending: ties in corpus order
        total = np.cumsum(n_words[order])
        for t, left in wanted[j]:
            k = order[int(np.searchsorted(total, left, side="right"))]
            cuts[t] = (j, float(sigma[k]), int(index[k]))
    return cuts


def taken(bucket, sigma, index, cut):
    """1.0 for the sentences before ``cut`` (rank_cuts) in the ranking, else 0.0."""
    if cut is None:
        return np.ones(len(sigma), dtype=np.float64)
    j, s, i = cut
    before = (bucket < j) | ((bucket == j) & ((sigma < s) | (_same(sigma, s) & (index < i))))
    return before.astype(np.float64)


def _pairwise_leaves(n, leaf):
    """Sizes of the runs NumPy's pairwise sum of n float64 adds directly, in order, when the
    recursion stops at ``leaf`` (>= 128, its block): a run of m > leaf splits at
    m2 = m // 2 - (m // 2) % 8 into m2 and m - m2."""
    out = []

    def split(m):
        if m <= leaf:
            out.append(m)
            return
        m2 = m // 2
        m2 -= m2 % 8
        split(m2)
        split(m - m2)

    split(n)
    return out


class PairwiseSum:
    """``float(np.sum(x))`` of a float64 array x of n values given in pieces, the same bits.

    NumPy sums a float64 array (contiguous, or a column of a C-order matrix) in one pass of its
    pairwise kernel: a run of m > 128 values is the sum of its two halves (split as
    :func:`_pairwise_leaves` says), each summed the same way. Any node of that recursion is
    np.add.reduce of its run, so the total is the leaves' np.add.reduce combined in the
    recursion's order; the leaves are formed as the pieces arrive."""

    def __init__(self, n, leaf=BLOCK):
        self.n, self.leaf = n, leaf
        self._sizes = _pairwise_leaves(n, leaf)
        self._sums, self._pending = [], np.zeros(0)

    def add(self, x):
        pending = np.concatenate((self._pending, x))
        at = 0
        while len(self._sums) < len(self._sizes) and len(pending) - at >= self._sizes[len(self._sums)]:
            m = self._sizes[len(self._sums)]
            self._sums.append(np.add.reduce(pending[at:at + m]))
            at += m
        self._pending = pending[at:]

    def total(self) -> float:
        if len(self._pending) or len(self._sums) != len(self._sizes):
            self.add(np.zeros(0))
        sums = iter(self._sums)

        def node(m):
            if m <= self.leaf:
                return next(sums)
            m2 = m // 2
            m2 -= m2 % 8
            return node(m2) + node(m - m2)

        return float(node(self.n))


def write_model_columns(weights_path, blocks, n, taus=None, extra_taus=(), n_show=5, with_origin=False,
                        step=BUCKET_STEP):
    """:func:`model_columns` written to ``weights_path`` (np.save's bytes) and
    :func:`weight_report` of it, a block of sentences at a time: returns ``(models, report)``,
    the same values, bit for bit.

    ``blocks()``: (lo, {"sigma", "h_tgt", "h_gen", "n_words"} and, ``with_origin``, "inside",
    True for a sentence from an in-domain source) over the n sentences in corpus order, each
    call a new pass. Held: the sorted sigma (8 bytes a sentence) while the cuts are found and,
    with origin, until the AUC's ranks are read from it; else a block and a few numbers.

    The report's AUC: a sentence's midrank by -sigma (ascending, ties their mean) is
    r = n - le + (le - lt + 1) / 2, le and lt its sorted sigma's counts <= and < its sigma; so
    2 r = 2n + 1 - le - lt, added up exactly in integers over the positives.
    """
    sigma_sorted, total = sorted_sigma(blocks, n, words=True)
    buckets = RankBuckets(sigma_sorted, step)
    if not with_origin:
        del sigma_sorted
    if taus is None:
        taus = default_taus(total, extra_taus)
    cuts = rank_cuts(blocks, buckets, [t["tau_words"] for t in taus])
    kinds = ["general"] + ["top-tau"] * len(taus) + ["change-point", "weighted", "weighted-ppl"]
    K = len(kinds)
    sums = [PairwiseSum(n) for _ in range(K)]
    chosen = np.zeros(K, dtype=np.int64)           # sentences with weight > 0, per 0/1 column
    chosen_words = np.zeros(K, dtype=np.int64)
    chosen_in = np.zeros(K, dtype=np.int64)
    top, bottom = {}, {}
    n_in, ranks2 = 0, 0
    with open(weights_path, "wb") as fh:
        write_npy_header(fh, np.float64, (n, K))
        for lo, b in blocks():
            sigma, n_words = b["sigma"], b["n_words"]
            index = lo + np.arange(len(sigma), dtype=np.int64)
            bucket = buckets.of(sigma)
            columns = [general(len(sigma))]
            columns += [taken(bucket, sigma, index, cut) for cut in cuts]
            columns += [change_point(sigma), ml_weighted(b["h_gen"], b["h_tgt"]), ml_weighted_ppl(sigma)]
            fh.write(np.column_stack(columns).tobytes())
            for k, w in enumerate(columns):
                sums[k].add(w)
                if kinds[k] in ("weighted", "weighted-ppl"):
                    top[k] = np.sort(np.concatenate((top.get(k, w[:0]), w)))[-n_show:] if n_show else w[:0]
                    bottom[k] = np.sort(np.concatenate((bottom.get(k, w[:0]), w)))[:n_show]
                else:
                    picked = w > 0
                    chosen[k] += int(picked.sum())
                    chosen_words[k] += int(n_words[picked].sum())
                    if with_origin:
                        chosen_in[k] += int((picked & b["inside"]).sum())
            if with_origin:
                inside = b["inside"]
                n_in += int(inside.sum())
                # sorted first: NumPy's search then narrows each lookup from the last one (the
                # stage at 10M sentences: 22 s -> 10 s); the sum does not depend on the order
                s = np.sort(sigma[inside])
                le = np.searchsorted(sigma_sorted, s, side="right")
                lt = np.searchsorted(sigma_sorted, s, side="left")
                ranks2 += int((2 * n + 1 - le - lt).sum())
            del columns
    models = model_specs(taus, total, [(int(chosen[k]), int(chosen_words[k])) for k in range(1, len(taus) + 2)])
    report = {"n_sentences": int(n), "models": {}}
    for k, model in enumerate(models):
        entry = {"kind": model["kind"], "sum": sums[k].total()}
        if model["kind"] in ("weighted", "weighted-ppl"):
            entry["top"] = [float(x) for x in top.get(k, np.zeros(0))[::-1][:n_show]]
            entry["bottom"] = [float(x) for x in bottom.get(k, np.zeros(0))[:n_show]]
        elif with_origin and model["kind"] in ("top-tau", "change-point"):
            entry["selected_in_domain"] = int(chosen_in[k])
            entry["selected_other"] = int(chosen[k] - chosen_in[k])
        report["models"][model["name"]] = entry
    if with_origin:
        report["n_in_domain"] = n_in
        n_pos, n_neg = n_in, n - n_in
        if n_pos == 0 or n_neg == 0:
            auc = float("nan")
        elif n and np.isnan(sigma_sorted[-1]):
            auc = float("nan")     # rankdata propagates a NaN to every rank
        else:
            # as auc_mann_whitney: the float sum of the midranks (exact while below 2^52), less
            # n_pos (n_pos + 1) / 2, over n_pos n_neg
            u = np.float64(ranks2 / 2) - n_pos * (n_pos + 1) / 2
            auc = float(u / (n_pos * n_neg))
        report["auc_minus_sigma"] = auc
    return models, report


def stage_params(recipe) -> dict:
    dom = recipe.get("domain")
    if not dom:
        return {}
    return {"taus": dom["taus"], "report_in_domain_sources": dom.get("report_in_domain_sources", [])}


def run_stage(context) -> None:
    """One weight column per model: General alone without [domain], else every Moore-Lewis model.
    Written a block of sentences at a time (write_model_columns): the stage holds the sorted
    sigma, 8 bytes a sentence, not the weight matrix."""
    import json
    import logging

    from pivot.pipeline.bundle import read_npy_header
    from pivot.pipeline.encode import read_shards
    from pivot.pipeline.score import score_blocks

    encode_dir, tmp = context.dir("encode"), context.tmp
    shards = read_shards(encode_dir)
    n = int(shards["n_sentences"])
    if not context.has("score"):
        with open(tmp / "weights.npy", "wb") as fh:
            write_npy_header(fh, np.float64, (n, 1))
            for lo in range(0, n, BLOCK):
                fh.write(general(min(BLOCK, n - lo)).tobytes())
        models = [{"name": "general", "kind": "general", "description": "every sentence pair, weight 1",
                   "params": {}}]
        report = None
    else:
        score_dir = context.dir("score")
        # True for the sentences from a source the recipe names as in-domain (for the report only)
        names = set(context.params["report_in_domain_sources"])
        is_in = (np.array([name in names for _, name in shards["origins"]], dtype=bool) if names else None)

        def blocks():
            with open(encode_dir / "origin.npy", "rb") as origin:
                # the header, then each block's origins read in turn
                dtype = read_npy_header(origin)[2] if is_in is not None else None
                for lo, b in score_blocks(score_dir, ("sigma", "h_tgt", "h_gen", "n_words"), BLOCK):
                    if is_in is not None:
                        b["inside"] = is_in[np.fromfile(origin, dtype=dtype, count=len(b["sigma"]))]
                    yield lo, b

        models, report = write_model_columns(tmp / "weights.npy", blocks, n, extra_taus=context.params["taus"],
                                             with_origin=is_in is not None)
        logging.getLogger("pivot").info("Moore-Lewis: %s", json.dumps(report.get("summary", report), default=str)[:2000])
    (tmp / "models.json").write_text(json.dumps(models, indent=1))
    (tmp / "report.json").write_text(json.dumps(report, indent=1, default=str))


def read_models(weights_dir) -> list[dict]:
    """The stage's models (name, kind, description, params), General first."""
    import json
    from pathlib import Path

    return json.loads((Path(weights_dir) / "models.json").read_text())


STAGE = Stage("weights", 4, ("encode", "score"), ("domain.taus", "domain.report_in_domain_sources"), stage_params,
              ("weights.npy", "models.json", "report.json"), run_stage,
              "one", "one weight column per model (1, top-tau, change point, ...)")
