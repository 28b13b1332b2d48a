"""Live parity with ExecuTorch 1.5.1's XNNPACKQuantizer, in one process.

Needs the reference: ``pip install --no-deps executorch==1.5.1`` (see
``tests/et_reference.py``). Not part of the default suite; a missing reference is an
error here, not a skip.
"""

from __future__ import annotations

from typing import Any

import et_reference
import pytest
import torch
import xnnpack_parity_models as pm
from torch import nn

from qcore.metrics import sqnr
from qcore.zoo.suite import pt2e
from qquantizer_xnnpack.quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

REF = et_reference.load()
CASES = [(m, c) for m in pm.MODELS for c in pm.CONFIGS]


def _pair(options: dict[str, Any]) -> tuple[Any, XNNPACKQuantizer]:
    theirs = REF.XNNPACKQuantizer().set_global(REF.get_symmetric_quantization_config(**options))
    ours = pm.ExecuTorchRows().set_global(get_symmetric_quantization_config(**options))
    return theirs, ours


def _assert_listed_differences_only(
    theirs: dict[str, Any], ours: dict[str, Any], model: str, config: str
) -> None:
    """Identical, but for the differences ``xnnpack_parity_models.DIFFERENCES`` lists."""
    diff = pt2e.differences(theirs, ours)
    assert sorted(diff) == sorted(pm.expected_differences(model, config)), diff


def _has_batch_norm(model: str) -> bool:
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in pm.build(model)[0].modules())


CALIBRATED = [(m, c) for m, c in CASES if m not in pm.REFERENCE_CANNOT_CALIBRATE]
#: Where the annotations are compared in the prepare the flow runs anyway. prepare_pt2e
#: folds batch norms into convs and linears, then annotates: on a model without a batch
#: norm it annotates the exported graph as it is, which is what test_annotations_identical
#: compares. (ExecuTorch's annotate exports its conv-bn patterns anew at every call.)
IN_PREPARE = [(m, c) for m, c in CALIBRATED if not _has_batch_norm(m)]
PER_CHANNEL = "static_per_channel"  # the config of the cannot-calibrate test


@pytest.mark.parametrize(
    ("model", "config"),
    [
        (m, c)
        for m, c in CASES
        if (m, c) not in IN_PREPARE
        and not (m in pm.REFERENCE_CANNOT_CALIBRATE and c == PER_CHANNEL)
    ],
)
def test_annotations_identical(model: str, config: str) -> None:
    """Identical, but for the differences ``xnnpack_parity_models.DIFFERENCES`` lists (the other
    cases are compared in the prepare of a flow, below)."""
    theirs, ours = _pair(pm.CONFIGS[config])
    _assert_listed_differences_only(
        pm.annotate_with(theirs, model), pm.annotate_with(ours, model), model, config
    )


def _quantized(quantizer: Any, model: str) -> tuple[tuple[torch.Tensor, torch.Tensor], Any]:
    """:func:`xnnpack_parity_models.quantize_with`, and the annotations written in its prepare."""
    recording = pt2e.Recording(quantizer)
    return pm.quantize_with(recording, model), recording.seen


@pytest.mark.parametrize(("model", "config"), [c for c in CALIBRATED if c not in IN_PREPARE])
def test_converted_outputs_bit_identical(model: str, config: str) -> None:
    theirs, ours = _pair(pm.CONFIGS[config])
    q_theirs, _ = pm.quantize_with(theirs, model)
    q_ours, ref_float = pm.quantize_with(ours, model)
    assert torch.equal(q_ours, q_theirs)
    assert not torch.equal(q_ours, ref_float)  # something was quantized


@pytest.mark.parametrize(("model", "config"), IN_PREPARE)
def test_annotations_identical_and_converted_outputs_bit_identical(model: str, config: str) -> None:
    """test_annotations_identical's claim on the annotations each quantizer writes inside
    the prepare of its flow (the exported graph, as no batch norm is folded), and the
    converted outputs bit for bit."""
    theirs, ours = _pair(pm.CONFIGS[config])
    (q_theirs, _), annotated_theirs = _quantized(theirs, model)
    (q_ours, ref_float), annotated_ours = _quantized(ours, model)
    assert not _has_batch_norm(model)
    _assert_listed_differences_only(annotated_theirs, annotated_ours, model, config)
    assert torch.equal(q_ours, q_theirs)
    assert not torch.equal(q_ours, ref_float)  # something was quantized


@pytest.mark.parametrize("model", sorted(pm.REFERENCE_CANNOT_CALIBRATE))
def test_where_the_reference_cannot_calibrate_ours_quantizes(model: str) -> None:
    """The listed models crash ExecuTorch's calibration (its lifted ``+ 0`` makes integer
    indices float); ours calibrates them and stays close to float. The annotations both
    wrote in those prepares (before the crash) differ only where listed
    (test_annotations_identical's claim, for this config)."""
    theirs, ours = _pair(pm.CONFIGS[PER_CHANNEL])
    recording = pt2e.Recording(theirs)
    with pytest.raises((IndexError, RuntimeError), match="indices"):
        pm.quantize_with(recording, model)
    (q_ours, ref_float), annotated_ours = _quantized(ours, model)
    assert sqnr(ref_float, q_ours) >= 25
    assert recording.seen is not None and not _has_batch_norm(model)
    _assert_listed_differences_only(recording.seen, annotated_ours, model, PER_CHANNEL)


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
    theirs, ours = (REF.XNNPACKQuantizer(), pm.ExecuTorchRows())
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
