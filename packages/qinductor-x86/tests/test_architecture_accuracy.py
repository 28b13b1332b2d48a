"""On a CPU without VNNI the x86 quantizer's accuracy-first rule (``weight_rule="per_layer"``)
keeps torchao's accuracy on real architectures, and this package's lowering runs what the
quantizer makes exactly (the default rule's bound: test_budgeted_default.py).

The replicas of ``qcore.zoo.architectures`` (torchvision's block structure and weight
initialisation) are quantized for an AVX2 target by this package's quantizer and by
torchao 0.18's (full-range weights, the reference), both evaluated eagerly against the
float model. ShuffleNetV2 is the case that lost 3 dB with never-overflow weights: it is
also compiled with the lowering, on both routes, and must match its eager converted model
(a shorter ShuffleNetV2 for the compile, :data:`COMPILED`: the same units and ops).
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any

import lowering_zoo as zoo
import pytest
import torch

import qcore
from qcore.metrics import sqnr
from qcore.zoo.architectures import ShuffleNetV2, architecture
from qcore.zoo.models import ModelCase

ARCHITECTURES = ["shufflenet_v2", "mobilenet_v3"]
#: The ShuffleNetV2 the routes compile: one stride-1 unit, in the middle stage (repeats
#: (1, 2, 1); the replica above has (2, 3, 2)). It holds every unit and op of the replica
#: (stride-2 and stride-1 units: channel split, depthwise convs, cat, shuffle), in about
#: half the ops a compile costs in proportion to.
COMPILED = dataclasses.replace(
    architecture("shufflenet_v2"), build=partial(ShuffleNetV2, repeats=(1, 2, 1))
)


def _quantize(case: ModelCase, quantizer: Any) -> tuple[Any, torch.nn.Module, tuple[torch.Tensor, ...]]:
    model = case.model()
    calibration = [case.inputs(b) for b in range(1, 4)]
    converted = zoo.quantize(model, case.inputs(0), quantizer, calibration)
    return converted, model, case.inputs(50)


@pytest.fixture(scope="module")
def quantized_by_ours() -> dict[str, tuple[Any, torch.nn.Module, tuple[torch.Tensor, ...]]]:
    """Each architecture quantized once by this package's quantizer with the accuracy-first
    rule for an AVX2 target."""
    with qcore.host.targeting("avx2"):
        return {
            name: _quantize(architecture(name), qcore.get_quantizer("x86", weight_rule="per_layer"))
            for name in ARCHITECTURES
        }


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_within_a_decibel_of_torchaos_eager_accuracy(
    quantized_by_ours: dict[str, tuple[Any, torch.nn.Module, tuple[torch.Tensor, ...]]], name: str
) -> None:
    ours, model, held_out = quantized_by_ours[name]
    with torch.no_grad():
        mine = sqnr(model(*held_out), ours(*held_out))
    reference = zoo.torchaos_eager_sqnr(name)  # the same calibration and held-out batch
    assert mine >= reference - 1.0, (name, mine, reference)


ROUTES = ("avx2", "avx512_vnni")


@pytest.fixture(scope="module")
def shufflenet_compiled() -> dict[str, zoo.Lowered]:
    """:data:`COMPILED` as quantized for an AVX2 target with the accuracy-first rule,
    compiled once for each route (against one run of its eager converted model)."""
    with qcore.host.targeting("avx2"):
        quantizer = qcore.get_quantizer("x86", weight_rule="per_layer")
        converted, _, held_out = _quantize(COMPILED, quantizer)
    eager = zoo.eager_reference(converted, held_out)
    return {route: zoo.lower(converted, held_out, target=route, reference=eager) for route in ROUTES}


def test_both_routes_lower_the_same_kernels(shufflenet_compiled: dict[str, zoo.Lowered]) -> None:
    """The avx2 route runs each layer that can overflow as one kernel of twice the depth;
    the VNNI route lowers the same kernels at single depth (kernels counted in Inductor's
    generated code)."""
    kernels = {route: result.kernels for route, result in shufflenet_compiled.items()}
    assert kernels["avx2"] and sorted(kernels["avx2"]) == sorted(kernels["avx512_vnni"])
    # full-range layers that can overflow are there to double (the accuracy-first rule)
    assert shufflenet_compiled["avx2"].count("reduction doubled") > 0
    assert shufflenet_compiled["avx512_vnni"].count("reduction doubled") == 0
    for route, result in shufflenet_compiled.items():
        assert result.report.int8_kernels == len(kernels[route]), route


def test_avx2_route_is_exact_on_any_cpu(shufflenet_compiled: dict[str, zoo.Lowered]) -> None:
    """The eager converted model's codes: a doubled reduction never saturates."""
    zoo.assert_exact(shufflenet_compiled["avx2"].codes)


def test_vnni_route_is_exact_on_a_cpu_that_does_not_saturate(
    shufflenet_compiled: dict[str, zoo.Lowered],
) -> None:
    """The eager converted model's codes on a VNNI (or AMX) CPU, whose own route that is;
    on one without, oneDNN saturates the full-range layers at single depth (a skip that
    says so; the kernel count holds there too)."""
    zoo.skip_on_a_saturating_cpu()
    zoo.assert_exact(shufflenet_compiled["avx512_vnni"].codes)
