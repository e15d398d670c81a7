"""The lhs stage alone, as the build's process runs it: pivot.pipeline.lhs.build with run_stage's
arguments on a finished work folder's pivot, translation, encode and tagger stages (only read),
writing into OUT, its tasks on a local Dask engine of 2 workers (as a build's). Measured in this
process, the build's process of the stage (bench/measure_roles.py cannot tell lhs from ppdb2 and
combine, which run beside it there): its peak RSS while build() runs (VmHWM, reset to the RSS
just before through /proc/self/clear_refs) above its RSS before; with --trace, tracemalloc's
peak (Python's and NumPy's allocations, not mapped pages) over the same span. Then the outputs'
sha256 and content key (pivot.pipeline.run.content_key) against the work folder's lhs DONE.

    PYTHONPATH=TREE python bench/bench_lhs_memory.py TREE WORK OUT [--trace] [--json PATH]

TREE is the checkout whose pivot package this process and the workers import. A tree from before session 15's change
(whose build takes the words as a list) gets them as its run_stage gave them, a Vocab loaded
inside the measured span (bench/results/lhs-memory-*-session15.json)."""
import gc
import hashlib
import json
import sys
import time
from pathlib import Path


def one(work: Path, glob: str) -> Path:
    [d] = sorted(work.glob(glob))
    return d


def status(key: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def main():
    # a spawned Dask worker runs this file again as __mp_main__: only the parent measures
    tree, work, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    trace = "--trace" in sys.argv
    sys.path.insert(0, tree)
    from pivot.pipeline import lhs, pivoting, translation
    from pivot.pipeline.engine import Engine
    from pivot.pipeline.run import content_key

    assert lhs.__file__.startswith(tree), lhs.__file__
    out.mkdir(parents=True, exist_ok=False)
    translation_dir, pivot_dir, encode_dir, tagger_dir = (one(work, g) for g in ("translation-*", "pivot-*", "encode-*", "tagger-*"))
    engine = Engine(workers=2)
    engine.client()                      # the cluster up before the measure
    kw = {"part_paths": pivoting.part_paths(pivot_dir), "tagger_dir": tagger_dir, "engine": engine,
          "e_rows": lambda ids: translation.english_rows(translation_dir, ids)[0]}
    main_code = "e_tokens: list[str]" in Path(lhs.__file__).read_text()
    gc.collect()
    if trace:
        import tracemalloc
        tracemalloc.start()
    rss0 = status("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")      # VmHWM := VmRSS
    t0, c0 = time.perf_counter(), time.process_time()
    if main_code:      # run_stage before session 15's change: the vocabulary as a Vocab, its tokens passed
        from pivot.pipeline.corpus import Vocab
        kw["e_tokens"] = Vocab.load(encode_dir / "vocab.en").tokens
    else:              # run_stage now: the file itself
        kw["e_tokens"] = encode_dir / "vocab.en"
    meta = lhs.build(out, **kw)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    hwm = status("VmHWM")
    res = {"tree": tree, "work": str(work), "out": str(out), "n_phrases": meta["n_phrases"],
           "rss_before_gib": round(rss0 / 2**30, 4), "peak_rss_gib": round(hwm / 2**30, 4),
           "peak_rss_above_before_mib": round((hwm - rss0) / 2**20, 1),
           "wall_s": round(wall, 1), "build_process_cpu_s": round(cpu, 1)}
    if trace:
        res["tracemalloc_peak_mib"] = round(tracemalloc.get_traced_memory()[1] / 2**20, 2)
        tracemalloc.stop()
    res["sha256"] = {n: hashlib.sha256((out / n).read_bytes()).hexdigest() for n in ("lhs.arrays", "lhs.json")}
    res["content_key"] = content_key(out)
    res["content_key_of_work_lhs"] = json.loads((one(work, "lhs-*") / "DONE").read_text())["content"]
    res["same_as_work_lhs"] = res["content_key"] == res["content_key_of_work_lhs"]
    engine.close()
    print(json.dumps(res, indent=1))
    if "--json" in sys.argv:
        Path(sys.argv[sys.argv.index("--json") + 1]).write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
