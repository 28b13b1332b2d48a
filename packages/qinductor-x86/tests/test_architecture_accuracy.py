"""On a CPU without VNNI the x86 quantizer keeps torchao's accuracy on real architectures,
and this package's lowering runs what it makes exactly.

The replicas of ``qcore.testing.architectures`` (torchvision's block structure and weight
initialisation) are quantized for an AVX2 target by this package's quantizer and by
torchao 0.18's (full-range weights, the reference), both evaluated eagerly against the
float model. ShuffleNetV2 is the case that lost 3 dB with never-overflow weights: it is
also compiled with the lowering, on both routes, and must match its eager converted model.
"""

from __future__ import annotations

from typing import Any

import lowering_zoo as zoo
import pytest
import torch

import qcore
from qcore.metrics import sqnr
from qcore.testing.architectures import architecture

ARCHITECTURES = ["shufflenet_v2", "mobilenet_v3"]


def _quantize(name: str, quantizer: Any) -> tuple[Any, torch.nn.Module, tuple[torch.Tensor, ...]]:
    case = architecture(name)
    model = case.model()
    calibration = [case.inputs(b) for b in range(1, 4)]
    converted = zoo.quantize(model, case.inputs(0), quantizer, calibration)
    return converted, model, case.inputs(50)


@pytest.fixture(scope="module")
def quantized_by_ours() -> dict[str, tuple[Any, torch.nn.Module, tuple[torch.Tensor, ...]]]:
    """Each architecture quantized once by this package's quantizer for an AVX2 target:
    the eager comparison and the compiled one read the same converted model."""
    with qcore.host.targeting("avx2"):
        return {name: _quantize(name, "x86") for name in ARCHITECTURES}


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_within_a_decibel_of_torchaos_eager_accuracy(
    quantized_by_ours: dict[str, tuple[Any, torch.nn.Module, tuple[torch.Tensor, ...]]], name: str
) -> None:
    ours, model, held_out = quantized_by_ours[name]
    with qcore.host.targeting("avx2"):
        theirs, _, _ = _quantize(name, "torchao")
    with torch.no_grad():
        expected = model(*held_out)
        mine, reference = sqnr(expected, ours(*held_out)), sqnr(expected, theirs(*held_out))
    assert mine >= reference - 1.0, (name, mine, reference)


def test_compiled_matches_eager_on_both_routes(
    quantized_by_ours: dict[str, tuple[Any, torch.nn.Module, tuple[torch.Tensor, ...]]],
) -> None:
    """The avx2 route runs each layer that can overflow as one kernel of twice the depth,
    exactly, on any CPU; the VNNI route lowers the same kernels at single depth, exact on
    a VNNI CPU (on one without, oneDNN saturates them: only the kernel count is compared)."""
    converted, _, held_out = quantized_by_ours["shufflenet_v2"]
    kernels, errors = {}, {}
    for route in ("avx2", "avx512_vnni"):
        result = zoo.lower(converted, held_out, target=route)
        kernels[route] = result.kernels
        assert kernels[route] and result.report.int8_kernels == len(kernels[route])
        errors[route] = result.relative_l2
    assert sorted(kernels["avx2"]) == sorted(kernels["avx512_vnni"])
    assert errors["avx2"] <= 2e-2, errors
    if not qcore.host.probe().saturates_u8s8:
        assert errors["avx512_vnni"] <= 2e-2, errors
