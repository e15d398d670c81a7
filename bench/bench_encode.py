"""The encode stage's CPU in one process, split into its tasks' and the build process's own
(joining the chunks' vocabularies, cutting the shards, english.txt and origin.npy), on finished
work folders: the share bench/project_scale.py keeps on one core (``--encode-share``).

    python bench/bench_encode.py --work BIO_WORK BIO_MULTI_WORK --json bench/results/encode-share-session14.json

Each folder's corpus and align artifacts are encoded again (``--workers 1``: every task in this
process, timed by its own CPU clock) into a scratch folder, and every file is compared byte for
byte with the folder's own encode artifact.
"""
import argparse
import filecmp
import json
import shutil
import tempfile
import time
from pathlib import Path

from pivot.pipeline.encode import encode_job, read_shards
from pivot.pipeline.engine import Engine


def measure(work: Path) -> dict:
    ref = next(work.glob("encode-*"))
    artifact = lambda family: {p.name.split("-")[0].split(".")[1]: p for p in work.glob(f"{family}.*")}  # noqa: E731
    corpora, links = artifact("corpus"), artifact("align")
    info = read_shards(ref)
    langs = list(dict.fromkeys(sh["lang"] for sh in info["shards"]))
    in_tasks = [0.0]
    real = Engine.map

    def timed(self, *args, **kwargs):
        c0 = time.process_time()
        try:
            return real(self, *args, **kwargs)
        finally:
            in_tasks[0] += time.process_time() - c0

    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "encode"
        Engine.map = timed
        try:
            c0, t0 = time.process_time(), time.perf_counter()
            Engine(workers=1).run(encode_job([(lang, corpora[lang], links[lang]) for lang in langs], out,
                                             info["shard_sentences"], info["shard_tokens"]))
            cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        finally:
            Engine.map = real
        names = sorted(str(p.relative_to(ref)) for p in ref.rglob("*")
                       if p.is_file() and p.name not in ("DONE", "timings.json"))
        got = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
        same = names == got and all(filecmp.cmp(ref / n, out / n, shallow=False) for n in names)
    return {"work": str(work), "n_sentences": info["n_sentences"], "shards": len(info["shards"]),
            "cpu_s": round(cpu, 3), "tasks_cpu_s": round(in_tasks[0], 3),
            "build_share": round((cpu - in_tasks[0]) / cpu, 4), "wall_s": round(wall, 2),
            "files_identical": same}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, nargs="+", required=True, help="finished work folders")
    ap.add_argument("--json", type=Path, required=True)
    args = ap.parse_args()
    rows = [measure(w) for w in args.work]
    for row in rows:
        print(json.dumps(row))
    args.json.write_text(json.dumps({"runs": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
