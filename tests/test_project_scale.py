"""bench/project_scale.py's arithmetic on tiny hand-made inputs (every expected value worked out
by hand in the comments)."""
import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

from pivot.pipeline.bundle import save_bundle

_PATH = Path(__file__).resolve().parent.parent / "bench" / "project_scale.py"
_spec = importlib.util.spec_from_file_location("project_scale", _PATH)
ps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ps)


def build(workers, cpu, threads=None, **more):
    return {"workers": workers, "threads": threads, "cpu_s_by_stage": cpu, **more}


def test_stage_keys_fold_into_their_family():
    assert ps.stage_of("align.fr") == "align"
    assert ps.stage_of("after align.de") == "align"
    assert ps.stage_of("after combine") == "combine"
    assert ps.stage_of("between") is None
    # CPU seconds add up; peaks take the largest
    assert ps.by_family({"align.de": 3.0, "after align.de": 1.5, "encode": 2.0, "between": 9.0}) == \
        {"align": 4.5, "encode": 2.0}
    assert ps.by_family({"lm": 0.2, "after lm": 0.5}, max) == {"lm": 0.5}


def test_copies_curves_mean_at_1x_and_the_clipped_slope():
    builds = [
        # weights: 1x 2 and 8, 4x 16. On log axes x = 0, 0, ln 4; y = ln 2, ln 8, ln 16 = 1, 3, 4 (x ln 2):
        # slope = sum (x - mx)(y - my) / sum (x - mx)^2 = (12 ln4 ln2 / 9) / (6 ln4^2 / 9) = 2 ln2 / ln4 = 1
        (1, build(1, {"weights": 2.0, "lm": 10.0, "score": 8.0, "tagger": 3.0})),
        (1, build(1, {"weights": 8.0, "lm": 10.0, "score": 8.0, "tagger": 5.0})),
        # lm: 10 -> 80 at 4x is 4^1.5: clipped to 1; score: 8 -> 4 is 4^-0.5: clipped to 0
        (4, build(1, {"weights": 16.0, "lm": 80.0, "score": 4.0})),
    ]
    at1, b = ps.copies_curves(builds)
    assert at1 == {"weights": 5.0, "lm": 10.0, "score": 8.0, "tagger": 4.0}
    assert b["weights"] == pytest.approx(1.0, abs=1e-12)
    assert b["lm"] == 1.0 and b["score"] == 0.0
    assert "tagger" not in b          # measured at one size only: no slope


def test_one_worker_builds_take_the_default_threads_only(tmp_path):
    a, c = tmp_path / "a.json", tmp_path / "c.json"
    a.write_text(json.dumps({"scale": 1, "builds": [build(2, {"pivot": 1.0}), build(1, {"pivot": 2.0}),
                                                    build(1, {"pivot": 9.0}, threads=1)]}))
    c.write_text(json.dumps({"scale": 4, "builds": [build(1, {"pivot": 3.0})]}))
    got = ps.one_worker_builds([a, c])
    assert [(s, b["cpu_s_by_stage"]["pivot"]) for s, b in got] == [(1, 2.0), (4, 3.0)]
    with pytest.raises(SystemExit, match="no build at 1x"):
        ps.one_worker_builds([c])


def test_efficiency_is_one_worker_cpu_over_two_workers_wall():
    pair = {"builds": [
        build(2, {"extract": 40.0, "translation": 45.0, "pivot": 5.0, "align.fr": 9.0},
              stage_seconds={"extract": 20.0, "translation": 25.0, "pivot": 5.0, "align.fr": 99.0}),
        build(1, {"extract": 30.0, "translation": 40.0, "pivot": 10.0, "align.fr": 1.0}),
    ]}
    # efficiency (30 + 40 + 10) / (2 x (20 + 25 + 5)) = 80 / 100; utilisation (40 + 45 + 5) / 100
    assert ps.efficiency(pair) == (pytest.approx(0.8), pytest.approx(0.9))


def test_size_exponents_from_bio_to_bio_multi():
    sizes = {"bio": {"n_sentences": 100, "n_pairs": 1000, "n_stored_phrases": 100},
             "bio-multi": {"n_sentences": 400, "n_pairs": 16000, "n_stored_phrases": 200}}
    # 16x the pairs for 4x the sentences: ^2; 2x the phrases: ^0.5
    assert ps.size_exponents(sizes) == pytest.approx({"n_pairs": 2.0, "n_stored_phrases": 0.5})


def test_grow_applies_each_stage_law():
    cpu1 = {"align": 10.0, "translation": 2.0, "pivot": 3.0, "tagger": 5.0, "late-serial": 6.0}
    got = ps.grow(cpu1, {"align": 0.5}, {"n_pairs": 2.0}, 4.0, {"late-serial": 1.5})
    # align copies ^0.5: 10 x 2; translation linear: 2 x 4; pivot pairs ^2: 3 x 16; tagger constant;
    # late-serial measured ^1.5: 6 x 8; a stage not measured costs nothing
    assert got["align"] == pytest.approx(20.0)
    assert got["translation"] == pytest.approx(8.0)
    assert got["pivot"] == pytest.approx(48.0)
    assert got["tagger"] == 5.0
    assert got["late-serial"] == pytest.approx(48.0)
    assert got["encode"] == 0.0 and got["store"] == 0.0
    assert set(got) == set(ps.STAGES)


def test_late_split_adds_each_roles_cpu_of_the_late_stages_and_the_write():
    measured = {"cpu_s_by_stage_role": {
        "start|build": 9.0, "start|worker": 2.0,
        "ppdb2|build": 4.0, "ppdb2|worker": 1.5, "after lhs|build": 13.5, "after lhs|worker": 37.5,
        "combine|build": 1.0, "after ppdb2|python": 7.0,
        "store|build": 17.0, "store|worker": 67.0}}
    # late: build 4 + 13.5 + 1, workers 1.5 + 37.5; start and a tool ("python") are no one's
    assert ps.late_split(measured) == {"late-serial": 18.5, "late-tasks": 39.0, "store-serial": 17.0, "store": 67.0}


def test_a_write_rerun_replaces_the_store_keys_only():
    late = {"wall_s": 9.0, "cpu_s_by_stage_role": {"ppdb2|build": 4.0, "store|build": 17.0, "store|worker": 67.0},
            "peak_gib_by_stage_role": {"ppdb2|build": {"rss": 0.5}, "store|build": {"rss": 0.7}}}
    write = {"cpu_s_by_stage_role": {"start|build": 3.0, "store|build": 1.0, "store|worker": 70.0},
             "peak_gib_by_stage_role": {"store|build": {"rss": 0.4}, "store|worker": {"rss": 0.6}}}
    got = ps.with_write_of(late, write)
    # the late stages' keys kept, the write's store keys in, the write rerun's start ignored
    assert got["cpu_s_by_stage_role"] == {"ppdb2|build": 4.0, "store|build": 1.0, "store|worker": 70.0}
    assert got["peak_gib_by_stage_role"] == {"ppdb2|build": {"rss": 0.5}, "store|build": {"rss": 0.4},
                                             "store|worker": {"rss": 0.6}}
    assert got["wall_s"] == 9.0 and ps.late_split(got)["store-serial"] == 1.0


def test_measured_exponents_from_bio_to_bio_multi():
    sizes = {"bio": {"n_sentences": 100}, "bio-multi": {"n_sentences": 400}}
    # 8x for 4x the sentences: ^1.5; 2x: ^0.5; a split absent at bio has no exponent
    got = ps.measured_exponents({"store": 10.0, "late-serial": 3.0, "late-tasks": 0.0},
                                {"store": 80.0, "late-serial": 6.0, "late-tasks": 5.0}, sizes)
    assert got == pytest.approx({"store": 1.5, "late-serial": 0.5})


def test_wall_hours_follow_the_critical_path():
    cpu = dict.fromkeys(ps.STAGES, 0.0)
    cpu.update({"start": 3600, "corpus": 7200, "align": 36000, "lmtext": 3600, "score": 7200, "extract": 7200,
                "late-tasks": 7200, "late-serial": 3600, "tagger": 1800, "store": 3600, "store-serial": 1800})
    row = ps.wall_hours(cpu, nodes=2, cores=2, eff=0.5)
    # 4 slots at 0.5: a task stage's CPU / 2 (the corpus stage's too: its chunks are tasks).
    # start 3600 + corpus 3600 + max(align 18000, lmtext 3600 + score 3600) + extract 3600
    # + (late-tasks 3600 + late-serial 3600 + tagger 1800) + store-serial 1800 + store 1800 = 41400 s
    assert row["total_h"] == pytest.approx(41400 / 3600)
    # one core: start, lmtext, late-serial, tagger, store-serial = 3600 + 3600 + 3600 + 1800 + 1800
    assert row["one_core_h"] == pytest.approx(14400 / 3600)
    # spread: corpus 3600 + align 18000 + score 3600 + extract 3600 + late-tasks 3600 + store 1800
    assert row["spread_h"] == pytest.approx(34200 / 3600)
    # preflight cut into tasks: 3600 / 2 on the workers, not 3600 on one core
    moved = ps.wall_hours(cpu, nodes=2, cores=2, eff=0.5, as_tasks=("start",))
    assert moved["total_h"] == pytest.approx(39600 / 3600)
    assert moved["one_core_h"] == pytest.approx(10800 / 3600)
    assert moved["spread_h"] == pytest.approx(36000 / 3600)
    # the late tasks and the parts measured on the workers: divided by the utilisation (0.75), the
    # others by the efficiency: late-tasks 7200 / 3 = 2400, store 3600 / 3 = 1200 (3600, 1800 above)
    util = ps.wall_hours(cpu, nodes=2, cores=2, eff=0.5, util=0.75)
    assert util["total_h"] == pytest.approx((41400 - 1200 - 600) / 3600)
    assert util["spread_h"] == pytest.approx((34200 - 1200 - 600) / 3600)


def test_measure_sizes_counts_the_stored_phrases(tmp_path):
    for folder, name, data in (("encode-k", "shards.json", {"n_sentences": 7}),
                               ("translation-k", "translation.json", {"n_e": 6, "n_f": 5, "n_kept": 11}),
                               ("pivot-k", "paraphrases.json", {"parts": ["rows-0000.arrays", "rows-0001.arrays"],
                                                                "n_pairs": [2, 1]})):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / name).write_text(json.dumps(data))
    i32 = np.int32
    save_bundle(tmp_path / "pivot-k" / "rows-0000.arrays", e1=np.array([0, 0], i32), e2=np.array([2, 3], i32),
                pivots=np.array([[1, -1, -1], [1, 4, -1]], i32))
    save_bundle(tmp_path / "pivot-k" / "rows-0001.arrays", e1=np.array([3], i32), e2=np.array([0], i32),
                pivots=np.array([[4, -1, -1]], i32))
    # phrases 0, 2, 3 are stored (1, 4 and 5 are not); pivots 1 and 4
    assert ps.measure_sizes(tmp_path) == {"n_sentences": 7, "n_pairs": 3, "n_e": 6, "n_f": 5, "n_entries": 11,
                                          "n_stored_phrases": 3, "n_stored_foreign": 2}


def test_fit_line_and_fit_power_on_exact_points():
    assert ps.fit_line([1, 2, 4], [0.5, 0.75, 1.25]) == pytest.approx((0.25, 0.25))
    a, b = ps.fit_power([1, 2, 8], [3, 6, 24])
    assert (a, b) == (pytest.approx(3.0), pytest.approx(1.0))
    assert math.isfinite(a)


def test_single_tasks_of_the_late_batches_and_the_longest_at_the_target():
    """The log's ppdb2 batches of one task (the longer of a name seen twice; others and batches
    of several tasks left out); the longest at the target by each one's own growth: forms 2 -> 8 s
    over 4x the sentences is exponent 1, 2 x 100 = 200 s at 100x; vectors 3 -> 6 s is exponent
    1/2, 3 x 10 = 30 s; phrases is 5 tasks at bio-multi (not single)."""
    bio = "\n".join(["2026-11-27 01:44:11,674 pivot INFO   ppdb2-forms: 1 tasks in 2.0 s",
                     "2026-11-27 01:44:11,938 pivot INFO   ppdb2-vectors: 1 tasks in 3.0 s",
                     "2026-11-27 01:44:12,000 pivot INFO   ppdb2-vectors: 1 tasks in 1.0 s",
                     "2026-11-27 01:44:13,486 pivot INFO   ppdb2-labels: 8 tasks in 1.8 s",
                     "2026-11-27 01:44:13,591 pivot INFO   ppdb2-phrases: 1 tasks in 4.9 s",
                     "2026-11-27 01:44:13,600 pivot INFO   extract: 1 tasks in 9.0 s",
                     "2026-11-27 01:44:13,815 pivot INFO ppdb2: 4481299 pairs labelled in 6.2 s",
                     "2026-11-27 01:44:14,000 pivot INFO ppdb2: word vectors (15476 words, 50 dimensions) in 5.9 s: "
                     "2.8 CPU s in 8 tasks (counts 0.9, PPMI and SVD 1.1, phrase means 0.5, join 0.3)"])
    multi = "\n".join(["2026-11-27 01:44:11,674 pivot INFO   ppdb2-forms: 1 tasks in 8.0 s",
                       "2026-11-27 01:44:11,938 pivot INFO   ppdb2-vectors: 1 tasks in 6.0 s",
                       "2026-11-27 01:44:13,591 pivot INFO   ppdb2-phrases: 5 tasks in 9.9 s"])
    got_bio, got_multi = ps.single_tasks(bio), ps.single_tasks(multi)
    assert got_bio == {"ppdb2-forms": 2.0, "ppdb2-vectors": 3.0, "ppdb2-phrases": 4.9, "ppdb2-vectors-svd": 1.1,
                       "ppdb2-vectors-join": 0.3}
    assert got_multi == {"ppdb2-forms": 8.0, "ppdb2-vectors": 6.0}
    # since session 13 the means' tasks write the vectors in place: no join in the summary line
    now = ps.single_tasks("2026-11-27 04:52:40,758 pivot INFO ppdb2: word vectors (15476 words, 50 dimensions) in "
                          "20.1 s: 3.6 CPU s in 8 tasks (counts 0.9, PPMI and SVD 1.56, phrase means 1.04)")
    assert now == {"ppdb2-vectors-svd": 1.56}
    name, bio_s, b, at = ps.longest_single(got_bio, got_multi, 4.0, 100.0)
    assert (name, bio_s) == ("ppdb2-forms", 2.0) and b == pytest.approx(1.0) and at == pytest.approx(200.0)
    assert ps.longest_single({}, got_multi, 4.0, 100.0) == ("", 0.0, 0.0, 0.0)


def test_preflight_grows_by_its_bitext_read_alone():
    """start 3.2 s at 1x, of which bio's bitext read 0.4 s; bio-multi reads 2.0M lines in 4.0 s
    (2 us a line): 100M lines are 200 s, plus the 2.8 s that do not grow: 202.8 s."""
    bio = {"check_cpu_s": {"corpus": 0.4, "lmtext": 2.3}, "counts": {"bitext lines": 400_000}}
    multi = {"check_cpu_s": {"corpus": 4.0, "lmtext": 2.4}, "counts": {"bitext lines": 2_000_000}}
    assert ps.preflight_seconds(3.2, bio, multi, 100e6) == pytest.approx(202.8)
    assert ps.preflight_seconds(0.1, bio, multi, 0.0) == 0.0


def test_stage_reruns_replace_the_translation_and_pivot_peaks_only():
    late = {"cpu_s_by_stage_role": {"ppdb2|build": 4.0},
            "peak_gib_by_stage_role": {"ppdb2|build": {"rss": 0.5}, "pivot|build": {"rss": 0.9}}}
    rerun = {"measure_roles": {
        "cpu_s_by_stage_role": {"translation|worker": 50.0},
        "peak_gib_by_stage_role": {"start|build": {"rss": 0.2}, "translation|build": {"rss": 0.3},
                                   "after pivot|worker": {"rss": 0.4}}}}
    got = ps.with_stages_of(late, rerun)
    # the rerun's translation and pivot peaks in (its pivot peaks replace the old one), its start
    # and its CPU seconds left out
    assert got["peak_gib_by_stage_role"] == {"ppdb2|build": {"rss": 0.5}, "translation|build": {"rss": 0.3},
                                             "after pivot|worker": {"rss": 0.4}}
    assert got["cpu_s_by_stage_role"] == {"ppdb2|build": 4.0}


def test_memory_rows_of_translation_and_pivot_from_the_stage_reruns():
    sizes = {"bio": {"n_sentences": 100, "n_e": 1000, "n_f": 10, "n_entries": 10, "n_stored_phrases": 10,
                     "n_pairs": 10},
             "bio-multi": {"n_sentences": 400, "n_e": 5000, "n_f": 10, "n_entries": 10, "n_stored_phrases": 10,
                           "n_pairs": 10}}
    units = {"n_sentences": 1000, "n_e": 101000, "n_f": 10, "n_entries": 10, "n_stored_phrases": 10, "n_pairs": 10}
    one = {"peak_one_process_rss_gib_by_stage": {"translation": 2.0, "pivot": 3.0}}
    builds = [(1, {**one, "cpu_s_by_stage": {}})]
    roles = {"bio": {"translation|build": 0.25, "after translation|build": 0.3, "pivot|build": 0.2,
                     "translation|worker": 0.5, "pivot|worker": 0.75},
             "bio-multi": {"translation|build": 0.3125, "pivot|build": 0.25, "after pivot|build": 0.375,
                           "translation|worker": 0.5, "after pivot|worker": 1.25}}
    rows = ps.memory_rows(builds, [one], one, sizes, units, roles)
    # the build's process: constant, the largest of bio's and bio-multi's (the --workers 1 builds,
    # whose tasks ran in the build's process, are not its): translation max(0.3, 0.3125), pivot
    # max(0.2, 0.375)
    assert rows["translation"]["target_gib"] == 0.31 and rows["translation"]["bio_gib"] == 0.3
    assert rows["pivot"]["target_gib"] == 0.38 and rows["pivot"]["bio_multi_gib"] == 0.375
    # the tasks: 0.75 -> 1.25 GiB for n_e 1000 -> 5000: 0.5 / 4000 GiB an English phrase; at
    # n_e 101000: 0.75 + 0.5 / 4000 x 100000 = 13.25
    tasks = rows["translation, pivot (tasks)"]
    assert (tasks["bio_gib"], tasks["bio_multi_gib"]) == (0.75, 1.25)
    assert tasks["target_gib"] == pytest.approx(13.25)
    assert tasks["bytes_per_unit"] == pytest.approx(round(0.5 / 4000 * 2**30, 1))
    # Dask's state of a map's tasks: 2^30 / 96 bytes a task (1/96 GiB). translation's largest map
    # (the hash of 2P + 9 files): P = 8 at bio-multi's 400 sentence pairs (25 tasks), P = 20 at
    # 10^6 (49): 24 more tasks, 0.25 GiB over 0.3125. pivot: 8 ranges (9 with the index) at 10
    # entries, 20 (21) at 10^7: 12 more, 0.125 GiB over 0.375 (the cut's blocks, one at n_e 5000
    # and 101000, are fewer)
    assert ps.largest_map("translation", {"n_sentences": 400}) == 25
    assert ps.largest_map("translation", {"n_sentences": 1_000_000}) == 49
    assert ps.largest_map("pivot", {"n_entries": 10_000_000, "n_e": 101000}) == 21
    assert ps.largest_map("pivot", {"n_entries": 10, "n_e": 10 * 131_072 + 1}) == 11   # 11 blocks > 9
    grown = ps.memory_rows(builds, [one], one, sizes, {**units, "n_sentences": 1_000_000, "n_entries": 10_000_000},
                           roles, per_task=2**30 / 96)
    assert grown["translation"]["target_unit"] == 49 and grown["pivot"]["target_unit"] == 21
    assert grown["translation"]["target_gib"] == pytest.approx(0.5625, abs=0.005)
    assert grown["pivot"]["target_gib"] == pytest.approx(0.5, abs=0.005)
    # without the reruns the rows are not measured (and say so)
    bare = ps.memory_rows(builds, [one], one, sizes, units, {"bio": {}, "bio-multi": {}})
    assert bare["pivot"]["target_gib"] is None and bare["translation, pivot (tasks)"]["target_gib"] is None


def test_task_bytes_from_the_largest_map_over_the_first_start():
    # (160 - 60) MiB over 16,000 tasks: 100 x 2^20 / 16000 = 6553.6 bytes a task
    measured = {"500": {"base_mib": 60.0, "peak_mib": 70.0}, "16000": {"base_mib": 100.0, "peak_mib": 160.0}}
    assert ps.task_bytes(measured) == pytest.approx(6553.6)


_MEASURE = Path(__file__).resolve().parent.parent / "bench" / "_measure.py"
_mspec = importlib.util.spec_from_file_location("_measure", _MEASURE)
measure = importlib.util.module_from_spec(_mspec)
_mspec.loader.exec_module(measure)


def test_the_score_stages_join_is_charged_apart_from_its_tasks(tmp_path):
    """The log read as it grows: the score stage's samples go to "score" until its scoring batch
    is done, then to "score.join" until the stage is; another stage's batch changes nothing."""
    log = tmp_path / "build.log"
    log.write_text("")
    state = {}
    stamp = "2026-11-27 12:21:58,392 pivot INFO "
    seen = []
    for line in ("stage score        running -> /w/score-1", "  align.de-fwd-em1: 5 tasks in 4.1 s",
                 "  score: 3 tasks in 4.4 s", "  score-join: 1 tasks in 2.9 s", "stage score        done in 7.4 s",
                 "stage encode       running -> /w/encode-1", "  score: 3 tasks in 1.0 s"):
        with open(log, "a") as fh:
            fh.write(stamp + line + "\n")
        seen.append(measure._current_stage(log, state))
    assert seen == ["score", "score", "score.join", "score.join", "after score", "encode", "encode"]
    assert state["running"] == {"encode"}
    # its CPU seconds stay the stage's
    assert ps.stage_of("score.join") == "score"


def test_a_rerun_of_score_alone_replaces_the_score_peaks_only():
    late = {"cpu_s_by_stage_role": {}, "peak_gib_by_stage_role": {"weights|build": {"rss": 0.1},
                                                                 "score|worker": {"rss": 0.9}}}
    rerun = {"measure_roles": {"peak_gib_by_stage_role": {"score|worker": {"rss": 0.3},
                                                          "score.join|worker": {"rss": 0.4}}}}
    assert ps.with_stages_of(late, rerun)["peak_gib_by_stage_role"] == {
        "weights|build": {"rss": 0.1}, "score|worker": {"rss": 0.3}, "score.join|worker": {"rss": 0.4}}


def test_score_tasks_are_constant_and_its_join_grows_with_the_sentences():
    sizes = {"bio": {"n_sentences": 100, "n_e": 10, "n_f": 10, "n_entries": 10, "n_stored_phrases": 10,
                     "n_pairs": 10},
             "bio-multi": {"n_sentences": 400, "n_e": 10, "n_f": 10, "n_entries": 10, "n_stored_phrases": 10,
                           "n_pairs": 10}}
    units = {**sizes["bio"], "n_sentences": 1000}
    one = {"peak_one_process_rss_gib_by_stage": {"score": 2.0}}
    builds = [(1, {**one, "cpu_s_by_stage": {}})]
    roles = {"bio": {"score|worker": 0.5, "score.join|worker": 0.25},
             "bio-multi": {"score|worker": 1.5, "score.join|worker": 0.5, "after score|worker": 0.375}}
    rows = ps.memory_rows(builds, [one], one, sizes, units, roles)
    # the tasks: the largest of bio's 0.5 and bio-multi's 1.5 (the --workers 1 builds' 2.0 ran the
    # join and the LMs in one process: not a task's)
    assert rows["score's tasks"]["target_gib"] == 1.5
    # the join: 0.25 -> 0.5 GiB for 100 -> 400 sentences, 0.25 / 300 GiB a sentence; at 1000:
    # 0.25 + 0.25 / 300 x 900 = 1.0
    assert rows["score's join (a task)"]["target_gib"] == pytest.approx(1.0)
