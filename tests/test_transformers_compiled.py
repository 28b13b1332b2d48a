"""Quantized Hugging Face transformers compiled with the x86 lowering compute what the
eager converted models do (issue 20). Two compiles, the slow part of the zoo's tests:
BERT quantized by the XNNPACK quantizer (signed int8 activations, the model whose
calibration crashed) and GPT-2 by the x86 quantizer (its ``Conv1D`` projections are
``addmm``, taken as linears; their int8 weights are folded from transposed views).

Every linear runs as a oneDNN int8 kernel (counted in Inductor's generated code), the
compiled output is the eager converted model's, code for code (``qcore.testing.codes``),
and >= 25 dB from float. The ``avx2-kernels`` env runs this file again on oneDNN's AVX2
kernels (no VNNI: the doubled-reduction route).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from compiled import compile_with_lowering

from qcore.metrics import sqnr
from qcore.testing.codes import compare_codes

MIN_SQNR = 25.0
LINEAR = torch.ops.aten.linear.default


@pytest.mark.parametrize(
    ("name", "quantizer", "options"),
    [("bert", "xnnpack", {"is_per_channel": True}), ("gpt2", "x86", {})],
)
def test_compiled_is_exactly_the_eager_converted_model(
    zoo_quantized: Callable[..., Any], name: str, quantizer: str, options: dict[str, bool]
) -> None:
    converted, model, batch = zoo_quantized(name, quantizer, **options)
    with torch.no_grad():
        expected = model(*batch)
    compiled = compile_with_lowering(converted, batch)
    linears = sum(1 for n in converted.graph.nodes if n.target == LINEAR)
    assert linears > 0
    ops = [op for op, _ in compiled.kernels]
    assert len(ops) == linears and all(op.startswith("qlinear") for op in ops), ops
    assert compiled.report.int8_kernels == linears, str(compiled.report)
    diff = compare_codes(compiled.eager, compiled.output)
    assert diff.exact, str(diff)
    assert sqnr(expected, compiled.output) >= MIN_SQNR
