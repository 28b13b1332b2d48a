"""Which post-ops each oneDNN int8 kernel takes, as the post-op table declares it, checked
against torch 2.13's kernels themselves; and the layers whose kernels take fewest (conv1d:
relu alone, conv3d: none) lowered on both targets.

A 7-bit output range (the AVX2 target's activations) folds into a hardtanh where the kernel
has one; on a conv1d that once produced a kernel call oneDNN rejects at run time
("Unsupported post op hardtanh for quantized pointwise conv1d"), seen only on AVX2 hosts.
"""

from __future__ import annotations

from typing import Any

import lowering_zoo as zoo
import pytest
import torch
from torch import nn

import qcore
from qinductor_x86.postop_table import ADD, KERNELS, POST_OPS
from qinductor_x86.quantizer.x86_inductor_quantizer import (
    X86InductorQuantizer,
    get_default_x86_inductor_quantization_config,
)

ONEDNN = torch.ops.onednn
#: Each unary row with a kernel attribute, and no post-op at all.
ATTRS = {p.attr: (p, [0.0, 6.0] if p.scalars == ("min_value", "max_value") else [0.1] * len(p.scalars))
         for p in POST_OPS if p.attr}  # fmt: skip
ALGORITHM = {p.attr: p.algorithm for p in POST_OPS if p.attr}


def _conv(dims: int) -> tuple[torch.Tensor, Any, dict[str, Any]]:
    x = torch.randint(0, 255, (1, 4, *(6,) * dims), dtype=torch.uint8)
    weight = torch.randint(-64, 64, (4, 4, *(3,) * dims), dtype=torch.int8)
    geometry = {"stride": [1] * dims, "padding": [1] * dims, "dilation": [1] * dims}
    packed = ONEDNN.qconv_prepack(weight, torch.full((4,), 0.01), 0.02, 0, *geometry.values(), 1, x.shape)
    return x, packed, geometry


def _takes(kernel: str, attr: str, scalars: list[float]) -> bool:
    """Whether torch's kernel ``kernel`` runs with unary post-op ``attr``."""
    scales, zero_points = torch.full((4,), 0.01), torch.zeros(4, dtype=torch.int64)
    try:
        if kernel == "linear":
            x = torch.randint(0, 255, (2, 8), dtype=torch.uint8)
            packed = ONEDNN.qlinear_prepack(torch.randint(-64, 64, (4, 8), dtype=torch.int8), x.shape)
            ONEDNN.qlinear_pointwise(x, 0.02, 0, packed, scales, zero_points, None, 0.05, 0,
                                     torch.uint8, attr, scalars, ALGORITHM.get(attr, ""))  # fmt: skip
        else:
            x, packed, g = _conv(int(kernel[4]))
            ONEDNN.qconv_pointwise(x, 0.02, 0, packed, scales, zero_points, None, g["stride"],
                                   g["padding"], g["dilation"], 1, 0.05, 0, torch.uint8, attr,
                                   scalars, ALGORITHM.get(attr, ""))  # fmt: skip
    except RuntimeError as error:
        assert "Unsupported post op" in str(error), error
        return False
    return True


def _takes_sum(dims: int) -> bool:
    """Whether torch's binary conv kernel adds into an accumulator for a ``dims``-d conv."""
    x, packed, g = _conv(dims)
    # the 2-d kernel's output (and so its accumulator) is channels-last
    layout = torch.channels_last if dims == 2 else torch.contiguous_format
    accum = torch.randint(0, 255, x.shape, dtype=torch.uint8).contiguous(memory_format=layout)
    try:
        ONEDNN.qconv2d_pointwise.binary(
            x, 0.02, 0, packed, torch.full((4,), 0.01), torch.zeros(4, dtype=torch.int64), accum,
            None, g["stride"], g["padding"], g["dilation"], 1, 0.05, 0, torch.uint8, 0.02, 0,
            ADD.in_place, 1.0, "none", [], "",
        )  # fmt: skip
    except RuntimeError as error:
        assert "post_op sum" in str(error), error
        return False
    return True


@pytest.mark.parametrize("attr", list(ATTRS))
@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_the_table_declares_exactly_the_post_ops_torchs_kernels_take(kernel: str, attr: str) -> None:
    row, scalars = ATTRS[attr]
    assert _takes(kernel, attr, scalars) == (kernel in row.kernels), (kernel, row.name)


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_every_kernel_takes_no_post_op(kernel: str) -> None:
    assert _takes(kernel, "none", [])


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_only_the_convs_the_table_names_fuse_an_add(dims: int) -> None:
    assert _takes_sum(dims) == (f"conv{dims}d" in ADD.kernels)


class Conv1dRelu(nn.Module):
    """conv1d -> nn.ReLU, twice: torchao's recipe quantizes a conv1d only with a ReLU
    module after it, and oneDNN's conv1d takes no other post-op."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.c2 = nn.Conv1d(3, 8, 3, padding=1), nn.Conv1d(8, 8, 3, padding=1)
        self.r1, self.r2 = nn.ReLU(), nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.r2(self.c2(self.r1(self.c1(x))))


@pytest.mark.parametrize("target", ["avx2", "avx512_vnni"])
def test_conv1d_relu_compiles_and_is_exact_on_both_targets(target: str) -> None:
    """On the AVX2 target the relu and the 7-bit output range would fold into a hardtanh,
    which conv1d's kernel rejects: it keeps its relu, and its codes are clamped after."""
    inputs = (zoo.example(2, 3, 16),)
    with qcore.host.targeting(target):
        quantizer = X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config())
        converted = zoo.narrow_weights(zoo.quantize(Conv1dRelu(), inputs, quantizer))
    result = zoo.lower(converted, inputs, target=target)
    assert len(result.kernels) == 2, result.kernels
    calls = [line for line in result.code.splitlines() if "onednn.qconv_pointwise" in line]
    assert len(calls) == 2 and all("'relu'" in line for line in calls), calls
    zoo.assert_exact(result.codes)
