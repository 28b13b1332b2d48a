"""Live parity with ExecuTorch 1.5.1's XNNPACKQuantizer, in one process.

Needs the reference: ``pip install --no-deps executorch==1.5.1`` (see
``tests/et_reference.py``). Not part of the default suite; a missing reference is an
error here, not a skip.
"""

from __future__ import annotations

from typing import Any

import et_reference
import parity_models as pm
import pytest
import torch
from torch import nn

from qcore.metrics import sqnr
from qcore.testing import pt2e
from qquantizer_xnnpack.quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

REF = et_reference.load()
CASES = [(m, c) for m in pm.MODELS for c in pm.CONFIGS]


def _pair(options: dict[str, Any]) -> tuple[Any, XNNPACKQuantizer]:
    theirs = REF.XNNPACKQuantizer().set_global(REF.get_symmetric_quantization_config(**options))
    ours = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(**options))
    return theirs, ours


@pytest.mark.parametrize(("model", "config"), CASES)
def test_annotations_identical(model: str, config: str) -> None:
    """Identical, but for the differences ``parity_models.DIFFERENCES`` lists."""
    theirs, ours = _pair(pm.CONFIGS[config])
    diff = pt2e.differences(pm.annotate_with(theirs, model), pm.annotate_with(ours, model))
    assert sorted(diff) == sorted(pm.expected_differences(model, config)), diff


CALIBRATED = [(m, c) for m, c in CASES if m not in pm.REFERENCE_CANNOT_CALIBRATE]


@pytest.mark.parametrize(("model", "config"), CALIBRATED)
def test_converted_outputs_bit_identical(model: str, config: str) -> None:
    theirs, ours = _pair(pm.CONFIGS[config])
    q_theirs, _ = pm.quantize_with(theirs, model)
    q_ours, ref_float = pm.quantize_with(ours, model)
    assert torch.equal(q_ours, q_theirs)
    assert not torch.equal(q_ours, ref_float)  # something was quantized


@pytest.mark.parametrize("model", sorted(pm.REFERENCE_CANNOT_CALIBRATE))
def test_where_the_reference_cannot_calibrate_ours_quantizes(model: str) -> None:
    """The listed models crash ExecuTorch's calibration (its lifted ``+ 0`` makes integer
    indices float); ours calibrates them and stays close to float."""
    theirs, ours = _pair({"is_per_channel": True})
    with pytest.raises((IndexError, RuntimeError), match="indices"):
        pm.quantize_with(theirs, model)
    q_ours, ref_float = pm.quantize_with(ours, model)
    assert sqnr(ref_float, q_ours) >= 25


class Blocks(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
        self.b = nn.Linear(8, 8)
        self.c = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c(self.b(self.a(x)) + x)


def _scoped_annotations(quantizer: Any) -> dict[str, Any]:
    return pt2e.annotate(quantizer, pt2e.exported(Blocks().eval(), (torch.randn(2, 8),)))


@pytest.mark.parametrize(
    "scope",
    ["module_type", "module_name_linear", "operator_type", "filter_function"],
)
def test_scoping_matches_where_upstream_works(scope: str) -> None:
    """Linear-only scopes, where upstream's filter sees every pattern node."""
    per_channel = {"is_per_channel": True}
    theirs, ours = (REF.XNNPACKQuantizer(), XNNPACKQuantizer())
    for q, cfg in (
        (theirs, REF.get_symmetric_quantization_config),
        (ours, get_symmetric_quantization_config),
    ):
        if scope == "module_type":
            q.set_module_type(nn.Linear, cfg(**per_channel))
        elif scope == "module_name_linear":
            q.set_global(cfg()).set_module_name("b", cfg(**per_channel))
        elif scope == "operator_type":
            q.set_operator_type(torch.ops.aten.linear.default, cfg(**per_channel))
        else:
            q.set_global(cfg()).set_filter_function(lambda n: n.name != "linear_1")
    assert _scoped_annotations(ours) == _scoped_annotations(theirs)


def test_qat_output_bit_identical() -> None:
    """The QAT flow of test_qat.py, with ExecuTorch's quantizer and ours, same seeds."""
    from test_qat import _net, _settle_batch_norm, train_qat
    from torchao.quantization.pt2e import move_exported_model_to_eval
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e

    theirs, ours = _pair({"is_per_channel": True, "is_qat": True})
    outputs = []
    for quantizer in (theirs, ours):
        torch.manual_seed(0)
        model = _net()
        data = [torch.rand(8, 3, 12, 12) for _ in range(6)]
        # drawn before quantizing: ExecuTorch's annotate consumes the global RNG
        held_out = torch.rand(8, 3, 12, 12)
        _settle_batch_norm(model, data)
        # one pass over the data: six optimizer steps already move every fake quant
        qat = train_qat(model, data, quantizer, steps=1)
        move_exported_model_to_eval(qat)
        with torch.no_grad():
            outputs.append(convert_pt2e(qat)(held_out))
    assert torch.equal(outputs[0], outputs[1])
