"""Resamples of the bitext: [preprocess] sample_fraction and sample_seed.

Rule (pivot.pipeline.corpus.sample_keeper): a normalised pair (english, foreign) is kept iff
h < ceil(fraction * 2^64), h = the first 8 bytes, big-endian, of
blake2b(str(seed) + "\\n" + english + "\\t" + foreign). The hash values of the corpus below,
written out once with hashlib (h / 2^64 in brackets):

    pair                                               seed 1                      seed 2
    we treat it / nous le soignons                     0xec1b9bbdbc79d9ec (.9223)  0xe6464b4ac0b392cc (.8995)
    we cure it / nous le guérissons                    0x4b8c5f89570df8de (.2951)  0x03610d7856567f8c (.0132)
    they treat it / ils le traitent                    0x30ba578cccb2ab6c (.1903)  0xb1aa07cc2e281b15 (.6940)
    cells divide / les cellules se divisent            0x8ff3e2434dc5aa77 (.5623)  0x14903a1aee60847b (.0803)
    proteins fold / les protéines se replient          0x039a944de056150f (.0141)  0x1e52a429bf1493ac (.1184)
    the gene is expressed / le gène est exprimé        0xeea52a5b94da9a53 (.9322)  0xf0a01c8e5d05471b (.9399)
    a cell membrane / une membrane cellulaire          0x33d4d19cd0f38de4 (.2025)  0x2103f1a04528dd70 (.1290)
    the enzyme binds / cette enzyme se lie             0x24406124b944d879 (.1416)  0x5b85f17830e470f3 (.3575)

so seed 1 keeps 5 pairs at fraction 0.5 (cure, they treat, proteins, membrane, enzyme) and 6
at 0.8 (+ cells); seed 2 keeps 5 at 0.5 (cure, cells, proteins, membrane, enzyme).
"""
import hashlib
import json
import math
import random
from fractions import Fraction

import pytest

from pivot import recipes
from pivot.cli import main
from pivot.pipeline.corpus import sample_keeper, sample_limit, sample_params, write_bitext
from pivot.store.db import ParaphraseDB
from test_preflight import Tiny

PAIRS = [("we treat it", "nous le soignons"), ("we cure it", "nous le guérissons"),
         ("they treat it", "ils le traitent"), ("cells divide", "les cellules se divisent"),
         ("proteins fold", "les protéines se replient"), ("the gene is expressed", "le gène est exprimé"),
         ("a cell membrane", "une membrane cellulaire"), ("the enzyme binds", "cette enzyme se lie")]
HASHES = {1: [0xec1b9bbdbc79d9ec, 0x4b8c5f89570df8de, 0x30ba578cccb2ab6c, 0x8ff3e2434dc5aa77,
              0x039a944de056150f, 0xeea52a5b94da9a53, 0x33d4d19cd0f38de4, 0x24406124b944d879],
          2: [0xe6464b4ac0b392cc, 0x03610d7856567f8c, 0xb1aa07cc2e281b15, 0x14903a1aee60847b,
              0x1e52a429bf1493ac, 0xf0a01c8e5d05471b, 0x2103f1a04528dd70, 0x5b85f17830e470f3]}
# Indices into PAIRS of the pairs kept, read off the table above.
KEPT = {(1, 0.5): [1, 2, 4, 6, 7], (1, 0.8): [1, 2, 3, 4, 6, 7], (2, 0.5): [1, 3, 4, 6, 7]}


def test_hash_values_by_hand():
    for seed, values in HASHES.items():
        salt = f"{seed}\n".encode()
        assert [int.from_bytes(hashlib.blake2b(salt + f"{en}\t{f}".encode("utf-8"), digest_size=8).digest(), "big")
                for en, f in PAIRS] == values


def test_sample_limit_is_exact():
    assert sample_limit(0.5) == 2 ** 63
    # the double 0.8 is 3602879701896397 / 2^52 (a little above 4/5): times 2^64 an integer
    assert sample_limit(0.8) == math.ceil(Fraction(0.8) * 2 ** 64) == 3602879701896397 * 2 ** 12
    assert sample_limit(1.0) == 2 ** 64


@pytest.mark.parametrize("seed, fraction", list(KEPT))
def test_kept_set_by_hand(seed, fraction):
    keep = sample_keeper(fraction, seed)
    assert [i for i, (en, f) in enumerate(PAIRS) if keep(en, f)] == KEPT[(seed, fraction)]
    # the same from the hash values: h < fraction * 2^64
    assert [i for i, h in enumerate(HASHES[seed]) if h < Fraction(fraction) * 2 ** 64] == KEPT[(seed, fraction)]


def _source(root, name, pairs):
    (root / f"{name}.en").write_text("".join(en + "\n" for en, _ in pairs), encoding="utf-8")
    (root / f"{name}.fr").write_text("".join(f + "\n" for _, f in pairs), encoding="utf-8")
    return {"name": name, "format": "parallel", "en": f"{name}.en", "f": f"{name}.fr"}


def _written(folder):
    en = (folder / "bitext.en").read_text(encoding="utf-8").splitlines()
    fr = (folder / "bitext.fr").read_text(encoding="utf-8").splitlines()
    return list(zip(en, fr))


def test_write_bitext_keeps_the_sampled_pairs_and_counts_the_rest(tmp_path):
    # A repeated pair: the second copy is a duplicate, whatever the sample says of it.
    corpus = PAIRS + [PAIRS[1], PAIRS[0]]
    meta = write_bitext([_source(tmp_path, "c", corpus)], "fr", tmp_path, tmp_path / "out", quiet=True,
                        sample_fraction=0.5, sample_seed=1)
    assert _written(tmp_path / "out") == [PAIRS[i] for i in KEPT[(1, 0.5)]]
    total = meta["stats"]["total"]
    assert list(total) == ["read", "blank", "header", "empty", "too_long", "ratio", "duplicate",
                           "sampled_out", "kept"]
    assert (total["read"], total["duplicate"], total["sampled_out"], total["kept"]) == (10, 2, 3, 5)
    assert meta["stats"]["sources"]["c"]["sampled_out"] == 3
    assert meta["stats"]["sample"] == {"fraction": 0.5, "seed": 1} and meta["n_pairs"] == 5
    assert json.loads((tmp_path / "out" / "meta.json").read_text(encoding="utf-8")) == meta


def test_the_sample_does_not_depend_on_input_order_or_sources(tmp_path):
    shuffled = PAIRS[:]
    random.Random(7).shuffle(shuffled)
    sources = [_source(tmp_path, "b", shuffled[5:]), _source(tmp_path, "a", shuffled[:5])]
    write_bitext(sources, "fr", tmp_path, tmp_path / "out", quiet=True, sample_fraction=0.8, sample_seed=1,
                 batch_lines=3)
    got = _written(tmp_path / "out")
    assert sorted(got) == sorted(PAIRS[i] for i in KEPT[(1, 0.8)])
    # written in input order (source b, then a), the kept ones of each
    assert got == [p for p in shuffled[5:] + shuffled[:5] if PAIRS.index(p) in KEPT[(1, 0.8)]]


def test_fraction_one_keeps_everything_and_writes_the_full_corpus_bytes(tmp_path):
    src = [_source(tmp_path, "c", PAIRS)]
    write_bitext(src, "fr", tmp_path, tmp_path / "plain", quiet=True)
    write_bitext(src, "fr", tmp_path, tmp_path / "one", quiet=True, sample_fraction=1.0, sample_seed=5)
    assert _written(tmp_path / "one") == PAIRS
    for name in ("bitext.en", "bitext.fr", "origin.npy", "meta.json"):
        assert (tmp_path / "plain" / name).read_bytes() == (tmp_path / "one" / name).read_bytes(), name


def test_stage_parameters():
    base = {"max_tokens": 80, "max_ratio": 9.0, "dedup": True}
    # no key, or fraction 1 (whatever the seed): the table of a recipe without the keys, so the
    # corpus stage's key, and everything after it, is today's
    assert sample_params(base) == base
    assert sample_params({**base, "sample_fraction": 1.0, "sample_seed": 5}) == base
    assert sample_params({**base, "sample_seed": 5}) == base
    # below 1: both keys, the seed defaulted to 0
    assert sample_params({**base, "sample_fraction": 0.8}) == {**base, "sample_fraction": 0.8, "sample_seed": 0}
    assert sample_params({**base, "sample_fraction": 0.8, "sample_seed": 3}) == {
        **base, "sample_fraction": 0.8, "sample_seed": 3}
    # the recipe's defaults hold no sample key (the database records the table it always did)
    assert recipes.DEFAULTS["preprocess"] == base


def _ibm2(t: Tiny, preprocess: str = ""):
    """The tiny recipe aligned by IBM Model 2 (a Pharaoh file is line-aligned with the full
    bitext, which a resample changes), with extra [preprocess] lines."""
    def edit(text):
        text = text.replace('method = "pharaoh"\npharaoh = { fr = "c.align" }', 'method = "ibm2"')
        return text.replace("max_tokens = 80\n", "max_tokens = 80\n" + preprocess)
    t.write_recipe(edit)


def test_a_resample_has_its_own_keys_and_signature(tmp_path, capsys):
    for name in ("full", "one", "half"):
        (tmp_path / name).mkdir()
    full, one, half = (Tiny(tmp_path / name, domain=False) for name in ("full", "one", "half"))
    _ibm2(full)
    _ibm2(one, "sample_fraction = 1.0\nsample_seed = 9\n")
    _ibm2(half, "sample_fraction = 0.5\nsample_seed = 4\n")
    for t in (full, one, half):
        assert main(t.args()) == 0, capsys.readouterr().err
    with ParaphraseDB(full.out) as a, ParaphraseDB(half.out) as b:
        assert "|sample:" not in a.signature
        assert "|sample:0.5/seed4|" in b.signature
        # Tiny's pairs (we treat it, we cure it, they treat it) hash (seed 4) to h / 2^64 =
        # .181, .415, .826: the first two are kept
        assert a.meta["corpus_stats"]["fr"]["total"]["kept"] == 3
        assert b.meta["corpus_stats"]["fr"]["total"]["kept"] == 2
        assert b.meta["corpus_stats"]["fr"]["total"]["sampled_out"] == 1
        assert b.meta["parameters"]["preprocess"]["sample_fraction"] == 0.5
    corpus = {p.relative_to(tmp_path).parts[0]: p.parent.name for p in tmp_path.glob("*/work/corpus.fr-*/DONE")}
    assert corpus["full"] == corpus["one"] != corpus["half"]   # fraction 1: the full bitext's key
    done = json.loads((tmp_path / "half" / "work" / corpus["half"] / "DONE").read_text())
    assert done["params"]["preprocess"] == {"max_tokens": 80, "max_ratio": 9.0, "dedup": True,
                                            "sample_fraction": 0.5, "sample_seed": 4}
