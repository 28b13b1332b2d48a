"""Held-out models, our quantizer and our lowering alone (torch 2.13's copy switched off),
against torchao 0.18's flow (its quantizer and its passes), each in the fresh interpreter
of its lowering mode (``lower_models.py``, run by ``probe_modes.py``): a reused-ReLU ResNet, a MobileNet-style net (hardswish, ReLU6,
SiLU, squeeze-excite, residual adds), a transformer block and an MLP (cat and pools on
full-range weights: test_architecture_accuracy.py's ShuffleNetV2); and two of them (the
ResNet and the MLP) quantized by the XNNPACK quantizer (signed int8 activations; test_lowering_signed.py has the rest).

These hold on hosts with and without VNNI: there, torchao's flow saturates and ours
stays exact (ops that can overflow run on a doubled reduction, one kernel each): the
compiled model's output codes are the eager converted model's (``qcore.testing.codes``).
"""

from __future__ import annotations

from typing import Any

import lowering_zoo as zoo
import pytest
from lower_models import XNNPACK_MODELS

MODELS = ["resnet_reused", "mobilenet", "transformer", "mlp"]


PROBED = (("standalone", "models"), ("reference", "models"))


@pytest.fixture(scope="module")
def ours(probes: Any) -> dict[str, Any]:
    return {**probes.result("standalone", "models"), "_host": probes.mode("standalone")["_host"]}


@pytest.fixture(scope="module")
def torchao(probes: Any) -> dict[str, Any]:
    return probes.result("reference", "models")  # type: ignore[no-any-return]


def test_torchs_copy_stayed_off(ours: dict[str, Any]) -> None:
    assert not any(ours["_other_passes"].values()), ours["_other_passes"]


@pytest.mark.parametrize("model", MODELS)
def test_at_least_as_many_int8_kernels_as_torchaos_flow(
    ours: dict[str, Any], torchao: dict[str, Any], model: str
) -> None:
    mine, theirs = ours[model]["x86"], torchao[model]
    assert mine["kernels"] >= theirs["kernels"] > 0, (mine, theirs)
    assert mine["reported_kernels"] == mine["kernels"]


@pytest.mark.parametrize("model", MODELS)
def test_sqnr_no_more_than_1_db_below_torchaos_flow(
    ours: dict[str, Any], torchao: dict[str, Any], model: str
) -> None:
    mine, theirs = ours[model]["x86"], torchao[model]
    assert mine["sqnr_compiled"] >= theirs["sqnr_compiled"] - 1, (ours["_host"], mine, theirs)


@pytest.mark.parametrize(
    ("model", "quantizer"),
    [*((m, "x86") for m in MODELS), *((m, "xnnpack") for m in XNNPACK_MODELS)],
)
def test_compiled_is_exactly_the_eager_converted_model(
    ours: dict[str, Any], model: str, quantizer: str
) -> None:
    mine = ours[model][quantizer]
    assert mine["kernels"] > 0, mine
    zoo.assert_exact(mine["codes_compiled_vs_eager"])


@pytest.mark.parametrize("model", XNNPACK_MODELS)
def test_xnnpack_quantized_models_use_onednn_int8_kernels(
    ours: dict[str, Any], model: str
) -> None:
    mine = ours[model]["xnnpack"]
    assert mine["kernels"] > 0 and mine["reported_kernels"] == mine["kernels"], mine
    # (numerics: test_compiled_is_exactly_the_eager_converted_model)
