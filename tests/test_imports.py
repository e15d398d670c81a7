"""pivot's import graph has no cycle, counting the imports inside functions too.

A function-level import hides a cycle from Python (the import runs after both modules are
loaded) but not from a reader: two modules that need each other are one module cut in two.
The graph is read from the source with ``ast``, every ``import``/``from`` statement
anywhere in a module (top level, functions, methods, ``try`` blocks):

* ``import a.b.c`` is an edge to ``a.b.c``;
* ``from a.b import c`` is an edge to ``a.b.c`` when that is a module of the package (a
  submodule imported by name), else to ``a.b`` (a name defined there);
* relative imports (``from . import x``, ``from ..m import y``) are resolved against the
  importing module's package first;
* the compiled kernels (``pivot/_counts.pyx`` ...) are nodes too, and their Python imports
  (one-line ``import``/``from`` lines; ``cimport`` is C) their edges.

Only modules of the package are nodes. The parent packages that Python initialises before
a submodule (``pivot`` before ``pivot.errors``) are not edges: every module would then sit
on a cycle through ``pivot/__init__.py``, which imports the public API and nothing imports.
"""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pivot"


def module_names(root: Path) -> dict[str, Path]:
    """{dotted module name: path} of every .py and .pyx (compiled) file under the package folder ``root``."""
    names = {}
    for path in sorted([*root.rglob("*.py"), *root.rglob("*.pyx")]):
        parts = (root.name,) + path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute name a ``from ... import`` statement starts from (relative ones resolved)."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if node.level > 1:
        base = base[:-(node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(path: Path, module: str, known: set[str]) -> set[str]:
    """The package modules that ``module`` (read from ``path``) imports anywhere in its body."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".pyx":
        # Cython is not Python: keep its one-line Python imports (``cimport`` lines are C).
        text = "\n".join(line.strip() for line in text.splitlines()
                         if line.strip().startswith(("import ", "from ")) and " cimport " not in line)
    tree = ast.parse(text, filename=str(path))
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(node, module, is_package)
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                found.add(sub if sub in known else source)
    return {name for name in found if name in known and name != module}


def import_graph(root: Path) -> dict[str, set[str]]:
    """{module: the package modules it imports} for the package folder ``root``."""
    names = module_names(root)
    known = set(names)
    return {name: imports_of(path, name, known) for name, path in names.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a, b, ..., a) through each strongly connected component of more than one node.

    Tarjan's algorithm finds the components; a breadth-first search inside each gives a
    shortest cycle through its smallest member, so the report is short and stable.
    """
    index, low, on_stack, stack, components = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(_shortest_cycle(graph, min(c), c) for c in components)


def _shortest_cycle(graph, start, component):
    """start -> ... -> start, the fewest edges inside ``component`` (breadth first, names sorted)."""
    parent, seen, frontier = {}, {start}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & component):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return path[::-1] + [start]
                if w not in seen:
                    seen.add(w)
                    parent[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"{start} is on no cycle of its component")  # Tarjan said it is


def _write_package(root: Path, files: dict[str, str]) -> Path:
    pkg = root / "pkg"
    for name, text in files.items():
        path = pkg / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return pkg


def test_pivot_has_no_import_cycle():
    graph = import_graph(PACKAGE)
    # The walk saw the package: the stages and the kernels' import site are nodes with edges.
    assert "pivot.pipeline.graph" in graph and "pivot.pipeline.align" in graph["pivot.pipeline.graph"]
    found = cycles(graph)
    assert not found, "import cycles in pivot/:\n" + "\n".join(" -> ".join(c) for c in found)


def test_every_form_of_import_is_an_edge(tmp_path):
    pkg = _write_package(tmp_path, {
        "__init__.py": "",
        "a.py": "import pkg.b\n",
        "b.py": "def f():\n    from pkg import c\n",                 # a submodule, in a function
        "c.py": "from pkg.sub.d import name\n",                      # a name in a module
        "sub/__init__.py": "from . import d\n",                      # relative, a submodule
        "sub/d.py": "class K:\n    def m(self):\n        from ..e import g\n",   # relative, up one
        "e.py": "try:\n    import os, pkg.a as alias\nexcept ImportError:\n    pass\n",
        "k.pyx": "from libc.math cimport exp\nimport numpy as np\nfrom pkg import e\n",
        "f.py": "from pkg import k\n",                                 # a compiled module
    })
    assert import_graph(pkg) == {
        "pkg": set(), "pkg.a": {"pkg.b"}, "pkg.b": {"pkg.c"}, "pkg.c": {"pkg.sub.d"},
        "pkg.sub": {"pkg.sub.d"}, "pkg.sub.d": {"pkg.e"}, "pkg.e": {"pkg.a"},
        "pkg.k": {"pkg.e"}, "pkg.f": {"pkg.k"}}


def test_a_cycle_hidden_in_functions_is_found_and_printed(tmp_path):
    # a -> b -> c -> sub.d -> e -> a (the graph above), plus a two-module cycle f <-> g.
    pkg = _write_package(tmp_path, {
        "__init__.py": "",
        "a.py": "import pkg.b\n",
        "b.py": "def f():\n    from pkg import c\n",
        "c.py": "from pkg.sub.d import name\n",
        "sub/__init__.py": "",
        "sub/d.py": "def m():\n    from ..e import g\n",
        "e.py": "import pkg.a\n",
        "f.py": "def h():\n    from .g import x\n",
        "g.py": "from pkg.f import h\n",
    })
    assert cycles(import_graph(pkg)) == [
        ["pkg.a", "pkg.b", "pkg.c", "pkg.sub.d", "pkg.e", "pkg.a"],
        ["pkg.f", "pkg.g", "pkg.f"]]


def test_a_package_importing_its_own_submodule_is_no_cycle(tmp_path):
    # pkg/__init__ imports pkg.a, and pkg.a imports pkg.b: the implicit parent import of
    # pkg by pkg.a is not an edge, so this is acyclic (as pivot/__init__.py's re-exports are).
    pkg = _write_package(tmp_path, {"__init__.py": "from pkg.a import x\n",
                                    "a.py": "from pkg.b import y\n", "b.py": "y = 1\n"})
    assert cycles(import_graph(pkg)) == []
