"""The build: every stage of the pipeline, cached in a work directory.

    corpus -> align -> encode -> weights -> extract -> pivot -> store

Each stage writes its artifact into `<work>/<stage>-<key>/`, where the key hashes the
stage's parameters, the keys of the stages it reads and the fingerprints of the data
files. The folder is built under a temporary name and renamed when complete, so an
interrupted build resumes at the first unfinished stage and a rerun with unchanged
inputs reuses everything. The database itself is written the same way (see pivot.db).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import pivot
from pivot import recipes

log = logging.getLogger("pivot")

# Bump a stage's version when its code changes what it writes: old artifacts then miss.
STAGE_VERSIONS = {"corpus": 1, "align": 1, "encode": 1, "weights": 1, "extract": 1, "pivot": 1}


def _key(parts: dict) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass
class Workdir:
    """A folder of finished stage artifacts, each named by its inputs' key."""

    root: Path
    reused: list = field(default_factory=list)
    built: list = field(default_factory=list)
    timings: dict = field(default_factory=dict)

    def stage(self, name: str, parts: dict, produce) -> tuple[Path, str]:
        """Run `produce(tmp_dir)` unless an artifact with the same key is complete."""
        parts = {"stage": name, "version": STAGE_VERSIONS[name.split(".")[0]], **parts}
        key = _key(parts)
        final = self.root / f"{name}-{key}"
        if (final / "DONE").is_file():
            log.info("stage %-12s reused  %s", name, final)
            self.reused.append(name)
            return final, key
        tmp = self.root / f".{name}-{key}.partial"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        t0 = time.perf_counter()
        log.info("stage %-12s running -> %s", name, final)
        produce(tmp)
        (tmp / "DONE").write_text(json.dumps(parts, sort_keys=True, indent=1, default=str))
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        self.timings[name] = round(time.perf_counter() - t0, 2)
        self.built.append(name)
        log.info("stage %-12s done in %.1f s", name, self.timings[name])
        return final, key


def _versions() -> dict:
    import importlib.metadata as md

    out = {"pivot": pivot.__version__, "python": platform.python_version()}
    for dist in ("numpy", "scipy", "ufal.kenlm", "sqlite-utils", "statsmodels", "eflomal",
                 "opus-fast-mosestokenizer", "Cython"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist] = None
    return out


def run_build(domain: str | None = "bio", *, recipe: str | None = None, data: str | None = None,
              out: str | None = None, work: str | None = None, threads: int = 0,
              quiet: bool = False) -> Path:
    """Build the paraphrase database of a recipe; returns the database path."""
    from pivot import align, corpus, extract, pivoting
    from pivot.db import write_database

    t_start = time.perf_counter()
    recipe_file = recipes.recipe_path(domain, recipe)
    rec = recipes.load_recipe(recipe_file)
    data_root = recipes.resolve_data_root(data)
    name = rec["name"]
    out_path = Path(out) if out else Path(f"{name}.db")
    wd = Workdir(Path(work) if work else Path("work") / name)
    wd.root.mkdir(parents=True, exist_ok=True)
    log.info("pivot %s: %s", pivot.__version__, " ".join(sys.argv))
    log.info("recipe %s, data root %s, work dir %s", recipe_file, data_root, wd.root)

    # ---------------------------------------------------------------- corpus + align, per language
    bitext_dirs, align_dirs, upstream, fingerprints = [], [], [], {}
    for spec in rec["bitext"]:
        lang = spec["lang"]
        files = [f for src in spec["sources"] for f in recipes.source_files(src, data_root, lang)]
        prints = recipes.fingerprint_files(files)
        fingerprints.update({os.path.relpath(k, data_root): v for k, v in prints.items()})
        corpus_dir, corpus_key = wd.stage(
            f"corpus.{lang}",
            {"sources": spec["sources"], "data": sorted(prints.values()), "preprocess": rec["preprocess"]},
            lambda tmp, spec=spec: corpus.load_bitext(
                spec["sources"], spec["lang"], data_root, quiet=quiet, **rec["preprocess"]
            ).save(tmp),
        )
        align_params = dict(rec["align"])
        pharaoh = align_params.pop("pharaoh", {}) or {}
        if align_params["method"] == "pharaoh":
            if lang not in pharaoh:
                raise recipes.InputError(f"[align] method 'pharaoh' needs a file for {lang!r}: pharaoh = {{{lang} = 'path'}}",
                                         recipe_file)
            pharaoh_path = data_root / pharaoh[lang]
            align_params["pharaoh"] = recipes.fingerprint_files([pharaoh_path])
        else:
            pharaoh_path = None

        def produce_alignment(tmp, corpus_dir=corpus_dir, pharaoh_path=pharaoh_path, params=align_params):
            bitext = corpus.Bitext.load(corpus_dir)
            link_e, link_f, link_offsets = align.align_bitext(
                bitext, tmp, method=params["method"], pharaoh_path=pharaoh_path, quiet=quiet,
                model=params["model"], length=params["length"],
            )
            np.savez(tmp / "links.npz", link_e=link_e, link_f=link_f, link_offsets=link_offsets)

        align_dir, align_key = wd.stage(f"align.{lang}", {"corpus": corpus_key, **align_params},
                                        produce_alignment)
        bitext_dirs.append(corpus_dir)
        align_dirs.append(align_dir)
        upstream += [corpus_key, align_key]

    # ---------------------------------------------------------------- encode: one bitext of ids
    langs = [spec["lang"] for spec in rec["bitext"]]

    def produce_encoding(tmp):
        encode_bitexts(bitext_dirs, align_dirs, langs, tmp)

    encode_dir, encode_key = wd.stage("encode", {"upstream": upstream}, produce_encoding)
    arrays = dict(np.load(encode_dir / "bitext.npz"))

    # ---------------------------------------------------------------- weights: one column per model
    models = [{"name": "general", "kind": "pivot", "description": "every sentence pair, weight 1",
               "params": {"weight": 1}}]

    def produce_weights(tmp):
        n = len(arrays["e_offsets"]) - 1
        np.save(tmp / "weights.npy", np.ones((n, len(models))))
        (tmp / "models.json").write_text(json.dumps(models, indent=1))

    weights_dir, weights_key = wd.stage("weights", {"encode": encode_key, "models": models}, produce_weights)

    # ---------------------------------------------------------------- extract: weighted phrase pairs
    max_len = rec["extract"]["max_phrase_len"]

    def produce_table(tmp):
        weights = np.load(weights_dir / "weights.npy")
        table = extract.extract_phrase_pairs(
            arrays["e_tokens"], arrays["e_offsets"], arrays["f_tokens"], arrays["f_offsets"],
            arrays["link_e"], arrays["link_f"], arrays["link_offsets"], weights, max_len=max_len,
        )
        table.save(tmp / "table.npz")

    extract_dir, extract_key = wd.stage("extract", {"weights": weights_key, "max_len": max_len}, produce_table)
    table = extract.PhraseTable.load(extract_dir / "table.npz")

    # ---------------------------------------------------------------- pivot: p(e2|e1) per model
    prune = rec["pivot"]

    def produce_paraphrases(tmp):
        pivoting.pivot_paraphrases(table, n_threads=threads, **prune).save(tmp / "paraphrases.npz")

    pivot_dir, pivot_key = wd.stage("pivot", {"extract": extract_key, **prune}, produce_paraphrases)
    para = pivoting.Paraphrases.load(pivot_dir / "paraphrases.npz")

    # ---------------------------------------------------------------- store: the database
    e_vocab = corpus.Vocab.load(encode_dir / "vocab.en")
    f_vocabs = [corpus.Vocab.load(encode_dir / f"vocab.{lang}") for lang in langs]
    f_lang_of_token = np.load(encode_dir / "f_lang.npy")
    # Text only for the phrases the database stores: most extracted phrases pivot to nothing.
    e_text = phrase_texts(table.e_phrases, e_vocab.tokens, np.union1d(para.e1, para.e2))
    f_used = np.unique(para.pivots[para.pivots >= 0])
    f_text = dict(zip(f_used.tolist(), foreign_phrase_texts(table.f_phrases[f_used], f_vocabs, langs,
                                                           f_lang_of_token)))
    pivots_text = ["|".join(f_text[f] for f in row if f >= 0) for row in para.pivots.tolist()]

    signature = "|".join([
        f"pivot:{pivot.__version__}", f"recipe:{name}@{rec['_sha256'][:12]}",
        f"data:{_key(fingerprints)[:12]}", f"align:{rec['align']['method']}",
        f"maxlen:{max_len}", "prune:{min_p_f_given_e}/{min_p_e_given_f}/{max_e_per_f}/top{top_n}".format(**prune),
        f"models:{len(models)}", f"build:{pivot_key[:12]}",
    ])
    meta = {
        "signature": signature,
        "recipe": {k: v for k, v in rec.items() if not k.startswith("_")},
        "recipe_file": rec["_path"], "recipe_sha256": rec["_sha256"],
        "data_fingerprints": fingerprints,
        "parameters": {"extract": rec["extract"], "pivot": prune, "align": rec["align"],
                       "preprocess": rec["preprocess"]},
        "pruning": {**prune, "decided_on": "support counts (model-independent)",
                    "n_pairs_out": int(len(para.e1)), "n_phrase_pairs": int(len(table.e_id))},
        "normalization": {"lang": "en", "lowercase": True, "tokenizer": "Moses (mosestokenizer), escape off"},
        "pivot_languages": langs,
        "versions": _versions(),
        "corpus_stats": {lang: json.loads((d / "meta.json").read_text()).get("stats", {})
                         for lang, d in zip(langs, bitext_dirs)},
    }
    write_database(
        out_path, phrases=e_text, phrase_counts=table.e_count, e1=para.e1, e2=para.e2,
        n_pivots=para.n_pivots, pivots=pivots_text, models=models, scores=para.p, meta=meta,
    )
    log.info("wrote %s (%d pairs, %d models) in %.1f s; signature %s", out_path, len(para.e1),
             len(models), time.perf_counter() - t_start, signature)
    return out_path


# -------------------------------------------------------------------------------- helpers


def encode_bitexts(bitext_dirs, align_dirs, langs, out_dir: Path) -> None:
    """Concatenate the languages' bitexts into one array bitext of token ids.

    English ids come from one vocabulary shared by all languages (paraphrases are English
    phrases, so "treat" must be one id whichever language it was aligned to). Foreign ids
    come from one vocabulary per language, offset so that no two languages share an id:
    "die" (de) and "die" (fr, hypothetical) stay distinct pivots. The pivot then runs over
    the union of foreign phrases, and p(f|e) is normalised over all languages' phrases of e:
    a language's share of the pivot mass is its share of e's extracted phrase pairs.
    """
    from pivot.corpus import Bitext, Vocab

    bitexts = [Bitext.load(d) for d in bitext_dirs]
    e_vocab = Vocab()
    e_parts, f_parts, lang_parts, link_parts = [], [], [], []
    f_offset = 0
    f_lang = []
    for i, (bitext, adir, lang) in enumerate(zip(bitexts, align_dirs, langs)):
        e_parts.append(e_vocab.encode(bitext.en))
        f_vocab = Vocab()
        tokens, offsets = f_vocab.encode(bitext.f)
        f_parts.append((tokens + f_offset, offsets))
        f_vocab.save(out_dir / f"vocab.{lang}")
        f_lang += [i] * len(f_vocab)
        f_offset += len(f_vocab)
        lang_parts.append(np.full(len(bitext.en), i, dtype=np.int16))
        links = np.load(adir / "links.npz")
        link_parts.append((links["link_e"], links["link_f"], links["link_offsets"]))
    e_vocab.save(out_dir / "vocab.en")
    np.save(out_dir / "f_lang.npy", np.asarray(f_lang, dtype=np.int16))
    e_tokens, e_offsets = _concat_ragged(e_parts)
    f_tokens, f_offsets = _concat_ragged(f_parts)
    link_e = np.concatenate([p[0] for p in link_parts]).astype(np.int32)
    link_f = np.concatenate([p[1] for p in link_parts]).astype(np.int32)
    _, link_offsets = _concat_ragged([(p[0], p[2]) for p in link_parts])
    origin = np.concatenate([b.origin.astype(np.int32) for b in bitexts])
    np.savez(out_dir / "bitext.npz", e_tokens=e_tokens, e_offsets=e_offsets, f_tokens=f_tokens,
             f_offsets=f_offsets, link_e=link_e, link_f=link_f, link_offsets=link_offsets,
             lang=np.concatenate(lang_parts), origin=origin)


def _concat_ragged(parts):
    """Concatenate (values, offsets) ragged arrays; offsets shift by the values before them."""
    values = np.concatenate([v for v, _ in parts]).astype(np.int32)
    offsets, base = [np.zeros(1, dtype=np.int64)], 0
    for v, o in parts:
        offsets.append(np.asarray(o[1:], dtype=np.int64) + base)
        base += int(o[-1])
    return values, np.concatenate(offsets)


def phrase_texts(phrases: np.ndarray, tokens: list[str], ids: np.ndarray) -> dict[int, str]:
    """Phrase id -> space-joined text, for the given ids (rows of token ids, -1 padded)."""
    rows = phrases[ids].tolist()
    return {i: " ".join(tokens[t] for t in row if t >= 0) for i, row in zip(ids.tolist(), rows)}


def foreign_phrase_texts(phrases, vocabs, langs, f_lang_of_token) -> list[str]:
    """Foreign phrases as 'lang:text' (ids are offset per language, see encode_bitexts)."""
    starts = np.cumsum([0] + [len(v) for v in vocabs])
    out = []
    for row in phrases.tolist():
        toks = [t for t in row if t >= 0]
        li = int(f_lang_of_token[toks[0]])
        vocab = vocabs[li].tokens
        out.append(langs[li] + ":" + " ".join(vocab[t - starts[li]] for t in toks))
    return out
