"""The XNNPACK quantizer's output as ExecuTorch programs (``builds.py``): every model of the
Hugging Face zoo (``qcore.zoo.huggingface``, each cut to its first layer) and the
functional convolutions go
through ExecuTorch 1.5.1's ``to_edge_transform_and_lower`` with the ``XnnpackPartitioner``
to a ``.pte``, which the session's deployed side runs in ExecuTorch's runtime, in a fresh
interpreter where qcore, its plugins and torchao cannot be imported. ExecuTorch's own
quantizer is compared on the functional convolutions: its program cannot be built.

What the delegate took is counted in the lowered program by the builder (the quantize and
dequantize ops left outside XNNPACK's delegate calls), and the delegation report
(``qquantizer_xnnpack.delegation``) must say the same, with ExecuTorch's reasons.

What a program computes is compared code for code (``qcore.testing.codes``) with its
eager converted model, run with its biases rounded to int32 as XNNPACK adds them
(``shipped.with_int32_bias``), the one step of XNNPACK's int8 arithmetic that the eager
model does not share; and with the eager model as it is, within one code.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from builds import FunctionalPrograms, Program
from shipped import deployed_outputs

from qcore.metrics import sqnr
from qcore.testing.codes import compare_codes
from qcore.zoo.huggingface import MODELS

#: The zoo's accuracy bound against the float model (tests/test_transformers_flows.py).
MIN_SQNR_VS_FLOAT = 25.0
#: What test_derived_programs.py still holds its program to against the eager converted
#: model; the programs here are compared with it code for code.
MIN_SQNR_VS_EAGER = 40.0


@pytest.fixture(scope="module")
def zoo(zoo_program: Program, torch_only: dict[str, Any]) -> Program:
    assert torch_only["imported"] == []
    return zoo_program


@pytest.fixture(scope="module")
def functional(
    functional_programs: FunctionalPrograms, torch_only: dict[str, Any]
) -> FunctionalPrograms:
    assert torch_only["imported"] == []
    return functional_programs


@pytest.fixture(scope="module")
def zoo_outputs(zoo: Program) -> dict[str, torch.Tensor]:
    """What the ``.pte`` computes for each model, in ``MODELS``' order."""
    assert zoo.file is not None
    outputs = deployed_outputs(zoo.file)
    assert len(outputs) == len(zoo.eager) == len(MODELS)
    return dict(zip(MODELS, outputs, strict=True))


@pytest.mark.parametrize("name", list(MODELS))
def test_every_zoo_model_runs_as_a_pte_computing_its_eager_codes(
    zoo: Program, zoo_outputs: dict[str, torch.Tensor], name: str
) -> None:
    """Exact: the ``.pte`` computes the eager converted model with its biases rounded to
    int32 as XNNPACK adds them, and the eager model as it is within one step (the rounded
    biases move a code near a half step by one). The output (the last hidden state) is
    float: a layer norm, in ExecuTorch's portable runtime after the last int8 tensor, so
    it holds no codes to read. ``qcore.testing.codes`` puts it on the uint8 grid of the
    eager output's range and counts a value more than a thousandth of a step from eager's
    as a step off: with equal int8 codes inside, only fp32 summation order lies between
    the two (within 3e-5 of a step), while one int8 code that differs moves the values
    after it by a share of a step. >= 25 dB against float. (The models run side by side
    in one program, each on its own inputs.)"""
    index, output = list(MODELS).index(name), zoo_outputs[name]
    difference = compare_codes(zoo.int32_bias_eager[index], output)
    assert difference.exact, str(difference)
    assert compare_codes(zoo.eager[index], output).worst <= 1
    assert sqnr(zoo.reference[index], output) >= MIN_SQNR_VS_FLOAT


def test_xnnpack_takes_every_quantized_op_of_the_zoo(zoo: Program) -> None:
    """No quantize or dequantize is left outside XNNPACK's delegate calls (counted in the
    lowered program), and the delegation report says so; what it leaves to the portable
    runtime is float (embeddings, layer norms, the attention mask's integer ops)."""
    assert zoo.delegate_calls > 0 and zoo.quantized_outside == []
    assert zoo.report.delegate_calls == zoo.delegate_calls
    assert zoo.report.quantized_left_out == []
    assert any(kind.endswith("(int8)") for kind in zoo.report.taken)


# functional convolutions: ours against ExecuTorch's quantizer ----------------------------


def test_functional_convs_run_as_a_pte_computing_their_eager_codes(
    functional: FunctionalPrograms,
) -> None:
    """The 1-d, 3-d and transposed convolutions all run. Exact: every output's int8 codes
    (read with the output's qparams in the converted program) are the eager converted
    model's with the 2-d conv's bias rounded to int32 as XNNPACK adds it, and within one
    code of the eager model's as it is (the rounded bias moves a few of the 2-d conv's
    codes by one, and the transposed conv after it follows). >= 25 dB against float (the
    3-D conv's rewrite as a 2-D one computes the same function)."""
    ours = functional.ours
    assert ours.file is not None
    outputs = zip(
        ours.eager,
        ours.int32_bias_eager,
        deployed_outputs(ours.file),
        ours.reference,
        functional.qparams,
        strict=True,
    )
    for eager, int32_bias, deployed, reference, (scale, zero_point) in outputs:
        difference = compare_codes(int32_bias, deployed, scale=scale, zero_point=zero_point)
        assert difference.exact, str(difference)
        assert compare_codes(eager, deployed, scale=scale, zero_point=zero_point).worst <= 1
        assert sqnr(reference, deployed) >= MIN_SQNR_VS_FLOAT


def test_functional_convs_are_one_xnnpack_delegate_call(functional: FunctionalPrograms) -> None:
    ours = functional.ours
    assert ours.delegate_calls == 1 and ours.quantized_outside == []
    assert ours.report.delegate_calls == 1 and ours.report.quantized_left_out == []


def test_executorchs_quantizer_cannot_build_them_and_the_report_says_why(
    functional: FunctionalPrograms,
) -> None:
    """ExecuTorch's own quantizer quantizes the 3-D conv, which XNNPACK does not take, and
    ``to_executorch`` fails on its weight's per-channel dequantize, left outside. The
    report names both, with the partitioner's reason, before ``to_executorch``."""
    assert functional.their_error is not None
    assert (
        "Missing out variants: {'quantized_decomposed::dequantize_per_channel'}"
        in functional.their_error
    )
    theirs = functional.theirs
    assert theirs.quantized_outside  # the weight's dequantize, counted in the program
    left = {op.op: op for op in theirs.report.quantized_left_out}
    assert "Only support 1D + 2D Conv" in left["aten.convolution.default"].reason
    weight = left["quantized_decomposed.dequantize_per_channel.default"]
    assert (
        weight.kind == "dequantize (weight)" and "read by aten.convolution.default" in weight.reason
    )
    assert {op.node for op in theirs.report.quantized_left_out} >= set(theirs.quantized_outside)
