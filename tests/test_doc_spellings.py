"""Every ``qcore.<name>`` a page tells users to write resolves as they write it.

A dotted name in a README, in ``docs/`` or in CONTRIBUTING.md is either an entry-point
group (``qcore.backends``) or a Python name. A Python name must resolve by importing its
longest module prefix, and every module along the way must be importable under that
spelling (``import qcore.host``, ``from qcore.host import targeting``), not only reachable
as an attribute of its parent. A name the code no longer has fails here, naming the page.
"""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from qcore.plugin_api import GROUPS

ROOT = Path(__file__).parents[1]
PAGES = sorted(
    [
        ROOT / "README.md",
        ROOT / "CONTRIBUTING.md",
        *ROOT.glob("docs/*.md"),
        *ROOT.glob("packages/*/README.md"),
        *ROOT.glob("examples/*/README.md"),
    ]
)
#: ``qcore`` and at least one dotted part; not the tail of a longer name or a path
SPELLING = re.compile(r"(?<![\w./-])qcore(?:\.[A-Za-z_]\w*)+")


def spellings() -> dict[str, list[str]]:
    """Each spelling, with the pages that use it."""
    found: dict[str, list[str]] = {}
    for page in PAGES:
        for name in SPELLING.findall(page.read_text(encoding="utf-8")):
            found.setdefault(name, []).append(str(page.relative_to(ROOT)))
    # the groups qcore reads, and any an installed distribution declares (qcore.core)
    groups = set(GROUPS.values()) | set(metadata.entry_points().groups)
    return {name: pages for name, pages in sorted(found.items()) if name not in groups}


def resolve(spelling: str) -> Any:
    """The object ``spelling`` names: its longest importable module prefix, then
    attributes; a module reached as an attribute must import under its own spelling."""
    parts = spelling.split(".")
    for end in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:end]))
            break
        except ModuleNotFoundError as exc:
            if exc.name is None or not spelling.startswith(exc.name):
                raise  # a module that exists failed to import one of its own imports
    for i in range(end, len(parts)):
        obj = getattr(obj, parts[i])
        if isinstance(obj, ModuleType):
            spelled = ".".join(parts[: i + 1])
            assert importlib.import_module(spelled) is obj, (
                f"{spelled} is an attribute standing for {obj.__name__}, but "
                f"`import {spelled}` fails"
            )
    return obj


def test_the_pages_spell_qcore_names() -> None:
    """The extraction finds the names this test exists for (an empty list passes anything)."""
    found = spellings()
    assert {"qcore.host.targeting", "qcore.get_quantizer", "qcore.fx.prepare"} <= set(found)
    assert "qcore.backends" not in found  # an entry-point group, not a module


@pytest.mark.parametrize(("spelling", "pages"), sorted(spellings().items()))
def test_each_spelling_resolves_as_written(spelling: str, pages: list[str]) -> None:
    try:
        resolve(spelling)
    except (ImportError, AttributeError, AssertionError) as exc:
        pytest.fail(f"{spelling} (in {', '.join(sorted(set(pages)))}) does not resolve: {exc}")


def test_qcore_host_is_reachable_each_way_users_write_it() -> None:
    """In a fresh interpreter: the attribute after ``import qcore``, the submodule import,
    and the from-import all name the same function."""
    code = (
        "import qcore\n"
        "attribute = qcore.host.targeting\n"
        "import qcore.host\n"
        "from qcore.host import targeting\n"
        "assert attribute is qcore.host.targeting is targeting\n"
        "assert 'host' in dir(qcore)\n"
        "with qcore.host.targeting('avx2') as chosen:\n"
        "    assert qcore.host.target() is chosen\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("name", ["saturation", "weight_ranges"])
def test_retired_aliases_warn_and_name_the_module_to_import(name: str) -> None:
    import qcore

    with pytest.warns(DeprecationWarning, match=f"import qcore.int8.{name} instead"):
        module = getattr(qcore, name)
    assert module is importlib.import_module(f"qcore.int8.{name}")
