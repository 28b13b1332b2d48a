"""Inductor's FX graph cache key covers every first-party module the lowering runs.

Each pass's ``uuid()`` is computed in a fresh interpreter (torch caches file hashes per
process) over a copy of this repository's sources; editing any module the passes import,
however indirectly, must change it, and an untouched tree must give the same key.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import qcore
import qinductor_x86
from qcore.testing.fresh import run_fresh

PACKAGES = {"qcore": Path(qcore.__file__).parent, "qinductor_x86": Path(qinductor_x86.__file__).parent}

CHILD = """
import sys
import qinductor_x86
from qinductor_x86.lowering import code_key, make_lowering, passes
made = {cls.__name__: cls(make_lowering()) for cls in (passes.LiftUp, passes.Lower, passes.CountLowerings)}
first_party = sorted(
    m.__file__ for name, m in sys.modules.items()
    if name.split(".")[0] in code_key.FIRST_PARTY and getattr(m, "__file__", None)
)
from qcore.testing.fresh import emit  # after the census: it imports qcore.testing
emit({
    "keys": {hook: p.uuid().hex() for hook, p in made.items()},
    "loaded": first_party,
    "hashed": [str(p) for p in code_key.source_files()],
    "root": qinductor_x86.__file__,
})
"""


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("src")
    for name, source in PACKAGES.items():
        shutil.copytree(source, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _keys(tree: Path) -> dict[str, object]:
    outcome = run_fresh(CHILD, env={"PYTHONPATH": str(tree)})
    assert outcome.ok, outcome.describe()
    result: dict[str, object] = outcome.result()
    assert str(result["root"]).startswith(str(tree)), "the child must import the copied tree"
    return result


@pytest.fixture(scope="module")
def baseline(tree: Path) -> dict[str, object]:
    return _keys(tree)


def test_every_first_party_module_loaded_by_the_passes_is_hashed(baseline: dict[str, object]) -> None:
    loaded, hashed = set(baseline["loaded"]), set(baseline["hashed"])  # type: ignore[call-overload]
    assert loaded <= hashed, sorted(loaded - hashed)


@pytest.mark.parametrize(
    "module",
    [
        "qinductor_x86/_torch_private.py",
        "qcore/int8/saturation.py",
        "qcore/int8/host.py",
    ],
)
def test_editing_a_module_the_passes_import_changes_every_key(
    tree: Path, baseline: dict[str, object], module: str
) -> None:
    path = tree / module
    original = path.read_text()
    try:
        path.write_text(original + "\n# an edit\n")
        edited = _keys(tree)
    finally:
        path.write_text(original)
    before, after = baseline["keys"], edited["keys"]
    assert isinstance(before, dict) and isinstance(after, dict)
    assert all(before[hook] != after[hook] for hook in before), module


def test_an_untouched_tree_gives_the_same_keys(tree: Path, baseline: dict[str, object]) -> None:
    assert _keys(tree)["keys"] == baseline["keys"]
