"""The stages' declarations (pivot.pipeline.stage) are checked, not trusted.

A stage that reads a parameter its params() does not return, or an artifact it does not need,
stops with an error naming the stage and what it read; an artifact holding a file that matches
none of the stage's declared writes is refused before it is renamed into place. And every real
stage's params() reads exactly the recipe settings its declaration names.
"""
import dataclasses
from collections.abc import Mapping
from pathlib import Path

import pytest

from pivot import recipes
from pivot.pipeline import graph
from pivot.pipeline.run import Build
from pivot.pipeline.stage import DeclarationError, Stage
from tests.test_build_domain import write_tiny

REPO = Path(__file__).resolve().parents[1]


def _toy(run, writes=("out.txt",)):
    """A stage reading one setting, [pivot] min_p_e2_given_e1, as its parameter "floor"."""
    return Stage("toy", 1, (), ("pivot.min_p_e2_given_e1",), lambda recipe: {"floor": recipe["pivot"]["min_p_e2_given_e1"]},
                 writes, run, "one", "a stage of this test")


@pytest.fixture
def tiny_build(tmp_path):
    """A Build of the tiny recipe (in this process) that writes no database."""
    args = dict(zip(("recipe", "data"), write_tiny(tmp_path)[1::2]))
    build = Build(None, **args, work=tmp_path / "work", workers=1, store=False)
    yield build
    build.engine.close()


def test_a_stage_reading_an_undeclared_parameter_stops_naming_the_stage_and_the_key(tiny_build, monkeypatch):
    def run(context):
        (context.tmp / "out.txt").write_text(str(context.params["floor"]))
        context.params.get("top_n", 20)  # [pivot] top_n: a setting params() did not return

    monkeypatch.setitem(graph.STAGES, "toy", _toy(run))
    with pytest.raises(DeclarationError, match=r"^stage toy read the parameter 'top_n', which its params\(\) "
                                               r"does not return \(declared: floor\)$"):
        tiny_build.run_stage(graph.STAGES["toy"])
    assert not list(tiny_build.wd.root.glob("toy-*"))


def test_a_stage_reading_an_artifact_it_does_not_need_stops(tiny_build, monkeypatch):
    def run(context):
        context.dir("encode")

    monkeypatch.setitem(graph.STAGES, "toy", _toy(run))
    with pytest.raises(DeclarationError, match=r"^stage toy read the artifact of encode, which it does not need "
                                               r"\(needs: none\)$"):
        tiny_build.run_stage(graph.STAGES["toy"])


def test_a_stage_writing_an_undeclared_file_is_refused_before_it_is_in_place(tiny_build, monkeypatch):
    def run(context):
        (context.tmp / "out.txt").write_text(str(context.params["floor"]))
        (context.tmp / "sub").mkdir(exist_ok=True)  # a rerun resumes in the same .partial folder
        (context.tmp / "sub" / "extra.npy").write_bytes(b"x")

    monkeypatch.setitem(graph.STAGES, "toy", _toy(run))
    with pytest.raises(DeclarationError, match=r"^stage toy wrote sub/extra.npy, which match none of its "
                                               r"declared writes \(out.txt\)$"):
        tiny_build.run_stage(graph.STAGES["toy"])
    assert not list(tiny_build.wd.root.glob("toy-*"))  # only the .partial folder
    # declared (a glob that takes the subfolder), the same run is an artifact, its parameter in its key
    monkeypatch.setitem(graph.STAGES, "toy", _toy(run, writes=("out.txt", "sub/*.npy")))
    tiny_build.run_stage(graph.STAGES["toy"])
    folder, _ = tiny_build.artifacts["toy"]
    assert (folder / "out.txt").read_text() == "0.0"  # the recipe's default floor
    assert '"params": {\n  "floor": 0.0\n }' in (folder / "DONE").read_text()


class _Reads(Mapping):
    """A recipe that records which settings are read: "section.key", or "section" when the
    whole section is iterated (``dict(...)``, ``.items()``), or the top-level key itself."""

    def __init__(self, values, seen, section=None):
        self._values, self._seen, self._section = values, seen, section

    def __getitem__(self, key):
        value = self._values[key]
        if key.startswith("_"):  # the recipe file's path and sha256, not settings
            return value
        if self._section is None and isinstance(value, dict):
            return _Reads(value, self._seen, key)
        self._seen.add(key if self._section is None else f"{self._section}.{key}")
        return value

    def __iter__(self):
        self._seen.add(self._section or "recipe")
        return iter(self._values)

    def __len__(self):
        return len(self._values)


def settings_read(stage, recipe, lang=None) -> set[str]:
    seen: set[str] = set()
    stage.params(_Reads(recipe, seen), *([lang] if stage.per_language else []))
    # the whole recipe read covers every setting, a whole section its keys read one by one
    if "recipe" in seen:
        return {"recipe"}
    return {name for name in seen if name.split(".")[0] not in seen or "." not in name}


def _recipes(tmp_path) -> list[dict]:
    """Every recipe of recipes/, the tiny test recipe, and the tiny one without [domain] and [combine]."""
    write_tiny(tmp_path)
    tiny = (tmp_path / "tinybio.toml").read_text()
    general = tiny[:tiny.index("[domain]")] + tiny[tiny.index("[eval]"):]
    (tmp_path / "general.toml").write_text(general.replace('name = "tinybio"', 'name = "general"'))
    files = sorted((REPO / "recipes").glob("*.toml")) + [tmp_path / "tinybio.toml", tmp_path / "general.toml"]
    return [recipes.load_recipe(f) for f in files]


def test_every_stage_reads_exactly_the_recipe_settings_it_declares(tmp_path):
    """Over every recipe (with and without [domain], [combine], a tagger, pharaoh links), each
    stage's params() reads only settings its declaration names, and each named one is read by
    some recipe: a declaration naming too few or too many settings fails here."""
    read_by = {name: set() for name in graph.STAGES}
    for recipe in _recipes(tmp_path):
        for name, stage in graph.STAGES.items():
            if not stage.wanted(recipe):
                continue
            for lang in [s["lang"] for s in recipe["bitext"]] if stage.per_language else [None]:
                read = settings_read(stage, recipe, lang)
                assert read <= set(stage.settings), f"{name} ({recipe['name']}) reads {sorted(read - set(stage.settings))}"
                read_by[name] |= read
    assert read_by == {name: set(stage.settings) for name, stage in graph.STAGES.items()}
    # the check can fail: weights without report_in_domain_sources in its declaration
    weights = dataclasses.replace(graph.STAGES["weights"], settings=("domain.taus",))
    bio = recipes.load_recipe(REPO / "recipes" / "bio.toml")
    assert settings_read(weights, bio) - set(weights.settings) == {"domain.report_in_domain_sources"}


def test_every_stage_is_declared_in_its_own_module_and_the_graph_holds_what_it_needs():
    modules = {"corpus": "corpus", "align": "align", "encode": "encode", "lmtext": "lmtext", "lm": "lm",
               "score": "score", "weights": "weights", "extract": "extract", "translation": "translation",
               "pivot": "pivoting", "ppdb2": "ppdb2", "tagger": "lhs", "lhs": "lhs", "combine": "combine",
               "store": "store"}
    assert set(graph.STAGES) == set(modules)
    for name, stage in graph.STAGES.items():
        assert stage.run.__module__ == f"pivot.pipeline.{modules[name]}", name
        assert stage.writes and set(stage.needs) <= set(graph.STAGES), name
    assert graph.order()[-1] == "store"
    assert graph.upstream("score") == {"score", "lm", "lmtext", "corpus"}


def test_preflight_asks_each_stage_for_its_inputs_in_the_graphs_order(tmp_path, monkeypatch):
    """The tiny recipe's inputs, each listed by the stage that reads it (corpus, align, lmtext,
    combine), then the [eval] gold (no stage's); a stage's check that refuses stops preflight
    with its error."""
    from pivot import preflight
    from pivot.errors import InputError

    write_tiny(tmp_path)
    data = tmp_path / "data"
    plan = preflight.check(tmp_path / "tinybio.toml", data)
    assert [(f.path.name, f.role) for f in plan.inputs] == [
        ("c.en", "bitext"), ("c.fr", "bitext"), ("c.align", "alignments"), ("bio.txt", "in-domain text"),
        ("gold.txt", "gold"), ("control.txt", "gold")]
    # 12 sentence pairs and their 12 link lines; bio.txt: 6 sentences 3 times; gold 5 + control 3 pairs
    assert plan.counts == {"bitext lines": 12, "alignment lines": 12, "in-domain text sentences": 18, "gold pairs": 8}

    def refuse(recipe, data_root, plan):
        raise InputError("no such thing", data_root / "x.txt", 3)
    monkeypatch.setitem(graph.STAGES, "score", dataclasses.replace(graph.STAGES["score"], check=refuse))
    with pytest.raises(InputError, match=r"/data/x.txt:3: no such thing$"):
        preflight.check(tmp_path / "tinybio.toml", data)
