"""Integration: the corpus and alignment stages on the real fr-en data (PIVOT_DATA).

Figures measured when these tests were written (2 shared cores):
  wmt-medline: 41,740 lines read, 12,047 blank, 6,768 headers, 54 too long,
               145 duplicates, 22,726 pairs kept;
  tatoeba-fr:  167,130 lines read, 211 duplicates, 166,919 kept;
  reading + normalising both: about 7 s; eflomal + symmetrisation of 1,000 medline
  pairs: about 3 s.
"""
import os
import re
from pathlib import Path

import numpy as np
import pytest

from pivot.pipeline.align import run_eflomal
from pivot.pipeline.links import symmetrize
from pivot.pipeline.corpus import HEADER_WORDS, load_bitext

DATA_ROOT = Path(os.environ.get("PIVOT_DATA",
                                Path(__file__).resolve().parents[1].parent / "shared" / "data"))

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not (DATA_ROOT / "bitext" / "wmt-biomed-fr-en").is_dir(),
                       reason=f"real data not found under {DATA_ROOT} (set PIVOT_DATA)"),
]

SOURCES = [
    {"name": "wmt-medline", "format": "parallel",
     "en": "bitext/wmt-biomed-fr-en/train/medline_d1.en",
     "f": "bitext/wmt-biomed-fr-en/train/medline_d1.fr"},
    {"name": "tatoeba-fr", "format": "tsv-zip", "path": "bitext/tatoeba-fr-en/fra-eng.zip",
     "member": "fra-eng/fra.txt"},
]


@pytest.fixture(scope="module")
def bitext():
    return load_bitext(SOURCES, "fr", DATA_ROOT, quiet=True)


def test_counts_in_measured_ranges(bitext):
    medline = bitext.stats["sources"]["wmt-medline"]
    tatoeba = bitext.stats["sources"]["tatoeba-fr"]
    # Line counts are facts of the files (DATA.md); the rest within a few percent of
    # the measured figures in the module docstring.
    assert medline["read"] == 41_740 and tatoeba["read"] == 167_130
    assert 11_500 <= medline["blank"] <= 12_500
    assert 6_300 <= medline["header"] <= 7_200
    assert 22_000 <= medline["kept"] <= 23_500
    assert 166_000 <= tatoeba["kept"] <= 167_130
    assert len(bitext) == medline["kept"] + tatoeba["kept"]
    assert np.bincount(bitext.origin).tolist() == [medline["kept"], tatoeba["kept"]]


def test_no_header_survives(bitext):
    header_like = re.compile(r"^[\w' ]+( :)?$")
    medline_en = [s for s, o in zip(bitext.en, bitext.origin) if o == 0]
    survivors = [s for s in medline_en
                 if header_like.match(s) and set(s.rstrip(" :").split()) <= HEADER_WORDS]
    assert survivors == []
    assert "abstract" not in medline_en and "results" not in medline_en


def test_normalised_text_is_clean(bitext):
    # One space between tokens, lowercase, typographic apostrophes unified, no escapes.
    sample = bitext.en[::997] + bitext.f[::997]
    for s in sample:
        assert s == " ".join(s.split()) and s == s.lower()
        assert "\u2019" not in s and "&apos;" not in s and "&amp;" not in s
    assert any("l' " in s for s in bitext.f[:5000])


def test_eflomal_on_real_medline(bitext, tmp_path):
    n = 1000
    en, f = bitext.en[:n], bitext.f[:n]
    # length=0.2: 32 fertility iterations instead of the 158 eflomal picks for 1,000
    # sentences (5000 / sqrt(n)); enough for this check, and 5x faster.
    forward, reverse = run_eflomal(en, f, tmp_path, length=0.2)
    e_len = [len(s.split()) for s in en]
    f_len = [len(s.split()) for s in f]
    link_e, link_f, offsets = symmetrize(forward, reverse, e_len, f_len)
    assert len(offsets) == n + 1
    # grow-diag-final-and on biomedical fr-en: most English words are aligned, and there
    # are about as many links as English words (measured: 0.9-1.1 links per word).
    aligned = sum(len(set(link_e[offsets[s]:offsets[s + 1]].tolist())) for s in range(n))
    assert aligned / sum(e_len) >= 0.75
    assert 0.7 <= len(link_e) / sum(e_len) <= 1.4
