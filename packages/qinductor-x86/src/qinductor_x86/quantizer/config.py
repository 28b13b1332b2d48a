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
    MovingAverageMinMaxObserver,
    MovingAveragePerChannelMinMaxObserver,
    PlaceholderObserver,
)
from torchao.quantization.pt2e.quantizer import QuantizationConfig, QuantizationSpec

from qcore.int8 import cpu_profile as host
from qcore.int8.weight_ranges import SAFE_QRANGE
from qcore.pt2e.ranges import (
    RULES,
    RangeRule,
    activation_observer_ctr,
    weight_observer_ctr,
)
from qinductor_x86.quantizer.saturation_warning import X86PerChannelWeightObserver

__all__ = [
    "EPS",
    "get_default_x86_inductor_quantization_config",
    "get_x86_inductor_linear_dynamic_fp16_config",
]

#: Smallest scale any observer may produce (torchao's value for x86).
EPS = 2**-12


#: The weight-range rule on a CPU without VNNI, for this package's exact lowering: single
#: depth nearly everywhere (torchao's speed), within a 4.5 % multiply-add budget of doubling
#: (at most 5 % more time).
DEFAULT_WEIGHT_RULE: RangeRule = "budgeted"


def get_default_x86_inductor_quantization_config(
    is_qat: bool = False,
    is_dynamic: bool = False,
    reduce_range: bool = False,
    weight_rule: RangeRule = DEFAULT_WEIGHT_RULE,
) -> QuantizationConfig:
    """uint8 ``[0, 255]`` affine activations (``[0, 127]`` with ``reduce_range``),
    histogram-observed, per batch when ``is_dynamic``, fake-quantized when ``is_qat``;
    int8 ``[-128, 127]`` symmetric per-output-channel weights; bias left in float.

    ``weight_rule`` (not upstream's; used only when the target CPU has no VNNI, see
    :func:`_weight_observer`): ``"budgeted"`` (default) or ``"per_layer"`` (accuracy
    first, at twice the multiply-adds) for this package's lowering, which runs any op
    exactly; ``"never_overflow"`` when torch's built-in passes will lower the model.

    Equal options give the same config object for the same int8 target, as upstream's
    cached function does (the target is part of the key because the weight observer may
    depend on it).
    """
    if weight_rule not in RULES:
        raise ValueError(f"weight_rule must be one of {RULES}, got {weight_rule!r}")
    return _default_config(is_qat, is_dynamic, reduce_range, weight_rule, host.target().isa)


@functools.lru_cache
def _default_config(
    is_qat: bool, is_dynamic: bool, reduce_range: bool, weight_rule: RangeRule, target_isa: str
) -> QuantizationConfig:
    del target_isa  # only a cache key: _weight_observer reads the target itself
    act = QuantizationSpec(
        dtype=torch.uint8,
        quant_min=0,
        quant_max=127 if reduce_range else 255,
        qscheme=torch.per_tensor_affine,
        is_dynamic=is_dynamic,
        observer_or_fake_quant_ctr=_activation_observer(is_qat, is_dynamic, weight_rule),
    )
    weight_min, weight_max = _weight_range(is_qat)
    weight = QuantizationSpec(
        dtype=torch.int8,
        quant_min=weight_min,
        quant_max=weight_max,
        qscheme=torch.per_channel_symmetric,
        ch_axis=0,  # output channels of conv (oc, ic, kh, kw) and linear (out, in) weights
        is_dynamic=False,
        observer_or_fake_quant_ctr=_weight_observer(is_qat, weight_rule),
    )
    # upstream's dynamic config keeps the (dynamic) activation spec as the output spec too
    return QuantizationConfig(act, act, weight, None, is_qat)


def _activation_observer(is_qat: bool, is_dynamic: bool, rule: RangeRule) -> Any:
    """Upstream's observers; post-training static inputs under the ``budgeted`` rule on a
    CPU without VNNI get ``qcore``'s histogram observer, which its plan may cut to 7 bits
    (torchao's own on every other target)."""
    if is_qat and is_dynamic:
        # per-batch ranges while training: a moving average that forgets at once
        return FakeQuantize.with_args(
            eps=EPS, observer=MovingAverageMinMaxObserver.with_args(averaging_constant=1)
        )
    if is_qat:
        return FusedMovingAvgObsFakeQuantize.with_args(eps=EPS)
    if is_dynamic:
        return PlaceholderObserver.with_args(eps=EPS)
    return activation_observer_ctr(rule=rule, eps=EPS)


def _weight_range(is_qat: bool) -> tuple[int, int]:
    """int8 [-128, 127], upstream's range; QAT on a CPU without VNNI trains with
    ``qcore``'s safe range instead (a per-layer switch after training would change the
    weights the network learned against)."""
    if is_qat and host.target().saturates_u8s8:
        return SAFE_QRANGE
    return (-128, 127)


def _weight_observer(is_qat: bool, rule: RangeRule) -> Any:
    """The observer (or fake-quant) constructor for int8 per-channel weights.

    The single place where the weight observer follows the target CPU. Without VNNI,
    post-training weights get ``qcore``'s target-aware observer with ``rule``:

    * ``budgeted`` (default): per layer, never-overflow weights, a 7-bit input, or
      torchao's full range on a doubled reduction, whichever costs least in added noise,
      the doublings where they remove the most noise per multiply-add, within
      ``qcore.int8.depth_plan.DOUBLED_MAC_BUDGET`` (4.5 %) of the model's multiply-adds
      (``qcore.pt2e.range_plan``). Exact under this package's lowering at about torchao's
      speed; torch's built-in passes would saturate on the doubled layers.
    * ``per_layer`` (accuracy first): per layer, the narrower never-overflow range where
      it adds at most ``qcore.pt2e.ranges.PER_LAYER_BUDGET_DB`` to the layer's output
      noise, else torchao's full range, which this package's lowering runs as one kernel
      of twice the depth, exactly: torchao's accuracy at up to twice the int8 work.
    * ``never_overflow``: every channel's widest range that no uint8 input can overflow:
      exact under any lowering at single depth, up to ~3 dB below torchao's on networks
      whose layers see few input channels.
    * ``calibrated``: the widest range calibration does not overflow (qcore.fx's rule).

    On a VNNI target it is upstream's observer, which the parity tests compare against.
    Dynamic layers have no calibrated input statistics, so ``per_layer`` keeps them full.
    Without VNNI it is ``qcore``'s observer as this package's subclass, which warns at
    ``convert_pt2e`` when it keeps weights only this package's lowering computes exactly
    and that lowering is not installed (:mod:`qinductor_x86.quantizer.saturation_warning`).
    """
    if is_qat:
        return FusedMovingAvgObsFakeQuantize.with_args(
            eps=EPS, observer=MovingAveragePerChannelMinMaxObserver
        )
    if host.target().saturates_u8s8:
        return X86PerChannelWeightObserver.with_args(rule=rule, eps=EPS)
    return weight_observer_ctr(rule=rule, eps=EPS)


@functools.lru_cache
def get_x86_inductor_linear_dynamic_fp16_config() -> QuantizationConfig:
    """fp16 weights for linear layers, activations left in float: the op computes
    ``fp32 input x fp16 weight (upcast) -> fp32``."""
    weight = QuantizationSpec(dtype=torch.float16, observer_or_fake_quant_ctr=PlaceholderObserver)
    return QuantizationConfig(None, None, weight, None)
