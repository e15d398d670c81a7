"""Weight columns of the Moore-Lewis models, exact values by hand."""
import json

import numpy as np
import pytest

from pivot.pipeline.score import MooreLewisScores, RankBuckets
from pivot.pipeline.weights import (PairwiseSum, _pairwise_leaves, auc_mann_whitney, change_point,
                                    default_taus, general, ml_weighted, ml_weighted_ppl, model_columns,
                                    rank_cuts, top_tau, weight_report, words_label, write_model_columns)

SIGMA = np.array([0.5, -1.0, 0.0, -2.0, -1.0])
N_WORDS = np.array([3, 4, 2, 5, 1])
# ranking: s3 (-2), s1 (-1), s4 (-1, tie: later in corpus), s2 (0), s0 (0.5)
# running words:  5,  9,  10,  12,  15


@pytest.mark.parametrize("tau, selected", [
    (0, []), (4, []),            # the first sentence alone (5 words) exceeds tau
    (5, [3]), (8, [3]),
    (9, [3, 1]),                 # running total exactly tau: included
    (10, [3, 1, 4]), (11, [3, 1, 4]),   # s2 would make 12 > 11: stop, nothing after it
    (15, [0, 1, 2, 3, 4]), (10**9, [0, 1, 2, 3, 4]),
])
def test_top_tau_boundary(tau, selected):
    w = top_tau(SIGMA, N_WORDS, tau)
    expected = np.zeros(5)
    expected[selected] = 1
    assert w.tolist() == expected.tolist()
    assert N_WORDS[w == 1].sum() <= tau


def test_top_tau_takes_a_prefix_not_a_later_short_sentence():
    # ranks: s0 (6 words), s1 (1 word). tau=5: s0 does not fit, and s1 is NOT taken instead
    assert top_tau([-2.0, -1.0], [6, 1], 5).tolist() == [0.0, 0.0]


def test_top_tau_rejects_bad_input():
    with pytest.raises(ValueError):
        top_tau(SIGMA, N_WORDS[:3], 5)
    with pytest.raises(ValueError):
        top_tau(SIGMA, N_WORDS, -1)


def test_change_point_excludes_zero():
    assert change_point(SIGMA).tolist() == [0.0, 1.0, 0.0, 1.0, 1.0]
    assert change_point([0.0, -0.0, -1e-300]).tolist() == [0.0, 0.0, 1.0]


def test_weighted_columns():
    assert general(3).tolist() == [1.0, 1.0, 1.0]
    # H_gen / H_tgt: 6/3, 8/4, 5/10, 10/5, 4/8
    assert ml_weighted([6, 8, 5, 10, 4], [3, 4, 10, 5, 8]).tolist() == [2, 2, 0.5, 2, 0.5]
    # 2^-sigma: 2^-0.5, 2^1, 2^0, 2^2, 2^1
    assert ml_weighted_ppl(SIGMA).tolist() == [2 ** -0.5, 2.0, 1.0, 4.0, 2.0]
    # the paper's extremes 52 and 0.0068 are 2^-sigma at sigma = -5.70 and +7.20 bits
    assert ml_weighted_ppl([-np.log2(52), np.log2(1 / 0.0068)]) == pytest.approx([52, 0.0068])
    with pytest.raises(ValueError):
        ml_weighted([1.0], [0.0])


def test_words_label():
    assert [words_label(n) for n in (950, 1500, 8721, 166000, 999_999, 1_500_000, 35_000_000)] \
        == ["950", "1.5k", "8.72k", "166k", "1m", "1.5m", "35m"]


def test_default_taus_scale_the_paper():
    # 828,000 words = 1/1000 of the paper's 828M: taus 1.5M, 7M, 35M, 166M -> /1000
    taus = default_taus(828_000, extra_taus=(7000, 50))
    assert [t["tau_words"] for t in taus] == [1500, 7000, 35000, 166000, 50]
    assert [t["paper_tau_words"] for t in taus] == [1_500_000, 7_000_000, 35_000_000,
                                                    166_000_000, None]


def _scores():
    h_tgt = np.array([3.0, 4.0, 10.0, 5.0, 8.0])
    h_gen = h_tgt - SIGMA
    return MooreLewisScores(h_tgt=h_tgt, h_gen=h_gen, sigma=SIGMA.copy(), n_words=N_WORDS)


def test_model_columns_order_names_and_values():
    taus = [{"tau_words": 9, "paper_tau_words": None}, {"tau_words": 10, "paper_tau_words": 1_500_000}]
    weights, models = model_columns(_scores(), taus=taus)
    assert [m["name"] for m in models] == ["general", "ml-t9", "ml-t10", "ml-change-point",
                                           "ml-weighted", "ml-weighted-ppl"]
    assert weights.shape == (5, 6) and weights.dtype == np.float64
    assert weights[:, 0].tolist() == [1.0] * 5
    assert weights[:, 1].tolist() == [0, 1, 0, 1, 0]
    assert weights[:, 2].tolist() == [0, 1, 0, 1, 1]
    assert weights[:, 3].tolist() == [0, 1, 0, 1, 1]
    np.testing.assert_allclose(weights[:, 4], (_scores().h_gen) / _scores().h_tgt)
    assert weights[:, 5].tolist() == [2 ** -0.5, 2.0, 1.0, 4.0, 2.0]
    assert models[2]["params"] == {"tau_words": 10, "paper_tau_words": 1_500_000,
                                   "selected_sentences": 3, "selected_words": 10}
    json.dumps(models)


def test_model_columns_default_taus_and_name_collisions():
    weights, models = model_columns(_scores(), taus=[{"tau_words": 8721}, {"tau_words": 8722}])
    assert [m["name"] for m in models][1:3] == ["ml-t8721", "ml-t8722"]
    # 15 words: the paper's taus scale to 15 * (1.5, 7, 35, 166) / 828 = 0.03, 0.13, 0.63, 3.01
    # -> 0, 0 (a repeat, dropped), 1, 3
    weights, models = model_columns(_scores())
    assert [m["name"] for m in models] == ["general", "ml-t0", "ml-t1", "ml-t3", "ml-change-point",
                                           "ml-weighted", "ml-weighted-ppl"]


def test_auc_mann_whitney_by_hand():
    # positives 0.35, 0.8 vs negatives 0.1, 0.4: 0.35>0.1, 0.35<0.4, 0.8>both -> 3/4
    assert auc_mann_whitney([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == 0.75
    # a tie counts 1/2: pos {2, 3} vs neg {1, 2}: 1 + 0.5 + 1 + 1 = 3.5 of 4
    assert auc_mann_whitney([1, 2, 2, 3], [0, 1, 0, 1]) == 0.875
    assert np.isnan(auc_mann_whitney([1, 2], [1, 1]))


def test_weight_report():
    weights, models = model_columns(_scores(), taus=[{"tau_words": 9}])
    inside = np.array([False, True, False, True, False])
    rep = weight_report(weights, models, _scores(), inside, n_show=2)
    assert rep["models"]["ml-change-point"]["selected_in_domain"] == 2   # s1, s3
    assert rep["models"]["ml-change-point"]["selected_other"] == 1       # s4
    assert rep["models"]["ml-t9"]["selected_in_domain"] == 2
    assert rep["models"]["ml-t9"]["selected_other"] == 0
    assert rep["models"]["ml-weighted-ppl"]["top"] == [4.0, 2.0]
    assert rep["models"]["ml-weighted-ppl"]["bottom"] == [2 ** -0.5, 1.0]
    # -sigma = [-0.5, 1, 0, 2, 1]; pos {1, 2} vs neg {-0.5, 0, 1}: (1+1+0.5) + 3 = 5.5 of 6
    assert rep["auc_minus_sigma"] == pytest.approx(5.5 / 6)
    json.dumps(rep)


# ---------------------------------------------------------------- the stage's streaming columns

def _blocks(scores, block, inside=None):
    """A blocks() of write_model_columns over in-memory scores, ``block`` sentences at a time."""
    def blocks():
        for lo in range(0, len(scores.sigma), block):
            b = {"sigma": scores.sigma[lo:lo + block], "h_tgt": scores.h_tgt[lo:lo + block],
                 "h_gen": scores.h_gen[lo:lo + block], "n_words": scores.n_words[lo:lo + block]}
            if inside is not None:
                b["inside"] = inside[lo:lo + block]
            yield lo, b
    return blocks


def test_rank_buckets_by_hand():
    # sorted sigma [-2, -1, -1, 0, 0.5], step 2: positions 0, 2, 4 and the last -> bounds -2, -1, 0.5;
    # buckets: 1 (= -2), 2 (-2..-1, empty), 3 (= -1), 4 (-1..0.5: the 0), 5 (= 0.5)
    buckets = RankBuckets(np.sort(SIGMA), step=2)
    assert buckets.bounds.tolist() == [-2.0, -1.0, 0.5]
    assert buckets.n_buckets == 7
    assert buckets.of(SIGMA).tolist() == [5, 3, 4, 1, 3]
    # NaN sorts last and is its own equal bucket; -0.0 = 0.0
    nan_buckets = RankBuckets(np.sort(np.array([1.0, np.nan, 0.0])), step=5)
    assert nan_buckets.bounds[0] == 0.0 and np.isnan(nan_buckets.bounds[1])
    assert nan_buckets.of(np.array([np.nan, -0.0, 1.0])).tolist() == [3, 1, 2]


@pytest.mark.parametrize("step, block", [(1, 1), (2, 2), (2, 3), (10, 5)])
def test_rank_cuts_by_hand(step, block):
    # ranking s3, s1, s4, s2, s0 with running words 5, 9, 10, 12, 15: the cut is the first
    # sentence whose running total exceeds tau
    buckets = RankBuckets(np.sort(SIGMA), step=step)
    cuts = rank_cuts(_blocks(_scores(), block), buckets, [0, 4, 5, 9, 11, 15, 10**9])
    got = [None if c is None else c[1:] for c in cuts]
    assert got == [(-2.0, 3), (-2.0, 3), (-1.0, 1), (-1.0, 4), (0.0, 2), None, None]


def test_pairwise_leaves_by_hand():
    # 300 -> 144 + 156 (300 // 2 = 150, less 150 % 8); 144 -> 72 + 72; 156 -> 72 + 84 (78 - 6)
    assert _pairwise_leaves(300, 128) == [72, 72, 72, 84]
    assert _pairwise_leaves(100, 128) == [100]


def test_pairwise_sum_is_numpys_in_any_pieces():
    rng = np.random.default_rng(3)
    x = rng.random(10_007) * 10.0 ** rng.integers(-3, 4, 10_007)
    s = PairwiseSum(len(x), leaf=128)
    for a, b in [(0, 1), (1, 900), (900, 5000), (5000, 10_007)]:
        s.add(x[a:b])
    assert s.total() == float(np.sum(x))
    assert PairwiseSum(0).total() == 0.0


@pytest.mark.parametrize("step, block", [(1, 1), (2, 2), (3, 7), (1 << 16, 1 << 16)])
def test_write_model_columns_is_model_columns(tmp_path, step, block):
    # many ties (sigma on a 0.5 grid) across blocks and buckets, zero-word sentences, a tie at 0
    rng = np.random.default_rng(5)
    n = 200
    h_tgt = rng.integers(2, 12, n) / 2.0
    h_gen = rng.integers(2, 12, n) / 2.0
    scores = MooreLewisScores(h_tgt=h_tgt, h_gen=h_gen, sigma=h_tgt - h_gen,
                              n_words=rng.integers(0, 6, n).astype(np.int64))
    inside = rng.random(n) < 0.3
    taus = default_taus(int(scores.n_words.sum()), extra_taus=(0, 7, 100, 333))
    weights, models = model_columns(scores, taus=taus)
    report = weight_report(weights, models, scores, inside)
    path = tmp_path / "weights.npy"
    got_models, got_report = write_model_columns(path, _blocks(scores, block, inside), n, taus=taus,
                                                 with_origin=True, step=step)
    ref = tmp_path / "ref.npy"
    np.save(ref, weights)
    assert path.read_bytes() == ref.read_bytes()
    assert got_models == models
    assert json.dumps(got_report) == json.dumps(report)
    # without origin: the report has no in-domain counts, as weight_report without it
    _, plain = write_model_columns(path, _blocks(scores, block), n, taus=taus, step=step)
    assert json.dumps(plain) == json.dumps(weight_report(weights, models, scores))
