"""Property tests: over shapes, scales and zero points, a lowered conv, linear or binary
fusion calls oneDNN int8 kernels and matches the eager converted model.

Scales and zero points come from what the quantizer observes: the input is shifted and
spread, the weights scaled, so every example has its own activation qparams. Weights are
either as the quantizer emits them (full range: a doubled reduction on a non-VNNI host)
or narrowed (plain on any host). Each example is one Inductor compile, so the example counts are small
and derandomized (the same examples on every run).
"""

from __future__ import annotations

from typing import Any

import lowering_zoo as zoo
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

PROPERTY = settings(
    max_examples=3,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TOLERANCE = 2e-2

activation_ranges = st.tuples(
    st.floats(-2.0, 2.0),  # shift: moves the zero point
    st.floats(0.05, 8.0),  # spread: sets the scale
)


def _scaled(model: nn.Module, factor: float) -> nn.Module:
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(factor)
    return model


def _check(model: nn.Module, inputs: tuple[torch.Tensor, ...], narrow: bool, layers: int) -> None:
    converted = zoo.quantize(model, inputs, "x86")
    if narrow:
        zoo.narrow_weights(converted)
    result = zoo.lower(converted, inputs)
    assert result.count("weight prepack") == layers, result.report.lowered
    assert len(result.kernels) == layers  # one kernel per layer, on any target
    assert result.relative_l2 <= TOLERANCE


@PROPERTY
@given(
    groups=st.sampled_from([1, 2]),
    channels=st.tuples(st.integers(1, 6), st.integers(1, 6)),
    kernel=st.sampled_from([1, 3]),
    stride=st.sampled_from([1, 2]),
    size=st.integers(5, 11),
    batch=st.integers(1, 3),
    activation=activation_ranges,
    weight_scale=st.floats(0.1, 10.0),
    relu=st.booleans(),
    narrow=st.booleans(),
)
def test_conv(
    *,
    groups: int,
    channels: tuple[int, int],
    kernel: int,
    stride: int,
    size: int,
    batch: int,
    activation: tuple[float, float],
    weight_scale: float,
    relu: bool,
    narrow: bool,
) -> None:
    c_in, c_mid = (groups * c for c in channels)
    model = nn.Sequential(
        nn.Conv2d(c_in, c_mid, kernel, stride, kernel // 2, groups=groups),
        nn.ReLU() if relu else nn.Identity(),
        nn.Conv2d(c_mid, 4, 1),
    )
    shift, spread = activation
    inputs = (zoo.example(batch, c_in, size, size, shift=shift, spread=spread),)
    _check(_scaled(model, weight_scale), inputs, narrow, layers=2)


@PROPERTY
@given(
    features=st.tuples(st.integers(1, 40), st.integers(1, 40)),
    batch=st.sampled_from([(5,), (2, 3), (3, 2)]),
    transposed=st.booleans(),
    bias=st.booleans(),
    activation=activation_ranges,
    narrow=st.booleans(),
)
def test_linear(
    *,
    features: tuple[int, int],
    batch: tuple[int, ...],
    transposed: bool,
    bias: bool,
    activation: tuple[float, float],
    narrow: bool,
) -> None:
    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(features[0], features[1], bias=bias)
            self.b = nn.Linear(features[1], 3)

        def forward(self, x: torch.Tensor) -> Any:
            x = x.transpose(0, 1) if transposed and x.dim() == 3 else x
            return self.b(torch.relu(self.a(x)))

    shift, spread = activation
    inputs = (zoo.example(*batch, features[0], shift=shift, spread=spread),)
    _check(Model(), inputs, narrow, layers=2)


@PROPERTY
@given(
    kind=st.sampled_from(["conv", "linear"]),
    channels=st.integers(2, 12),
    relu=st.booleans(),
    swapped=st.booleans(),
    activation=activation_ranges,
    residual_scale=st.floats(0.1, 10.0),
)
def test_binary_fusions(
    *,
    kind: str,
    channels: int,
    relu: bool,
    swapped: bool,
    activation: tuple[float, float],
    residual_scale: float,
) -> None:
    """``act(layer(y) + y)`` then another layer, either operand order: the add (and relu)
    fuse into the int8 kernel (weights narrowed so they fuse on any host)."""

    def layer() -> nn.Module:
        return nn.Conv2d(channels, channels, 3, padding=1) if kind == "conv" else nn.Linear(channels, channels)

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first, self.second, self.head = layer(), layer(), layer()

        def forward(self, x: torch.Tensor) -> Any:
            y = self.first(x) * residual_scale
            z = y + self.second(y) if swapped else self.second(y) + y
            return self.head(torch.relu(z) if relu else z)

    shift, spread = activation
    shape = (2, channels, 6, 6) if kind == "conv" else (6, channels)
    inputs = (zoo.example(*shape, shift=shift, spread=spread),)
    result = zoo.lower(zoo.narrow_weights(zoo.quantize(Model(), inputs, "x86")), inputs)
    assert result.count(f"{kind} + add"), result.report.lowered
    assert len(result.kernels) == 3
    assert result.relative_l2 <= TOLERANCE
