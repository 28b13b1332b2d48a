"""Accuracy measures shared by the demo, the conformance kit and every test suite."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import Tensor


def sqnr(reference: Tensor, output: Tensor) -> float:
    """Signal-to-quantization-noise ratio in dB: ``20 log10(||ref|| / ||ref - out||)``.

    Identical tensors give ``inf``; gradients are ignored.
    """
    import torch

    reference = reference.detach().float()
    noise = (reference - output.detach().float()).norm()
    if noise == 0:
        return float("inf")
    return float(20 * torch.log10(reference.norm() / noise))
