"""Quantized Hugging Face transformers compiled with the x86 lowering compute what the
eager converted models do (issue 20). Two compiles, the slow part of the zoo's tests:
BERT quantized by the XNNPACK quantizer (signed int8 activations, the model whose
calibration crashed) and GPT-2 by the x86 quantizer (its ``Conv1D`` projections are
``addmm``, taken as linears; their int8 weights are folded from transposed views).

Every linear runs as a oneDNN int8 kernel, the compiled output is within 2e-2 relative L2
of the eager converted one and >= 25 dB from float. The ``avx2-kernels`` env runs this
file again on oneDNN's AVX2 kernels (no VNNI: the doubled-reduction route).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch._inductor import config as inductor_config

import qcore
from qcore.metrics import sqnr

MAX_RELATIVE_L2 = 2e-2
MIN_SQNR = 25.0
LINEAR = torch.ops.aten.linear.default


@pytest.mark.parametrize(
    ("name", "quantizer", "options"),
    [("bert", "xnnpack", {"is_per_channel": True}), ("gpt2", "x86", {})],
)
def test_compiled_matches_eager_converted(
    zoo_quantized: Callable[..., Any], name: str, quantizer: str, options: dict[str, bool]
) -> None:
    converted, model, batch = zoo_quantized(name, quantizer, **options)
    with torch.no_grad():
        expected, eager = model(*batch), converted(*batch)
    torch._dynamo.reset()
    with (
        inductor_config.patch(freezing=True, fx_graph_cache=False),
        torch.no_grad(),
        qcore.get_lowering("x86") as lowering,
    ):
        compiled = torch.compile(converted)(*batch)
    torch._dynamo.reset()
    linears = sum(1 for n in converted.graph.nodes if n.target == LINEAR)
    assert linears > 0
    assert lowering.report().int8_kernels == linears, str(lowering.report())
    relative_l2 = float((compiled - eager).norm() / eager.norm())
    assert relative_l2 <= MAX_RELATIVE_L2
    assert sqnr(expected, compiled) >= MIN_SQNR
