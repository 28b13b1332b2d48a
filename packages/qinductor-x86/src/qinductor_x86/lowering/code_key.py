"""The source files the lowering's output depends on: the key of Inductor's FX graph cache.

Inductor serves a cached compiled graph when the graph and every custom pass's ``uuid()``
are unchanged, so the uuid must change whenever any code that shapes the rewrite does:
not only this folder, but every module of this repository the passes import, however
indirectly (the private-API adapter, qcore's saturation rules and host model, ...). The
set is the static import closure of the pass module over first-party packages, so a new
import is covered the moment it is written.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from collections.abc import Iterable
from pathlib import Path

#: Top-level packages whose code is hashed: this repository's (torch's own changes are
#: covered by Inductor's key, which includes torch's version).
FIRST_PARTY = ("qinductor_x86", "qcore")
ROOT_MODULE = "qinductor_x86.lowering.custom_passes"


@functools.cache
def source_files(root: str = ROOT_MODULE) -> tuple[Path, ...]:
    """Every first-party module file ``root`` imports, directly or not, and ``root``'s."""
    seen: dict[str, Path] = {}
    pending = [root]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        path = _file_of(name)
        if path is None:
            continue
        seen[name] = path
        pending.extend(_first_party_imports(name, path))
    return tuple(sorted(seen.values()))


def _file_of(module: str) -> Path | None:
    """The file of first-party ``module``, found without importing it (or None for an
    attribute, ``from mod import name``)."""
    top, *rest = module.split(".")
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        return None
    base = Path(next(iter(spec.submodule_search_locations))).joinpath(*rest)
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _first_party_imports(module: str, path: Path) -> Iterable[str]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module or "", node.level, package)
            # ``from pkg import mod`` may name a module or an attribute: try both
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        for name in names:
            if name.split(".")[0] in FIRST_PARTY:
                # a module's package __init__ runs too, so it shapes the result as well
                parts = name.split(".")
                yield from (".".join(parts[: i + 1]) for i in range(len(parts)))


def _absolute(module: str, level: int, package: str) -> str:
    if level == 0:
        return module
    parts = package.split(".")
    base = ".".join(parts[: len(parts) - (level - 1)])
    return f"{base}.{module}" if module else base
