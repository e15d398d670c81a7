"""bench/bench_baseline.py's ``--also-without-layer`` recipe: the shipped recipe, [ppdb2] off."""
import importlib.util
import sys
from pathlib import Path

import pytest

from pivot import recipes

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))   # bench_baseline imports its sibling _measure
_spec = importlib.util.spec_from_file_location("bench_baseline", ROOT / "bench" / "bench_baseline.py")
bb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bb)


@pytest.mark.parametrize("domain", ["bio", "bio-multi"])   # a [ppdb2] section, and none (the defaults)
def test_the_recipe_without_the_layer_differs_in_its_three_keys_alone(domain, tmp_path):
    shipped = recipes.load_recipe(ROOT / "recipes" / f"{domain}.toml")
    off = recipes.load_recipe(bb.without_layer(ROOT, domain, tmp_path / "r.toml"))
    assert {k: v for k, v in off["ppdb2"].items() if shipped["ppdb2"][k] != v} == {
        "learn": False, "wordnet": False, "lhs": "x"}
    def rest(r):
        return {k: v for k, v in r.items() if k not in ("ppdb2", "_path", "_sha256")}
    assert rest(off) == rest(shipped)
