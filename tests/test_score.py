"""Moore-Lewis scores on two hand-written bigram ARPA models (exact values by hand)."""
import math

import numpy as np
import pytest

from pivot.errors import InputError
from pivot.pipeline.score import (LOG2_10, MooreLewisScores, count_words, cross_entropy, moore_lewis,
                                  moore_lewis_file, ranking, write_ranked, write_ranked_file)

# In-domain LM. Backoff weights in the third column; log10 throughout.
TGT_ARPA = """\\data\\
ngram 1=5
ngram 2=2

\\1-grams:
-1.0\t<unk>\t0
-99\t<s>\t-0.2
-0.5\t</s>\t0
-0.3\ta\t-0.1
-0.6\tb\t0

\\2-grams:
-0.1\t<s> a
-0.4\ta b

\\end\\
"""

# General LM: flat unigrams, one bigram, a lower <unk> probability.
GEN_ARPA = """\\data\\
ngram 1=5
ngram 2=1

\\1-grams:
-2.0\t<unk>\t0
-99\t<s>\t0
-0.4\t</s>\t0
-0.5\ta\t0
-0.5\tb\t0

\\2-grams:
-0.2\tb a

\\end\\
"""

SENTENCES = ["a b", "b a", "a c", "", "a b"]
# log10 p(s </s> | <s>) by hand:
#  "a b": tgt  p(a|<s>) -0.1 + p(b|a) -0.4 + bo(b) 0 + p(</s>) -0.5           = -1.0
#         gen  bo(<s>) 0 + -0.5 + bo(a) 0 + -0.5 + bo(b) 0 + -0.4            = -1.4
#  "b a": tgt  bo(<s>) -0.2 + -0.6 + bo(b) 0 + -0.3 + bo(a) -0.1 + -0.5     = -1.7
#         gen  -0.5 + p(a|b) -0.2 + -0.4                                     = -1.1
#  "a c": c is OOV, scored with <unk>:
#         tgt  -0.1 + bo(a) -0.1 + p(<unk>) -1.0 + p(</s>) -0.5             = -1.7
#         gen  -0.5 + -2.0 + -0.4                                            = -2.9
#  "":    tgt  bo(<s>) -0.2 + p(</s>) -0.5 = -0.7 ;  gen -0.4
# H = -log10 p * log2(10) / (n_words + 1): divisors 3, 3, 3, 1, 3.
LOG10_TGT = [-1.0, -1.7, -1.7, -0.7, -1.0]
LOG10_GEN = [-1.4, -1.1, -2.9, -0.4, -1.4]
DIV = [3, 3, 3, 1, 3]
H_TGT = [-lp * LOG2_10 / d for lp, d in zip(LOG10_TGT, DIV)]
H_GEN = [-lp * LOG2_10 / d for lp, d in zip(LOG10_GEN, DIV)]
# sigma = [-0.4, 0.6, -1.2, 0.3*3] * log2(10)/3 ... written out:
SIGMA = [-0.4 * LOG2_10 / 3, 0.6 * LOG2_10 / 3, -1.2 * LOG2_10 / 3, 0.3 * LOG2_10,
         -0.4 * LOG2_10 / 3]


@pytest.fixture
def lms(tmp_path):
    tgt, gen = tmp_path / "tgt.arpa", tmp_path / "gen.arpa"
    tgt.write_text(TGT_ARPA)
    gen.write_text(GEN_ARPA)
    return str(tgt), str(gen)


def test_log2_10_is_exact():
    assert LOG2_10 == pytest.approx(1 / math.log10(2), rel=1e-15)


def test_moore_lewis_hand_values(lms):
    ml = moore_lewis(SENTENCES, *lms)
    # kenlm stores probabilities as float32: agreement to ~1e-7 relative
    np.testing.assert_allclose(ml.h_tgt, H_TGT, rtol=1e-6)
    np.testing.assert_allclose(ml.h_gen, H_GEN, rtol=1e-6)
    np.testing.assert_allclose(ml.sigma, SIGMA, rtol=1e-6, atol=1e-9)
    assert ml.n_words.tolist() == [2, 2, 2, 0, 2]
    assert ml.sigma[0] == pytest.approx(-0.442923, abs=1e-6)
    assert len(ml) == 5


def test_oov_is_kept_with_unk_probability(lms):
    # "a c" with c unknown: H includes log p(<unk>) of each model, so the sentence is NOT
    # scored as the 1-word "a" (which would give tgt -0.1-0.1-0.5=-0.7 over 2 words).
    ml = moore_lewis(["a c"], *lms)
    assert ml.h_tgt[0] == pytest.approx(1.7 * LOG2_10 / 3, rel=1e-6)
    assert ml.h_gen[0] == pytest.approx(2.9 * LOG2_10 / 3, rel=1e-6)


def test_cross_entropy_of_one_model(lms):
    np.testing.assert_allclose(cross_entropy(SENTENCES, lms[0]), H_TGT, rtol=1e-6)


def test_ranking_is_stable_on_ties(lms):
    ml = moore_lewis(SENTENCES, *lms)
    # sigma: s2 -1.33 < s0 = s4 -0.44 (tie: corpus order) < s1 0.66 < s3 1.00
    assert ranking(ml.sigma).tolist() == [2, 0, 4, 1, 3]
    assert ranking([0.0, -1.0, 0.0, -1.0]).tolist() == [1, 3, 0, 2]


def test_model_without_unk_is_refused(tmp_path, lms):
    no_unk = tmp_path / "nounk.arpa"
    no_unk.write_text(TGT_ARPA.replace("-1.0\t<unk>\t0\n", "").replace("ngram 1=5", "ngram 1=4"))
    with pytest.raises(InputError, match="no <unk>"):
        moore_lewis(["a b"], str(no_unk), lms[1])


def test_missing_lm_file(tmp_path, lms):
    with pytest.raises(InputError, match="not found"):
        moore_lewis(["a"], str(tmp_path / "none.arpa"), lms[1])


def test_count_words_splits_like_kenlm():
    # kenlm splits the UTF-8 bytes on ASCII white space only: U+00A0 is not a separator
    sents = ["a b", "", "  x\ty ", "\u00e9\u00a0b", "a\nb c", "z"]
    assert count_words(sents).tolist() == [2, 0, 2, 1, 3, 1]
    assert count_words(["", ""]).tolist() == [0, 0]
    assert count_words([]).tolist() == []


def test_write_ranked(tmp_path, lms):
    ml = moore_lewis(SENTENCES, *lms)
    out = tmp_path / "ranked.tsv"
    write_ranked(out, ml, SENTENCES)
    rows = [line.split("\t") for line in out.read_text().split("\n")[:-1]]
    assert [r[3] for r in rows] == ["a c", "a b", "a b", "b a", ""]
    order = [2, 0, 4, 1, 3]
    for row, i in zip(rows, order):
        assert float(row[0]) == pytest.approx(SIGMA[i], abs=1.5e-6)
        assert float(row[1]) == pytest.approx(H_TGT[i], abs=1.5e-6)
        assert float(row[2]) == pytest.approx(H_GEN[i], abs=1.5e-6)
    assert rows[0][0] == "-1.328771"            # -1.2 * log2(10) / 3 = -1.3287712...
    with pytest.raises(ValueError, match="TAB"):
        write_ranked(out, moore_lewis(["a\tb"], *lms), ["a\tb"])


# ----------------------------------------------------------------------------- streaming


def listed_scores(sentences, folds, lm_tgt, gen_of_fold):
    """What the score stage computes: moore_lewis on each fold's list, scattered back."""
    fields = {f: np.zeros(len(sentences)) for f in ("h_tgt", "h_gen", "sigma")}
    fields["n_words"] = np.zeros(len(sentences), dtype=np.int64)
    for k in np.unique(folds).tolist():
        idx = np.flatnonzero(folds == k)
        ml = moore_lewis([sentences[i] for i in idx], lm_tgt, gen_of_fold[k])
        for f in fields:
            fields[f][idx] = getattr(ml, f)
    return MooreLewisScores(**fields)


def assert_bit_identical(a, b):
    for f in ("h_tgt", "h_gen", "sigma", "n_words"):
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), f


def random_sentences(seed, n, vocab=("a", "b", "c", "d", "e", "f")):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(vocab, rng.integers(0, 9)).tolist()) for _ in range(n)]


@pytest.fixture
def estimated_lms(tmp_path):
    """An in-domain LM and two general LMs (one per fold) estimated on synthetic text."""
    import warnings

    from pivot.pipeline import lm

    paths = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, seed, vocab in [("tgt", 1, "abcde"), ("gen.0", 2, "abcxyz"), ("gen.1", 3, "cdexyz")]:
            paths[name] = str(tmp_path / f"{name}.arpa")
            lm.estimate_arpa([s.split() for s in random_sentences(seed, 300, tuple(vocab))],
                             paths[name], 3)
    return paths


# White space of every kind kenlm and count_words see, empty sentences, OOVs, repeats.
ODD = ["", "a  b", " a b ", "a\u00a0b c", "q a\tb", "a\rb", "zz", "a b", "", "\u00e9 a"]


def write_lines(path, sentences, final_newline=True):
    path.write_bytes(("\n".join(sentences) + ("\n" if final_newline else "")).encode("utf-8"))
    return path


@pytest.mark.parametrize("chunk_lines", [1, 4, None])
def test_moore_lewis_file_equals_the_per_fold_lists(tmp_path, estimated_lms, chunk_lines):
    sentences = random_sentences(7, 200, tuple("abcdefxyz")) + ODD
    folds = np.random.default_rng(8).integers(0, 2, len(sentences)).astype(np.int8)
    # cross-fitted: fold k is scored by the general LM of the other fold
    gen = {0: estimated_lms["gen.1"], 1: estimated_lms["gen.0"]}
    want = listed_scores(sentences, folds, estimated_lms["tgt"], gen)
    for final_newline in (True, False):
        path = write_lines(tmp_path / "en.txt", sentences, final_newline)
        got = moore_lewis_file(path, folds, estimated_lms["tgt"], gen, chunk_lines=chunk_lines)
        assert_bit_identical(got, want)
    # one general LM for every fold (a named general corpus), all sentences in fold 0
    zeros = np.zeros(len(sentences), dtype=np.int8)
    want = listed_scores(sentences, zeros, estimated_lms["tgt"], {0: estimated_lms["gen.0"]})
    got = moore_lewis_file(path, zeros, estimated_lms["tgt"], estimated_lms["gen.0"],
                           chunk_lines=chunk_lines)
    assert_bit_identical(got, want)


def test_moore_lewis_file_hand_values_and_errors(tmp_path, lms):
    path = write_lines(tmp_path / "en.txt", SENTENCES)
    folds = np.array([0, 1, 0, 1, 1], dtype=np.int8)
    got = moore_lewis_file(path, folds, lms[0], {0: lms[1], 1: lms[1]}, chunk_lines=2)
    assert got.sigma == pytest.approx(SIGMA, abs=1e-6)
    assert_bit_identical(got, moore_lewis(SENTENCES, *lms))
    with pytest.raises(ValueError, match="no general LM for fold"):
        moore_lewis_file(path, folds, lms[0], {0: lms[1]})
    with pytest.raises(ValueError, match="holds 5 lines but there are 6"):
        moore_lewis_file(path, np.zeros(6, np.int8), *lms)
    with pytest.raises(ValueError, match="more lines"):
        moore_lewis_file(path, np.zeros(4, np.int8), *lms, chunk_lines=2)


@pytest.mark.parametrize("chunk_lines", [1, 3, None])
def test_write_ranked_file_is_byte_identical(tmp_path, estimated_lms, chunk_lines):
    sentences = random_sentences(9, 150, tuple("abcdefxyz")) + [s for s in ODD if "\t" not in s
                                                                  and "\r" not in s]
    folds = np.random.default_rng(10).integers(0, 2, len(sentences)).astype(np.int8)
    gen = {0: estimated_lms["gen.1"], 1: estimated_lms["gen.0"]}
    scores = listed_scores(sentences, folds, estimated_lms["tgt"], gen)
    assert len(np.unique(scores.sigma)) < len(sentences)           # ties (repeated sentences)
    want = tmp_path / "want.tsv"
    write_ranked(want, scores, sentences)
    for final_newline in (True, False):
        path = write_lines(tmp_path / "en.txt", sentences, final_newline)
        got = tmp_path / "got.tsv"
        write_ranked_file(got, scores, path, chunk_lines=chunk_lines)
        assert got.read_bytes() == want.read_bytes()


def test_write_ranked_file_errors(tmp_path, lms):
    ml = moore_lewis(SENTENCES, *lms)
    path = write_lines(tmp_path / "en.txt", SENTENCES)
    with pytest.raises(ValueError, match="5 sentences but 4 scores"):
        write_ranked_file(tmp_path / "x.tsv", MooreLewisScores(
            ml.h_tgt[:4], ml.h_gen[:4], ml.sigma[:4], ml.n_words[:4]), path)
    bad = ["a b", "a\tb", "a\rb"]
    bad_scores = moore_lewis(bad, *lms)
    with pytest.raises(ValueError, match="TAB") as want:
        write_ranked(tmp_path / "x.tsv", bad_scores, bad)
    with pytest.raises(ValueError, match="TAB") as got:
        write_ranked_file(tmp_path / "y.tsv", bad_scores, write_lines(tmp_path / "bad.txt", bad))
    assert str(got.value) == str(want.value)
    (tmp_path / "empty.txt").write_bytes(b"")
    empty = MooreLewisScores(*(np.zeros(0) for _ in range(3)), np.zeros(0, np.int64))
    write_ranked_file(tmp_path / "e.tsv", empty, tmp_path / "empty.txt")
    assert (tmp_path / "e.tsv").read_bytes() == b""


# Matched LMs (pivot.pipeline.mono): both models know the word "<oov>", which stands for every
# word outside the shared vocabulary. Unigram models, no backoff (log10); kenlm needs a bigram
# section, so each has "a a", which no sentence below holds:
#                <unk>  </s>   a     <oov>
#   in-domain    -2.0   -0.5  -0.3   -1.2
#   general      -2.0   -0.4  -0.5   -0.6
MATCHED_ARPA = """\\data\\
ngram 1=5
ngram 2=1

\\1-grams:
-2.0\t<unk>
-99\t<s>
{eos}\t</s>
{a}\ta
{oov}\t<oov>

\\2-grams:
-0.01\ta a

\\end\\
"""


def test_moore_lewis_file_maps_words_outside_the_shared_vocabulary(tmp_path):
    tgt, gen = tmp_path / "tgt.arpa", tmp_path / "gen.arpa"
    tgt.write_text(MATCHED_ARPA.format(eos=-0.5, a=-0.3, oov=-1.2))
    gen.write_text(MATCHED_ARPA.format(eos=-0.4, a=-0.5, oov=-0.6))
    # With V = {a}: "a c" is scored as "a <oov>", "c d a" as "<oov> <oov> a":
    #   "a c":    tgt -0.3 - 1.2 - 0.5 = -2.0          gen -0.5 - 0.6 - 0.4 = -1.5      (/ 3)
    #   "c d a":  tgt -2.4 - 0.3 - 0.5 = -3.2          gen -1.2 - 0.5 - 0.4 = -2.1      (/ 4)
    #   "a":      tgt -0.3 - 0.5 = -0.8                gen -0.5 - 0.4 = -0.9            (/ 2)
    path = write_lines(tmp_path / "en.txt", ["a c", "c d a", "a"])
    got = moore_lewis_file(path, np.zeros(3, np.int8), str(tgt), str(gen), vocab=frozenset({"a"}))
    np.testing.assert_allclose(got.h_tgt, [2.0 * LOG2_10 / 3, 3.2 * LOG2_10 / 4, 0.8 * LOG2_10 / 2], rtol=1e-6)
    np.testing.assert_allclose(got.h_gen, [1.5 * LOG2_10 / 3, 2.1 * LOG2_10 / 4, 0.9 * LOG2_10 / 2], rtol=1e-6)
    assert got.n_oov.tolist() == [1, 2, 0] and got.n_words.tolist() == [2, 3, 1]
    # Without the vocabulary "c" is kenlm's <unk> (-2.0 in both): tgt -2.8, gen -2.9 for "a c".
    plain = moore_lewis_file(path, np.zeros(3, np.int8), str(tgt), str(gen))
    assert plain.n_oov is None
    assert plain.h_tgt[0] == pytest.approx(2.8 * LOG2_10 / 3, rel=1e-6)
    assert plain.h_gen[0] == pytest.approx(2.9 * LOG2_10 / 3, rel=1e-6)


@pytest.mark.parametrize("task_sentences", [7, 1000])
@pytest.mark.parametrize("vocab", [None, frozenset("abcx")])
def test_score_stage_tasks_write_the_bytes_of_one_pass_over_one_file(tmp_path, estimated_lms, monkeypatch,
                                                                     task_sentences, vocab):
    """The score stage as tasks (a task per LM and range of sentences, ranges that cut across the
    languages' files, then a join) writes scores.npz, oov.json and ranked.tsv byte for byte as
    moore_lewis_file and write_ranked_file over one file of all the sentences (what the stage
    wrote from encode's english.txt)."""
    import json

    from pivot.pipeline import score
    from pivot.pipeline.engine import Engine

    sentences = random_sentences(11, 60, tuple("abcdefxyz")) + [s for s in ODD if "\t" not in s and "\r" not in s]
    folds = np.random.default_rng(12).integers(0, 2, len(sentences)).astype(np.int8)
    np.save(tmp_path / "folds.npy", folds)
    gen = {0: estimated_lms["gen.1"], 1: estimated_lms["gen.0"]}
    vocab_path = None
    if vocab is not None:
        vocab_path = str(tmp_path / "vocab.txt")
        (tmp_path / "vocab.txt").write_text("".join(w + "\n" for w in sorted(vocab)))
    # the reference: one file, one pass (as the stage computed it before it was cut into tasks)
    whole = write_lines(tmp_path / "english.txt", sentences)
    ml = moore_lewis_file(whole, folds, estimated_lms["tgt"], gen, vocab=vocab)
    ref = tmp_path / "ref"
    ref.mkdir()
    np.savez(ref / "scores.npz", h_tgt=ml.h_tgt, h_gen=ml.h_gen, sigma=ml.sigma, n_words=ml.n_words,
             **({"n_oov": ml.n_oov} if vocab is not None else {}))
    write_ranked_file(ref / "ranked.tsv", ml, whole)
    # the stage: three "languages" of 20, 31 and the rest of the sentences, each file unterminated
    cuts = [0, 20, 51, len(sentences)]
    texts = [(str(write_lines(tmp_path / f"bitext{k}.en", sentences[a:b], final_newline=k != 2)), b - a)
             for k, (a, b) in enumerate(zip(cuts, cuts[1:]))]
    monkeypatch.setattr(score, "TASK_SENTENCES", task_sentences)
    monkeypatch.setattr(score, "BUCKET_STEP", 3)    # many buckets, across the ranges' runs
    out = tmp_path / "stage"
    out.mkdir()
    score.score_stage(out, texts, tmp_path / "folds.npy", estimated_lms["tgt"], gen, vocab_path, Engine(workers=1))
    files = sorted(p.name for p in out.iterdir())
    assert files == (["oov.json", "ranked.tsv", "scores.npz"] if vocab is not None else ["ranked.tsv", "scores.npz"])
    for name in ("scores.npz", "ranked.tsv"):
        assert (out / name).read_bytes() == (ref / name).read_bytes(), name
    if vocab is not None:
        oov = json.loads((out / "oov.json").read_text())
        assert oov["bitext_tokens"] == int(ml.n_words.sum()) and oov["bitext_oov_tokens"] == int(ml.n_oov.sum()) > 0


# ------------------------------------------------------------- the ranking by runs (the join)

def _score_blocks(scores, block):
    def blocks():
        for lo in range(0, len(scores.sigma), block):
            yield lo, {"sigma": scores.sigma[lo:lo + block], "h_tgt": scores.h_tgt[lo:lo + block],
                       "h_gen": scores.h_gen[lo:lo + block]}
    return blocks


def test_line_spans_by_hand(tmp_path, monkeypatch):
    from pivot.pipeline import score

    (tmp_path / "a.txt").write_bytes(b"ab\ncde\n\nf")        # lines ab, cde, "", f (unterminated)
    (tmp_path / "b.txt").write_bytes(b"xy\n")
    (tmp_path / "c.txt").write_bytes(b"")
    monkeypatch.setattr(score, "_INDEX_BYTES", 3)           # the lines cross the read buffers
    spans = [(k, a.tolist(), b.tolist()) for k, a, b in score._line_spans(
        [tmp_path / "a.txt", tmp_path / "c.txt", tmp_path / "b.txt"])]
    flat = [(k, a, b) for k, aa, bb in spans for a, b in zip(aa, bb)]
    assert flat == [(0, 0, 2), (0, 3, 6), (0, 7, 7), (0, 8, 9), (2, 0, 2)]


@pytest.mark.parametrize("step, block, chunk_lines", [(1, 1, 1), (2, 7, 3), (5, 40, None), (1 << 16, 500, 2)])
def test_write_ranked_runs_is_write_ranked(tmp_path, step, block, chunk_lines):
    from pivot.pipeline.score import write_ranked_runs

    rng = np.random.default_rng(21)
    sentences = random_sentences(13, 300, tuple("abcxyz")) + [s for s in ODD if "\t" not in s and "\r" not in s]
    n = len(sentences)
    h_tgt = rng.integers(1, 9, n) / 4.0                     # sigma on a grid of 1/4: many ties
    h_gen = rng.integers(1, 9, n) / 4.0
    sigma = h_tgt - h_gen
    sigma[:3] = [0.0, -0.0, 0.0]                            # -0.0 ties with 0.0, as in the sort
    scores = MooreLewisScores(h_tgt=h_tgt, h_gen=h_gen, sigma=sigma, n_words=np.zeros(n, np.int64))
    want = tmp_path / "want.tsv"
    write_ranked(want, scores, sentences)
    cuts = [0, 100, 101, n]                                 # three files, the last unterminated
    paths = [write_lines(tmp_path / f"en{k}.txt", sentences[a:b], final_newline=k != 2)
             for k, (a, b) in enumerate(zip(cuts, cuts[1:]))]
    got = tmp_path / "got.tsv"
    write_ranked_runs(got, _score_blocks(scores, block), n, paths, tmp_path / "runs", step=step,
                      chunk_lines=chunk_lines)
    assert got.read_bytes() == want.read_bytes()
    assert not (tmp_path / "runs").exists()


def test_write_ranked_runs_errors(tmp_path):
    from pivot.pipeline.score import write_ranked_runs

    sentences = ["a b", "c", "d e f", "g"]
    scores = MooreLewisScores(h_tgt=np.ones(4), h_gen=np.zeros(4), sigma=np.array([3.0, 1.0, 2.0, 0.0]),
                              n_words=np.zeros(4, np.int64))
    path = write_lines(tmp_path / "en.txt", sentences)
    short = MooreLewisScores(*(x[:3] for x in (scores.h_tgt, scores.h_gen, scores.sigma, scores.n_words)))
    with pytest.raises(ValueError, match="4 sentences but 3 scores"):
        write_ranked_runs(tmp_path / "x.tsv", _score_blocks(short, 2), 3, [path], tmp_path / "runs")
    with pytest.raises(ValueError, match="3 sentences but 4 scores"):
        write_ranked_runs(tmp_path / "x.tsv", _score_blocks(scores, 2), 4, [write_lines(tmp_path / "three.txt",
                                                                                       sentences[:3])], tmp_path / "runs")
    assert not (tmp_path / "runs").exists()
    bad = write_lines(tmp_path / "bad.txt", ["a", "b\tc", "d", "e"])
    with pytest.raises(ValueError, match=r"sentence 1 holds a TAB"):
        write_ranked_runs(tmp_path / "x.tsv", _score_blocks(scores, 3), 4, [bad], tmp_path / "runs")
    # ranked: sentence 3 (sigma 0), 1, 2, 0
    write_ranked_runs(tmp_path / "ok.tsv", _score_blocks(scores, 3), 4, [path], tmp_path / "runs", step=1)
    assert [line.split("\t")[3] for line in (tmp_path / "ok.tsv").read_text().splitlines()] == ["g", "c", "d e f", "a b"]
