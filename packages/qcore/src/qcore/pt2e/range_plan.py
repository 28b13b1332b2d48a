"""The depth plan of one PT2E-prepared model, made when ``convert_pt2e`` first asks.

:func:`qcore.pt2e.ranges.link_weight_observers` adds every weighted layer whose weight
observer follows the ``budgeted`` rule to one :class:`ModelPlan`, with the observer of its
input and its multiply-adds. The plan is made from the calibrated observers the first
time any of them computes its qparams (weights and inputs are converted in graph order,
and an input's 7-bit range must be known before its quantize is written): each layer is
priced (:mod:`qcore.int8.noise`), weighted by how much of its noise its residual adds let
through to the output (:mod:`qcore.pt2e.range_reach`), :func:`qcore.int8.depth_plan.choose`
decides, and every observer reads its part. An input observer shared by several layers
(one tensor, one quantize, however many readers) is one group: its range is chosen once
for all of them.
Calibrating again, or syncing observers across processes, changes the input observers and
makes a new plan.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, replace
from typing import Any, Protocol

import torch
from torch import Tensor, nn

from qcore.int8.depth_plan import DOUBLED_MAC_BUDGET, DepthPlan, LayerPrice, choose
from qcore.int8.noise import InputStatistics, LayerNoise, weight_codes
from qcore.int8.saturation import INT16_MAX, never_overflow_half_ranges, worst_case_pair_sum
from qcore.pt2e.range_reach import ResidualPaths

__all__ = ["SEVEN_BIT_QMAX", "ModelPlan", "input_quant_max", "input_statistics"]

#: How much of a change in a gate's input reaches its output, at most (sigmoid's slope).
GATE_SLOPE = 0.25
#: A 7-bit input's largest code: ``2 * 127 * 128 = 32512`` leaves every int16 pair of
#: full-range weights clear.
SEVEN_BIT_QMAX = 127


class _WeightObserver(Protocol):
    """What the plan reads of a weight observer (``TargetPerChannelWeightObserver``)."""

    quant_min: int
    quant_max: int

    @property
    def weight(self) -> Tensor | None: ...


@dataclass
class _Layer:
    name: str
    weight_observer: _WeightObserver
    input_observer: nn.Module
    macs: int | None
    positions: int
    gated: bool


def _unsigned(observer: Any) -> bool:
    return getattr(observer, "dtype", None) in (torch.uint8, torch.quint8)


def input_quant_max(observer: Any) -> int:
    """The largest uint8 code an input observer gives (255 when unknown or not uint8:
    signed codes reach the kernel shifted by 128)."""
    qmax = getattr(observer, "native_quant_max", getattr(observer, "quant_max", None))
    return int(qmax) if _unsigned(observer) and isinstance(qmax, int) and 0 < qmax <= 255 else 255


def _qparams(observer: Any, quant_max: int | None) -> tuple[Tensor, Tensor]:
    """The observer's qparams on ``[quant_min, quant_max]`` (its own range when None),
    without asking a plan (the plan itself asks this)."""
    at = getattr(observer, "qparams_at", None)
    if at is not None:
        result: tuple[Tensor, Tensor] = at(quant_max)
        return result
    return observer.calculate_qparams()  # type: ignore[no-any-return]


def input_statistics(observer: Any, quant_max: int | None = None) -> InputStatistics | None:
    """``E[x]``, ``E[x^2]`` and the rounding error ``E[dx^2]`` of a calibrated uint8
    activation observer on its grid (``quant_max``: another grid's top, same search): from
    its histogram (torch's ``HistogramObserver``), else from its range as if uniform."""
    low, high = getattr(observer, "min_val", None), getattr(observer, "max_val", None)
    if not isinstance(low, Tensor) or not isinstance(high, Tensor) or low.numel() != 1:
        return None
    lo, hi = float(low), float(high)
    if not math.isfinite(lo) or not math.isfinite(hi) or hi <= lo:
        return None
    scale_t, zero_point_t = _qparams(observer, quant_max)
    scale, zero_point = float(scale_t.reshape(-1)[0]), int(zero_point_t.reshape(-1)[0])
    histogram = getattr(observer, "histogram", None)
    if not isinstance(histogram, Tensor):
        return InputStatistics((lo + hi) / 2, (lo * lo + lo * hi + hi * hi) / 3, scale * scale / 12)
    width = (hi - lo) / histogram.numel()
    centers = lo + width * (torch.arange(histogram.numel(), dtype=torch.float64) + 0.5)
    weights = histogram.double() / histogram.double().sum()
    # (every observer with a min_val and max_val has its grid's bounds)
    qmin = int(observer.quant_min)
    own = getattr(observer, "native_quant_max", observer.quant_max)
    qmax = quant_max if quant_max is not None else int(own)
    codes = torch.clamp(torch.round(centers / scale) + zero_point, qmin, qmax)
    rounding = (codes - zero_point) * scale - centers
    # a bin's own spread, where the grid is finer than the histogram
    noise = float((weights * rounding**2).sum()) + min(width, scale) ** 2 / 12
    return InputStatistics(
        float((weights * centers).sum()), float((weights * centers**2).sum()), noise
    )


def _fingerprint(observer: Any) -> tuple[float, ...]:
    """What calibration (or a sync) changes in an input observer."""
    values = []
    for name in ("min_val", "max_val", "histogram"):
        value = getattr(observer, name, None)
        values.append(float(value.double().sum()) if isinstance(value, Tensor) else math.nan)
    return tuple(values)


class ModelPlan:
    """The ``budgeted`` rule's plan for one prepared model (see the module docstring)."""

    def __init__(self, budget: float = DOUBLED_MAC_BUDGET) -> None:
        self.budget = budget
        self.layers: list[_Layer] = []
        #: the layers' ways to the output through residual adds (None: not read, no dilution)
        self.paths: ResidualPaths | None = None
        self._made: tuple[tuple[Any, ...], DepthPlan] | None = None

    def add(
        self,
        name: str,
        weight_observer: _WeightObserver,
        input_observer: nn.Module,
        macs: int | None,
        *,
        positions: int = 1,
        gated: bool = False,
    ) -> None:
        self.layers.append(_Layer(name, weight_observer, input_observer, macs, positions, gated))

    def plan(self) -> DepthPlan:
        """The plan for the observers as calibrated now (made again when they changed)."""
        return self._current()[1]

    def input_quant_max(self, input_observer: Any) -> int:
        """The quant_max ``input_observer`` converts with: 7 bits when the plan says so."""
        if input_observer in self.plan().seven_bit:
            return SEVEN_BIT_QMAX
        return input_quant_max(input_observer)

    def weight_input_quant_max(self, weight_observer: Any) -> int | None:
        """The quant_max of the input of ``weight_observer``'s layer, None if not planned."""
        layer = next((x for x in self.layers if x.weight_observer is weight_observer), None)
        return None if layer is None else self.input_quant_max(layer.input_observer)

    def doubled(self, weight_observer: Any) -> bool:
        """Whether the layer of ``weight_observer`` keeps full-range weights on an 8-bit
        input and runs on a doubled reduction."""
        names = [x.name for x in self.layers if x.weight_observer is weight_observer]
        return bool(names) and names[0] in self.plan().doubled

    def _current(self) -> tuple[tuple[Any, ...], DepthPlan]:
        key = tuple(_fingerprint(x.input_observer) for x in self.layers)
        if self._made is None or self._made[0] != key:
            self._made = (key, self._make())
        return self._made

    def _make(self) -> DepthPlan:
        priced: list[LayerPrice] = []
        seven_ok: set[Hashable] = set()
        unpriced: set[Hashable] = set()
        statistics: dict[int, tuple[InputStatistics | None, InputStatistics | None]] = {}
        reach = {} if self.paths is None else self.paths.reach(_mean_square)
        for layer in self.layers:
            observer = layer.input_observer
            if id(observer) not in statistics:
                native = input_quant_max(observer)
                seven = hasattr(observer, "qparams_at") and native > SEVEN_BIT_QMAX
                statistics[id(observer)] = (
                    input_statistics(observer),
                    input_statistics(observer, SEVEN_BIT_QMAX) if seven else None,
                )
            eight, seven_stats = statistics[id(observer)]
            price = _price(layer, eight, seven_stats)
            if price is None:
                unpriced.add(observer)  # not calibrated: never-overflow weights
                continue
            # squared: with the plain factor the plan still under-weights the layers after
            # the last adds against those inside blocks (measured on the zoo's replicas,
            # benchmarks/README.md); a model this coarse is calibrated, like GATE_SLOPE
            kept = reach.get(layer.name, 1.0) ** 2
            priced.append(replace(price, narrowed=price.narrowed * kept, seven_bit=price.seven_bit * kept))
            if seven_stats is not None:
                seven_ok.add(observer)
        # an input takes 7 bits only if every layer reading it was priced on them
        return choose(priced, seven_ok - unpriced, self.budget)


def _mean_square(observer: Any) -> float | None:
    statistics = input_statistics(observer)
    return None if statistics is None else statistics.mean_square


def _price(
    layer: _Layer, eight: InputStatistics | None, seven: InputStatistics | None
) -> LayerPrice | None:
    observer = layer.weight_observer
    weight = observer.weight
    if weight is None or eight is None:
        return None
    full_range = (observer.quant_max - observer.quant_min) / 2
    native = input_quant_max(layer.input_observer)
    codes, _ = weight_codes(weight, full_range)
    can_overflow = worst_case_pair_sum(codes, act_max=native) > INT16_MAX
    noise = LayerNoise(weight, eight)
    positions = max(layer.positions, 1)

    def reaching(varying: float, offset: float) -> float:
        # pooled over the layer's positions, what varies per position averages out
        return offset + varying / positions

    signal = reaching(noise.signal.varying, noise.signal.offset)
    if signal <= 0:
        return None
    # across layers, one on P positions counts 1/P: large feature maps sit early and the
    # zoo's measured sensitivities fall with P (benchmarks/README.md); a gate's slope
    # (sigmoid: at most 1/4) shrinks an error before it reaches the network
    scale = signal * positions / (GATE_SLOPE if layer.gated else 1.0)
    full = noise.weight_rounding(full_range)
    narrowed = 0.0
    if can_overflow:
        halves = never_overflow_half_ranges(weight, native, full_range)
        narrow = noise.weight_rounding(torch.tensor(halves, dtype=torch.float64))
        narrowed = reaching(narrow.varying, narrow.offset) - reaching(full.varying, full.offset)
    seven_bit = math.inf
    if seven is not None:
        seven_bit = reaching(noise.input_rounding(seven.rounding) - noise.input_rounding(), 0.0)
    return LayerPrice(
        key=layer.name,
        group=layer.input_observer,
        macs=layer.macs,
        can_overflow=can_overflow,
        narrowed=max(narrowed, 0.0) / scale,
        seven_bit=max(seven_bit, 0.0) / scale,
    )
