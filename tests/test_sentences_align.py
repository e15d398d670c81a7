"""`pivot align-eval` on a tiny synthetic Hansards-style gold set and Tatoeba zip."""
import json
import zipfile

import pytest

from pivot.cli import main
from pivot.errors import InputError
from pivot.sentences.align_eval import load_sets, read_gold, score

EN = ["the house is blue", "the house", "the cat is blue", "a cat", "the blue cat"]
FR = ["la maison est bleue", "la maison", "le chat est bleu", "un chat", "le chat bleu"]
# 1-based links: sentence e f S|P
LINKS = ["0001 1 1 S", "0001 2 2 S", "0001 3 3 S", "0001 4 4 P", "0002 1 1 S", "0002 2 2 S",
         "0003 1 1 S", "0003 2 2 S", "0003 3 3 S", "0003 4 4 S", "0004 1 1 S", "0004 2 2 S",
         "0005 1 1 S", "0005 2 3 S", "0005 3 2 S"]


def make_root(tmp_path, with_zip=True):
    gold = tmp_path / "gold" / "hansards-align"
    gold.mkdir(parents=True)
    (gold / "test.e").write_text("\n".join(EN) + "\n")
    (gold / "test.f").write_text("\n".join(FR) + "\n", encoding="utf-8")
    (gold / "test.wa.nonullalign").write_text("\n".join(LINKS) + "\n")
    if with_zip:
        z = tmp_path / "bitext" / "tatoeba-fr-en"
        z.mkdir(parents=True)
        with zipfile.ZipFile(z / "fra-eng.zip", "w") as zf:
            zf.writestr("fra-eng/fra.txt", "The house.\tLa maison.\tCC-BY\nIt's blue.\tC'est bleu.\tCC-BY\n")
            zf.writestr("__MACOSX/fra-eng/._fra.txt", "junk")
    return tmp_path


def test_read_gold_and_sets(tmp_path):
    root = make_root(tmp_path)
    en, fr, sure, possible = read_gold(root / "gold" / "hansards-align")
    assert en[0] == ["the", "house", "is", "blue"] and len(fr) == 5
    assert (0, 3, 3) in possible and (0, 0, 0) in sure and len(sure) == 14
    en2, fr2, n_gold, _, _ = load_sets(root)
    assert n_gold == 5 and len(en2) == 7
    assert en2[6] == ["it", "'s", "blue", "."] and fr2[6] == ["c'", "est", "bleu", "."]
    # AER by hand: A = the sure links plus one wrong link
    links_e, links_f, offsets = [0, 1, 2, 0], [0, 1, 2, 3], [0, 4, 4, 4, 4, 4]
    r = score((links_e, links_f, offsets), sure, possible, 5)
    # A & S = 3, A & P = 3 (0-3 is neither), |A| = 4, |S| = 14
    assert r == {"aer": round(1 - 6 / 18, 4), "precision": 0.75, "recall": round(3 / 14, 4)}


def test_cli_align_eval_json(tmp_path, capsys):
    root = make_root(tmp_path)
    assert main(["-q", "align-eval", "--data", str(root), "--format", "json", "--threads", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"aer", "precision", "recall"}
    assert 0.0 <= out["aer"] <= 1.0 and out["gold_pairs"] == 5 and out["training_pairs"] == 7
    assert main(["-q", "align-eval", "--data", str(root), "--no-bitext"]) == 0
    assert "AER" in capsys.readouterr().out


def test_cli_align_eval_missing_data(tmp_path, capsys):
    assert main(["-q", "align-eval", "--data", str(tmp_path)]) == 2
    assert "missing Hansards gold file" in capsys.readouterr().err
    with pytest.raises(InputError):
        read_gold(tmp_path)
