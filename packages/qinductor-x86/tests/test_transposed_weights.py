"""Linears whose weight is a transposed view: ``F.linear(x, w.t())`` and ``addmm(b, x, w)``
(Hugging Face's ``Conv1D``, GPT-2's every projection; issue 20).

The x86 quantizer takes ``addmm`` with a constant weight as the linear it computes, and
the lowering computes it exactly: the int8 weight folded from ``w.t()`` keeps the
transposed strides, which oneDNN's prepack ignores (the compiled model computed with the
transpose, relative L2 ~1 against eager, before the lowering made it contiguous): the
compiled model's output codes are the eager converted model's.
"""

from __future__ import annotations

import lowering_zoo as zoo
import torch
import torch.nn.functional as F
from torch import nn

from qcore.metrics import sqnr
from qquantizer_xnnpack.quantizer import XNNPACKQuantizer, get_symmetric_quantization_config


class TransposedLinear(nn.Module):
    """A linear written with its weight stored (in, out), both ways people write it."""

    def __init__(self, addmm: bool) -> None:
        super().__init__()
        self.addmm = addmm
        self.w = nn.Parameter(torch.randn(16, 24) * 0.2)
        self.b = nn.Parameter(torch.randn(24) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.addmm:
            return torch.addmm(self.b, x, self.w)
        return F.linear(x, self.w.t(), self.b)


def _inputs(seed: int) -> tuple[torch.Tensor]:
    return (torch.randn(8, 16, generator=torch.Generator().manual_seed(seed)),)


def test_addmm_with_a_constant_weight_is_quantized_and_lowered_as_a_linear() -> None:
    torch.manual_seed(0)
    model = TransposedLinear(addmm=True).eval()
    converted = zoo.quantize(model, _inputs(0), "x86", [_inputs(s) for s in range(1, 4)])
    assert any(n.target == torch.ops.aten.linear.default for n in converted.graph.nodes)
    result = zoo.lower(converted, _inputs(9))
    assert len(result.kernels) == 1, result.code
    zoo.assert_exact(result.codes)
    assert sqnr(model(*_inputs(9)), result.output) >= 30


def test_a_linear_on_a_transposed_weight_compiles_to_what_eager_computes() -> None:
    torch.manual_seed(0)
    model = TransposedLinear(addmm=False).eval()
    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    converted = zoo.quantize(model, _inputs(0), quantizer, [_inputs(s) for s in range(1, 4)])
    result = zoo.lower(converted, _inputs(9))
    assert len(result.kernels) == 1, result.code
    zoo.assert_exact(result.codes)
    assert sqnr(model(*_inputs(9)), result.output) >= 30
