"""Unit tests of pivot.pipeline.corpus on tiny synthetic files written here (never the real data)."""
import gzip
import zipfile

import numpy as np
import pytest

from pivot.pipeline.corpus import (Bitext, Vocab, clean_pairs, is_section_header, load_bitext, read_parallel,
                                   read_tsv_zip, write_bitext)
from pivot.text import normalize, normalize_many
from pivot.errors import InputError


def write_bytes(path, data):
    path.write_bytes(data)
    return path


def write_text(path, lines):
    path.write_text("".join(s + "\n" for s in lines), encoding="utf-8")
    return path


# A miniature WMT biomedical file pair: headers, blank document separators, sentences.
EN = ["Abstract", "The drug works.", "RESULTS:", "Patients improved.", "", "",
      "Title", "Traumatic avulsions of permanent teeth", "Total drug costs declined."]
FR = ["Abstract", "Le médicament agit.", "RÉSULTATS :", "Les patients allaient mieux.", "", "",
      "Title", "Avulsions traumatiques des dents permanentes", "Les coûts ont diminué."]


# ----------------------------------------------------------------------------- readers

def test_read_parallel_drops_blanks_and_headers(tmp_path):
    en = write_text(tmp_path / "c.en", EN)
    fr = write_text(tmp_path / "c.fr", FR)
    stats = {"read": 0, "blank": 0, "header": 0}
    got = list(read_parallel(en, fr, stats=stats))
    # Lines 1, 3, 7 are headers (Abstract, RESULTS:, Title), 5-6 blank on both sides;
    # line numbers are the files' own 1-based numbers.
    assert got == [(2, "The drug works.", "Le médicament agit."),
                   (4, "Patients improved.", "Les patients allaient mieux."),
                   (8, "Traumatic avulsions of permanent teeth",
                    "Avulsions traumatiques des dents permanentes"),
                   (9, "Total drug costs declined.", "Les coûts ont diminué.")]
    assert stats == {"read": 9, "blank": 2, "header": 3}


def test_read_parallel_keeps_headers_when_asked(tmp_path):
    en = write_text(tmp_path / "c.en", EN)
    fr = write_text(tmp_path / "c.fr", FR)
    assert len(list(read_parallel(en, fr, drop_headers=False))) == 7   # 9 lines - 2 blank


def test_read_parallel_gzip_and_crlf(tmp_path):
    en = tmp_path / "c.en.gz"
    fr = tmp_path / "c.fr.gz"
    with gzip.open(en, "wb") as fh:
        fh.write(b"One.\r\nTwo.\r\n")
    with gzip.open(fr, "wb") as fh:
        fh.write("Un.\r\nDeux.".encode())          # no final newline: still 2 lines
    assert list(read_parallel(en, fr)) == [(1, "One.", "Un."), (2, "Two.", "Deux.")]


def test_read_parallel_line_count_mismatch_names_both(tmp_path):
    en = write_text(tmp_path / "a.en", ["x", "y", "z"])
    fr = write_text(tmp_path / "a.fr", ["x", "y"])
    with pytest.raises(InputError) as err:
        next(read_parallel(en, fr))           # raised before the first pair
    msg = str(err.value)
    assert str(en) in msg and str(fr) in msg
    assert f"{en} has 3 lines, {fr} has 2" in msg


def test_read_parallel_bad_utf8_names_line(tmp_path):
    en = write_bytes(tmp_path / "b.en", b"ok\nfine\nbad \xff byte\n")
    fr = write_text(tmp_path / "b.fr", ["un", "deux", "trois"])
    with pytest.raises(InputError) as err:
        list(read_parallel(en, fr))
    assert str(err.value).startswith(f"{en}:3: not UTF-8")
    assert err.value.line == 3


def test_read_parallel_only_newline_ends_lines(tmp_path):
    # U+2028 and U+0085 are line ends for str.splitlines but not for wc -l or Moses:
    # they must not shift the alignment of the two sides.
    en = write_text(tmp_path / "u.en", ["a\u2028b", "c\x85d"])
    fr = write_text(tmp_path / "u.fr", ["x", "y"])
    assert [n for n, _, _ in read_parallel(en, fr)] == [1, 2]


@pytest.mark.parametrize("en, f, expected", [
    ("Abstract", "Abstract", True),
    ("RESULTS", "RÉSULTATS", True),
    ("Methods:", "Méthodes :", True),
    ("PATIENTS AND METHODS", "PATIENTS ET MÉTHODES", True),
    ("Material and methods", "Matériel et méthodes", True),
    ("Lessons learnt", "Leçons tirées", True),
    ("Discussion-Conclusion", "Discussion-Conclusion", True),
    ("Introduction\u00a0:", "Introduction\u00a0:", True),
    ("CLINICAL FEATURES", "CARACTÉRISTIQUES CLINIQUES", True),      # all-caps rule
    ("PERCEPTION OF SMILING:", "PERCEPTION DU SOURIRE :", True),    # all-caps rule
    ("RESULTS\tRÉSULTATS", "RÉSULTATS", True),                      # TAB, all fields headers
    ("Abstract", "Le patient a reçu un soutien.", True),            # either side suffices
    ("The drug works.", "RÉSULTATS", True),
    # sentences and titles stay
    ("Results were poor.", "Les résultats étaient mauvais.", False),
    ("Total drug costs declined.", "Les coûts ont diminué.", False),
    ("Traumatic avulsions of permanent teeth", "Avulsions traumatiques des dents", False),
    ("MATERIALS AND METHODS:\tStandard photographs of women.", "MÉTHODES: Des photos.", False),
    ("HIV INFECTION IS RISING.", "L'INFECTION PROGRESSE.", False),  # punctuation: a sentence
    ("Stop!", "Arrête !", False),
])
def test_is_section_header(en, f, expected):
    assert is_section_header(en, f) is expected


def make_zip(path, members):
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


TATOEBA = ("Go.\tVa !\tCC-BY 2.0 (France) Attribution: tatoeba.org #2877272 (CM)\n"
           "I won!\tJ’ai gagné !\tCC-BY 2.0 (France) Attribution: tatoeba.org #2005 (x)\n")


def test_read_tsv_zip_skips_macos_junk_and_about(tmp_path):
    z = make_zip(tmp_path / "fra-eng.zip", {
        "__MACOSX/._fra-eng": b"\x00\x05junk",
        "fra-eng/_about.txt": "About this file",
        "__MACOSX/fra-eng/._fra.txt": b"\x00\x05\x16\x07junk",
        "fra-eng/fra.txt": TATOEBA,
    })
    stats = {"read": 0}
    got = list(read_tsv_zip(z, stats=stats))
    assert got == [(1, "Go.", "Va !"), (2, "I won!", "J’ai gagné !")]
    assert stats == {"read": 2}
    assert list(read_tsv_zip(z, member="fra-eng/fra.txt")) == got


def test_read_tsv_zip_ambiguous_member(tmp_path):
    z = make_zip(tmp_path / "two.zip", {"a.txt": "a\tb\n", "b.txt": "c\td\n"})
    with pytest.raises(InputError, match="cannot choose the text member: 2 candidates"):
        list(read_tsv_zip(z))
    assert list(read_tsv_zip(z, member="b.txt")) == [(1, "c", "d")]
    with pytest.raises(InputError, match="no member 'c.txt'"):
        list(read_tsv_zip(z, member="c.txt"))


def test_read_tsv_zip_short_line(tmp_path):
    z = make_zip(tmp_path / "deu-eng.zip", {"deu.txt": "Hi.\tHallo!\nBroken line\n"})
    with pytest.raises(InputError) as err:
        list(read_tsv_zip(z))
    assert str(err.value).startswith(f"{z}:deu.txt:2: expected english<TAB>foreign")


# ----------------------------------------------------------------------------- normalisation

@pytest.mark.parametrize("text, lang, expected", [
    # French elisions: the Moses French rule splits after the apostrophe ("l'" "analyse");
    # the final period is split off; lowercase after tokenising.
    ("L'analyse d'ADN n'est pas finie.", "fr", "l' analyse d' adn n' est pas finie ."),
    # English: clitics split before the apostrophe ("isn" "'t"); the possessive plural
    # apostrophe stands alone; "Dr" is an English non-breaking prefix, so "dr." keeps its
    # period; the comma and the final period are split off.
    ("It isn't the patients' fault, Dr. Smith.", "en",
     "it isn 't the patients ' fault , dr. smith ."),
    # Typographic apostrophe -> ' (else the C++ port would give "l ’ hôpital"); the
    # no-break space before ":" is a space; « » are tokens.
    ("L’hôpital\u00a0: c’est « fermé » !", "fr", "l' hôpital : c' est « fermé » !"),
    # Lowercasing AFTER tokenising: lowercase first, "high. patients" would keep the
    # period attached (Moses reads a period before a lowercase word as an abbreviation).
    ("The dose was high. Patients died.", "en", "the dose was high . patients died ."),
    # No XML escaping: & < > stay themselves (not &amp; &lt; &gt;).
    ("AT&T and <b> 3.5 % mg/kg", "en", "at & t and < b > 3.5 % mg / kg"),
    # NFC: "e" + combining acute becomes the single code point "é".
    ("Cafe\u0301 cre\u0300me", "fr", "café crème"),
])
def test_normalize_golden(text, lang, expected):
    assert normalize(text, lang) == expected


SENTENCES = {
    "fr": ["L'analyse d'ADN n'est pas finie.", "Qu'est-ce que c'est ?",
           "Aujourd'hui, l'OMS dit qu'il faut 1,5 mg.", "Le taux était de 1,13 % (38 sur 3368).",
           "C'est l'hôpital & la clinique \"oui\" [test]."],
    "en": ["It isn't the patients' fault, Dr. Smith.", "He said \"don't\" (twice).",
           "AT&T's CEO won't say 'hello' e.g. at 5 p.m.", "The cell-cycle data were 1,000.5 mg/kg.",
           "U.S. data on Jan. 5th: 3.5%."],
}


@pytest.mark.parametrize("lang", ["fr", "en"])
def test_cpp_tokenizer_matches_sacremoses(lang):
    # The C++ port with escape_xml=False must agree with sacremoses' escape=False.
    assert normalize_many(SENTENCES[lang], lang) == \
        normalize_many(SENTENCES[lang], lang, backend="sacremoses")


def test_normalize_unknown_backend():
    with pytest.raises(ValueError, match="unknown tokenizer backend"):
        normalize("x", "en", backend="spacy")


# ----------------------------------------------------------------------------- cleaning

def test_clean_pairs_exact_stats():
    long81 = " ".join(["w"] * 81)
    long80 = " ".join(["w"] * 80)
    pairs = [
        ("a b", "x y"),                          # kept
        ("", "x"),                               # empty
        (long81, "x"),                           # too_long: 81 > 80
        ("a", " ".join(["x"] * 10)),             # ratio: 10 / 1 > 9
        ("a", " ".join(["x"] * 9)),              # kept: 9 / 1 is not > 9
        ("a b", "x y"),                          # duplicate of the first
        (long80, " ".join(["x"] * 10)),          # kept: 80 <= 80 and 80 / 10 = 8 <= 9
        ("a b", "x y z"),                        # kept: differs from the first on one side
    ]
    kept, stats = clean_pairs(pairs)
    assert kept == [pairs[0], pairs[4], pairs[6], pairs[7]]
    assert stats == {"read": 8, "blank": 0, "header": 0, "empty": 1, "too_long": 1,
                     "ratio": 1, "duplicate": 1, "kept": 4}


def test_clean_pairs_extra_items_ride_along_and_start_stats():
    kept, stats = clean_pairs([("a", "x", 0), ("a", "x", 1), ("b", "y", 1)],
                              stats={"read": 5, "blank": 1, "header": 1})
    assert kept == [("a", "x", 0), ("b", "y", 1)]
    assert stats == {"read": 5, "blank": 1, "header": 1, "empty": 0, "too_long": 0,
                     "ratio": 0, "duplicate": 1, "kept": 2}


# ----------------------------------------------------------------------------- vocabulary

def test_vocab_encode_and_round_trip(tmp_path):
    v = Vocab()
    tokens, offsets = v.encode(["the cell", "", "cell the l' cell"])
    # First occurrence order: the=0, cell=1, l'=2.
    assert tokens.dtype == np.int32 and offsets.dtype == np.int64
    assert tokens.tolist() == [0, 1, 1, 0, 2, 1]
    assert offsets.tolist() == [0, 2, 2, 6]
    assert v.decode(tokens[offsets[2]:offsets[3]]) == "cell the l' cell"
    v.save(tmp_path / "vocab.txt")
    assert (tmp_path / "vocab.txt").read_text(encoding="utf-8") == "the\ncell\nl'\n"
    w = Vocab.load(tmp_path / "vocab.txt")
    assert w.tokens == v.tokens and w["l'"] == 2
    with pytest.raises(KeyError):
        w.encode(["unknown"], grow=False)


def test_vocab_load_rejects_repeats(tmp_path):
    p = write_text(tmp_path / "v.txt", ["a", "b", "a"])
    with pytest.raises(InputError, match=r"v.txt:3: bad vocabulary entry 'a'"):
        Vocab.load(p)


# ----------------------------------------------------------------------------- bitext

def test_bitext_save_load_round_trip(tmp_path):
    b = Bitext("fr", ["a b", "c"], ["x", "y z"], [0, 1], ["s0", "s1"], {"total": {"kept": 2}})
    b.save(tmp_path / "bt")
    assert (tmp_path / "bt" / "bitext.fr").read_text(encoding="utf-8") == "x\ny z\n"
    c = Bitext.load(tmp_path / "bt")
    assert (c.lang, c.en, c.f, c.source_names, c.stats) == \
        ("fr", ["a b", "c"], ["x", "y z"], ["s0", "s1"], {"total": {"kept": 2}})
    assert c.origin.dtype == np.int16 and c.origin.tolist() == [0, 1]
    assert [x.tolist() for x in c.lengths()] == [[2, 1], [1, 2]]


def make_root(tmp_path):
    root = tmp_path / "data"
    (root / "bio" / "test").mkdir(parents=True)
    write_text(root / "bio" / "train.en", EN)
    write_text(root / "bio" / "train.fr", FR)
    # Test files: X.en pairs with X.fr; "a" sorts before "b".
    write_text(root / "bio" / "test" / "b.en", ["The drug works."])       # dup of train
    write_text(root / "bio" / "test" / "b.fr", ["Le médicament agit."])
    write_text(root / "bio" / "test" / "a.en", ["Side effects matter."])
    write_text(root / "bio" / "test" / "a.fr", ["Les effets secondaires comptent."])
    make_zip(root / "tat.zip", {"__MACOSX/._x": b"junk", "fra-eng/_about.txt": "about",
                                "fra-eng/fra.txt": TATOEBA})
    return root


SOURCES = [
    {"name": "train", "format": "parallel", "en": "bio/train.en", "f": "bio/train.fr"},
    {"name": "test", "format": "parallel-glob", "en": "bio/test/*.en"},
    {"name": "tatoeba", "format": "tsv-zip", "path": "tat.zip"},
]


def test_load_bitext_all_formats_dedup_across_sources(tmp_path):
    root = make_root(tmp_path)
    b = load_bitext(SOURCES, "fr", root, quiet=True)
    assert b.en == ["the drug works .", "patients improved .",
                    "traumatic avulsions of permanent teeth", "total drug costs declined .",
                    "side effects matter .", "go .", "i won !"]
    assert b.f[0] == "le médicament agit ." and b.f[-1] == "j' ai gagné !"
    assert b.origin.tolist() == [0, 0, 0, 0, 1, 2, 2]
    assert b.source_names == ["train", "test", "tatoeba"]
    # test/b.en repeats the train pair: a duplicate, credited to the first source.
    assert b.stats["sources"]["test"] == {"read": 2, "blank": 0, "header": 0, "empty": 0,
                                          "too_long": 0, "ratio": 0, "duplicate": 1, "kept": 1}
    assert b.stats["total"] == {"read": 13, "blank": 2, "header": 3, "empty": 0,
                                "too_long": 0, "ratio": 0, "duplicate": 1, "kept": 7}


def test_load_bitext_missing_file_names_source_and_data_root(tmp_path):
    root = make_root(tmp_path)
    bad = [dict(SOURCES[0], f="bio/nope.fr")]
    with pytest.raises(InputError) as err:
        load_bitext(bad, "fr", root, quiet=True)
    msg = str(err.value)
    assert "recipe source 'train'" in msg and str(root / "bio" / "nope.fr") in msg
    assert "--data DIR" in msg and "PIVOT_DATA" in msg


def test_load_bitext_glob_needs_partner(tmp_path):
    root = make_root(tmp_path)
    (root / "bio" / "test" / "a.fr").unlink()
    with pytest.raises(InputError, match=r"recipe source 'test': file not found: .*a\.fr"):
        load_bitext(SOURCES[1:2], "fr", root, quiet=True)


def test_load_bitext_unknown_format(tmp_path):
    with pytest.raises(InputError, match="unknown format 'csv'"):
        load_bitext([{"name": "x", "format": "csv"}], "fr", tmp_path, quiet=True)


def test_write_bitext_streams_the_same_bytes_as_load_bitext_save(tmp_path):
    # The streaming writer (batches of 2 lines here) and the in-memory Bitext agree byte
    # for byte on the first-batch formats; tests/test_corpus_multi.py covers tsv-gz.
    root = make_root(tmp_path)
    load_bitext(SOURCES, "fr", root, quiet=True).save(tmp_path / "a")
    meta = write_bitext(SOURCES, "fr", root, tmp_path / "b", quiet=True, batch_lines=2)
    names = ["bitext.en", "bitext.fr", "meta.json", "origin.npy"]
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == names
    for name in names:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert meta["n_pairs"] == 7 and meta["source_kinds"] == ["sentences"] * 3
