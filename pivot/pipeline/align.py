"""Alignment stage: the project's IBM Model 2 aligner, eflomal in both directions with
grow-diag-final-and, or precomputed Pharaoh links.

Links are ragged arrays in the Pharaoh convention (English position first, 0-based); the
format, its reader and writer and the Python grow-diag-final-and are pivot.pipeline.links.

:func:`align_corpus` is the out-of-core form of the stage: it reads a saved corpus folder
line by line and writes the links in chunks of sentences (``links-00000.npz``, ...,
``links.json``); with the default aligner its memory is one chunk plus the model's tables.

eflomal is run as a separate program (its ``eflomal-align`` command line), never
imported: eflomal is GPL-3.0 and pivot is MIT, and exchanging files with a separate
program keeps the two works separate.
"""
from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from pivot.atomic import save_npz, write_text
from pivot.errors import InputError
from pivot.pipeline import ibm, ibm_shards
from pivot.pipeline.bundle import open_bundle, save_bundle
from pivot.pipeline.corpus import Bitext, Vocab
from pivot.pipeline.engine import Batch, Engine
from pivot.pipeline.links import read_lines, read_pharaoh, symmetrize, write_lines
from pivot.pipeline.stage import Stage
from pivot.text import _iter_lines, _open_binary


# ----------------------------------------------------------------------------- eflomal

def find_eflomal():
    """Path of ``eflomal-align``: beside the running Python (a virtualenv's bin), else on PATH."""
    beside = Path(sys.executable).parent / "eflomal-align"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("eflomal-align")
    if found is None:
        raise FileNotFoundError(
            "the eflomal-align program was found neither beside the Python interpreter "
            f"({beside.parent}) nor on PATH; install it with `pip install eflomal` "
            "or use precomputed alignments (align method 'pharaoh')")
    return found


def run_eflomal(en_lines, f_lines, workdir, quiet=True, model=3, length=1.0):
    """Align with eflomal, English as source: returns (forward, reverse) Pharaoh lines.

    Both outputs use the English-foreign ``i-j`` convention (eflomal writes source-target
    in both files). Forward is the English->foreign model (each foreign word linked to at
    most one English word), reverse the foreign->English one.

    ``model=3`` (IBM1 + HMM + fertility, eflomal's default and best). eflomal has no seed
    option: its samplers seed from /dev/urandom, so two runs on the same text differ
    (measured on 2,000 medline pairs with length=0.2: 86% of the links of one run are in
    the other). Reproducibility therefore comes from caching the alignment (the caller's
    job), not from rerunning.

    ``length`` scales eflomal's sampling iterations (its ``--length``). eflomal picks
    n = max(2, round(length * 5000 / sqrt(n_sentences))) fertility iterations and about
    n / 4 IBM1 and HMM ones (its binary ran with -1 2 -2 2 -3 11 on 204k pairs): 11 for
    200k pairs but 158 for 1,000, so a small corpus costs more per sentence than a large
    one. The input and output files stay in ``workdir`` (``en.txt``, ``f.txt``,
    ``fwd.align``, ``rev.align``).
    """
    if len(en_lines) != len(f_lines):
        raise ValueError(f"{len(en_lines)} English and {len(f_lines)} foreign sentences")
    for side, lines in (("English", en_lines), ("foreign", f_lines)):
        for k, s in enumerate(lines):
            if not s.strip() or "\n" in s:
                raise ValueError(f"{side} sentence {k + 1} is empty or holds a line break: {s!r}")
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    en_path, f_path = workdir / "en.txt", workdir / "f.txt"
    fwd_path, rev_path = workdir / "fwd.align", workdir / "rev.align"
    write_lines(en_path, en_lines)
    write_lines(f_path, f_lines)
    cmd = [find_eflomal(), "-s", str(en_path), "-t", str(f_path),
           "-f", str(fwd_path), "-r", str(rev_path), "-m", str(model), "--length", str(length),
           "--overwrite"]
    if not quiet:
        cmd.append("-v")
    proc = subprocess.run(cmd, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE if quiet else None, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"eflomal-align failed (exit {proc.returncode}): {' '.join(cmd)}\n"
                           f"{proc.stderr or ''}{proc.stdout or ''}")
    forward, reverse = read_lines(fwd_path), read_lines(rev_path)
    for path, lines in ((fwd_path, forward), (rev_path, reverse)):
        if len(lines) != len(en_lines):
            raise RuntimeError(f"eflomal-align wrote {len(lines)} lines to {path}, "
                               f"expected {len(en_lines)}")
    return forward, reverse


# ----------------------------------------------------------------------------- stage entry

def align_ibm2(bitext, n_threads=1):
    """The project's own aligner: IBM Model 2 with a diagonal prior, trained by EM both ways.

    EM has no random step and its expected counts are summed in fixed point, so the links
    are the same bytes for any thread count, run and machine (see ``pivot.pipeline.ibm``).
    """
    e_vocab, f_vocab = Vocab(), Vocab()
    e_tokens, e_offsets = e_vocab.encode(bitext.en)
    f_tokens, f_offsets = f_vocab.encode(bitext.f)
    return ibm.align_both(e_tokens, e_offsets, f_tokens, f_offsets, len(e_vocab), len(f_vocab),
                          n_threads=n_threads)


def align_bitext(bitext, workdir, method="ibm2", pharaoh_path=None, quiet=True, model=3, length=1.0,
                 n_threads=1):
    """Word-align a :class:`pivot.pipeline.corpus.Bitext`: ragged (link_e, link_f, link_offsets).

    ``method="ibm2"`` (the default): the project's deterministic aligner (:func:`align_ibm2`).
    ``method="eflomal"``: run eflomal both ways (its sampler seeds itself from the operating
    system: two runs give different links) in ``workdir`` and symmetrise with
    grow-diag-final-and. ``method="pharaoh"``: read precomputed, already symmetrised
    links from ``pharaoh_path``, line-aligned with the bitext as saved (``bitext.en``),
    and validate them against the sentence lengths. Nothing is cached here.
    """
    e_lengths, f_lengths = bitext.lengths()
    if method == "ibm2":
        return align_ibm2(bitext, n_threads=n_threads)
    if method == "eflomal":
        forward, reverse = run_eflomal(bitext.en, bitext.f, workdir, quiet=quiet, model=model,
                                       length=length)
        return symmetrize(forward, reverse, e_lengths, f_lengths,
                          Path(workdir) / "fwd.align", Path(workdir) / "rev.align")
    if method == "pharaoh":
        if pharaoh_path is None:
            raise InputError("align method 'pharaoh' needs a path to the alignment file")
        return read_pharaoh(pharaoh_path, e_lengths, f_lengths)
    raise InputError(f"unknown align method {method!r} (ibm2, eflomal or pharaoh)")


# ----------------------------------------------------------------------------- chunked stage

LINKS_MANIFEST = "links.json"


def links_chunk_name(k):
    """File name of chunk ``k`` of :func:`align_corpus`'s output."""
    return f"links-{k:05d}.npz"


def _corpus_meta(corpus_dir):
    """(lang, n_pairs, English path, foreign path) of a folder written by Bitext.save."""
    d = Path(corpus_dir)
    meta_path = d / "meta.json"
    if not meta_path.is_file():
        raise InputError("no meta.json: not a saved bitext directory", path=d)
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    try:
        lang, n_pairs = str(meta["lang"]), int(meta["n_pairs"])
    except (KeyError, TypeError, ValueError):
        raise InputError("meta.json lacks lang or n_pairs", path=meta_path) from None
    return lang, n_pairs, d / "bitext.en", d / f"bitext.{lang}"


def chunk_starts(path, chunk_sentences):
    """(number of lines, byte offset of line k * chunk_sentences for every chunk k) of a file.

    Lines as :meth:`pivot.pipeline.corpus.Bitext.load` reads them: ended by ``\n``, an
    unterminated last line counted. One pass over the bytes in blocks; nothing is decoded.
    """
    every = int(chunk_sentences)
    starts, n, pos, last = [0], 0, 0, b"\n"
    with _open_binary(path) as fh:
        while True:
            block = fh.read(1 << 24)
            if not block:
                break
            newlines = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 0x0A)
            # line L (0-based) starts after the file's newline number L - 1
            for line in range((n // every + 1) * every, n + len(newlines) + 1, every):
                starts.append(pos + int(newlines[line - 1 - n]) + 1)
            n, pos, last = n + len(newlines), pos + len(block), block[-1:]
    n_lines = n + (last != b"\n")
    return n_lines, starts[:-(-n_lines // every)]


def tokenize_chunk(en_path, f_path, e_range, f_range, first_line, out_path) -> int:
    """One chunk of a saved corpus folder: its lines of both files (byte ranges ``[a, b)``), each
    side encoded over a vocabulary of the chunk's own (ids in order of first occurrence in the
    chunk) -> a bundle of the local ids (int32 ``e_tokens``, ``f_tokens``, int64 offsets) and
    each vocabulary's words (``e_words``, ``f_words``: UTF-8, one a line). Returns its pairs.
    ``first_line``: the chunk's first line in the files (0-based), for the errors' line numbers.
    """
    arrays = {}
    for side, path, (a, b) in (("e", en_path, e_range), ("f", f_path, f_range)):
        with open(path, "rb") as fh:
            fh.seek(a)
            data = fh.read(b - a)
        lines = [line for _, line in _iter_lines(io.BytesIO(data), path, start=first_line + 1)]
        del data
        vocab = Vocab()
        arrays[f"{side}_tokens"], arrays[f"{side}_offsets"] = vocab.encode(lines)
        arrays[f"{side}_words"] = np.frombuffer("\n".join(vocab.tokens).encode("utf-8"), dtype=np.uint8)
    save_bundle(out_path, **arrays)
    return len(lines)


def remap_shard(tok_path, map_path, first, stop, out_path) -> None:
    """Sentences [first, stop) of a tokenized chunk, their local ids mapped to the corpus's ids
    -> a shard file of pivot.pipeline.ibm_shards (``e_tokens``, ``e_offsets``, ``f_tokens``,
    ``f_offsets``, shard-local offsets)."""
    arrays = {}
    with open_bundle(tok_path) as tok, open_bundle(map_path) as ids:
        for side in ("e", "f"):
            offsets = tok[f"{side}_offsets"][first:stop + 1]
            local = tok[f"{side}_tokens"][offsets[0]:offsets[-1]]
            arrays[f"{side}_tokens"] = ids[f"{side}_ids"][local]
            arrays[f"{side}_offsets"] = offsets - offsets[0]
    save_bundle(out_path, **arrays)


def shard_cuts(e_offsets, f_offsets, max_cells):
    """Cut points [0, ..., n] of a chunk's sentences into runs of at most ``max_cells`` E-step
    lookups ((n_s + 1) m_s a sentence pair, n English and m foreign tokens), at least one
    sentence a run: shards of about equal work, whatever the sentences' lengths."""
    cum = np.zeros(len(e_offsets), dtype=np.int64)
    np.cumsum((np.diff(e_offsets) + 1) * np.diff(f_offsets), out=cum[1:])
    cuts, a, n = [0], 0, len(cum) - 1
    while a < n:
        a = max(a + 1, int(np.searchsorted(cum, cum[a] + max_cells, side="right")) - 1)
        cuts.append(a)
    return cuts


def chunk_words(array) -> list[str]:
    """The words of a tokenized chunk's vocabulary (``e_words`` / ``f_words`` of tokenize_chunk), in id order."""
    text = array.tobytes().decode("utf-8")
    return text.split("\n") if text else []


def _encode_corpus(corpus_dir, chunk_sentences, scratch):
    """A job (pivot.pipeline.engine.Engine.run): encode a corpus folder into shard files ``scratch/enc-<j>.arrays``: (n_pairs, n_e, n_f,
    shards), shards a list of (chunk, first sentence, stop) in corpus order.

    Ids are given in order of first occurrence over the whole corpus (one
    :class:`pivot.pipeline.corpus.Vocab` per side), hence the very ids :func:`align_ibm2`
    gives: one task a chunk of ``chunk_sentences`` pairs reads its lines and encodes them over a
    vocabulary of its own (:func:`tokenize_chunk`); here the chunks' vocabularies join in chunk
    order (a word new to the corpus gets the next id: its first occurrence in the corpus is in
    this chunk, after the chunk's earlier new words) and each chunk is cut into shards of about
    equal work (:func:`shard_cuts`, ``ibm_shards.SHARD_CELLS`` lookups: a chunk of long
    biomedical sentences is many times the work of one of short ones); one task a shard maps its
    ids (:func:`remap_shard`). A shard file (a bundle, pivot.pipeline.bundle) holds int32 tokens
    and shard-local int64 offsets of both sides. InputError when the files' lines disagree with
    each other or with meta.json's n_pairs.
    """
    chunk_sentences = int(chunk_sentences)
    scratch = Path(scratch)
    _, n_pairs, en_path, f_path = _corpus_meta(corpus_dir)
    (n_e, e_starts), (n_f, f_starts) = chunk_starts(en_path, chunk_sentences), chunk_starts(f_path, chunk_sentences)
    if n_e != n_f:
        raise InputError(f"{en_path.name} has {n_e} lines but {f_path.name} {n_f}: the sides must be "
                         "line-aligned", path=en_path)
    if n_e != n_pairs:
        raise InputError(f"{n_e} lines but meta.json says n_pairs={n_pairs}", path=en_path)
    n_chunks = len(e_starts)
    ranges = lambda starts, path: list(zip(starts, starts[1:] + [os.path.getsize(path)]))  # noqa: E731
    tok = [scratch / f"tok-{k:05d}.arrays" for k in range(n_chunks)]
    lang = f_path.suffix[1:]
    yield Batch(tokenize_chunk, [(str(en_path), str(f_path), e, f, k * chunk_sentences, str(tok[k]))
                                 for k, (e, f) in enumerate(zip(ranges(e_starts, en_path), ranges(f_starts, f_path)))],
                name=f"align.{lang}-tokenize")
    e_vocab, f_vocab = Vocab(), Vocab()
    maps = [scratch / f"ids-{k:05d}.arrays" for k in range(n_chunks)]
    shards, e_words, f_words = [], [], []
    for k in range(n_chunks):
        with open_bundle(tok[k]) as z:
            e_words, f_words = chunk_words(z["e_words"]), chunk_words(z["f_words"])
            cuts = shard_cuts(z["e_offsets"], z["f_offsets"], ibm_shards.SHARD_CELLS)
        save_bundle(maps[k], e_ids=np.array([e_vocab.add(w) for w in e_words], dtype=np.int32),
                    f_ids=np.array([f_vocab.add(w) for w in f_words], dtype=np.int32))
        shards += [(k, a, b) for a, b in zip(cuts, cuts[1:])]
    # The vocabularies' sizes are all that is left to know of them: a build runs every
    # language's alignment side by side, and their word dicts would wait here for the tasks.
    n_e_vocab, n_f_vocab = len(e_vocab), len(f_vocab)
    del e_vocab, f_vocab, e_words, f_words
    yield Batch(remap_shard, [(str(tok[k]), str(maps[k]), a, b, str(scratch / f"enc-{j:05d}.arrays"))
                              for j, (k, a, b) in enumerate(shards)], name=f"align.{lang}-ids")
    for path in tok + maps:
        path.unlink()
    return n_pairs, n_e_vocab, n_f_vocab, shards


def concat_links(parts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Shards' links (bundles, in order) as one ragged list: (link_e, link_f, link_offsets), the
    offsets rebased so that sentence i's links are [offsets[i], offsets[i + 1])."""
    es, fs, offs, base = [], [], [np.zeros(1, dtype=np.int64)], 0
    for path in parts:
        with open_bundle(path) as z:
            es.append(z["link_e"])
            fs.append(z["link_f"])
            offs.append(z["link_offsets"][1:] + base)
            base += int(z["link_offsets"][-1])
    return np.concatenate(es), np.concatenate(fs), np.concatenate(offs)


def join_links(parts, out_path) -> int:
    """One output chunk of :func:`align_corpus`: its shards' links joined (:func:`concat_links`)
    -> ``out_path`` (.npz of int32 link_e, link_f, int64 link_offsets). Returns its sentences."""
    link_e, link_f, offsets = concat_links(parts)
    save_npz(out_path, link_e=link_e.astype(np.int32), link_f=link_f.astype(np.int32), link_offsets=offsets)
    return len(offsets) - 1


def _split_links(link_e, link_f, link_offsets, n_pairs, chunk_sentences):
    """Yield (k, link_e, link_f, chunk-local link_offsets) of whole-corpus ragged links."""
    link_offsets = np.asarray(link_offsets, dtype=np.int64)
    for k, a in enumerate(range(0, n_pairs, chunk_sentences)):
        b = min(a + chunk_sentences, n_pairs)
        lo, hi = int(link_offsets[a]), int(link_offsets[b])
        yield (k, np.asarray(link_e[lo:hi], dtype=np.int32),
               np.asarray(link_f[lo:hi], dtype=np.int32), link_offsets[a:b + 1] - lo)


def align_corpus(corpus_dir, out_dir, *, method="ibm2", chunk_sentences=50000, n_threads=1,
                 pharaoh_path=None, quiet=True, model=3, length=1.0, scratch_dir=None,
                 index_cache=True, engine=None):
    """Word-align a saved corpus folder chunk by chunk; write the links in chunks of sentences.

    ``corpus_dir`` is a folder written by :meth:`pivot.pipeline.corpus.Bitext.save`
    (``bitext.en``, ``bitext.<lang>``, ``meta.json`` with "lang" and "n_pairs"). Writes to
    ``out_dir``:

    * ``links-00000.npz``, ``links-00001.npz``, ...: chunk k covers sentence pairs
      [k * chunk_sentences, min((k + 1) * chunk_sentences, n_pairs)) and holds int32
      ``link_e``, int32 ``link_f`` (0-based positions in the sentence, English first) and
      int64 ``link_offsets`` (chunk-local: from 0, one more than the chunk's sentences);
    * ``links.json``: {"n_pairs", "chunk_sentences", "n_chunks"}, written last (a folder
      without it is unfinished; an earlier one is removed first).

    Each file is written under a temporary name and renamed (``os.replace``); chunk files
    left over from an earlier run with more chunks are removed. Returns the links.json dict.

    ``method="ibm2"`` (default): the corpus is read line by line and encoded once into
    chunks of int32 arrays in a scratch folder (one vocabulary per side, ids in order of first
    occurrence); then both directions' EM and Viterbi run by chunk, as tasks on ``engine``
    (:func:`pivot.pipeline.ibm_shards.align_both_sharded`; None: in this process), each chunk's
    links written by its task. The links are the same bytes as :func:`align_bitext`'s
    (``ibm2``) on the same corpus, for any ``chunk_sentences``, ``n_threads`` and engine.
    ``n_threads`` are the kernels' threads in this process (a cluster's tasks run on one).
    ``index_cache`` keeps the E-step's table indices on the scratch disk between EM
    iterations (faster, same links).
    ``method="eflomal"`` or ``"pharaoh"``: the corpus is loaded whole and aligned as by
    :func:`align_bitext`; only the output is chunked.

    ``scratch_dir``: where the temporary folder goes (default ``out_dir``; on a cluster, a
    folder its workers see); it is removed at the end, also on error.
    """
    engine = engine if engine is not None else Engine(workers=1)
    return engine.run(align_corpus_job(
        corpus_dir, out_dir, method=method, chunk_sentences=chunk_sentences, n_threads=n_threads,
        pharaoh_path=pharaoh_path, quiet=quiet, model=model, length=length, scratch_dir=scratch_dir,
        index_cache=index_cache, task_threads=n_threads if engine.in_process else 1))[0]


def align_corpus_job(corpus_dir, out_dir, *, method="ibm2", chunk_sentences=50000, n_threads=1, pharaoh_path=None,
                     quiet=True, model=3, length=1.0, scratch_dir=None, index_cache=True, task_threads=1):
    """:func:`align_corpus` as a job of :meth:`pivot.pipeline.engine.Engine.run` (so that the
    build runs every language's alignment side by side): returns the links.json dict.
    ``task_threads``: the kernels' threads of each task (``n_threads`` in this process, 1 on a
    cluster's single-threaded workers); ``n_threads``: of eflomal's and pharaoh's work here.
    """
    chunk_sentences = int(chunk_sentences)
    if chunk_sentences < 1:
        raise ValueError(f"chunk_sentences must be >= 1, got {chunk_sentences}")
    if method not in ("ibm2", "eflomal", "pharaoh"):
        raise InputError(f"unknown align method {method!r} (ibm2, eflomal or pharaoh)")
    _, n_pairs_meta, _, _ = _corpus_meta(corpus_dir)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    manifest = out / LINKS_MANIFEST
    if manifest.exists():
        manifest.unlink()
    scratch_parent = Path(scratch_dir) if scratch_dir is not None else out
    scratch_parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".align-scratch-", dir=scratch_parent))
    written = []

    def write(k, link_e, link_f, link_offsets):
        if k != len(written):
            raise RuntimeError(f"chunk {k} written out of order")
        save_npz(out / links_chunk_name(k), link_e=np.asarray(link_e, dtype=np.int32),
                 link_f=np.asarray(link_f, dtype=np.int32),
                 link_offsets=np.asarray(link_offsets, dtype=np.int64))
        written.append(len(link_offsets) - 1)

    try:
        if method == "ibm2":
            lang, _, _, _ = _corpus_meta(corpus_dir)
            n_pairs, n_e, n_f, shards = yield from _encode_corpus(corpus_dir, chunk_sentences, scratch)
            parts = [scratch / f"links-{j:05d}.arrays" for j in range(len(shards))]
            yield from ibm_shards.align_both_job(
                [scratch / f"enc-{j:05d}.arrays" for j in range(len(shards))], n_e, n_f, parts, scratch,
                n_threads=task_threads, index_cache=index_cache, quiet=quiet, name=f"align.{lang}")
            n_chunks = shards[-1][0] + 1 if shards else 0
            written = yield Batch(join_links, [([str(parts[j]) for j, sh in enumerate(shards) if sh[0] == k],
                                                str(out / links_chunk_name(k))) for k in range(n_chunks)],
                                  name=f"align.{lang}-write")
        else:
            bitext = Bitext.load(corpus_dir)
            n_pairs = len(bitext)
            links = align_bitext(bitext, scratch / "work", method=method,
                                 pharaoh_path=pharaoh_path, quiet=quiet, model=model,
                                 length=length, n_threads=n_threads)
            del bitext
            for k, *chunk in _split_links(*links, n_pairs, chunk_sentences):
                write(k, *chunk)
            n_chunks = len(written)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    expected = [min(chunk_sentences, n_pairs - a) for a in range(0, n_pairs, chunk_sentences)]
    if n_pairs != n_pairs_meta or written != expected:
        raise RuntimeError(f"wrote chunks of {written} sentences for {n_pairs} pairs "
                           f"(meta.json: {n_pairs_meta})")
    for stale in out.glob("links-*.npz"):
        suffix = stale.name[len("links-"):-len(".npz")]
        if suffix.isdigit() and int(suffix) >= n_chunks:
            stale.unlink()
    info = {"n_pairs": n_pairs, "chunk_sentences": chunk_sentences, "n_chunks": n_chunks}
    write_text(manifest, json.dumps(info, indent=2) + "\n")
    return info


def read_links(out_dir):
    """All links of an :func:`align_corpus` folder as whole-corpus ragged arrays (for tests and
    small corpora: it holds everything in memory)."""
    out = Path(out_dir)
    info = json.loads((out / LINKS_MANIFEST).read_text(encoding="utf-8"))
    es, fs, offs, base = [], [], [np.zeros(1, dtype=np.int64)], 0
    for k in range(info["n_chunks"]):
        with np.load(out / links_chunk_name(k), allow_pickle=False) as z:
            es.append(z["link_e"])
            fs.append(z["link_f"])
            offs.append(z["link_offsets"][1:] + base)
            base += int(z["link_offsets"][-1])
    return (np.concatenate(es) if es else np.zeros(0, np.int32),
            np.concatenate(fs) if fs else np.zeros(0, np.int32), np.concatenate(offs))


# ----------------------------------------------------------------------------- the stage


def stage_params(recipe, lang) -> dict:
    settings = {k: v for k, v in recipe["align"].items() if k != "pharaoh"}
    if settings["method"] == "pharaoh":
        files = recipe["align"]["pharaoh"] or {}
        if lang not in files:
            raise InputError(f"[align] method 'pharaoh' needs a file for {lang!r}: pharaoh = {{{lang} = 'path'}}",
                             recipe["_path"])
        settings["pharaoh"] = files[lang]
    # The links are written in chunks of encode's shard size (links-k.npz holds shard k's pairs).
    return {**settings, "chunk_sentences": int(recipe["extract"]["shard_sentences"])}


def stage_data(params, data_root) -> list[Path]:
    if "pharaoh" not in params:
        return []
    from pivot.recipes import DATA_ENV

    path = Path(data_root) / params["pharaoh"]
    if not path.is_file():
        raise InputError(f"alignment file missing; the data root is set by --data DIR or {DATA_ENV}", path)
    return [path]


def run_stage(context):
    """One pivot language's links (align_corpus_job): ibm2's EM and Viterbi by shard as the
    engine's tasks (the same links on any engine), every language's side by side."""
    from pivot.locking import resolve_threads

    params = context.params
    n_threads = resolve_threads(context.threads)
    return (yield from align_corpus_job(
        context.dir("corpus"), context.tmp, method=params["method"], chunk_sentences=params["chunk_sentences"],
        n_threads=n_threads, quiet=context.quiet, model=params["model"], length=params["length"],
        pharaoh_path=context.data_root / params["pharaoh"] if params["method"] == "pharaoh" else None,
        task_threads=n_threads if context.engine.in_process else 1))


def stage_check(recipe, data_root, plan) -> list:
    """Preflight of the align stages: a Pharaoh file of every language, each line ``i-j`` links."""
    from pivot.recipes import DATA_ENV

    align = recipe["align"]
    if align["method"] != "pharaoh":
        return []
    checks = []
    for lang in (b["lang"] for b in recipe["bitext"]):
        path = Path(data_root) / align["pharaoh"][lang]
        if not path.is_file():
            raise InputError(f"[align] pharaoh {lang}: alignment file missing; the data root is set by "
                             f"--data DIR or {DATA_ENV}", path)
        plan.add_input(path, "alignments")
        checks.append(lambda path=path: _check_pharaoh(plan, path))
    return checks


_LINK = re.compile(rb"[0-9]+-[0-9]+")


def _check_pharaoh(plan, path: Path) -> None:
    """Every token of every line an ``i-j`` link (the aligner checks the ranges later)."""
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise InputError(f"cannot open ({exc.strerror or exc})", path) from None
    number = 0
    with fh:
        for number, raw in enumerate(fh, start=1):
            for token in raw.split():
                if not _LINK.fullmatch(token):
                    raise InputError(f"malformed link {token.decode('utf-8', 'backslashreplace')!r} "
                                     "(expected i-j with 0-based integers)", path, number)
    plan.count("alignment lines", number)


STAGE = Stage("align", 1, ("corpus",), ("align", "extract.shard_sentences"), stage_params,
              ("links-*.npz", "links.json"), run_stage,
              "one per language; ibm2: one per shard of pairs (Dask) to encode, co-occur, each E-step, Viterbi",
              "word alignment both ways + grow-diag-final-and", data=stage_data, per_language=True,
              check=stage_check)
