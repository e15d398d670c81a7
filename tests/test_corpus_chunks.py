"""The corpus stage on a cluster: every source's files cut into chunks of lines (a task each),
then one join per language. Its folder must be byte for byte the one write_bitext writes in one
task, for any cut; the readers' line windows must partition a file's rows and counts."""
import gzip
import json
import zipfile

import pytest
from test_corpus_multi import SOURCES, folder_bytes, make_root, write_text

from pivot.pipeline.corpus import (
    LINE_BYTES,
    _plan,
    chunk_plan,
    join_chunks,
    normalise_chunk,
    read_parallel,
    read_tsv_gz,
    read_tsv_zip,
    write_bitext,
)

# A parallel pair of files with what the readers count: blanks, section headers, a pair that
# repeats one of another chunk (deduplication runs across chunks), a pair too long for 12 tokens.
EN = ["Abstract", "The cell divides.", "", "The cell divides.", "Cells grow fast.", "RESULTS",
      "A protein folds.", "one two three four five six seven eight nine ten eleven twelve thirteen",
      "A protein folds.", "", "Mice were treated.", "Go."]
FR = ["Résumé", "La cellule se divise.", "", "La cellule se divise.", "Les cellules poussent vite.",
      "RÉSULTATS", "Une protéine se replie.", "un deux trois", "Une protéine se replie.", "",
      "Les souris ont été traitées.", "Va !"]


def root_with_more(tmp_path):
    root = make_root(tmp_path)
    write_text(root / "bio" / "long.en", EN)
    write_text(root / "bio" / "long.fr", FR)
    for j in range(2):
        write_text(root / "glob" / f"doc{j}.en", EN[j * 5:j * 5 + 6])
        write_text(root / "glob" / f"doc{j}.fr", FR[j * 5:j * 5 + 6])
    sources = [{"name": "long", "format": "parallel", "en": "bio/long.en", "f": "bio/long.fr"},
               *SOURCES,
               {"name": "glob", "format": "parallel-glob", "en": "glob/*.en"}]
    return root, sources


def chunked(tmp_path, root, sources, out, chunk_lines, **preprocess):
    """The cluster's steps, run here: every chunk of chunk_plan, then the join."""
    (tmp_path / out).mkdir()
    stems = []
    for k, r, lines, _ in chunk_plan(sources, "fr", root, chunk_lines):
        stems.append(str(tmp_path / f"{out}-chunk-{len(stems)}"))
        normalise_chunk(sources, "fr", root, k, r, lines, stems[-1], max_tokens=12, **preprocess)
    meta = join_chunks(sources, "fr", root, stems, tmp_path / out, max_tokens=12, **preprocess)
    return meta, stems


@pytest.mark.parametrize("chunk_lines", [1, 2, 5, 100_000])
@pytest.mark.parametrize("preprocess", [{}, {"dedup": False}, {"sample_fraction": 0.5, "sample_seed": 3}])
def test_chunks_and_join_write_the_folder_of_write_bitext(tmp_path, chunk_lines, preprocess):
    root, sources = root_with_more(tmp_path)
    want = write_bitext(sources, "fr", root, tmp_path / "one", max_tokens=12, quiet=True, **preprocess)
    got, stems = chunked(tmp_path, root, sources, "chunked", chunk_lines, **preprocess)
    assert folder_bytes(tmp_path / "chunked") == folder_bytes(tmp_path / "one")
    assert got == want
    # every reason of the rules was met, and deduplication across chunks too
    total = want["stats"]["total"]
    assert all(total[key] > 0 for key in ("blank", "header", "too_long", "kept")), total
    assert (total["duplicate"] > 0) == ("dedup" not in preprocess)
    if chunk_lines == 1:     # a chunk per line of the long file: the repeat is in another chunk
        assert len(stems) > len(EN)


def test_chunk_plan_cuts_by_the_estimated_lines(tmp_path):
    root, sources = root_with_more(tmp_path)
    long_bytes = len("".join(s + "\n" for s in EN).encode())
    n = -(-long_bytes // (LINE_BYTES * 2))      # chunks of 2 lines: ceil(bytes / 64 / 2)
    plan = chunk_plan(sources, "fr", root, chunk_lines=2)
    long = [p for p in plan if p[0] == 0]
    # the English file's bytes at 64 a line, windows of 2 lines from line 1, the last open-ended
    assert [lines for _, _, lines, _ in long] == [(1 + 2 * j, 3 + 2 * j) for j in range(n - 1)] + [(2 * n - 1, None)]
    # the glob's two files are read one after the other (file index 0, then 1)
    glob = [r for k, r, _, _ in plan if k == len(sources) - 1]
    assert glob == sorted(glob) and set(glob) == {0, 1}
    # a zip member's size, a gzip stream's from its trailer: one chunk each at 100,000 lines
    assert [lines for k, _, lines, _ in chunk_plan(sources, "fr", root) if k in (1, 2)] == [(1, None), (1, None)]


def test_text_bytes_of_gzip_and_zip_members(tmp_path):
    from pivot.pipeline.corpus import _text_bytes, _zip_text_bytes
    text = ("x" * 99 + "\n").encode() * 1000
    gz = tmp_path / "a.tsv.gz"
    gz.write_bytes(gzip.compress(text))
    assert gz.stat().st_size < len(text) == _text_bytes(gz) == 100_000
    with zipfile.ZipFile(tmp_path / "a.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("fra.txt", text)
    assert _zip_text_bytes(tmp_path / "a.zip", "fra.txt") == _zip_text_bytes(tmp_path / "a.zip", None) == 100_000


@pytest.mark.parametrize("k", range(len(SOURCES) + 2))
def test_line_windows_partition_the_rows_and_counts(tmp_path, k):
    """Windows [1, 3), [3, 5), ... of a file give its rows once each, in order, and counts that
    add up to the whole read's; a window past the end gives nothing."""
    root, sources = root_with_more(tmp_path)
    readers, _, _, stats = _plan(sources, "fr", root)
    fresh = lambda: {key: 0 for key in stats[k]}  # noqa: E731
    for reader in readers[k]:
        whole_stats = fresh()
        whole = list(reader(whole_stats))
        rows, summed = [], fresh()
        for first in range(1, 40, 2):
            st = fresh()
            rows += list(reader(st, (first, first + 2)))
            summed = {key: summed[key] + st[key] for key in summed}
        assert rows == whole and summed == whole_stats and whole_stats["read"] > 0
        st = fresh()
        assert list(reader(st, (1000, None))) == [] and not any(st.values())


def test_windows_of_each_reader_by_line_number(tmp_path):
    root, _ = root_with_more(tmp_path)
    en, fr = root / "bio" / "long.en", root / "bio" / "long.fr"
    # lines 4-7 of the long file: 4 and 5 are pairs, 6 a header, 7 a pair
    st = {"read": 0, "blank": 0, "header": 0}
    assert [n for n, _, _ in read_parallel(en, fr, stats=st, lines=(4, 8))] == [4, 5, 7]
    assert st == {"read": 4, "blank": 0, "header": 1}
    assert [n for n, _, _ in read_tsv_zip(root / "tat.zip", lines=(2, None))] == [2]
    assert [n for n, _, _ in read_tsv_gz(root / "sent" / "eng-fra.tsv.gz", lines=(2, 4))] == [2, 3]


def test_a_chunk_on_disk_is_its_json_written_last(tmp_path):
    root, sources = root_with_more(tmp_path)
    stem = tmp_path / "c"
    normalise_chunk(sources, "fr", root, 0, 0, (1, None), str(stem), max_tokens=12)
    chunk = json.loads((tmp_path / "c.json").read_text())
    kept = (tmp_path / "c.en").read_text().splitlines()
    assert chunk["source"] == 0 and chunk["pairs"] == len(kept) == 7
    assert chunk["stats"]["read"] == len(EN) and chunk["stats"]["too_long"] == 1
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("c.")) == ["c.digest.npy", "c.en", "c.f", "c.json"]


def test_a_chunk_hashes_each_pair_as_write_bitext_would(tmp_path):
    """The 8-byte blake2b digest of "english<TAB>foreign" (write_bitext's deduplication key)
    and, for a resample, hash64 of the same text (sample_keeper's); neither when not asked for."""
    import hashlib

    import numpy as np

    from pivot.hashes import hash64
    root, sources = root_with_more(tmp_path)
    normalise_chunk(sources, "fr", root, 0, 0, (1, None), str(tmp_path / "c"), max_tokens=12,
                    sample_fraction=0.5, sample_seed=7)
    pairs = list(zip((tmp_path / "c.en").read_text().splitlines(), (tmp_path / "c.f").read_text().splitlines()))
    digest, sample = np.load(tmp_path / "c.digest.npy"), np.load(tmp_path / "c.sample.npy")
    assert len(pairs) == 7 and pairs[0] == ("the cell divides .", "la cellule se divise .")
    want = [hashlib.blake2b(f"{en}\t{f}".encode(), digest_size=8).digest() for en, f in pairs]
    assert [k.tobytes() for k in digest] == want
    assert sample.tolist() == [hash64(f"{en}\t{f}", 7) for en, f in pairs]
    normalise_chunk(sources, "fr", root, 0, 0, (1, None), str(tmp_path / "d"), max_tokens=12, dedup=False)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("d.")) == ["d.en", "d.f", "d.json"]


def test_the_stage_on_a_cluster_writes_write_bitexts_folder_and_resumes_after_finished_chunks(tmp_path):
    """run_stage on two real Dask workers (chunk tasks, then the join) writes the folder
    write_bitext writes; run again in a folder holding a finished chunk (its json on disk), it
    reads that chunk as it stands and reruns only the others."""
    from pathlib import Path

    from pivot.pipeline import corpus
    from pivot.pipeline.engine import Engine
    from pivot.pipeline.stage import Context, Params

    root, sources = root_with_more(tmp_path)
    preprocess = {"max_tokens": 12, "max_ratio": 9.0, "dedup": True}
    write_bitext(sources, "fr", root, tmp_path / "one", quiet=True, **preprocess)
    params = Params("corpus.fr", {"lang": "fr", "sources": sources, "preprocess": preprocess})

    def run(engine, out: Path):
        out.mkdir(exist_ok=True)
        context = Context(corpus.STAGE, "corpus.fr", params, out, engine, root, tmp_path / "r.toml", lang="fr")
        engine.run(corpus.run_stage(context))

    with Engine(workers=2) as engine:
        run(engine, tmp_path / "cluster")
        assert folder_bytes(tmp_path / "cluster") == folder_bytes(tmp_path / "one")
        # an interrupted run left the long file's chunk finished, its pairs since edited by hand
        resumed = tmp_path / "resumed"
        (resumed / ".chunks").mkdir(parents=True)
        k, r, lines, _ = corpus.chunk_plan(sources, "fr", root)[0]
        stem = resumed / ".chunks" / f"chunk-{k:05d}-{r:05d}-{lines[0]:012d}"
        normalise_chunk(sources, "fr", root, k, r, lines, str(stem), **preprocess)
        text = Path(f"{stem}.en").read_text()
        Path(f"{stem}.en").write_text(text.replace("the cell divides .", "the cell splits ."))
        run(engine, resumed)
    assert not (resumed / ".chunks").exists()
    got, want = (tmp_path / "resumed" / "bitext.en").read_text(), (tmp_path / "one" / "bitext.en").read_text()
    assert got != want and got == want.replace("the cell divides .", "the cell splits .")
    assert (tmp_path / "resumed" / "bitext.fr").read_bytes() == (tmp_path / "one" / "bitext.fr").read_bytes()


def test_chunk_plan_cuts_a_large_file_into_at_most_max_file_chunks(tmp_path):
    """A file estimated at 1,000 lines, in chunks of 10: 8 windows of ceil(1000 / 8) = 125 lines
    (each chunk reads its file from the start: their number is capped, their length grows)."""
    from pivot.pipeline.corpus import MAX_FILE_CHUNKS
    write_text(tmp_path / "big.en", ["x" * 63] * 1000)         # 64,000 bytes: 1,000 lines at 64 B
    write_text(tmp_path / "big.fr", ["y"] * 1000)
    source = [{"name": "big", "format": "parallel", "en": "big.en", "f": "big.fr"}]
    plan = chunk_plan(source, "fr", tmp_path, chunk_lines=10)
    assert MAX_FILE_CHUNKS == 8
    assert [lines for _, _, lines, _ in plan] == [(1 + 125 * j, 126 + 125 * j) for j in range(7)] + [(876, None)]
    assert [lines for _, _, lines, _ in chunk_plan(source, "fr", tmp_path, chunk_lines=500)] == [(1, 501), (501, None)]

