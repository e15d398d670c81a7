"""The PPDB 2.0-style combination model: string and database features, PPMI-SVD, the ridge logit.

Database (phrases treat 0, cure 1, handle 2, heal 3, gene 4; bitext counts 9, 3, 2, 1, 0),
p(e2|e1) under general / dom (0 = nothing), n_pivots, stored pivots:
    treat→cure .5/.6 3 fr:x de:y   cure→treat .4/0 1 fr:x   treat→handle .3/.1 2 fr:x
    cure→heal .2/.3 1 de:y         handle→heal .25/0 1 fr:x
"""
import math

import numpy as np
import pytest

from pivot.eval import distributional as ds
from pivot.eval import features as ft
from pivot.eval import protocols as pr
from pivot.store.combined import FLOOR_LOG_P
from pivot.store.db import ParaphraseDB
from pivot.store.write import write_database

MODELS = [{"name": "general", "kind": "pivot", "description": "", "params": {}},
          {"name": "dom", "kind": "pivot", "description": "", "params": {}}]
PHRASES = ["treat", "cure", "handle", "heal", "gene"]
ROWS = [(0, 1, 3, (0, 1, -1), 0.5, 0.6), (1, 0, 1, (0, -1, -1), 0.4, 0.0), (0, 2, 2, (0, -1, -1), 0.3, 0.1),
        (1, 3, 1, (1, -1, -1), 0.2, 0.3), (2, 3, 1, (0, -1, -1), 0.25, 0.0)]


@pytest.fixture
def db(tmp_path):
    path = write_database(
        tmp_path / "f.db", phrases=PHRASES, phrase_counts=np.array([9, 3, 2, 1, 0], dtype=np.int64),
        e1=np.array([r[0] for r in ROWS], dtype=np.int32), e2=np.array([r[1] for r in ROWS], dtype=np.int32),
        n_pivots=np.array([r[2] for r in ROWS], dtype=np.int64), pivots=np.array([r[3] for r in ROWS]),
        foreign={0: "fr:x", 1: "de:y"}, models=MODELS, scores=np.array([r[4:] for r in ROWS]),
        meta={"signature": "sig-f", "normalization": {"lang": "en"}})
    with ParaphraseDB(path) as handle:
        yield handle


# ------------------------------------------------------------------------------ strings


def test_string_features_by_hand():
    assert ft.char_ngrams("ab") == {"#ab", "ab#"}
    assert ft.char_ngrams("") == {"##"}
    # "#abc#" {#ab abc bc#} vs "#abd#" {#ab abd bd#}: 1 shared of 5
    assert ft.jaccard(ft.char_ngrams("abc"), ft.char_ngrams("abd")) == pytest.approx(1 / 5)
    assert ft.levenshtein("kitten", "sitting") == 3
    assert ft.levenshtein("", "abc") == 3
    assert ft.edit_ratio("kitten", "sitting") == pytest.approx(1 - 3 / 7)
    x = ft.lexical_features([("heart attack", "myocardial infarction of heart"), ("a", "a b")])
    # tokens 2 and 4: min 2, diff 2; token sets {heart attack} {myocardial infarction of heart}: 1/5
    assert x[0, 0] == 2 and x[0, 1] == 2 and x[0, 4] == pytest.approx(1 / 5)
    # "a" vs "a b": trigrams {#a#} vs {#a , a b, " b#"}: 0 shared; edit 2 of 3; tokens 1/2
    assert x[1].tolist() == pytest.approx([1, 1, 0.0, 1 - 2 / 3, 0.5])


# ------------------------------------------------------------------------------ database


def test_pair_records(db):
    rec = db.pair_records([("treat", "cure"), ("cure", "treat"), ("heal", "gene"), ("x", "treat")], normalize=False)
    assert rec["stored_models"] == ["general", "dom"]
    assert rec["p"][0].tolist() == [0.5, 0.6]
    assert rec["p"][1, 0] == 0.4 and np.isnan(rec["p"][1, 1])      # dom gives cure→treat nothing
    assert np.isnan(rec["p"][2:]).all()
    assert rec["n_pivots"].tolist() == [3, 1, 0, 0]
    assert rec["n_pivot_languages"].tolist() == [2, 1, 0, 0]      # fr:x + de:y; fr:x
    assert rec["count_e1"].tolist() == [9, 3, 1, 0] and rec["count_e2"].tolist() == [3, 9, 0, 9]


def test_pivot_features_by_hand_and_symmetric(db):
    names, groups, x = ft.pivot_features(db, [("treat", "cure"), ("cure", "treat"), ("handle", "heal"), ("heal", "gene")])
    group = dict(zip(names, groups))
    # the domain ablation's split: only the Moore-Lewis models' estimates are "domain"
    assert [n for n in names if group[n] == "domain"] == ["log_pmax[dom]", "log_pmin[dom]", "missing[dom]"]
    assert set(groups) == {"general", "domain"} and group["char3_jaccard"] == group["n_pivot_languages"] == "general"
    row = dict(zip(names, x[0]))
    assert row["log_pmax[general]"] == pytest.approx(math.log(0.5))
    assert row["log_pmin[general]"] == pytest.approx(math.log(0.4))
    assert row["missing[general]"] == 0
    assert row["log_pmax[dom]"] == pytest.approx(math.log(0.6))
    assert row["log_pmin[dom]"] == FLOOR_LOG_P                     # dom proposes one direction only
    assert row["log1p_n_pivots"] == pytest.approx(math.log(4))       # max(3, 1) pivots
    assert row["n_pivot_languages"] == 2
    assert row["log1p_count_min"] == pytest.approx(math.log(4)) and row["log1p_count_max"] == pytest.approx(math.log(10))
    assert x[1].tolist() == x[0].tolist()                            # the order of a pair changes nothing
    hh = dict(zip(names, x[2]))                                      # handle→heal .25/0, one direction
    assert hh["log_pmax[general]"] == pytest.approx(math.log(0.25)) and hh["log_pmin[general]"] == FLOOR_LOG_P
    assert hh["missing[dom]"] == 1 and hh["log_pmax[dom]"] == FLOOR_LOG_P
    hg = dict(zip(names, x[3]))                                      # never proposed; gene has count 0
    assert hg["missing[general]"] == 1 and hg["log1p_n_pivots"] == 0 and hg["n_pivot_languages"] == 0
    assert hg["log1p_count_min"] == 0 and hg["log1p_count_max"] == pytest.approx(math.log(2))


# ------------------------------------------------------------------------------ PPMI-SVD


def test_ppmi_by_hand():
    # "a b" and "a c", window 1: C(a,b) = C(b,a) = C(a,c) = C(c,a) = 1; #a = 2, #b = #c = 1.
    sents = [["a", "b"], ["a", "c"]]
    vocab = ds.vocabulary(sents, 1)
    assert vocab == ["a", "b", "c"]                                  # most frequent first, ties by text
    c = ds.cooccurrence(sents, vocab, 1).toarray()
    assert c.tolist() == [[0, 1, 1], [1, 0, 0], [1, 0, 0]]
    # cds 1: PMI(a,b) = log(1 * 4 / (2 * 1)) = log 2, PMI(b,a) = log(4 / (1 * 2)) = log 2
    assert ds.ppmi(c, cds=1.0).toarray()[0, 1] == pytest.approx(math.log(2))
    # cds .75: Z = 2^.75 + 1 + 1; PMI(a,b) = log(Z / 2), PMI(b,a) = log(Z / 2^.75)
    m = ds.ppmi(c, cds=0.75).toarray()
    z = 2 ** 0.75 + 2
    assert m[0, 1] == pytest.approx(math.log(z / 2)) and m[1, 0] == pytest.approx(math.log(z / 2 ** 0.75))
    assert m[1, 2] == 0                                              # never together: no entry


def test_cooccurrence_window_and_oov():
    # <oov> holds its position: window 1 does not reach from a to b across it, window 2 does;
    # a window never crosses a sentence boundary ("b" then "a" of the next sentence)
    sents = [["a", "<oov>", "b"], ["a", "x"]]
    vocab = ["a", "b"]
    assert ds.cooccurrence(sents, vocab, 1).toarray().tolist() == [[0, 0], [0, 0]]
    assert ds.cooccurrence(sents, vocab, 2).toarray().tolist() == [[0, 1], [1, 0]]
    assert ds.vocabulary([["a", "<oov>", "<oov>"]], 1) == ["a"]


def test_svd_vectors_known_decomposition():
    from scipy import sparse

    # diag(3, 2, 1): rank 2 keeps the first two singular directions; word 2 gets the zero
    # vector; U S^.5 rows (sqrt 3, 0), (0, sqrt 2), (0, 0) have unit length (1, 0), (0, 1), (0, 0)
    w = ds.svd_vectors(sparse.csr_matrix(np.diag([3.0, 2.0, 1.0])), dim=2, eig=0.5, seed=0)
    assert w == pytest.approx(np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]), abs=1e-9)


def test_phrase_cosine_by_hand():
    wv = ds.WordVectors(["heart", "attack", "infarction"], np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
    # mean("heart attack") = (.5, .5), parallel to infarction's (1, 1): cosine 1; "heart" vs
    # "attack": 0; a phrase with no known word: missing
    cos, missing = wv.cosine([("heart attack", "infarction"), ("heart", "attack"), ("heart", "unknown")])
    assert cos.tolist() == pytest.approx([1.0, 0.0, 0.0]) and missing.tolist() == [False, False, True]
    assert ft.CosineScorer("ppmi-svd", wv).score([("heart", "unknown"), ("heart", "infarction")]).tolist() == \
        pytest.approx([-1.0, 1 / math.sqrt(2)])


def test_vectors_for_text_cached(tmp_path):
    text = tmp_path / "lmtext-0" / "in_domain.txt"
    text.parent.mkdir()
    text.write_text("a b c\nb c d\na c d\na b d\n", encoding="utf-8")
    assert ds.in_domain_text(tmp_path) == text
    one = ds.vectors_for_text(text, cache_dir=tmp_path / "cache", min_count=1, dim=2, window=1)
    assert len(list((tmp_path / "cache").glob("ppmi-svd-*.npz"))) == 1
    two = ds.vectors_for_text(text, cache_dir=tmp_path / "cache", min_count=1, dim=2, window=1)
    assert one.vocab == two.vocab and np.allclose(one.vectors, two.vectors, atol=1e-6)
    (tmp_path / "lmtext-1").mkdir()
    (tmp_path / "lmtext-1" / "in_domain.txt").write_text("x\n", encoding="utf-8")
    from pivot.errors import InputError

    with pytest.raises(InputError, match="2 "):
        ds.in_domain_text(tmp_path)


# ------------------------------------------------------------------------------ the ridge logit


def test_ridge_logit_by_hand():
    # one binary feature: x = 0: 1 positive of 4; x = 1: 3 of 4. Standardised z = -1 / +1.
    x = np.array([[0.0]] * 4 + [[1.0]] * 4)
    y = np.array([1, 0, 0, 0, 1, 1, 1, 0])
    # lambda 0 = maximum likelihood: b0 - b1 = log(1/3), b0 + b1 = log 3 -> b0 = 0, b1 = log 3;
    # Fisher information diag(8 w, 8 w), w = p(1-p) = 3/16 -> SE = 1/sqrt(1.5)
    mle = ft.fit_ridge_logit(["x"], x, y, 0.0)
    assert mle.params.tolist() == pytest.approx([0.0, math.log(3)], abs=1e-9)
    assert mle.bse.tolist() == pytest.approx([1 / math.sqrt(1.5)] * 2, abs=1e-9)
    assert mle.converged and mle.mean.tolist() == [0.5] and mle.sd.tolist() == [0.5]
    # lambda 2: b0 stays 0 (symmetry); the score equation 2 (3 - 4 sigma(b1)) = 2 b1 gives
    # b1 = 0.505240086 (bisection); sandwich: Var b1 = 8w / (8w + 2)^2, Var b0 = 1 / (8w)
    ridge = ft.fit_ridge_logit(["x"], x, y, 2.0)
    b1 = 0.5052400863197251
    w = 1 / (1 + math.exp(-b1)) * (1 - 1 / (1 + math.exp(-b1)))
    assert ridge.params.tolist() == pytest.approx([0.0, b1], abs=1e-9)
    assert ridge.bse.tolist() == pytest.approx([math.sqrt(1 / (8 * w)), math.sqrt(8 * w / (8 * w + 2) ** 2)], abs=1e-9)
    # predictions use the training mean and sd: x = 1 -> z = 1 -> sigma(b1)
    assert ridge.predict(["x"], np.array([[1.0]])).tolist() == pytest.approx([1 / (1 + math.exp(-b1))])


def test_ridge_logit_drops_constant_columns_and_refuses_one_class():
    x = np.array([[0.0, 7.0], [1.0, 7.0], [1.0, 7.0], [0.0, 7.0]])
    fit = ft.fit_ridge_logit(["a", "const"], x, np.array([0, 1, 0, 1]), 1.0)
    assert fit.names == ["a"] and fit.dropped == ["const"]
    with pytest.raises(ValueError, match="one class"):
        ft.fit_ridge_logit(["a", "const"], x, np.array([1, 1, 1, 1]), 1.0)


class FakeMiniLM:
    """Cosines of fixed 2-d vectors (the shape of the MiniLM rival, no model)."""

    name = "minilm"
    VECS = {"treat": (1.0, 0.0), "cure": (2.0, 0.1), "handle": (0.0, 1.0), "heal": (1.0, 1.2), "gene": (-1.0, 0.0)}

    def score(self, pairs):
        from pivot.eval.rivals import cosine_scores

        return cosine_scores({t: np.array(v) for t, v in self.VECS.items()}, pairs)


def test_fit_variants_choose_lambda_on_dev(db):
    wv = ds.WordVectors(["treat", "cure", "heal", "handle"],
                        np.array([[1.0, 0.0], [0.9, 0.1], [0.6, 0.8], [0.0, 1.0]]))
    ex = ft.FeatureExtractor(db, wv, FakeMiniLM())
    train = pr.make_gold("train", [("treat", "cure", 1), ("cure", "heal", 1), ("treat", "handle", 0),
                                   ("heal", "gene", 0), ("treat", "gene", 0), ("handle", "heal", 1)])
    dev = pr.make_gold("dev", [("treat", "heal", 1), ("cure", "gene", 0), ("handle", "gene", 0), ("cure", "handle", 1)])
    lambdas = (0.1, 10.0, 1000.0)
    fitted = ft.fit_variants(ex, train, dev, lambdas=lambdas)
    assert [m.name for m in fitted] == list(ft.VARIANTS)
    names_all, _ = ex.matrix(train.pairs)
    assert names_all[-3:] == ["ppmi_cos", "ppmi_missing", "minilm_cos"]
    from pivot.eval.evaluate import average_precision

    for m in fitted:
        cols, x_train = ex.matrix(train.pairs, m.groups)
        _, x_dev = ex.matrix(dev.pairs, m.groups)
        for lam in lambdas:   # each dev AP is the AP of that lambda's own fit on train
            f = ft.fit_ridge_logit(cols, x_train, train.labels, lam)
            assert m.dev_ap[lam] == pytest.approx(average_precision(dev.labels, f.predict(cols, x_dev)), abs=1e-12)
        best = max(m.dev_ap.values())
        assert m.fit.lam == max(lam for lam in lambdas if m.dev_ap[lam] == pytest.approx(best, abs=1e-12))
        assert ("minilm_cos" in m.fit.names + m.fit.dropped) == ("minilm" in m.groups)
        # a pair scores the same in either order
        assert m.score([("cure", "treat")]).tolist() == pytest.approx(m.score([("treat", "cure")]).tolist())
    with pytest.raises(ValueError, match="no source"):
        ft.FeatureExtractor(db, None, None).matrix([("treat", "cure")], ("general", "ppmi"))
    rows = ft.coefficient_rows(fitted)
    assert rows[0] == "| feature | " + " | ".join(ft.VARIANTS) + " |" and rows[2].startswith("| (intercept) | ")


def test_evidence_with_the_combination_model(db, tmp_path, monkeypatch):
    """run_evidence fits the variants on the ontology train part, tunes on dev, reports on test."""
    from pivot.eval import ontology
    from pivot.eval.evidence import run_evidence, write_evidence_report

    parts = {"train": [("treat", "cure", 1), ("cure", "heal", 1), ("treat", "handle", 0), ("heal", "gene", 0),
                       ("treat", "gene", 0), ("handle", "heal", 1)],
             "dev": [("treat", "heal", 1), ("cure", "gene", 0), ("handle", "gene", 0), ("cure", "handle", 1)],
             "test": [("treat", "remedy", 1), ("cure", "therapy", 1), ("gene", "remedy", 0), ("handle", "therapy", 0)]}
    pairs = [ontology.OntologyPair(a, b, y, "synonym" if y else "sibling", "GO", f"GO:{i}", f"GO:{i}", split)
             for split, rows in parts.items() for i, (a, b, y) in enumerate(rows)]
    og = ontology.OntologyGold(pairs, 0, 0, {"GO": "go.obo"}, {})
    monkeypatch.setattr(ontology, "build_ontology_gold", lambda seed=0: og)
    FakeMiniLM.VECS = {**FakeMiniLM.VECS, "remedy": (1.0, 0.3), "therapy": (0.2, 1.0)}
    # PPMI-SVD cosines on test: handle–therapy 1 (−), treat–remedy .995 (+), cure–therapy .11 (+),
    # gene–remedy: gene has no vector, -1 (−)  ->  AP = (1/2 + 2/3) / 2 = 58.3
    wv = ds.WordVectors(["treat", "cure", "heal", "handle", "remedy", "therapy"],
                        np.array([[1.0, 0.0], [0.9, 0.1], [0.6, 0.8], [0.0, 1.0], [1.0, 0.1], [0.0, 1.0]]),
                        source="toy", params={**ds.DEFAULTS})
    evd = run_evidence(db, None, tmp_path, ontology_part="test", rivals=[FakeMiniLM()], n_boot=50,
                       word_vectors=wv)
    assert [m.name for m in evd.combination["models"]] == list(ft.VARIANTS)
    assert evd.combination["train"] == ("ontology-train", 6, 3) and evd.combination["dev"] == ("ontology-dev", 4, 2)
    res = evd.full["ontology-test"]
    assert res.models["ppmi-svd"].ap == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert set(ft.VARIANTS) <= set(res.models) and res.models["ppdb2-all"].n_proposed == 4
    text = write_evidence_report(tmp_path / "docs" / "results.md", evd, command="pivot eval x").read_text()
    assert "## The combination model (PPDB 2.0-style features)" in text
    assert "**Fitted on `ontology-train`** (6 pairs, 3 positive); **λ chosen on `ontology-dev`** (4 pairs, 2 positive)" in text
    assert "| ppmi-svd | 58.3 [" in text
    assert "- ontology-test: ppdb2-pivot AP×100 " in text and "- ontology-test: ppdb2-all AP×100 " in text
    d = res.paired_delta("ppdb2-general", "ppdb2-pivot")   # the domain ablation's line, its own figures
    assert (f"- ontology-test: ppdb2-pivot AP×100 {100 * res.models['ppdb2-pivot'].ap:.1f} vs ppdb2-general "
            f"{100 * res.models['ppdb2-general'].ap:.1f}: {d.rel_pct:+.1f}% [{d.rel_pct_ci[0]:+.1f}, "
            f"{d.rel_pct_ci[1]:+.1f}] (target >= +10%, interval above 0): **") in text
    assert "| log_pmax[general] | " in text and "| minilm_cos | – | – | " in text   # not a feature of pivot-only
    # the feature-based models score every pair: the coverage table leaves them out with the rivals
    cov = text.split("## Gold sets: size and coverage")[1].split("## ontology-test")[0]
    assert "| ppdb2-all |" not in cov and "| dom ☆ |" in cov


def test_levenshtein_many_equals_the_scalar_recurrence():
    rng = np.random.default_rng(0)
    words = ["", "a", "ab", "ba", "kitten", "sitting", "abc abd", "héart", "x" * 30]
    pairs = [(words[i], words[j]) for i, j in rng.integers(0, len(words), size=(200, 2))]
    got = ft.levenshtein_many(pairs, batch=16)
    assert got.tolist() == [ft.levenshtein(a, b) for a, b in pairs]
    assert ft.levenshtein_many([("kitten", "sitting"), ("", "")]).tolist() == [3, 0]


def test_near_constant_column_is_dropped_and_small_numbers_shown():
    # a column of log floors: its computed sd is ~1e-15, not 0; it must be dropped, not scaled
    x = np.column_stack([[0.0, 1.0, 1.0, 0.0], np.full(4, FLOOR_LOG_P) + np.array([0, 0, 0, 4e-15])])
    fit = ft.fit_ridge_logit(["a", "floor"], x, np.array([0, 1, 0, 1]), 1.0)
    assert fit.dropped == ["floor"]
    assert ft._num(0.00004, "+") == "+4.0e-05" and ft._num(-0.25, "+") == "-0.250" and ft._num(0.0) == "0.000"
