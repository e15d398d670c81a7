"""Evaluation of generated paraphrases: BLEU and iBLEU (Sun & Zhou 2012) with sacrebleu.

    iBLEU = α · BLEU(output, reference) − (1 − α) · BLEU(output, source),   α = 0.9

BLEU is sacrebleu's corpus BLEU (13a tokenisation) on detokenised text, case-insensitive
(``lowercase=True``): the database is lower-case, so a replaced word loses its capital and a
cased BLEU would punish the casing, not the paraphrase. On MSRP the source is sentence 1 of a
positive pair and the reference its sentence 2.
"""
from __future__ import annotations

import itertools
import time

from pivot.sentences.paraphrase import Paraphraser, detokenize, naive_substitution
from pivot.sentences.rewrite import Weights

ALPHA = 0.9


def bleu(outputs, references) -> float:
    import sacrebleu

    return sacrebleu.corpus_bleu(list(outputs), [list(references)], lowercase=True).score


def ibleu(outputs, references, sources, alpha: float = ALPHA) -> dict:
    """{"bleu": BLEU(out, ref), "self_bleu": BLEU(out, src), "ibleu": α·bleu − (1−α)·self_bleu}."""
    b = bleu(outputs, references)
    s = bleu(outputs, sources)
    return {"bleu": b, "self_bleu": s, "ibleu": alpha * b - (1 - alpha) * s}


def changed_share(outputs, sources) -> float:
    """Share of outputs that differ from their source (case and spacing ignored)."""
    def key(t):
        return " ".join(t.lower().split())
    return sum(key(o) != key(s) for o, s in zip(outputs, sources)) / max(len(sources), 1)


def score_system(outputs, sources, references, seconds=None) -> dict:
    res = ibleu(outputs, references, sources)
    res["changed"] = changed_share(outputs, sources)
    res["n"] = len(outputs)
    if seconds is not None:
        res["seconds"] = seconds
        res["sentences_per_second"] = len(outputs) / seconds if seconds > 0 else None
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in res.items()}


def run_naive(paraphraser: Paraphraser, sources):
    """Every word with a DB paraphrase replaced by its top-1 paraphrase (no filter, no LM)."""
    from pivot.sentences.paraphrase import PhraseTable

    table = PhraseTable(paraphraser.db, paraphraser.model, k=1, drop_partial=False, content_only=False)
    out = []
    for s in sources:
        toks = paraphraser.normalize(s)
        out.append(detokenize(naive_substitution(toks, table), paraphraser.lang))
    return out


def run_decoder(paraphraser: Paraphraser, sources, progress=None):
    out = []
    it = sources if progress is None else progress(sources)
    for s in it:
        out.append(paraphraser.paraphrase(s)[0].text)
    return out


def timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def tune(paraphraser: Paraphraser, sources, references, grid: dict, progress=None) -> dict:
    """Grid search of the decoder's weights for iBLEU on (sources, references).

    `grid` maps Weights fields to value lists. The lattices are built once (the DB lookups are
    cached), only the search reruns. Returns {"best": {weights, scores}, "grid": [...]}.
    """
    toks = [paraphraser.normalize(s) for s in sources]
    lattices = [paraphraser.lattice(t) for t in toks]
    keys = list(grid)
    rows = []
    combos = list(itertools.product(*(grid[k] for k in keys)))
    it = combos if progress is None else progress(combos)
    saved = paraphraser.require_change
    for values in it:
        setting = dict(zip(keys, values))
        paraphraser.require_change = bool(setting.get("require_change", saved))
        w = Weights(**{k: v for k, v in setting.items() if k != "require_change"})
        outs = []
        for s, t, lat in zip(sources, toks, lattices):
            outs.append(paraphraser.decode_tokens(t, 1, weights=w, source_text=s, lattice=lat)[0].text
                        if t else "")
        res = score_system(outs, sources, references)
        rows.append({"weights": dict(zip(keys, values)), **res})
    paraphraser.require_change = saved
    best = max(rows, key=lambda r: r["ibleu"])
    return {"best": best, "grid": rows}
