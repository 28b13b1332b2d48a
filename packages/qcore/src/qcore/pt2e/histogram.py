"""torchao's histogram observer, with its range search walked on Python floats.

torchao's ``HistogramObserver._non_linear_param_search`` moves the two quantile bounds
in steps of 1e-5 and reads the cumulative histogram one element at a time, each read and
comparison a 0-dim tensor operation of several microseconds: up to 100,000 steps per
observer, most of ``convert_pt2e``'s time on a small model. This search takes the
cumulative sums once, as Python floats, finds each bound's bin by bisection, comparing
with the bound rounded to float32 as torch's comparison of a float32 tensor with a Python
scalar does, and computes the error of each candidate range with torchao's own method.
The range it returns is torchao's, bit for bit (qcore's ``test_pt2e_histogram.py``
compares the two on many histograms).

The class keeps torchao's name: the distributed sync rules and the annotation records
read observers by class, and this one is torchao's in everything it stores.
"""

from __future__ import annotations

import struct
from bisect import bisect_left, bisect_right

import torch
from torch import Tensor
from torchao.quantization.pt2e import HistogramObserver as TorchaoHistogramObserver

from qcore._torch_private import histogram_range_error

__all__ = ["HistogramObserver"]

_FLOAT32 = struct.Struct("f")

#: torchao's step of the quantile bounds
_STEP = 1e-5
#: More steps than the walk can take (one bound moves by a step each time): the walk ends
#: by itself; the cap keeps a broken edit of it from running forever
_MAX_STEPS = 2 * round(1 / _STEP)


def _as_float32(value: float) -> float:
    """``value`` rounded to the nearest float32, as torch rounds a Python scalar it
    compares with a float32 tensor."""
    rounded: float = _FLOAT32.unpack(_FLOAT32.pack(value))[0]
    return rounded


class HistogramObserver(TorchaoHistogramObserver):  # type: ignore[misc]  # torchao is untyped
    """torchao's ``HistogramObserver``; only the range search is computed differently."""

    def _non_linear_param_search(self) -> tuple[Tensor, Tensor]:
        histogram: Tensor = self.histogram
        bins: int = self.bins
        assert histogram.size()[0] == bins, "bins mismatch"
        if not bool((histogram >= 0).all()):
            # a bisection needs sums that never decrease: a negative or NaN count (no
            # calibration makes one) gets torchao's own scan
            theirs: tuple[Tensor, Tensor] = super()._non_linear_param_search()
            return theirs
        bin_width = (self.max_val - self.min_val) / bins
        total = torch.sum(histogram).item()
        cumulative: list[float] = torch.cumsum(histogram, dim=0).tolist()
        # the same walk as torchao's, step for step (the bounds accumulate their rounding)
        alpha, beta = 0.0, 1.0
        start_bin, end_bin = 0, bins - 1
        norm_min = float("inf")
        for _ in range(_MAX_STEPS):
            if not alpha < beta:
                break
            next_alpha, next_beta = alpha + _STEP, beta - _STEP
            low, high = _as_float32(next_alpha * total), _as_float32(next_beta * total)
            # torchao scans bin by bin; the sums never decrease, so a bisection finds the
            # same bins: the first from start_bin whose sum reaches low (end_bin if none),
            # the last down to end_bin whose sum is within high (start_bin if none)
            left = bisect_left(cumulative, low, start_bin, end_bin)
            right = bisect_right(cumulative, high, start_bin + 1, end_bin + 1) - 1
            next_start, next_end = start_bin, end_bin
            if left - start_bin > end_bin - right:
                next_start, alpha = left, next_alpha
            else:
                next_end, beta = right, next_beta
            if (next_start, next_end) == (start_bin, end_bin):
                continue
            norm = histogram_range_error(self, next_start, next_end)
            if norm > norm_min:
                break
            norm_min, start_bin, end_bin = norm, next_start, next_end
        return self.min_val + bin_width * start_bin, self.min_val + bin_width * (end_bin + 1)
