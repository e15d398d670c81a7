"""The stage graph of a build, gathered from the stages' own declarations (``STAGE`` in each
stage's module, :class:`pivot.pipeline.stage.Stage`): what each stage needs, which recipe
settings it reads, what it writes, where its code lives.

    corpus.<lang> ─┬─> align.<lang> ─> encode ─────────┬─> weights ─> extract    (a pair of stages
                   └─> lmtext ─> lm ─> score ──────────┘                           per pivot language)
    extract ─> translation ─> pivot ─┬─> combine ─┬─> store (the SQLite database)
                                     ├─> ppdb2 ───┤
                                     └─> lhs ─────┘
    tagger (data files only) ───────────────^

(score also reads the corpus stages' English, weights and the later stages encode's output.)
The LM branch reads the corpus stages' English side (the text encode's ``english.txt``
concatenates), so it does not wait for the aligner: on a cluster a stage starts as soon as
every stage it needs is done (:func:`pivot.pipeline.run.run_stages`), and lmtext, lm and score
run beside the alignment, ppdb2 beside lhs and combine.

A stage's artifact folder is named by the hash of its version, its declared inputs' content keys
and its parameters; the content key it hands on is the hash of the bytes it wrote
(:class:`pivot.pipeline.run.Workdir`). The work directory refuses a stage whose inputs are not
the ones declared, and an artifact holding a file its stage does not declare, so this table is
the graph the build runs, not a picture of it. ``pivot build --graph`` prints it.
"""
from __future__ import annotations

from pivot.pipeline import (align, combine, corpus, encode, extract, lhs, lm, lmtext, pivoting, ppdb2, score, store,
                            translation, weights)
from pivot.pipeline.stage import Stage

STAGES: dict[str, Stage] = {s.name: s for s in (
    corpus.STAGE, align.STAGE, encode.STAGE, lmtext.STAGE, lm.STAGE, score.STAGE, weights.STAGE, extract.STAGE,
    translation.STAGE, pivoting.STAGE, ppdb2.STAGE, lhs.TAGGER_STAGE, lhs.STAGE, combine.STAGE, store.STAGE)}


def check_inputs(stage_name: str, inputs) -> None:
    """A stage may only be given declared inputs (a General-only build has no score)."""
    stage = STAGES[stage_name.split(".")[0]]
    if not set(inputs) <= set(stage.needs):
        raise RuntimeError(f"stage {stage_name} was given inputs {sorted(inputs)}, "
                           f"declared {sorted(stage.needs)} (in {stage.run.__module__})")


def order() -> list[str]:
    """The stages in an order where every stage follows what it needs."""
    done: list[str] = []

    def visit(name):
        if name not in done:
            for up in STAGES[name].needs:
                visit(up)
            done.append(name)

    for name in STAGES:
        visit(name)
    return done


def upstream(name: str) -> set[str]:
    """The stage and every stage it needs, directly or through others."""
    found = {name}
    for up in STAGES[name].needs:
        found |= upstream(up)
    return found


def describe() -> str:
    """The graph as text, three lines a stage: what it needs, how it runs; the recipe settings
    it reads; what it writes and its code."""
    lines = []
    for name in order():
        s = STAGES[name]
        data = " + data files" if s.data is not None else ""
        lines.append(f"{name:12} <- {', '.join(s.needs) or '(data)':22} [{s.tasks}]  {s.doc}")
        lines.append(f"{'':12}    reads {', '.join(s.settings) or '(no setting)'}{data}")
        lines.append(f"{'':12}    writes {', '.join(s.writes)}; code {s.code}")
    return "\n".join(lines)
