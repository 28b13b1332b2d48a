"""Old module names that still import, for one release, with a DeprecationWarning.

A package that moves a public module keeps its old dotted name working: the old name
resolves to the very module object at the new name (never a second copy, which would
register every annotator twice and break ``isinstance``), and says where it went.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Mapping, Sequence
from types import ModuleType


class RenamedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves each old name in ``moves`` (old -> new dotted name) to the new module; a
    package's old name covers its submodules. ``until`` names the release that drops them."""

    def __init__(self, moves: Mapping[str, str], *, until: str) -> None:
        self.moves = dict(moves)
        self.until = until
        self._real_specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def new_name(self, old: str) -> str | None:
        """Where ``old`` lives now, or None if it is no moved name."""
        for moved in sorted(self.moves, key=len, reverse=True):
            if old == moved:
                return self.moves[moved]
            if old.startswith(moved + "."):
                return self.moves[moved] + old[len(moved) :]
        return None

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if self.new_name(fullname) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = self.new_name(spec.name)
        assert new is not None  # find_spec answered only for moved names
        warnings.warn(
            f"{spec.name} moved to {new}; the old name goes in {self.until}",
            DeprecationWarning,
            stacklevel=2,
        )
        module = importlib.import_module(new)
        self._real_specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # Nothing to run; the import system has just stamped the old name's spec on the
        # module, and the module keeps its own (pickling and reloads read it).
        old = module.__spec__.name if module.__spec__ is not None else ""
        module.__spec__ = self._real_specs.pop(old, module.__spec__)


def keep_old_names(moves: Mapping[str, str], *, until: str) -> RenamedModules:
    """Install a :class:`RenamedModules` for ``moves`` ahead of the path finders (so an old
    package's submodules are never found, and run, a second time under the old name).
    Idempotent: a package reloaded, or imported again after a test dropped it, reuses the
    finder it installed, so the import system never gathers copies."""
    for finder in sys.meta_path:
        if isinstance(finder, RenamedModules) and finder.moves == dict(moves):
            return finder
    finder = RenamedModules(moves, until=until)
    sys.meta_path.insert(0, finder)
    return finder
