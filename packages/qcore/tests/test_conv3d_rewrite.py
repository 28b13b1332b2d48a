"""``qcore.annotation.common.conv3d_as_conv2d``: each 3-D convolution of an exported graph
becomes one 2-D convolution over depth-stacked slices, computing the same function in
float (up to fp32 summation order), for every padding form, stride, dilation and group
count, with and without bias."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from qcore.annotation.common import conv3d_as_conv2d

aten = torch.ops.aten
#: fp32 sums of the same products in another order: a few units in the last place of the
#: largest output, far below any layout or index mistake (which moves whole values)
RELATIVE = 1e-5

SETTINGS: dict[str, dict[str, Any]] = {
    "padding 1": {"padding": 1},
    "padding same": {"padding": "same"},
    "padding same, even kernel depth": {"padding": "same", "kernel_size": (2, 3, 3)},
    "padding valid, no bias": {"padding": "valid", "bias": False},
    "stride, per-dim padding, dilation": {"stride": 2, "padding": (1, 0, 2), "dilation": (2, 1, 1)},
    "groups": {"groups": 2, "padding": 1},
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
    with torch.no_grad():
        expected, output = conv(x), gm(x)
    assert output.shape == expected.shape
    assert (output - expected).abs().max() <= RELATIVE * expected.abs().max()
