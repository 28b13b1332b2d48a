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
    [*(ROOT / "packages").glob("*/src"), *(ROOT / "examples").glob("*/src")]
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
        "qbackend_qnnpack",
    }
    # imports inside functions and under TYPE_CHECKING count too
    assert "qcore.pt2e.annotation.registry_quantizer" in graph["qcore.plugins.api"]
    assert "qcore.int8.cpu_profile" in graph["qcore.cli"]


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


#: qcore's own layers, top to bottom, as CONTRIBUTING.md's Layers diagram draws them: a
#: module may import its own layer or one below it, never one above. A module belongs to
#: the longest entry that is its name or a package holding it (``qcore`` itself stands for
#: its ``__init__`` only); a new top-level module or package goes into the diagram and here.
QCORE_LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    (
        "the public layer",
        frozenset(
            {
                "qcore",
                "qcore.__main__",
                "qcore.plugins.api",
                "qcore.host",
                "qcore.pt2e.export",
                "qcore.distributed",
                "qcore.fx",
                "qcore.tuning",
                "qcore.cli",
                "qcore.demo",
                "qcore.testing",
                "qcore.zoo",
                "_qcore_torch.launcher",
            }
        ),
    ),
    (
        "the building blocks",
        frozenset(
            {
                "qcore.pt2e",
                "qcore.pt2e.derived",
                "qcore.pt2e.annotation",
                "qcore.fx.patterns",
                "qcore.plugins",
                "qcore.plugins.discovery",
                "qcore.plugins.extras",
                "qcore.plugin_api",
            }
        ),
    ),
    (
        "the foundations",
        frozenset(
            {
                "qcore.int8",
                "qcore.fx.dtypes",
                "qcore.fx.ranges",
                "qcore.fx.histogram",
                "qcore.pt2e.ranges",
                "qcore.pt2e.range_plan",
                "qcore.pt2e.range_graph",
                "qcore.pt2e.range_reach",
                "qcore.pt2e.histogram",
                "qcore.plugins.renamed",
                "qcore.errors",
                "qcore.metrics",
                "qcore._torch_private",
                "qcore._version",
                "_qcore_torch",
                "_qcore_torch.identity",
            }
        ),
    ),
)
#: The most entries (modules and packages) directly in ``qcore/``, apart from
#: ``__init__``, ``__main__`` and ``_version``: past it, a reader can no longer see the
#: layout at a glance. The top level holds one folder per flow (``fx``, ``pt2e``) and per
#: concern (``plugins``, ``int8``, ``tuning``, ``distributed``, ``cli``, ``demo``, the kit
#: ``testing``, the ``zoo``), the public modules DESIGN.md names, errors and the adapter.
MAX_TOP_LEVEL_ENTRIES = 15
#: The modules that may stand directly in ``qcore/``: a new one belongs in a folder.
TOP_LEVEL_MODULES = {"host", "metrics", "plugin_api", "errors", "_torch_private"}
NOT_COUNTED = {"__init__", "__main__", "_version"}


def top_level_entries(package: Path) -> dict[str, str]:
    """Each module or package directly in ``package``, by name: ``"module"`` or ``"package"``."""
    found = {}
    for path in package.iterdir():
        if path.suffix == ".py" and path.stem not in NOT_COUNTED:
            found[path.stem] = "module"
        elif path.is_dir() and (path / "__init__.py").is_file():
            found[path.name] = "package"
    return found


def qcore_layer(module: str) -> int | None:
    """The index in :data:`QCORE_LAYERS` of ``module``'s layer, or None if unassigned."""
    best: tuple[int, int] | None = None  # (length of the matching entry, layer)
    for layer, (_, entries) in enumerate(QCORE_LAYERS):
        for entry in entries:
            holds = entry != CORE and module.startswith(entry + ".")
            if (module == entry or holds) and (
                best is None or len(entry) > best[0]
            ):
                best = (len(entry), layer)
    return None if best is None else best[1]


def test_every_qcore_module_has_a_layer() -> None:
    unassigned = sorted(
        m for m in modules() if _distribution(m) == CORE and qcore_layer(m) is None
    )
    assert not unassigned, f"add these to QCORE_LAYERS and CONTRIBUTING.md: {unassigned}"


def test_qcore_imports_flow_down_its_layers() -> None:
    """Public layer -> building blocks -> foundations, never back up."""
    problems = []
    for module, targets in edges().items():
        mine = qcore_layer(module)
        for target, line in targets.items():
            theirs = qcore_layer(target)
            if mine is not None and theirs is not None and theirs < mine:
                problems.append(
                    f"{module}:{line} ({QCORE_LAYERS[mine][0]}) imports {target} "
                    f"({QCORE_LAYERS[theirs][0]})"
                )
    assert not problems, "\n".join(problems)


def test_the_layer_check_finds_an_upward_import() -> None:
    assert qcore_layer("qcore.int8.cpu_profile") == 2
    assert qcore_layer("qcore.pt2e.annotation.claims") == 1
    assert qcore_layer("qcore.cli.tables") == 0
    assert qcore_layer("qcore.hypothetical") is None


def test_qcore_top_level_holds_the_flows_and_at_most_fifteen_entries() -> None:
    top = top_level_entries(ROOT / "packages/qcore/src/qcore")
    assert len(top) <= MAX_TOP_LEVEL_ENTRIES, f"{len(top)} entries directly in qcore/: {sorted(top)}"
    modules_ = {name for name, kind in top.items() if kind == "module"}
    assert modules_ <= TOP_LEVEL_MODULES, (
        f"modules directly in qcore/ that belong in a folder: {sorted(modules_ - TOP_LEVEL_MODULES)}"
    )
    assert {"fx", "pt2e", "plugins", "int8", "testing", "zoo"} <= set(top)


def test_the_top_level_count_counts_packages_too(tmp_path: Path) -> None:
    (tmp_path / "flow").mkdir()
    (tmp_path / "flow" / "__init__.py").write_text("")
    (tmp_path / "data").mkdir()  # no __init__: not a package
    for name in ("__init__", "_version", "errors"):
        (tmp_path / f"{name}.py").write_text("")
    assert top_level_entries(tmp_path) == {"flow": "package", "errors": "module"}


def test_qinductor_x86_shows_its_quantizer_and_lowering_as_two_folders() -> None:
    """The shared table (post-ops), the entry points and the adapter stand beside them."""
    top = top_level_entries(ROOT / "packages/qinductor-x86/src/qinductor_x86")
    assert top == {
        "quantizer": "package",
        "lowering": "package",
        "postop_table": "module",
        "plugin": "module",
        "_torch_private": "module",
    }


def test_the_conformance_kit_stands_apart_from_the_zoo() -> None:
    """Third parties import ``qcore.testing``: it never imports the models or the suite's
    helpers (``qcore.zoo``), and each of its modules is documented in qcore's README."""
    kit = {m: t for m, t in edges().items() if m == "qcore.testing" or m.startswith("qcore.testing.")}
    assert len(kit) > 5
    into_zoo = [f"{m} imports {t}" for m, ts in kit.items() for t in ts if t.startswith("qcore.zoo")]
    assert not into_zoo, "\n".join(into_zoo)
    readme = (ROOT / "packages/qcore/README.md").read_text(encoding="utf-8")
    table = readme[readme.index("What the kit holds") :]
    leaves = {m: m.rpartition(".")[2] if m != "qcore.testing" else m for m in kit}
    undocumented = sorted(m for m, leaf in leaves.items() if f"| `{leaf}` |" not in table)
    assert not undocumented, f"kit modules missing from qcore's README table: {undocumented}"
