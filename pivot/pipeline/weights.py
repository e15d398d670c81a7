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

from pivot.pipeline.score import ranking
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
    columns = [general(n)]
    models = [{"name": "general", "kind": "general", "description": "every sentence pair, weight 1",
               "params": {}}]
    for t, name in zip(taus, _tau_names(taus)):
        w = top_tau(sigma, n_words, t["tau_words"])
        paper = t.get("paper_tau_words")
        how = (f"the paper's T={words_label(paper)} of 828M words scaled to {total} words"
               if paper else "a user-given tau")
        columns.append(w)
        models.append({"name": name, "kind": "top-tau",
                       "description": f"the top-ranked pairs (sigma ascending) holding at most "
                                      f"{t['tau_words']} English words ({how}), weight 1",
                       "params": {"tau_words": int(t["tau_words"]),
                                  "paper_tau_words": int(paper) if paper else None,
                                  "selected_sentences": int(w.sum()),
                                  "selected_words": int(n_words[w > 0].sum())}})
    w = change_point(sigma)
    columns.append(w)
    models.append({"name": "ml-change-point", "kind": "change-point",
                   "description": "every pair with sigma < 0, weight 1",
                   "params": {"selected_sentences": int(w.sum()),
                              "selected_words": int(n_words[w > 0].sum())}})
    columns.append(ml_weighted(scores.h_gen, scores.h_tgt))
    models.append({"name": "ml-weighted", "kind": "weighted",
                   "description": "every pair, weight H_gen/H_tgt (per-word cross-entropies)",
                   "params": {"formula": "H_gen/H_tgt"}})
    columns.append(ml_weighted_ppl(sigma))
    models.append({"name": "ml-weighted-ppl", "kind": "weighted-ppl",
                   "description": "every pair, weight 2^-sigma = PP_gen/PP_tgt (per-word perplexities)",
                   "params": {"formula": "2^(-sigma)"}})
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


def stage_params(recipe) -> dict:
    dom = recipe.get("domain")
    if not dom:
        return {}
    return {"taus": dom["taus"], "report_in_domain_sources": dom.get("report_in_domain_sources", [])}


def run_stage(context) -> None:
    """One weight column per model: General alone without [domain], else every Moore-Lewis model."""
    import json
    import logging

    from pivot.pipeline.encode import read_shards
    from pivot.pipeline.score import read_scores

    encode_dir, tmp = context.dir("encode"), context.tmp
    shards = read_shards(encode_dir)
    if not context.has("score"):
        columns = general(int(shards["n_sentences"]))[:, None]
        models = [{"name": "general", "kind": "general", "description": "every sentence pair, weight 1",
                   "params": {}}]
        report = None
    else:
        ml = read_scores(context.dir("score"))
        columns, models = model_columns(ml, extra_taus=context.params["taus"])
        # True for the sentences from a source the recipe names as in-domain (for the report only)
        names = set(context.params["report_in_domain_sources"])
        origin = None
        if names:
            is_in = np.array([name in names for _, name in shards["origins"]], dtype=bool)
            origin = is_in[np.load(encode_dir / "origin.npy")]
        report = weight_report(columns, models, ml, origin)
        logging.getLogger("pivot").info("Moore-Lewis: %s", json.dumps(report.get("summary", report), default=str)[:2000])
    np.save(tmp / "weights.npy", np.ascontiguousarray(columns, dtype=np.float64))
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
