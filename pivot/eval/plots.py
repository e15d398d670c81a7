"""Precision-recall figures like the paper's Figures 1 and 2 (PNG, matplotlib Agg backend).

Each figure has two panels side by side: the biology gold set and the general-domain control
(the paper's Figure 2(a) and 2(b)). Curves are step plots (``drawstyle="steps-post"``) of the
points `pivot.eval.evaluate.pr_curve` returns, drawn from full recall back to recall 0, so the area
under each drawn step curve is exactly the AP in its legend label.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display: must precede the pyplot import
import matplotlib.pyplot as plt  # noqa: E402

from pivot import outputs  # noqa: E402

#: figure size in inches and resolution: the PNG is 1000 × 450 pixels.
FIGSIZE = (10.0, 4.5)
DPI = 100


def figure_models(names, kind: str, baseline: str = "general") -> list[str]:
    """The models of one paper figure, baseline first.

    kind "subsampled" (Figure 1): the baseline and every `ml-*` model;
    kind "combined" (Figure 2): the baseline and every `general+*` combination.
    """
    prefix = {"subsampled": "ml-", "combined": "general+"}.get(kind)
    if prefix is None:
        raise ValueError(f"figure kind must be 'subsampled' or 'combined' (got {kind!r})")
    return [baseline] + [n for n in names if n.startswith(prefix) and n != baseline]


def _step_points(precision, recall):
    """(x, y) for steps-post: recall descending, ending at (0, precision of the top threshold).

    With steps-post the value y_i holds from x_i to x_{i+1}; going down in recall, precision
    P_k therefore covers (R_{k-1}, R_k], which is the AP sum Σ (R_k − R_{k−1}) P_k.
    """
    x = list(recall[::-1]) + [0.0]
    y = list(precision[::-1]) + [precision[0]]
    return x, y


def pr_panel(ax, curves: dict, models, title: str, *, title_size: int, legend_loc: str,
             chance: float | None = None) -> None:
    """One PR panel: the step curve of every model in ``models`` that ``curves`` (name -> a
    result with precision, recall, ap) holds with an AP, then the chance line if given."""
    for m in models:
        r = curves.get(m)
        if r is None or r.ap is None:
            continue
        x, y = _step_points(r.precision, r.recall)
        ax.plot(x, y, drawstyle="steps-post", linewidth=1.4, label=f"{m} (AP×100 {100 * r.ap:.1f})")
    if chance is not None:
        ax.axhline(chance, color="grey", linewidth=0.8, linestyle=":", label="chance")
    ax.set_title(title, fontsize=title_size)
    ax.set_xlabel("recall")
    ax.set_ylabel("precision")
    ax.set_xlim(0, 1.02)
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc=legend_loc)


def plot_pr(results: dict, path, title: str, models) -> Path:
    """One PNG with a PR panel per gold set in `results` (name -> EvalResult), side by side.

    models: names to draw, in legend order; a model missing from a gold set, or proposing
    none of its candidates, is left out of that panel.
    """
    path = Path(path)
    if not results:
        raise ValueError("no evaluation results to plot")
    fig, axes = plt.subplots(1, len(results), figsize=FIGSIZE, dpi=DPI, squeeze=False)
    for ax, (gold_name, res) in zip(axes[0], results.items()):
        pr_panel(ax, res.models, models, f"{gold_name} (n={res.n_candidates}, {res.n_positive} positive)",
                 title_size=10, legend_loc="lower left")
    fig.suptitle(title)
    # Fixed canvas (no bbox_inches="tight"), so every figure has the same pixel size.
    fig.tight_layout()
    try:
        with outputs.replacing(path) as tmp:   # renamed when the command succeeds (pivot/outputs.py)
            fig.savefig(tmp, dpi=DPI, format="png")
    finally:
        plt.close(fig)
    return path


def plot_paper_figures(results: dict, out_dir, stem: str = "pr") -> dict[str, Path]:
    """Figure 1 (subsampled models vs General) and Figure 2 (General+X), as `{stem}-*.png`.

    results: gold-set name -> EvalResult, typically the biology gold and the general control.
    Returns {"subsampled": path, "combined": path} for the figures that have models to draw.
    """
    out_dir = Path(out_dir)
    names = list(dict.fromkeys(m for res in results.values() for m in res.models))
    baseline = next(iter(results.values())).baseline
    titles = {"subsampled": "Subsampled models vs General (cf. paper Figure 1)",
              "combined": "General + domain model combinations (cf. paper Figure 2)"}
    paths = {}
    for kind, title in titles.items():
        models = figure_models(names, kind, baseline)
        if len(models) > 1:
            paths[kind] = plot_pr(results, out_dir / f"{stem}-{kind}.png", title, models)
    return paths
