"""Moore-Lewis scores on two hand-written bigram ARPA models (exact values by hand)."""
import math

import numpy as np
import pytest

from pivot.errors import InputError
from pivot.pipeline.score import LOG2_10, count_words, cross_entropy, moore_lewis, ranking, write_ranked

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
