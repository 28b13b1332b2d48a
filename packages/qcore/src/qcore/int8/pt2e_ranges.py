"""Per-layer int8 weight ranges for PT2E quantizers whose kernels are oneDNN's.

The PT2E twin of :mod:`qcore.int8.weight_ranges`: a quantizer puts
:func:`weight_observer_ctr` in its weight ``QuantizationSpec``. On a target CPU that
saturates int8 (see :mod:`qcore.host`) that is a :class:`TargetPerChannelWeightObserver`, and
:meth:`qcore.annotation.quantizer.RegistryQuantizer.prepare_obs_or_fq_callback` links
each one, through :func:`link_weight_observers`, to the observer of its layer's input,
which keeps a capped sample of the calibration inputs. ``convert_pt2e`` then asks the
weight observer for its qparams, and it chooses each channel's range on that sample with
:func:`qcore.int8.saturation.choose_weight_ranges`, or, with ``rule="never_overflow"``, from
the weights alone with :func:`qcore.int8.saturation.never_overflow_half_ranges`. Elsewhere
torchao's own observer is used, so outputs stay identical to upstream's. Importing this
imports torchao.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor, nn
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e import PerChannelMinMaxObserver

from qcore.int8.calibration import InputRecorder
from qcore.int8.host import target
from qcore.int8.saturation import (
    SAFE_HALF_RANGE,
    Geometry,
    RangeChoice,
    choose_weight_ranges,
    never_overflow_half_ranges,
    range_cost_db,
)

__all__ = [
    "RangeRule",
    "TargetPerChannelWeightObserver",
    "input_recorders",
    "link_weight_observers",
    "weight_observer_ctr",
]

#: ``calibrated``: :func:`qcore.int8.saturation.choose_weight_ranges` on the calibration inputs
#: (kernels that saturate silently: keep full range where calibration stays clear).
#: ``never_overflow``: :func:`qcore.int8.saturation.never_overflow_half_ranges` from the weights
#: alone (kernels that must be exact on every input, and a lowering that would otherwise
#: run each op that can overflow as a kernel of twice the depth).
#: ``per_layer``: ``never_overflow`` for a layer where it adds at most
#: :data:`PER_LAYER_BUDGET_DB` to the layer's output noise (weights' and input's rounding,
#: :func:`qcore.int8.saturation.range_cost_db`), else the full range: for an exact lowering,
#: which runs that layer's kernel at twice the depth, so the network keeps its accuracy.
RangeRule = Literal["calibrated", "never_overflow", "per_layer"]
RULES: tuple[RangeRule, ...] = ("calibrated", "never_overflow", "per_layer")
#: The most output noise (dB over full-range weights) ``per_layer`` lets a layer gain to
#: keep its kernel single-depth. Every layer's injected noise grows at most this much, so
#: the network's output noise does too: within 1 dB of full-range weights, with margin
#: for the estimate (benchmarks/README.md has the measured table).
PER_LAYER_BUDGET_DB = 0.5

_aten = torch.ops.aten
#: aten op -> number of spatial dims (0: linear). Their arguments: input, weight, bias,
#: then for convolutions stride, padding, dilation, groups.
_WEIGHTED_OPS: Mapping[Any, int] = {
    _aten.linear.default: 0,
    _aten.conv1d.default: 1,
    _aten.conv2d.default: 2,
    _aten.conv3d.default: 3,
}
#: A recorder per input observer, found again by the weight observers linked to it.
_RECORDERS: weakref.WeakKeyDictionary[nn.Module, InputRecorder] = weakref.WeakKeyDictionary()


@dataclass
class _Link:
    input_observer: weakref.ReferenceType[nn.Module]
    geometry: Geometry
    #: the layer's input as exported, batch (and any symbolic size) as None
    input_shape: tuple[int | None, ...]
    layer: str


class TargetPerChannelWeightObserver(PerChannelMinMaxObserver):  # type: ignore[misc]  # torchao is untyped
    """torchao's per-channel symmetric int8 weight observer, with the range chosen per
    channel for a saturating CPU. ``rule="calibrated"``: from calibration inputs when
    linked to its layer's input observer, else the safe range for every channel.
    ``rule="never_overflow"``: from the weights alone (and the input's ``quant_max`` when
    linked). (torchao hands ``ch_axis`` only to observers whose class name says
    "PerChannel".)"""

    def __init__(self, rule: RangeRule = "calibrated", **kwargs: Any) -> None:
        kwargs.setdefault("dtype", torch.int8)
        kwargs.setdefault("qscheme", torch.per_channel_symmetric)
        super().__init__(**kwargs)
        if rule not in RULES:
            raise ValueError(f"unknown weight range rule {rule!r}")
        self.rule: RangeRule = rule
        self.link: _Link | None = None
        self.choice: RangeChoice | None = None
        self._weight: Tensor | None = None

    def forward(self, x_orig: Tensor) -> Tensor:
        self._weight = x_orig.detach()
        result: Tensor = super().forward(x_orig)
        return result

    def calculate_qparams(self, **kwargs: Any) -> tuple[Tensor, Tensor]:
        scale, zero_point = super().calculate_qparams()
        full = (self.quant_max - self.quant_min) / 2
        if self.rule != "calibrated" and self._weight is not None:
            halves = never_overflow_half_ranges(self._weight, self._input_qmax(), full)
            if self.rule == "per_layer" and self._cost_db(halves, full) > PER_LAYER_BUDGET_DB:
                return scale, zero_point  # full range: the exact lowering's deeper kernel
            factor = full / torch.tensor(halves, dtype=torch.float64)
        elif (choice := self._choose()) is not None:
            self.choice = choice
            factor = choice.scale_factors()
        else:
            factor = torch.full_like(scale, full / SAFE_HALF_RANGE, dtype=torch.float64)
        if bool((factor == 1).all()):
            return scale, zero_point  # untouched: identical to torchao's observer
        return (scale.double() * factor).to(scale.dtype), zero_point

    def _cost_db(self, halves: tuple[float, ...], full: float) -> float:
        """The layer's output-noise cost of ``halves`` (infinite, i.e. keep the full range,
        when its input's statistics are unknown)."""
        observer = self.link.input_observer() if self.link is not None else None
        stats = _input_statistics(observer)
        if stats is None or self._weight is None:
            return math.inf
        return range_cost_db(self._weight, halves, full, *stats)

    def _input_qmax(self) -> int:
        """The largest uint8 code of the layer's input (255 when unknown or not uint8:
        signed codes reach the kernel shifted by 128)."""
        observer = self.link.input_observer() if self.link is not None else None
        qmax = getattr(observer, "quant_max", None)
        unsigned = getattr(observer, "dtype", None) in (torch.uint8, torch.quint8)
        return int(qmax) if unsigned and isinstance(qmax, int) and 0 < qmax <= 255 else 255

    def _choose(self) -> RangeChoice | None:
        link, weight = self.link, self._weight
        observer = link.input_observer() if link is not None else None
        if link is None or weight is None or observer is None or observer not in _RECORDERS:
            return None
        inputs = _RECORDERS[observer].inputs_shaped(link.input_shape)
        if inputs is None or getattr(observer, "dtype", None) not in (torch.uint8, torch.quint8):
            return None  # signed inputs are another kernel's business; stay safe
        scale, zero_point = observer.calculate_qparams()  # type: ignore[operator]
        qparams = (
            float(scale.reshape(-1)[0]),
            int(zero_point.reshape(-1)[0]),
            int(getattr(observer, "quant_min")),  # noqa: B009
            int(getattr(observer, "quant_max")),  # noqa: B009
        )
        full = (int(self.quant_min), int(self.quant_max))
        return choose_weight_ranges(weight, inputs, qparams, link.geometry, full)


def _input_statistics(observer: Any) -> tuple[tuple[float, float], float] | None:
    """``((E[x], E[x^2]), E[dx^2])`` of a calibrated uint8 activation observer, ``dx`` its
    rounding error: from its histogram (torch's ``HistogramObserver``), else from its range
    as if uniform."""
    low, high = getattr(observer, "min_val", None), getattr(observer, "max_val", None)
    if not isinstance(low, Tensor) or not isinstance(high, Tensor) or low.numel() != 1:
        return None
    lo, hi = float(low), float(high)
    if not math.isfinite(lo) or not math.isfinite(hi) or hi <= lo:
        return None
    scale_t, zero_point_t = observer.calculate_qparams()
    scale, zero_point = float(scale_t.reshape(-1)[0]), int(zero_point_t.reshape(-1)[0])
    histogram = getattr(observer, "histogram", None)
    if not isinstance(histogram, Tensor) or float(histogram.sum()) <= 0:
        return ((lo + hi) / 2, (lo * lo + lo * hi + hi * hi) / 3), scale * scale / 12
    width = (hi - lo) / histogram.numel()
    centers = lo + width * (torch.arange(histogram.numel(), dtype=torch.float64) + 0.5)
    weights = histogram.double() / histogram.double().sum()
    qmin, qmax = int(getattr(observer, "quant_min", 0)), int(getattr(observer, "quant_max", 255))
    codes = torch.clamp(torch.round(centers / scale) + zero_point, qmin, qmax)
    rounding = (codes - zero_point) * scale - centers
    # a bin's own spread, where the grid is finer than the histogram
    noise = float((weights * rounding**2).sum()) + min(width, scale) ** 2 / 12
    moments = float((weights * centers).sum()), float((weights * centers**2).sum())
    return moments, noise


def weight_observer_ctr(rule: RangeRule = "calibrated", **kwargs: Any) -> Any:
    """The weight observer constructor for a per-channel symmetric int8 weight spec:
    :class:`TargetPerChannelWeightObserver` with ``rule`` on a saturating target, else
    torchao's own."""
    if target().saturates_u8s8:
        return TargetPerChannelWeightObserver.with_args(rule=rule, **kwargs)
    return PerChannelMinMaxObserver.with_args(**kwargs)


def _spatial(value: Any, dims: int, default: int) -> tuple[int, ...] | None:
    if value is None:
        return (default,) * dims
    if isinstance(value, int):
        return (value,) * dims
    if isinstance(value, list | tuple) and all(isinstance(v, int) for v in value):
        return tuple(value) * dims if len(value) == 1 else tuple(value)
    return None


def _geometry(node: Node, dims: int) -> Geometry | None:
    """The op's reduction geometry from its aten arguments (defaults may be omitted)."""
    if dims == 0:
        return Geometry.linear()
    args = [*node.args, *([None] * (7 - len(node.args)))]
    stride, padding, dilation = (
        _spatial(args[3], dims, 1),
        _spatial(args[4], dims, 0),
        _spatial(args[5], dims, 1),
    )
    groups = 1 if args[6] is None else args[6]
    if stride is None or padding is None or dilation is None or not isinstance(groups, int):
        return None
    return Geometry.conv(stride, padding, dilation, groups)


def _input_shape(node: Node) -> tuple[int | None, ...] | None:
    """The shape of the layer's input as exported, with the batch left open; None when
    export recorded none."""
    source = node.args[0]
    value = source.meta.get("val") if isinstance(source, Node) else None
    if not isinstance(value, Tensor) or value.dim() < 2:
        return None
    sizes = [size if isinstance(size, int) else None for size in value.shape]
    return (None, *sizes[1:])


def input_recorders(model: nn.Module) -> dict[str, InputRecorder]:
    """The calibration inputs recorded in ``model``, by the path of the input observer
    that records them."""
    return {name: _RECORDERS[m] for name, m in model.named_modules() if m in _RECORDERS}


def link_weight_observers(
    model: GraphModule, edge_or_node_to_obs_or_fq: Mapping[Any, Any]
) -> None:
    """Link every :class:`TargetPerChannelWeightObserver` to its layer's input observer, which
    starts recording calibration inputs. A quantizer's ``prepare_obs_or_fq_callback``."""
    del model
    for node in {key[1] for key in edge_or_node_to_obs_or_fq if isinstance(key, tuple)}:
        dims = _WEIGHTED_OPS.get(node.target)
        if dims is None or len(node.args) < 2:
            continue
        weight_obs = edge_or_node_to_obs_or_fq.get((node.args[1], node))
        input_obs = edge_or_node_to_obs_or_fq.get((node.args[0], node))
        if not isinstance(weight_obs, TargetPerChannelWeightObserver) or input_obs is None:
            continue
        if getattr(input_obs, "is_dynamic", False):
            continue  # inputs are quantized per batch at run time: the layer stays safe
        geometry = _geometry(node, dims)
        shape = _input_shape(node)
        if geometry is None or shape is None:
            continue  # unknown shape: the layer keeps the safe range
        if weight_obs.rule == "calibrated" and input_obs not in _RECORDERS:
            recorder = _RECORDERS[input_obs] = InputRecorder()
            input_obs.register_forward_hook(recorder.hook)
        weight_obs.link = _Link(weakref.ref(input_obs), geometry, shape, node.name)
