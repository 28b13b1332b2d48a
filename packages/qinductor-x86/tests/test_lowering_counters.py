"""torch's counters (``counters["inductor"]``) mean the same under this lowering alone as
under upstream's x86 passes (torch 2.13's own and torchao 0.18's; torchao's alone from
torch 2.14, which dropped its own), key by key, on every graph family.

Each side compiles every graph of ``lowering_counters_probe.GRAPHS`` once, in the fresh
interpreter of its lowering mode (``probe_modes.py``; which x86 passes exist is
process-wide and permanent):

* the reference: torch's built-in passes, torchao 0.18's quantizer module imported as
  users import it (so its passes are registered too);
* ours: torch's copy switched off before the first compile, torchao's never registered.

Both quantize the same models with this package's x86 quantizer, weights narrowed so that
nothing saturates or splits on any CPU. Keys that cannot be equal are listed, with the
reason, in one table, ``qinductor_x86.lowering.counters.ONE_SIDED``; every other key either
side bumps must be equal.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import lowering_zoo as zoo
import pytest
from lowering_counters_probe import GRAPHS, TARGETS

from qinductor_x86.lowering.counters import ONE_SIDED, QUANT_LIFT_UP, Family

FP16 = [name for name in GRAPHS if name.startswith("fp16")]
#: Graphs computed in bf16 rather than on int8 codes: the int8 weight-only linear (bf16
#: activations), within :data:`BF16_DB` of the eager model instead of exact.
BF16 = [name for name in GRAPHS if name.startswith("int8 weight-only")]
#: bf16 keeps 8 significant bits: each rounding errs by at most 2^-9 of the value. The eager
#: model rounds twice (the matmul's output, then the product with the scales), the kernel
#: once (it scales its fp32 sum): at most 3 * 2^-9 apart, 20 log10(2^9 / 3) = 44.6 dB.
BF16_DB = 44.0
#: The fp16 dynamic linears compute in fp32 on the same fp16 weights as eager: the sums
#: differ in order only, by float rounding (a relative 1e-6 at most: 120 dB). 80 dB
#: passes that, and fails a kernel that rounds the activations to fp16 as well (a
#: relative 2^-11: about 66 dB).
FP32_DB = 80.0


PROBED = (("reference", "counters"), ("standalone", "counters"))


@pytest.fixture(scope="module")
def sides(probes: Any) -> dict[str, dict[str, Any]]:
    """Two interpreters, one compile of each graph each."""
    return {
        "torch": probes.result("reference", "counters"),
        "ours": probes.result("standalone", "counters"),
    }


def _result(sides: dict[str, dict[str, Any]], side: str, graph: str) -> dict[str, Any]:
    result: dict[str, Any] = sides[side][graph]
    assert "error" not in result, result["error"]
    return result


def test_each_side_ran_the_passes_it_should(sides: dict[str, dict[str, Any]]) -> None:
    assert not any(sides["ours"]["_other_passes"].values()), sides["ours"]["_other_passes"]
    from qinductor_x86.lowering import torch_carries_x86_passes

    theirs = sides["torch"]["_other_passes"]
    # torchao's copy, and torch's own where this torch still carries one (2.13)
    assert theirs["torchao weight prepack and fusion"]
    assert theirs["torch weight prepack and fusion"] == torch_carries_x86_passes()


@pytest.mark.parametrize("graph", list(GRAPHS))
def test_counters_equal_torchs_key_by_key(sides: dict[str, dict[str, Any]], graph: str) -> None:
    theirs = _result(sides, "torch", graph)["counters"]
    ours = _result(sides, "ours", graph)["counters"]
    keys = sorted((set(theirs) | set(ours)) - set(ONE_SIDED))
    assert {k: ours.get(k, 0) for k in keys} == {k: theirs.get(k, 0) for k in keys}


@pytest.mark.parametrize("graph", list(GRAPHS))
def test_lift_ups_and_aliases(sides: dict[str, dict[str, Any]], graph: str) -> None:
    """The keys of the table that still have a reference: quantizes lifted, as torch's own
    lift-up counts them on the converted graph; the seed's names, as torch 2.13's."""
    reference = _result(sides, "torch", graph)["torchs_lift_ups"]
    ours = _result(sides, "ours", graph)["counters"]
    if reference is not None:
        assert ours.get(QUANT_LIFT_UP, 0) == reference
    for family in Family:
        prefixes = family.prefixes
        for alias in prefixes[1:]:
            for suffix in ("count", "nodes"):
                assert ours.get(f"{alias}_{suffix}", 0) == ours.get(f"{prefixes[0]}_{suffix}", 0)


def test_every_key_of_the_table_is_needed(sides: dict[str, dict[str, Any]]) -> None:
    """A key in ONE_SIDED differs between the sides on some graph (else it belongs with the
    compared ones)."""
    differing = {
        key
        for graph in GRAPHS
        for key in ONE_SIDED
        if _result(sides, "torch", graph)["counters"].get(key, 0)
        != _result(sides, "ours", graph)["counters"].get(key, 0)
    }
    assert differing == set(ONE_SIDED)


def test_references_lowered_every_family(sides: dict[str, dict[str, Any]]) -> None:
    """The reference is one: torch's passes bumped each family the zoo is meant to cover."""
    bumped = {key for graph in GRAPHS for key in _result(sides, "torch", graph)["counters"]}
    wanted = {f"{family.prefixes[0]}_count" for family in Family} - set(ONE_SIDED)
    assert wanted <= bumped, wanted - bumped
    assert any(
        _result(sides, "torch", graph)["torchs_lift_ups"] for graph in GRAPHS
    )


@pytest.mark.parametrize("graph", list(GRAPHS))
def test_kernels_and_numbers(sides: dict[str, dict[str, Any]], graph: str) -> None:
    """The kernels of torch's passes; the numbers of the eager converted model, exactly in
    codes (the bf16 weight-only linear within :data:`BF16_DB`, the fp16 ones below)."""
    theirs, ours = _result(sides, "torch", graph), _result(sides, "ours", graph)
    assert Counter(ours["kernels"]) == Counter(theirs["kernels"]), (theirs, ours)
    if graph in BF16:
        assert ours["sqnr_vs_eager"] >= BF16_DB, ours
    elif graph not in FP16:  # (fp16: test_fp16_dynamic_linears_are_prepacked)
        zoo.assert_exact(ours["codes"])
    assert ours["target"] in TARGETS
    assert not any("non-saturating" in name for name in ours["lowered"]), ours["lowered"]
    assert ours["inputs_unchanged"]  # the compiled model does not write into its inputs


@pytest.mark.parametrize("graph", FP16)
def test_fp16_dynamic_linears_are_prepacked(sides: dict[str, dict[str, Any]], graph: str) -> None:
    """torch 2.13's copy prepacks them; with it off, this lowering must (numbers: compiled
    against the eager converted model, whose linears read the fp16 weights upcast)."""
    ours = _result(sides, "ours", graph)
    assert ours["kernels"] and all("dynamic_fp16" in k for k in ours["kernels"]), ours
    assert ours["sqnr_vs_eager"] >= FP32_DB, ours
    assert any("fp16" in name for name in ours["lowered"]), ours["lowered"]
