"""The store: the last stage, whose output is the database (--out), not a folder of the work dir.

It reads the pivot stage's row ranges with the ppdb2 stage's layer, the phrases' texts (encode's
vocabularies, translation's rows), the labels (lhs), the fits (combine) and every stage's record,
and writes the SQLite database (pivot.store.write: one file, or pivot.store.parts: a folder of
--parts N parts), under a temporary name renamed when complete, so no half database is ever
at --out. It is never cached: the database records this build's seconds.
"""
from __future__ import annotations

import json
import logging
import platform
import sys
import time
from pathlib import Path

import numpy as np

from pivot._version import __version__
from pivot.pipeline.stage import Stage, key_of

log = logging.getLogger("pivot")


def stage_params(recipe) -> dict:
    # The database records the whole recipe (meta "recipe"), so every setting is the store's.
    return {"recipe": {k: v for k, v in recipe.items() if not k.startswith("_")},
            "recipe_file": recipe["_path"], "recipe_sha256": recipe["_sha256"]}


def run_stage(context) -> None:
    from pivot.pipeline import corpus, pivoting
    from pivot.pipeline.encode import read_shards
    from pivot.pipeline.weights import read_models
    from pivot.store.write import write_database_chunks

    rec, record, out_path = context.params["recipe"], context.record, context.tmp
    log.info("store: writing %s", out_path)  # every other stage is done (bench/_measure.py reads this line)
    domain = rec.get("domain")
    langs = list(context.dir("corpus"))
    pivot_dir, ppdb2_dir = context.dir("pivot"), context.dir("ppdb2")
    encode_dir, translation_dir = context.dir("encode"), context.dir("translation")
    index = pivoting.Paraphrases.read_index(pivot_dir)
    n_pairs_out = int(sum(index["n_pairs"]))
    # The workers write the database's pair rows (pivot.store.write), or its parts.
    base_models = read_models(context.dir("weights"))
    models = [dict(m) for m in base_models]
    layer = json.loads((ppdb2_dir / "ppdb2.json").read_text())
    comb_meta = None
    if context.has("combine"):
        comb_meta = json.loads((context.dir("combine") / "combination.json").read_text())
        for model in base_models[1:]:
            name = f"general+{model['name']}"
            models.append({"name": name, "kind": "combined",
                           "description": f"logistic regression over p_general and p_{model['name']}",
                           "params": {"base": "general", "other": model["name"],
                                      "fit": comb_meta["models"][name]}})
    if layer["ppdb2"]["learned"]:
        # after General and the domain models, so that models[0] stays General (the baseline)
        models.append({"name": "ppdb2", "kind": "learned",
                       "description": "PPDB2.0Score: ridge regression on the PPDB 2.0 human ratings over every "
                                      "model's p(e2|e1) and p(e1|e2), pivots, counts, strings and "
                                      "well-formedness (meta ppdb2)",
                       "params": {"meta": "ppdb2", "target": layer["ppdb2"]["target"]}})
    # Text only for the phrases the database stores (most phrases pivot to nothing): the
    # write finds which in its first pass over the row ranges and asks for their texts and
    # counts a block of ids at a time, read from the translation stage's files. The sources go
    # by their paths, the vocabularies read where the texts are made (this process for one
    # file; the workers, a task per block, for a database in parts): nothing per token pickled.
    english = EnglishBlocks(translation_dir, encode_dir / "vocab.en")
    f_text = ForeignBlocks(translation_dir, encode_dir, langs)
    tstats = json.loads((translation_dir / "translation.json").read_text())
    shards = read_shards(encode_dir)
    shard_sentences, shard_tokens = int(rec["extract"]["shard_sentences"]), int(rec["extract"]["shard_tokens"])

    prune = rec["pivot"]
    # (a build without labels keeps the key it had before the lhs stage existed)
    final_key = key_of([context.key("pivot"), context.key("combine") if context.has("combine") else None,
                      context.key("ppdb2")] + ([context.key("lhs")] if context.has("lhs") else []))
    # Only a resample of the bitext says so: a full bitext's signature is as it always was.
    sample = corpus.sample_params(rec["preprocess"])
    resample = ([f"sample:{sample['sample_fraction']!r}/seed{sample['sample_seed']}"]
                if "sample_fraction" in sample else [])
    align_keys = context.key("align")
    signature = "|".join([
        f"pivot:{__version__}", f"recipe:{rec['name']}@{context.params['recipe_sha256'][:12]}",
        f"data:{key_of(record['fingerprints'])[:12]}", *resample,
        f"align:{rec['align']['method']}@" + "+".join(align_keys[lang][:8] for lang in langs),
        f"maxlen:{rec['extract']['max_phrase_len']}", f"shards:{shard_sentences}/{shard_tokens}t",
        "prune:{min_p_f_given_e}/{min_p_e_given_f}/{max_e_per_f}/n{min_phrase_count}/floor{min_p_e2_given_e1}"
        "/per-model".format(**prune),
        ("lm:" + (f"matched/v{domain.get('vocab_min_count', 2)}" if domain.get("matched", True)
                  else "unmatched")) if domain else "lm:none",
        f"models:{len(models)}", f"build:{final_key[:12]}",
    ])
    meta = {
        "signature": signature,
        "recipe": rec,
        "recipe_file": context.params["recipe_file"], "recipe_sha256": context.params["recipe_sha256"],
        "data_fingerprints": record["fingerprints"],
        "parameters": {k: rec[k] for k in ("preprocess", "align", "extract", "pivot")},
        # top_n: the recipe's lookup default (pivot lookup -k); the stored pairs are cut by
        # the floor only (index["meta"]["top_n"] == 0).
        "pruning": {**prune, **index["meta"], "lookup_top_n": prune["top_n"], "decided_on": "each model's own counts",
                    "n_pairs_out": n_pairs_out, "n_phrase_pairs": tstats["n_phrase_pairs"],
                    "n_english_phrases_kept": tstats["n_e"], "n_foreign_phrases_kept": tstats["n_f"]},
        "shards": {"shard_sentences": shard_sentences, "shard_tokens": shard_tokens, "n_shards": len(shards["shards"]),
                   "n_sentences": int(shards["n_sentences"]), "n_parts": tstats["n_parts"]},
        "normalization": {"lang": "en", "lowercase": True,
                          "tokenizer": "Moses (mosestokenizer C++ port), escape off"},
        "pivot_languages": langs,
        "versions": _versions(),
        "stage_seconds": record["seconds"],
        "corpus_stats": {lang: corpus.read_meta(d).get("stats", {}) for lang, d in context.dir("corpus").items()},
    }
    if domain:
        meta["moore_lewis"] = json.loads((context.dir("weights") / "report.json").read_text())
        oov_path = context.dir("score") / "oov.json"
        meta["lm"] = {"text": json.loads((context.dir("lmtext") / "stats.json").read_text()),
                      "models": json.loads((context.dir("lm") / "stats.json").read_text()),
                      "order": domain["order"],
                      "scoring": json.loads(oov_path.read_text()) if oov_path.is_file() else None}
    if comb_meta is not None:
        meta["combination"] = comb_meta
    meta.update(layer)  # forms, ppdb2 (score, its fit and sizes), relations
    # phrase.lhs: the lhs stage's labels (the lexicon tagger: pivot.store.labels' perceptron
    # would cost 65 s of training and 67 CPU s for bio's 448k phrases), or [X] for every phrase
    if context.has("lhs"):
        from pivot.pipeline.lhs import read_labels

        # a function of the ids: the write asks for a block of labels at a time
        phrase_lhs, meta["lhs"] = read_labels(context.dir("lhs"))
    else:
        phrase_lhs = None
        meta["lhs"] = {"labels": "[X] for every phrase", "tagger": None,
                       "why": '[ppdb2] lhs = "x" in the recipe'}
    meta["default_model"] = "ppdb2" if layer["ppdb2"]["learned"] else models[0]["name"]

    chunks = StoreChunks(pivot_dir, ppdb2_dir, len(index["parts"]))
    if record["parts"] == 1:
        write_database_chunks(
            out_path, phrases=english.texts, phrase_counts=english.counts, chunks=chunks, foreign=f_text,
            models=models, meta=meta, progress=not context.quiet and sys.stderr.isatty(), lhs=phrase_lhs,
            engine=context.engine, scratch=record["work"],
        )
    else:
        from pivot.store.parts import write_database_parts

        write_database_parts(out_path, record["parts"], phrases=english.texts, phrase_counts=english.counts,
                             chunks=chunks,
                             foreign=f_text, models=models, meta=meta, lhs=phrase_lhs,
                             engine=None if context.engine.in_process else context.engine)
    log.info("wrote %s (%d pairs, %d models) in %.1f s; signature %s", out_path, n_pairs_out,
             len(models), time.perf_counter() - record["started"], signature)


class EnglishBlocks:
    """The stored English phrases' texts and bitext counts, a block of ids at a time (the
    write's Survey.phrase_rows asks for the texts of a block, then its counts): each block's
    keys read from the translation stage's ``structure/e_key.npy`` and its rows and counts
    from its ``e-*.arrays`` partitions, through memory maps let go after the block.

    This process never holds a row per phrase of the translation table (its token rows and
    counts: 28 bytes a phrase, 0.1 GB for bio-multi's 3.5M, ~7 GB at 100M sentence pairs),
    only a block's: the same texts and counts as from every row at once. Nor a string per token
    of the vocabulary: the block's tokens are read from the vocabulary file (:class:`VocabFile`)."""

    def __init__(self, translation_dir, tokens):
        """``tokens``: the English token list, or the path of encode's ``vocab.en`` (read on first
        use: what a task of the write is handed, so that no token list is pickled per task)."""
        from pivot.pipeline import translation

        self.paths = translation.part_paths(translation_dir, "e")
        self.key_path = Path(translation_dir) / "structure" / "e_key.npy"
        self._tokens = tokens
        self._block = (None, None, None)  # (ids, rows, counts) of the block last read

    @property
    def vocab(self) -> VocabFile:
        return _vocab_file(self._tokens) if isinstance(self._tokens, (str, Path)) else VocabFile(self._tokens)

    def __getstate__(self):
        return {**self.__dict__, "_block": (None, None, None)}

    def _read(self, ids: np.ndarray):
        if self._block[0] is not ids:
            from pivot.pipeline import translation
            from pivot.pipeline.pivoting import npy_rows

            # ids ascending are ranks of the keys: their keys ascending, as phrase_rows needs
            rows, counts = translation.phrase_rows(self.paths, npy_rows(self.key_path, np.asarray(ids, np.int64)))
            self._block = (ids, rows, counts)
        return self._block[1], self._block[2]

    def texts(self, ids) -> dict[int, str]:
        from pivot.pipeline.encode import phrase_text_list

        rows, _ = self._read(ids)
        compact, tokens = _compact(rows)
        words = self.vocab.words(tokens)
        return dict(zip(np.asarray(ids).tolist(), phrase_text_list(compact, words, np.arange(len(rows)))))

    def counts(self, ids) -> np.ndarray:
        return self._read(ids)[1]


def _compact(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows with each token id replaced by its rank among the distinct ids of the rows, -1 kept;
    the distinct ids, ascending): a block's texts are then made from its own tokens' words, the
    same texts as from the whole vocabulary's list indexed by the ids."""
    rows = np.asarray(rows)
    present = rows >= 0
    tokens = np.sort(rows[present])
    keep = np.ones(len(tokens), bool)
    np.not_equal(tokens[1:], tokens[:-1], out=keep[1:])
    tokens = tokens[keep].astype(np.int64)
    compact = np.full(rows.shape, -1, np.int64)
    compact[present] = np.searchsorted(tokens, rows[present])
    return compact, tokens


class VocabFile:
    """An encode vocabulary's tokens by id (corpus.Vocab.save: line k holds id k, UTF-8, "\\n"
    ends), made into strings only where asked (:meth:`words`).

    Vocab.load holds a string, a list slot and a dict entry per token (~170 bytes: 0.28 GB for
    bio-multi's 1.65M foreign tokens, in every process that writes texts, and more at the
    target's 20 languages); this holds the file's bytes and the offset of each line's end
    (4 bytes a token), and a block of texts makes the strings of its own tokens only."""

    def __init__(self, source):
        """``source``: the vocabulary file's path, or the token list itself."""
        if isinstance(source, (str, Path)):
            self.data = Path(source).read_bytes()
            ends = np.flatnonzero(np.frombuffer(self.data, dtype=np.uint8) == 10)
            self.ends = ends.astype(np.int32 if len(self.data) < 2**31 else np.int64)
            self.tokens = None
        else:
            self.data, self.ends, self.tokens = None, None, list(source)

    def __len__(self) -> int:
        return len(self.tokens) if self.tokens is not None else len(self.ends)

    def words(self, ids) -> list[str]:
        """The tokens of ``ids``, in their order."""
        ids = np.asarray(ids, dtype=np.int64)
        if self.tokens is not None:
            return [self.tokens[i] for i in ids.tolist()]
        stops = self.ends[ids].astype(np.int64)
        starts = np.where(ids > 0, self.ends[np.maximum(ids - 1, 0)].astype(np.int64) + 1, 0)
        data = self.data
        return [data[a:b].decode("utf-8") for a, b in zip(starts.tolist(), stops.tolist())]


def _vocab_file(path: Path) -> VocabFile:
    """The VocabFile of an encode vocabulary, read once per process (a worker writes several
    blocks of the same build)."""
    path = Path(path)
    key = (str(path), path.stat().st_mtime_ns)
    if key not in _VOCABS:
        if len(_VOCABS) > 400:  # another build's (bio-multi has 159 vocabularies)
            _VOCABS.clear()
        _VOCABS[key] = VocabFile(path)
    return _VOCABS[key]


_VOCABS: dict = {}


class ForeignBlocks:
    """The stored foreign phrases' texts ('lang:text'), a block of ids at a time: a function of
    the ids read from the translation stage's ``f-*.arrays`` partitions (foreign_phrase_texts).

    The encode stage's vocabularies (as :class:`VocabFile`) and languages' map are read on first
    use (a task of the write is handed this object: nothing per token is pickled); a block's
    texts are made from its own tokens' strings."""

    def __init__(self, translation_dir, encode_dir, langs: list[str]):
        from pivot.pipeline import translation

        self.paths = translation.part_paths(translation_dir, "f")
        self.key_path = Path(translation_dir) / "structure" / "f_key.npy"
        self.encode_dir, self.langs = Path(encode_dir), langs
        self._vocab = None  # (vocabularies, f_lang, each vocabulary's first global id), read on first use

    def __getstate__(self):
        return {**self.__dict__, "_vocab": None}

    def __call__(self, f_used) -> dict[int, str]:
        from pivot.pipeline import translation
        from pivot.pipeline.pivoting import npy_rows

        if self._vocab is None:
            vocabs = [_vocab_file(self.encode_dir / f"vocab.{lang}") for lang in self.langs]
            self._vocab = (vocabs, np.load(self.encode_dir / "f_lang.npy"),
                           np.cumsum([0] + [len(v) for v in vocabs], dtype=np.int64))
        vocabs, f_lang, firsts = self._vocab
        rows = translation.foreign_rows(self.paths, npy_rows(self.key_path, np.asarray(f_used, np.int64)))
        compact, tokens = _compact(rows)
        # a global token id t is token t - firsts[v] of vocabulary v, firsts[v] <= t < firsts[v + 1]
        # (the languages' lists concatenated, as the ids are offset per language)
        of = np.searchsorted(firsts, tokens, side="right") - 1
        words = np.empty(len(tokens), dtype=object)
        for v in np.unique(of).tolist():
            sel = of == v
            words[sel] = vocabs[v].words(tokens[sel] - firsts[v])
        return dict(zip(np.asarray(f_used).tolist(),
                        foreign_phrase_texts(compact, [words.tolist()], self.langs, np.asarray(f_lang)[tokens])))


class StoreChunks:
    """The table the database stores, as PairChunks in key order: the pivot stage's row ranges
    with the ppdb2 stage's layer. A picklable callable (the parts of a database in parts are
    written by the workers, each reading the chunks itself)."""

    def __init__(self, pivot_dir, ppdb2_dir, n_parts: int):
        self.pivot_dir, self.ppdb2_dir, self.n_parts = Path(pivot_dir), Path(ppdb2_dir), n_parts

    @property
    def n_chunks(self) -> int:
        """How many chunks a call yields (the write of a database in parts surveys them as tasks)."""
        return self.n_parts

    def __call__(self):
        return self.from_chunk(0)

    def from_chunk(self, first: int):
        """The chunks from chunk ``first`` on, those before it never opened: a task of the write
        reads one block of rows, and opening every chunk before it (~0.6 ms a chunk: two bundles,
        eight memory maps) cost blocks x chunks openings in all, both growing with the table."""
        from pivot.pipeline.bundle import open_bundle
        from pivot.pipeline.pivoting import Paraphrases
        from pivot.store.write import PairChunk

        # Memory maps: a part of a database in parts reads every range's e1 and e2 (for the
        # reverse rows it holds) but the other columns only of the rows it stores.
        index = Paraphrases.read_index(self.pivot_dir)
        for j, (name, n) in enumerate(zip(index["parts"], index["n_pairs"])):
            if j < first:
                continue
            with open_bundle(self.pivot_dir / name) as para, open_bundle(self.ppdb2_dir / f"x-{j:04d}.arrays") as x:
                fields = {f: para.memmap(f) for f in ("e1", "e2", "n_pivots", "pivots", "p")}
                extra = {f: x.memmap(f) for f in ("form", "ppdb2", "rel") if f in x}
            if fields["e1"].shape[0] != n:
                raise ValueError(f"{self.pivot_dir / name}: {fields['e1'].shape[0]} pairs, the index says {n}")
            yield PairChunk(**fields, **extra)


def foreign_phrase_texts(phrases, tokens, langs, f_lang_of_token) -> list[str]:
    """Foreign phrases as 'lang:text' (ids are offset per language, see pivot.pipeline.encode;
    ``tokens``: each language's token list, so a token id indexes their concatenation).

    Rows of one length are joined together, as encode.phrase_text_list does: the write asks
    for a bio build's ~1M pivots' texts, 4.5 s token by token in Python, ~1 s so.
    """
    rows = np.asarray(phrases)
    present = rows >= 0
    if len(rows) and not present[:, 0].all():
        raise ValueError("a foreign phrase row holds no token")
    if rows.shape[1] > 1 and (present[:, 1:] & ~present[:, :-1]).any():
        raise ValueError("foreign phrase rows must hold their tokens first and the -1 padding after them")
    words = np.array([t for vocab in tokens for t in vocab], dtype=object)
    # a phrase's language is its first token's: that token is written with the "lang:" prefix
    # (made for the block's distinct first tokens only, not for every token of every language)
    heads, head_of = np.unique(rows[:, 0], return_inverse=True)
    first = np.array([f"{langs[li]}:{t}" for li, t in zip(np.asarray(f_lang_of_token)[heads].tolist(),
                                                         words[heads].tolist())], dtype=object)
    lengths = present.sum(axis=1)
    texts = np.empty(len(rows), dtype=object)
    for n in np.unique(lengths).tolist():
        sel = lengths == n
        cells = words[rows[sel, :n]]
        cells[:, 0] = first[head_of[sel]]
        texts[sel] = list(map(" ".join, cells.tolist()))
    return texts.tolist()


def _versions() -> dict:
    import importlib.metadata as md

    out = {"pivot": __version__, "python": platform.python_version()}
    for dist in ("numpy", "scipy", "ufal.kenlm", "sqlite-utils", "statsmodels", "eflomal",
                 "opus-fast-mosestokenizer", "Cython"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist] = None
    return out


STAGE = Stage("store", 1, ("pivot", "ppdb2", "lhs", "combine", "translation", "encode", "weights", "score", "lm",
                           "lmtext", "align", "corpus"), ("recipe",), stage_params, ("OUT",), run_stage,
              "one, streaming: its pair rows bound by the workers; --parts N: one task per part",
              "the SQLite database at --out (one file, or a folder of N parts)")
