"""The stage graph of a build: what each stage reads, what it writes, where its code lives.

    corpus.<lang> ─┬─> align.<lang> ─> encode ─────────┬─> weights ─> extract    (a pair of stages
                   └─> lmtext ─> lm ─> score ──────────┘                           per pivot language)
    extract ─> translation ─> pivot ─┬─> combine ─┬─> (store: the SQLite database)
                                     ├─> ppdb2 ───┤
                                     └─> lhs ─────┘
    tagger (data files only) ───────────────^

(score also reads the corpus stages' English, weights and the later stages encode's output.)
The LM branch reads the corpus stages' English side (the text encode's ``english.txt``
concatenates), so it does not wait for the aligner: on a cluster a stage starts as soon as
every stage it needs is done (:func:`pivot.pipeline.run.run_stages`), and lmtext, lm and score
run beside the alignment, ppdb2 beside lhs and combine.

A stage's artifact folder is named by the hash of its declared inputs' content keys and its
parameters; the content key it hands on is the hash of the bytes it wrote
(:class:`pivot.pipeline.run.Workdir`). The work directory refuses a stage whose inputs are not
the ones declared here, so this table is the graph the build runs, not a picture of it.
``pivot build --graph`` prints it.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Stage:
    name: str
    needs: tuple[str, ...]  # upstream stages (their content keys enter this stage's key)
    params: tuple[str, ...]  # recipe settings (and data fingerprints) that enter the key
    writes: tuple[str, ...]  # the artifact's files
    code: str  # the function doing the work
    tasks: str  # how the work is cut: one task, or one per shard / partition / row range
    doc: str


STAGES: dict[str, Stage] = {s.name: s for s in (
    Stage("corpus", (), ("bitext sources", "preprocess", "data fingerprints"),
          ("bitext.en", "bitext.<lang>", "origin.npy", "meta.json"), "pivot.pipeline.corpus.write_bitext",
          "one per language (Dask)", "read, normalise (Moses tokenizer, lower case), filter, deduplicate"),
    Stage("align", ("corpus",), ("align",), ("links-NNNNN.npz", "links.json"), "pivot.pipeline.align.align_corpus",
          "one per language; ibm2: one per shard of pairs (Dask) to encode, co-occur, each E-step, Viterbi",
          "word alignment both ways + grow-diag-final-and"),
    Stage("encode", ("corpus", "align"), ("extract.shard_sentences", "extract.shard_tokens"),
          ("shards/NNNNN.npz", "shards.json", "english.txt", "vocab.*", "origin.npy"),
          "pivot.pipeline.encode.encode_shards", "one (streaming)", "token ids, cut into shards of sentence pairs"),
    Stage("lmtext", ("corpus",), ("domain.in_domain", "domain.general", "domain.seed", "domain.matched",
                                  "domain.vocab_min_count", "data fingerprints"),
          ("in_domain.txt", "general*.txt", "vocab.txt", "folds.npy", "stats.json"),
          "pivot.pipeline.lmtext.write_lm_texts", "one (Dask)", "in-domain and general LM texts of equal size over one vocabulary (cross-fitted folds)"),
    Stage("lm", ("lmtext",), ("domain.order", "domain.estimator"), ("*.arpa | *.binary", "stats.json"),
          "pivot.pipeline.lm.estimate_model", "one per model (Dask)", "modified Kneser-Ney n-gram LMs"),
    Stage("score", ("lm", "lmtext", "corpus"), (), ("scores.npz", "ranked.tsv", "oov.json"),
          "pivot.pipeline.score.score_stage", "one per LM and range of 1M sentences, then one join (Dask)",
          "Moore-Lewis sigma = H_tgt - H_gen per English sentence"),
    Stage("weights", ("encode", "score"), ("domain.taus",), ("weights.npy", "models.json", "report.json"),
          "pivot.pipeline.weights.model_columns", "one", "one weight column per model (1, top-tau, change point, ...)"),
    Stage("extract", ("encode", "weights"), ("extract.max_phrase_len",), ("x-NNNNN.arrays", "extract.json"),
          "pivot.pipeline.extract.extract_shard", "one per shard (Dask)",
          "phrase pairs counted under every model, split by English key range"),
    Stage("translation", ("extract",), ("pivot floors, cap, min_phrase_count (per model)",),
          ("e-PPPP.arrays", "f-PPPP.arrays", "structure/*.npy", "translation.json"),
          "pivot.pipeline.translation", "one per partition, four times (Dask)",
          "merge by e: p(f|e); merge by f: p(e|f); pruning; the pivot structure"),
    Stage("pivot", ("translation",), ("pivot.min_p_e2_given_e1",), ("rows-NNNN.arrays", "paraphrases.json"),
          "pivot.pipeline.pivoting.pivot_rows", "one per range of English rows (Dask)",
          "p(e2|e1) = sum_f p(e2|f) p(f|e1), every pair above the floor, per model"),
    Stage("ppdb2", ("pivot", "translation", "encode"), ("ppdb2", "data fingerprints"), ("x-NNNN.arrays", "ppdb2.json"),
          "pivot.pipeline.ppdb2.build",
          "labels: one per range of English rows; fits: the relations' as tasks beside the score's; "
          "apply: one per range of English rows (Dask)",
          "well-formedness labels, PPDB2.0Score (ratings), relation probabilities (WordNet; word vectors "
          "of encode's English shards), sizes"),
    Stage("tagger", (), ("tagger version", "data fingerprints"), ("tagger.json",), "pivot.pipeline.lhs.train_stage",
          "one", "the lexicon + suffix + rules tagger trained on GENIA-pos and Brown (no stage: only data files)"),
    Stage("lhs", ("pivot", "translation", "encode", "tagger"), ("ppdb2.lhs",),
          ("lhs.arrays", "lhs.json"), "pivot.pipeline.lhs.build", "one (per distinct token, then per tag sequence)",
          "each stored phrase's PPDB label (LHS) by the tagger stage's tagger"),
    Stage("combine", ("pivot", "encode"), ("combine", "data fingerprints"), ("combination.json",),
          "pivot.pipeline.combine.fit_combination_unordered", "one", "logistic regression of General + each domain model"),
)}


def check_inputs(stage_name: str, inputs) -> None:
    """A stage may only be given declared inputs (a General-only build has no score)."""
    stage = STAGES[stage_name.split(".")[0]]
    if not set(inputs) <= set(stage.needs):
        raise RuntimeError(f"stage {stage_name} was given inputs {sorted(inputs)}, "
                           f"declared {sorted(stage.needs)} (pivot/pipeline/graph.py)")


def order() -> list[str]:
    """The stages in an order where every stage follows what it needs."""
    done: list[str] = []

    def visit(name):
        if name not in done:
            for up in STAGES[name].needs:
                visit(up)
            done.append(name)

    for name in STAGES:
        visit(name)
    return done


def describe() -> str:
    """The graph as text, one stage a line: what it needs, how it runs, what it writes."""
    lines = []
    for name in order():
        s = STAGES[name]
        lines.append(f"{name:12} <- {', '.join(s.needs) or '(data)':22} [{s.tasks}]  {s.doc}")
        lines.append(f"{'':12}    writes {', '.join(s.writes)}; code {s.code}")
    lines.append(f"{'store':12} <- pivot, combine, ppdb2, lhs, translation, encode  [one, streaming]  the SQLite database")
    return "\n".join(lines)
