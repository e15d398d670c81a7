"""Encode: the aligned bitexts of every pivot language as shards of token ids.

A shard is a run of consecutive sentence pairs of one language that closes at
``shard_sentences`` pairs or before its English side passes ``shard_tokens`` tokens, whichever
comes first (a shard holds at least one pair). The token budget evens out the extraction
tasks: a shard of long biomedical sentences yields several times the phrase pairs of one of
short conversational ones. The cut points depend on the text and the two settings only, so
they are part of the content (and of the signature). A shard is stored as one ``.npz``:

    e_tokens, e_offsets      English token ids (one vocabulary for all languages), ragged
    f_tokens, f_offsets      foreign token ids (one vocabulary per language, offset so that no
                             two languages share an id), ragged
    link_e, link_f, link_offsets   alignment links, 0-based positions, ragged
    whole                    1 for a term-list pair: the pair itself is the phrase pair

Sentence ids are global: the languages in recipe order, each in corpus order; shard i covers
``[start_i, start_i + n_i)`` (``shards.json``). ``english.txt`` holds the English side in the
same order (the Moore-Lewis stages stream it), ``origin.npy`` each pair's source
(``origins.json``). The text is read and encoded by tasks (:func:`encode_job`): the build's
process holds the vocabularies and one language's token counts (8 B a line), a task a chunk of
lines or a shard, whatever the corpus size.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import numpy as np

from pivot.atomic import save_npz
from pivot.pipeline.stage import Stage

log = logging.getLogger("pivot")

#: Lines a tokenize task reads (each language's files are cut every TOKENIZE_LINES lines).
#: The ids and the shards do not depend on it: it sets the tasks' size only.
TOKENIZE_LINES = 50_000


class LinkChunks:
    """Ragged links of sentences [start, stop) from an align stage's output, any chunking."""

    def __init__(self, align_dir: Path):
        self.dir = Path(align_dir)
        info = self.dir / "links.json"
        if info.is_file():
            meta = json.loads(info.read_text())
            self.chunk, self.n = int(meta["chunk_sentences"]), int(meta["n_pairs"])
            self.whole = None
        else:  # one file for the whole corpus
            with np.load(self.dir / "links.npz") as z:
                self.whole = (z["link_e"], z["link_f"], z["link_offsets"])
            self.chunk = self.n = len(self.whole[2]) - 1
        self._cache = (None, None)

    def _chunk(self, k: int):
        if self.whole is not None:
            return self.whole
        if self._cache[0] != k:
            with np.load(self.dir / f"links-{k:05d}.npz") as z:
                self._cache = (k, (z["link_e"], z["link_f"], z["link_offsets"]))
        return self._cache[1]

    def get(self, start: int, stop: int):
        parts_e, parts_f, counts = [], [], []
        s = start
        while s < stop:
            k = s // self.chunk if self.chunk else 0
            base = k * self.chunk
            le, lf, lo = self._chunk(k)
            hi = min(stop, base + len(lo) - 1)
            a, b = lo[s - base], lo[hi - base]
            parts_e.append(le[a:b])
            parts_f.append(lf[a:b])
            counts.append(np.diff(lo[s - base:hi - base + 1]))
            s = hi
        offsets = np.zeros(stop - start + 1, dtype=np.int64)
        if counts:
            np.cumsum(np.concatenate(counts), out=offsets[1:])
        cat = (lambda xs: np.concatenate(xs).astype(np.int32)) if parts_e else (lambda xs: np.zeros(0, np.int32))
        return cat(parts_e), cat(parts_f), offsets


def token_cuts(lengths, shard_sentences: int, shard_tokens: int) -> list[tuple[int, int]]:
    r"""The [start, stop) line ranges of one language's shards, from its lines' English token
    counts ``lengths`` (see the module docstring): a shard closes before line i when it holds
    ``shard_sentences`` lines or when line i would take it past ``shard_tokens`` tokens, and it
    holds one line at least. With cum the running sum of the lengths (cum[0] = 0), a shard
    from ``start`` stops at min(start + shard_sentences, j - 1) (at least start + 1, at most n),
    j the first index with cum[j] > cum[start] + shard_tokens: one search a shard.

    >>> token_cuts([3, 1, 4, 2, 1], 3, 5)   # 3 + 1 <= 5, then 4, then 2 + 1
    [(0, 2), (2, 3), (3, 5)]
    >>> token_cuts([3, 1, 4, 2, 1], 2, 100)
    [(0, 2), (2, 4), (4, 5)]
    >>> token_cuts([9, 0, 0], 10, 5)         # a line longer than the budget is a shard alone
    [(0, 1), (1, 3)]
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    n = len(lengths)
    cum = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=cum[1:])
    cuts, start = [], 0
    while start < n:
        over = int(np.searchsorted(cum, cum[start] + shard_tokens, side="right"))
        stop = min(start + shard_sentences, max(over - 1, start + 1), n)
        cuts.append((start, stop))
        start = stop
    return cuts


def _chunk_pieces(s0: int, s1: int, chunk: int) -> list[tuple[int, int, int]]:
    """(chunk k, first, stop) chunk-local line ranges covering lines [s0, s1) of a language
    tokenized in chunks of ``chunk`` lines (chunk k holds lines [k chunk, (k + 1) chunk))."""
    return [(k, max(s0, k * chunk) - k * chunk, min(s1, (k + 1) * chunk) - k * chunk)
            for k in range(s0 // chunk, (s1 - 1) // chunk + 1)]


def finish_shard(pieces, f_offset: int, align_dir, s0: int, s1: int, origin_path, is_terms, out_path) -> None:
    """A task: shard lines [s0, s1) of one language -> its ``.npz`` (the module docstring).

    ``pieces``: (tokenized chunk, its id maps, first, stop) in line order (tokenize_chunk's
    chunk-local ids, and the build's ids of each chunk's words: ``e_ids`` English over every
    language, ``f_ids`` this language's, to which ``f_offset``, the earlier languages' foreign
    vocabularies, is added). The links are the align stage's of the same lines, ``whole``
    the term-list flag of each line's source (``is_terms`` by source, origin.npy of the corpus).
    """
    from pivot.pipeline.bundle import open_bundle

    tokens, counts = {"e": [], "f": []}, {"e": [], "f": []}
    for tok_path, map_path, first, stop in pieces:
        with open_bundle(tok_path) as tok, open_bundle(map_path) as ids:
            for side in ("e", "f"):
                offsets = np.asarray(tok[f"{side}_offsets"][first:stop + 1])
                local = tok[f"{side}_tokens"][offsets[0]:offsets[-1]]
                tokens[side].append(np.asarray(ids[f"{side}_ids"])[local])
                counts[side].append(np.diff(offsets))
    arrays = {}
    for side in ("e", "f"):
        offsets = np.zeros(s1 - s0 + 1, dtype=np.int64)
        np.cumsum(np.concatenate(counts[side]), out=offsets[1:])
        arrays[side] = (np.concatenate(tokens[side]).astype(np.int32, copy=False), offsets)
    link_e, link_f, link_offsets = LinkChunks(align_dir).get(s0, s1)
    origin = np.load(origin_path, mmap_mode="r")[s0:s1].astype(np.int32)
    save_npz(out_path, e_tokens=arrays["e"][0], e_offsets=arrays["e"][1],
             f_tokens=(arrays["f"][0].astype(np.int64) + f_offset).astype(np.int32), f_offsets=arrays["f"][1],
             link_e=link_e, link_f=link_f, link_offsets=link_offsets, whole=np.asarray(is_terms)[origin])


def _copy_lines(src: Path, dst, n_bytes: int) -> None:
    """The first ``n_bytes`` of ``src`` onto the open binary file ``dst``, ended by a newline."""
    with open(src, "rb") as fh:
        left = n_bytes
        last = b"\n"
        while left:
            block = fh.read(min(left, 1 << 24))
            if not block:
                raise ValueError(f"{src}: shorter than {n_bytes} bytes")
            dst.write(block)
            left -= len(block)
            last = block[-1:]
        if last != b"\n":
            dst.write(b"\n")


def encode_job(corpora: list[tuple[str, Path, Path]], out_dir: Path, shard_sentences: int, shard_tokens: int):
    """A job (pivot.pipeline.engine.Engine.run): the shards of ``(lang, corpus dir, align dir)``
    triples, written into ``out_dir``. Returns (and writes as ``shards.json``) {"n_sentences",
    "shard_sentences", "shard_tokens", "shards": [...], "origins"}.

    Token ids are given in order of first occurrence (English over every language in recipe
    order, foreign within each language), as one pass over the text would give them; the pass
    is cut into tasks as the align stage cuts its own (pivot.pipeline.align._encode_corpus):
    tasks find each file's lines (chunk_starts) and encode chunks of TOKENIZE_LINES lines over
    vocabularies of their own (tokenize_chunk); here the chunks' words join the build's
    vocabularies in chunk order (a word new to the corpus gets the next id: its first
    occurrence is in this chunk, after the chunk's earlier new words), each language is cut
    into shards by its lines' token counts (token_cuts), and one task a shard maps its ids and
    adds its links (finish_shard). What stays here is a few numbers a line (the token counts
    while one language is cut) and each chunk's distinct words: no token of the text.
    """
    from pivot.pipeline.align import chunk_starts, chunk_words, tokenize_chunk
    from pivot.pipeline.bundle import open_bundle, save_bundle
    from pivot.pipeline.corpus import Vocab
    from pivot.pipeline.engine import Batch

    out_dir = Path(out_dir)
    (out_dir / "shards").mkdir(parents=True, exist_ok=True)
    scratch = out_dir / "tokenized"
    scratch.mkdir(exist_ok=True)
    langs = []
    for lang, corpus_dir, align_dir in corpora:
        meta = json.loads((Path(corpus_dir) / "meta.json").read_text(encoding="utf-8"))
        links = LinkChunks(align_dir)
        if links.n != int(meta["n_pairs"]):
            raise ValueError(f"{align_dir}: links for {links.n} pairs, corpus has {meta['n_pairs']}")
        langs.append({"lang": lang, "dir": Path(corpus_dir), "align": Path(align_dir), "n": int(meta["n_pairs"]),
                      "names": meta["source_names"],
                      "kinds": meta.get("source_kinds") or ["sentences"] * len(meta["source_names"]),
                      "en": Path(corpus_dir) / "bitext.en", "f": Path(corpus_dir) / f"bitext.{lang}"})
    files = [(str(x[side]), TOKENIZE_LINES) for x in langs for side in ("en", "f")]
    found = yield Batch(chunk_starts, files, name="encode-lines", cost=[os.path.getsize(p) for p, _ in files])
    chunks = []   # (language, k, English byte range, foreign byte range, first line, tokenized file)
    for i, x in enumerate(langs):
        (n_e, e_starts), (n_f, f_starts) = found[2 * i], found[2 * i + 1]
        for side, got in (("en", n_e), ("f", n_f)):
            if got != x["n"]:
                raise ValueError(f"{x[side]}: {got} lines, expected {x['n']}")
        x["bytes"] = os.path.getsize(x["en"])
        e_ranges = zip(e_starts, e_starts[1:] + [x["bytes"]])
        f_ranges = zip(f_starts, f_starts[1:] + [os.path.getsize(x["f"])])
        x["chunks"] = [(e, f, k * TOKENIZE_LINES, scratch / f"tok-{x['lang']}-{k:05d}.arrays")
                       for k, (e, f) in enumerate(zip(e_ranges, f_ranges))]
    yield Batch(tokenize_chunk, [(str(x["en"]), str(x["f"]), e, f, first, str(tok))
                                 for x in langs for e, f, first, tok in x["chunks"]],
                name="encode-tokenize", cost=[e[1] - e[0] + f[1] - f[0] for x in langs for e, f, _, _ in x["chunks"]])
    e_vocab = Vocab()
    shards, origins, f_lang, finish = [], [], [], []
    f_offset, start = 0, 0
    for li, x in enumerate(langs):
        f_vocab, lengths, maps = Vocab(), [], []
        for k, (_, _, _, tok) in enumerate(x["chunks"]):
            with open_bundle(tok) as z:
                e_words, f_words = chunk_words(z["e_words"]), chunk_words(z["f_words"])
                lengths.append(np.diff(np.asarray(z["e_offsets"])))
            maps.append(scratch / f"ids-{x['lang']}-{k:05d}.arrays")
            save_bundle(maps[-1], e_ids=np.array([e_vocab.add(w) for w in e_words], dtype=np.int32),
                        f_ids=np.array([f_vocab.add(w) for w in f_words], dtype=np.int32))
        lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
        is_terms = np.array([k == "terms" for k in x["kinds"]], dtype=np.uint8)
        base_origin = len(origins)
        origins += [[x["lang"], name] for name in x["names"]]
        for s0, s1 in token_cuts(lengths, shard_sentences, shard_tokens):
            name = f"{len(shards):05d}.npz"
            pieces = [(str(x["chunks"][k][3]), str(maps[k]), a, b) for k, a, b in _chunk_pieces(s0, s1, TOKENIZE_LINES)]
            finish.append((pieces, f_offset, str(x["align"]), s0, s1, str(x["dir"] / "origin.npy"), is_terms,
                           str(out_dir / "shards" / name)))
            shards.append({"file": f"shards/{name}", "lang": x["lang"], "start": start + s0, "n": s1 - s0,
                           "english_tokens": int(lengths[s0:s1].sum())})
        x["base_origin"] = base_origin
        f_vocab.save(out_dir / f"vocab.{x['lang']}")
        f_lang.append(np.full(len(f_vocab), li, dtype=np.int16))
        f_offset += len(f_vocab)
        if f_offset > np.iinfo(np.int32).max:
            raise ValueError("more than 2^31 foreign token types")
        start += x["n"]
        del f_vocab, e_words, f_words, lengths
    e_vocab.save(out_dir / "vocab.en")
    n_e_vocab = len(e_vocab)
    del e_vocab
    yield Batch(finish_shard, finish, name="encode-shards", cost=[sh["english_tokens"] for sh in shards])
    shutil.rmtree(scratch)
    # english.txt: every language's English side in order, the corpus files' own bytes (their n
    # lines, as the corpus stage wrote them); origin.npy: each line's source, numbered over all
    # languages, a language at a time.
    with open(out_dir / "english.txt", "wb") as english:
        for x in langs:
            _copy_lines(x["en"], english, x["bytes"])
    origin_out = np.lib.format.open_memmap(out_dir / "origin.npy", mode="w+", dtype="<i4", shape=(start,))
    at = 0
    for x in langs:
        origin_out[at:at + x["n"]] = np.load(x["dir"] / "origin.npy", mmap_mode="r").astype(np.int32) + x["base_origin"]
        at += x["n"]
    origin_out.flush()
    del origin_out
    np.save(out_dir / "f_lang.npy", np.concatenate(f_lang) if f_lang else np.zeros(0, np.int16))
    info = {"n_sentences": start, "shard_sentences": shard_sentences, "shard_tokens": shard_tokens,
            "shards": shards, "origins": origins}
    (out_dir / "shards.json").write_text(json.dumps(info, indent=1, ensure_ascii=False))
    log.info("encode: %d shards, %d English types", len(shards), n_e_vocab)
    return info


def iter_english(encode_dir: Path, chunk: int = 50_000):
    """Lists of at most ``chunk`` English sentences, in global sentence order."""
    with open(Path(encode_dir) / "english.txt", encoding="utf-8", newline="\n") as fh:
        batch = []
        for line in fh:
            batch.append(line[:-1])
            if len(batch) == chunk:
                yield batch
                batch = []
        if batch:
            yield batch


def phrase_texts(phrases: np.ndarray, tokens: list[str], ids: np.ndarray) -> dict[int, str]:
    """Phrase id -> space-joined text, for the given ids (rows of token ids, -1 padded at the end)."""
    ids = np.asarray(ids, dtype=np.int64)
    return dict(zip(ids.tolist(), phrase_text_list(phrases, tokens, ids)))


def phrase_text_list(phrases: np.ndarray, tokens: list[str], ids: np.ndarray) -> list[str]:
    """The space-joined texts of phrase ids ``ids``, in their order (phrase_texts without the
    dict: the ppdb2 stage's 2.37M texts on bio-multi, whose dict and int keys were ~0.2 GB more).

    Rows of one length are joined together (a C-level map over lists of words), not token by
    token in Python: the ppdb2 stage and the database write each ask for 450k texts at bio size.
    """
    ids = np.asarray(ids, dtype=np.int64)
    rows = phrases[ids]
    present = rows >= 0
    if present.shape[1] > 1 and (present[:, 1:] & ~present[:, :-1]).any():
        raise ValueError("phrase rows must hold their tokens first and the -1 padding after them")
    lengths = present.sum(axis=1)
    words = np.array(tokens, dtype=object)
    texts = np.empty(len(ids), dtype=object)
    for n in np.unique(lengths).tolist():
        sel = lengths == n
        texts[sel] = list(map(" ".join, words[rows[sel, :n]].tolist())) if n else ""
    return texts.tolist()


def stage_params(recipe) -> dict:
    return {"shard_sentences": int(recipe["extract"]["shard_sentences"]),
            "shard_tokens": int(recipe["extract"]["shard_tokens"])}


def run_stage(context):
    corpora, links = context.dir("corpus"), context.dir("align")
    return (yield from encode_job([(lang, corpora[lang], links[lang]) for lang in corpora], context.tmp,
                                  context.params["shard_sentences"], context.params["shard_tokens"]))


def read_shards(encode_dir) -> dict:
    """The stage's ``shards.json``: n_sentences, the shards (file, start, n) and the origins."""
    return json.loads((Path(encode_dir) / "shards.json").read_text(encoding="utf-8"))


STAGE = Stage("encode", 2, ("corpus", "align"), ("extract.shard_sentences", "extract.shard_tokens"), stage_params,
              ("shards/*.npz", "shards.json", "english.txt", "vocab.*", "origin.npy", "f_lang.npy"), run_stage,
              "one per chunk of lines, then one per shard (Dask)", "token ids, cut into shards of sentence pairs")
