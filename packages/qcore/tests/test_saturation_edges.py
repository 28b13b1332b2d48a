"""qcore.int8.saturation at its edges: string paddings resolve to the pads torch's own conv
applies, a range choice counts only channels narrower than the full range, and a range
whose full-range layer has no noise at all costs infinitely much to narrow."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from qcore.int8.saturation import RangeChoice, _resolve_padding, range_cost_db


@pytest.mark.parametrize("padding", ["valid", "same"])
@pytest.mark.parametrize(("kernel", "dilation"), [((3, 2), (1, 1)), ((4, 1), (1, 3)), ((1, 5), (2, 1))])
def test_string_paddings_are_the_pads_torchs_conv_applies(
    padding: str, kernel: tuple[int, int], dilation: tuple[int, int]
) -> None:
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(1, 2, 9, 10, generator=gen, dtype=torch.float64)
    w = torch.randn(3, 2, *kernel, generator=gen, dtype=torch.float64)
    pads = _resolve_padding(padding, kernel, dilation)
    flat = [p for pair in reversed(pads) for p in pair]  # F.pad: last dim first
    expected = F.conv2d(x, w, padding=padding, dilation=dilation)
    torch.testing.assert_close(F.conv2d(F.pad(x, flat), w, dilation=dilation), expected)
    assert _resolve_padding((2, 1), kernel, dilation) == [(2, 2), (1, 1)]


def test_a_choice_counts_the_channels_narrower_than_the_full_range() -> None:
    choice = RangeChoice((127.5, 63.5, 127.5, 100.0), 127.5, 30.0, 40.0, 0.1)
    assert choice.narrowed == 2
    assert RangeChoice((127.5,) * 3, 127.5, 30.0, 30.0, 0.0).narrowed == 0


def test_narrowing_a_layer_without_noise_at_full_range_costs_infinitely_much() -> None:
    """Integer weights on a grid of step 1 (full half range 127 = the largest weight)
    round exactly, and exact inputs add no noise: any narrower range adds noise to none."""
    weight = torch.tensor([[127.0, -3.0, 40.0], [-127.0, 0.0, 5.0]], dtype=torch.float64)
    cost = range_cost_db(weight, (63.5, 63.5), 127.0, (0.5, 0.5), 0.0)
    assert cost == math.inf
    assert range_cost_db(weight, (127.0, 127.0), 127.0, (0.5, 0.5), 0.0) == 0.0


def test_same_padding_refuses_a_dilation_of_other_dims_than_its_kernel() -> None:
    """'same' padding per dim pairs each kernel size with its dilation: one per spatial dim
    each, or a mismatch (a geometry read wrong) raises instead of padding fewer dims."""
    with pytest.raises(ValueError):
        _resolve_padding("same", (3, 3), (1,))
