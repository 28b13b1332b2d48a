"""A layer's int8 output noise, from its float weights and its input's statistics.

Two rounding sources reach a layer's output: the weights' (``dw``, met by the input) and
the input's (``dx``, met by the weights). With the input's mean and mean square per
element (read from its calibration histogram) and the input's rounding error ``E[dx^2]``,
summed over output channels, each split into the part that **varies** from one output
position to the next and the **offset** that is the same at every position:

* weight rounding: varies ``Var[x] * sum(dw^2)``, offset ``E[x]^2 * sum(dw)^2``;
* input rounding: varies ``E[dx^2] * sum(w^2)`` (independent per element), no offset;
* the output's own power, for scale: ``Var[x] * sum(w^2)`` and ``E[x]^2 * sum(w)^2``.

The split matters downstream: where a network pools over positions (a CNN's global
average pool), what varies averages out and an offset does not. Inputs are taken as
independent, which is coarse for a single layer but orders the choices the callers make
(narrower weights or a coarser input against a deeper kernel) the way measured networks
do (``benchmarks/README.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["InputStatistics", "LayerNoise", "Power", "weight_codes"]


@dataclass(frozen=True)
class InputStatistics:
    """A layer input's ``E[x]``, ``E[x^2]`` and rounding error ``E[dx^2]`` on its grid."""

    mean: float
    mean_square: float
    rounding: float

    @property
    def variance(self) -> float:
        return max(self.mean_square - self.mean * self.mean, 0.0)


class Power(NamedTuple):
    """Output power summed over channels: the part that varies per position, the offset
    shared by all positions, and their sum (summed per channel, then over channels)."""

    varying: float
    offset: float
    total: float


class LayerNoise:
    """The output noise terms of one weighted layer (conv or linear) on one input."""

    def __init__(self, weight: Tensor, statistics: InputStatistics) -> None:
        self._weight = weight.detach().double()
        self._statistics = statistics
        rows = self._weight.reshape(self._weight.shape[0], -1)
        self.weight_power = float((rows**2).sum())
        self.signal = self._power(rows)

    def _power(self, rows: Tensor) -> Power:
        """``Var[x] * sum_i r^2`` and ``E[x]^2 * (sum_i r)^2`` over output channels."""
        s = self._statistics
        varying = s.variance * (rows**2).sum(1)
        offset = s.mean * s.mean * rows.sum(1) ** 2
        return Power(float(varying.sum()), float(offset.sum()), float((varying + offset).sum()))

    def weight_rounding(self, half_ranges: Tensor | float) -> Power:
        """Output noise from rounding the weights with ``scale = amax / half_range``."""
        codes, scales = weight_codes(self._weight, half_ranges)
        shape = (-1,) + (1,) * (self._weight.dim() - 1)
        error = codes * scales.reshape(shape) - self._weight
        return self._power(error.reshape(error.shape[0], -1))

    def input_rounding(self, rounding: float | None = None) -> float:
        """Output noise from the input's rounding (``rounding``: another grid's ``E[dx^2]``);
        it varies per position."""
        chosen = self._statistics.rounding if rounding is None else rounding
        return chosen * self.weight_power


def weight_codes(weight: Tensor, half_ranges: Tensor | float) -> tuple[Tensor, Tensor]:
    """Per-output-channel symmetric int8 codes and scales, ``scale = amax / half_range``.

    The same arithmetic as torch's per-channel MinMax observer (scale floored at its eps)
    and its reference quantization, which rounds half to even and clamps to the dtype
    only (so the safe range's extreme weight is 64).
    """
    import torch

    w = weight.detach().double()
    amax = w.reshape(w.shape[0], -1).abs().amax(1)
    eps = torch.finfo(torch.float32).eps
    scales = torch.clamp(amax / torch.as_tensor(half_ranges, dtype=torch.float64), min=eps)
    scales = scales.float().double()  # observers hold float32 scales
    shape = (-1,) + (1,) * (w.dim() - 1)
    codes = torch.clamp(torch.round(w / scales.reshape(shape)), -128, 127)
    return codes, scales
