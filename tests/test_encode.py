"""The encode stage as tasks (pivot.pipeline.encode.encode_job): the ids of one pass over the
text in order, the shards cut by the greedy rule, the links and flags of their lines."""
import json
import random

import numpy as np
import pytest

from pivot.pipeline import encode as encode_stage
from pivot.pipeline.corpus import Bitext
from pivot.pipeline.encode import _chunk_pieces, encode_job, read_shards, token_cuts
from pivot.pipeline.engine import Engine


def greedy_cuts(lengths, shard_sentences, shard_tokens):
    """The module docstring's rule, one line at a time (the reference of token_cuts)."""
    cuts, start, tokens = [], 0, 0
    for i, length in enumerate(lengths):
        if i > start and (i - start == shard_sentences or tokens + length > shard_tokens):
            cuts.append((start, i))
            start, tokens = i, 0
        tokens += length
    if len(lengths) > start:
        cuts.append((start, len(lengths)))
    return cuts


def test_token_cuts_follow_the_greedy_rule():
    rng = random.Random(7)
    for _ in range(300):
        lengths = [rng.choice([0, 1, 2, 3, 5, 8, 13]) for _ in range(rng.randrange(0, 40))]
        s, t = rng.randrange(1, 8), rng.randrange(1, 30)
        assert token_cuts(lengths, s, t) == greedy_cuts(lengths, s, t), (lengths, s, t)


def test_chunk_pieces_by_hand():
    # chunks of 4 lines: [0, 4) [4, 8) [8, 12); lines [3, 9) are line 3 of chunk 0, chunk 1, lines 0-1 of chunk 2
    assert _chunk_pieces(3, 9, 4) == [(0, 3, 4), (1, 0, 4), (2, 0, 1)]
    assert _chunk_pieces(4, 8, 4) == [(1, 0, 4)]
    assert _chunk_pieces(0, 1, 4) == [(0, 0, 1)]


def _save_language(root, lang, en, f, origin, names, kinds, links):
    """A corpus folder (Bitext.save) and an align folder holding one links.npz."""
    corpus, align = root / f"corpus.{lang}", root / f"align.{lang}"
    Bitext(lang, en, f, np.asarray(origin, dtype=np.int16), names, source_kinds=kinds).save(corpus)
    align.mkdir()
    offsets = np.zeros(len(links) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in links], out=offsets[1:])
    np.savez(align / "links.npz", link_e=np.array([e for x in links for e, _ in x], dtype=np.int32),
             link_f=np.array([f for x in links for _, f in x], dtype=np.int32), link_offsets=offsets)
    return lang, corpus, align


@pytest.fixture
def two_languages(tmp_path):
    de = _save_language(tmp_path, "de",
                        ["the cell", "a cell divides", "the cell", "cells"],
                        ["die zelle", "eine zelle teilt sich", "die zelle", "zellen"],
                        [0, 0, 1, 1], ["news", "glossary"], ["sentences", "terms"],
                        [[(0, 0), (1, 1)], [(0, 0), (1, 1), (2, 2), (2, 3)], [(1, 1)], [(0, 0)]])
    fr = _save_language(tmp_path, "fr",
                        ["a virus", "the cell divides"],
                        ["un virus", "la cellule se divise"],
                        [0, 0], ["web"], ["sentences"],
                        [[(1, 1)], [(0, 0), (1, 1), (2, 2)]])
    return [de, fr]


def test_encode_job_ids_shards_links_by_hand(tmp_path, two_languages, monkeypatch):
    # Chunks of 3 lines, so that de's second shard spans two tokenize chunks.
    monkeypatch.setattr(encode_stage, "TOKENIZE_LINES", 3)
    out = tmp_path / "out"
    info = Engine(workers=1).run(encode_job(two_languages, out, 3, 4))[0]
    # English ids in order of first occurrence over de then fr:
    #   the 0, cell 1, a 2, divides 3, cells 4, virus 5
    # de lines' token counts 2 3 2 1: [0, 1) (2 + 3 > 4), [1, 2) (3 + 2 > 4), [2, 4) (2 + 1 <= 4);
    # fr 2 3: [0, 1), [1, 2). de's [2, 4) spans tokenize chunks 0 (line 2) and 1 (line 3).
    assert [(s["lang"], s["start"], s["n"], s["english_tokens"]) for s in info["shards"]] == \
        [("de", 0, 1, 2), ("de", 1, 1, 3), ("de", 2, 2, 3), ("fr", 4, 1, 2), ("fr", 5, 1, 3)]
    assert (out / "vocab.en").read_text() == "the\ncell\na\ndivides\ncells\nvirus\n"
    # de: die 0 zelle 1 eine 2 teilt 3 sich 4 zellen 5; fr from 6: un 6 virus 7 la 8 cellule 9 se 10 divise 11
    assert (out / "vocab.de").read_text() == "die\nzelle\neine\nteilt\nsich\nzellen\n"
    assert (out / "vocab.fr").read_text() == "un\nvirus\nla\ncellule\nse\ndivise\n"
    assert np.load(out / "f_lang.npy").tolist() == [0] * 6 + [1] * 6
    with np.load(out / "shards" / "00002.npz") as z:   # "the cell" / "die zelle", "cells" / "zellen"
        assert z["e_tokens"].tolist() == [0, 1, 4] and z["e_tokens"].dtype == np.int32
        assert z["e_offsets"].tolist() == [0, 2, 3] and z["e_offsets"].dtype == np.int64
        assert z["f_tokens"].tolist() == [0, 1, 5] and z["f_tokens"].dtype == np.int32
        assert z["f_offsets"].tolist() == [0, 2, 3]
        assert z["link_e"].tolist() == [1, 0] and z["link_f"].tolist() == [1, 0]
        assert z["link_offsets"].tolist() == [0, 1, 2]
        assert z["whole"].tolist() == [1, 1]           # both lines come from the glossary (terms)
    with np.load(out / "shards" / "00001.npz") as z:   # "a cell divides" / "eine zelle teilt sich"
        assert z["e_tokens"].tolist() == [2, 1, 3] and z["f_tokens"].tolist() == [2, 1, 3, 4]
        assert z["link_e"].tolist() == [0, 1, 2, 2] and z["link_f"].tolist() == [0, 1, 2, 3]
        assert z["whole"].tolist() == [0]
    with np.load(out / "shards" / "00004.npz") as z:
        assert z["e_tokens"].tolist() == [0, 1, 3]
        assert z["f_tokens"].tolist() == [8, 9, 10, 11]
        assert z["whole"].tolist() == [0]
    assert (out / "english.txt").read_text() == "the cell\na cell divides\nthe cell\ncells\na virus\nthe cell divides\n"
    assert np.load(out / "origin.npy").tolist() == [0, 0, 1, 1, 2, 2]
    assert info["origins"] == [["de", "news"], ["de", "glossary"], ["fr", "web"]]
    assert read_shards(out) == json.loads(json.dumps(info))
    assert not (out / "tokenized").exists()


def test_encode_job_is_the_same_for_any_chunking(tmp_path, two_languages, monkeypatch):
    """The tokenize chunks set the tasks only: every file is the same bytes."""
    outs = []
    for lines in (1, 2, 50_000):
        monkeypatch.setattr(encode_stage, "TOKENIZE_LINES", lines)
        out = tmp_path / f"out-{lines}"
        Engine(workers=1).run(encode_job(two_languages, out, 2, 100))
        outs.append({str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()})
    assert outs[0] == outs[1] == outs[2]
    # shards.json, english.txt, 3 vocabularies, origin.npy, f_lang.npy; de [0, 2) [2, 4), fr [0, 2)
    assert len(outs[0]) == 7 + 3
