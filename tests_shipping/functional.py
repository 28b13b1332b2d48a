"""The functional-convolution model of issue 28: ``F.conv2d`` (padding "same") then
``F.conv_transpose2d``, and ``F.conv1d`` and ``F.conv3d`` on inputs of their own, all on
weight parameters (no ``nn.Conv*`` module for a quantizer to match), quantized by the
XNNPACK quantizer or ExecuTorch's, calibrated on three batches, held-out inputs apart.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

#: The seed of the inputs no quantizer calibrates on.
HELD_OUT = 100


class FunctionalConvs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(0)

        def weight(*shape: int) -> nn.Parameter:
            return nn.Parameter(torch.randn(*shape, generator=generator) * 0.2)

        self.w2, self.b2 = weight(8, 4, 3, 3), weight(8)
        self.wt = weight(8, 8, 3, 3)
        self.w1 = weight(6, 4, 3)
        self.w3 = weight(4, 4, 3, 3, 3)

    def forward(
        self, x: torch.Tensor, x1: torch.Tensor, x3: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        y = F.relu(F.conv2d(x, self.w2, self.b2, padding="same"))
        y = F.conv_transpose2d(y, self.wt, padding=1)
        return y, F.conv1d(x1, self.w1, padding=1), F.conv3d(x3, self.w3, padding=1)


def inputs(seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(2, 4, 8, 8, generator=g), torch.randn(2, 4, 10, generator=g),
            torch.randn(1, 4, 4, 5, 5, generator=g))  # fmt: skip


def quantize(quantizer: Any) -> torch.fx.GraphModule:
    """The model exported, prepared with ``quantizer``, calibrated and converted."""
    prepared = prepare_pt2e(
        torch.export.export(FunctionalConvs().eval(), inputs(0)).module(), quantizer
    )
    with torch.no_grad():
        for seed in range(1, 4):
            prepared(*inputs(seed))
    return convert_pt2e(prepared)


def reference() -> list[torch.Tensor]:
    """The float model's outputs on the held-out inputs."""
    with torch.no_grad():
        return list(FunctionalConvs().eval()(*inputs(HELD_OUT)))
