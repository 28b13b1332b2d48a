"""The warning for a converted model that only this package's lowering computes exactly.

On a CPU without VNNI, oneDNN adds pairs of u8 x s8 products in saturating 16-bit lanes.
The ``budgeted`` and ``per_layer`` weight rules keep torchao's full range on some layers
(``calibrated`` where calibration stayed clear of int16), for this package's lowering,
which runs each op that can overflow on a doubled reduction. Compiled by torch's or
torchao's own x86 passes instead, those layers saturate and the compiled model no longer
equals its eager form, silently. So ``convert_pt2e`` warns, once per model, when the
target saturates, a converted layer's integer weights can overflow a pair sum on its
input's codes, and the lowering is not installed.

The check runs at ``convert_pt2e``, the one point where the weights' final codes are known
and code of this package runs: each weight observer computes its qparams there.
:class:`X86PerChannelWeightObserver` is the weight observer the x86 config gives on a
saturating target; :func:`watch_layers` (the quantizer's prepare callback) tells each one
which layers read its weight and through which input observer, and gives all of one
model's observers one :class:`ModelCheck`, which warns at most once.
"""

from __future__ import annotations

import inspect
import warnings
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor

from qcore.int8.cpu_profile import target
from qcore.int8.saturation import INT16_MAX, worst_case_pair_sum
from qcore.pt2e.range_graph import WEIGHTED_OPS
from qcore.pt2e.range_plan import ModelPlan, input_quant_max
from qcore.pt2e.ranges import TargetPerChannelWeightObserver

__all__ = [
    "ModelCheck",
    "SaturatingWithoutLoweringWarning",
    "X86PerChannelWeightObserver",
    "watch_layers",
]


class SaturatingWithoutLoweringWarning(UserWarning):
    """A converted model has int8 layers that oneDNN's kernels saturate on the target CPU
    (no VNNI) and that only ``qcore.get_lowering("x86")`` computes exactly, and that
    lowering was not installed when the model was converted. The message names the first
    such layer and the two fixes."""


@dataclass
class ModelCheck:
    """One prepared model's check: whether it has warned already."""

    warned: bool = False


@dataclass
class _Reader:
    """A layer that reads a weight, and the observer of that layer's input."""

    layer: str
    input_observer: Any


@dataclass
class _Watch:
    check: ModelCheck
    readers: list[_Reader] = field(default_factory=list)


class X86PerChannelWeightObserver(TargetPerChannelWeightObserver):
    """``qcore``'s target-aware int8 weight observer (same ranges, same qparams), which also
    runs its model's :class:`ModelCheck` when ``convert_pt2e`` asks for the qparams.
    (torchao hands ``ch_axis`` only to observers whose class name says "PerChannel".)"""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.watch: _Watch | None = None

    def calculate_qparams(self, **kwargs: Any) -> tuple[Tensor, Tensor]:
        scale, zero_point = super().calculate_qparams(**kwargs)
        if self.watch is not None:
            _check(self, self.watch, scale, zero_point)
        return scale, zero_point


def watch_layers(edge_or_node_to_obs_or_fq: dict[Any, Any]) -> None:
    """Give every :class:`X86PerChannelWeightObserver` of one prepared model the layers that
    read its weight (with their input observers) and the model's one :class:`ModelCheck`.
    Called from the quantizer's ``prepare_obs_or_fq_callback``."""
    check = ModelCheck()
    for key, observer in edge_or_node_to_obs_or_fq.items():
        if not isinstance(key, tuple) or not isinstance(observer, X86PerChannelWeightObserver):
            continue
        argument, user = key
        if user.target not in WEIGHTED_OPS or len(user.args) < 2 or user.args[1] is not argument:
            continue  # not the weight edge of a conv / linear
        input_observer = edge_or_node_to_obs_or_fq.get((user.args[0], user))
        if input_observer is None:
            continue  # no quantized input: no u8 x s8 kernel
        if observer.watch is None:  # a weight read by several layers is watched once
            observer.watch = _Watch(check)
        observer.watch.readers.append(_Reader(user.name, input_observer))


def _check(
    observer: X86PerChannelWeightObserver, watch: _Watch, scale: Tensor, zero_point: Tensor
) -> None:
    if watch.check.warned or not target().saturates_u8s8 or observer.weight is None:
        return
    if _lowering_installed():
        return
    codes = _weight_codes(observer, scale, zero_point)
    for reader in watch.readers:
        qmax = _input_quant_max(reader.input_observer)
        worst = worst_case_pair_sum(codes, act_max=qmax)
        if worst > INT16_MAX:
            watch.check.warned = True
            warnings.warn(
                _message(reader.layer, worst, qmax),
                SaturatingWithoutLoweringWarning,
                stacklevel=_callers_level(),
            )
            return


#: Packages between the user's ``convert_pt2e`` call and the check.
_LIBRARIES = frozenset({"torch", "torchao", "qcore", "qinductor_x86"})


def _callers_level() -> int:
    """The ``stacklevel``, for a warning raised by :func:`_check`, of the first frame
    outside torch, torchao, qcore and this package: the line that converted the model."""
    frame = inspect.currentframe()
    frame = frame.f_back if frame is not None else None  # _check's frame: level 1
    level = 1
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        if module.partition(".")[0] not in _LIBRARIES:
            return level
        frame, level = frame.f_back, level + 1
    return 1


def _message(layer: str, worst: int, qmax: int) -> str:
    return (
        f"qinductor-x86: layer {layer!r} has int8 weights whose u8 x s8 pair sums reach "
        f"{worst} on inputs up to {qmax}, beyond the 16-bit sums of oneDNN's int8 kernels "
        f"on this {target().isa} target, and qcore.get_lowering('x86'), the only lowering "
        "that computes them exactly, was not installed at convert_pt2e: compile under "
        "`with qcore.get_lowering('x86'):` (torch's and torchao's x86 passes saturate "
        "them), or quantize with weight_rule='never_overflow'"
    )


def _lowering_installed() -> bool:
    # the process's one lowering; importing it loads no Inductor
    from qinductor_x86.lowering import make_lowering

    return make_lowering().installed


def _input_quant_max(input_observer: Any) -> int:
    """The largest uint8 code the layer's input converts with: a ``budgeted`` plan may cut
    it to 7 bits (its observer then carries the plan)."""
    plan = getattr(input_observer, "plan", None)
    if isinstance(plan, ModelPlan):
        return plan.input_quant_max(input_observer)
    return input_quant_max(input_observer)


def _weight_codes(
    observer: X86PerChannelWeightObserver, scale: Tensor, zero_point: Tensor
) -> Tensor:
    """The int8 codes ``convert_pt2e`` folds: PT2E's own per-channel quantize op."""
    from qinductor_x86 import _torch_private as private

    weight = observer.weight
    assert weight is not None  # checked by the caller
    codes: Tensor = private.quantized_decomposed_ops().quantize_per_channel(
        weight.float(),
        scale,
        zero_point,
        int(observer.ch_axis),
        int(observer.quant_min),
        int(observer.quant_max),
        observer.dtype,
    )
    return codes
