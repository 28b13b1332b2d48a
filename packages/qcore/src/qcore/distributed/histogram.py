"""Histograms moved onto a common range, so that ranks' histograms can simply be added.

A histogram observer's bins are uniform over ``[min_val, max_val]`` of the data it saw, and
each rank saw a different range. Spreading every bin's count uniformly over the bin (the
same assumption the observer makes when it searches for the best range) and integrating
over the new bins moves a histogram onto any other range, losing at most one bin's
resolution at each end of every source bin.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["rebin"]


def rebin(histogram: Tensor, low: float, high: float, new_low: float, new_high: float) -> Tensor:
    """``histogram`` over ``[low, high]`` as counts over ``[new_low, new_high]`` (which must
    contain it), with as many bins; float64, total count preserved."""
    counts = histogram.detach().to(torch.float64)
    bins = counts.numel()
    if counts.sum() == 0 or low > high:  # a rank that observed nothing
        return torch.zeros(bins, dtype=torch.float64, device=counts.device)
    if new_high <= new_low:  # every rank saw one constant value
        return counts.clone()
    edges = torch.linspace(new_low, new_high, bins + 1, dtype=torch.float64, device=counts.device)
    if high <= low:  # this rank saw one constant value: all of it falls in one bin
        where = int(((low - new_low) / (new_high - new_low) * bins).__floor__())
        moved = torch.zeros(bins, dtype=torch.float64, device=counts.device)
        moved[min(max(where, 0), bins - 1)] = counts.sum()
        return moved
    # the cumulative count at each new edge, linear inside each source bin
    position = ((edges - low) / (high - low) * bins).clamp(0, bins)
    whole = position.floor().long().clamp(max=bins - 1)
    below = torch.cat([counts.new_zeros(1), counts.cumsum(0)])
    cumulative = below[whole] + (position - whole) * counts[whole]
    return cumulative.diff()
