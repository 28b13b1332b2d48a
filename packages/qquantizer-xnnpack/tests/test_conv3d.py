"""3-D convolutions: XNNPACK has none, nor has ExecuTorch's portable runtime, so the
quantizer rewrites each as a 2-D convolution over depth-stacked slices before annotating
(``qcore.pt2e.annotation.transforms.conv3d_as_conv2d``) and quantizes that like any conv2d, with
per-output-channel int8 weights; module scopes still reach the rewritten conv."""

from __future__ import annotations

import torch
from torch import nn
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

import qcore
from qcore.metrics import sqnr

aten = torch.ops.aten


class TwoConv3d(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv3d(4, 8, 3, padding=1)
        self.b = nn.Conv3d(8, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


def _convert(scope_b_float: bool) -> tuple[torch.fx.GraphModule, nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    model, x = TwoConv3d().eval(), torch.randn(2, 4, 4, 6, 6)
    quantizer = qcore.get_quantizer("xnnpack", is_per_channel=True)
    if scope_b_float:
        quantizer.set_module_name("b", None)
    prepared = prepare_pt2e(torch.export.export(model, (x,)).module(), quantizer)
    prepared(x)
    return convert_pt2e(prepared), model, x


def _weights(converted: torch.fx.GraphModule) -> list[str]:
    """What feeds each conv's weight: a per-channel dequantize, or the float weight."""
    convs = [n for n in converted.graph.nodes if n.op == "call_function" and "conv" in str(n.target)]
    assert all(n.target is aten.conv2d.default for n in convs), [n.target for n in convs]
    return [str(n.args[1].target) for n in convs]


def test_a_conv3d_is_quantized_as_a_conv2d_per_output_channel() -> None:
    converted, model, x = _convert(scope_b_float=False)
    assert _weights(converted) == ["quantized_decomposed.dequantize_per_channel.default"] * 2
    with torch.no_grad():
        assert sqnr(model(x), converted(x)) >= 30  # int8 weights and activations, 2 layers


def test_a_module_scope_keeps_its_rewritten_conv3d_float() -> None:
    converted, _, _ = _convert(scope_b_float=True)
    assert _weights(converted) == ["quantized_decomposed.dequantize_per_channel.default", "aten.reshape.default"]
