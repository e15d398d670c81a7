"""Plot the Moore-Lewis score sigma = H_tgt - H_gen of the bitext's sentences by their source.

    python scripts/plot_sigma_by_origin.py WORK_DIR [--label matched] [WORK_DIR2 --label unmatched ...]
        [-o docs/figures/sigma-by-origin.png] [--json out.json]

Each WORK_DIR is a build's work directory (``pivot build --work``); its newest finished
``score-*`` artifact is read, with the ``encode-*`` artifact it was computed from (matched by
content key), which holds each sentence's source (origin). One panel per work directory: a
box per source (median, quartiles, 5-95% whiskers), sigma in bits per word; left of 0 is more
like the in-domain text (the change point). Printed (and written with --json): per source the
number of sentences, the median sigma and the share below 0.

Biomedical sources (WMT Medline, Scielo, EDP) should sit left of the conversational ones
(Tatoeba); with mismatched LMs every sentence is pushed by the difference in LM size and OOV
rate as well, which the matched protocol removes (pivot.pipeline.mono).
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np


def _done(folder: Path) -> dict:
    return json.loads((folder / "DONE").read_text())


def find_artifacts(work: Path) -> tuple[Path, Path]:
    """(score folder, encode folder) of the newest finished score artifact in a work dir."""
    scores = sorted((p for p in work.glob("score-*") if (p / "DONE").is_file()),
                    key=lambda p: (p / "DONE").stat().st_mtime)
    if not scores:
        sys.exit(f"{work}: no finished score-* artifact (build the recipe with a [domain] first)")
    score = scores[-1]
    want = _done(score)["inputs"]["encode"]
    for enc in work.glob("encode-*"):
        if (enc / "DONE").is_file() and _done(enc).get("content") == want:
            return score, enc
    sys.exit(f"{work}: no encode-* artifact with content key {want} (the score's input)")


def sigma_by_source(work: Path) -> dict[str, np.ndarray]:
    """{source name: sigma of its sentences}, sources in their first-appearance order."""
    score, enc = find_artifacts(work)
    sigma = np.load(score / "scores.npz")["sigma"]
    origin = np.load(enc / "origin.npy")
    names = [name for _, name in json.loads((enc / "shards.json").read_text(encoding="utf-8"))["origins"]]
    if len(origin) != len(sigma):
        sys.exit(f"{work}: {len(origin)} origins but {len(sigma)} scores")
    out = {}
    for i in dict.fromkeys(origin.tolist()):
        out.setdefault(names[i], []).append(sigma[origin == i])
    return {k: np.concatenate(v) for k, v in out.items()}


def summary(groups: dict[str, np.ndarray]) -> dict:
    return {name: {"n": int(len(s)), "median": round(float(np.median(s)), 4),
                   "share_below_0": round(float((s < 0).mean()), 4)} for name, s in groups.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("work", nargs="+", type=Path, help="build work directories (one panel each)")
    ap.add_argument("--label", action="append", default=[], help="panel title, one per work directory")
    ap.add_argument("-o", "--out", type=Path, default=Path("docs/figures/sigma-by-origin.png"))
    ap.add_argument("--json", type=Path, help="also write the per-source summary here")
    args = ap.parse_args()
    labels = args.label + [str(w) for w in args.work[len(args.label):]]

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(label, sigma_by_source(w)) for label, w in zip(labels, args.work)]
    names = list(dict.fromkeys(n for _, g in panels for n in g))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 0.45 * len(names) + 1.6),
                             sharey=True, squeeze=False)
    report = {}
    for ax, (label, groups) in zip(axes[0], panels):
        data = [groups.get(n, np.zeros(0)) for n in names]
        ax.boxplot(data, orientation="horizontal", whis=(5, 95), showfliers=False, widths=0.6)
        ax.axvline(0.0, color="grey", linestyle="--", linewidth=0.8)
        ax.set_yticks(range(1, len(names) + 1), [f"{n} ({len(d):,})" for n, d in zip(names, data)])
        ax.set_xlabel("sigma = H_tgt - H_gen (bits/word; < 0: in-domain-like)")
        ax.set_title(label)
        ax.invert_yaxis()
        report[label] = summary(groups)
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
