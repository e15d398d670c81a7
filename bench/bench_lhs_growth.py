"""Whether the lhs stage's build-process memory grows with the data: pivot.pipeline.lhs.build on
synthetic pivot parts (PAIRS pairs a part, e1 and e2 drawn uniformly from N_E phrase ids, seed
0) for growing N_E, the tasks run in this process (an Engine of 1 worker) but the labelling
replaced by a stand-in that labels every phrase [X] (label_task's work is a task's, not this
process's; its file is a block's codes), the rows given as zeros a block at a time. tracemalloc's
peak over build() (Python's and NumPy's allocations) is then the job's own and the stand-in's
one block: a bounded job shows the same peak at every N_E.

    PYTHONPATH=TREE python bench/bench_lhs_growth.py TREE SCRATCH [N_E ...] [--json PATH]

A tree from before session 15's change (whose build takes the words as a list) is run the same
way (bench/results/lhs-growth-session15.json: main 4ae684f against this code)."""
import json
import shutil
import sys
import tracemalloc
from pathlib import Path

import numpy as np

PAIRS = 500_000


def main():
    args = sys.argv[1:]
    json_path = None
    if "--json" in args:
        at = args.index("--json")
        json_path, args = Path(args[at + 1]), args[:at] + args[at + 2:]
    tree, scratch = args[0], Path(args[1])
    sizes = [int(n) for n in args[2:]] or [4_000_000, 16_000_000, 64_000_000]
    sys.path.insert(0, tree)
    from pivot.pipeline import lhs
    from pivot.pipeline.bundle import save_bundle

    assert lhs.__file__.startswith(tree), lhs.__file__

    def label_x(rows_path, a, b, words_path, tagger_path, out_path):
        save_bundle(out_path, code=np.zeros(b - a, np.uint16), names=np.array(["[X]"]))
        return {"reused": False, "n_phrases": b - a, "cpu_seconds": 0.0}

    lhs.label_task = label_x
    tagger = scratch / "tagger"
    tagger.mkdir(parents=True, exist_ok=True)
    (tagger / lhs.TAGGER_FILE).write_text(json.dumps({"version": lhs.labels.LEXICON_TAGGER_VERSION, "lexicon": {},
                                                      "suffixes": {}, "default": "NN", "rules": [], "info": {},
                                                      "files": {}}))
    out = []
    for n_e in sizes:
        rng = np.random.default_rng(0)
        folder = scratch / f"n{n_e}"
        shutil.rmtree(folder, ignore_errors=True)
        (folder / "stage").mkdir(parents=True)
        parts = []
        for j in range(max(1, n_e // PAIRS)):      # as many pairs as phrase ids: ~63% of the ids used
            parts.append(folder / f"rows-{j:04d}.arrays")
            save_bundle(parts[-1], e1=np.sort(rng.integers(0, n_e, PAIRS)).astype(np.int32),
                        e2=rng.integers(0, n_e, PAIRS).astype(np.int32))
        tracemalloc.start()
        meta = lhs.build(folder / "stage", part_paths=parts, e_rows=lambda ids: np.zeros((len(ids), 5), np.int32),
                         e_tokens=["x"], tagger_dir=tagger)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        row = {"n_e": n_e, "n_parts": len(parts), "n_stored": meta["n_phrases"], "tracemalloc_peak_mib": round(peak / 2**20, 1)}
        print(json.dumps(row), flush=True)
        out.append(row)
        shutil.rmtree(folder)
    if json_path is not None:
        json_path.write_text(json.dumps({"tree": tree, "rows": out}, indent=1) + "\n")


if __name__ == "__main__":
    main()
