"""Fake installed distributions, for testing how plugins are discovered and fail.

``fake_distributions()`` writes modules and ``<name>-1.0.dist-info`` folders (METADATA,
entry_points.txt) into a temporary folder put first on ``sys.path`` and resets qcore's
plugin registry; on exit it restores ``sys.path``, the modules it shadowed or created,
and the registry. Plugin authors can use it to test their own error paths.
"""

from __future__ import annotations

import importlib
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

from qcore.plugins.discovery import REGISTRY

#: ``make(name, entry_points={group: {ep_name: "module:attr"}}, modules={name: source})``
FakeDist = Callable[..., Path]

__all__ = ["FakeDist", "fake_distributions", "one_plugin"]


def _write_module(root: Path, name: str, source: str) -> None:
    """``a.b.c`` becomes ``a/b/c.py`` with ``__init__.py`` files for the packages."""
    *packages, leaf = name.split(".")
    folder = root
    for package in packages:
        folder = folder / package
        folder.mkdir(exist_ok=True)
        (folder / "__init__.py").touch()
    (folder / f"{leaf}.py").write_text(source)


@contextmanager
def fake_distributions() -> Iterator[FakeDist]:
    """Yield a factory that installs fake distributions until the block ends.

    Give modules fresh top-level names: a package already imported from elsewhere keeps
    its own ``__path__``.
    """
    with tempfile.TemporaryDirectory(prefix="qcore-fake-dists-") as tmp:
        root = Path(tmp)
        saved_path = list(sys.path)
        saved_modules: dict[str, ModuleType] = {}
        written: set[str] = set()

        def make(
            name: str,
            entry_points: dict[str, dict[str, str]] | None = None,
            modules: dict[str, str] | None = None,
        ) -> Path:
            for module_name, source in (modules or {}).items():
                _write_module(root, module_name, source)
                written.add(module_name)
                if module_name in sys.modules:  # shadowed: restored afterwards
                    saved_modules.setdefault(module_name, sys.modules.pop(module_name))
            info = root / f"{name.replace('-', '_')}-1.0.dist-info"
            info.mkdir()
            (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
            lines = []
            for group, points in (entry_points or {}).items():
                lines.append(f"[{group}]")
                lines += [f"{ep} = {value}" for ep, value in points.items()]
                lines.append("")
            (info / "entry_points.txt").write_text("\n".join(lines))
            if str(root) not in sys.path:
                sys.path.insert(0, str(root))
            importlib.invalidate_caches()
            REGISTRY.reset()
            return root

        try:
            yield make
        finally:
            sys.path[:] = saved_path
            for loaded in list(sys.modules):
                module_file = getattr(sys.modules[loaded], "__file__", None) or ""
                if loaded in written or module_file.startswith(str(root)):
                    del sys.modules[loaded]
            sys.modules.update(saved_modules)
            importlib.invalidate_caches()
            REGISTRY.reset()


def one_plugin(
    make: FakeDist,
    distribution: str,
    name: str,
    module: str,
    source: str | None = None,
    *,
    group: str = "qcore.backends",
) -> Path:
    """A fake distribution with one plugin: entry point ``name`` in ``group`` pointing at
    ``module:PLUGIN``, and ``module`` written from ``source`` (None: no module, so loading
    the plugin fails on the import)."""
    modules = {module: source} if source is not None else None
    return make(distribution, {group: {name: f"{module}:PLUGIN"}}, modules)
