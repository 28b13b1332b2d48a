"""Models quantized by the x86 quantizer lower with torch 2.13's built-in Inductor passes
(``freezing=True``, ``torch.compile``) to oneDNN int8 kernels, and run.

Lowering happens in a fresh interpreter (``lower_builtin.py``, in mode ``builtins`` of
``probe_modes.py``) so that only torch's own passes are registered, whatever else this test
session imported. Compiles are slow, so
three small models: a torchvision-style ResNet calling one ReLU module twice per block
(torchao quantizes its one-ReLU-per-site twin instead), a MobileNet-style net (hardswish,
ReLU6, SiLU, squeeze-excite, residual adds) and an MLP (linear post-ops).

The kernel counts are taken for a VNNI target, where our quantizer must match torchao.
The numerics are taken for this host's target: on a CPU without VNNI oneDNN's int8
kernels saturate full-range weights, so they hold there only with the weight rule meant
for torch's passes, ``weight_rule="never_overflow"`` (``qinductor_x86.quantizer.config``); the
default, ``per_layer``, keeps full-range weights where narrowing costs accuracy, for this
package's lowering, which runs them exactly.
"""

from __future__ import annotations

from typing import Any

import lowering_zoo as zoo
import pytest

MODELS = ["resnet_reused", "mobilenet", "mlp"]


PROBED = (("builtins", "builtin"),)


@pytest.fixture(scope="module")
def lowered(probes: Any) -> dict[str, Any]:
    return {**probes.result("builtins", "builtin"), "_host": probes.mode("builtins")["_host"]}


@pytest.mark.parametrize("model", MODELS)
def test_generated_code_calls_at_least_torchaos_onednn_int8_kernels(
    lowered: dict[str, Any], model: str
) -> None:
    mine, theirs = lowered[model]["ours_vnni"], lowered[model]["torchao"]
    assert mine["kernels"] >= theirs["kernels"] > 0, (mine, theirs)
    kind = "qlinear" if model == "mlp" else "qconv"
    assert mine[kind] > 0
    assert mine["sqnr_eager"] >= 30, mine  # the eager converted model is close to float


@pytest.mark.parametrize("model", MODELS)
def test_compiled_output_is_the_eager_converted_models_on_this_host(
    lowered: dict[str, Any], model: str
) -> None:
    """Exact, in codes: never-overflow weights cannot saturate this host's kernels."""
    mine = lowered[model]["ours_host"]
    assert mine["kernels"] > 0, mine
    zoo.assert_exact(mine["codes_compiled_vs_eager"])


@pytest.mark.parametrize("model", MODELS)
def test_sqnr_against_float_on_this_host(lowered: dict[str, Any], model: str) -> None:
    mine, theirs = lowered[model]["ours_host"], lowered[model]["torchao"]
    assert mine["sqnr_compiled"] >= 30, (lowered["_host"], mine)
    assert mine["sqnr_compiled"] >= theirs["sqnr_compiled"] - 1, (mine, theirs)
