"""The x86 Inductor quantization configs: uint8 affine activations, int8 symmetric
per-channel weights, float bias, as torchao 0.18's ``X86InductorQuantizer`` defines them.

The weight observer is chosen in one place, :func:`_weight_observer`, because the right
int8 weight range depends on the CPU the model will run on (see ``qcore.host``): without
VNNI, oneDNN adds pairs of u8 x s8 products in saturating 16-bit lanes.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torchao.quantization.pt2e import (
    FakeQuantize,
    FusedMovingAvgObsFakeQuantize,
    HistogramObserver,
    MovingAverageMinMaxObserver,
    MovingAveragePerChannelMinMaxObserver,
    PlaceholderObserver,
)
from torchao.quantization.pt2e.quantizer import QuantizationConfig, QuantizationSpec

import qcore.host
from qcore.pt2e_ranges import weight_observer_ctr
from qcore.weight_ranges import SAFE_QRANGE

__all__ = [
    "EPS",
    "get_default_x86_inductor_quantization_config",
    "get_x86_inductor_linear_dynamic_fp16_config",
]

#: Smallest scale any observer may produce (torchao's value for x86).
EPS = 2**-12


def get_default_x86_inductor_quantization_config(
    is_qat: bool = False,
    is_dynamic: bool = False,
    reduce_range: bool = False,
) -> QuantizationConfig:
    """uint8 ``[0, 255]`` affine activations (``[0, 127]`` with ``reduce_range``),
    histogram-observed, per batch when ``is_dynamic``, fake-quantized when ``is_qat``;
    int8 ``[-128, 127]`` symmetric per-output-channel weights; bias left in float.

    Equal options give the same config object for the same int8 target, as upstream's
    cached function does (the target is part of the key because the weight observer may
    depend on it).
    """
    return _default_config(is_qat, is_dynamic, reduce_range, qcore.host.target().isa)


@functools.lru_cache
def _default_config(
    is_qat: bool, is_dynamic: bool, reduce_range: bool, target_isa: str
) -> QuantizationConfig:
    del target_isa  # only a cache key: _weight_observer reads the target itself
    act = QuantizationSpec(
        dtype=torch.uint8,
        quant_min=0,
        quant_max=127 if reduce_range else 255,
        qscheme=torch.per_tensor_affine,
        is_dynamic=is_dynamic,
        observer_or_fake_quant_ctr=_activation_observer(is_qat, is_dynamic),
    )
    weight_min, weight_max = _weight_range(is_qat)
    weight = QuantizationSpec(
        dtype=torch.int8,
        quant_min=weight_min,
        quant_max=weight_max,
        qscheme=torch.per_channel_symmetric,
        ch_axis=0,  # output channels of conv (oc, ic, kh, kw) and linear (out, in) weights
        is_dynamic=False,
        observer_or_fake_quant_ctr=_weight_observer(is_qat, is_dynamic),
    )
    # upstream's dynamic config keeps the (dynamic) activation spec as the output spec too
    return QuantizationConfig(act, act, weight, None, is_qat)


def _activation_observer(is_qat: bool, is_dynamic: bool) -> Any:
    if is_qat and is_dynamic:
        # per-batch ranges while training: a moving average that forgets at once
        return FakeQuantize.with_args(
            eps=EPS, observer=MovingAverageMinMaxObserver.with_args(averaging_constant=1)
        )
    if is_qat:
        return FusedMovingAvgObsFakeQuantize.with_args(eps=EPS)
    if is_dynamic:
        return PlaceholderObserver.with_args(eps=EPS)
    return HistogramObserver.with_args(eps=EPS)


def _weight_range(is_qat: bool) -> tuple[int, int]:
    """int8 [-128, 127], upstream's range; QAT on a CPU without VNNI trains with
    ``qcore``'s safe range instead (a per-layer switch after training would change the
    weights the network learned against)."""
    if is_qat and qcore.host.target().saturates_u8s8:
        return SAFE_QRANGE
    return (-128, 127)


def _weight_observer(is_qat: bool, is_dynamic: bool) -> Any:
    """The observer (or fake-quant) constructor for int8 per-channel weights.

    The single place where the weight observer follows the target CPU: without VNNI,
    post-training weights get ``qcore``'s target-aware observer with the
    ``never_overflow`` rule: per channel, the widest range whose codes no uint8 input can
    overflow (``qcore.saturation.never_overflow_half_ranges``). The lowering then finds
    no op to split, so the compiled model runs exactly as many int8 kernels as torchao's
    and matches the eager converted model within rounding on any CPU. On a VNNI target it is
    upstream's observer, which the parity tests compare against.
    """
    if is_qat:
        return FusedMovingAvgObsFakeQuantize.with_args(
            eps=EPS, observer=MovingAveragePerChannelMinMaxObserver
        )
    del is_dynamic  # the rule needs no calibration inputs: dynamic layers get it too
    return weight_observer_ctr(rule="never_overflow", eps=EPS)


@functools.lru_cache
def get_x86_inductor_linear_dynamic_fp16_config() -> QuantizationConfig:
    """fp16 weights for linear layers, activations left in float: the op computes
    ``fp32 input x fp16 weight (upcast) -> fp32``."""
    weight = QuantizationSpec(dtype=torch.float16, observer_or_fake_quant_ctr=PlaceholderObserver)
    return QuantizationConfig(None, None, weight, None)
