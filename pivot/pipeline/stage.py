"""What a stage of the build declares, and what its ``run`` entry is handed.

A stage is one module's declaration (``STAGE`` in pivot/pipeline/corpus.py, align.py, ...):
its version, the stages it needs, the recipe settings it reads, the files it writes and one
``run`` entry. The runner (:class:`pivot.pipeline.run.Build`) keys, caches and submits every
stage alike from these, and checks them as it goes:

- ``params(recipe)`` is the only reader of the stage's recipe settings. What it returns enters
  the stage's key, and ``run`` sees the recipe only through it, as a :class:`Params` view that
  refuses a setting ``params`` did not return: a setting that changes what a stage writes
  cannot be missing from its key. ``settings`` names what ``params`` reads ("section.key", or
  "section" for the whole section); tests/test_stages.py checks the two agree.
- ``run`` reads the artifacts of the stages it needs through :class:`Context` (``dir``, ``key``),
  which refuses any other stage's.
- ``writes`` are the globs of the artifact's files (relative to its folder): a finished artifact
  holding a file that matches none of them is refused before it is renamed into place
  (:meth:`pivot.pipeline.run.Workdir.stage`).
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path


#: A file an artifact may hold that is not part of its content (timings).
VOLATILE = "timings.json"


def key_of(parts) -> str:
    """16 hex digits of the sha256 of ``parts`` as canonical JSON: a stage's folder key, the
    build's key in the signature."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


class DeclarationError(RuntimeError):
    """A stage did what its declaration does not say (a bug of the stage, not of the input)."""


@dataclass(frozen=True)
class Stage:
    name: str
    version: int  # bump when the code changes what the stage writes: old artifacts then miss
    needs: tuple[str, ...]  # upstream stages (their content keys enter this stage's key)
    settings: tuple[str, ...]  # the recipe settings params() reads ("section.key" or "section")
    params: Callable  # (recipe) -> dict, or (recipe, lang) for a stage per pivot language
    writes: tuple[str, ...]  # globs of the artifact's files
    run: Callable  # (Context) -> None, writing into context.tmp; a generator yields Engine batches
    tasks: str  # how the work is cut: one task, or one per shard / partition / row range
    doc: str
    #: (params, data root) -> the data files it reads, whose fingerprints enter the key
    data: Callable | None = None
    per_language: bool = False  # one stage per [[bitext]] language: "corpus.fr", "align.fr"
    #: (recipe) -> whether the recipe has this stage (a recipe without [domain] has no LM branch)
    when: Callable | None = None
    #: (recipe, data root, plan) -> the read-through checks of its input files, which it adds to
    #: the plan (pivot.preflight.Plan.add_input) after checking they exist; run by preflight
    #: before anything is written, whether or not the recipe has the stage (the stage says)
    check: Callable | None = None

    @property
    def code(self) -> str:
        return f"{self.run.__module__}.{self.run.__name__}"

    def wanted(self, recipe) -> bool:
        return self.when is None or bool(self.when(recipe))

    def undeclared_writes(self, folder: Path) -> list[str]:
        """The files under ``folder`` that match none of ``writes`` (DONE is the runner's)."""
        names = sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*") if p.is_file())
        return [n for n in names if n != "DONE" and not any(fnmatch(n, glob) for glob in self.writes)]


class Params(dict):
    """A stage's parameters as ``run`` sees them: read-only, and a key its ``params`` did not
    return is an error naming the stage and the key, even through ``get`` with a default (the
    silent way a setting would escape the key). A dict, so that it travels to the tasks and into
    JSON as the parameters themselves."""

    def __init__(self, stage: str, values: dict):
        super().__init__(values)
        self.stage = stage

    def __missing__(self, key):
        raise DeclarationError(f"stage {self.stage} read the parameter {key!r}, which its params() does not "
                               f"return (declared: {', '.join(sorted(self)) or 'none'})")

    def get(self, key, default=None):
        return self[key]

    def __setitem__(self, key, value):
        raise DeclarationError(f"stage {self.stage} set the parameter {key!r}: a stage's parameters are its key")

    __delitem__ = __setitem__

    def __reduce__(self):
        return Params, (self.stage, dict(self))


@dataclass
class Context:
    """What a stage's ``run`` is handed: its parameters, the folder it writes, the artifacts of
    the stages it needs, and where its tasks run."""

    stage: Stage
    name: str  # "encode", or "align.fr" for a stage per language
    params: Params
    tmp: Path  # the artifact's folder under construction
    engine: object
    data_root: Path
    recipe_file: Path  # named by the one-line errors of what only the build reveals
    threads: int = 0
    quiet: bool = False
    lang: str | None = None
    #: stage name -> (folder, content key), or {lang: (folder, key)} for a stage per language
    artifacts: dict = field(default_factory=dict)
    #: the store's: --parts, the data fingerprints and stage seconds of the build
    record: dict = field(default_factory=dict)

    def _declared(self, need: str) -> None:
        if need not in self.stage.needs:
            raise DeclarationError(f"stage {self.name} read the artifact of {need}, which it does not need "
                                   f"(needs: {', '.join(self.stage.needs) or 'none'})")

    def _artifact(self, need: str):
        self._declared(need)
        return self.artifacts[need]

    def has(self, need: str) -> bool:
        """Whether the recipe has the needed stage (weights reads score only under [domain])."""
        self._declared(need)
        return need in self.artifacts

    def dir(self, need: str):
        """The folder of a needed stage's artifact; of a stage per language, {lang: folder}
        (this language's folder for a stage per language itself)."""
        found = self._artifact(need)
        if isinstance(found, dict):
            return found[self.lang][0] if self.lang else {lang: d for lang, (d, _) in found.items()}
        return found[0]

    def key(self, need: str):
        """The content key of a needed stage's artifact (as :meth:`dir`)."""
        found = self._artifact(need)
        if isinstance(found, dict):
            return found[self.lang][1] if self.lang else {lang: k for lang, (_, k) in found.items()}
        return found[1]
