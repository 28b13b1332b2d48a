"""What the PT2E weight-range rules fall back to when they know nothing about a layer's
input: its largest uint8 code is 255 unless an unsigned observer names a real one, and a
calibrated-rule weight observer with no input statistics keeps the safe range
(``amax / 63.5``), on either int8 grid; and only the rule that reads calibration inputs
records them."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch import nn
from torchao.quantization.pt2e import HistogramObserver, PerChannelMinMaxObserver

from qcore.pt2e.range_plan import input_quant_max
from qcore.pt2e.ranges import (
    TargetPerChannelWeightObserver,
    input_recorders,
    link_weight_observers,
)


@pytest.mark.parametrize(
    ("dtype", "quant_max", "expected"),
    [
        (torch.uint8, 255, 255), (torch.uint8, 127, 127), (torch.uint8, 1, 1),
        (torch.quint8, 200, 200),
        # no uint8 code above 255 or below 1: unknown, so the widest
        (torch.uint8, 256, 255), (torch.uint8, 0, 255), (torch.uint8, None, 255),
        # signed codes reach the kernel shifted by 128: the whole uint8 range
        (torch.int8, 127, 255), (torch.qint8, 100, 255), (None, 100, 255),
    ],
)  # fmt: skip
def test_the_largest_input_code_is_the_observers_only_when_it_is_a_uint8_code(
    dtype: torch.dtype | None, quant_max: int | None, expected: int
) -> None:
    assert input_quant_max(SimpleNamespace(dtype=dtype, quant_max=quant_max)) == expected


def test_a_native_quant_max_is_the_one_the_kernel_sees() -> None:
    observer = SimpleNamespace(dtype=torch.uint8, quant_max=255, native_quant_max=127)
    assert input_quant_max(observer) == 127


@pytest.mark.parametrize("quant_min", [-128, -127])
def test_without_input_statistics_a_layer_keeps_the_safe_range(quant_min: int) -> None:
    """Nothing links the observer to its input: the safe range, twice torchao's scale on
    the symmetric grid (127 / 63.5 = 2 exactly), whatever the weights."""
    weight = torch.randn(6, 5, generator=torch.Generator().manual_seed(3))
    options = {"dtype": torch.int8, "quant_min": quant_min, "quant_max": 127,
               "qscheme": torch.per_channel_symmetric, "ch_axis": 0}  # fmt: skip
    ours = TargetPerChannelWeightObserver(**options)
    ours(weight)
    scale, zero_point = ours.calculate_qparams()
    amax = weight.abs().amax(1).double()
    torch.testing.assert_close(scale.double(), amax / 63.5, rtol=1e-6, atol=0)
    assert torch.equal(zero_point, torch.zeros_like(zero_point))
    theirs = PerChannelMinMaxObserver(**options)
    theirs(weight)
    assert not torch.allclose(scale, theirs.calculate_qparams()[0])  # not torchao's full range


def _linear_edges(rule: str) -> tuple[dict[Any, Any], HistogramObserver]:
    """An exported linear's weight and input edges, each with its observer."""
    gm = torch.export.export(nn.Linear(4, 3), (torch.randn(2, 4),)).module()
    (linear,) = [n for n in gm.graph.nodes if n.target == torch.ops.aten.linear.default]
    weight_obs = TargetPerChannelWeightObserver(
        rule, dtype=torch.int8, quant_min=-128, quant_max=127,
        qscheme=torch.per_channel_symmetric, ch_axis=0,
    )  # fmt: skip
    input_obs = HistogramObserver(dtype=torch.uint8, quant_min=0, quant_max=255)
    edges = {(linear.args[1], linear): weight_obs, (linear.args[0], linear): input_obs}
    return edges, input_obs


@pytest.mark.parametrize(("rule", "records"), [("calibrated", True), ("never_overflow", False)])
def test_only_the_calibrated_rule_records_inputs_and_once(rule: str, records: bool) -> None:
    """The calibrated rule reads the layer's calibration inputs: its input observer records
    them, with one recorder however often the observers are linked; the never-overflow
    rule reads the weights alone and records nothing (every batch kept costs memory)."""
    edges, input_obs = _linear_edges(rule)
    holder = nn.ModuleDict({"input_obs": input_obs})
    link_weight_observers(torch.fx.GraphModule(nn.Module(), torch.fx.Graph()), edges)
    first = input_recorders(holder)
    assert set(first) == ({"input_obs"} if records else set())
    link_weight_observers(torch.fx.GraphModule(nn.Module(), torch.fx.Graph()), edges)
    assert input_recorders(holder) == first  # the same recorder, not a second one
    assert len(input_obs._forward_hooks) == (1 if records else 0)
