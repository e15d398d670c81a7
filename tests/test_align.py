"""Unit tests of pivot.pipeline.links (grow-diag-final-and by hand, Pharaoh IO) and pivot.pipeline.align
(a real eflomal run, the chunked stage)."""
import os
import random

import numpy as np
import pytest

from pivot.pipeline.align import run_eflomal
from pivot.pipeline.links import (format_pharaoh, grow_diag_final_and, parse_pharaoh, read_pharaoh, symmetrize,
                                  write_pharaoh)
from pivot.errors import InputError

# ----------------------------------------------------------------------------- grow-diag-final-and

# Example 1, a 5x5 sentence (rows i = English, columns j = foreign).
#   F = forward  {(0,0), (1,1), (2,2), (4,3)}
#   R = reverse  {(0,0), (1,1), (2,1), (4,4)}
#
#        F             R          intersection A      after GROW-DIAG     after FINAL-AND
#     j 0 1 2 3 4   j 0 1 2 3 4     j 0 1 2 3 4        j 0 1 2 3 4        j 0 1 2 3 4
#   i 0 F . . . .   R . . . .       A . . . .          A . . . .          A . . . .
#     1 . F . . .   . R . . .       . A . . .          . A . . .          . A . . .
#     2 . . F . .   . R . . .       . . . . .          . g g . .          . g g . .
#     3 . . . . .   . . . . .       . . . . .          . . . . .          . . . . .
#     4 . . . F .   . . . . R       . . . . .          . . . . .          . . . f .
#
# GROW-DIAG, pass 1, row-major scan: at (0,0) no neighbour is in U \ A. At (1,1): the
# neighbours in order (0,1) (1,0) (2,1): (2,1) is in U and English 2 is unaligned -> add;
# then (1,2) (0,0) (0,2) (2,0) (2,2): (2,2) is in U, English 2 is now aligned but foreign
# 2 is not -> add (the OR rule). (2,1) and (2,2) lie ahead of (1,1), so the scan visits
# them: their neighbours hold nothing new. Pass 2 adds nothing: stop.
# FINAL-AND: forward first, in (i,j) order: (4,3) has English 4 and foreign 3 unaligned
# -> add. Then reverse: (4,4) has English 4 aligned now -> not added (the AND rule).
EXAMPLE_1 = dict(forward=[(0, 0), (1, 1), (2, 2), (4, 3)],
                 reverse=[(0, 0), (1, 1), (2, 1), (4, 4)], len_e=5, len_f=5,
                 expected=[(0, 0), (1, 1), (2, 1), (2, 2), (4, 3)])

# Example 2 pins the neighbour order. 4x3:
#   F = {(1,1), (3,2), (2,2)}, R = {(1,1), (3,2), (2,1)}; A = {(1,1), (3,2)},
#   U \ A = {(2,1), (2,2)}.
#
#     j 0 1 2        scan reaches (1,1) first; its neighbour (+1,0) = (2,1) comes before
#   i 0 . . .        the diagonal (+1,+1) = (2,2) in NEIGHBOURS: (2,1) is added (English
#     1 . A .        2 unaligned); then (2,2) has English 2 AND foreign 2 aligned -> no.
#     2 . ? ?        A diagonal-first order would have added (2,2) and then refused (2,1).
#     3 . . A        FINAL-AND: (2,2) of F: English 2 aligned -> no.
EXAMPLE_2 = dict(forward=[(1, 1), (3, 2), (2, 2)], reverse=[(1, 1), (3, 2), (2, 1)],
                 len_e=4, len_f=3, expected=[(1, 1), (2, 1), (3, 2)])


@pytest.mark.parametrize("ex", [EXAMPLE_1, EXAMPLE_2], ids=["5x5", "neighbour-order"])
def test_grow_diag_final_and_by_hand(ex):
    assert grow_diag_final_and(ex["forward"], ex["reverse"], ex["len_e"], ex["len_f"]) \
        == ex["expected"]


def test_grow_diag_final_and_rejects_out_of_range():
    with pytest.raises(ValueError, match="link 2-0 outside a 2x2 sentence"):
        grow_diag_final_and([(2, 0)], [], 2, 2)


NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def reference_gdfa(forward, reverse, len_e, len_f):
    """The textbook pseudo-code, transcribed literally: full matrix scans, no shortcuts."""
    forward, reverse = set(forward), set(reverse)
    a, union = forward & reverse, forward | reverse
    aligned_e, aligned_f = {i for i, _ in a}, {j for _, j in a}
    added = True
    while added:
        added = False
        for i in range(len_e):
            for j in range(len_f):
                if (i, j) in a:
                    for di, dj in NEIGHBOURS:
                        e, f = i + di, j + dj
                        if (e not in aligned_e or f not in aligned_f) and (e, f) in union:
                            a.add((e, f))
                            aligned_e.add(e)
                            aligned_f.add(f)
                            added = True
    for direction in (forward, reverse):
        for i in range(len_e):
            for j in range(len_f):
                if i not in aligned_e and j not in aligned_f and (i, j) in direction:
                    a.add((i, j))
                    aligned_e.add(i)
                    aligned_f.add(j)
    return sorted(a)


def random_directions(rng, len_e, len_f):
    """A forward alignment (each foreign word to at most one English word) and a reverse
    one (each English word to at most one foreign word), near the diagonal like real ones."""
    def near(k, n_from, n_to):
        return min(n_to - 1, max(0, round(k * n_to / n_from) + rng.randint(-1, 1)))
    forward = {(near(j, len_f, len_e), j) for j in range(len_f) if rng.random() < 0.85}
    reverse = {(i, near(i, len_e, len_f)) for i in range(len_e) if rng.random() < 0.85}
    return forward, reverse


def test_grow_diag_final_and_equals_literal_pseudocode():
    # The fast version (heap scan over links near candidates, shortcut when F == R) must
    # give exactly the literal matrix scan on many random sentences.
    rng = random.Random(7)
    n_differs = 0
    for _ in range(3000):
        len_e, len_f = rng.randint(1, 9), rng.randint(1, 9)
        fwd, rev = random_directions(rng, len_e, len_f)
        got = grow_diag_final_and(fwd, rev, len_e, len_f)
        assert got == reference_gdfa(fwd, rev, len_e, len_f), (fwd, rev, len_e, len_f)
        n_differs += got != sorted(fwd & rev)
    assert n_differs > 1000      # the examples really exercise grow and final


def test_symmetrize_batch_ragged():
    # Sentence 0: EXAMPLE_1; sentence 1: both directions empty; sentence 2: F == R.
    fwd = ["0-0 1-1 2-2 4-3", "", "1-0 0-1"]
    rev = ["4-4 2-1 1-1 0-0", "", "0-1 1-0"]      # order within a line does not matter
    link_e, link_f, offsets = symmetrize(fwd, rev, [5, 1, 2], [5, 1, 2])
    assert link_e.dtype == np.int32 and link_f.dtype == np.int32 and offsets.dtype == np.int64
    assert offsets.tolist() == [0, 5, 5, 7]
    assert list(zip(link_e.tolist(), link_f.tolist())) == EXAMPLE_1["expected"] + [(0, 1), (1, 0)]
    assert format_pharaoh(link_e, link_f, offsets) == ["0-0 1-1 2-1 2-2 4-3", "", "0-1 1-0"]


def test_symmetrize_matches_per_sentence():
    rng = random.Random(11)
    sents = [(rng.randint(1, 12), rng.randint(1, 12)) for _ in range(300)]
    dirs = [random_directions(rng, le, lf) for le, lf in sents]
    fwd = [" ".join(f"{i}-{j}" for i, j in f) for f, _ in dirs]
    rev = [" ".join(f"{i}-{j}" for i, j in r) for _, r in dirs]
    link_e, link_f, offsets = symmetrize(fwd, rev, [s[0] for s in sents], [s[1] for s in sents])
    for s, ((le, lf), (f, r)) in enumerate(zip(sents, dirs)):
        a, b = offsets[s], offsets[s + 1]
        assert list(zip(link_e[a:b].tolist(), link_f[a:b].tolist())) == reference_gdfa(f, r, le, lf)


# ----------------------------------------------------------------------------- Pharaoh IO

def test_parse_pharaoh_sorts_and_dedups():
    link_e, link_f, offsets = parse_pharaoh(["1-0 0-1  0-1", "", "2-3"], [2, 1, 3], [2, 1, 4])
    assert link_e.tolist() == [0, 1, 2] and link_f.tolist() == [1, 0, 3]
    assert offsets.tolist() == [0, 2, 2, 3]


def test_parse_pharaoh_out_of_range():
    with pytest.raises(InputError) as err:
        parse_pharaoh(["0-0", "0-0 3-1"], [3, 3], [2, 2], path="x.align")
    assert str(err.value) == ("x.align:2: link 3-1 is outside the sentence pair "
                              "(3 English, 2 foreign tokens)")


def test_parse_pharaoh_foreign_out_of_range():
    with pytest.raises(InputError, match=r"^x.align:1: link 0-2 is outside"):
        parse_pharaoh(["0-2"], [3], [2], path="x.align")


@pytest.mark.parametrize("bad", ["1:2", "1-", "a-b", "1-2-3", "-1-0", "1p2"])
def test_parse_pharaoh_malformed(bad):
    with pytest.raises(InputError) as err:
        parse_pharaoh(["0-0", f"0-0 {bad} 1-1"], [5, 5], [5, 5], path="y.align")
    assert str(err.value).startswith(f"y.align:2: malformed link {bad!r}")


def test_parse_pharaoh_line_count():
    with pytest.raises(InputError, match="z.align: 1 alignment lines for 2 sentence pairs"):
        parse_pharaoh(["0-0"], [1, 1], [1, 1], path="z.align")


def test_write_read_pharaoh_round_trip(tmp_path):
    link_e = np.array([0, 1, 1], dtype=np.int32)
    link_f = np.array([0, 0, 2], dtype=np.int32)
    offsets = np.array([0, 1, 1, 3], dtype=np.int64)
    write_pharaoh(tmp_path / "a.align", link_e, link_f, offsets)
    assert (tmp_path / "a.align").read_text() == "0-0\n\n1-0 1-2\n"
    got = read_pharaoh(tmp_path / "a.align", [1, 1, 2], [1, 1, 3])
    assert [x.tolist() for x in got] == [[0, 1, 1], [0, 0, 2], [0, 1, 1, 3]]


# ----------------------------------------------------------------------------- eflomal

def synthetic_corpus(n, reverse_order):
    """n sentence pairs over a 1-1 dictionary a..h <-> s..z, 2-6 words each; the foreign
    side keeps or reverses the English word order."""
    rng = random.Random(3)
    en_words, f_words = "a b c d e f g h".split(), "s t u v w x y z".split()
    en, f = [], []
    for _ in range(n):
        idx = rng.sample(range(8), rng.randint(2, 6))
        en.append(" ".join(en_words[k] for k in idx))
        f_idx = idx[::-1] if reverse_order else idx
        f.append(" ".join(f_words[k] for k in f_idx))
    return en, f


@pytest.mark.parametrize("reverse_order", [False, True], ids=["diagonal", "anti-diagonal"])
def test_eflomal_real_run(tmp_path, reverse_order):
    en, f = synthetic_corpus(40, reverse_order)
    forward, reverse = run_eflomal(en, f, tmp_path / "work")
    assert len(forward) == len(reverse) == 40
    lengths = [len(s.split()) for s in en]
    link_e, link_f, offsets = symmetrize(forward, reverse, lengths, lengths)
    assert len(offsets) == 41
    assert (link_e >= 0).all() and (link_f >= 0).all()
    sent = np.repeat(np.arange(40), np.diff(offsets))
    assert (link_e < np.array(lengths)[sent]).all() and (link_f < np.array(lengths)[sent]).all()
    # English word i translates foreign word i (same order) or n-1-i (reversed order):
    # this checks both the model and that both output files are English-foreign i-j.
    expected_j = np.array(lengths)[sent] - 1 - link_e if reverse_order else link_e
    for direction in (forward, reverse):
        e, fj, o = parse_pharaoh(direction, lengths, lengths)
        want = np.array(lengths)[np.repeat(np.arange(40), np.diff(o))] - 1 - e \
            if reverse_order else e
        assert np.mean(fj == want) >= 0.9
    assert np.mean(link_f == expected_j) >= 0.9
    assert len(link_e) >= 0.9 * sum(lengths)


def test_run_eflomal_rejects_empty_sentence(tmp_path):
    with pytest.raises(ValueError, match="foreign sentence 2 is empty"):
        run_eflomal(["a b", "c"], ["x y", " "], tmp_path)


# ----------------------------------------------------------------------------- chunked stage

import json  # noqa: E402

from pivot.pipeline import align as align_stage  # noqa: E402
from pivot.pipeline.corpus import Bitext  # noqa: E402
from pivot.pipeline.engine import Engine  # noqa: E402
from pivot.pipeline import ibm_shards  # noqa: E402


def noisy_corpus(n=120, seed=5):
    """n pairs over a 30-word dictionary, with dropped, inserted and swapped words."""
    rng = random.Random(seed)
    en_words = [f"e{k}" for k in range(30)]
    f_words = [f"f{k}" for k in range(30)] + ["le", "la", "de"]
    en, f = [], []
    for _ in range(n):
        idx = [rng.randrange(30) for _ in range(rng.randint(1, 10))]
        fr = [f_words[k] for k in idx if rng.random() < 0.9]
        fr += [rng.choice(f_words) for _ in range(rng.randint(0, 2))]
        if len(fr) > 2 and rng.random() < 0.3:
            fr[0], fr[1] = fr[1], fr[0]
        en.append(" ".join(en_words[k] for k in idx))
        f.append(" ".join(fr or ["la"]))
    return en, f


@pytest.fixture(scope="module")
def saved_corpus(tmp_path_factory):
    """(corpus folder written by Bitext.save, the Bitext, align_bitext's ibm2 links)."""
    d = tmp_path_factory.mktemp("corpus")
    en, f = noisy_corpus()
    bitext = Bitext("xx", en, f, np.zeros(len(en), dtype=np.int16), ["synthetic"])
    bitext.save(d / "corpus.xx")
    links = align_stage.align_bitext(bitext, d / "work", method="ibm2")
    return d / "corpus.xx", bitext, links


def same_bytes(a, b):
    return all(x.dtype == y.dtype and x.tobytes() == y.tobytes() for x, y in zip(a, b))


@pytest.mark.parametrize("chunk,threads", [(2, 1), (3, 2), (1000, 1), (1000, 2)])
def test_align_corpus_equals_align_bitext(tmp_path, saved_corpus, chunk, threads):
    corpus_dir, bitext, links = saved_corpus
    info = align_stage.align_corpus(corpus_dir, tmp_path / "out", chunk_sentences=chunk,
                                    n_threads=threads)
    n = len(bitext)
    assert info == {"n_pairs": n, "chunk_sentences": chunk, "n_chunks": -(-n // chunk)}
    assert same_bytes(align_stage.read_links(tmp_path / "out"), links)


def test_shard_cuts_by_lookups():
    # sentence pairs of (n, m) = (1, 1), (3, 2), (0, 4), (2, 2): (n + 1) m = 2, 8, 4, 6 lookups
    e_off = np.array([0, 1, 4, 4, 6])
    f_off = np.array([0, 1, 3, 7, 9])
    assert align_stage.shard_cuts(e_off, f_off, 10) == [0, 2, 4]       # 2 + 8 | 4 + 6
    assert align_stage.shard_cuts(e_off, f_off, 9) == [0, 1, 2, 3, 4]  # 2 | 8 | 4 | 6 (4 + 6 > 9)
    assert align_stage.shard_cuts(e_off, f_off, 1) == [0, 1, 2, 3, 4]  # one pair at least
    assert align_stage.shard_cuts(e_off, f_off, 100) == [0, 4]
    assert align_stage.shard_cuts(np.zeros(1), np.zeros(1), 5) == [0]


def test_align_corpus_cuts_chunks_into_shards_of_equal_work(tmp_path, saved_corpus, monkeypatch):
    """Chunks of 50 pairs cut into shards of at most 300 lookups: several shards a chunk, each
    chunk's file joined from them; the links of one shard a chunk."""
    corpus_dir, _, links = saved_corpus
    monkeypatch.setattr(ibm_shards, "SHARD_CELLS", 300)
    seen = []
    real = align_stage.remap_shard
    monkeypatch.setattr(align_stage, "remap_shard", lambda *a: seen.append(a[2:4]) or real(*a))
    align_stage.align_corpus(corpus_dir, tmp_path / "out", chunk_sentences=50)
    firsts = [a for a, _ in seen]
    assert len(seen) > 6 and firsts.count(0) == 3           # every chunk starts a shard
    assert all(b > a for a, b in seen)
    assert same_bytes(align_stage.read_links(tmp_path / "out"), links)


def test_align_corpus_on_a_cluster(tmp_path, saved_corpus, workers_left):
    """Two worker processes run the chunks' EM and Viterbi tasks: the links of one process."""
    corpus_dir, _, links = saved_corpus
    with Engine(workers=2) as engine:
        info = align_stage.align_corpus(corpus_dir, tmp_path / "out", chunk_sentences=30, engine=engine)
        assert engine.running and len(engine.worker_pids()) == 2
        assert {"align.xx-fwd-em5", "align.xx-rev-viterbi"} <= set(engine.task_seconds)
    assert info["n_chunks"] == 4
    assert same_bytes(align_stage.read_links(tmp_path / "out"), links)
    assert workers_left() == []


def test_align_corpus_without_index_cache(tmp_path, saved_corpus):
    corpus_dir, _, links = saved_corpus
    align_stage.align_corpus(corpus_dir, tmp_path / "out", chunk_sentences=7, n_threads=2,
                             index_cache=False)
    assert same_bytes(align_stage.read_links(tmp_path / "out"), links)


def test_align_corpus_layout(tmp_path, saved_corpus):
    corpus_dir, bitext, links = saved_corpus
    out = tmp_path / "out"
    out.mkdir()
    (out / "links-00099.npz").write_bytes(b"stale")         # an earlier run's extra chunk
    info = align_stage.align_corpus(corpus_dir, out, chunk_sentences=50)
    n = len(bitext)                                          # 120: chunks of 50, 50, 20
    assert info == {"n_pairs": n, "chunk_sentences": 50, "n_chunks": 3}
    assert json.loads((out / "links.json").read_text()) == info
    assert sorted(p.name for p in out.iterdir()) == [
        "links-00000.npz", "links-00001.npz", "links-00002.npz", "links.json"]
    e_len, f_len = bitext.lengths()
    link_e, link_f, offsets = links
    for k, (a, b) in enumerate([(0, 50), (50, 100), (100, 120)]):
        with np.load(out / f"links-{k:05d}.npz") as z:
            assert sorted(z.files) == ["link_e", "link_f", "link_offsets"]
            ce, cf, co = z["link_e"], z["link_f"], z["link_offsets"]
        assert (ce.dtype, cf.dtype, co.dtype) == (np.int32, np.int32, np.int64)
        assert len(co) == b - a + 1 and co[0] == 0 and co[-1] == len(ce) == len(cf)
        sent = np.repeat(np.arange(a, b), np.diff(co))
        assert (ce >= 0).all() and (cf >= 0).all()
        assert (ce < e_len[sent]).all() and (cf < f_len[sent]).all()
        lo, hi = offsets[a], offsets[b]
        assert ce.tobytes() == link_e[lo:hi].tobytes() and cf.tobytes() == link_f[lo:hi].tobytes()
        assert (co + lo).tobytes() == offsets[a:b + 1].tobytes()


def test_align_corpus_streams_the_corpus(tmp_path, saved_corpus, monkeypatch):
    # ibm2 never loads the whole bitext: one task a chunk reads the chunk's byte range of each file.
    corpus_dir, bitext, links = saved_corpus

    def refuse(*args, **kwargs):
        raise AssertionError("Bitext.load called")
    monkeypatch.setattr(Bitext, "load", refuse)
    seen = []
    real = align_stage.tokenize_chunk

    def spy(en_path, f_path, e_range, f_range, first_line, out_path):
        seen.append((first_line, real(en_path, f_path, e_range, f_range, first_line, out_path)))
        return seen[-1][1]
    monkeypatch.setattr(align_stage, "tokenize_chunk", spy)
    align_stage.align_corpus(corpus_dir, tmp_path / "out", chunk_sentences=40,
                             scratch_dir=tmp_path / "scratch")
    assert seen == [(0, 40), (40, 40), (80, 40)]
    assert same_bytes(align_stage.read_links(tmp_path / "out"), links)
    assert list((tmp_path / "scratch").iterdir()) == []     # scratch folder removed


def test_chunk_starts_counts_lines_as_the_reader_does(tmp_path):
    # "a\nbb\n\nccc" holds 4 lines (an unterminated last one counts); lines 0 and 2 start at
    # bytes 0 and 5 ("a\n" 2 bytes, "bb\n" 3 bytes)
    path = tmp_path / "x.txt"
    path.write_bytes(b"a\nbb\n\nccc")
    assert align_stage.chunk_starts(path, 2) == (4, [0, 5])
    assert align_stage.chunk_starts(path, 3) == (4, [0, 6])
    assert align_stage.chunk_starts(path, 4) == (4, [0])
    path.write_bytes(b"a\nbb\n")                     # terminated: 2 lines, no chunk at its end
    assert align_stage.chunk_starts(path, 1) == (2, [0, 2])
    assert align_stage.chunk_starts(path, 2) == (2, [0])
    path.write_bytes(b"")
    assert align_stage.chunk_starts(path, 5) == (0, [])


def test_align_corpus_names_the_line_of_bad_bytes(tmp_path, saved_corpus):
    """A chunk's task reads from inside the file: its errors still name the file's line."""
    corpus_dir, _, _ = saved_corpus
    bad = tmp_path / "bad"
    bad.mkdir()
    for name in ("bitext.en", "meta.json"):
        (bad / name).write_bytes((corpus_dir / name).read_bytes())
    lines = (corpus_dir / "bitext.xx").read_bytes().split(b"\n")
    lines[57] = b"\xff" + lines[57]
    (bad / "bitext.xx").write_bytes(b"\n".join(lines))
    with pytest.raises(InputError, match=r"bitext.xx:58: not UTF-8 \(byte 1 of the line"):
        align_stage.align_corpus(bad, tmp_path / "out", chunk_sentences=50)


def test_align_corpus_atomic_writes(tmp_path, saved_corpus, monkeypatch):
    # A failure while writing chunk 2 leaves chunks 0 and 1 complete, no partial or temporary
    # file, no links.json (an earlier run's is removed first) and no scratch folder.
    corpus_dir, _, links = saved_corpus
    out = tmp_path / "out"
    align_stage.align_corpus(corpus_dir, out, chunk_sentences=50)
    assert (out / "links.json").is_file()
    real_savez, calls = np.savez, []

    def failing_savez(fh, **arrays):
        if os.path.dirname(fh.name) == str(out):        # not the aligner's scratch files
            calls.append(fh.name)
            if len(calls) == 3:
                fh.write(b"partial bytes")
                raise OSError("disk full")
        return real_savez(fh, **arrays)
    monkeypatch.setattr(align_stage.np, "savez", failing_savez)
    with pytest.raises(OSError, match="disk full"):
        align_stage.align_corpus(corpus_dir, out, chunk_sentences=40)
    # every chunk went to a temporary name in the output folder first (.NAME.tmp-PID)
    assert [os.path.basename(c) for c in calls] == [f".links-{k:05d}.npz.tmp-{os.getpid()}" for k in range(3)]
    assert sorted(p.name for p in out.iterdir()) == ["links-00000.npz", "links-00001.npz",
                                                     "links-00002.npz"]
    for k in (0, 1):          # the new run's chunks of 40, complete
        with np.load(out / f"links-{k:05d}.npz") as z:
            assert z["link_offsets"].tobytes() == (
                links[2][40 * k:40 * k + 41] - links[2][40 * k]).tobytes()
    with np.load(out / "links-00002.npz") as z:   # the earlier run's chunk 2 (of 50), intact
        assert len(z["link_offsets"]) == 21


def test_align_corpus_pharaoh(tmp_path, saved_corpus):
    corpus_dir, bitext, links = saved_corpus
    write_pharaoh(tmp_path / "gold.align", *links)
    info = align_stage.align_corpus(corpus_dir, tmp_path / "out", method="pharaoh",
                                    pharaoh_path=tmp_path / "gold.align", chunk_sentences=50)
    assert info["n_chunks"] == 3
    assert same_bytes(align_stage.read_links(tmp_path / "out"), links)
    with pytest.raises(InputError, match="needs a path"):
        align_stage.align_corpus(corpus_dir, tmp_path / "out2", method="pharaoh")


def test_align_corpus_eflomal_layout(tmp_path):
    en, f = synthetic_corpus(40, False)
    Bitext("xx", en, f, np.zeros(40, dtype=np.int16), ["s"]).save(tmp_path / "c")
    info = align_stage.align_corpus(tmp_path / "c", tmp_path / "out", method="eflomal",
                                    chunk_sentences=15)
    assert info == {"n_pairs": 40, "chunk_sentences": 15, "n_chunks": 3}
    link_e, link_f, offsets = align_stage.read_links(tmp_path / "out")
    assert len(offsets) == 41 and link_e.dtype == np.int32
    assert np.mean(link_e == link_f) >= 0.9                  # same word order both sides
    assert sorted(p.name for p in (tmp_path / "out").iterdir())[-1] == "links.json"


def test_align_corpus_checks_the_corpus(tmp_path, saved_corpus):
    corpus_dir, bitext, _ = saved_corpus
    bad = tmp_path / "bad"
    bad.mkdir()
    for name in ("bitext.en", "bitext.xx", "meta.json"):
        (bad / name).write_bytes((corpus_dir / name).read_bytes())
    meta = json.loads((bad / "meta.json").read_text())
    meta["n_pairs"] += 1
    (bad / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(InputError, match="120 lines but meta.json says n_pairs=121"):
        align_stage.align_corpus(bad, tmp_path / "out", chunk_sentences=50)
    meta["n_pairs"] -= 2
    (bad / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(InputError, match="120 lines but meta.json says n_pairs=119"):
        align_stage.align_corpus(bad, tmp_path / "out", chunk_sentences=50)
    meta["n_pairs"] += 1
    (bad / "meta.json").write_text(json.dumps(meta))
    with open(bad / "bitext.xx", "a") as fh:
        fh.write("f1 f2\n")
    with pytest.raises(InputError, match="bitext.en has 120 lines but bitext.xx 121"):
        align_stage.align_corpus(bad, tmp_path / "out", chunk_sentences=50)
    assert not (tmp_path / "out" / "links.json").exists()
    assert [p.name for p in (tmp_path / "out").iterdir() if p.name.startswith(".")] == []
    with pytest.raises(ValueError):
        align_stage.align_corpus(corpus_dir, tmp_path / "out", chunk_sentences=0)
    with pytest.raises(InputError, match="unknown align method"):
        align_stage.align_corpus(corpus_dir, tmp_path / "out", method="giza")


def test_align_corpus_empty(tmp_path):
    Bitext("xx", [], [], np.zeros(0, dtype=np.int16), ["s"]).save(tmp_path / "c")
    info = align_stage.align_corpus(tmp_path / "c", tmp_path / "out")
    assert info == {"n_pairs": 0, "chunk_sentences": 50000, "n_chunks": 0}
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["links.json"]


def test_encode_corpus_holds_no_vocabulary_while_its_tasks_run(tmp_path, saved_corpus):
    """The corpus encoder, a job the build runs for every language side by side, keeps only
    the vocabularies' sizes while its shard tasks run (no word dict waits at a yield), and they
    are the sizes of the corpus's vocabularies."""
    from pivot.pipeline.corpus import Vocab

    corpus_dir, bitext, _ = saved_corpus
    job = align_stage._encode_corpus(corpus_dir, 50, tmp_path)
    engine, value, batches = Engine(workers=1), None, []
    try:
        while True:
            batch = job.send(value)
            held = [name for name, x in job.gi_frame.f_locals.items() if isinstance(x, Vocab)]
            assert held == [], (batch.name, held)
            batches.append(batch.name)
            value = engine.map(batch.fn, batch.arg_tuples, name=batch.name, quiet=True)
    except StopIteration as stop:
        n_pairs, n_e, n_f, _ = stop.value
    assert batches == ["align.xx-tokenize", "align.xx-ids"]
    en_words = {w for s in bitext.en for w in s.split()}
    f_words = {w for s in bitext.f for w in s.split()}
    assert (n_pairs, n_e, n_f) == (len(bitext), len(en_words), len(f_words))
