"""Inductor's FX graph cache key covers every first-party module the lowering runs.

Each pass's ``uuid()`` is computed in a fresh interpreter over a copy of this repository's
sources; an untouched tree must give the same key in another fresh interpreter, and
editing any module the passes import, however indirectly, must change it. The edits are
made by that second interpreter, one at a time, each undone before the next, with the
per-process caches of what is hashed cleared after each (torch caches file hashes, the
lowering its list of files), so that every key is computed from the files as they are.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import qcore
import qinductor_x86
from qcore.testing.fresh import run_fresh

PACKAGES = {"qcore": Path(qcore.__file__).parent, "qinductor_x86": Path(qinductor_x86.__file__).parent}

#: Edited one at a time (``sys.argv[1:]``, relative to the tree), after the untouched keys.
EDITED = ["qinductor_x86/_torch_private.py", "qcore/int8/saturation.py", "qcore/int8/cpu_profile.py"]

CHILD = """
import sys
from pathlib import Path
import qinductor_x86
from torch._inductor.custom_graph_pass import get_hash_for_files
from qinductor_x86.lowering import code_key, custom_passes, make_lowering
made = {cls.__name__: cls(make_lowering()) for cls in (custom_passes.LiftUp, custom_passes.Lower, custom_passes.CountLowerings)}
first_party = sorted(
    m.__file__ for name, m in sys.modules.items()
    if name.split(".")[0] in code_key.FIRST_PARTY and getattr(m, "__file__", None)
)
from qcore.testing.fresh import emit  # after the census: it imports qcore.testing

def keys():
    get_hash_for_files.cache_clear()
    code_key.source_files.cache_clear()
    return {hook: p.uuid().hex() for hook, p in made.items()}

untouched = keys()
tree = Path(qinductor_x86.__file__).parents[1]
edited = {}
for module in sys.argv[1:]:
    path = tree / module
    original = path.read_text()
    try:
        path.write_text(original + "\\n# an edit\\n")
        edited[module] = keys()
    finally:
        path.write_text(original)
emit({
    "keys": untouched,
    "edited": edited,
    "after_edits": keys(),
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


def _keys(tree: Path, *edited: str) -> dict[str, object]:
    outcome = run_fresh(CHILD, args=edited, env={"PYTHONPATH": str(tree)})
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


@pytest.fixture(scope="module")
def rerun(tree: Path) -> dict[str, object]:
    """Another fresh interpreter on the same tree, which then edits each of ``EDITED``."""
    return _keys(tree, *EDITED)


@pytest.mark.parametrize("module", EDITED)
def test_editing_a_module_the_passes_import_changes_every_key(
    baseline: dict[str, object], rerun: dict[str, object], module: str
) -> None:
    before, edited = baseline["keys"], rerun["edited"]
    assert isinstance(before, dict) and isinstance(edited, dict)
    after = edited[module]
    assert set(after) == set(before)
    assert all(before[hook] != after[hook] for hook in before), module


def test_an_untouched_tree_gives_the_same_keys(
    baseline: dict[str, object], rerun: dict[str, object]
) -> None:
    assert rerun["keys"] == baseline["keys"]
    assert rerun["after_edits"] == baseline["keys"]  # every edit undone
