"""No duplicated work: an int8 result read by several kernels is computed once.

Graphs whose int8 results fan out (after an add, a cat and a reshape; 2-D and 3-D linear
inputs; see ``lower_fanout.py``), quantized by torchao's quantizer (full-range weights), are
compiled by torch 2.13's own x86 passes and by this lowering alone, each in the fresh
interpreter of its lowering mode (``probe_modes.py``). The reference is torch's generated code: the same oneDNN kernels with the same
output dtypes (a sum that feeds a quantize is written as uint8), one packed weight per
layer, on both target routes. On the saturating route (avx2) every op that can overflow
takes the doubled reduction, still one kernel each, and the compiled output is the eager
converted model's; on the VNNI route it is torch's own compiled output.

Which ops can overflow is computed independently here, by brute force
(``test_lowering_saturation.brute_force_worst_pair``).
"""

from __future__ import annotations

from typing import Any

import lower_fanout
import pytest
import torch

TARGETS = lower_fanout.TARGETS
GRAPHS = tuple(lower_fanout.GRAPHS)
LAYERS = 4  # every graph has four linear layers


PROBED = (("builtins", "fanout"), ("standalone", "fanout"))


@pytest.fixture(scope="module")
def measured(probes: Any) -> dict[str, dict[str, Any]]:
    return {
        "torch": probes.result("builtins", "fanout"),
        "ours": probes.result("standalone", "fanout"),
    }


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("graph", GRAPHS)
def test_same_kernels_and_packed_weights_as_torch(
    measured: dict[str, dict[str, Any]], graph: str, target: str
) -> None:
    theirs, ours = measured["torch"][graph], measured["ours"][f"{graph}@{target}"]
    # the same kernels, each with the same output dtype (fused output quantizes)
    assert sorted(ours["kernels"]) == sorted(theirs["kernels"])
    assert len(ours["kernels"]) == LAYERS
    # one packed weight per layer, each read by one kernel, none packed twice
    assert len(set(ours["packed_weights"])) == len(set(theirs["packed_weights"])) == LAYERS
    assert len(ours["our_packed_constants"]) == LAYERS
    assert ours["prepacked"] == LAYERS


def test_fanned_out_sum_is_written_as_uint8(measured: dict[str, dict[str, Any]]) -> None:
    """The reported case: ``t = l1(x) + l2(x)`` read by two linears is one binary kernel
    with the next quantize fused, on both routes, as torch writes it."""
    for graph in ("add_2d", "add_3d"):
        assert "qlinear_pointwise.binary_tensor -> uint8" in measured["torch"][graph]["kernels"]
        for target in TARGETS:
            kernels = measured["ours"][f"{graph}@{target}"]["kernels"]
            assert kernels.count("qlinear_pointwise.binary_tensor -> uint8") == 1


@pytest.mark.parametrize("graph", GRAPHS)
def test_saturating_route_doubles_what_can_overflow_and_is_exact(
    measured: dict[str, dict[str, Any]], graph: str
) -> None:
    ours = measured["ours"][f"{graph}@avx2"]
    assert ours["doubled"] == ours["can_overflow"] > 0
    assert ours["rel_l2_compiled_vs_eager"] <= 2e-2


@pytest.mark.parametrize("graph", GRAPHS)
def test_vnni_route_is_torchs_lowering(measured: dict[str, dict[str, Any]], graph: str) -> None:
    """Nothing doubled; the numbers are those of torch's own compiled graph (the same
    kernels: exact on a VNNI CPU, saturating alike on one without VNNI)."""
    ours, theirs = measured["ours"][f"{graph}@avx512_vnni"], measured["torch"][graph]
    assert ours["doubled"] == 0
    reference, output = torch.tensor(theirs["output"]), torch.tensor(ours["output"])
    assert float((output - reference).norm() / reference.norm()) <= 2e-2
