"""The quantizer derived from the ``executorch`` FX backend, as an ExecuTorch program
(``builds.derived_program``): the mixed-layer model of ``qcore.zoo.models`` (a
functional conv2d with keyword padding, float 1-D convs after a quantized mean, a 3-D
conv, a transposed conv after ``cat``, scalar ``mul``/``add``, hardswish, sigmoid gates,
means) goes through ExecuTorch 1.5.1's ``to_edge_transform_and_lower`` with the
``XnnpackPartitioner`` to a ``.pte``, which the session's deployed side runs in
ExecuTorch's runtime, in a fresh interpreter where qcore, its plugins and torchao cannot
be imported. Before the derived quantizer handed its float 1-D convs over as 2-D ones,
the lowering raised "Weight and Input should both be quantized".
"""

from __future__ import annotations

from typing import Any

import pytest
from builds import DerivedProgram
from shipped import code_difference, deployed_outputs
from test_xnnpack_programs import MIN_SQNR_VS_EAGER, MIN_SQNR_VS_FLOAT

from qcore.metrics import sqnr


@pytest.fixture(scope="module")
def derived(derived_program: DerivedProgram, torch_only: dict[str, Any]) -> DerivedProgram:
    assert torch_only["imported"] == []
    return derived_program


def test_derived_executorch_program_runs_within_one_code_of_eager(
    derived: DerivedProgram,
) -> None:
    """Every output within 1 code of the eager converted model (see MIN_SQNR_VS_EAGER),
    >= 40 dB against it, >= 25 dB against the float model."""
    program = derived.program
    assert program.file is not None
    (deployed,) = deployed_outputs(program.file)
    ((scale, zero_point),) = derived.qparams
    (eager,) = program.eager
    assert code_difference(eager, deployed, scale, zero_point).largest <= 1
    assert sqnr(eager, deployed) >= MIN_SQNR_VS_EAGER
    assert sqnr(program.reference[0], deployed) >= MIN_SQNR_VS_FLOAT


def test_derived_executorch_program_leaves_no_quantized_op_outside_xnnpack(
    derived: DerivedProgram,
) -> None:
    """No quantize or dequantize outside XNNPACK's delegate calls (counted in the lowered
    program; ExecuTorch's portable runtime would need its quantized kernels for one),
    and the delegation report says so; int8 ops were delegated."""
    program = derived.program
    assert program.delegate_calls > 0 and program.quantized_outside == []
    assert program.report.delegate_calls == program.delegate_calls
    assert program.report.quantized_left_out == []
    assert any(kind.endswith("(int8)") for kind in program.report.taken)
