"""The whole pipeline on a slice of the real data: real eflomal, real kenlm, real SQLite.

The slice: the WMT biomedical EDP articles (2,299 lines, about 1,250 pairs after cleaning)
plus the WMT Scielo articles, aligned with eflomal at a short schedule, an in-domain LM on
GENIA's development part, a cross-fitted general LM, every Moore-Lewis model and the
combinations tuned on Bio-SimLex.
"""
import os
import re
import sqlite3
from pathlib import Path

import pytest

from pivot.cli import main
from pivot.store.db import ParaphraseDB
from pivot.store.write import HIDDEN_FORMS, RELATION_NAMES

DATA = Path(os.environ.get("PIVOT_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not (DATA / "bitext").is_dir(), reason=f"real data not found at {DATA} (set PIVOT_DATA)"),
]

RECIPE = """
name = "slice"
[[bitext]]
lang = "fr"
sources = [
  { name = "wmt-edp", format = "parallel", en = "bitext/wmt-biomed-fr-en/train/edp_d1.en", f = "bitext/wmt-biomed-fr-en/train/edp_d1.fr" },
  { name = "wmt-scielo", format = "parallel", en = "bitext/wmt-biomed-fr-en/train/scielo_d1.en", f = "bitext/wmt-biomed-fr-en/train/scielo_d1.fr" },
]
[align]
length = 0.3
[domain]
order = 3
in_domain = { conll = ["mono/bio-ner/GENIA-pos/devel.tsv"] }
report_in_domain_sources = ["wmt-edp"]
[combine]
gold = ["gold/Bio-SimLex.txt", "gold/Bio-SimVerb.txt"]
n_tune = 1000
"""


@pytest.fixture(scope="module")
def slice_db(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("slice")
    recipe = tmp / "slice.toml"
    recipe.write_text(RECIPE)
    args = ["--recipe", str(recipe), "--data", str(DATA), "--work", str(tmp / "work")]
    assert main(["-q", "build", *args, "--out", str(tmp / "slice.db")]) == 0
    return tmp / "slice.db", args


def test_slice_build(slice_db):
    path, _ = slice_db
    with ParaphraseDB(path) as db:
        stats = db.meta["corpus_stats"]["fr"]["total"]
        # 2,299 + 8,432 lines; blank separators (3,070), section headers (1,901), 24 too long
        # and 19 repeated pairs removed
        assert stats["read"] == 2_299 + 8_432
        assert (stats["blank"], stats["header"], stats["too_long"], stats["duplicate"]) == (3_070, 1_901, 24, 19)
        assert stats["kept"] == 5_717
        # General, 7 Moore-Lewis models, 7 General+X combinations and the learned PPDB 2.0 score
        assert db.models[:1] == ["general"] and len(db.models) == 1 + 7 + 7 + 1 and "ppdb2" in db.models
        hits = db.lookup("patients", k=10)
        assert hits and all(h.score > 0 for h in hits)
        assert [h.rank for h in hits] == list(range(len(hits)))
        assert all(a.score >= b.score for a, b in zip(hits, hits[1:]))
        assert any(h.paraphrase == "patient" for h in hits)
        fit = db.meta["combination"]["models"]["general+ml-weighted"]
        assert fit["n"] == db.meta["combination"]["n_tuning_candidates"] > 0
        assert db.meta["data_fingerprints"]  # sha256 of every file read
        assert db.signature.startswith("pivot:")


def test_slice_export_is_ppdb(slice_db, tmp_path):
    # The default export: the default model's pairs but the hidden well-formedness kinds, as
    # six PPDB 2.0 fields each.
    path, _ = slice_db
    out = tmp_path / "slice.ppdb"
    assert main(["-q", "export", str(path), "-o", str(out)]) == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    with ParaphraseDB(path) as db:
        col = db.model_info(db.default_model)["column"]
    with sqlite3.connect(path) as conn:
        n = conn.execute(f"SELECT count(*) FROM pair WHERE {col} IS NOT NULL AND (form & {HIDDEN_FORMS}) = 0"
                         ).fetchone()[0]
    assert len(lines) == n > 0
    for line in lines[:1000]:
        lhs, e1, e2, feats, align, relation = line.split(" ||| ")
        assert re.fullmatch(r"\[[^\] ]+\]", lhs) and e1 and e2 and e1 != e2 and relation in RELATION_NAMES
        values = dict(f.split("=", 1) for f in feats.split())
        assert "NumPivots" in values and "Form" in values
        assert all(float(v) >= 0 for k, v in values.items() if k.startswith("-logp"))  # -ln p, p <= 1
