"""The range search of torch's histogram observers, walked on Python floats.

torch.ao's ``HistogramObserver._non_linear_param_search`` (and torchao's copy, the same
method) moves the two quantile bounds in steps of 1e-5 and reads the cumulative histogram
one element at a time, each read and comparison a 0-dim tensor operation of several
microseconds: up to 100,000 steps per observer, most of a small model's convert. This
search takes the cumulative sums once, as Python floats, finds each bound's bin by
bisection, comparing with the bound rounded to float32 as torch's comparison of a float32
tensor with a Python scalar does, and computes the error of each candidate range with the
observer's own method. The range it returns is the observer's own, bit for bit (qcore's
``test_histogram_search.py`` compares the two on many histograms, for both observers).

The observers that use it: :mod:`qcore.fx.histogram` (torch.ao's, FX) and
:mod:`qcore.pt2e.histogram` (torchao's, PT2E).
"""

from __future__ import annotations

import struct
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from qcore._torch_private import histogram_range_error

__all__ = ["search_range"]

_FLOAT32 = struct.Struct("f")

#: torch's step of the quantile bounds
_STEP = 1e-5
#: More steps than the walk can take (one bound moves by a step each time): the walk ends
#: by itself; the cap keeps a broken edit of it from running forever
_MAX_STEPS = 2 * round(1 / _STEP)

RangeSearch = Callable[[], tuple[Tensor, Tensor]]


def _as_float32(value: float) -> float:
    """``value`` rounded to the nearest float32, as torch rounds a Python scalar it
    compares with a float32 tensor."""
    rounded: float = _FLOAT32.unpack(_FLOAT32.pack(value))[0]
    return rounded


def search_range(observer: Any, torchs_search: RangeSearch) -> tuple[Tensor, Tensor]:
    """The range ``observer`` (a histogram observer) finds for its histogram;
    ``torchs_search`` is the observer class's own search, for histograms a bisection
    cannot walk."""
    histogram: Tensor = observer.histogram
    bins: int = observer.bins
    assert histogram.size()[0] == bins, "bins mismatch"
    if not bool((histogram >= 0).all()):
        # a bisection needs sums that never decrease: a negative or NaN count (no
        # calibration makes one) gets torch's own scan
        return torchs_search()
    bin_width = (observer.max_val - observer.min_val) / bins
    total = torch.sum(histogram).item()
    cumulative: list[float] = torch.cumsum(histogram, dim=0).tolist()
    # the same walk as torch's, step for step (the bounds accumulate their rounding)
    alpha, beta = 0.0, 1.0
    start_bin, end_bin = 0, bins - 1
    norm_min = float("inf")
    for _ in range(_MAX_STEPS):
        if not alpha < beta:
            break
        next_alpha, next_beta = alpha + _STEP, beta - _STEP
        low, high = _as_float32(next_alpha * total), _as_float32(next_beta * total)
        # torch scans bin by bin; the sums never decrease, so a bisection finds the same
        # bins: the first from start_bin whose sum reaches low (end_bin if none), the last
        # down to end_bin whose sum is within high (start_bin if none)
        left = bisect_left(cumulative, low, start_bin, end_bin)
        right = bisect_right(cumulative, high, start_bin + 1, end_bin + 1) - 1
        next_start, next_end = start_bin, end_bin
        if left - start_bin > end_bin - right:
            next_start, alpha = left, next_alpha
        else:
            next_end, beta = right, next_beta
        if (next_start, next_end) == (start_bin, end_bin):
            continue
        norm = histogram_range_error(observer, next_start, next_end)
        if norm > norm_min:
            break
        norm_min, start_bin, end_bin = norm, next_start, next_end
    return observer.min_val + bin_width * start_bin, observer.min_val + bin_width * (end_bin + 1)
