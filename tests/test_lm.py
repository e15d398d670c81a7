"""Tests of the modified Kneser-Ney estimator (pivot/pipeline/lm.py).

Exact values come from hand computations written beside them; larger random
corpora are checked against a plain dict-based implementation of the same
formulas (written here, independent of the vectorised one), against kenlm's
own reading of the ARPA file, and against kenlm's lmplz when it is installed.
"""
import math
import random
import sys
import warnings
from collections import Counter, defaultdict
from fractions import Fraction as F
from pathlib import Path

import numpy as np
import pytest

kenlm = pytest.importorskip("kenlm")

from pivot.pipeline import lm  # noqa: E402

L = math.log10
TOL = 1e-6


def sentences(text):
    """'a b|c' -> [['a', 'b'], ['c']]"""
    return [s.split() for s in text.split("|")]


def estimate(tmp_path, sents, order, **kwargs):
    path = tmp_path / f"o{order}.arpa"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", lm.DiscountFallbackWarning)
        stats = lm.estimate_arpa(sents, path, order, **kwargs)
    return stats, lm.read_arpa(path), path


def check_arpa(arpa, expected):
    """expected: {ngram string: (p, gamma or None)}; p and gamma are probabilities."""
    got = {" ".join(k): v for n in arpa for k, v in arpa[n].items()}
    assert set(got) == set(expected)
    for gram, (p, gamma) in expected.items():
        log_p = 0.0 if p == 1 else L(p)
        assert got[gram][0] == pytest.approx(log_p, abs=TOL), gram
        log_b = 0.0 if gamma is None else L(gamma)
        assert got[gram][1] == pytest.approx(log_b, abs=TOL), gram


# ---------------------------------------------------------------------------
# Hand computations
# ---------------------------------------------------------------------------

# Corpus C1, order 2:   <s> a b c </s> | <s> a b </s> | <s> b c a </s>
# Word ids (first appearance): <unk> 0, <s> 1, </s> 2, a 3, b 4, c 5.
# Bigram raw counts (highest order, used as they are):
#   <s> a 2, a b 2, b c 2, <s> b 1, c </s> 1, b </s> 1, c a 1, a </s> 1
#   counts-of-counts t1=5 t2=3 t3=0 -> the formula fails (t3 = 0): fallback 0.5 1 1.5
# Unigram adjusted counts (distinct left neighbours):
#   a {<s>, c} = 2, b {a, <s>} = 2, c {b} = 1, </s> {c, b, a} = 3, <s> 0, <unk> 0
#   textbook counts-of-counts t1=1 t2=2 t3=1 t4=0:
#   Y = 1/(1+2*2) = 0.2, D1 = 1 - 2*0.2*2/1 = 0.2, D2 = 2 - 3*0.2*1/2 = 1.7,
#   D3+ = 3 - 4*0.2*0/1 = 3
C1 = "a b c|a b|b c a"


def test_c1_bigram_textbook_discounts(tmp_path):
    with pytest.warns(lm.DiscountFallbackWarning, match="order 2"):
        stats = lm.estimate_arpa(sentences(C1), tmp_path / "c1.arpa", 2, lmplz_statistics=False)
    assert stats.counts_of_counts == ((1, 2, 1, 0), (5, 3, 0, 0))
    assert stats.discounts[0] == pytest.approx((0.2, 1.7, 3.0))
    assert stats.discounts[1] == (0.5, 1.0, 1.5)
    assert stats.fallback_orders == (2,)
    assert stats.ngram_counts == (6, 8)
    assert (stats.n_sentences, stats.n_tokens, stats.vocab_size) == (3, 8, 6)
    as_json = stats.to_json()
    assert as_json["discounts"][1] == [0.5, 1.0, 1.5] and as_json["ngram_counts"] == [6, 8]
    # Unigrams: S = 2+2+1+3 = 8, gamma() = (0.2*1 + 1.7*2 + 3*1)/8 = 0.825,
    # |V| = 5 (all but <s>), so each word gets 0.825/5 = 0.165 on top:
    #   p(a) = p(b) = (2-1.7)/8 + 0.165 = 0.2025, p(c) = (1-0.2)/8 + 0.165 = 0.265,
    #   p(</s>) = (3-3)/8 + 0.165 = 0.165, p(<unk>) = 0.165; sum = 1.
    # Bigrams (D = 0.5, 1, 1.5):
    #   h=<s>: a 2, b 1; S=3, gamma = (1 + 0.5)/3 = 0.5
    #     p(a|<s>) = 1/3 + 0.5*0.2025,  p(b|<s>) = 0.5/3 + 0.5*0.2025
    #   h=a: b 2, </s> 1; S=3, gamma=0.5: p(b|a) = 1/3 + 0.5*0.2025, p(</s>|a) = 0.5/3 + 0.5*0.165
    #   h=b: c 2, </s> 1; gamma=0.5: p(c|b) = 1/3 + 0.5*0.265, p(</s>|b) = 0.5/3 + 0.5*0.165
    #   h=c: </s> 1, a 1; S=2, gamma = (0.5+0.5)/2 = 0.5: p(</s>|c) = 0.25 + 0.5*0.165,
    #     p(a|c) = 0.25 + 0.5*0.2025
    check_arpa(lm.read_arpa(tmp_path / "c1.arpa"), {
        "<unk>": (0.165, None), "<s>": (1, 0.5), "</s>": (0.165, None),
        "a": (0.2025, 0.5), "b": (0.2025, 0.5), "c": (0.265, 0.5),
        "<s> a": (1 / 3 + 0.10125, None), "<s> b": (0.5 / 3 + 0.10125, None),
        "a b": (1 / 3 + 0.10125, None), "a </s>": (0.5 / 3 + 0.0825, None),
        "b c": (1 / 3 + 0.1325, None), "b </s>": (0.5 / 3 + 0.0825, None),
        "c </s>": (0.25 + 0.0825, None), "c a": (0.25 + 0.10125, None),
    })


def test_c1_lmplz_statistics_takes_raw_count_of_last_unigram(tmp_path):
    # lmplz records the raw count of the last n-gram of each lower order in its
    # suffix-sorted stream: for unigrams the word with the largest id, c, raw 2
    # (adjusted 1). Counts-of-counts become t1=0 t2=3 (a, b, c) t3=1: no
    # singletons, so order 1 falls back to 0.5 1 1.5 as well.
    #   S = 8 (probabilities still use adjusted counts),
    #   gamma() = (0.5*1 + 1.0*2 + 1.5*1)/8 = 0.5, uniform share 0.5/5 = 0.1
    #   p(a) = (2-1)/8 + 0.1 = 0.225, p(c) = (1-0.5)/8 + 0.1 = 0.1625,
    #   p(</s>) = (3-1.5)/8 + 0.1 = 0.2875, p(<unk>) = 0.1
    stats, arpa, _ = estimate(tmp_path, sentences(C1), 2)
    assert stats.counts_of_counts[0] == (0, 3, 1, 0)
    assert stats.fallback_orders == (1, 2)
    assert arpa[1][("a",)][0] == pytest.approx(L(0.225), abs=TOL)
    assert arpa[1][("c",)][0] == pytest.approx(L(0.1625), abs=TOL)
    assert arpa[1][("</s>",)][0] == pytest.approx(L(0.2875), abs=TOL)
    assert arpa[1][("<unk>",)][0] == pytest.approx(L(0.1), abs=TOL)


# Corpus C2, order 3: every order's discounts come from the formula.
#   <s> b </s> x3 | <s> c </s> x2 | <s> a </s> | <s> a b </s>
# Trigrams (raw): <s> b </s> 3, <s> c </s> 2, <s> a </s> 1, <s> a b 1, a b </s> 1
#   t = (3, 1, 1, 0): Y = 3/5, D1 = 1 - 2(3/5)(1/3) = 0.6, D2 = 2 - 3(3/5)(1/1) = 0.2, D3+ = 3
# Bigrams: <s> b 3, <s> c 2, <s> a 2 (start with <s>: raw counts);
#   b </s> {<s>, a} = 2, c </s> 1, a </s> 1, a b {<s>} = 1
#   t = (3, 3, 1, 0): Y = 1/3, D1 = 1 - 2(1/3)(3/3) = 1/3, D2 = 2 - 3(1/3)(1/3) = 5/3, D3+ = 3
# Unigrams: b {<s>, a} = 2, c 1, a 1, </s> {b, c, a} = 3
#   textbook t = (2, 1, 1, 0): Y = 1/2, D1 = 1 - 2(1/2)(1/2) = 0.5, D2 = 2 - 3(1/2)(1/1) = 0.5, D3+ = 3
C2 = "b|c|a|a b|c|b|b"


def c2_expected():
    """The whole C2 model by hand, in exact fractions (textbook discounts)."""
    # Unigrams: S = 7, gamma() = (0.5*2 + 0.5*1 + 3*1)/7 = 9/14, |V| = 5: share 9/70.
    p_b, p_c, p_a = F(15, 70) + F(9, 70), F(5, 70) + F(9, 70), F(5, 70) + F(9, 70)
    p_eos = p_unk = F(9, 70)
    assert p_b + p_c + p_a + p_eos + p_unk == 1
    # Bigrams, D = 1/3, 5/3, 3.
    g_bos = (3 + F(5, 3) * 2) / 7                     # h=<s>: b 3, c 2, a 2 -> 19/21
    g_b = F(5, 3) / 2                                 # h=b: </s> 2 -> 5/6
    g_c = F(1, 3) / 1                                 # h=c: </s> 1
    g_a = (F(1, 3) + F(1, 3)) / 2                     # h=a: </s> 1, b 1 -> 1/3
    p_b_bos = (3 - 3) / F(7) + g_bos * p_b            # 76/245
    p_c_bos = (2 - F(5, 3)) / 7 + g_bos * p_c         # 8/35
    p_a_bos = p_c_bos
    p_eos_b = (2 - F(5, 3)) / 2 + g_b * p_eos         # 23/84
    p_eos_c = (1 - F(1, 3)) + g_c * p_eos             # 149/210
    p_eos_a = (1 - F(1, 3)) / 2 + g_a * p_eos         # 79/210
    p_b_a = (1 - F(1, 3)) / 2 + g_a * p_b             # 47/105
    # Trigrams, D = 0.6, 0.2, 3.
    g_bos_b = F(3) / 3                                # h=<s> b: </s> 3 -> all mass backs off
    g_bos_c = F(2, 10) / 2                            # h=<s> c: </s> 2 -> 0.1
    g_bos_a = (F(6, 10) + F(6, 10)) / 2               # h=<s> a: </s> 1, b 1 -> 0.6
    g_ab = F(6, 10)                                   # h=a b: </s> 1
    return {
        "<unk>": (p_unk, None), "<s>": (1, g_bos), "</s>": (p_eos, None),
        "b": (p_b, g_b), "c": (p_c, g_c), "a": (p_a, g_a),
        "<s> b": (p_b_bos, g_bos_b), "<s> c": (p_c_bos, g_bos_c), "<s> a": (p_a_bos, g_bos_a),
        "b </s>": (p_eos_b, None), "c </s>": (p_eos_c, None), "a </s>": (p_eos_a, None),
        "a b": (p_b_a, g_ab),
        "<s> b </s>": ((3 - 3) / F(3) + g_bos_b * p_eos_b, None),           # 23/84
        "<s> c </s>": ((2 - F(2, 10)) / 2 + g_bos_c * p_eos_c, None),       # 2039/2100
        "<s> a </s>": ((1 - F(6, 10)) / 2 + g_bos_a * p_eos_a, None),       # 149/350
        "<s> a b": ((1 - F(6, 10)) / 2 + g_bos_a * p_b_a, None),            # 82/175
        "a b </s>": ((1 - F(6, 10)) + g_ab * p_eos_b, None),                # 79/140
    }


def test_c2_trigram_formula_discounts(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")                 # no fallback may happen
        stats = lm.estimate_arpa(sentences(C2), tmp_path / "c2.arpa", 3, lmplz_statistics=False)
    assert stats.fallback_orders == ()
    assert stats.counts_of_counts == ((2, 1, 1, 0), (3, 3, 1, 0), (3, 1, 1, 0))
    assert stats.discounts[0] == pytest.approx((0.5, 0.5, 3.0))
    assert stats.discounts[1] == pytest.approx((1 / 3, 5 / 3, 3.0))
    assert stats.discounts[2] == pytest.approx((0.6, 0.2, 3.0))
    expected = {k: (float(p), None if g is None else float(g)) for k, (p, g) in c2_expected().items()}
    # Spot values of the fractions above, to tie the comments to the numbers.
    assert expected["<s> c </s>"][0] == pytest.approx(2039 / 2100)
    assert expected["<s> a b"][0] == pytest.approx(82 / 175)
    assert expected["<s>"][1] == pytest.approx(19 / 21)
    check_arpa(lm.read_arpa(tmp_path / "c2.arpa"), expected)


def test_c2_lmplz_statistics(tmp_path):
    # The largest word id is a (raw 2, adjusted 1): unigram t = (1, 2, 1, 0),
    # Y = 1/5, D1 = 1 - 2(1/5)(2/1) = 0.2, D2 = 2 - 3(1/5)(1/2) = 1.7, D3+ = 3.
    # The next open n-gram, the left extension of a with the largest first
    # word, is <s> a: it starts with <s> and is raw already, so bigrams keep
    # the textbook t. Unigrams: gamma() = (0.2*2 + 1.7*1 + 3*1)/7 = 5.1/7,
    # share 1.02/7: p(b) = 0.3/7 + 1.02/7 = 1.32/7, p(c) = 0.8/7 + 1.02/7 = 0.26
    # (lmplz writes -0.72452414 and -0.5850267 for these).
    stats, arpa, _ = estimate(tmp_path, sentences(C2), 3)
    assert stats.counts_of_counts == ((1, 2, 1, 0), (3, 3, 1, 0), (3, 1, 1, 0))
    assert stats.discounts[0] == pytest.approx((0.2, 1.7, 3.0))
    assert arpa[1][("b",)][0] == pytest.approx(L(1.32 / 7), abs=TOL)
    assert arpa[1][("c",)][0] == pytest.approx(L(0.26), abs=TOL)
    assert arpa[1][("<unk>",)][0] == pytest.approx(L(1.02 / 7), abs=TOL)
    assert arpa[2][("<s>", "c")][1] == pytest.approx(L(0.1), abs=TOL)   # bigram gammas unchanged


def test_c2_order4_lmplz_statistics_stop_at_bos(tmp_path):
    # The open n-grams of lmplz's last 4-gram: a (largest id), then its left
    # extension with the largest first word, <s> a, which starts with <s>: the
    # chain ends there, so trigrams keep the textbook counts-of-counts.
    # Trigrams are now a lower order: a b </s> has adjusted count |{<s>}| = 1,
    # the others start with <s> (raw): t = (3, 1, 1, 0) as before. The only
    # 4-gram, <s> a b </s>, gives t = (1, 0, 0, 0): order 4 falls back.
    stats, arpa, _ = estimate(tmp_path, sentences(C2), 4)
    assert stats.counts_of_counts == ((1, 2, 1, 0), (3, 3, 1, 0), (3, 1, 1, 0), (1, 0, 0, 0))
    assert stats.fallback_orders == (4,)
    assert stats.ngram_counts == (6, 7, 5, 1)
    # p(</s> | <s> a b) = (1 - 0.5)/1 + gamma * p(</s> | a b) with gamma = 0.5/1 and
    # p(</s> | a b) = (1 - 0.6)/1 + 0.6 p(</s> | b) (trigram D1 = 0.6, as in C2),
    # p(</s> | b) = (2 - 5/3)/2 + (5/6)(9/70)... with the lmplz unigram share 1.02/7
    # for p(</s>) instead of 9/70: 1/6 + (5/6)(1.02/7).
    p_eos_b = 1 / 6 + (5 / 6) * (1.02 / 7)
    p_eos_ab = 0.4 + 0.6 * p_eos_b
    assert arpa[4][("<s>", "a", "b", "</s>")][0] == pytest.approx(L(0.5 + 0.5 * p_eos_ab), abs=TOL)


# ---------------------------------------------------------------------------
# A plain implementation of the same definitions, for random corpora
# ---------------------------------------------------------------------------

class Reference:
    """Interpolated modified Kneser-Ney from the definitions, with dicts (textbook statistics)."""

    def __init__(self, sents, order, fallback=(0.5, 1.0, 1.5)):
        self.order = order
        raw = [Counter() for _ in range(order + 1)]
        for s in sents:
            words = ["<s>", *s, "</s>"]
            for n in range(1, order + 1):
                for i in range(len(words) - n + 1):
                    raw[n][tuple(words[i:i + n])] += 1
        adj = [None] * (order + 1)
        adj[order] = dict(raw[order])
        for n in range(1, order):
            left = defaultdict(set)
            for g in raw[n + 1]:
                left[g[1:]].add(g[0])
            adj[n] = {g: (c if g[0] == "<s>" else len(left[g])) for g, c in raw[n].items()}
        adj[1][("<s>",)] = 0
        adj[1][("<unk>",)] = 0
        self.adj = adj
        self.d = [None]
        for n in range(1, order + 1):
            t = [sum(1 for c in adj[n].values() if c == k) for k in (1, 2, 3, 4)]
            d = None
            if all(t[:3]):
                y = t[0] / (t[0] + 2 * t[1])
                d = [k - (k + 1) * y * t[k] / t[k - 1] for k in (1, 2, 3)]
                if any(not 0 <= dk <= k for k, dk in zip((1, 2, 3), d)):
                    d = None
            self.d.append([0.0, *(d or fallback)])
        self.s = [defaultdict(float) for _ in range(order + 1)]
        self.num = [defaultdict(float) for _ in range(order + 1)]
        for n in range(1, order + 1):
            for g, c in adj[n].items():
                self.s[n][g[:-1]] += c
                self.num[n][g[:-1]] += self.d[n][min(c, 3)]
        self.vocab = [g[0] for g in adj[1] if g[0] != "<s>"]

    def gamma(self, h):
        n = len(h) + 1
        return self.num[n][h] / self.s[n][h] if self.s[n].get(h) else None

    def p(self, w, h=()):
        """p(w | h), backing off past contexts never seen."""
        h = tuple(h)[-(self.order - 1):] if self.order > 1 else ()
        n = len(h) + 1
        if h and not self.s[n].get(h):
            return self.p(w, h[1:])
        c = self.adj[n].get(h + (w,), 0)
        lower = 1.0 / len(self.vocab) if not h else self.p(w, h[1:])
        return (c - self.d[n][min(c, 3)]) / self.s[n][h] + self.gamma(h) * lower

    def log10_sentence(self, words, known):
        ws = ["<s>"] + [w if w in known else "<unk>" for w in words] + ["</s>"]
        return sum(L(self.p(ws[i], ws[max(0, i - self.order + 1):i])) for i in range(1, len(ws)))


def zipf_corpus(seed, n_sentences=300, n_words=40, max_len=12):
    """Sentences from a seeded Zipf-ish word distribution with a little local structure."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(n_words)]
    weights = [1.0 / (i + 1) for i in range(n_words)]
    out = []
    for _ in range(n_sentences):
        s = []
        for _ in range(rng.randint(0, max_len)):
            # a frequent bigram pattern so that higher orders have repeated n-grams
            if s and s[-1] == "w1" and rng.random() < 0.7:
                s.append("w2")
            else:
                s.append(rng.choices(words, weights)[0])
        out.append(s)
    return out


@pytest.mark.parametrize("order", [2, 3, 5])
def test_matches_reference_on_random_corpus(tmp_path, order):
    sents = zipf_corpus(order)
    stats, arpa, _ = estimate(tmp_path, sents, order, lmplz_statistics=False)
    ref = Reference(sents, order)
    assert [len(arpa[n]) for n in arpa] == [len(ref.adj[n]) for n in range(1, order + 1)]
    for n in range(1, order + 1):
        assert stats.discounts[n - 1] == pytest.approx(ref.d[n][1:])
        for gram, (log_p, log_b) in arpa[n].items():
            h, w = gram[:-1], gram[-1]
            expected = 0.0 if gram == ("<s>",) else L(ref.p(w, h))
            assert log_p == pytest.approx(expected, abs=TOL), gram
            g = ref.gamma(gram) if n < order else None
            assert log_b == pytest.approx(0.0 if g is None else L(g), abs=TOL), gram


# ---------------------------------------------------------------------------
# kenlm reads what we write
# ---------------------------------------------------------------------------

def state_after(model, context):
    state = kenlm.State()
    if context and context[0] == "<s>":
        model.BeginSentenceWrite(state)
        context = context[1:]
    else:
        model.NullContextWrite(state)
    for w in context:
        out = kenlm.State()
        model.BaseScore(state, w, out)
        state = out
    return state


@pytest.mark.parametrize("order", [3, 4])
def test_every_context_sums_to_one_through_kenlm(tmp_path, order):
    sents = zipf_corpus(10 + order, n_sentences=150, n_words=25)
    _, arpa, path = estimate(tmp_path, sents, order)
    model = lm.load_model(path)
    vocab = [g[0] for g in arpa[1] if g[0] != "<s>"]
    contexts = [()] + [g for n in range(1, order) for g in arpa[n]
                       if g[-1] not in ("</s>", "<unk>")]
    assert len(contexts) > 100
    worst = 0.0
    for h in contexts:
        state = state_after(model, h)
        total = sum(10.0 ** model.BaseScore(state, w, kenlm.State()) for w in vocab)
        worst = max(worst, abs(total - 1.0))
    assert worst < 1e-6


def test_kenlm_sentence_scores_equal_the_definition(tmp_path):
    order = 3
    train = zipf_corpus(7, n_sentences=200)
    _, arpa, path = estimate(tmp_path, train, order, lmplz_statistics=False)
    model = lm.load_model(path)
    ref = Reference(train, order)
    known = set(ref.vocab)
    tests = zipf_corpus(8, n_sentences=30) + [["w1", "never-seen", "w2", "w3"], []]
    for s in tests:
        assert model.score(" ".join(s), bos=True, eos=True) == pytest.approx(
            ref.log10_sentence(s, known), abs=1e-5)


def test_tools_are_looked_for_in_the_repository_then_on_path(tmp_path, monkeypatch):
    # scripts/install_lmplz.sh puts lmplz and build_binary in <repo>/.tools/bin; tests/ is in <repo>.
    assert lm._TOOLS_BIN == Path(__file__).resolve().parents[1] / ".tools" / "bin"
    tools, on_path = tmp_path / "tools", tmp_path / "path"
    for folder in (tools, on_path):
        folder.mkdir()
        (folder / "lmplz").write_text("#!/bin/sh\n")
        (folder / "lmplz").chmod(0o755)
    monkeypatch.setattr(lm, "_TOOLS_BIN", tools)
    monkeypatch.setenv("PATH", str(on_path))
    assert lm.find_lmplz() == str(tools / "lmplz")              # the repository's copy first
    (tools / "lmplz").chmod(0o644)                               # not executable: not a tool
    assert lm.find_lmplz() == str(on_path / "lmplz")            # then PATH
    assert lm.find_build_binary() is None                        # in neither
    assert lm.find_lmplz(tools / "lmplz") == str(tools / "lmplz")  # an explicit path as given


def test_binarize(tmp_path):
    _, _, path = estimate(tmp_path, zipf_corpus(3, n_sentences=50), 3)
    assert lm.binarize(path, tmp_path / "x.bin", build_binary="no-such-tool-here") is None
    if lm.find_build_binary() is None:
        pytest.skip("build_binary not in .tools/bin nor on PATH; run scripts/install_lmplz.sh")
    out = lm.binarize(path, tmp_path / "m.bin")
    assert out == str(tmp_path / "m.bin")
    text = "w1 w2 w3 w0"
    assert lm.load_model(out).score(text) == pytest.approx(lm.load_model(path).score(text), abs=1e-5)


# ---------------------------------------------------------------------------
# Agreement with lmplz
# ---------------------------------------------------------------------------

needs_lmplz = pytest.mark.skipif(lm.find_lmplz() is None,
                                 reason="lmplz not in .tools/bin nor on PATH; run scripts/install_lmplz.sh")


@needs_lmplz
@pytest.mark.parametrize("order,seed", [(2, 21), (3, 22), (5, 23)])
def test_agrees_with_lmplz(tmp_path, order, seed):
    sents = zipf_corpus(seed)
    ours = lm.read_arpa(estimate(tmp_path, sents, order)[2])
    stats = lm.estimate_with_lmplz(sents, tmp_path / "lmplz.arpa", order,
                                   discount_fallback=(0.5, 1.0, 1.5), memory="100M")
    theirs = lm.read_arpa(tmp_path / "lmplz.arpa")
    assert stats.ngram_counts == tuple(len(ours[n]) for n in ours)
    for n in ours:
        assert set(ours[n]) == set(theirs[n])
        for gram, (log_p, log_b) in ours[n].items():
            assert log_p == pytest.approx(theirs[n][gram][0], abs=1e-4), gram
            assert log_b == pytest.approx(theirs[n][gram][1], abs=1e-4), gram


@needs_lmplz
def test_lmplz_statistics_is_what_makes_small_corpora_agree(tmp_path):
    # Without lmplz's counts-of-counts rule, C2's unigrams differ by ~0.26 in log10.
    _, textbook, _ = estimate(tmp_path, sentences(C2), 3, lmplz_statistics=False)
    lm.estimate_with_lmplz(sentences(C2), tmp_path / "lmplz.arpa", 3, memory="100M")
    theirs = lm.read_arpa(tmp_path / "lmplz.arpa")
    assert abs(textbook[1][("b",)][0] - theirs[1][("b",)][0]) > 0.2
    assert theirs[1][("b",)][0] == pytest.approx(L(1.32 / 7), abs=1e-6)


# ---------------------------------------------------------------------------
# Input handling
# ---------------------------------------------------------------------------

def test_without_fallback_bad_discounts_raise(tmp_path):
    with pytest.raises(ValueError, match="discount"):
        lm.estimate_arpa(sentences(C1), tmp_path / "x.arpa", 2, discount_fallback=None)


def test_specials_in_input_are_whitespace(tmp_path):
    clean = sentences(C2)
    dirty = [["<s>", *s] if i % 2 else [*s, "<unk>"] for i, s in enumerate(clean)]
    _, want, _ = estimate(tmp_path, clean, 3)
    with pytest.warns(UserWarning, match="whitespace"):
        lm.estimate_arpa(dirty, tmp_path / "dirty.arpa", 3)
    assert lm.read_arpa(tmp_path / "dirty.arpa") == want


def test_bad_inputs(tmp_path):
    with pytest.raises(TypeError, match="token lists"):
        lm.estimate_arpa(["a b c"], tmp_path / "x.arpa", 2)
    with pytest.raises(ValueError, match="whitespace"):
        lm.estimate_arpa([["a b", "c"]], tmp_path / "x.arpa", 2)
    with pytest.raises(ValueError, match="no sentences"):
        lm.estimate_arpa([], tmp_path / "x.arpa", 2)
    with pytest.raises(NotImplementedError):
        lm.estimate_arpa(sentences(C2), tmp_path / "x.arpa", 2, prune=(0, 1))
    assert not (tmp_path / "x.arpa").exists()


def test_empty_sentence_is_bos_eos_and_generator_input(tmp_path):
    # A generator works; an empty sentence contributes the bigram "<s> </s>".
    stats, arpa, _ = estimate(tmp_path, (s for s in [["a"], []]), 2)
    assert ("<s>", "</s>") in arpa[2]
    assert stats.n_sentences == 2 and stats.n_tokens == 1


# ---------------------------------------------------------------------------
# Streaming input and the counting kernel
# ---------------------------------------------------------------------------

def small_chunks(monkeypatch):
    """Chunk sizes small enough that every chunk boundary is crossed many times."""
    monkeypatch.setattr(lm, "_READ_BYTES", 16)
    monkeypatch.setattr(lm, "_READ_SENTENCES", 3)
    monkeypatch.setattr(lm, "_WRITE_CHUNK", 7)
    monkeypatch.setattr(lm, "_BLOCK", 5)


# White space of every kind (str.split splits on U+00A0 and U+2003, too), empty lines,
# specials, a CRLF line and a last line without its newline.
TRICKY_TEXT = ("w1 w2  w3\n\n\tw2 w1\u00a0w4 w1 w2\r\n<s> w3 w1 w2 </s>\nw4\u2003w4 w4 w4 \n"
               "\u00e9t\u00e9 w1 w2\n\n<unk>\nw1 w2 w3 w1 w2 w3")


@pytest.mark.parametrize("order", [1, 2, 3, 5])
def test_file_input_is_byte_identical_to_the_list(tmp_path, monkeypatch, order):
    text = "\n".join(" ".join(s) for s in zipf_corpus(30 + order, n_sentences=120)) + "\n"
    for i, content in enumerate([text, TRICKY_TEXT, text + TRICKY_TEXT]):
        path = tmp_path / f"text{i}.txt"
        path.write_bytes(content.encode("utf-8"))
        with open(path, encoding="utf-8") as fh:
            listed = [line.split() for line in fh]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want_stats, _, want_path = estimate(tmp_path, listed, order)
            want = want_path.read_bytes()
            got_stats = lm.estimate_arpa_file(path, tmp_path / "file.arpa", order)
            as_path = lm.estimate_arpa(str(path), tmp_path / "str.arpa", order)
            with monkeypatch.context() as m:
                small_chunks(m)
                small_stats = lm.estimate_arpa_file(path, tmp_path / "small.arpa", order)
                small_list = lm.estimate_arpa(iter(listed), tmp_path / "small_list.arpa", order)
        for name in ("file", "str", "small", "small_list"):
            assert (tmp_path / f"{name}.arpa").read_bytes() == want, (i, name)
        for stats in (got_stats, as_path, small_stats, small_list):
            assert {**stats.to_json(), "seconds": 0, "arpa_path": ""} == \
                {**want_stats.to_json(), "seconds": 0, "arpa_path": ""}


def test_file_input_warns_on_specials_and_refuses_empty(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("a b <s> c\na b\n", encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", lm.DiscountFallbackWarning)
        with pytest.warns(UserWarning, match="whitespace"):
            stats = lm.estimate_arpa_file(path, tmp_path / "x.arpa", 2)
    assert (stats.n_sentences, stats.n_tokens) == (2, 5)
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(ValueError, match="no sentences"):
        lm.estimate_arpa_file(tmp_path / "empty.txt", tmp_path / "y.arpa", 2)
    with pytest.raises(FileNotFoundError):
        lm.estimate_arpa_file(tmp_path / "missing.txt", tmp_path / "y.arpa", 2)
    assert not (tmp_path / "y.arpa").exists()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_count_ngrams_kernel_equals_np_unique(seed):
    from pivot._lm import count_ngrams

    rng = np.random.default_rng(seed)
    n, n_prefix, vocab = [(0, 1, 1), (1, 3, 4), (5000, 700, 90)][seed]
    prefix_at = rng.integers(0, n_prefix, n).astype(np.int32)
    last_at = rng.integers(0, vocab, n).astype(np.int32)
    # the suffix is a function of the n-gram (prefix, last), as in the estimator
    suffix_at = ((prefix_at.astype(np.int64) * 7 + last_at) % 1000).astype(np.int32)
    prefix, last, suffix, raw, inverse = count_ngrams(prefix_at, last_at, suffix_at, n_prefix, vocab)
    key = prefix_at.astype(np.int64) * vocab + last_at
    uniq, inv, counts = np.unique(key, return_inverse=True, return_counts=True)
    assert all(a.dtype == np.int32 for a in (prefix, last, suffix, raw, inverse))
    assert prefix.tolist() == (uniq // vocab).tolist()
    assert last.tolist() == (uniq % vocab).tolist()
    assert raw.tolist() == counts.tolist()
    assert inverse.tolist() == inv.ravel().tolist()
    expected_suffix = np.empty(len(uniq), dtype=np.int64)
    expected_suffix[inv.ravel()] = suffix_at
    assert suffix.tolist() == expected_suffix.tolist()
    with pytest.raises(ValueError, match="out of range"):
        count_ngrams(np.array([0], np.int32), np.array([vocab], np.int32),
                     np.array([0], np.int32), n_prefix, vocab)


def fake_lmplz(tmp_path):
    """A stand-in for lmplz that copies its stdin to the --arpa path."""
    script = tmp_path / "fake-lmplz"
    script.write_text(f"#!{sys.executable}\n"
                      "import shutil, sys\n"
                      "path = sys.argv[sys.argv.index('--arpa') + 1]\n"
                      "with open(path, 'wb') as out:\n"
                      "    shutil.copyfileobj(sys.stdin.buffer, out)\n")
    script.chmod(0o755)
    return str(script)


def test_lmplz_gets_the_same_text_from_a_file(tmp_path, monkeypatch):
    tool = fake_lmplz(tmp_path)
    path = tmp_path / "t.txt"
    path.write_bytes(TRICKY_TEXT.encode("utf-8"))
    with open(path, encoding="utf-8") as fh:
        listed = [line.split() for line in fh]
    want = lm.estimate_with_lmplz(listed, tmp_path / "list.txt", 3, lmplz=tool)
    monkeypatch.setattr(lm, "_READ_BYTES", 16)
    got = lm.estimate_with_lmplz(path, tmp_path / "file.txt", 3, lmplz=tool)
    got_str = lm.estimate_with_lmplz(str(path), tmp_path / "str.txt", 3, lmplz=tool)
    fed = (tmp_path / "list.txt").read_bytes()
    assert fed == ("\n".join(" ".join(s) for s in listed) + "\n").encode("utf-8")
    assert (tmp_path / "file.txt").read_bytes() == fed
    assert (tmp_path / "str.txt").read_bytes() == fed
    for stats in (got, got_str):
        assert (stats.n_sentences, stats.n_tokens) == (want.n_sentences, want.n_tokens) == (
            len(listed), sum(map(len, listed)))
    with pytest.raises(TypeError, match="token lists"):
        lm.estimate_with_lmplz(["a b"], tmp_path / "x.txt", 3, lmplz=tool)
    with pytest.raises(FileNotFoundError):
        lm.estimate_with_lmplz(tmp_path / "missing.txt", tmp_path / "x.txt", 3, lmplz=tool)


def test_declared_vocabulary_hand_values(tmp_path):
    """Unigrams of "a b | a" with the vocabulary {a, b, c} declared (c never seen).

    Tokens a b </s> a </s>: a(a) = 2, a(b) = 1, a(</s>) = 2, a(c) = 0; total S = 5.
    t = (1, 2, 0, 0): the discounts fall back to D = (0.5, 1, 1.5).
    gamma() = (D1 * 1 + D2 * 2) / S = 2.5 / 5 = 0.5; |V| without <s> = 3 specials + 3 - 1 = 5:
      p(a) = (2 - 1) / 5 + 0.5 / 5 = 0.3     p(b) = (1 - 0.5) / 5 + 0.1 = 0.2
      p(</s>) = 0.3                          p(c) = p(<unk>) = 0.5 / 5 = 0.1      (sum 1)
    Without the declaration |V| - 1 = 4: p(a) = 0.2 + 0.125, p(<unk>) = 0.125, no c.
    """
    stats, arpa, path = estimate(tmp_path, sentences("a b|a"), 1, vocab=["a", "b", "c"])
    check_arpa(arpa, {"a": (0.3, None), "b": (0.2, None), "</s>": (0.3, None), "c": (0.1, None),
                      "<unk>": (0.1, None), "<s>": (1, None)})
    assert stats.vocab_size == 6 and stats.n_declared == 3 and stats.n_declared_unseen == 1
    plain, arpa2, _ = estimate(tmp_path, sentences("a b|a"), 1)
    check_arpa(arpa2, {"a": (0.325, None), "b": (0.225, None), "</s>": (0.325, None), "<unk>": (0.125, None),
                       "<s>": (1, None)})
    assert plain.n_declared == 0 and plain.n_declared_unseen == 0


def test_declared_vocabulary_gives_two_models_the_same_unigrams(tmp_path):
    # Two texts over one declared vocabulary (order 3, so the counts and the lmplz-statistics
    # correction run over words the text lacks): the same unigram set, and kenlm scores a
    # declared word the text never held as a known word (not as <unk>).
    vocab = ["a", "b", "c", "d", "<oov>"]
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    one, arpa1, p1 = estimate(tmp_path / "x", sentences("a b a|b a <oov>|a a b"), 3, vocab=vocab)
    two, arpa2, p2 = estimate(tmp_path / "y", sentences("c d|d c c|<oov> d"), 3, vocab=vocab)
    assert set(arpa1[1]) == set(arpa2[1]) == {(w,) for w in ["<unk>", "<s>", "</s>", *vocab]}
    assert one.vocab_size == two.vocab_size == 8
    assert (one.n_declared_unseen, two.n_declared_unseen) == (2, 2)  # c, d / a, b
    model = kenlm.Model(str(p1))
    (_, _, oov), _ = list(model.full_scores("d", bos=False, eos=True))
    assert not oov
    # d's unigram probability is the uniform share gamma() / |V|, like <unk>'s.
    assert arpa1[1][("d",)][0] == pytest.approx(arpa1[1][("<unk>",)][0], abs=1e-6)


def test_declared_vocabulary_refuses_specials():
    with pytest.raises(ValueError, match="special token"):
        lm.estimate_arpa(sentences("a"), "never.arpa", 1, vocab=["<s>"])


def test_a_model_task_records_no_run_time_in_the_artifact(tmp_path):
    """estimate_model writes the same ARPA and returns the same stats.json entry on two runs: the
    wall time comes back apart (timings.json), so the lm stage's content key is reproducible."""
    text = tmp_path / "t.txt"
    text.write_text("a b c\nb c a\na b\n")
    runs = []
    for k in range(2):
        out = tmp_path / f"run{k}"
        out.mkdir()
        done = lm.estimate_model("m", text, out, 2, "pivot")
        files = {p.name: p.read_bytes() for p in out.iterdir()}
        runs.append((done["stats"], files))
        assert "seconds" not in done["stats"] and done["seconds"] >= 0
    assert runs[0] == runs[1]
    assert runs[0][0]["n_tokens"] == 8 and runs[0][0]["n_sentences"] == 3
