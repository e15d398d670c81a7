"""Two evaluation protocols over a whole gold set, for pivot models and rivals alike.

The paper's protocol (pivot.eval.evaluate.evaluate_db) ranks only the gold pairs General
proposes, so a model's recall never counts and a model that proposes more pairs is not
rewarded. The two protocols here are the evidence the issue asks for:

* **full-set AP**: every gold pair is scored by every model; a pair a model never proposed
  (in neither direction) ranks last, tied with the model's other unproposed pairs. AP over
  the whole gold set therefore counts recall: a model proposing nothing scores the positive
  rate (all pairs tied), the chance level.
* **candidate AP**: the query terms are the phrases of the gold pairs; every pivot model's top-K
  paraphrases of every query term form, together, the candidates; a candidate (q, c) is kept
  when the gold labels the unordered pair, dropped (and counted) when the gold is silent.
  Every model (and rival) scores every candidate; one that does not propose it ranks it last.

A model scores an unordered pair as in pivot.eval.evaluate._symmetric_scores (a stored model
by the better of its two directions, a combination by its fit's own unordered score). A rival
(pivot.eval.rivals) scores every pair. AP is the step-wise area (pivot.eval.evaluate); every AP
has a seeded percentile-bootstrap 95% interval and a paired-bootstrap interval of its
difference to the baseline (the same resamples for every model, since the resamples depend only
on the number of items, n_boot and the seed).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pivot.eval import evaluate as ev
from pivot.eval.gold import pair_key

#: a missing score is replaced by this before ranking: below every probability (>= 0) and every
#: cosine (>= -1), so "not proposed" ranks last and the unproposed pairs tie, exactly the NaN
#: convention of pivot.eval.evaluate, but with AP defined even for a model proposing nothing.
MISSING = -1e9


@dataclass
class Gold:
    """Labelled unordered pairs, normalised like the database and deduplicated."""

    name: str
    pairs: list[tuple[str, str]]
    labels: np.ndarray
    source: np.ndarray                       # index into source_names of each pair
    source_names: list[str]
    info: dict = field(default_factory=dict)
    #: optional closed-world labels for the candidate protocol: normalised name -> every
    #: normalised name of every concept it names (an ontology lists all exact synonyms, so a
    #: proposal outside that set is not an exact synonym). None: only gold pairs are labelled.
    synonyms: dict[str, set[str]] | None = None

    @property
    def n_positive(self) -> int:
        return int(self.labels.sum())

    def label_of(self) -> dict[str, int]:
        return {pair_key(a, b): int(y) for (a, b), y in zip(self.pairs, self.labels.tolist())}


def make_gold(name, rows, *, lang="en", exclude=(), source_names=None, info=None) -> Gold:
    """Gold from rows (e1, e2, label[, source index]): normalised, deduplicated, tuning pairs out.

    The first occurrence of an unordered normalised pair wins; exclude holds pair keys
    (pivot.eval.gold.pair_key of normalised phrases) that must not be tested (a regression's
    tuning pairs). Counts of each are recorded in info.
    """
    from pivot.text import normalize_many

    texts = sorted({r[0] for r in rows} | {r[1] for r in rows})
    norm = dict(zip(texts, normalize_many(texts, lang)))
    exclude = set(exclude)
    pairs, labels, sources, seen = [], [], [], {}
    n_dup = n_conflict = n_excluded = n_same = 0
    for r in rows:
        a, b = norm[r[0]], norm[r[1]]
        if a == b:
            n_same += 1
            continue
        key = pair_key(a, b)
        if key in exclude:
            n_excluded += 1
            continue
        if key in seen:
            n_dup += 1
            n_conflict += seen[key] != int(r[2])
            continue
        seen[key] = int(r[2])
        pairs.append((a, b))
        labels.append(int(r[2]))
        sources.append(int(r[3]) if len(r) > 3 else 0)
    info = dict(info or {})
    info.update({"repeats dropped": n_dup, "of which label conflicts": n_conflict,
                 "tuning pairs dropped": n_excluded, "identical after normalisation": n_same})
    return Gold(name, pairs, np.asarray(labels, dtype=np.int64), np.asarray(sources, dtype=np.int64),
                list(source_names or [name]), info)


# ------------------------------------------------------------------------------ scoring


def model_scores(db, pairs, models, cache=None) -> dict[str, np.ndarray]:
    """Each model's unordered score of each (normalised) pair, NaN where not proposed."""
    cache = {} if cache is None else cache
    return {m: ev._symmetric_scores(db, pairs, m, cache) for m in models}


def phrase_ids(db, texts) -> dict[str, int]:
    """Database id of each normalised text the database holds (absent texts are left out)."""
    out = {}
    for t in texts:
        i = db.phrase_id(t, normalize=False)
        if i is not None:
            out[t] = i
    return out


# ------------------------------------------------------------------------------ AP of many models


@dataclass
class ModelAP:
    """One model (or rival) under one protocol on one gold set. Areas are fractions."""

    model: str
    ap: float
    ap_ci: tuple[float, float]
    delta: ev.Delta | None          # vs the baseline (None for the baseline)
    n_proposed: int                 # items the model scores (the rest rank last)
    coverage: float                 # n_proposed / n items
    coverage_ci: tuple[float, float]
    n_positive_proposed: int
    precision: np.ndarray
    recall: np.ndarray


@dataclass
class ProtocolResult:
    gold: str
    protocol: str                   # "full" or "candidate"
    baseline: str
    items: list[tuple[str, str]]
    labels: np.ndarray
    scores: dict[str, np.ndarray]   # NaN = not proposed
    models: dict[str, ModelAP]
    n_boot: int
    seed: int
    n_boot_dropped: int
    info: dict = field(default_factory=dict)
    _replicates: dict = field(default_factory=dict, repr=False)   # model -> bootstrap APs (memo)

    @property
    def n(self) -> int:
        return len(self.items)

    def replicates(self, model: str) -> np.ndarray:
        """The model's bootstrap AP replicates (the shared resamples), computed once."""
        if model not in self._replicates:
            self._replicates[model] = ev.bootstrap_replicates(self.labels, _filled(self.scores[model]),
                                                              self.n_boot, self.seed)
        return self._replicates[model]

    @property
    def n_positive(self) -> int:
        return int(self.labels.sum())

    def paired_delta(self, base: str, other: str) -> ev.Delta:
        """AP(other) − AP(base) with the paired bootstrap interval (same resamples)."""
        y = self.labels
        b, o = _filled(self.scores[base]), _filled(self.scores[other])
        return ev._delta(ev.average_precision(y, b), ev.average_precision(y, o),
                         self.replicates(base), self.replicates(other), 0.95)


def _filled(s: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(s), MISSING, s)


def rank_models(labels, scores: dict[str, np.ndarray], baseline: str, *, n_boot=1000, seed=0
                ) -> tuple[dict[str, ModelAP], int]:
    """AP, bootstrap interval and paired Δ vs the baseline of every model; (results, n dropped)."""
    y = np.asarray(labels, dtype=np.int64)
    reps_base = ev.bootstrap_replicates(y, _filled(scores[baseline]), n_boot, seed)
    ap_base = ev.average_precision(y, _filled(scores[baseline]))
    out = {}
    for m, s in scores.items():
        f = _filled(s)
        reps = reps_base if m == baseline else ev.bootstrap_replicates(y, f, n_boot, seed)
        ap = ev.average_precision(y, f)
        proposed = ~np.isnan(s)
        n_prop = int(proposed.sum())
        p, r, _ = ev.pr_curve(y, f)
        out[m] = ModelAP(
            model=m, ap=ap, ap_ci=ev._percentile_interval(reps, 0.95, f"AP of {m}"),
            delta=None if m == baseline else ev._delta(ap_base, ap, reps_base, reps, 0.95),
            n_proposed=n_prop, coverage=n_prop / len(y), coverage_ci=ev.wilson_interval(n_prop, len(y)),
            n_positive_proposed=int(y[proposed].sum()), precision=p, recall=r)
    return out, int(np.isnan(reps_base).sum())


# ------------------------------------------------------------------------------ the protocols


def full_set(db, gold: Gold, models, rivals=(), *, n_boot=1000, seed=0, cache=None) -> ProtocolResult:
    """Full-set AP: every gold pair scored by every model and rival (see the module docstring)."""
    models = list(models)
    scores = model_scores(db, gold.pairs, models, cache)
    for rival in rivals:
        scores[rival.name] = rival.score(gold.pairs)
    results, dropped = rank_models(gold.labels, scores, models[0], n_boot=n_boot, seed=seed)
    return ProtocolResult(gold.name, "full", models[0], list(gold.pairs), gold.labels, scores, results,
                          n_boot, seed, dropped)


def candidates(db, gold: Gold, models, k: int) -> tuple[list[tuple[str, str]], np.ndarray, dict]:
    """The candidate pairs: union over models of the top-k of every query term, gold-labelled.

    Returns (pairs, labels, info): pairs are (query, paraphrase) in a deterministic order
    (sorted by key); info counts the query terms, those in the database, the proposed pairs and
    those the gold does not label (dropped).
    """
    labelled = gold.label_of()
    queries = sorted({t for pair in gold.pairs for t in pair})
    present = phrase_ids(db, queries)
    found = {}
    for q in present:
        for m in models:
            for para in db.lookup(q, k=k, model=m, normalize=False):
                key = pair_key(q, para.paraphrase)
                found.setdefault(key, (q, para.paraphrase))
    keys = sorted(found)
    labels = {}
    n_closed = 0
    for key in keys:
        if key in labelled:
            labels[key] = labelled[key]
        elif gold.synonyms is not None:
            q, c = found[key]
            # closed world: c is an exact synonym of q iff the ontology lists it among q's names
            names = gold.synonyms.get(q)
            if names is not None:
                labels[key] = int(c in names)
                n_closed += 1
    kept = [key for key in keys if key in labels]
    info = {"query terms": len(queries), "query terms in the database": len(present), "top-K": k,
            "distinct proposed pairs": len(keys), "unlabelled by the gold (dropped)": len(keys) - len(kept)}
    if gold.synonyms is not None:
        info["labelled closed-world (not gold pairs)"] = n_closed
    return [found[key] for key in kept], np.asarray([labels[key] for key in kept], dtype=np.int64), info


def candidate_set(db, gold: Gold, models, rivals=(), *, k=20, n_boot=1000, seed=0, cache=None
                  ) -> ProtocolResult | None:
    """Candidate AP (see the module docstring); None when no candidate is positive."""
    models = list(models)
    items, labels, info = candidates(db, gold, models, k)
    info["labelled candidates"] = len(items)
    info["positive candidates"] = int(labels.sum()) if len(labels) else 0
    if len(items) == 0 or labels.sum() == 0:
        return ProtocolResult(gold.name, "candidate", models[0], items, labels, {}, {}, n_boot, seed, 0, info)
    scores = model_scores(db, items, models, cache)
    for rival in rivals:
        scores[rival.name] = rival.score(items)
    results, dropped = rank_models(labels, scores, models[0], n_boot=n_boot, seed=seed)
    return ProtocolResult(gold.name, "candidate", models[0], items, labels, scores, results, n_boot, seed,
                          dropped, info)


def coverage_by_source(gold: Gold, scores: dict[str, np.ndarray]) -> dict[str, dict[str, tuple[int, int]]]:
    """{source: {model: (pairs proposed, pairs)}} from full-set scores (NaN = not proposed)."""
    out = {}
    for j, src in enumerate(gold.source_names):
        mask = gold.source == j
        out[src] = {m: (int((~np.isnan(s[mask])).sum()), int(mask.sum())) for m, s in scores.items()}
    return out


def reachable(db, gold: Gold) -> np.ndarray:
    """True where both phrases of a gold pair are phrases of the database (a model could propose it)."""
    ids = phrase_ids(db, sorted({t for p in gold.pairs for t in p}))
    return np.array([a in ids and b in ids for a, b in gold.pairs], dtype=bool)


def phrases_in_text(paths, phrases, max_n: int = 5) -> set[str]:
    """The phrases (normalised, space-separated tokens) that occur as an n-gram (n <= max_n) of a
    line of the normalised text files (a build's corpus.*/bitext.en): the pairs a pivot model
    of that bitext could propose at best, whatever its pruning."""
    from pivot.text import numbered_lines

    wanted = {p for p in phrases if 1 <= len(p.split()) <= max_n}
    firsts = {p.split()[0] for p in wanted}
    found = set()
    for path in paths:
        for _, line in numbered_lines(path):
            toks = line.split()
            for i, t in enumerate(toks):
                if t not in firsts:
                    continue
                for n in range(1, min(max_n, len(toks) - i) + 1):
                    g = " ".join(toks[i:i + n])
                    if g in wanted:
                        found.add(g)
    return found


def subset(gold: Gold, keep: np.ndarray, name: str, note: str) -> Gold:
    """The pairs of gold where keep is True, as a gold of its own."""
    idx = np.flatnonzero(keep)
    return Gold(name, [gold.pairs[i] for i in idx], gold.labels[idx], gold.source[idx], gold.source_names,
                {**gold.info, "subset": note}, gold.synonyms)
