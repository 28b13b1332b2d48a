"""Per-layer int8 weight ranges for PT2E quantizers whose kernels are oneDNN's.

The PT2E twin of :mod:`qcore.int8.weight_ranges`: a quantizer puts
:func:`weight_observer_ctr` in its weight ``QuantizationSpec``. On a target CPU that
saturates int8 (see :mod:`qcore.host`) that is a :class:`TargetPerChannelWeightObserver`, and
:meth:`qcore.pt2e.annotation.registry_quantizer.RegistryQuantizer.prepare_obs_or_fq_callback` links
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
from qcore.int8.cpu_profile import target
from qcore.int8.saturation import (
    SAFE_HALF_RANGE,
    Geometry,
    RangeChoice,
    choose_weight_ranges,
    never_overflow_half_ranges,
    range_cost_db,
)
from qcore.pt2e.histogram import HistogramObserver
from qcore.pt2e.range_graph import (
    WEIGHTED_OPS,
    geometry_of,
    input_shape_of,
    is_gated,
    macs_of,
    positions_of,
)
from qcore.pt2e.range_plan import ModelPlan, input_quant_max, input_statistics
from qcore.pt2e.range_reach import residual_paths

__all__ = [
    "RangeRule",
    "TargetHistogramObserver",
    "TargetPerChannelWeightObserver",
    "activation_observer_ctr",
    "input_recorders",
    "link_weight_observers",
    "weight_observer_ctr",
]

#: ``calibrated``: :func:`qcore.int8.saturation.choose_weight_ranges` on the calibration inputs
#: (kernels that saturate silently: keep full range where calibration stays clear).
#: ``never_overflow``: :func:`qcore.int8.saturation.never_overflow_half_ranges` from the weights
#: alone (kernels that must be exact on every input, and a lowering that would otherwise
#: run each op that can overflow as a kernel of twice the depth).
#: ``per_layer`` (accuracy first): ``never_overflow`` for a layer where it adds at most
#: :data:`PER_LAYER_BUDGET_DB` to the layer's output noise (weights' and input's rounding,
#: :func:`qcore.int8.saturation.range_cost_db`), else the full range: for an exact lowering,
#: which runs that layer's kernel at twice the depth, so the network keeps its accuracy.
#: ``budgeted``: per layer, never-overflow weights, a 7-bit input (with
#: :func:`activation_observer_ctr`) or full range on a doubled reduction, priced by added
#: noise and by multiply-adds, the doublings within
#: :data:`qcore.int8.depth_plan.DOUBLED_MAC_BUDGET` (:mod:`qcore.pt2e.range_plan`): for an
#: exact lowering at nearly single depth.
RangeRule = Literal["calibrated", "never_overflow", "per_layer", "budgeted"]
RULES: tuple[RangeRule, ...] = ("calibrated", "never_overflow", "per_layer", "budgeted")
#: The most output noise (dB over full-range weights) ``per_layer`` lets a layer gain to
#: keep its kernel single-depth. Every layer's injected noise grows at most this much, so
#: the network's output noise does too: within 1 dB of full-range weights, with margin
#: for the estimate (benchmarks/README.md has the measured table).
PER_LAYER_BUDGET_DB = 0.5

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
    linked). ``rule="budgeted"``: as its model's plan says. (torchao hands ``ch_axis`` only
    to observers whose class name says "PerChannel".)"""

    def __init__(self, rule: RangeRule = "calibrated", **kwargs: Any) -> None:
        kwargs.setdefault("dtype", torch.int8)
        kwargs.setdefault("qscheme", torch.per_channel_symmetric)
        super().__init__(**kwargs)
        if rule not in RULES:
            raise ValueError(f"unknown weight range rule {rule!r}")
        self.rule: RangeRule = rule
        self.link: _Link | None = None
        self.choice: RangeChoice | None = None
        self.plan: ModelPlan | None = None
        self._weight: Tensor | None = None

    @property
    def weight(self) -> Tensor | None:
        """The float weight last observed."""
        return self._weight

    def forward(self, x_orig: Tensor) -> Tensor:
        self._weight = x_orig.detach()
        result: Tensor = super().forward(x_orig)
        return result

    def calculate_qparams(self, **kwargs: Any) -> tuple[Tensor, Tensor]:
        scale, zero_point = super().calculate_qparams()
        full = (self.quant_max - self.quant_min) / 2
        if self.rule == "budgeted" and self._weight is not None:
            if self.plan is not None and self.plan.doubled(self):
                return scale, zero_point  # full range: the exact lowering's deeper kernel
            planned = self.plan.weight_input_quant_max(self) if self.plan is not None else None
            qmax = self._input_qmax() if planned is None else planned
            factor = full / torch.tensor(
                never_overflow_half_ranges(self._weight, qmax, full), dtype=torch.float64
            )
        elif self.rule != "calibrated" and self._weight is not None:
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
        stats = input_statistics(observer)
        if stats is None or self._weight is None:
            return math.inf
        moments = (stats.mean, stats.mean_square)
        return range_cost_db(self._weight, halves, full, moments, stats.rounding)

    def _input_qmax(self) -> int:
        """The largest uint8 code of the layer's input (255 when unknown or not uint8:
        signed codes reach the kernel shifted by 128)."""
        observer = self.link.input_observer() if self.link is not None else None
        return input_quant_max(observer)

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


def weight_observer_ctr(rule: RangeRule = "calibrated", **kwargs: Any) -> Any:
    """The weight observer constructor for a per-channel symmetric int8 weight spec:
    :class:`TargetPerChannelWeightObserver` with ``rule`` on a saturating target, else
    torchao's own."""
    if target().saturates_u8s8:
        return TargetPerChannelWeightObserver.with_args(rule=rule, **kwargs)
    return PerChannelMinMaxObserver.with_args(**kwargs)


class TargetHistogramObserver(HistogramObserver):
    """torchao's histogram observer for uint8 activations, whose range a ``budgeted`` plan
    may cut to 7 bits when the model is converted (:mod:`qcore.pt2e.range_plan`).

    PT2E gives a tensor one observer, however many layers read it (and a shared spec
    gives several tensors one), so the range is chosen per observer, for all of its
    readers at once, and the quantize that ``convert_pt2e`` writes from it is the one
    every reader sees. The histogram's range search does not depend on ``quant_max``, so
    a 7-bit cut gives exactly what a 7-bit observer would have given on the same data.
    Without a plan it is torchao's observer."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.native_quant_max: int = int(getattr(self, "quant_max"))  # noqa: B009  (untyped base)
        self.plan: ModelPlan | None = None

    def qparams_at(self, quant_max: int | None) -> tuple[Tensor, Tensor]:
        """torchao's qparams on ``[quant_min, quant_max]`` (None: the observer's own)."""
        saved: int = getattr(self, "quant_max")  # noqa: B009  (untyped base)
        self.quant_max = self.native_quant_max if quant_max is None else quant_max
        try:
            result: tuple[Tensor, Tensor] = HistogramObserver.calculate_qparams(self)
        finally:
            self.quant_max = saved
        return result

    def calculate_qparams(self, **kwargs: Any) -> tuple[Tensor, Tensor]:
        if self.plan is not None:
            # convert_pt2e reads quant_max after this call, for the quantize it writes
            self.quant_max = self.plan.input_quant_max(self)
        result: tuple[Tensor, Tensor] = super().calculate_qparams()
        return result


def activation_observer_ctr(rule: RangeRule = "calibrated", **kwargs: Any) -> Any:
    """The observer constructor for a static uint8 activation spec:
    :class:`TargetHistogramObserver` under the ``budgeted`` rule on a saturating target,
    else torchao's ``HistogramObserver`` (its range search walked faster, to the same
    range: :mod:`qcore.pt2e.histogram`)."""
    if rule == "budgeted" and target().saturates_u8s8:
        return TargetHistogramObserver.with_args(**kwargs)
    return HistogramObserver.with_args(**kwargs)


def input_recorders(model: nn.Module) -> dict[str, InputRecorder]:
    """The calibration inputs recorded in ``model``, by the path of the input observer
    that records them."""
    return {name: _RECORDERS[m] for name, m in model.named_modules() if m in _RECORDERS}


def link_weight_observers(
    model: GraphModule, edge_or_node_to_obs_or_fq: Mapping[Any, Any]
) -> None:
    """Link every :class:`TargetPerChannelWeightObserver` to its layer's input observer, which
    starts recording calibration inputs (``calibrated``), or puts the two in the model's
    plan (``budgeted``), with the planned layers' ways through the graph's residual adds.
    A quantizer's ``prepare_obs_or_fq_callback``."""
    plan = ModelPlan()
    users = dict.fromkeys(key[1] for key in edge_or_node_to_obs_or_fq if isinstance(key, tuple))
    planned: dict[str, Node] = {}
    for node in users:  # graph order: the plan breaks ties by it
        dims = WEIGHTED_OPS.get(node.target)
        if dims is None:  # (a weighted op's schema requires its input and weight)
            continue
        weight_obs = edge_or_node_to_obs_or_fq.get((node.args[1], node))
        input_obs = edge_or_node_to_obs_or_fq.get((node.args[0], node))
        if not isinstance(weight_obs, TargetPerChannelWeightObserver) or input_obs is None:
            continue
        if getattr(input_obs, "is_dynamic", False):
            continue  # inputs are quantized per batch at run time: the layer stays safe
        if weight_obs.rule == "budgeted":
            plan.add(
                node.name,
                weight_obs,
                input_obs,
                macs_of(node),
                positions=positions_of(node),
                gated=is_gated(node),
            )
            weight_obs.plan = plan
            planned[node.name] = node
            if isinstance(input_obs, TargetHistogramObserver):
                input_obs.plan = plan
        geometry = geometry_of(node, dims)
        shape = input_shape_of(node)
        if geometry is None or shape is None:
            continue  # unknown shape: the layer keeps the safe range
        if weight_obs.rule == "calibrated" and input_obs not in _RECORDERS:
            recorder = _RECORDERS[input_obs] = InputRecorder()
            input_obs.register_forward_hook(recorder.hook)
        weight_obs.link = _Link(weakref.ref(input_obs), geometry, shape, node.name)
    if planned:
        plan.paths = residual_paths(model.graph.nodes, edge_or_node_to_obs_or_fq, planned)
