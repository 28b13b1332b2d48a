"""qinductor-x86 through its entry points: discoverable, and inert until asked (importing it changes nothing in Inductor)."""

from __future__ import annotations

import pytest

import qcore
from qcore.plugins.discovery import REGISTRY


def test_importing_the_package_changes_no_inductor_state(import_census: dict[str, object]) -> None:
    """In a fresh interpreter: ``import qinductor_x86, qinductor_x86.plugin`` changes no
    Inductor custom-pass hook (conftest.py's census)."""
    assert import_census["package"] == []


@pytest.mark.parametrize("kind", ["quantizer", "lowering"])
def test_descriptors_load_through_entry_points(kind: str) -> None:
    REGISTRY.reset()
    descriptor = REGISTRY.load(kind, "x86")
    assert descriptor.name == "x86"
    assert descriptor.api_version == qcore.PLUGIN_API_VERSION


@pytest.mark.parametrize("get", [qcore.get_lowering])
def test_the_lowering_loads_through_its_entry_point(get: object) -> None:
    from qcore.plugin_api import Lowering
    from qinductor_x86.lowering import X86Lowering

    REGISTRY.reset()
    lowering = get("x86")  # type: ignore[operator]
    assert isinstance(lowering, X86Lowering) and isinstance(lowering, Lowering)


def test_the_quantizer_loads_through_its_entry_point() -> None:
    from qinductor_x86.quantizer.x86_inductor_quantizer import (
        X86InductorQuantizer,
        get_default_x86_inductor_quantization_config,
    )

    REGISTRY.reset()
    quantizer = qcore.get_quantizer("x86", is_qat=True)
    assert isinstance(quantizer, X86InductorQuantizer)
    assert quantizer.global_config is get_default_x86_inductor_quantization_config(is_qat=True)
