"""The import graph of every package's source, read statically: no cycles, and imports
flow one way (plugins -> qcore's public modules -> qcore's internals).

Every import counts, wherever it stands (module level, inside a function, under
``TYPE_CHECKING``): an import moved into a function to dodge a cycle is still a cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).parents[1]
SOURCE_ROOTS = sorted(
    [*(ROOT / "packages").glob("*/src"), ROOT / "examples" / "qbackend-example" / "src"]
)
CORE = "qcore"
#: Top-level modules that qcore-torch's wheel ships beside the ``qcore`` package.
CORE_SIBLINGS = {"_qcore_torch"}


def modules() -> dict[str, Path]:
    """Every module of every package's ``src``, by dotted name."""
    found: dict[str, Path] = {}
    for src in SOURCE_ROOTS:
        for path in src.rglob("*.py"):
            parts = list(path.relative_to(src).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imported_names(path: Path, module: str) -> Iterator[tuple[str, int]]:
    """(dotted name, line) of every import in ``path``; ``from a import b`` gives ``a.b``."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            yield from ((f"{base}.{alias.name}", node.lineno) for alias in node.names)


def edges() -> dict[str, dict[str, int]]:
    """module -> {imported module of ours: line}; a name imported from a module counts as
    that module, a submodule imported from a package as the submodule."""
    ours = modules()
    graph: dict[str, dict[str, int]] = {name: {} for name in ours}
    for name, path in ours.items():
        for imported, line in imported_names(path, name):
            target = imported
            while target and target not in ours:
                target = target.rpartition(".")[0]
            if target and target != name:
                graph[name].setdefault(target, line)
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
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


def _distribution(module: str) -> str:
    top = module.split(".", maxsplit=1)[0]
    return CORE if top in CORE_SIBLINGS else top


def test_the_walk_sees_every_package_and_their_imports() -> None:
    graph = edges()
    assert {_distribution(m) for m in graph} == {
        "qcore",
        "qbackend_onednn",
        "qbackend_executorch",
        "qquantizer_xnnpack",
        "qinductor_x86",
        "qbackend_example",
    }
    # imports inside functions and under TYPE_CHECKING count too
    assert "qcore.annotation.quantizer" in graph["qcore.api"]
    assert "qcore.int8.host" in graph["qcore.cli"]


def test_no_import_cycles() -> None:
    graph = edges()
    found = cycles(graph)
    described = [
        " <-> ".join(component)
        + ": "
        + "; ".join(
            f"{a} imports {b} (line {graph[a][b]})"
            for a in component
            for b in component
            if b in graph[a]
        )
        for component in found
    ]
    assert not found, "import cycles:\n" + "\n".join(described)


def test_cycles_are_found() -> None:
    graph = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3}, "d": {"a": 4}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b": 1}, "b": {}}) == []


def test_imports_flow_from_plugins_to_qcore_public_modules() -> None:
    problems = []
    for module, targets in edges().items():
        mine = _distribution(module)
        for target, line in targets.items():
            theirs = _distribution(target)
            if mine == CORE and theirs != CORE:
                problems.append(f"{module}:{line} qcore imports plugin module {target}")
            elif mine != CORE and theirs == CORE and any(
                part.startswith("_") for part in target.split(".")[1:]
            ):
                problems.append(f"{module}:{line} imports qcore's private {target}")
            elif CORE not in (mine, theirs) and mine != theirs:
                problems.append(f"{module}:{line} plugin imports another plugin: {target}")
    assert not problems, "\n".join(problems)


def test_no_plugin_imports_a_private_name_from_qcore() -> None:
    problems = []
    for module, path in modules().items():
        if _distribution(module) == CORE:
            continue
        for name, line in imported_names(path, module):
            last = name.rpartition(".")[2]
            if name.startswith("qcore.") and last.startswith("_") and last != "__version__":
                problems.append(f"{module}:{line} imports {name}")
    assert not problems, "\n".join(problems)
