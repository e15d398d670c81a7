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
(``origins.json``). Everything streams a shard at a time: memory is a shard plus the
vocabularies, whatever the corpus size.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from pivot.atomic import save_npz
from pivot.pipeline.stage import Stage


def _read_lines(path: Path, start: int, stop: int, handle_cache: dict) -> list[str]:
    """Lines [start, stop) of a file read sequentially (one open handle per file)."""
    fh, pos = handle_cache.get(path, (None, 0))
    if fh is None:
        fh = open(path, encoding="utf-8", newline="\n")
    if pos != start:
        raise RuntimeError(f"{path}: lines must be read in order ({pos} != {start})")
    out = []
    for _ in range(stop - start):
        line = fh.readline()
        if not line:
            raise ValueError(f"{path}: ends at line {start + len(out)}, expected {stop} lines")
        out.append(line[:-1] if line.endswith("\n") else line)
    handle_cache[path] = (fh, stop)
    return out


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


def shard_cuts(english_path: Path, n: int, shard_sentences: int, shard_tokens: int) -> list[tuple[int, int]]:
    r"""The [start, stop) line ranges of one language's shards (see the module docstring).

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "en")
    >>> _ = open(path, "w").write("a b c\nd\ne f g h\ni j\nk\n")
    >>> shard_cuts(path, 5, 3, 5)   # token counts 3 1 4 2 1: 3+1 <= 5, then 4, then 2+1
    [(0, 2), (2, 3), (3, 5)]
    >>> shard_cuts(path, 5, 2, 100)
    [(0, 2), (2, 4), (4, 5)]
    """
    cuts, start, tokens = [], 0, 0
    with open(english_path, encoding="utf-8", newline="\n") as fh:
        for i in range(n):
            line = fh.readline()
            if not line:
                raise ValueError(f"{english_path}: ends at line {i}, expected {n} lines")
            length = len(line.split())
            if i > start and (i - start == shard_sentences or tokens + length > shard_tokens):
                cuts.append((start, i))
                start, tokens = i, 0
            tokens += length
    if n > start:
        cuts.append((start, n))
    return cuts


def encode_shards(corpora: list[tuple[str, Path, Path]], out_dir: Path, shard_sentences: int,
                  shard_tokens: int) -> dict:
    """Write the shards of ``(lang, corpus dir, align dir)`` triples into ``out_dir``.

    Returns (and writes as ``shards.json``) {"n_sentences", "shard_sentences", "shard_tokens",
    "shards": [...]}.
    """
    from pivot.pipeline.corpus import Vocab

    out_dir = Path(out_dir)
    (out_dir / "shards").mkdir(parents=True, exist_ok=True)
    e_vocab = Vocab()
    shards, origins, f_lang = [], [], []
    f_offset, start = 0, 0
    with open(out_dir / "english.txt", "w", encoding="utf-8", newline="\n") as english, \
            open(out_dir / "origin.bin", "wb") as origin_out:
        for li, (lang, corpus_dir, align_dir) in enumerate(corpora):
            meta = json.loads((Path(corpus_dir) / "meta.json").read_text(encoding="utf-8"))
            n = int(meta["n_pairs"])
            names = meta["source_names"]
            kinds = meta.get("source_kinds") or ["sentences"] * len(names)
            is_terms = np.array([k == "terms" for k in kinds], dtype=np.uint8)
            origin = np.load(Path(corpus_dir) / "origin.npy").astype(np.int32)
            if len(origin) != n:
                raise ValueError(f"{corpus_dir}: origin.npy has {len(origin)} entries for {n} pairs")
            base_origin = len(origins)
            origins += [[lang, name] for name in names]
            links = LinkChunks(align_dir)
            if links.n != n:
                raise ValueError(f"{align_dir}: links for {links.n} pairs, corpus has {n}")
            f_vocab = Vocab()
            handles: dict = {}
            en_path, f_path = Path(corpus_dir) / "bitext.en", Path(corpus_dir) / f"bitext.{lang}"
            for s0, s1 in shard_cuts(en_path, n, shard_sentences, shard_tokens):
                en = _read_lines(en_path, s0, s1, handles)
                fo = _read_lines(f_path, s0, s1, handles)
                e_tokens, e_offsets = e_vocab.encode(en)
                f_tokens, f_offsets = f_vocab.encode(fo)
                link_e, link_f, link_offsets = links.get(s0, s1)
                name = f"{len(shards):05d}.npz"
                save_npz(out_dir / "shards" / name, e_tokens=e_tokens, e_offsets=e_offsets,
                                f_tokens=(f_tokens.astype(np.int64) + f_offset).astype(np.int32),
                                f_offsets=f_offsets, link_e=link_e, link_f=link_f, link_offsets=link_offsets,
                                whole=is_terms[origin[s0:s1]])
                english.writelines(s + "\n" for s in en)
                origin_out.write((origin[s0:s1] + base_origin).astype("<i4").tobytes())
                shards.append({"file": f"shards/{name}", "lang": lang, "start": start + s0, "n": s1 - s0,
                               "english_tokens": int(len(e_tokens))})
            for fh, _ in handles.values():
                fh.close()
            f_vocab.save(out_dir / f"vocab.{lang}")
            f_lang.append(np.full(len(f_vocab), li, dtype=np.int16))
            f_offset += len(f_vocab)
            if f_offset > np.iinfo(np.int32).max:
                raise ValueError("more than 2^31 foreign token types")
            start += n
    e_vocab.save(out_dir / "vocab.en")
    np.save(out_dir / "f_lang.npy", np.concatenate(f_lang) if f_lang else np.zeros(0, np.int16))
    np.save(out_dir / "origin.npy", np.fromfile(out_dir / "origin.bin", dtype="<i4"))
    (out_dir / "origin.bin").unlink()
    info = {"n_sentences": start, "shard_sentences": shard_sentences, "shard_tokens": shard_tokens,
            "shards": shards, "origins": origins}
    (out_dir / "shards.json").write_text(json.dumps(info, indent=1, ensure_ascii=False))
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


def run_stage(context) -> None:
    corpora, links = context.dir("corpus"), context.dir("align")
    encode_shards([(lang, corpora[lang], links[lang]) for lang in corpora], context.tmp,
                  context.params["shard_sentences"], context.params["shard_tokens"])


def read_shards(encode_dir) -> dict:
    """The stage's ``shards.json``: n_sentences, the shards (file, start, n) and the origins."""
    return json.loads((Path(encode_dir) / "shards.json").read_text(encoding="utf-8"))


STAGE = Stage("encode", 2, ("corpus", "align"), ("extract.shard_sentences", "extract.shard_tokens"), stage_params,
              ("shards/*.npz", "shards.json", "english.txt", "vocab.*", "origin.npy", "f_lang.npy"), run_stage,
              "one (streaming)", "token ids, cut into shards of sentence pairs")
