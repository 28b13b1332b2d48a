"""XNNPACK's quantization configs: int8 activations, int8 symmetric weights."""

from __future__ import annotations

import functools
from typing import Any

import torch
from torchao.quantization.pt2e import (
    FakeQuantize,
    FusedMovingAvgObsFakeQuantize,
    MinMaxObserver,
    MovingAverageMinMaxObserver,
    MovingAveragePerChannelMinMaxObserver,
    PerChannelMinMaxObserver,
    PlaceholderObserver,
)
from torchao.quantization.pt2e.quantizer import QuantizationConfig, QuantizationSpec

from qcore.pt2e.histogram import HistogramObserver

#: XNNPACK rejects scales below this, so observers never produce one.
EPS = 2**-12


def _check_range(name_min: str, qmin: int, name_max: str, qmax: int) -> None:
    info = torch.iinfo(torch.int8)
    if not info.min <= qmin <= qmax <= info.max:
        raise ValueError(
            f"{name_min}={qmin}, {name_max}={qmax}: need "
            f"{info.min} <= {name_min} <= {name_max} <= {info.max}"
        )


@functools.lru_cache
def get_symmetric_quantization_config(  # noqa: PLR0917 (upstream's positional API)
    is_per_channel: bool = False,
    is_qat: bool = False,
    is_dynamic: bool = False,
    act_qmin: int = -128,
    act_qmax: int = 127,
    weight_qmin: int = -127,
    weight_qmax: int = 127,
) -> QuantizationConfig:
    """int8 affine activations (histogram-observed, dynamic: per-batch), int8 symmetric
    weights per tensor or per output channel, float bias. Cached, as upstream, so equal
    options give the same (hashable) config object."""
    _check_range("act_qmin", act_qmin, "act_qmax", act_qmax)
    _check_range("weight_qmin", weight_qmin, "weight_qmax", weight_qmax)
    act_ctr: Any
    act_args: dict[str, Any] = {"eps": EPS}
    if is_qat and is_dynamic:
        act_ctr = FakeQuantize
        act_args["observer"] = MovingAverageMinMaxObserver.with_args(averaging_constant=1)
    elif is_qat:
        act_ctr = FusedMovingAvgObsFakeQuantize
    else:
        act_ctr = PlaceholderObserver if is_dynamic else HistogramObserver
    act = QuantizationSpec(
        dtype=torch.int8,
        quant_min=act_qmin,
        quant_max=act_qmax,
        qscheme=torch.per_tensor_affine,
        is_dynamic=is_dynamic,
        observer_or_fake_quant_ctr=act_ctr.with_args(**act_args),
    )
    weight_ctr: Any = PerChannelMinMaxObserver if is_per_channel else MinMaxObserver
    weight_args: dict[str, Any] = {"eps": EPS}
    if is_qat:
        weight_ctr = FusedMovingAvgObsFakeQuantize
        weight_args["observer"] = (
            MovingAveragePerChannelMinMaxObserver if is_per_channel else MovingAverageMinMaxObserver
        )
    weight = QuantizationSpec(
        dtype=torch.int8,
        quant_min=weight_qmin,
        quant_max=weight_qmax,
        qscheme=torch.per_channel_symmetric if is_per_channel else torch.per_tensor_symmetric,
        ch_axis=0,
        is_dynamic=False,
        observer_or_fake_quant_ctr=weight_ctr.with_args(**weight_args),
    )
    return QuantizationConfig(act, None if is_dynamic else act, weight, None, is_qat)
