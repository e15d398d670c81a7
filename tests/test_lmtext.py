"""The lmtext stage's reader of the corpus stages' English (pivot.pipeline.lmtext.iter_english)."""
import pytest

from pivot.pipeline.lmtext import iter_english


def test_the_languages_english_in_turn_in_chunks(tmp_path):
    # what encode's english.txt held: fr's 3 lines then de's 2 (a last line may lack its "\n";
    # a line past n_lines, which encode never read, is not read either)
    (tmp_path / "fr.en").write_text("a b\nc\nd e f\n")
    (tmp_path / "de.en").write_text("g\nh i\nnot read")
    texts = [(tmp_path / "fr.en", 3), (tmp_path / "de.en", 2)]
    assert list(iter_english(texts, chunk=2)) == [["a b", "c"], ["d e f", "g"], ["h i"]]
    assert list(iter_english(texts)) == [["a b", "c", "d e f", "g", "h i"]]
    (tmp_path / "de.en").write_text("g\nh i")
    assert list(iter_english(texts)) == [["a b", "c", "d e f", "g", "h i"]]


def test_a_file_shorter_than_its_pairs_is_an_error(tmp_path):
    (tmp_path / "fr.en").write_text("a b\nc\n")
    with pytest.raises(ValueError, match=r"fr.en: ends at line 2, expected 3 lines"):
        list(iter_english([(tmp_path / "fr.en", 3)]))
