"""qcore.host: what this CPU does for int8, and naming another target."""

from __future__ import annotations

import pytest
import torch

from qcore import host


def test_probe_agrees_with_torch_cpu_capabilities(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    caps = torch.cpu.get_capabilities()
    found = host.probe()
    assert found.source == "probed"
    assert found.avx2 == bool(caps["avx2"])
    assert found.vnni == bool(caps["avx512_vnni"] or caps["avx_vnni"])
    assert found.amx == bool(caps["amx_int8"] and caps["amx_tile"])
    vnni_or_amx = caps["avx512_vnni"] or caps["avx_vnni"] or caps["amx_int8"]
    assert found.saturates_u8s8 == bool(caps["avx2"] and not vnni_or_amx)


@pytest.mark.parametrize(
    ("onednn_cap", "expected"),
    [("AVX2", "avx2"), ("avx512_core", "avx512"), ("SSE41", "baseline"), ("AVX512_CORE_AMX", None)],
)
def test_onednn_isa_cap_lowers_the_probe(
    monkeypatch: pytest.MonkeyPatch, onednn_cap: str, expected: str | None
) -> None:
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    uncapped = host.probe()
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", onednn_cap)
    capped = host.probe()
    order = list(reversed(list(host.KNOWN_TARGETS)))
    if expected is None:  # an ISA we do not map never raises nor lowers the answer
        assert capped == uncapped
    else:
        assert order.index(capped.isa) == min(order.index(uncapped.isa), order.index(expected))


def test_named_targets() -> None:
    assert host.parse_target("avx2").saturates_u8s8
    assert host.parse_target("AVX512-VNNI").vnni
    assert not host.parse_target("avx512_vnni").saturates_u8s8
    assert not host.parse_target("amx").saturates_u8s8
    assert host.parse_target("avx512").saturates_u8s8  # Skylake-SP: AVX-512 without VNNI
    assert not host.parse_target("baseline").saturates_u8s8
    with pytest.raises(ValueError, match=r"unknown int8 target 'zen9'.*avx2"):
        host.parse_target("zen9")


def test_scoped_target_nests_and_restores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(host.ENV_TARGET, raising=False)
    probed = host.target()
    with host.targeting("avx2") as outer:
        assert host.target() == outer and outer.source == "override"
        with host.targeting("amx"):
            assert host.target().isa == "amx"
        assert host.target().isa == "avx2"
    assert host.target() == probed


def test_environment_and_process_wide_target(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(host.ENV_TARGET, "avx512_vnni")
    assert host.target().isa == "avx512_vnni"
    assert host.target().source == host.ENV_TARGET
    host.set_target("avx2")
    try:
        assert host.target().isa == "avx2"  # set_target beats the environment
        with host.targeting("amx"):
            assert host.target().isa == "amx"  # a scope beats both
    finally:
        host.set_target(None)
    monkeypatch.setenv(host.ENV_TARGET, "pentium")
    with pytest.raises(ValueError, match=f"{host.ENV_TARGET}='pentium'"):
        host.target()


def test_descriptions_say_what_the_isa_means_for_int8() -> None:
    assert "saturating 16-bit" in host.parse_target("avx2").describe()
    assert "VNNI" in host.parse_target("avx512_vnni").describe()
    assert "AMX" in host.parse_target("amx").describe()
