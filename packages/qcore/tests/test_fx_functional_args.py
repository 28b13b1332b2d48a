"""qcore.int8.fx_ranges: a functional conv takes a range of its own only when every
argument of its geometry is known when the model is prepared. A stride, a dilation or a
group count computed from the input (a traced value, not an int) leaves the layer at the
safe range: its geometry, and so which pairs overflow, is unknown."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

import qcore
from qcore.engine import quantized_engine
from qcore.int8 import host
from qcore.int8.fx_ranges import weighted_layers


@pytest.fixture
def backends(torch_onednn_plugins: None) -> Iterator[None]:
    with quantized_engine("onednn"):
        yield


class Conv(nn.Module):
    """``F.conv2d`` with one geometry argument traced from the input when asked."""

    def __init__(self, traced: str | None) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 4, 1, 1) * 0.3)
        self.traced = traced

    def forward(self, x: Tensor) -> Tensor:
        one = x.shape[1] // 4  # 1, as a traced value
        stride = (one, 1) if self.traced == "stride" else (1, 1)
        dilation = (one, 1) if self.traced == "dilation" else (1, 1)
        groups = one if self.traced == "groups" else 1
        return F.conv2d(x, self.w, None, stride, (0, 0), dilation, groups)


@pytest.mark.parametrize("traced", [None, "stride", "dilation", "groups"])
def test_a_functional_conv_with_a_traced_geometry_argument_keeps_the_safe_range(
    backends: None, traced: str | None
) -> None:
    x = torch.rand(2, 4, 5, 5, generator=torch.Generator().manual_seed(1))
    with host.targeting("avx2"):
        prepared = qcore.fx.prepare(Conv(traced).eval(), "fxnative", x)
    conv = next(n for n in prepared.graph.nodes if n.target is F.conv2d)
    argument = {"stride": 3, "dilation": 5, "groups": 6}.get(traced or "")
    if argument is not None:  # the model really traced that argument
        value = conv.args[argument]
        assert isinstance(value, torch.fx.Node) or any(isinstance(v, torch.fx.Node) for v in value)
    found = [layer.node for layer in weighted_layers(prepared)]
    assert found == ([conv] if traced is None else [])
