"""Phrase-pair extraction on tiny hand-made bitexts; every expected pair written out by hand.

Token ids are used directly: English words are small numbers (1, 2, 3 ...), foreign words
are 10, 11, 12 ... Links are (English position, foreign position), 0-based.
"""
import numpy as np
import pytest

from pivot.pipeline.extract import MAX_TOKEN_ID, PhraseTable, extract_phrase_pairs


def make_bitext(sentences, weights=None):
    """Arrays for extract_phrase_pairs from [(e_tokens, f_tokens, [(i, j), ...]), ...]."""
    e_off, f_off, l_off = [0], [0], [0]
    e_tok, f_tok, l_e, l_f = [], [], [], []
    for e, f, links in sentences:
        e_tok += e
        f_tok += f
        l_e += [i for i, _ in links]
        l_f += [j for _, j in links]
        e_off.append(len(e_tok))
        f_off.append(len(f_tok))
        l_off.append(len(l_e))
    if weights is None:
        weights = np.ones((len(sentences), 1))
    return (np.array(e_tok, np.int32), np.array(e_off, np.int64), np.array(f_tok, np.int32),
            np.array(f_off, np.int64), np.array(l_e, np.int32), np.array(l_f, np.int32),
            np.array(l_off, np.int64), np.asarray(weights, np.float64))


def pairs_of(table: PhraseTable):
    """{(e phrase, f phrase): (support, counts tuple)} of a table."""
    return {(table.e_phrase(e), table.f_phrase(f)): (int(s), tuple(c.tolist()))
            for e, f, s, c in zip(table.e_id, table.f_id, table.support, table.counts)}


def extract(sentences, weights=None, **kw):
    return extract_phrase_pairs(*make_bitext(sentences, weights), **kw)


def test_crossing_alignment_and_inconsistent_span():
    # e: 1 2 3   f: 10 11 12   links 0-1, 1-0 (crossing), 2-2.
    # [1 2] -> [10 11] is consistent; [2 3] covers f 10..12, but f 11 links to e 0 outside
    # the span, so it is skipped.
    t = extract([([1, 2, 3], [10, 11, 12], [(0, 1), (1, 0), (2, 2)])])
    assert set(pairs_of(t)) == {
        ((1,), (11,)),
        ((1, 2), (10, 11)),
        ((1, 2, 3), (10, 11, 12)),
        ((2,), (10,)),
        ((3,), (12,)),
    }


def test_unaligned_foreign_edges_extend_both_ways():
    # e: 1 2   f: 10 11 12 13   links 0-1, 1-2; f 10 and f 13 are unaligned.
    t = extract([([1, 2], [10, 11, 12, 13], [(0, 1), (1, 2)])])
    assert set(pairs_of(t)) == {
        ((1,), (11,)), ((1,), (10, 11)),                      # right edge f 12 is aligned
        ((1, 2), (11, 12)), ((1, 2), (10, 11, 12)),           # left, right, both extensions
        ((1, 2), (11, 12, 13)), ((1, 2), (10, 11, 12, 13)),
        ((2,), (12,)), ((2,), (12, 13)),                      # left edge f 11 is aligned
    }


def test_max_len_cuts_foreign_extensions():
    # The same sentence with max_len=3: only the 4-word extension disappears.
    t = extract([([1, 2], [10, 11, 12, 13], [(0, 1), (1, 2)])], max_len=3)
    got = set(pairs_of(t))
    assert ((1, 2), (10, 11, 12, 13)) not in got
    assert len(got) == 7
    assert t.e_phrases.shape[1] == 3 and t.f_phrases.shape[1] == 3


def test_max_len_cuts_english_spans_and_minimal_foreign_spans():
    # Monotone 3-word sentence, max_len=2: no 3-word English phrase.
    t = extract([([1, 2, 3], [10, 11, 12], [(0, 0), (1, 1), (2, 2)])], max_len=2)
    assert set(pairs_of(t)) == {
        ((1,), (10,)), ((2,), (11,)), ((3,), (12,)), ((1, 2), (10, 11)), ((2, 3), (11, 12)),
    }
    # An English word linked to a foreign span longer than max_len yields nothing.
    t = extract([([1], [10, 11, 12], [(0, 0), (0, 2)])], max_len=2)
    assert t.n_pairs == 0


def test_unaligned_english_word_at_a_span_edge():
    # e: 1 2 3   f: 10 11   links 0-0, 2-1; e word 2 (position 1) is unaligned.
    t = extract([([1, 2, 3], [10, 11], [(0, 0), (2, 1)])])
    assert set(pairs_of(t)) == {
        ((1,), (10,)),
        ((1, 2), (10,)),          # the unaligned word rides along at the right edge
        ((1, 2, 3), (10, 11)),
        ((2, 3), (11,)),          # ... and at the left edge
        ((3,), (11,)),
    }
    # (2,) alone has no link: not extracted.
    assert all(e != (2,) for e, _ in pairs_of(t))


def test_weighted_counts_support_and_ids():
    # Two sentences, K = 2 models: General (1, 1) and a domain model (0.5, 2.0).
    sentences = [
        ([1, 2], [10, 11], [(0, 0), (1, 1)]),
        ([1, 3], [10, 12], [(0, 0), (1, 1)]),
    ]
    t = extract(sentences, weights=[[1.0, 0.5], [1.0, 2.0]], max_len=2)
    # Phrase ids in lexicographic order of the token tuples (a prefix sorts first).
    np.testing.assert_array_equal(t.e_phrases, [[1, -1], [1, 2], [1, 3], [2, -1], [3, -1]])
    np.testing.assert_array_equal(t.f_phrases, [[10, -1], [10, 11], [10, 12], [11, -1], [12, -1]])
    np.testing.assert_array_equal(t.e_id, [0, 1, 2, 3, 4])
    np.testing.assert_array_equal(t.f_id, [0, 1, 2, 3, 4])
    # (1)-(10) occurs in both sentences: 1 + 1 and 0.5 + 2.0.
    np.testing.assert_array_equal(t.counts, [[2.0, 2.5], [1.0, 0.5], [1.0, 2.0], [1.0, 0.5], [1.0, 2.0]])
    np.testing.assert_array_equal(t.support, [2, 1, 1, 1, 1])
    np.testing.assert_array_equal(t.e_count, [2, 1, 1, 1, 1])
    assert t.e_id.dtype == np.int32 and t.f_id.dtype == np.int32
    assert t.counts.dtype == np.float64 and t.support.dtype == np.int64


def test_support_counts_repeated_instances_within_a_sentence():
    # e: 1 1   f: 10 10 (diagonal): (1)-(10) is extracted twice from the one sentence.
    # The weight of the sentence is added once per instance.
    t = extract([([1, 1], [10, 10], [(0, 0), (1, 1)])], weights=[[1.0, 0.25]])
    assert pairs_of(t) == {((1,), (10,)): (2, (2.0, 0.5)), ((1, 1), (10, 10)): (1, (1.0, 0.25))}
    # A foreign word linked to two English words ties them: links 0-0, 0-1, 1-1 make
    # (1) -> (10 11) and (2) -> (11) inconsistent (f 11 also links outside each span).
    t = extract([([1, 2], [10, 11], [(0, 0), (0, 1), (1, 1)])])
    assert pairs_of(t) == {((1, 2), (10, 11)): (1, (1.0,))}


def test_multiple_pairs_per_english_phrase_e_count():
    t = extract([([1], [10], [(0, 0)]), ([1], [11], [(0, 0)]), ([1], [11], [(0, 0)])])
    assert pairs_of(t) == {((1,), (10,)): (1, (1.0,)), ((1,), (11,)): (2, (2.0,))}
    np.testing.assert_array_equal(t.e_count, [3])


def test_ids_are_deterministic_under_sentence_order():
    a = ([5, 2, 7], [30, 10, 20], [(0, 2), (1, 0), (2, 1)])
    b = ([2, 5], [10, 30, 40], [(0, 0), (1, 1)])
    c = ([7, 7, 2], [20, 10], [(0, 0), (2, 1)])
    w = {id(a): [1.0, 0.5], id(b): [1.0, 2.0], id(c): [1.0, 0.0]}
    t1 = extract([a, b, c], weights=[w[id(s)] for s in (a, b, c)])
    t2 = extract([c, a, b], weights=[w[id(s)] for s in (c, a, b)])
    for name in ("e_phrases", "f_phrases", "e_id", "f_id", "counts", "support", "e_count"):
        np.testing.assert_array_equal(getattr(t1, name), getattr(t2, name), err_msg=name)
    # Id order is the lexicographic order of the token tuples (a prefix first).
    for phrase, n in ((t1.e_phrase, t1.n_e), (t1.f_phrase, t1.n_f)):
        keys = [phrase(i) for i in range(n)]
        assert keys == sorted(keys) and len(set(keys)) == n


def test_empty_sentences_and_sentences_without_links():
    t = extract([([], [], []), ([1, 2], [10], []), ([1], [10], [(0, 0)])])
    assert pairs_of(t) == {((1,), (10,)): (1, (1.0,))}
    t = extract([([1, 2], [10], [])])
    assert t.n_pairs == 0 and t.e_phrases.shape == (0, 5) and t.counts.shape == (0, 1)


@pytest.mark.parametrize("bad_link", [(2, 0), (0, 1), (-1, 0), (0, -1)])
def test_out_of_range_link_names_the_sentence(bad_link):
    sentences = [([1], [10], [(0, 0)]), ([1, 2], [10], [(0, 0), bad_link])]
    with pytest.raises(ValueError, match="sentence 1"):
        extract(sentences)


def test_invalid_inputs_are_refused():
    args = make_bitext([([1], [10], [(0, 0)])])
    with pytest.raises(ValueError, match="max_len"):
        extract_phrase_pairs(*args, max_len=7)
    with pytest.raises(ValueError, match="token ids"):
        extract([([MAX_TOKEN_ID + 1], [10], [(0, 0)])])
    with pytest.raises(ValueError, match="token ids"):
        extract([([1], [-3], [(0, 0)])])
    e_tok, e_off, f_tok, f_off, l_e, l_f, l_off, w = args
    with pytest.raises(ValueError, match="weights"):
        extract_phrase_pairs(e_tok, e_off, f_tok, f_off, l_e, l_f, l_off, np.ones((2, 1)))
    with pytest.raises(ValueError, match="weights"):
        extract_phrase_pairs(e_tok, e_off, f_tok, f_off, l_e, l_f, l_off, -np.ones((1, 1)))
    with pytest.raises(ValueError, match="e_offsets"):
        extract_phrase_pairs(e_tok, np.array([0, 2]), f_tok, f_off, l_e, l_f, l_off, w)
    with pytest.raises(TypeError, match="e_tokens"):
        extract_phrase_pairs(e_tok.astype(float), e_off, f_tok, f_off, l_e, l_f, l_off, w)


def test_largest_token_id_round_trips():
    t = extract([([MAX_TOKEN_ID, 0], [MAX_TOKEN_ID, 0], [(0, 0), (1, 1)])], max_len=6)
    assert set(pairs_of(t)) == {((MAX_TOKEN_ID,), (MAX_TOKEN_ID,)), ((0,), (0,)),
                                ((MAX_TOKEN_ID, 0), (MAX_TOKEN_ID, 0))}


def test_save_load_round_trip(tmp_path):
    t = extract([([1, 2, 3], [10, 11, 12], [(0, 1), (1, 0), (2, 2)]), ([1, 3], [12, 10], [(0, 1)])],
                weights=[[1.0, 0.3], [1.0, 1.7]])
    path = tmp_path / "table.npz"
    t.save(path)
    u = PhraseTable.load(path)
    for name in ("e_phrases", "f_phrases", "e_id", "f_id", "counts", "support", "e_count", "e_nobs"):
        a, b = getattr(t, name), getattr(u, name)
        assert a.dtype == b.dtype, name
        np.testing.assert_array_equal(a, b, err_msg=name)
    with np.load(path) as z:  # one uncompressed npz
        assert set(z.files) == {"e_phrases", "f_phrases", "e_id", "f_id", "counts", "support", "e_count", "e_nobs"}


def test_observation_counts_per_model():
    # "1" is extracted in all three sentences (with f 10), "2" in the first two (with f 11).
    # Model 1 weighs the sentences 0, 1, 1 (a 0/1 subsample): n_1("1") = 2, n_1("2") = 1.
    # Model 2 weighs them 0.5, 0, 7 (real-valued): it counts an extraction when its weight is
    # > 0, whatever the weight: n_2("1") = 2, n_2("2") = 1, while c_2("1", 10) = 7.5.
    sentences = [([1, 2], [10, 11], [(0, 0), (1, 1)])] * 2 + [([1], [10], [(0, 0)])]
    t = extract(sentences, weights=[[1, 0, 0.5], [1, 1, 0], [1, 1, 7]], max_len=1)
    nobs = {t.e_phrase(e): row.tolist() for e, row in enumerate(t.e_nobs)}
    assert nobs == {(1,): [3, 2, 2], (2,): [2, 1, 1]}
    assert t.e_nobs.dtype == np.int64 and t.counts.shape == (2, 3)  # the indicator columns are not kept
    assert pairs_of(t) == {((1,), (10,)): (3, (3.0, 2.0, 7.5)), ((2,), (11,)): (2, (2.0, 1.0, 0.5))}
    # A table without observation counts falls back to the support for every model.
    t.e_nobs = None
    assert t.observations().tolist() == [[3, 3, 3], [2, 2, 2]]


# ------------------------------------------------------------------ against a plain reference


def reference_extract(sentences, weights, max_len):
    """The textbook algorithm, written for clarity: {(e phrase, f phrase): [support, counts]}."""
    out = {}
    for s, (e, f, links) in enumerate(sentences):
        aligned_f = {j for _, j in links}
        for e1 in range(len(e)):
            for e2 in range(e1, min(e1 + max_len, len(e))):
                fs = [j for i, j in links if e1 <= i <= e2]
                if not fs:
                    continue
                f1, f2 = min(fs), max(fs)
                if f2 - f1 + 1 > max_len:
                    continue
                if any(not e1 <= i <= e2 for i, j in links if f1 <= j <= f2):
                    continue
                lefts = [f1]
                while lefts[-1] - 1 >= 0 and lefts[-1] - 1 not in aligned_f:
                    lefts.append(lefts[-1] - 1)
                rights = [f2]
                while rights[-1] + 1 < len(f) and rights[-1] + 1 not in aligned_f:
                    rights.append(rights[-1] + 1)
                for lo in lefts:
                    for hi in rights:
                        if hi - lo + 1 <= max_len:
                            key = (tuple(e[e1:e2 + 1]), tuple(f[lo:hi + 1]))
                            entry = out.setdefault(key, [0, np.zeros(weights.shape[1])])
                            entry[0] += 1
                            entry[1] = entry[1] + weights[s]
    return out


@pytest.mark.parametrize("seed,max_len", [(0, 5), (1, 3), (2, 6), (3, 1)])
def test_matches_reference_on_random_bitexts(seed, max_len):
    rng = np.random.default_rng(seed)
    sentences = []
    for _ in range(60):
        le, lf = rng.integers(0, 9), rng.integers(0, 9)
        e = rng.integers(0, 6, le).tolist()
        f = rng.integers(10, 16, lf).tolist()
        links = sorted({(int(rng.integers(le)), int(rng.integers(lf)))
                        for _ in range(rng.integers(0, le + 2))} if le and lf else set())
        sentences.append((e, f, links))
    weights = np.column_stack([np.ones(60), rng.integers(0, 4, 60) / 4.0])
    t = extract(sentences, weights=weights, max_len=max_len)
    want = reference_extract(sentences, weights, max_len)
    got = pairs_of(t)
    assert set(got) == set(want)
    for key, (support, counts) in want.items():
        assert got[key][0] == support
        np.testing.assert_allclose(got[key][1], counts, rtol=0, atol=1e-12)
    # Pairs unique and sorted by (e_id, f_id); e_count is the per-phrase support.
    key = t.e_id.astype(np.int64) * max(t.n_f, 1) + t.f_id
    assert (np.diff(key) > 0).all()
    np.testing.assert_array_equal(t.e_count, np.bincount(t.e_id, weights=t.support, minlength=t.n_e))
    assert max(max(len(e), len(f)) for e, f in got) <= max_len
