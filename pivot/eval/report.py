"""Evaluation runs: gold files in, Table-3-style results, the paper's figures and a report out.

`pivot eval DB --gold FILE` evaluates one gold set; `pivot eval DB --domain bio --report F`
evaluates every set of the recipe's [eval] section (biology test part, general control) and
writes the Markdown report with the figures beside it.
"""
from __future__ import annotations

from pathlib import Path

from pivot.eval import evaluate
from pivot.eval import gold
from pivot.store.db import ParaphraseDB
from pivot.errors import InputError


def load_labelled(sources) -> tuple[list, list[str]]:
    """Gold pairs with 0/1 labels from [{path, format, threshold}], and a line per source."""
    pairs, described = [], []
    for src in sources:
        path = Path(src["path"])
        if not path.is_file():
            raise InputError("gold file not found", path)
        got = gold.binarize(gold.read_gold(path, src["format"]), src["threshold"])
        pairs += got
        described.append(f"{path.name} ({src['format']}, positive when score >= {src['threshold']}): "
                         f"{len(got)} pairs, {sum(p[2] for p in got)} positive")
    return pairs, described


def evaluate_gold_files(db, sources, *, name: str, exclude_tuning: bool = False, models=None,
                        n_boot: int = 1000, seed: int = 0):
    """Evaluate a database on one gold set pooled from `sources`.

    With exclude_tuning, the pairs that tuned the database's regression (its meta records
    them) are dropped first, which leaves the test part of a tuning gold set; without it,
    any overlap is refused by evaluate_db, naming the pairs.
    """
    db = db if isinstance(db, ParaphraseDB) else ParaphraseDB(db)
    pairs, described = load_labelled(sources)
    info = {"gold": "; ".join(described)}
    if exclude_tuning:
        tuning = {gold.pair_key(a, b) for a, b, *_ in evaluate._tuning_pairs(db)}
        kept = [p for p in pairs if gold.pair_key(p[0], p[1]) not in tuning]
        info["split"] = (f"test part: {len(pairs) - len(kept)} tuning pairs of the regression dropped, "
                         f"{len(kept)} left")
        pairs = kept
    try:
        return evaluate.evaluate_db(db, pairs, models=models, name=name, n_boot=n_boot, seed=seed, info=info)
    except InputError:
        raise
    except ValueError as exc:  # no candidates, no positives, ...: say which gold set
        raise InputError(f"gold set {name!r}: {exc}") from exc


def evaluate_recipe_sets(db, rec: dict, data_root: Path, *, models=None, n_boot: int = 1000, seed: int = 0,
                         report=None):
    """Every gold set of the recipe's [eval] section; with `report`, the figures and Markdown."""
    sets = (rec.get("eval") or {}).get("sets") or []
    if not sets:
        raise InputError("the recipe has no [eval] sets", rec.get("_path"))
    db = db if isinstance(db, ParaphraseDB) else ParaphraseDB(db)
    results = {}
    for spec in sets:
        sources = [{**src, "path": data_root / src["path"]} for src in spec["sources"]]
        res = evaluate_gold_files(db, sources, name=spec["name"], exclude_tuning=spec.get("exclude_tuning", False),
                                  models=models, n_boot=n_boot, seed=seed)
        results[spec["name"]] = res
    if report is None:
        return results, None
    from pivot.eval.plots import plot_paper_figures

    report = Path(report)
    figures = plot_paper_figures(results, report.parent / "figures", stem=report.stem)
    return results, evaluate.write_report(report, results, db, figures)
