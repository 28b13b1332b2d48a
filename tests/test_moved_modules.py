"""Modules moved by the layout by flow (0.2): each old name still imports, as the very
module at its new name, with a DeprecationWarning naming the new one; nothing in the
repository still spells an old name."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import qcore
import qinductor_x86
from qcore.plugins.renamed import RenamedModules

ROOT = Path(__file__).parents[1]
MOVES = {**qcore.MOVED_IN_0_2, **qinductor_x86.MOVED_IN_0_2}
#: The files that declare the old names.
DECLARING = {
    "packages/qcore/src/qcore/__init__.py",
    "packages/qinductor-x86/src/qinductor_x86/__init__.py",
    "tests/test_moved_modules.py",
}


def _forget(name: str) -> None:
    """Drop the old name (and its submodules') from the import system, so the next import
    or attribute read resolves it afresh; the modules at the new names stay loaded."""
    for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[loaded]
    parent, _, leaf = name.rpartition(".")
    if parent in sys.modules and leaf in vars(sys.modules[parent]):
        delattr(sys.modules[parent], leaf)


@pytest.mark.parametrize("old", sorted(MOVES))
def test_an_old_name_imports_the_same_module_and_says_where_it_went(old: str) -> None:
    new = importlib.import_module(MOVES[old])
    _forget(old)
    with pytest.warns(DeprecationWarning, match=re.escape(f"{old} moved to {MOVES[old]}")):
        aliased = importlib.import_module(old)
    assert aliased is new
    assert new.__spec__ is not None and new.__spec__.name == MOVES[old]
    assert new.__name__ == MOVES[old]


def test_a_moved_package_covers_its_submodules_without_a_second_copy() -> None:
    real = importlib.import_module("qcore.pt2e.annotation.registry")
    _forget("qcore.annotation")
    with pytest.warns(DeprecationWarning, match="qcore.annotation.registry moved"):
        registry = importlib.import_module("qcore.annotation.registry")
    assert registry is real
    # one registry: an annotator registered through the old name is seen by the new one
    assert registry.ANNOTATORS is real.ANNOTATORS


def test_old_attribute_spellings_resolve_with_a_warning() -> None:
    _forget("qcore.dtypes")
    with pytest.warns(DeprecationWarning, match="qcore.dtypes moved to qcore.fx.dtypes"):
        assert qcore.dtypes is importlib.import_module("qcore.fx.dtypes")  # type: ignore[attr-defined]
    with pytest.warns(DeprecationWarning, match="qcore.plugins.REGISTRY moved"):
        assert qcore.plugins.REGISTRY is qcore.plugins.discovery.REGISTRY
    from qinductor_x86.quantizer import X86InductorQuantizer
    from qinductor_x86.quantizer.x86_inductor_quantizer import X86InductorQuantizer as real

    assert X86InductorQuantizer is real


def test_names_that_never_existed_still_fail() -> None:
    finder = RenamedModules({"pkg.old": "pkg.new"}, until="never")
    assert finder.new_name("pkg.old.sub") == "pkg.new.sub"
    assert finder.new_name("pkg.older") is None
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("qcore.testing.no_such_module")
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = qcore.plugins.nothing


def test_nothing_in_the_repository_spells_an_old_name() -> None:
    old = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, MOVES)) + r")(?![\w])")
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    spelled = []
    for name in tracked:
        if name in DECLARING or not re.search(r"\.(py|md|toml|ini|txt)$", name):
            continue
        text = (ROOT / name).read_text(encoding="utf-8", errors="replace")
        spelled += [f"{name}: {m.group(1)}" for m in old.finditer(text)]
    assert not spelled, "old module names (use the new ones):\n" + "\n".join(spelled)


def test_the_spelling_check_finds_an_old_name() -> None:
    old = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, MOVES)) + r")(?![\w])")
    assert old.search("from qcore.annotation.registry import ANNOTATORS")
    assert not old.search("from qcore.pt2e.annotation.registry import ANNOTATORS")


def test_installing_the_old_names_twice_adds_no_second_finder() -> None:
    from qcore.plugins.renamed import keep_old_names

    before = list(sys.meta_path)
    again = keep_old_names(qcore.MOVED_IN_0_2, until="qcore 0.3")
    assert sys.meta_path == before and again in before
