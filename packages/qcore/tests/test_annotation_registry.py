"""The annotator registry: namespaces, order, idempotence, conflicts, lookup errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from qcore.errors import PluginConflictError
from qcore.pt2e.annotation.registry import Annotator, AnnotatorRegistry


def _fn(gm: object, config: object, filter_fn: object) -> None:
    return None


A = Annotator("a", _fn, description="first")
B = Annotator("b", _fn, dynamic=True)
C = Annotator("c", _fn, static=False, training_pattern=True)


def test_owner_first_then_extensions_in_order() -> None:
    reg = AnnotatorRegistry()
    reg.add("ns", C, source="ext 1.0")  # an extension may arrive before the owner
    reg.define("ns", [A, B], source="owner 1.0")
    assert [a.name for a in reg.annotators("ns")] == ["a", "b", "c"]
    assert reg.source("ns", "c") == "ext 1.0"


def test_add_is_idempotent_and_conflicts_name_both_sources() -> None:
    reg = AnnotatorRegistry()
    reg.define("ns", [A], source="owner 1.0")
    reg.add("ns", B, source="ext 1.0")
    reg.add("ns", B, source="ext 1.0")
    assert len(reg.annotators("ns")) == 2
    with pytest.raises(PluginConflictError, match=r"ext 1\.0.*other 2\.0"):
        reg.add("ns", Annotator("b", _fn), source="other 2.0")
    with pytest.raises(PluginConflictError, match=r"owner 1\.0.*ext 1\.0"):
        reg.add("ns", Annotator("a", _fn), source="ext 1.0")
    reg.define("ns", [A], source="owner 1.0")  # same definition again: fine
    with pytest.raises(PluginConflictError, match=r"owner 1\.0.*intruder"):
        reg.define("ns", [A], source="intruder")


def test_lookup_errors_list_known_names() -> None:
    reg = AnnotatorRegistry()
    reg.define("ns", [A, B], source="owner")
    with pytest.raises(LookupError, match=r"'zz'.*known: a, b"):
        reg.get("ns", "zz")
    with pytest.raises(LookupError, match=r"no annotator namespace 'nope'.*common.*ns"):
        reg.annotators("nope")


def test_capabilities_select_annotators_by_config_kind() -> None:
    assert A.runs_for(is_dynamic=False, is_qat=False) and not A.runs_for(
        is_dynamic=True, is_qat=False
    )
    assert B.runs_for(is_dynamic=True, is_qat=False)
    assert C.runs_for(is_dynamic=False, is_qat=True) and not C.runs_for(
        is_dynamic=True, is_qat=True
    )
    assert C.marks == "training-pattern"


def test_bad_annotators_are_rejected_naming_the_field() -> None:
    with pytest.raises(ValueError, match="name"):
        Annotator("not a name", _fn)
    with pytest.raises(ValueError, match="static, dynamic, training_pattern"):
        Annotator("x", _fn, static=False)
    with pytest.raises(TypeError, match="fn must be callable"):
        Annotator("x", "nope")  # type: ignore[arg-type]


def test_importing_annotation_modules_registers_nothing_and_leaves_the_rng_alone() -> None:
    """In a fresh interpreter: importing every annotation module (what plugins import)
    defines no namespace and draws nothing from torch's global RNG; the first lookup of
    "common" defines it from ``COMMON``, after an extension's addition too."""
    code = (
        "import torch\n"
        "torch.manual_seed(0); expected = torch.rand(3)\n"
        "torch.manual_seed(0)\n"
        "import qcore.pt2e.annotation.common, qcore.pt2e.annotation.common_annotators as c\n"
        "import qcore.pt2e.annotation.transforms, qcore.pt2e.annotation.registry_quantizer\n"
        "from qcore.pt2e.annotation.registry import ANNOTATORS, Annotator\n"
        "assert torch.equal(torch.rand(3), expected), 'an import drew from the global RNG'\n"
        "assert 'common' not in ANNOTATORS._namespaces, 'an import registered common'\n"
        "ANNOTATORS.add('common', Annotator('ext', lambda *a: None), source='ext')\n"
        "names = [a.name for a in ANNOTATORS.annotators('common')]\n"
        "assert names == [*(a.name for a in c.COMMON), 'ext'], names\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr


def test_the_split_modules_old_name_warns_and_still_holds_its_names() -> None:
    """``qcore.pt2e.annotation.common`` is retired with a deprecation: its names still import,
    each the same object as in the module that owns it now."""
    import importlib

    import qcore.pt2e.annotation.common as old
    from qcore.pt2e.annotation import claims, common_annotators, ops, transforms

    with pytest.warns(DeprecationWarning, match=r"qcore\.pt2e\.annotation\.common is split"):
        importlib.reload(old)
    assert old.COMMON is common_annotators.COMMON and old.passes is claims.passes
    assert old.CONV is ops.CONV and old.conv3d_as_conv2d is transforms.conv3d_as_conv2d
