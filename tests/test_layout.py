"""The package's structure: no module reaches into another's private names, and no two
modules import each other, directly or through others (docs/index.md, "Where things are").

Imports are read from the source (every ``import`` statement, including those inside
functions, which still make one module depend on another). Private *modules* (``_name.py``)
may be imported anywhere inside convlab; private *names* (``_name`` defined in a module)
may not be used outside the module that defines them.
"""
from __future__ import annotations

import ast
import pathlib
import types

import pytest

import convlab

PACKAGE = pathlib.Path(convlab.__file__).resolve().parent


def package_sources(root: pathlib.Path, name: str = "convlab") -> dict[str, str | None]:
    """{dotted module name: source} for every .py file under ``root``, and {name: None}
    for the compiled (Cython) modules, which are imported but not read here."""
    sources: dict[str, str | None] = {}
    for path in sorted([*root.rglob("*.py"), *root.rglob("*.pyx")]):
        parts = [name, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        sources[".".join(parts)] = path.read_text() if path.suffix == ".py" else None
    return sources


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[:len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def analyse(sources: dict[str, str | None], root: str = "convlab"):
    """The import graph {module: set of modules it imports} and the private names used
    across modules, as (module, what) pairs."""
    packages = {m for m in sources if any(other.startswith(m + ".") for other in sources)}
    graph: dict[str, set[str]] = {m: set() for m in sources}
    leaks = []
    for module, source in sources.items():
        if source is None:
            continue
        tree = ast.parse(source)
        aliases = {}  # local name -> convlab module it is bound to
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == root:
                        graph[module].add(alias.name)
                        if alias.asname:
                            aliases[alias.asname] = alias.name
                        else:
                            aliases[root] = root
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(module, module in packages, node)
                if base.split(".")[0] != root:
                    continue
                for alias in node.names:
                    target = f"{base}.{alias.name}"
                    if target in sources:
                        graph[module].add(target)
                        aliases[alias.asname or alias.name] = target
                    else:
                        graph[module].add(base)
                        if is_private(alias.name):
                            leaks.append((module, f"from {base} import {alias.name}"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and is_private(node.attr):
                owner = _dotted(node.value)
                if owner is None:
                    continue
                head, _, rest = owner.partition(".")
                if head not in aliases:
                    continue
                target = aliases[head] + ("." + rest if rest else "")
                if target in sources and f"{target}.{node.attr}" not in sources \
                        and target != module:
                    leaks.append((module, f"{target}.{node.attr}"))
    for module in graph:
        graph[module] = {m for m in graph[module] if m in sources and m != module}
    return graph, leaks


def _dotted(node) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

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
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


SYNTHETIC = {
    "convlab": "from convlab.a import run\n",
    "convlab.a": "from convlab import b\n\ndef run():\n    return b._helper()\n",
    "convlab.b": "def _helper():\n    from convlab.c import _secret\n    return _secret\n",
    "convlab.c": "import convlab.a\n_secret = 1\n",
    "convlab.d": "from convlab.sub import _private_module\n",
    "convlab.sub": "",
    "convlab.sub._private_module": "VALUE = 1\n",
}


def test_the_checks_find_a_cycle_and_private_names():
    graph, leaks = analyse(SYNTHETIC)
    assert cycles(graph) == [["convlab.a", "convlab.b", "convlab.c"]]
    assert sorted(leaks) == [("convlab.a", "convlab.b._helper"),
                             ("convlab.b", "from convlab.c import _secret")]


@pytest.fixture(scope="module")
def convlab_graph():
    return analyse(package_sources(PACKAGE))


def test_no_module_uses_another_modules_private_names(convlab_graph):
    _, leaks = convlab_graph
    assert leaks == []


def test_no_import_cycles(convlab_graph):
    graph, _ = convlab_graph
    assert cycles(graph) == []


def test_the_public_names_are_listed():
    for name in convlab.__all__:
        assert hasattr(convlab, name), name
    public = {name for name in vars(convlab) if not name.startswith("_")}
    functions_and_classes = {name for name in public
                             if not isinstance(getattr(convlab, name), types.ModuleType)}
    assert functions_and_classes <= set(convlab.__all__)
