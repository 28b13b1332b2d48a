"""The annotator registry: namespaces, order, idempotence, conflicts, lookup errors."""

from __future__ import annotations

import pytest

from qcore.annotation.registry import Annotator, AnnotatorRegistry
from qcore.errors import PluginConflictError


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
