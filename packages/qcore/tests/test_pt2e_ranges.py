"""qcore.pt2e.ranges: per-channel weight ranges for PT2E quantizers on saturating CPUs.

A small registry quantizer with uint8 activations (the x86 quantizer's kind) runs
torchao's own ``prepare_pt2e`` / ``convert_pt2e``; the weights it produces are checked
against scales computed here from the float weights, and their pair sums by brute force
(``int16_pairs``), never by ``qcore.int8.saturation``'s own helpers."""

from __future__ import annotations

import math
import operator
from typing import Any

import int16_pairs as pairs
import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torchao.quantization.pt2e import HistogramObserver, PerChannelMinMaxObserver
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
from torchao.quantization.pt2e.quantizer import QuantizationConfig, QuantizationSpec

import qcore
from qcore import host
from qcore.int8.saturation import never_overflow_half_ranges, range_cost_db
from qcore.pt2e.annotation.registry_quantizer import RegistryQuantizer
from qcore.pt2e.ranges import (
    PER_LAYER_BUDGET_DB,
    RangeRule,
    TargetPerChannelWeightObserver,
    weight_observer_ctr,
)


class _Uint8Quantizer(RegistryQuantizer):
    namespace = "common"


def _quantizer(act_max: int = 255, rule: RangeRule = "calibrated") -> _Uint8Quantizer:
    act = QuantizationSpec(
        dtype=torch.uint8, quant_min=0, quant_max=act_max, qscheme=torch.per_tensor_affine,
        observer_or_fake_quant_ctr=HistogramObserver.with_args(),
    )
    weight = QuantizationSpec(
        dtype=torch.int8, quant_min=-128, quant_max=127, qscheme=torch.per_channel_symmetric,
        ch_axis=0, observer_or_fake_quant_ctr=weight_observer_ctr(rule=rule),
    )
    return _Uint8Quantizer().set_global(QuantizationConfig(act, act, weight, None))


class TwoLinears(nn.Module):
    """``hot`` overflows int16 pairs with full-range weights; ``cold`` (one large weight per
    channel, the rest near zero) cannot."""

    def __init__(self) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(0)
        self.hot = nn.Linear(64, 16)
        self.cold = nn.Linear(16, 8)
        with torch.no_grad():
            self.hot.weight.copy_(torch.randn(16, 64, generator=gen))
            one_hot = torch.zeros(8, 16)
            one_hot[torch.arange(8), torch.arange(0, 16, 2)] = 1.0
            self.cold.weight.copy_(one_hot + torch.randn(8, 16, generator=gen) * 1e-3)

    def forward(self, x: Tensor) -> Tensor:
        return self.cold(F.relu(self.hot(x)))


def _batches() -> list[Tensor]:
    return [torch.randn(32, 64, generator=torch.Generator().manual_seed(i)) for i in range(3)]


def _quantize(
    model: nn.Module,
    quantizer: Any = None,
    batches: list[Tensor] | None = None,
) -> tuple[torch.fx.GraphModule, torch.fx.GraphModule]:
    batches = batches or _batches()
    exported = torch.export.export(model, (batches[0],)).module()
    prepared = prepare_pt2e(exported, quantizer or _quantizer())
    for batch in batches:
        prepared(batch)
    observers = [m for m in prepared.modules() if isinstance(m, TargetPerChannelWeightObserver)]
    converted = convert_pt2e(prepared)
    return converted, observers  # type: ignore[return-value]


def _weight_scales(converted: torch.fx.GraphModule) -> list[Tensor]:
    """The per-channel scales of the int8 weights, in graph order."""
    scales = []
    for node in converted.graph.nodes:
        if node.op == "call_function" and "quantize_per_channel" in str(node.target):
            scale = node.args[1]
            scales.append(getattr(converted, scale.target) if hasattr(scale, "target") else scale)
    return scales


def test_non_saturating_target_uses_torchaos_observer() -> None:
    with host.targeting("avx512_vnni"):
        ctr = weight_observer_ctr()
        assert type(ctr()) is PerChannelMinMaxObserver
        _, observers = _quantize(TwoLinears().eval())
    assert observers == []


def _weight_codes(converted: torch.fx.GraphModule) -> list[Tensor]:
    """The int8 weight codes the converted graph holds, in graph order."""
    codes = []
    for node in converted.graph.nodes:
        if node.op == "call_function" and "dequantize_per_channel" in str(node.target):
            codes.append(getattr(converted, node.args[0].target))
    return codes


def _input_qparams(converted: torch.fx.GraphModule) -> tuple[float, int]:
    """Scale and zero point of the graph input's quantize (torchao's observer chose them)."""
    node = next(n for n in converted.graph.nodes if "quantize_per_tensor" in str(n.target))
    return float(node.args[1]), int(node.args[2])


def test_saturating_target_chooses_per_channel_ranges_from_calibration() -> None:
    """Against brute force: every int16 pair sum of the chosen weight codes with every
    calibration input's uint8 codes, and the documented rule restated on those sums."""
    model = TwoLinears().eval()
    with host.targeting("avx2"):
        converted, _ = _quantize(model)
    hot_scale, cold_scale = _weight_scales(converted)
    hot_codes, cold_codes = _weight_codes(converted)
    rows = pairs.linear_rows(pairs.input_codes(torch.cat(_batches()), *_input_qparams(converted)))
    weight = model.hot.weight.detach()
    full = pairs.full_range_codes(weight)
    # full range overflows on these very inputs: the case means something
    assert bool(pairs.overflows(rows, full).any())
    # the chosen codes never leave int16 on any calibration input...
    assert not bool(pairs.overflows(rows, hot_codes).any())
    # ...and are the documented rule's: narrowed only where the full range peaks too high
    halves = pairs.expected_half_ranges(rows, weight)
    assert 0 < sum(h < 127.5 for h in halves) < len(halves)
    torch.testing.assert_close(
        hot_scale.float(), (weight.abs().amax(1) / torch.tensor(halves, dtype=torch.float64)).float()
    )
    # the cold layer: no uint8 input at all can overflow it, so it keeps the full range
    cold = model.cold.weight.detach()
    assert not bool(pairs.any_input_can_overflow(pairs.full_range_codes(cold)).any())
    torch.testing.assert_close(cold_scale.float(), cold.abs().amax(1) / 127.5)
    assert torch.equal(cold_codes.to(torch.int64), pairs.full_range_codes(cold))


class SharedObserverConvs(nn.Module):
    """conv1d, relu, then a reshape (which shares the relu's observer) into a conv3d: one
    input observer serves two layers of equal channels and different ranks."""

    def __init__(self) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(4)
        self.w1 = nn.Parameter(torch.randn(8, 3, 3, generator=gen))
        self.w3 = nn.Parameter(torch.randn(8, 8, 3, 3, 3, generator=gen))

    def forward(self, x: Tensor) -> Tensor:
        y = F.relu(F.conv1d(x, self.w1, None, stride=1, padding=1))
        return F.conv3d(y.reshape(x.shape[0], 8, 6, 3, 3), self.w3, None, stride=1, padding=1)


def test_a_shared_input_observer_gives_each_layer_its_own_inputs(
    torch_onednn_plugins: None,
) -> None:
    """The PT2E quantizer derived from torch's oneDNN config shares the relu's observer
    with the reshape: the conv3d's range must be chosen on the conv3d's inputs, not the
    conv1d's output that the same observer saw first (shaped otherwise, it crashed the
    emulation's matmul)."""
    model = SharedObserverConvs().eval()
    batches = [torch.randn(4, 3, 54, generator=torch.Generator().manual_seed(i)) for i in range(2)]
    with host.targeting("avx2"):
        quantizer = qcore.get_quantizer("fxnative", model=model)
        converted, observers = _quantize(model, quantizer, batches)
    assert len(observers) == 2 and all(o.choice is not None for o in observers)
    conv3d_codes = _weight_codes(converted)[1]
    # the conv3d's real inputs: the float relu output, as the shared observer rounds it
    relu = next(n for n in converted.graph.nodes if "relu" in str(n.target))
    (quantize,) = [u for u in relu.users if "quantize_per_tensor" in str(u.target)]
    scale, zero_point = float(quantize.args[1]), int(quantize.args[2])
    with torch.no_grad():
        inputs = torch.cat([F.relu(F.conv1d(b, model.w1, None, 1, 1)) for b in batches])
    codes = pairs.input_codes(inputs.reshape(-1, 8, 6, 3, 3), scale, zero_point)
    rows = pairs.conv_rows(codes, (3, 3, 3), 1, zero_point)
    weight = model.w3.detach()
    assert bool(pairs.overflows(rows, pairs.full_range_codes(weight)).any())  # a real case
    assert not bool(pairs.overflows(rows, conv3d_codes).any())
    # every position is sampled here (432 <= 512): the documented rule, exactly
    expected = weight.reshape(8, -1).abs().amax(1) / torch.tensor(
        pairs.expected_half_ranges(rows, weight), dtype=torch.float64
    )
    torch.testing.assert_close(_weight_scales(converted)[1].float(), expected.float())


def test_an_unlinked_observer_keeps_every_channel_safe() -> None:
    observer = TargetPerChannelWeightObserver(quant_min=-128, quant_max=127)
    weight = torch.randn(4, 9, generator=torch.Generator().manual_seed(3))
    observer(weight)
    scale, _ = observer.calculate_qparams()
    torch.testing.assert_close(scale, weight.abs().amax(1) / pairs.SAFE_HALF_RANGE)
    codes = torch.clamp(torch.round(weight / scale[:, None]), -128, 127)
    assert operator.le(float(codes.abs().max()), 64)
    assert not bool(pairs.any_input_can_overflow(codes).any())


def test_never_overflow_rule_needs_no_calibration_and_no_input_can_overflow() -> None:
    model = TwoLinears().eval()
    with host.targeting("avx2"):
        ctr = weight_observer_ctr(rule="never_overflow")
        observer = ctr(quant_min=-128, quant_max=127)
        weight = model.hot.weight.detach()
        observer(weight)
        scale, _ = observer.calculate_qparams()
    codes = torch.clamp(torch.round(weight / scale[:, None]), -128, 127)
    assert not bool(pairs.any_input_can_overflow(codes).any())
    # narrower than torchao's full range where pairs of large weights meet, yet wider
    # than the blanket safe range on every channel of this layer
    full = weight.abs().amax(1) / 127.5
    assert bool((scale >= full).all()) and bool((scale > full).any())
    assert bool((scale < weight.abs().amax(1) / pairs.SAFE_HALF_RANGE).all())
    # the cold layer: each channel's one large weight sits next to near-zero ones
    cold = TargetPerChannelWeightObserver(rule="never_overflow", quant_min=-128, quant_max=127)
    cold(model.cold.weight.detach())
    torch.testing.assert_close(cold.calculate_qparams()[0], model.cold.weight.abs().amax(1) / 127.5)


def test_never_overflow_holds_on_the_codes_the_converted_model_computes() -> None:
    """At full range a channel's largest weight sits on a rounding tie (-127.5 codes):
    the converted model's float32 quantize rounds this one to -128 where float64 gives
    -127, and its neighbour then makes a pair of 129 (a MobileNetV3 channel, found by the
    weight-rule benchmark's brute force). The rule narrows such a channel."""
    weight = torch.tensor([[-0.2369050234556198, -0.0016677582170814276]])
    observer = TargetPerChannelWeightObserver(rule="never_overflow", quant_min=-128, quant_max=127)
    with host.targeting("avx2"):
        observer(weight)
        scale, zero_point = observer.calculate_qparams()
    quantize = torch.ops.quantized_decomposed.quantize_per_channel.default
    codes = quantize(weight, scale, zero_point, 0, -128, 127, torch.int8)
    assert not bool(pairs.any_input_can_overflow(codes).any())
    # the full range's codes as torch's quantize computes them: the tie goes to -128
    full_scale = weight.abs().amax(1) / 127.5
    full = quantize(weight, full_scale, zero_point, 0, -128, 127, torch.int8)
    assert bool(pairs.any_input_can_overflow(full).any())
    assert float(scale[0]) > float(weight.abs().max()) / 127.5  # narrowed, not kept at full


@pytest.mark.parametrize("act_max", [255, 127])
def test_never_overflow_rule_reads_the_inputs_range(act_max: int) -> None:
    """7-bit activations (``reduce_range``) can never overflow a pair: full range there."""
    model = TwoLinears().eval()
    with host.targeting("avx2"):
        converted, _ = _quantize(model, _quantizer(act_max, "never_overflow"))
    hot_scale = _weight_scales(converted)[0]
    full = model.hot.weight.detach().abs().amax(1) / 127.5
    if act_max == 127:
        torch.testing.assert_close(hot_scale.float(), full)
    else:
        assert bool((hot_scale > full * 1.001).any())


def test_an_unknown_rule_is_named() -> None:
    with pytest.raises(ValueError, match="'typo'"):
        TargetPerChannelWeightObserver(rule="typo")  # type: ignore[arg-type]


@pytest.mark.parametrize(("shape", "input_scale"), [("uniform", 1 / 255), ("heavy", 0.2)])
def test_range_cost_matches_a_measured_layer(shape: str, input_scale: float) -> None:
    """The per-layer cost estimate against a simulation: quantize the inputs and the
    weights (never-overflow vs full range) and measure the output error of the layer."""
    gen = torch.Generator().manual_seed(3)
    weight = torch.randn(32, 256, generator=gen, dtype=torch.float64)
    x = torch.rand(4096, 256, generator=gen, dtype=torch.float64)
    x = x if shape == "uniform" else torch.randn(4096, 256, generator=gen, dtype=torch.float64).relu() ** 3
    halves = never_overflow_half_ranges(weight, 255, 127.5)
    x_q = torch.round(x / input_scale) * input_scale

    def measured_noise(half_ranges: list[float]) -> float:
        codes, scales = pairs.codes_for(weight, half_ranges)
        return float(((x_q @ (codes * scales[:, None]).T - x @ weight.T) ** 2).mean())

    measured = 10 * math.log10(measured_noise(list(halves)) / measured_noise([127.5] * 32))
    moments = (float(x.mean()), float((x**2).mean()))
    estimated = range_cost_db(weight, halves, 127.5, moments, float(((x_q - x) ** 2).mean()))
    assert measured > 0.05  # the narrower range does cost something here
    assert abs(estimated - measured) < 0.25 + 0.1 * measured


def test_per_layer_rule_narrows_only_where_it_is_cheap() -> None:
    """Heavy-tailed inputs (coarse input steps: their rounding dominates the layer's
    noise): never-overflow ranges. Uniform inputs on the same weights (fine steps: the
    weights' rounding dominates): torchao's full range."""
    model = TwoLinears().eval()
    scales = {}
    for shape in ("heavy", "uniform"):
        gen = torch.Generator().manual_seed(7)
        batches = [torch.randn(32, 64, generator=gen) ** 5 if shape == "heavy"
                   else torch.rand(32, 64, generator=gen) * 2 - 1 for _ in range(3)]  # fmt: skip
        with host.targeting("avx2"):
            converted, _ = _quantize(model, _quantizer(rule="per_layer"), batches)
        scales[shape] = _weight_scales(converted)[0]
    full = model.hot.weight.detach().abs().amax(1) / 127.5
    assert bool((scales["heavy"] > full * 1.001).any())
    torch.testing.assert_close(scales["uniform"].float(), full)


@pytest.mark.parametrize(("cost", "narrowed"), [(0.0, True), (PER_LAYER_BUDGET_DB, True), (PER_LAYER_BUDGET_DB + 1e-9, False)])
def test_per_layer_budget_is_the_most_a_layer_may_gain(
    monkeypatch: pytest.MonkeyPatch, cost: float, narrowed: bool
) -> None:
    """A layer whose never-overflow ranges add at most the budget is narrowed; above it,
    the full range (the cost priced as given here, on uniform inputs whose own cost is
    high: the rule reads the price, nothing else)."""
    monkeypatch.setattr(TargetPerChannelWeightObserver, "_cost_db", lambda self, halves, full: cost)
    model = TwoLinears().eval()
    gen = torch.Generator().manual_seed(7)
    batches = [torch.rand(32, 64, generator=gen) * 2 - 1 for _ in range(3)]
    with host.targeting("avx2"):
        converted, _ = _quantize(model, _quantizer(rule="per_layer"), batches)
    full = model.hot.weight.detach().abs().amax(1) / 127.5
    scales = _weight_scales(converted)[0].float()
    assert bool((scales > full * 1.001).any()) == narrowed
    if not narrowed:
        torch.testing.assert_close(scales, full)


def _calibrated(observer: Any, x: Tensor) -> tuple[Any, float, int]:
    observer(x)
    scale, zero_point = observer.calculate_qparams()
    return observer, float(scale), int(zero_point)


@pytest.mark.parametrize("data", ["uniform", "shifted", "normal", "relu"])
def test_histogram_statistics_bound_the_rounding_noise_bin_by_bin(data: str) -> None:
    """From a calibrated histogram: its moments, and the inputs' rounding noise with each
    bin's values spread evenly over it, against each bin integrated numerically (64
    points). Rounding a whole bin as its center does is an upper bound of rounding each
    value (its nearest code is at least as near), exact but for the ~12 % of bins that
    straddle a rounding boundary (2048 bins, 255 steps): within 5 % above."""
    from torchao.quantization.pt2e import HistogramObserver

    from qcore.pt2e.range_plan import input_statistics

    gen = torch.Generator().manual_seed(21)
    x = {
        "uniform": torch.rand(100_000, generator=gen) * 3,
        "shifted": torch.rand(100_000, generator=gen) * 2 + 1,
        "normal": torch.randn(100_000, generator=gen),
        "relu": torch.randn(100_000, generator=gen).relu(),
    }[data]
    observer, scale, zero_point = _calibrated(HistogramObserver(dtype=torch.uint8, quant_min=0, quant_max=255), x)
    stats = input_statistics(observer)
    assert stats is not None
    mean, mean_square, noise = stats.mean, stats.mean_square, stats.rounding
    lo, hi = float(observer.min_val), float(observer.max_val)
    counts = observer.histogram.double()
    width, share = (hi - lo) / counts.numel(), counts / counts.sum()
    inside = (torch.arange(64, dtype=torch.float64) + 0.5) / 64
    points = lo + width * (torch.arange(counts.numel(), dtype=torch.float64)[:, None] + inside)
    rounded = (torch.clamp(torch.round(points / scale) + zero_point, 0, 255) - zero_point) * scale
    integrated = float((share * ((rounded - points) ** 2).mean(1)).sum())
    assert mean == pytest.approx(float((share * points.mean(1)).sum()), rel=1e-6)
    # the bins' centers stand for their values: E[x^2] leaves out each bin's own spread,
    # width^2 / 12, some 1e-6 of it here
    assert mean_square == pytest.approx(float((share * (points**2).mean(1)).sum()), rel=1e-5)
    assert integrated * 0.999 <= noise <= integrated * 1.05


def test_min_max_statistics_treat_the_range_as_uniform() -> None:
    """No histogram (a min/max observer): the moments of a uniform distribution over the
    observed range, and the rounding noise of a uniform input, step^2 / 12; measured on
    uniform inputs, where that is what they are."""
    from torchao.quantization.pt2e import MinMaxObserver

    from qcore.pt2e.range_plan import input_statistics

    x = torch.rand(200_000, generator=torch.Generator().manual_seed(22), dtype=torch.float64) * 2 + 1
    observer, scale, zero_point = _calibrated(MinMaxObserver(dtype=torch.uint8, quant_min=0, quant_max=255), x.float())
    stats = input_statistics(observer)
    assert stats is not None
    mean, mean_square, noise = stats.mean, stats.mean_square, stats.rounding
    rounded = (torch.clamp(torch.round(x / scale) + zero_point, 0, 255) - zero_point) * scale
    assert mean == pytest.approx(float(x.mean()), rel=1e-2)
    assert mean_square == pytest.approx(float((x**2).mean()), rel=1e-2)
    assert noise == pytest.approx(float(((rounded - x) ** 2).mean()), rel=2e-2)


def test_an_input_with_no_spread_has_no_statistics() -> None:
    """Calibrated on one value (``min_val == max_val``), an input has no range to put a grid
    on, so there is nothing to price: no statistics, as for an uncalibrated observer."""
    from torchao.quantization.pt2e import HistogramObserver, MinMaxObserver

    from qcore.pt2e.range_plan import input_statistics

    for observer in (HistogramObserver(dtype=torch.uint8), MinMaxObserver(dtype=torch.uint8)):
        assert input_statistics(observer) is None  # never calibrated: min inf, max -inf
        observer(torch.full((64,), 0.75))
        assert float(observer.min_val) == float(observer.max_val) == 0.75
        assert input_statistics(observer) is None, type(observer).__name__
