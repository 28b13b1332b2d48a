"""``qcore.pt2e.annotation.transforms.conv3d_as_conv2d``: each 3-D convolution of an exported graph
becomes one 2-D convolution over depth-stacked slices, computing the same function in
float (up to fp32 summation order), for every padding form, stride, dilation and group
count, with and without bias."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from qcore.pt2e.annotation.transforms import conv3d_as_conv2d

aten = torch.ops.aten
#: fp32 sums of the same products in another order: a few units in the last place of the
#: largest output, far below any layout or index mistake (which moves whole values)
RELATIVE = 1e-5

SETTINGS: dict[str, dict[str, Any]] = {
    "padding 1": {"padding": 1},
    "padding same": {"padding": "same"},
    "padding same, even kernel depth": {"padding": "same", "kernel_size": (2, 3, 3)},
    # (export drops a trailing default: "valid" stays in the graph only before a dilation)
    "padding valid, dilated, no bias": {"padding": "valid", "dilation": (2, 1, 1), "bias": False},
    "stride, per-dim padding, dilation": {"stride": 2, "padding": (1, 0, 2), "dilation": (2, 1, 1)},
    "groups": {"groups": 2, "padding": 1},
    "strides per dim": {"stride": (2, 1, 3), "padding": 1},
    "dilations per dim": {"dilation": (1, 2, 1), "padding": (2, 1, 1)},
}


@pytest.mark.parametrize("name", SETTINGS)
def test_a_conv3d_becomes_one_conv2d_computing_the_same(name: str) -> None:
    options = {"kernel_size": (3, 2, 3), **SETTINGS[name]}
    torch.manual_seed(0)
    conv = nn.Conv3d(4, 6, **options).eval()
    x = torch.randn(2, 4, 7, 6, 8)
    gm = torch.export.export(conv, (x,)).module()
    conv3d_as_conv2d(gm)
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert aten.conv3d.default not in targets and aten.conv3d.padding not in targets
    assert targets.count(aten.conv2d.default) == 1
    # the module runs the new graph (recompiled), not the code of the old one
    assert "conv2d" in gm.code and "conv3d" not in gm.code
    with torch.no_grad():
        expected, output = conv(x), gm(x)
    assert output.shape == expected.shape
    assert (output - expected).abs().max() <= RELATIVE * expected.abs().max()


def test_the_new_nodes_keep_the_convs_module_scope() -> None:
    """Module scopes (``set_module_name``) still find the conv among the new nodes."""
    model = nn.Sequential(nn.Conv3d(2, 2, 3, padding=1)).eval()
    gm = torch.export.export(model, (torch.randn(1, 2, 4, 4, 4),)).module()
    conv3d = next(n for n in gm.graph.nodes if n.target == aten.conv3d.default)
    scope = conv3d.meta["nn_module_stack"]
    conv3d_as_conv2d(gm)
    new = [n for n in gm.graph.nodes if n.op == "call_function" and n.target != aten.conv2d.default]
    conv2d = next(n for n in gm.graph.nodes if n.target == aten.conv2d.default)
    assert conv2d.meta["nn_module_stack"] == scope
    assert new and all(n.meta.get("nn_module_stack") == scope for n in new)


class _Functional3d(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 2, 3, 1, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.conv3d(x, self.weight, None, 1, 1, 1, 2)


def test_scalar_arguments_are_spelled_out_per_dimension() -> None:
    """``F.conv3d(x, w, None, 1, 1, 1, 2)``: stride, padding and dilation as single ints."""
    model, x = _Functional3d().eval(), torch.randn(2, 4, 5, 6, 7)
    gm = torch.export.export(model, (x,)).module()
    conv3d_as_conv2d(gm)
    assert aten.conv3d.default not in [n.target for n in gm.graph.nodes]
    with torch.no_grad():
        expected, output = model(x), gm(x)
    assert output.shape == expected.shape
    assert (output - expected).abs().max() <= RELATIVE * expected.abs().max()


@pytest.mark.parametrize("case", ["unbatched", "dynamic batch"])
def test_what_is_not_a_batched_static_conv3d_is_left_alone(case: str) -> None:
    conv = nn.Conv3d(2, 3, 3, padding=1).eval()
    if case == "unbatched":
        gm = torch.export.export(conv, (torch.randn(2, 5, 5, 5),)).module()
    else:
        batch = torch.export.Dim("batch", min=2, max=8)
        example = (torch.randn(2, 2, 5, 5, 5),)
        gm = torch.export.export(conv, example, dynamic_shapes=({0: batch},)).module()
    before = gm.code
    conv3d_as_conv2d(gm)
    assert gm.code == before
    assert aten.conv3d.default in [n.target for n in gm.graph.nodes]
