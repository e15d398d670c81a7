"""The relations' word vectors (pivot.pipeline.vectors) and their features in pivot.pipeline.ppdb2:
the shards' tokens, the co-occurrence counts and the phrase means by hand, the trained vectors'
determinism, the cosine feature by hand, and the per-phrase split of the relation model."""
import json
import math

import numpy as np
import pytest

from pivot.eval.distributional import ppmi, svd_vectors
from pivot.pipeline import ppdb2 as P
from pivot.pipeline import vectors as V
from pivot.pipeline import wordnet


def _shard(path, sentences):
    tokens = np.array([t for s in sentences for t in s], np.int32)
    offsets = np.concatenate([[0], np.cumsum([len(s) for s in sentences])]).astype(np.int64)
    np.savez(path, e_tokens=tokens, e_offsets=offsets, f_tokens=np.zeros(0, np.int32))
    return path


def test_english_shards_number_the_sentences_across_shards(tmp_path):
    a = _shard(tmp_path / "0.npz", [[3, 1], [2]])
    b = _shard(tmp_path / "1.npz", [[4, 4, 0]])
    pieces = V.EnglishShards([a, b])
    assert [(ids.tolist(), sentence.tolist()) for ids, sentence in pieces] == \
        [([3, 1, 2], [0, 0, 1]), ([4, 4, 0], [2, 2, 2])]
    assert len(list(pieces)) == 2     # read again from the files: train reads it twice


def test_train_by_pieces_is_train_on_the_whole_text():
    """The counts added piece by piece are the whole text's: the same vectors, byte for byte."""
    ids, sentence = _toy_text()
    whole = V.train([(ids, sentence)], 7, dim=3, window=2, min_count=2)
    cut = np.searchsorted(sentence, [2, 3])        # sentences 0-1 | 2 | 3-4
    pieces = [(ids[a:b], sentence[a:b]) for a, b in zip([0, *cut], [*cut, len(ids)])]
    assert V.train(pieces, 7, dim=3, window=2, min_count=2).tobytes() == whole.tobytes()


def test_cooccurrence_by_hand():
    # sentences "0 1 2 0" and "1 2"; token 3 (not in the vocabulary) sits between 0 and 1 in "0 3 1"
    ids = np.array([0, 1, 2, 0, 1, 2, 0, 3, 1])
    sentence = np.array([0, 0, 0, 0, 1, 1, 2, 2, 2])
    word = np.array([0, 1, 2, -1])
    c = V.cooccurrence(ids, sentence, word, window=2).toarray()
    # distance 1: (0,1) (1,2) (2,0) | (1,2); distance 2: (0,2) (1,0) | -; "0 3 1": (0,1) at distance 2
    # (3 keeps its position, the window does not skip it); every pair counts both ways
    assert c.tolist() == [[0, 3, 2],
                          [3, 0, 2],
                          [2, 2, 0]]
    # window 1: only the neighbours; 2 and 0 across the sentence end do not count
    assert V.cooccurrence(ids, sentence, word, window=1).toarray().tolist() == [[0, 1, 1], [1, 0, 2], [1, 2, 0]]


def _toy_text():
    # four sentences over tokens 0..5; token 5 occurs once (below min_count 2)
    sentences = [[0, 1, 2, 3], [1, 2, 3, 4], [0, 2, 4, 1], [3, 4, 0, 5], [2, 1, 0, 4]]
    ids = np.array([t for s in sentences for t in s])
    sentence = np.repeat(np.arange(len(sentences)), [len(s) for s in sentences])
    return ids, sentence


def test_train_is_ppmi_svd_of_the_vocabulary_and_the_same_bytes_twice():
    ids, sentence = _toy_text()
    words = V.train([(ids, sentence)], 7, dim=3, window=2, min_count=2)
    assert words.shape == (7, 3)
    # token 5 (1 occurrence) and token 6 (none) are outside the vocabulary: zero rows
    assert not words[5].any() and not words[6].any()
    assert np.linalg.norm(words[:5], axis=1) == pytest.approx(np.ones(5))
    # the vocabulary's rows are pivot.eval.distributional's PPMI-SVD of the counts
    word = np.array([0, 1, 2, 3, 4, -1, -1])
    want = svd_vectors(ppmi(V.cooccurrence(ids, sentence, word, 2), 0.75), 3, seed=0)
    assert words[:5].tobytes() == want.tobytes()
    assert V.train([(ids, sentence)], 7, dim=3, window=2, min_count=2).tobytes() == words.tobytes()


def test_train_with_too_few_words_gives_no_vectors():
    ids, sentence = np.array([0, 1, 0, 1]), np.array([0, 0, 1, 1])
    assert not V.train([(ids, sentence)], 3, dim=4, min_count=1).any()
    # 5 words: at most 4 singular vectors; the columns beyond are 0
    ids, sentence = _toy_text()
    words = V.train([(ids, sentence)], 6, dim=8, min_count=2)
    assert words.shape == (6, 8) and not words[:, 4:].any() and words[:5, :4].any()


def test_phrase_vectors_are_the_mean_of_the_known_words():
    words = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0], [0.6, 0.8]])   # word 2 has no vector
    rows = np.array([[0, 1, -1], [2, -1, -1], [3, 2, 0], [-1, -1, -1]])
    vec, has = V.phrase_vectors(rows, words)
    assert vec.dtype == np.float32
    # "0 1": (0.5, 0.5); "2": none; "3 2 0": mean of words 3 and 0 = (0.8, 0.4); empty row: none
    assert vec.tolist() == [[0.5, 0.5], [0.0, 0.0], [0.800000011920929, 0.4000000059604645], [0.0, 0.0]]
    assert has.tolist() == [True, False, True, False]


def test_phrase_vectors_by_blocks_are_the_bytes_of_one(monkeypatch):
    """Blocks of 2 and 3 phrases (the last one short) give the bytes of one block of all."""
    rng = np.random.default_rng(0)
    words = rng.normal(size=(9, 4))
    words[3] = 0.0
    rows = rng.integers(-1, 9, size=(7, 3))
    whole = V.phrase_vectors(rows, words)
    for block in (2, 3):
        monkeypatch.setattr(V, "PHRASE_BLOCK", block)
        vec, has = V.phrase_vectors(rows, words)
        assert vec.tobytes() == whole[0].tobytes() and has.tolist() == whole[1].tolist()


def _phrases_with_vectors():
    from tests.test_ppdb2 import _phrases

    ph = _phrases(["cell", "cells", "cellular", "kidney"])
    ph.vec = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 0.0], [0.0, -2.0]], np.float32)
    ph.vec_has = np.array([True, True, False, True])
    return ph


def test_vector_pair_columns_by_hand():
    ph = _phrases_with_vectors()
    cos, missing = P.vector_pair_columns(ph, np.array([0, 0, 1, 2]), np.array([1, 3, 3, 0]))
    # (1,0).(0.6,0.8) = 0.6; (1,0).(0,-2) = 0; (0.6,0.8).(0,-2) = -1.6 / 2 = -0.8; phrase 2 has none
    assert cos.tolist() == pytest.approx([0.6, 0.0, -0.8, 0.0], abs=1e-7)
    assert missing.tolist() == [0.0, 0.0, 0.0, 1.0]
    names = P.feature_names(["general"], ph.dim)
    assert names[-6:] == ["vec_cos", "vec_missing", "vec_e1[0]", "vec_e1[1]", "vec_e2[0]", "vec_e2[1]"]
    assert P.pair_feature_names(["general"], 2) == names[:-4]
    # the score has neither the phrase coordinates nor (measured, SCORE_EXCLUDED) the cosine
    assert P.score_features(["general"], 2) == P.pair_feature_names(["general"], 0)
    cols = P.pair_features(ph, [0], [1], np.array([[0.5]]), np.array([[0.25]]), [1], np.array([[-1, -1, -1]]),
                           np.array([0]))
    assert len(cols) == len(P.pair_feature_names(["general"], 2)) and cols[-2][0] == pytest.approx(0.6)


def _model():
    names = ["a", "vec_e1[0]", "vec_e1[1]", "vec_e2[0]", "vec_e2[1]"]
    std = P.Standardiser(names, np.array([1.0, 0.5, 0.0, 0.5, 0.0]), np.array([2.0, 0.5, 1.0, 0.5, 1.0]), [])
    W = np.zeros((len(wordnet.RELATIONS), 6))
    W[:, 0] = np.arange(6) * 0.1
    W[1] = [0.1, 1.0, 2.0, 0.0, 0.0, -1.0]     # class 1: a, e1's coordinate 0, e2's coordinate 1
    W[3, 3] = 0.5                              # class 3: e1's coordinate 1
    return P.RelationModel(std, W)


def test_phrase_terms_by_hand_and_the_split_model_gives_the_full_model():
    model = _model()
    ph = _phrases_with_vectors()
    t1, t2 = model.phrase_terms(ph.vec)
    # class 1, phrase 1 as e1: 2 * (0.6 - 0.5) / 0.5 = 0.4; as e2: -1 * (0.8 - 0) / 1 = -0.8
    assert t1[1, 1] == pytest.approx(0.4) and t2[1, 1] == pytest.approx(-0.8)
    # class 3, phrase 3 as e1: 0.5 * (-2 - 0) / 1 = -1; classes without vector weights: 0
    assert t1[3, 3] == pytest.approx(-1.0) and not t1[:, [0, 2, 4, 5]].any() and not t2[:, [0, 2, 3, 4, 5]].any()
    # only the rows asked for
    r1, _ = model.phrase_terms(ph.vec, [1])
    assert r1[1].tolist() == t1[1].tolist() and not r1[[0, 2, 3]].any()
    pair = model.pair_part()
    assert pair.std.names == ["a"] and pair.W.shape == (6, 2) and pair.W[1].tolist() == [0.1, 1.0]
    e1, e2, a = np.array([0, 1, 3, 2]), np.array([1, 3, 0, 0]), np.array([0.0, 1.0, 2.0, 5.0])
    full = model.probabilities(["a", "vec_e1[0]", "vec_e1[1]", "vec_e2[0]", "vec_e2[1]"],
                               np.column_stack([a, P.phrase_columns(ph, e1, e2)]))
    split = pair.probabilities_columns(["a"], [a], (t1[e1], t2[e2]))
    assert split == pytest.approx(full, abs=1e-12)
    # pair (1, 3): eta_1 = 0.1 + 1 * (1 - 1) / 2 + 0.4 + (-1) * (-2 - 0) / 1 = 2.5; eta_3 = 0.3 + 0.5 * 0.8 = 0.7
    eta = np.array([0.0, 2.5, 0.2, 0.7, 0.4, 0.5])
    assert split[1] == pytest.approx(np.exp(eta) / np.exp(eta).sum())


def test_phrase_terms_by_blocks_are_the_bytes_of_one(monkeypatch):
    """phrase_terms over blocks of 1 and 2 phrases (rows asked for out of order, the last block
    short) gives the bytes of one block of all."""
    model, vec = _model(), np.random.default_rng(2).normal(size=(5, 2)).astype(np.float32)
    whole = model.phrase_terms(vec, [4, 0, 3])
    for block in (1, 2):
        monkeypatch.setattr(P, "APPLY_ROWS", block)
        got = model.phrase_terms(vec, [4, 0, 3])
        assert [t.tobytes() for t in got] == [t.tobytes() for t in whole]
    assert not whole[0][[1, 2]].any() and whole[0][[0, 3, 4], 1].all()


def test_apply_with_vectors_is_the_same_however_the_pairs_are_cut(tmp_path):
    """The apply step with word vectors (the per-phrase terms file) writes the bytes of one pass
    for any cut of the pairs, and its relations are the full model's."""
    from tests.test_ppdb2 import _fit_json, _label_parts, _row_parts

    from pivot.pipeline.bundle import open_bundle, save_bundle

    names = P.pair_feature_names(["general"], 2)
    ph = _phrases_with_vectors()
    model = _model()
    model.std.names[0] = "logp_min[general]"
    out = {}
    for cuts in ([(0, 6)], [(0, 2), (2, 5), (5, 6)]):
        d = tmp_path / str(len(cuts))
        d.mkdir()
        parts, table = _row_parts(d, cuts)
        ph.save(d / "ph.arrays")
        labels = _label_parts(d, table, cuts, np.zeros(6, np.uint8))
        fit = _fit_json(names)
        fit["relations"] = model.to_json()
        (d / "fit.json").write_text(json.dumps(fit))
        t1, t2 = model.phrase_terms(ph.vec)
        save_bundle(d / "terms.arrays", t1=t1, t2=t2)
        rel = []
        for j in range(len(parts)):
            P.apply_range(parts, j, d / "ph.arrays", labels[j], d / "fit.json", d / f"x-{j}.arrays",
                          d / "terms.arrays")
            with open_bundle(d / f"x-{j}.arrays") as z:
                rel.append(z["rel"])
        out[len(cuts)] = np.concatenate(rel)
    assert out[1].tobytes() == out[3].tobytes()
    # pair 0 = (0, 1): logp_min = ln 0.25 (its reverse (1, 0) has 0.25): the full model's per mille
    x = np.array([[math.log(0.25), *P.phrase_columns(ph, [0], [1])[0]]])
    want = P.per_mille(model.probabilities(["logp_min[general]", "vec_e1[0]", "vec_e1[1]", "vec_e2[0]", "vec_e2[1]"],
                                           x))
    assert out[1][0].tolist() == want[0].tolist()


def test_vector_pair_columns_are_the_same_however_the_rows_are_cut():
    """The cosine's row sums (float32 einsum) do not depend on where a row lands in a block."""
    from tests.test_ppdb2 import _phrases

    rng = np.random.default_rng(3)
    ph = _phrases(["a"] * 40)
    ph.vec = rng.standard_normal((40, 50)).astype(np.float32)
    ph.vec_has = np.ones(40, bool)
    e1, e2 = rng.integers(0, 40, 301), rng.integers(0, 40, 301)
    whole = P.vector_pair_columns(ph, e1, e2)[0]
    for cut in (1, 3, 7, 64):
        parts = [P.vector_pair_columns(ph, e1[a:a + cut], e2[a:a + cut])[0] for a in range(0, 301, cut)]
        assert np.concatenate(parts).tobytes() == whole.tobytes(), cut
    v1, v2 = ph.vec[e1].astype(np.float64), ph.vec[e2].astype(np.float64)
    assert whole == pytest.approx((v1 * v2).sum(1) / np.sqrt((v1 * v1).sum(1) * (v2 * v2).sum(1)), abs=1e-6)


def test_vectors_task_writes_the_phrase_vectors_of_the_trained_words(tmp_path, monkeypatch):
    """The stage's vectors task (a worker's, beside the forms task): the words trained on the
    shards' English, each phrase's mean of its words', as the bytes train and phrase_vectors
    give in this process, PHRASE_BLOCK rows at a time; an output already written is reused."""
    from pivot.pipeline.bundle import open_bundle, save_bundle

    sentences = [[0, 1, 2, 3], [1, 2, 3, 4], [0, 2, 4, 1], [3, 4, 0, 5], [2, 1, 0, 4]] * 2
    shards = [_shard(tmp_path / "a.npz", sentences[:6]), _shard(tmp_path / "b.npz", sentences[6:])]
    tokens = np.array([[0, 1, -1], [5, -1, -1], [4, 2, 3], [-1, -1, -1], [6, 0, -1]], np.int32)
    save_bundle(tmp_path / "tokens.arrays", tokens=tokens)
    words = V.train(V.EnglishShards(shards), 7)
    # tokens 0..4 occur 8 times each (min_count 5), 5 twice, 6 never: 5 words, 4 dimensions
    assert words[:5, :4].any() and not words[5:].any() and not words[:, 4:].any()
    want_vec, want_has = V.phrase_vectors(tokens, words)
    assert want_has.tolist() == [True, False, True, False, True]
    monkeypatch.setattr(V, "PHRASE_BLOCK", 2)
    done = P.vectors_task([str(s) for s in shards], 7, tmp_path / "tokens.arrays", tmp_path / "v.arrays")
    assert done["words"] == 5 and done["dim"] == 50 and not done["reused"]
    with open_bundle(tmp_path / "v.arrays") as z:
        assert z["vec"].tobytes() == want_vec.tobytes() and z["vec_has"].tobytes() == want_has.tobytes()
    assert P.vectors_task(shards, 7, tmp_path / "tokens.arrays", tmp_path / "v.arrays") == {"reused": True}


# --- the stage's vectors as tasks (vectors.job) ---------------------------------------------------

def test_counts_per_shard_summed_are_the_whole_texts_by_hand(tmp_path):
    """The occurrences and the co-occurrence counts of each shard (a task each), summed per range
    of the vocabulary's rows, are the whole text's (test_cooccurrence_by_hand's text, cut after
    its second sentence)."""
    from pivot.pipeline.bundle import open_bundle, save_bundle

    a = _shard(tmp_path / "a.npz", [[0, 1, 2, 0], [1, 2]])
    b = _shard(tmp_path / "b.npz", [[0, 3, 1]])
    counts = [tmp_path / "n-a.arrays", tmp_path / "n-b.arrays"]
    for shard, path in zip((a, b), counts):
        assert V.count_task([str(shard)], 5, path) == {"reused": False, "cpu_seconds": pytest.approx(0, abs=5)}
    with open_bundle(counts[0]) as z:
        assert z["ids"].tolist() == [0, 1, 2] and z["n"].tolist() == [2, 2, 2]
    with open_bundle(counts[1]) as z:
        assert z["ids"].tolist() == [0, 1, 3] and z["n"].tolist() == [1, 1, 1]
    # 0 and 1 three times, 2 twice, 3 once, 4 never: with min_count 2 the words 0, 1, 2
    vocab, n = V.vocabulary(counts, 5, min_count=2)
    assert vocab.tolist() == [0, 1, 2] and n.tolist() == [3, 3, 2, 1, 0]
    # rows 0 | 1-2
    save_bundle(tmp_path / "vocab.arrays", vocab=vocab, cuts=np.array([0, 1, 3]))
    cooc = [tmp_path / "c-a.arrays", tmp_path / "c-b.arrays"]
    for shard, path in zip((a, b), cooc):
        V.cooccurrence_task([str(shard)], tmp_path / "vocab.arrays", 5, path)
    # a: "0 1 2 0" at distance 1 (0,1) (1,2) (2,0), at distance 2 (0,2) (1,0); "1 2": (1,2);
    # b: "0 3 1": (0,1) at distance 2 (3 is no word but keeps its position); both ways each
    with open_bundle(cooc[0]) as z:
        assert (z["ptr"].tolist(), z["cols"].tolist(), z["counts"].tolist()) == \
            ([0, 2, 4, 6], [1, 2, 0, 2, 0, 1], [2.0, 2.0, 2.0, 2.0, 2.0, 2.0])
    with open_bundle(cooc[1]) as z:
        assert (z["ptr"].tolist(), z["cols"].tolist(), z["counts"].tolist()) == ([0, 1, 2, 2], [1, 0], [1.0, 1.0])
    sums = [tmp_path / "s-0.arrays", tmp_path / "s-1.arrays"]
    for k, path in enumerate(sums):
        V.sum_task(cooc, tmp_path / "vocab.arrays", k, path)
    # the whole's rows [[0, 3, 2], [3, 0, 2], [2, 2, 0]], row 0 in the first range, 1-2 in the second
    with open_bundle(sums[0]) as z:
        assert (z["ptr"].tolist(), z["cols"].tolist(), z["counts"].tolist()) == ([0, 2], [1, 2], [3.0, 2.0])
    with open_bundle(sums[1]) as z:
        assert (z["ptr"].tolist(), z["cols"].tolist(), z["counts"].tolist()) == \
            ([0, 2, 4], [0, 2, 0, 1], [3.0, 2.0, 2.0, 2.0])
    whole = V.cooccurrence(*next(iter(V.EnglishShards([_shard(tmp_path / "w.npz", [[0, 1, 2, 0], [1, 2], [0, 3, 1]])]))),
                           V.word_index(vocab, 5))
    assert whole.toarray().tolist() == [[0, 3, 2], [3, 0, 2], [2, 2, 0]]


def test_summed_is_canonical_whatever_the_order():
    """Count matrices summed in any order, as triplets or CSR: the same canonical arrays."""
    from scipy import sparse

    one = sparse.csr_matrix(np.array([[0, 2, 0], [1, 0, 0], [0, 0, 3]], float))
    two = (np.array([2, 0, 0, 2]), np.array([0, 2, 1, 0]), np.array([1.0, 4.0, 1.0, 1.0]))
    a, b = V.summed([one, two], (3, 3)), V.summed([two, one], (3, 3))
    assert a.toarray().tolist() == [[0, 3, 4], [1, 0, 0], [2, 0, 3]]
    for m in (a, b):
        assert m.indptr.tolist() == [0, 2, 3, 5] and m.indices.tolist() == [1, 2, 0, 0, 2]
        assert m.data.tolist() == [3.0, 4.0, 1.0, 2.0, 3.0]
    assert V.summed([], (2, 2)).nnz == 0


def test_row_cuts_share_the_occurrences():
    mass = np.array([5, 1, 1, 1, 1, 1])
    assert V.row_cuts(mass, 1).tolist() == [0, 6]
    # half the occurrences are row 0's: cum 5 6 7 8 9 10, the cut after the first row whose
    # cum passes 5
    assert V.row_cuts(mass, 2).tolist() == [0, 1, 6]
    # thirds (3.3, 6.7): the first range is empty (row 0 alone is over a third), the second rows 0-1
    assert V.row_cuts(mass, 3).tolist() == [0, 0, 2, 6]
    assert V.row_cuts(np.zeros(0, np.int64), 2).tolist() == [0, 0, 0]


def test_vocabulary_rows_by_hand():
    """Token ids as rows of the vocabulary [2, 5, 9]; ids outside it (and padding) give -1, and
    the phrase means over the vocabulary's rows are the means over the rows by token id."""
    vocab = np.array([2, 5, 9])
    tokens = np.array([[5, 2, -1], [3, 9, 10], [-1, -1, -1], [0, 5, 5]], np.int32)
    assert V.vocabulary_rows(tokens, vocab).tolist() == [[1, 0, -1], [-1, 2, -1], [-1, -1, -1], [-1, 1, 1]]
    rng = np.random.default_rng(5)
    compact = rng.normal(size=(3, 4))
    compact[2] = 0.0                       # a word of the vocabulary without a vector
    by_id = np.zeros((11, 4))
    by_id[vocab] = compact
    want = V.phrase_vectors(tokens, by_id)
    got = V.phrase_vectors(V.vocabulary_rows(tokens, vocab), compact)
    assert got[0].tobytes() == want[0].tobytes() and got[1].tolist() == want[1].tolist() == [True, False, False, True]


def _vectors_both_ways(tmp_path, sentences, tokens, n_tokens, n_shards):
    """(one-task file's bytes, the job's file's bytes, files the job left, what it returned)."""
    from pivot.pipeline.bundle import save_bundle
    from pivot.pipeline.engine import Engine

    cut = np.linspace(0, len(sentences), n_shards + 1).astype(int)
    shards = [str(_shard(tmp_path / f"{k}.npz", sentences[a:b])) for k, (a, b) in enumerate(zip(cut[:-1], cut[1:]))]
    save_bundle(tmp_path / "tokens.arrays", tokens=tokens)
    P.vectors_task(shards, n_tokens, tmp_path / "tokens.arrays", tmp_path / "one.arrays")
    out = tmp_path / "job" / ".vectors.arrays"
    out.parent.mkdir()
    done = Engine(workers=1).run(P._vectors_job(shards, n_tokens, tmp_path / "tokens.arrays", out))[0]
    return (tmp_path / "one.arrays").read_bytes(), out.read_bytes(), sorted(p.name for p in out.parent.iterdir()), done


@pytest.mark.parametrize("groups, sum_tokens, block", [(8, 1 << 26, 500_000), (2, 100, 7), (3, 40, 1)])
def test_the_jobs_vectors_file_is_the_bytes_of_the_one_task(tmp_path, monkeypatch, groups, sum_tokens, block):
    """The stage's job (its steps as tasks) writes the bytes vectors_task writes: the default
    cut (one group of shards, one range, one block of phrases), and shards, rows and phrases cut
    into many tasks (2 shards a group, 40 tokens a range: 5 ranges, 1 phrase a block)."""
    rng = np.random.default_rng(4)
    # 60 sentences of 3-9 tokens over 40 ids, Zipf-like (small ids frequent), in 6 shards
    sentences = [np.minimum(rng.zipf(1.3, size=rng.integers(3, 10)) - 1, 39).tolist() for _ in range(60)]
    tokens = rng.integers(-1, 42, size=(23, 4)).astype(np.int32)
    tokens[5] = -1
    monkeypatch.setattr(V, "SHARDS_PER_TASK", groups)
    monkeypatch.setattr(V, "SUM_TOKENS", sum_tokens)
    monkeypatch.setattr(P, "PHRASE_BLOCK", block)
    one, job, left, done = _vectors_both_ways(tmp_path, sentences, tokens, 42, 6)
    assert job == one and left == [".vectors.arrays"]
    n_words = int((np.bincount(np.concatenate(sentences), minlength=42) >= V.MIN_COUNT).sum())
    assert done["vocab"] == n_words and n_words >= 10 and done["dim"] == V.DIM
    n_ranges = -(-sum(map(len, sentences)) // sum_tokens)
    assert done["tasks"] == {"counts": 2 * -(-6 // groups), "sums": n_ranges, "svd": 1, "means": -(-23 // block)}


def test_the_jobs_vectors_without_words_or_phrases_are_the_one_tasks(tmp_path):
    """Fewer than 3 words of MIN_COUNT occurrences: no co-occurrence tasks, zero vectors; no
    phrases: an empty file. The one-task bytes either way."""
    # 0 and 1 five times each, 2 once: 2 words
    sentences = [[0, 1]] * 5 + [[2]]
    (tmp_path / "a").mkdir()
    one, job, left, done = _vectors_both_ways(tmp_path / "a", sentences, np.array([[0, 1], [2, -1]], np.int32), 4, 2)
    assert job == one and left == [".vectors.arrays"] and done["words"] == 0
    assert done["tasks"] == {"counts": 1, "sums": 0, "svd": 1, "means": 1}
    (tmp_path / "b").mkdir()
    sentences = [[0, 1, 2, 3]] * 5
    one, job, left, done = _vectors_both_ways(tmp_path / "b", sentences, np.zeros((0, 3), np.int32), 4, 2)
    assert job == one and done["words"] == 4 and done["tasks"]["means"] == 0
