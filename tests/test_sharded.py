"""The sharded count-merge-pivot flow against the in-memory reference (extract + pivot_paraphrases)."""
import numpy as np
import pytest

from pivot.pipeline import pivoting, translation
from pivot.pipeline.bundle import open_bundle
from pivot.atomic import save_npz
from pivot.pipeline.engine import Engine
from pivot.pipeline.extract import (_whole_pair_links, extract_phrase_pairs, extract_shard, partition_of,
                                    phrase_keys)


def random_bitext(rng, n, vocab_e=12, vocab_f=9, max_words=7):
    """n random sentence pairs with random links (a few unaligned words)."""
    e_tok, e_off, f_tok, f_off, le, lf, l_off = [], [0], [], [0], [], [], [0]
    for _ in range(n):
        ne, nf = rng.integers(1, max_words + 1, size=2)
        e_tok += rng.integers(0, vocab_e, ne).tolist()
        f_tok += rng.integers(0, vocab_f, nf).tolist()
        e_off.append(len(e_tok))
        f_off.append(len(f_tok))
        links = {(int(i), int(rng.integers(0, nf))) for i in range(ne) if rng.random() < 0.8}
        for i, j in sorted(links):
            le.append(i)
            lf.append(j)
        l_off.append(len(le))
    as32 = lambda x: np.array(x, dtype=np.int32)
    as64 = lambda x: np.array(x, dtype=np.int64)
    return as32(e_tok), as64(e_off), as32(f_tok), as64(f_off), as32(le), as32(lf), as64(l_off)


def write_shards(tmp, bitext, shard_sentences, whole=None):
    e_tok, e_off, f_tok, f_off, le, lf, l_off = bitext
    n = len(e_off) - 1
    shards = []
    for k, s0 in enumerate(range(0, n, shard_sentences)):
        s1 = min(n, s0 + shard_sentences)
        cut = lambda tok, off: (tok[off[s0]:off[s1]], off[s0:s1 + 1] - off[s0])
        et, eo = cut(e_tok, e_off)
        ft, fo = cut(f_tok, f_off)
        lk_e, lo = cut(le, l_off)
        lk_f, _ = cut(lf, l_off)
        path = tmp / f"shard-{k}.npz"
        w = np.zeros(s1 - s0, np.uint8) if whole is None else whole[s0:s1]
        save_npz(path, e_tokens=et, e_offsets=eo, f_tokens=ft, f_offsets=fo, link_e=lk_e, link_f=lk_f,
                        link_offsets=lo, whole=w)
        shards.append((path, s0))
    return shards


def sharded(tmp, bitext, weights, *, shard_sentences, n_parts, max_len=3, top_n=0, engine=None, whole=None,
            min_p_f_given_e=0.0, min_p_e_given_f=0.0, max_e_per_f=0, min_phrase_count=1):
    """The build's rounds 1-5 on a bitext; returns (structure, paraphrases, e-part paths)."""
    engine = engine or Engine(workers=1)
    tmp.mkdir(parents=True, exist_ok=True)
    np.save(tmp / "weights.npy", weights)
    shards = write_shards(tmp, bitext, shard_sentences, whole)
    x = [tmp / f"x-{i}.arrays" for i in range(len(shards))]
    engine.map(extract_shard, [(p, tmp / "weights.npy", s0, max_len, n_parts, out)
                               for (p, s0), out in zip(shards, x)], name="extract")
    e_paths = [tmp / f"e-{p}.arrays" for p in range(n_parts)]
    engine.map(translation.merge_by_e, [(x, p, n_parts, e_paths[p], min_phrase_count) for p in range(n_parts)],
               name="merge-e")
    f_paths = [tmp / f"f-{q}.arrays" for q in range(n_parts)]
    prune = dict(min_p_f_given_e=min_p_f_given_e, min_p_e_given_f=min_p_e_given_f, max_e_per_f=max_e_per_f,
                 min_phrase_count=min_phrase_count)
    for q in range(n_parts):
        translation.merge_by_f(e_paths, x, q, f_paths[q], **prune)
    translation.assemble(f_paths, tmp / "structure")
    s = pivoting.load_structure(tmp / "structure", mmap=False)
    ranges = pivoting.row_ranges(s["row_ptr"], s["col_ptr"], s["row_f"], 3)
    outs = [tmp / f"rows-{i}.arrays" for i in range(len(ranges))]
    engine.map(pivoting.pivot_rows, [(tmp / "structure", lo, hi, top_n, out) for (lo, hi), out in zip(ranges, outs)],
               name="pivot")
    para = {}
    for path in outs:
        with open_bundle(path) as z:
            for f in z.files:
                para.setdefault(f, []).append(z[f])
    para = {f: np.concatenate(v) for f, v in para.items()}
    return s, para, e_paths


def same(got, want):
    """Same pairs, same values up to the order of the sum over pivots: phrase ids (hence the
    order in which a row's terms are added) differ between the two flows, so the last bit may."""
    assert got.keys() == want.keys()
    for k in want:
        assert got[k] == pytest.approx(want[k], rel=1e-13, abs=0), k
    return True


def by_text(rows_e1, rows_e2, p):
    """{(e1 tokens, e2 tokens): p row} for comparing runs with different phrase ids."""
    strip = lambda r: tuple(int(t) for t in r if t >= 0)
    return {(strip(a), strip(b)): tuple(x) for a, b, x in zip(rows_e1, rows_e2, p.tolist())}


def reference(bitext, weights, max_len=3, **prune):
    table = extract_phrase_pairs(*bitext, weights, max_len=max_len)
    para = pivoting.pivot_paraphrases(table, **prune)
    return by_text(table.e_phrases[para.e1], table.e_phrases[para.e2], para.p)


def sharded_by_text(s, para, e_paths):
    rows, _ = translation.phrase_rows(e_paths, np.asarray(s["e_key"]))
    return by_text(rows[para["e1"]], rows[para["e2"]], para["p"])


@pytest.mark.parametrize("shard_sentences,n_parts", [(1000, 1), (7, 3), (1, 5)])
def test_sharded_equals_in_memory_reference(tmp_path, shard_sentences, n_parts):
    """Integer weights make every count exact: the sharded flow must give the reference's pairs
    and values, whatever the shard size and the number of partitions."""
    rng = np.random.default_rng(3)
    bitext = random_bitext(rng, 60)
    weights = np.column_stack([np.ones(60), rng.integers(0, 4, 60)]).astype(np.float64)
    want = reference(bitext, weights, max_e_per_f=0, min_p_e_given_f=0, min_p_f_given_e=0, top_n=0)
    s, para, e_paths = sharded(tmp_path, bitext, weights, shard_sentences=shard_sentences, n_parts=n_parts)
    got = sharded_by_text(s, para, e_paths)
    assert len(want) > 100
    assert same(got, want)


def test_floors_match_reference(tmp_path):
    """Rule (a) on support probabilities: the same surviving pairs and values as the reference."""
    rng = np.random.default_rng(5)
    bitext = random_bitext(rng, 80)
    weights = np.column_stack([np.ones(80), rng.integers(1, 3, 80)]).astype(np.float64)
    floors = dict(min_p_f_given_e=0.05, min_p_e_given_f=0.05)
    want = reference(bitext, weights, max_e_per_f=0, top_n=0, **floors)
    s, para, e_paths = sharded(tmp_path, bitext, weights, shard_sentences=9, n_parts=4, **floors)
    assert same(sharded_by_text(s, para, e_paths), want)


def test_per_model_pruning_matches_reference(tmp_path):
    """Floors and the minimum count decided per model (a 0/1 subsample and a real-valued model
    with zeros beside General): the same pairs as the in-memory reference, every column."""
    rng = np.random.default_rng(9)
    bitext = random_bitext(rng, 90)
    sub = (rng.random(90) < 0.4).astype(np.float64)
    real = np.where(rng.random(90) < 0.3, 0.0, rng.integers(1, 5, 90) / 4)  # quarters: exact sums
    weights = np.column_stack([np.ones(90), sub, real])
    prune = dict(min_p_f_given_e=0.05, min_p_e_given_f=0.05, min_phrase_count=2, max_e_per_f=0)
    want = reference(bitext, weights, top_n=0, **prune)
    s, para, e_paths = sharded(tmp_path, bitext, weights, shard_sentences=13, n_parts=3, **prune)
    got = sharded_by_text(s, para, e_paths)
    assert same(got, want)
    p = np.array(list(want.values()))
    # Each domain model has pairs General does not have, and the reverse.
    assert ((p[:, 1] > 0) & (p[:, 0] == 0)).any() and ((p[:, 2] > 0) & (p[:, 0] == 0)).any()
    assert ((p[:, 0] > 0) & (p[:, 1] == 0)).any()


def test_a_domain_model_keeps_what_generals_cap_drops(tmp_path):
    """f0 is aligned to e0 and e1 five times each (General) and to e2 and e3 twice each, in the
    sentences the domain model (column 1) weighs 1. With max_e_per_f = 2 and min_phrase_count = 2:
    General keeps e0 and e1: P0(e1|e0) = p0(e1|f0) p0(f0|e0) = 5/14 * 1 (normalised over the
    full column, 14 instances); the domain model keeps e2 and e3 on its own counts:
    P1(e3|e2) = 2/4 * 1. Pruned on General's counts (the old rule) e2, e3 had nothing."""
    e = [0] * 5 + [1] * 5 + [2] * 2 + [3] * 2
    n = len(e)
    bitext = (np.array(e, np.int32), np.arange(n + 1), np.zeros(n, np.int32), np.arange(n + 1),
              np.zeros(n, np.int32), np.zeros(n, np.int32), np.arange(n + 1))
    domain = np.array([0.0] * 10 + [1.0] * 4)
    # Column 2 sees each of e2 and e3 once: under the minimum count of 2 it has nothing.
    once = np.array([0.0] * 10 + [1.0, 0.0, 1.0, 0.0])
    weights = np.column_stack([np.ones(n), domain, once])
    s, para, e_paths = sharded(tmp_path, bitext, weights, shard_sentences=4, n_parts=2, max_e_per_f=2,
                               min_phrase_count=2)
    got = sharded_by_text(s, para, e_paths)
    assert got == {((0,), (1,)): (5 / 14, 0.0, 0.0), ((1,), (0,)): (5 / 14, 0.0, 0.0),
                   ((2,), (3,)): (0.0, 0.5, 0.0), ((3,), (2,)): (0.0, 0.5, 0.0)}
    assert got == reference(bitext, weights, max_e_per_f=2, min_phrase_count=2, min_p_f_given_e=0,
                            min_p_e_given_f=0, top_n=0)


def test_bytes_do_not_depend_on_partitions_or_workers(tmp_path):
    """Real-valued weights: sums are grouped by shard, never by partition or worker."""
    rng = np.random.default_rng(7)
    bitext = random_bitext(rng, 50)
    weights = np.column_stack([np.ones(50), rng.random(50), rng.random(50) * 3])
    runs = []
    for k, n_parts in enumerate((1, 2, 6)):
        s, para, _ = sharded(tmp_path / f"run{k}", bitext, weights, shard_sentences=11, n_parts=n_parts,
                             max_e_per_f=4, min_p_f_given_e=0.01, min_phrase_count=2, top_n=5)
        runs.append((s, para))
    for s, para in runs[1:]:
        for name in ("row_ptr", "row_f", "p_fe", "col_ptr", "col_e", "p_ef", "e_key", "f_key"):
            assert np.asarray(s[name]).tobytes() == np.asarray(runs[0][0][name]).tobytes(), name
        for name in ("e1", "e2", "p", "n_pivots", "pivots"):
            assert para[name].tobytes() == runs[0][1][name].tobytes(), name


def test_hand_computed_pivot(tmp_path):
    """e0 -- f0 -- e1 with counts 3 and 1 (the pivoting module's doctest):
    p(e1|e0) = p(e1|f0) p(f0|e0) = 1/4 * 1 and p(e0|e1) = 3/4 * 1."""
    bitext = (np.array([0, 0, 0, 1], np.int32), np.array([0, 1, 2, 3, 4]),
              np.array([5, 5, 5, 5], np.int32), np.array([0, 1, 2, 3, 4]),
              np.zeros(4, np.int32), np.zeros(4, np.int32), np.array([0, 1, 2, 3, 4]))
    s, para, e_paths = sharded(tmp_path, bitext, np.ones((4, 1)), shard_sentences=2, n_parts=2)
    got = sharded_by_text(s, para, e_paths)
    assert got == {((0,), (1,)): (0.25,), ((1,), (0,)): (0.75,)}
    rows, counts = translation.phrase_rows(e_paths, np.asarray(s["e_key"]))
    assert sorted(zip(rows[:, 0].tolist(), counts.tolist())) == [(0, 3), (1, 1)]


def test_cap_keeps_largest_support(tmp_path):
    """Rule (b): f0 is aligned to e0 three times, e1 twice and e2 once; a cap of 2 drops e2,
    so e2 has no paraphrase and is nobody's."""
    e = [0, 0, 0, 1, 1, 2]
    bitext = (np.array(e, np.int32), np.arange(7), np.full(6, 9, np.int32), np.arange(7),
              np.zeros(6, np.int32), np.zeros(6, np.int32), np.arange(7))
    s, para, e_paths = sharded(tmp_path, bitext, np.ones((6, 1)), shard_sentences=4, n_parts=2, max_e_per_f=2)
    got = sharded_by_text(s, para, e_paths)
    # p(f0|e) = 1 for every e; p(e|f0) over the full column: 3/6, 2/6 (e2's 1/6 was cut)
    assert got == {((0,), (1,)): (2 / 6,), ((1,), (0,)): (3 / 6,)}


def test_min_phrase_count_before_ranking(tmp_path):
    """A phrase seen once neither gets nor is a paraphrase, and does not take a top-n place."""
    e = [0, 0, 1, 1, 2]
    bitext = (np.array(e, np.int32), np.arange(6), np.full(5, 9, np.int32), np.arange(6),
              np.zeros(5, np.int32), np.zeros(5, np.int32), np.arange(6))
    s, para, e_paths = sharded(tmp_path, bitext, np.ones((5, 1)), shard_sentences=5, n_parts=1,
                               min_phrase_count=2, top_n=1)
    got = sharded_by_text(s, para, e_paths)
    # p(e1|f0) is normalised over the full column, e2's count included: 2 / (2 + 2 + 1)
    assert got == {((0,), (1,)): (2 / 5,), ((1,), (0,)): (2 / 5,)}


def test_whole_pairs_are_their_own_phrase_pair():
    """A term pair links every word to every word: only the whole pair is consistent."""
    e_off, f_off = np.array([0, 2, 5]), np.array([0, 3, 4])
    link_e, link_f, link_off = np.array([0, 1], np.int32), np.array([0, 2], np.int32), np.array([0, 2, 2])
    le, lf, lo = _whole_pair_links(e_off, f_off, link_e, link_f, link_off, np.array([1, 0], np.uint8), 3)
    assert lo.tolist() == [0, 6, 6]
    assert list(zip(le.tolist(), lf.tolist())) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    table = extract_phrase_pairs(np.array([4, 5, 6, 7, 8], np.int32), e_off, np.array([1, 2, 3, 4], np.int32),
                                 f_off, le, lf, lo, np.ones((2, 1)), max_len=3)
    assert [(table.e_phrase(a), table.f_phrase(b)) for a, b in zip(table.e_id, table.f_id)] == [((4, 5), (1, 2, 3))]


def test_keys_and_partitions():
    rows = np.array([[1, 2, -1], [1, 2, 3], [2, 1, -1], [1, 2, -1]], np.int32)
    k = phrase_keys(rows)
    assert k.dtype == np.uint64 and k[0] == k[3] and len(set(k[:3].tolist())) == 3
    # a fixed value: keys must be the same on every machine and every run
    assert int(phrase_keys(np.array([[0, -1]], np.int32))[0]) == int(phrase_keys(np.array([[0, -1]], np.int32))[0])
    keys = np.array([0, 2**63, 2**64 - 1], dtype=np.uint64)
    assert partition_of(keys, 4).tolist() == [0, 2, 3]
    assert (np.diff(partition_of(np.sort(k), 7)) >= 0).all()


def test_key_collision_is_an_error():
    keys = np.array([5, 5], dtype=np.uint64)
    with pytest.raises(RuntimeError, match="collision"):
        translation._check_rows(keys, np.array([[1, -1], [2, -1]], np.int32), "English")


def test_tasks_are_idempotent(tmp_path):
    """A task whose output exists returns at once and leaves it untouched (a retried task)."""
    rng = np.random.default_rng(1)
    bitext = random_bitext(rng, 20)
    sharded(tmp_path, bitext, np.ones((20, 1)), shard_sentences=10, n_parts=2)
    before = {p.name: p.read_bytes() for p in tmp_path.glob("*.arrays")}
    out = extract_shard(tmp_path / "shard-0.npz", tmp_path / "weights.npy", 0, 3, 2, tmp_path / "x-0.arrays")
    assert out["reused"] is True
    assert {p.name: p.read_bytes() for p in tmp_path.glob("*.arrays")} == before
    assert not list(tmp_path.glob(".*tmp-*"))


def _extract_killing_its_worker(marker, *args):
    """extract_shard, but the first call to reach here kills its own worker process (SIGKILL),
    as a machine or the OOM killer would, halfway through the stage."""
    import os
    import signal

    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        return extract_shard(*args)
    os.close(fd)
    os.kill(os.getpid(), signal.SIGKILL)


def _run_on(engine, tmp, bitext, weights, kill=False):
    tmp.mkdir()
    np.save(tmp / "weights.npy", weights)
    shards = write_shards(tmp, bitext, 8)
    x = [tmp / f"x-{i}.arrays" for i in range(len(shards))]
    fn, extra = (_extract_killing_its_worker, (tmp / "killed",)) if kill else (extract_shard, ())
    engine.map(fn, [(*extra, p, tmp / "weights.npy", s0, 3, 3, out) for (p, s0), out in zip(shards, x)],
               name="extract")
    e_paths = [tmp / f"e-{p}.arrays" for p in range(3)]
    engine.map(translation.merge_by_e, [(x, p, 3, e_paths[p], 2) for p in range(3)], name="merge-e")
    return {p.name: p.read_bytes() for p in sorted(tmp.glob("[xe]-*.arrays"))}


def test_dask_workers_same_bytes_and_a_killed_worker_changes_nothing(tmp_path):
    rng = np.random.default_rng(11)
    bitext = random_bitext(rng, 64)
    weights = np.column_stack([np.ones(64), rng.random(64)])
    want = _run_on(Engine(workers=1), tmp_path / "one", bitext, weights)
    with Engine(workers=2) as engine:
        assert len(set(engine.worker_pids())) == 2
        assert _run_on(engine, tmp_path / "two", bitext, weights) == want
        before = set(engine.worker_pids())
        assert _run_on(engine, tmp_path / "killed", bitext, weights, kill=True) == want
        assert (tmp_path / "killed" / "killed").exists()  # a worker did die ...
        assert set(engine.worker_pids()) != before  # ... and was replaced


def test_workers_die_with_a_killed_build(tmp_path):
    """kill -9 of the process holding the cluster leaves no worker process behind."""
    import os
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "hold.py"
    script.write_text(
        "import sys, time\n"
        "from pivot.pipeline.engine import Engine\n"
        "if __name__ == '__main__':\n"
        "    e = Engine(workers=2)\n"
        "    print(' '.join(map(str, e.worker_pids())), flush=True)\n"
        "    time.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    pids = [int(p) for p in proc.stdout.readline().split()]
    assert len(pids) == 2
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 10
    alive = pids
    while alive and time.time() < deadline:
        time.sleep(0.2)
        alive = [p for p in pids if os.path.exists(f"/proc/{p}") and
                 open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"]
    assert alive == []


@pytest.mark.parametrize("top_n,floor", [(0, 0.0), (2, 0.0), (0, 0.05)])
def test_a_task_on_its_gathered_columns_gives_the_whole_structures_bytes(tmp_path, monkeypatch, top_n, floor):
    """pivot_rows runs the kernel on the task's rows and only the columns they reach, both
    renumbered (gather_rows): every range's file holds the same bytes as the kernel run on the
    whole structure over that range (ids, values, pivots, ranked ties), with windows of 7 rows
    so that the gather crosses many of them."""
    from pivot._native import _counts

    rng = np.random.default_rng(11)
    bitext = random_bitext(rng, 120)
    weights = np.column_stack([np.ones(120), rng.random(120), (rng.random(120) < 0.3) * 1.0])
    s, _, _ = sharded(tmp_path / "run", bitext, weights, shard_sentences=17, n_parts=3)
    monkeypatch.setattr(pivoting, "GATHER_WINDOW", 7)
    structure = tmp_path / "run" / "structure"
    # every memory map a task makes: at most a window of rows (and the page before its first)
    import mmap
    lengths = []

    class Recorded(mmap.mmap):
        def __new__(cls, fileno, length, *args, **kw):
            lengths.append(length)
            return super().__new__(cls, fileno, length, *args, **kw)

    monkeypatch.setattr(mmap, "mmap", Recorded)
    window_bytes = mmap.ALLOCATIONGRANULARITY + 7 * 3 * 8  # p_ef's rows: 3 models, 8 bytes each
    assert (structure / "p_ef.npy").stat().st_size > window_bytes
    ranges = pivoting.row_ranges(s["row_ptr"], s["col_ptr"], s["row_f"], 5)
    assert len(ranges) == 5
    n_pairs = 0
    for k, (lo, hi) in enumerate(ranges):
        want = _counts.pivot_product(s["row_ptr"], s["row_f"], s["p_fe"], s["col_ptr"], s["col_e"], s["p_ef"],
                                     top_n, 1, 0, lo, hi, floor)
        out = tmp_path / f"rows-{k}.arrays"
        lengths.clear()
        done = pivoting.pivot_rows(structure, lo, hi, top_n, out, 2, floor)
        assert done == {"reused": False, "n_pairs": len(want[0])}
        assert lengths and max(lengths) <= window_bytes  # never the whole p_ef mapped
        with open_bundle(out) as z:
            for name, a in zip(("e1", "e2", "p", "n_pivots", "pivots"), want):
                assert z[name].dtype == a.dtype and z[name].tobytes() == a.tobytes(), (k, name)
        n_pairs += len(want[0])
        # the gathered columns are the task's, far fewer than the structure's
        g = pivoting.gather_rows(structure, lo, hi)
        assert g["row_ptr"].tolist() == (s["row_ptr"][lo:hi + 1] - s["row_ptr"][lo]).tolist()   # the range's alone
        assert g["n_e"] == len(s["row_ptr"]) - 1
        assert len(g["f"]) == len(np.unique(s["row_f"][s["row_ptr"][lo]:s["row_ptr"][hi]]))
        assert len(g["p_ef"]) == sum(int(s["col_ptr"][f + 1] - s["col_ptr"][f]) for f in g["f"])
    assert n_pairs > 300


def test_npy_rows_maps_one_window_at_a_time(tmp_path, monkeypatch):
    """Rows 0, 1, 5, 6, 7, 20 of a (30, 2) array in windows of 4 rows: three mappings, of rows
    0..1, 5..7 and 20 (each from the page holding its first row), the rows read exactly."""
    from tests.test_bundle import recorded_maps

    a = np.arange(60, dtype=np.float64).reshape(30, 2)
    np.save(tmp_path / "a.npy", a)
    maps = recorded_maps(monkeypatch)
    idx = np.array([0, 1, 5, 6, 7, 20])
    got = pivoting.npy_rows(tmp_path / "a.npy", idx, window=4)
    assert got.tobytes() == a[idx].tobytes()
    header = 128  # numpy's .npy header for this array: data starts at byte 128
    assert maps == [(header + 2 * 16, 0), (header + 5 * 16 + 3 * 16, 0), (header + 20 * 16 + 16, 0)]
    assert pivoting.npy_slice(tmp_path / "a.npy", 5, 8).tobytes() == a[5:8].tobytes()
    with pytest.raises(ValueError, match="outside"):
        pivoting.npy_rows(tmp_path / "a.npy", np.array([3, 30]))


# ----------------------------------------------------------- round 4 and the cut, by counts only

#: A structure by hand (4 English rows, 3 foreign columns), rows:
#:     e0: f0 f1    e1: f1    e2: (none)    e3: f0 f2
#: so deg(f0) = 2 (e0, e3), deg(f1) = 2 (e0, e1), deg(f2) = 1 (e3), and w(e) + 1 =
#:     e0: 2 + 2 + 1 = 5    e1: 2 + 1 = 3    e2: 0 + 1 = 1    e3: 2 + 1 + 1 = 4,
#: running total C = 5, 8, 9, 13.
HAND_ROW_PTR = np.array([0, 2, 3, 3, 5], np.int64)
HAND_ROW_F = np.array([0, 1, 1, 0, 2], np.int32)
HAND_COL_PTR = np.array([0, 2, 4, 5], np.int64)


def _hand_structure(folder):
    folder.mkdir()
    np.save(folder / "row_ptr.npy", HAND_ROW_PTR)
    np.save(folder / "row_f.npy", HAND_ROW_F)
    np.save(folder / "col_ptr.npy", HAND_COL_PTR)
    return folder


class RecordingEngine(Engine):
    """Engine(workers=1) that records each map's name and argument tuples."""

    def __init__(self):
        super().__init__(workers=1)
        self.calls = []

    def map(self, fn, arg_tuples, *, name, **kw):
        arg_tuples = list(arg_tuples)
        self.calls.append((name, arg_tuples))
        return super().map(fn, arg_tuples, name=name, **kw)


def test_row_work_and_the_block_cut_by_hand(tmp_path):
    """w(e) + 1 = 5, 3, 1, 4 (the table above); blocks of 2 rows total 8 and 5. 3 ranges:
    t = 13/3 = 4.33 and 26/3 = 8.67, first reached at e0 (C = 5) and e2 (C = 9): the cuts
    0 and 2 give (0, 2), (2, 4); the second falls in block 1 (8 < 8.67 <= 13), where the
    block's own running total 8 + (1, 4) = 9, 13 puts it at its first row, 2. 4 ranges:
    t = 3.25, 6.5, 9.75 -> e0, e1, e3: (0, 1), (1, 3), (3, 4). The in-memory row_ranges
    gives the same."""
    folder = _hand_structure(tmp_path / "s")
    assert pivoting.row_work(folder, 0, 4).tolist() == [5, 3, 1, 4]
    assert pivoting.row_work(folder, 2, 3).tolist() == [1]      # an empty row
    # the running sums at each window's end: windows of 1 row in block 0..2, of 3 rows in 0..4
    # (rows 0..2, then row 3), of 1024 (the block) in 2..4
    assert pivoting.cut_block_totals(folder, 0, 2, 1).tolist() == [5, 8]
    assert pivoting.cut_block_totals(folder, 0, 4, 3).tolist() == [9, 13]
    assert pivoting.cut_block_totals(folder, 2, 4).tolist() == [5]
    assert pivoting.cut_in_block(folder, 2, 4, 8, [26 / 3]) == [2]
    assert pivoting.cut_in_block(folder, 2, 4, 8, [9.0, 9.5, 13.0]) == [2, 3, 3]
    for n_tasks, want in ((3, [(0, 2), (2, 4)]), (4, [(0, 1), (1, 3), (3, 4)]), (1, [(0, 4)])):
        assert pivoting.row_ranges(HAND_ROW_PTR, HAND_COL_PTR, HAND_ROW_F, n_tasks) == want
        engine = RecordingEngine()
        assert pivoting.row_ranges_by_blocks(folder, n_tasks, engine, block_rows=2) == want
        # the tasks: running sums per block, then a cut per block holding a target, reading the
        # windows that hold one (none for one range)
        totals, *cuts = engine.calls
        assert [a[1:3] for a in totals[1]] == [(0, 2), (2, 4)]
        assert [[[w[:3] for w in a[1]] for a in c[1]] for c in cuts] == \
            {3: [[[(0, 2, 0)], [(2, 4, 8)]]], 4: [[[(0, 2, 0)], [(2, 4, 8)]]], 1: []}[n_tasks]
        # windows of one row: the cut of t = 8.67 reads row 2 alone (C before it: 8)
        engine = RecordingEngine()
        assert pivoting.row_ranges_by_blocks(folder, n_tasks, engine, block_rows=2, window=1) == want
        if n_tasks == 3:
            assert [[w[:3] for w in a[1]] for a in engine.calls[1][1]] == [[(0, 1, 0)], [(2, 3, 8)]]
        for block_rows in (1, 3, 4, 100):
            for window in (1, 2, 3, 1024):
                assert pivoting.row_ranges_by_blocks(folder, n_tasks, Engine(workers=1), block_rows=block_rows,
                                                     window=window) == want


@pytest.mark.parametrize("n_parts", [1, 3])
def test_the_block_cut_is_row_ranges_on_a_built_structure(tmp_path, n_parts):
    """On a structure of the sharded flow, for every number of ranges and block size: the
    ranges of the tasks' block totals are row_ranges' over the whole arrays."""
    rng = np.random.default_rng(5)
    bitext = random_bitext(rng, 90)
    weights = np.column_stack([np.ones(90), rng.random(90)])
    s, _, _ = sharded(tmp_path / "run", bitext, weights, shard_sentences=13, n_parts=n_parts)
    n_e = len(s["row_ptr"]) - 1
    assert n_e > 50
    for n_tasks in (1, 2, 5, 17, n_e, 2 * n_e):
        want = pivoting.row_ranges(s["row_ptr"], s["col_ptr"], s["row_f"], n_tasks)
        for block_rows, window in ((1, 1), (7, 3), (64, 5), (64, 64), (n_e, 10), (10 * n_e, 1024)):
            got = pivoting.row_ranges_by_blocks(tmp_path / "run" / "structure", n_tasks, Engine(workers=1),
                                                block_rows=block_rows, window=window)
            assert got == want, (n_tasks, block_rows, window)


H = 1 << 63  # partition_of(key, 2) is the key's top bit: keys below H are partition 0


def _hand_foreign_partitions(tmp):
    """Two foreign partitions' round-3 bundles (one model). Kept entries (e key, f key, p_fe, p_ef):

        q0: f 10: (1, .1, .5) (H+1, .2, .25)    f 20: (2, .3, 1.)
        q1: f H+5: (1, .4, .75) (2, .5, .125)

    English keys 1, 2 are partition 0, H+1 partition 1; foreign keys 10, 20 partition 0, H+5
    partition 1. Only the members assemble reads are written (the others are merge_by_f's)."""
    u = lambda *x: np.array(x, np.uint64)
    d = lambda *x: np.array(x, np.float64).reshape(-1, 1)
    q0 = dict(e_key=u(1, H + 1, 2), f_key=u(10, 10, 20), p_ef=d(.5, .25, 1.),
              r0_e_key=u(1, 2), r0_f_key=u(10, 20), r0_p_fe=d(.1, .3),
              r1_e_key=u(H + 1), r1_f_key=u(10), r1_p_fe=d(.2),
              r_counts=np.array([2, 1], np.int64), e_kept=u(1, 2, H + 1), f_dict_key=u(10, 20),
              stats=np.array([3, 3, 3, 5, 3], np.int64))
    q1 = dict(e_key=u(1, 2), f_key=u(H + 5, H + 5), p_ef=d(.75, .125),
              r0_e_key=u(1, 2), r0_f_key=u(H + 5, H + 5), r0_p_fe=d(.4, .5),
              r1_e_key=u(), r1_f_key=u(), r1_p_fe=d(),
              r_counts=np.array([2, 0], np.int64), e_kept=u(1, 2), f_dict_key=u(H + 5),
              stats=np.array([2, 2, 2, 4, 2], np.int64))
    from pivot.pipeline.bundle import save_bundle
    paths = [tmp / "f-0.arrays", tmp / "f-1.arrays"]
    for path, members in zip(paths, (q0, q1)):
        save_bundle(path, **members)
    return paths


def test_assemble_by_hand_from_counts(tmp_path, monkeypatch):
    """Ids are key ranks: e 1, 2, H+1 -> 0, 1, 2; f 10, 20, H+5 -> 0, 1, 2. Offsets from the
    counts: columns of q0 at entry 0 and id 0, of q1 at entry 3 (q0's kept entries) and id 2
    (q0's foreign phrases); rows of p0 at entry 0 and id 0, of p1 at entry 2 + 2 = 4 (p0's
    entries in q0 and q1) and id 2 (p0's distinct English keys: 1, 2). So

        CSC  col_ptr 0 2 3 5   col_e 0 2 | 1 | 0 1         p_ef .5 .25 1. .75 .125
        CSR  row_ptr 0 2 4 5   row_f 0 2 | 1 2 | 0          p_fe .1 .4 .3 .5 .2

    and the build's process reads no member of the bundles but the counts (r_counts, stats):
    the keys and entries are read by the tasks."""
    from pivot.pipeline import bundle

    paths = _hand_foreign_partitions(tmp_path)
    read_here, in_task = [], []
    getitem = bundle.Bundle.__getitem__

    def recorded(self, name):
        if not in_task:
            read_here.append(name)
        return getitem(self, name)

    class Marking(RecordingEngine):
        def map(self, fn, arg_tuples, **kw):
            in_task.append(True)
            try:
                return super().map(fn, arg_tuples, **kw)
            finally:
                in_task.pop()

    monkeypatch.setattr(bundle.Bundle, "__getitem__", recorded)
    engine = Marking()
    out = tmp_path / "structure"
    assert translation.assemble(paths, out, engine) == {"n_e": 3, "n_f": 3, "n_kept": 5}
    assert set(read_here) == {"r_counts", "stats"}
    s = pivoting.load_structure(out, mmap=False)
    assert s["e_key"].dtype == np.uint64 and s["e_key"].tolist() == [1, 2, H + 1]
    assert s["f_key"].dtype == np.uint64 and s["f_key"].tolist() == [10, 20, H + 5]
    assert s["col_ptr"].tolist() == [0, 2, 3, 5] and s["col_e"].tolist() == [0, 2, 1, 0, 1]
    assert s["p_ef"].ravel().tolist() == [.5, .25, 1., .75, .125]
    assert s["row_ptr"].tolist() == [0, 2, 4, 5] and s["row_f"].tolist() == [0, 2, 1, 2, 0]
    assert s["p_fe"].ravel().tolist() == [.1, .4, .3, .5, .2]
    # the tasks and their offsets, as above
    calls = dict(engine.calls)
    assert [a[2] for a in calls["assemble-f-keys"]] == [0, 2]
    assert [a[1] for a in calls["assemble-e-count"]] == [0, 1]
    assert [a[3:] for a in calls["assemble-rows"]] == [(0, 0, 2), (4, 2, 3)]
    assert [a[2:] for a in calls["assemble-columns"]] == [(0, 0), (3, 2)]
    assert translation.count_english(paths, 0) == 2 and translation.count_english(paths, 1) == 1
    # the same bytes as np.save of the arrays (the files are created empty, then filled by range)
    for name in ("e_key", "f_key", "row_ptr", "p_fe"):
        np.save(tmp_path / "ref.npy", s[name])
        assert (out / f"{name}.npy").read_bytes() == (tmp_path / "ref.npy").read_bytes(), name
