"""The lhs stage: each stored English phrase's PPDB label, the LHS field of an export line.

PPDB's LHS is the syntactic category of a rule ([NN], [VBZ], [NP], ...); readers key on it
(nlpaug 1.1.11 files a pair under the part of speech of its LHS and substitutes a word only
under the part of speech the sentence gives it, so a file of [X] lines substitutes nothing).
This stage labels every phrase that a stored pair uses with pivot.store.labels'
:class:`~pivot.store.labels.LexiconTagger` and its constituent rules:

* trained by the tagger stage (:func:`train_stage`, about 6 CPU s), which needs no other
  stage, only the data root's GENIA-pos train and devel parts (in-domain lexicon, suffixes,
  contextual rules) and the Brown corpus (the lexicon's back-off), so a build can train it
  while the aligner runs; its accuracy is measured there on GENIA-pos test, the way
  pivot.store.labels measures its perceptron (lower-cased random spans of 1-5 tokens, seed 1,
  and lone words), and written with the files' sha256 to ``tagger.json``, whose training
  counts, accuracy and sha256 this stage copies into the database's meta ``lhs``;
* applied to the token-id rows of the used phrases, a task per block of LABEL_BLOCK phrases
  (:func:`label_task`): in a block each distinct token tagged once, each distinct tag sequence
  labelled once (a few seconds for bio's 448k phrases); the blocks' label names are merged
  (sorted) by the stage, the same bytes as one task over all the phrases.

Memory. The stage's job runs in the build's process, beside ppdb2's and combine's, so what it
holds there must not grow with the data. It holds a window of IDS_WINDOW phrase ids (their
presence marks and the used ids among them, bundle.present_windows: 9 bytes an id of the window, 9 MiB), a block of
LABEL_BLOCK used phrases (their token rows, ids or codes: 10 MiB of rows at bio-multi's five
tokens a row, and the last block's while the next is gathered), and what grows: per pivot part
its files' paths and largest id (~0.3 kB a part of ~700k pairs), per block its label names and
task's dict (~3 kB a block of 500k phrases), a few MB at the projected target's 252M stored
phrases. The used ids are the union of each part's distinct ids (:func:`phrase_ids_file`, a
task per part) taken a window of ids at a time (:func:`write_used`, as ppdb2's ``write_ids``)
and written to a scratch file as each window's come; the rows, the codes and the stage's
``lhs.arrays`` are written from it a block at a time (``Blocks``), the codes mapped to the
merged names block by block. The tasks read the English words from the encode stage's
``vocab.en`` itself. Measured alone (bench/bench_lhs_memory.py), 40 / 53 MiB above the
process's RSS at bio / bio-multi, and flat on synthetic parts of 7M-28M stored phrases
(bench/bench_lhs_growth.py). (Until session 15 it held a mark per phrase id, the used ids and
their codes whole, 10 bytes a stored phrase and 1 a phrase id, ~2.6 GiB at the target, and
the vocabulary as a Vocab.)

The tagger stage's key holds the tagger's version (labels.LEXICON_TAGGER_VERSION) and the
training files' sha256, and this stage's key the tagger's content key, so a changed tagger or
corpus trains and relabels; a recipe whose data root lacks these files
says ``[ppdb2] lhs = "x"``, and the meta then says every LHS is [X] (pivot export warns).
"""
from __future__ import annotations

import gc
import json
import logging
import os
import random
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from pivot.arrays import unique
from pivot.atomic import atomic_path
from pivot.pipeline.bundle import IDS_WINDOW, Blocks, open_bundle, present_windows, save_bundle
from pivot.pipeline.stage import VOLATILE, Stage
from pivot.recipes import fingerprint_files
from pivot.store import labels

log = logging.getLogger("pivot")

#: The recipe's choices ([ppdb2] lhs): labelled by the tagger, or [X] for every phrase.
CHOICES = ("tagged", "x")
#: What the meta calls the tagger.
TAGGER = "lexicon+suffix+rules (pivot.store.labels.LexiconTagger)"
#: The data files the tagger reads, under the data root.
TRAIN_FILES = tuple(labels.GENIA_DIR / name for name in labels.TRAIN_FILES)
TEST_FILE = labels.GENIA_DIR / labels.TEST_FILE
BACKOFF_FILE = labels.BROWN_ZIP


def data_files(data_root) -> list[Path]:
    """The files a labelling build reads (fingerprinted into the stage key; preflight checks them)."""
    root = Path(data_root)
    return [root / p for p in (*TRAIN_FILES, TEST_FILE, BACKOFF_FILE)]


@contextmanager
def _no_gc():
    """Training makes millions of small tuples and no cycles: the collector's full passes over
    them cost more than the training (about 1.5 s of 5 measured), so it pauses meanwhile."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def brown_tokens(path) -> list[tuple[str, str]]:
    """Every (lower-cased token, PTB tag) of the Brown zip: pivot.pipeline.mono's reader (the one
    the LM text uses), each `word/tag` split and mapped by labels.brown_token."""
    from pivot.pipeline.mono import read_brown_tagged

    return [token for sentence in read_brown_tagged(path) for word, tag in sentence
            for token in labels.brown_token(word, tag)]


def brown_counts(path) -> Counter:
    """Counter of brown_tokens(path): each distinct `word/tag` of the zip split and mapped once
    (a tenth of the calls), its tokens counted as often as it occurs."""
    from pivot.pipeline.mono import read_brown_tagged

    raw = Counter(token for sentence in read_brown_tagged(path) for token in sentence)
    out = Counter()
    for (word, tag), n in raw.items():
        for token in labels.brown_token(word, tag):
            out[token] += n
    return out


def train(data_root) -> tuple[labels.LexiconTagger, dict]:
    """(tagger, info): the lexicon tagger of the data root, its training counts and its accuracy
    on GENIA-pos test."""
    root = Path(data_root)
    with _no_gc():
        sentences = [s for p in TRAIN_FILES for s in labels.read_conll(root / p)]
        backoff = brown_counts(root / BACKOFF_FILE)
        base = labels.LexiconTagger.train(sentences, backoff)
        tagger = base.with_rules(labels.window_spans(sentences))
        gold = labels.read_conll(root / TEST_FILE)
    spans = labels.phrase_spans(gold, random.Random(labels.SEED + 1))
    words = [[(w.lower(), t)] for s in gold for w, t in s]
    info = {
        "train_sentences": len(sentences), "train_tokens": sum(map(len, sentences)),
        "backoff_tokens": sum(backoff.values()), "lexicon_words": len(tagger.lexicon),
        "suffix_keys": len(tagger.suffixes), "rules": [list(r) for r in tagger.rules],
        "settings": {"suffix_max": labels.SUFFIX_MAX, "suffix_min_count": labels.SUFFIX_MIN_COUNT,
                     "rare_max": labels.RARE_MAX, "max_rules": labels.MAX_RULES,
                     "min_rule_gain": labels.MIN_RULE_GAIN},
        # GENIA-pos test, lower-cased: random spans of 1-5 tokens (seed 1, four per sentence, the
        # shape of stored phrases) with and without the rules, and every word alone
        "test_tokens": sum(map(len, gold)),
        "test_accuracy_spans": round(labels.accuracy(tagger, spans), 4),
        "test_accuracy_spans_without_rules": round(labels.accuracy(base, spans), 4),
        "test_accuracy_words": round(labels.accuracy(tagger, words), 4),
    }
    return tagger, info


def train_stage(tmp: Path, data_root) -> dict:
    """The tagger stage: trains the tagger of the data root and writes ``tagger.json`` (the
    lexicon, suffixes, default tag and rules; the training counts and GENIA-pos test accuracy;
    the training files' sha256), the lhs stage's input. It needs no stage, only the data files,
    so a build can train it while the aligner runs."""
    t0 = time.process_time()
    tagger, info = train(data_root)
    root = Path(data_root)
    files = {str(p): sha for p, sha in zip((*TRAIN_FILES, TEST_FILE, BACKOFF_FILE),
                                           fingerprint_files(data_files(root)).values())}
    save_tagger_json(tmp / TAGGER_FILE, tagger, info=info, files=files)
    # CPU seconds vary run to run: timings.json is not part of the artifact's content key
    (tmp / "timings.json").write_text(json.dumps({"train_cpu_seconds": round(time.process_time() - t0, 2)}))
    log.info("tagger: trained in %.1f CPU s (GENIA-pos test: spans %.4f, lone words %.4f)",
             time.process_time() - t0, info["test_accuracy_spans"], info["test_accuracy_words"])
    return info


#: The tagger stage's file.
TAGGER_FILE = "tagger.json"


def save_tagger_json(path, tagger: labels.LexiconTagger, *, info: dict, files: dict) -> None:
    """The tagger as JSON (keys sorted, so the same tagger is the same bytes)."""
    obj = {"version": labels.LEXICON_TAGGER_VERSION, "lexicon": tagger.lexicon, "suffixes": tagger.suffixes,
           "default": tagger.default, "rules": [list(r) for r in tagger.rules], "info": info, "files": files}
    with atomic_path(path) as tmp:
        Path(tmp).write_text(json.dumps(obj, sort_keys=True, separators=(",", ":")))


def load_tagger_json(path) -> tuple[labels.LexiconTagger, dict, dict]:
    """(tagger, info, files) of a tagger stage's file."""
    obj = json.loads(Path(path).read_text())
    if obj.get("version") != labels.LEXICON_TAGGER_VERSION:
        raise ValueError(f"{path}: a tagger of version {obj.get('version')}, this code tags with "
                         f"version {labels.LEXICON_TAGGER_VERSION}")
    return labels.LexiconTagger(obj["lexicon"], obj["suffixes"], obj["default"], obj["rules"]), obj["info"], obj["files"]


#: Used phrases a labelling task labels (label_task). A phrase's label is a function of its own
#: tokens (their tags, then the rules within the phrase), so any cut gives the same labels; each
#: task reads the tagger and the English words (a fraction of a CPU second on bio-multi). It is
#: also the block by which this process reads and writes the used ids and codes.
LABEL_BLOCK = 500_000


def build(tmp: Path, *, part_paths: list[Path], e_rows, e_tokens, tagger_dir,
          engine=None, block: int = LABEL_BLOCK, window: int = IDS_WINDOW) -> dict:
    """The stage: writes ``lhs.arrays`` (``ids``: the used phrase ids, ascending; ``code``: each
    one's label, an index into ``names`` of ``lhs.json``) and ``lhs.json`` (the meta ``lhs``)
    with the tagger of the tagger stage's folder ``tagger_dir`` (:func:`train_stage`). The used
    phrases are labelled ``block`` at a time by tasks of ``engine`` (label_task; None: in this
    process), their labels' names merged here (sorted, as one task over all would give them).
    ``e_rows``: the English phrases' token rows by id, or a function of ascending ids giving
    their rows (the stage's: it reads the used phrases' rows ``block`` at a time, never every
    phrase's, 28 bytes a phrase id). ``e_tokens``: the English words by id, or the file of them
    (one a line, line k holding id k: Vocab.save's, the encode stage's ``vocab.en``), which the
    tasks then read as it is (the stage's: this process never holds the vocabulary).

    Memory of this process: a window of ``window`` phrase ids' marks and ids, a block of
    ``block`` used phrases' rows, ids or codes, and a few numbers per pivot part and per block;
    the used ids and codes go to files as they come (:func:`write_used`, :func:`_codes`), never
    an array with an entry per stored phrase or per phrase id."""
    from pivot.pipeline.engine import Engine

    engine = engine or Engine(workers=1)
    return engine.run(_build_job(Path(tmp), part_paths, e_rows, e_tokens, Path(tagger_dir), block, window))[0]


def _build_job(tmp: Path, part_paths, e_rows, e_tokens, tagger_dir: Path, block: int, window: int):
    """A job of Engine.run: the used phrases (phrase_ids_file per part, write_used), their labels
    by block (label_task), merged block by block into the stage's file."""
    from pivot.pipeline.engine import Batch

    t0 = time.process_time()
    tagger_path = tagger_dir / TAGGER_FILE
    _, info, files = load_tagger_json(tagger_path)
    timings = tagger_dir / "timings.json"
    t_train = json.loads(timings.read_text())["train_cpu_seconds"] if timings.is_file() else None
    rows_of = e_rows if callable(e_rows) else (lambda ids: np.asarray(e_rows[ids]))
    # the used ids: each part's distinct ids by a task, their union here a window of ids at a
    # time, written to a scratch file as each window's come (a mark per phrase id and the used
    # ids whole were 9 bytes a phrase id and 8 a stored phrase in this process)
    id_paths = [tmp / f".ids-{j:04d}.arrays" for j in range(len(part_paths))]
    n_e = max((yield Batch(phrase_ids_file, list(zip(part_paths, id_paths)), name="lhs-ids")), default=0)
    used_path = tmp / ".used.bin"
    n_used = write_used(used_path, n_e, id_paths, window)
    for path in id_paths:
        path.unlink()
    # the tasks read their rows from a file (written ``block`` used phrases at a time), the
    # words from another (one a line, by id)
    rows_path = tmp / ".rows.arrays"
    width = rows_of(np.zeros(0, np.int64)).shape[1]
    ranges = [(a, min(a + block, n_used)) for a in range(0, n_used, block)]
    save_bundle(rows_path, rows=Blocks(np.int32, (n_used, width),
                                       (rows_of(read_used(used_path, a, b)) for a, b in ranges)))
    scratch = [rows_path, used_path]
    words_path = tmp / ".words.txt"
    if isinstance(e_tokens, (str, os.PathLike)):
        # a word file an interrupted run of an older version of the stage left in this folder
        # (it wrote one always) goes: the artifact holds its declared files only
        words_path.unlink(missing_ok=True)
        words_path = Path(e_tokens)
    else:
        scratch.append(words_path)
        with open(words_path, "w", encoding="utf-8", newline="\n") as fh:
            fh.writelines(w + "\n" for w in e_tokens)
    paths = [tmp / f".lhs-{k:04d}.arrays" for k in range(len(ranges))]
    done = yield Batch(label_task, [(rows_path, a, b, words_path, tagger_path, path)
                                    for (a, b), path in zip(ranges, paths)], name="lhs-labels")
    # names: every block's, sorted (label_rows' over all the phrases: the sorted set of theirs)
    block_names = []
    for path in paths:
        with open_bundle(path) as z:
            block_names.append(z["names"].tolist())
    names = sorted(set().union(*block_names))
    # a block's own code k is the name block_names[k]: its index among all the names
    to_names = [np.array([names.index(n) for n in own], np.uint16) for own in block_names]
    counts = np.zeros(len(names), np.int64)
    for path, own in zip(paths, to_names):
        with open_bundle(path) as z:
            counts += np.bincount(own[z["code"]], minlength=len(names))
    save_bundle(tmp / "lhs.arrays", ids=Blocks(np.int64, (n_used,), (read_used(used_path, a, b) for a, b in ranges)),
                code=Blocks(np.uint16, (n_used,), _codes(paths, to_names)))
    for path in (*paths, *scratch):
        path.unlink()
    t_label = sum(d.get("cpu_seconds", 0.0) for d in done)
    meta = {"labels": f"{TAGGER}, trained on GENIA-pos train+devel with the Brown corpus as back-off",
            "tagger": "lexicon-suffix", "version": labels.LEXICON_TAGGER_VERSION, "files": files,
            **info, "n_phrases": int(n_used), "names": names,
            "distribution": dict(zip(names, counts.tolist()))}
    (tmp / "lhs.json").write_text(json.dumps(meta, indent=1, sort_keys=True))
    # CPU seconds vary run to run: timings.json is not part of the artifact's content key
    # (train: the tagger stage's, which this stage reads; label: the tasks' sum)
    (tmp / "timings.json").write_text(json.dumps({"train_cpu_seconds": t_train,
                                                  "label_cpu_seconds": round(t_label, 2),
                                                  "stage_cpu_seconds": round(time.process_time() - t0, 2)}))
    log.info("lhs: %d phrases labelled in %.1f CPU s (%d tasks)", n_used, t_label, len(ranges))
    return meta


def _codes(paths, to_names):
    """Each block's codes (label_task's files ``paths``) as indices into all the names (its own
    code k is to_names[k]), a block at a time."""
    for path, own in zip(paths, to_names):
        with open_bundle(path) as z:
            yield own[z["code"]]


def phrase_ids_file(part_path, out_path) -> int:
    """The distinct English phrase ids of one pivot part's pairs (as e1 or e2), ascending
    (int64), written to ``out_path`` as ``e``; returns the largest + 1 (0: none) (a task: its
    memory is one part's pairs). A file already there (an interrupted run's) is kept."""
    out_path = Path(out_path)
    if not out_path.is_file():
        with open_bundle(part_path) as z:
            e = unique(np.concatenate([z["e1"], z["e2"]]).astype(np.int64))
        save_bundle(out_path, e=e)
    with open_bundle(out_path) as z:
        n = z.shape("e")[0]
        return int(z.memmap("e")[n - 1]) + 1 if n else 0


def write_used(out_path, n_e: int, paths, window: int = IDS_WINDOW) -> int:
    """The used phrase ids, the ids 0..n_e-1 that member ``e`` of some file of ``paths``
    (phrase_ids_file's) holds, ascending, to ``out_path`` as raw int64 (read_used), a window of
    ``window`` ids at a time (bundle.present_windows: a window's marks, not one per phrase id);
    returns their number."""
    n = 0
    with atomic_path(out_path) as tmp, open(tmp, "wb") as fh:
        for _, ids in present_windows(n_e, paths, "e", window):
            fh.write(np.ascontiguousarray(ids, "<i8").tobytes())
            n += len(ids)
    return n


def read_used(path, a: int, b: int) -> np.ndarray:
    """Used ids a:b of write_used's file (int64), read into a new array (no map kept)."""
    return np.fromfile(path, dtype="<i8", count=b - a, offset=8 * a).astype(np.int64)


def label_task(rows_path, a: int, b: int, words_path, tagger_path, out_path) -> dict:
    """The labels of used phrases a:b (rows ``rows`` of ``rows_path``, ids into the words of
    ``words_path``, one a line) by the tagger of ``tagger_path`` (LexiconTagger.label_rows),
    written to ``out_path`` as ``code`` (uint16) and the ``names`` they index (a task)."""
    out_path = Path(out_path)
    if out_path.is_file():
        return {"reused": True}
    from pivot.pipeline.corpus import Vocab

    t0 = time.process_time()
    tagger, _, _ = load_tagger_json(tagger_path)
    with open_bundle(rows_path) as z:
        rows = np.array(z.memmap("rows")[a:b])
    # the words as the stage read them before it gave the tasks encode's vocab.en itself
    words = Vocab.load(words_path).tokens
    code, names = tagger.label_rows(rows, words)
    save_bundle(out_path, code=code, names=np.array(names, dtype=str))
    return {"reused": False, "n_phrases": b - a, "cpu_seconds": round(time.process_time() - t0, 2)}


def read(folder) -> tuple[dict, dict]:
    """(labels by phrase id, meta) of a finished lhs stage; the meta holds its CPU seconds."""
    labels_of, meta = read_labels(folder)
    ids = labels_of.ids
    return labels_of(ids), meta


class Labels:
    """The labels of an lhs stage as a function of phrase ids (ascending): ``labels_of(ids)`` is
    {id: label} for those of the ids the stage labelled. The database write asks for one
    block of ids at a time, so the labels of millions of phrases are never one dict.

    Given ``path`` (read_labels: the stage's ``lhs.arrays``) rather than arrays, every question
    reads the bundle's memory maps and lets them go after: the build's process then never holds
    every labelled phrase's id and code (10 bytes a stored phrase, as arrays or as the mapped
    pages it touched, which its RSS counts); :meth:`within` copies a block's out."""

    def __init__(self, ids: np.ndarray | None, code: np.ndarray | None, names: list, path=None):
        self._ids, self._code, self.names = ids, code, np.array(names, dtype=object)
        self.path = None if path is None else Path(path)

    def _maps(self) -> tuple[np.ndarray, np.ndarray]:
        if self.path is None:
            return self._ids, self._code
        with open_bundle(self.path) as z:
            return z.memmap("ids"), z.memmap("code")

    @property
    def ids(self) -> np.ndarray:
        """Every labelled id, ascending (an array: for a whole stage's labels at once)."""
        return np.array(self._maps()[0])

    def within(self, lo: int, hi: int) -> Labels:
        """The labels of ids lo <= id < hi only (what a task of the write is handed for its block)."""
        ids, code = self._maps()
        a, b = np.searchsorted(ids, [lo, hi])
        return Labels(np.array(ids[a:b]), np.array(code[a:b]), self.names)

    def __call__(self, ids) -> dict:
        ids = np.asarray(ids, dtype=np.int64)
        mine, code = self._maps()
        if not len(mine) or not len(ids):
            return {}
        # only the map's rows between the first and the last id asked are read
        a, b = np.searchsorted(mine, [ids[0], ids[-1] + 1]) if (np.diff(ids) >= 0).all() else (0, len(mine))
        mine, code = np.asarray(mine[a:b]), np.asarray(code[a:b])
        if not len(mine):
            return {}
        pos = np.minimum(np.searchsorted(mine, ids), len(mine) - 1)
        found = mine[pos] == ids
        return dict(zip(ids[found].tolist(), self.names[code[pos[found]]].tolist()))


def read_labels(folder) -> tuple[Labels, dict]:
    """(labels as a function of the ids, meta) of a finished lhs stage (see :func:`read`)."""
    folder = Path(folder)
    meta = json.loads((folder / "lhs.json").read_text())
    timings = folder / "timings.json"
    if timings.is_file():
        meta["cpu_seconds"] = json.loads(timings.read_text())
    # The ids' order checked a million at a time through a memory map (np.diff of all of them
    # at once was 9 bytes a labelled phrase); the labels are read where asked (Labels' path).
    with open_bundle(folder / "lhs.arrays") as z:
        ids = z.memmap("ids")
    for a in range(0, len(ids), 1 << 20):
        if not (np.diff(ids[max(a - 1, 0):a + (1 << 20)]) > 0).all():
            raise ValueError(f"{folder / 'lhs.arrays'}: the phrase ids are not ascending")
    del ids
    return Labels(None, None, meta.pop("names"), path=folder / "lhs.arrays"), meta


# ------------------------------------------------------------------------------ the stages


def labelled(recipe) -> bool:
    """Whether the recipe labels its phrases by the tagger (else [X] for every phrase)."""
    return recipe["ppdb2"]["lhs"] == "tagged"


def tagger_params(recipe) -> dict:
    return {"tagger_version": labels.LEXICON_TAGGER_VERSION}  # the code's, not a recipe setting


def tagger_data(params, data_root) -> list[Path]:
    return data_files(data_root)


def run_tagger(context):
    """The lexicon tagger trained on the data root's GENIA-pos and Brown: one task, which on a
    cluster trains on a worker while the aligner's tasks run."""
    from pivot.pipeline.engine import Batch

    yield Batch(train_stage, [(context.tmp, context.data_root)], name="tagger")


def tagger_check(recipe, data_root, plan) -> list:
    """Preflight of the tagger's training text (lhs = "tagged"): GENIA-pos's `token<TAB>tag`
    files parse whole (half a second for the three); the Brown zip opens and holds its
    `brown/cXNN` files."""
    from pivot.errors import InputError
    from pivot.recipes import DATA_ENV

    if not labelled(recipe):
        return []
    checks = []
    for path in data_files(data_root):
        if not path.is_file():
            raise InputError(f'[ppdb2] lhs = "tagged" trains the phrase labeller on GENIA-pos and the Brown '
                             f"corpus, and this file is missing; the data root is set by --data DIR or "
                             f'{DATA_ENV} (a data root without them needs [ppdb2] lhs = "x": every '
                             "LHS [X])", path)
        plan.add_input(path, "tagged text")
        checks.append(lambda path=path: _check_tagged(plan, path))
    return checks


def _check_tagged(plan, path: Path) -> None:
    import re
    import zipfile

    from pivot.errors import InputError

    if path.suffix == ".zip":
        try:
            with zipfile.ZipFile(path) as z:
                ok = any(re.fullmatch(r"brown/c[a-r]\d\d", n) for n in z.namelist())
        except zipfile.BadZipFile as exc:
            raise InputError(f"not a readable zip ({exc})", path) from None
        if not ok:
            raise InputError("no Brown corpus files (brown/cXNN) in the zip", path)
    elif not labels.read_conll(path):
        raise InputError("no tagged sentences (`token<TAB>tag` lines)", path)
    plan.count("tagged files", 1)


def stage_params(recipe) -> dict:
    return {"lhs": recipe["ppdb2"]["lhs"]}


def run_stage(context) -> None:
    """Each stored phrase's PPDB label (phrase.lhs) by the tagger stage's tagger."""
    from pivot.pipeline import pivoting, translation

    translation_dir = context.dir("translation")
    build(context.tmp, part_paths=pivoting.part_paths(context.dir("pivot")),
          e_rows=lambda ids: translation.english_rows(translation_dir, ids)[0],
          e_tokens=context.dir("encode") / "vocab.en", tagger_dir=context.dir("tagger"),
          engine=context.engine)


TAGGER_STAGE = Stage("tagger", 1, (), (), tagger_params, (TAGGER_FILE, VOLATILE), run_tagger, "one",
               "the lexicon + suffix + rules tagger trained on GENIA-pos and Brown (no stage: only data files)",
               data=tagger_data, when=labelled, check=tagger_check)
STAGE = Stage("lhs", 3, ("pivot", "translation", "encode", "tagger"), ("ppdb2.lhs",), stage_params,
              ("lhs.arrays", "lhs.json", VOLATILE), run_stage,
              "one per block of used phrases (each: per distinct token, then per tag sequence)",
              "each stored phrase's PPDB label (LHS) by the tagger stage's tagger", when=labelled)
