"""qcore.pt2e.range_plan: the ``budgeted`` rule through torchao's own ``prepare_pt2e`` /
``convert_pt2e``, with a small registry quantizer of the x86 kind (uint8 activations on
``activation_observer_ctr``, int8 per-channel weights on ``weight_observer_ctr``).

What the converted graph holds is checked against brute force (``int16_pairs``: every pair
sum's extremes over the input's code range) and scales recomputed here, never against the
plan's own report.
"""

from __future__ import annotations

from typing import Any

import int16_pairs as pairs
import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torchao.quantization.pt2e import HistogramObserver, PerChannelMinMaxObserver
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
from torchao.quantization.pt2e.quantizer import QuantizationConfig, QuantizationSpec

from qcore import host
from qcore.int8.depth_plan import DOUBLED_MAC_BUDGET, DepthPlan
from qcore.pt2e.annotation.registry_quantizer import RegistryQuantizer
from qcore.pt2e.histogram import HistogramObserver as FastSearch
from qcore.pt2e.range_plan import ModelPlan
from qcore.pt2e.ranges import (
    TargetHistogramObserver,
    activation_observer_ctr,
    weight_observer_ctr,
)


class _Uint8Quantizer(RegistryQuantizer):
    namespace = "common"


def _quantizer() -> _Uint8Quantizer:
    act = QuantizationSpec(
        dtype=torch.uint8, quant_min=0, quant_max=255, qscheme=torch.per_tensor_affine,
        observer_or_fake_quant_ctr=activation_observer_ctr(rule="budgeted"),
    )  # fmt: skip
    weight = QuantizationSpec(
        dtype=torch.int8, quant_min=-128, quant_max=127, qscheme=torch.per_channel_symmetric,
        ch_axis=0, observer_or_fake_quant_ctr=weight_observer_ctr(rule="budgeted"),
    )  # fmt: skip
    return _Uint8Quantizer().set_global(QuantizationConfig(act, act, weight, None))


class Fork(nn.Module):
    """``trunk``'s output is read by ``left`` and ``right`` (one observer for both); a
    wide ``body`` and a small ``head`` follow. ``left`` and ``right`` hold small weights
    and one pair of large ones per channel: the pair overflows at full range, and
    narrowing the channel coarsens every small weight, so their input takes 7 bits."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.trunk = nn.Linear(64, 128)
        self.left, self.right = nn.Linear(128, 128), nn.Linear(128, 128)
        self.body = nn.Linear(256, 256)
        self.head = nn.Linear(256, 16)
        with torch.no_grad():
            for layer in (self.left, self.right):
                layer.weight.mul_(0.1)
                layer.weight[:, :2] = 1.0

    def forward(self, x: Tensor) -> Tensor:
        y = F.relu(self.trunk(x))
        y = torch.cat([F.relu(self.left(y)), F.relu(self.right(y))], -1)
        return self.head(F.relu(self.body(y)))


def _convert(target: str) -> torch.fx.GraphModule:
    batches = [torch.randn(32, 64, generator=torch.Generator().manual_seed(i)) for i in range(3)]
    with host.targeting(target):
        prepared = prepare_pt2e(torch.export.export(Fork().eval(), (batches[0],)).module(), _quantizer())
        for batch in batches:
            prepared(batch)
        converted: torch.fx.GraphModule = convert_pt2e(prepared)
    return converted


def _layers(converted: torch.fx.GraphModule) -> dict[str, tuple[Tensor, Tensor, torch.fx.Node, int]]:
    """Per linear: its int8 codes, its scales, its input's quantize and the largest code."""
    found = {}
    for node in converted.graph.nodes:
        if node.target is not torch.ops.aten.linear.default:
            continue
        weight_dq, input_dq = node.args[1], node.args[0]
        codes = converted.get_buffer(str(weight_dq.args[0].target))
        scales = converted.get_buffer(str(weight_dq.args[1].target))
        found[node.name] = (codes, scales, input_dq.args[0], int(input_dq.args[4]))
    return found


def test_every_layer_is_exact_at_single_depth_or_doubled_within_the_budget() -> None:
    """Doubled layers (those whose pair sums can still overflow) keep torchao's scales and
    add at most 4.5 % multiply-adds; the input read by ``left`` and ``right`` is one quantize
    on 7 bits, and neither keeps anything to double or narrows its weights."""
    model = Fork().eval()
    layers = _layers(_convert("avx2"))
    floats = {"linear": model.trunk, "linear_1": model.left, "linear_2": model.right,
              "linear_3": model.body, "linear_4": model.head}  # fmt: skip
    macs = {name: m.weight.numel() for name, m in floats.items()}  # one row per sample
    doubled = [n for n, (codes, _, _, qmax) in layers.items() if bool(pairs.any_input_can_overflow(codes, qmax).any())]
    assert doubled  # the budget buys something here
    assert sum(macs[n] for n in doubled) <= DOUBLED_MAC_BUDGET * sum(macs.values())
    for name in doubled:
        full = floats[name].weight.detach().abs().amax(1) / 127.5
        torch.testing.assert_close(layers[name][1].float(), full.float())

    left, right = layers["linear_1"], layers["linear_2"]
    assert left[2] is right[2] and left[3] == right[3] == 127
    for name in ("linear_1", "linear_2"):
        full = floats[name].weight.detach().abs().amax(1) / 127.5
        torch.testing.assert_close(layers[name][1].float(), full.float())


def test_a_target_with_vnni_builds_torchaos_observers() -> None:
    """torchao's histogram observer (its search walked faster: test_histogram_search.py)
    and torchao's per-channel weight observer, with no plan of qcore's."""
    with host.targeting("avx512_vnni"):
        assert type(activation_observer_ctr(rule="budgeted")()) is FastSearch
        assert type(weight_observer_ctr(rule="budgeted")()) is PerChannelMinMaxObserver
    converted = _convert("avx512_vnni")
    assert all(q[3] == 255 for q in _layers(converted).values())


def _prepared(*batches: Tensor) -> tuple[torch.fx.GraphModule, ModelPlan]:
    """A fresh model prepared (for the current target) and calibrated on ``batches``, and
    its plan holder, which has planned nothing yet."""
    prepared = prepare_pt2e(torch.export.export(Fork().eval(), (batches[0],)).module(), _quantizer())
    for batch in batches:
        prepared(batch)
    observer = next(m for m in prepared.modules() if getattr(m, "plan", None) is not None)
    return prepared, observer.plan


def _content(model_plan: ModelPlan, depth_plan: DepthPlan) -> tuple[object, ...]:
    """What a plan decides, its 7-bit inputs named by the layers that read them (the
    observers are each model's own objects)."""
    seven = sorted(x.name for x in model_plan.layers if x.input_observer in depth_plan.seven_bit)
    return (seven, sorted(map(str, depth_plan.doubled)), depth_plan.total_macs,
            depth_plan.doubled_macs, depth_plan.added_noise)  # fmt: skip


def test_the_plan_follows_the_calibration() -> None:
    """Inputs calibrated again (here: a thousand times larger, which changes the noise the
    plan adds) make a new plan, equal in every decision and in its noise to the plan a
    fresh model calibrated the same way makes (not one made from statistics kept from
    before); the plan made before is not reused, nor changed in place. While nothing
    changes, the plan made is the one kept."""
    small = torch.randn(32, 64, generator=torch.Generator().manual_seed(0))
    large = 1e3 * torch.randn(32, 64, generator=torch.Generator().manual_seed(1))
    with host.targeting("avx2"):
        prepared, plan = _prepared(small)
        first = plan.plan()
        before = _content(plan, first)
        assert plan.plan() is first  # nothing changed: kept
        prepared(large)
        second = plan.plan()
        _, fresh = _prepared(small, large)
        expected = _content(fresh, fresh.plan())
    assert second is not first
    assert _content(plan, first) == before
    assert _content(plan, second) == expected
    assert second.added_noise != first.added_noise  # the new calibration shows in the plan


class GatedTwin(nn.Module):
    """Two linears with equal weights (small ones and an overflowing pair per channel, as
    in ``Fork``) read equal inputs through their own observers; ``gated`` feeds a sigmoid
    (a squeeze-excitation's gate), ``plain`` the output. ``filler``, 25x their size, makes
    the budget (4.5 % of all multiply-adds) hold one twin's doubling, not both."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.gated, self.plain = nn.Linear(128, 128), nn.Linear(128, 128)
        self.filler = nn.Linear(640, 640)
        with torch.no_grad():
            self.gated.weight.mul_(0.1)
            self.gated.weight[:, :2] = 1.0
            self.plain.load_state_dict(self.gated.state_dict())

    def forward(self, a: Tensor, b: Tensor, c: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return torch.sigmoid(self.gated(a)), self.plain(b), self.filler(c)


def test_a_gated_layer_yields_the_doubling_to_its_ungated_twin() -> None:
    """A gate's slope (at most 1/4) shrinks the gated twin's error before it reaches the
    network, so its narrowing costs less: the one doubling the budget holds goes to the
    ungated twin, whose weights keep torchao's full-range scales (codes that can overflow
    a uint8 input), while the gated twin's codes cannot."""
    model = GatedTwin().eval()
    x = torch.randn(32, 128, generator=torch.Generator().manual_seed(3))
    c = torch.randn(32, 640, generator=torch.Generator().manual_seed(4))
    macs = [m.weight.numel() for m in (model.gated, model.plain, model.filler)]
    assert macs[0] <= DOUBLED_MAC_BUDGET * sum(macs) < 2 * macs[0]  # room for one twin
    with host.targeting("avx2"):
        exported = torch.export.export(model, (x, x.clone(), c)).module()
        prepared = prepare_pt2e(exported, _quantizer())
        prepared(x, x.clone(), c)
        converted: torch.fx.GraphModule = convert_pt2e(prepared)
    layers = _layers(converted)
    linears = converted.graph.find_nodes(op="call_function", target=torch.ops.aten.linear.default)
    gated_name, plain_name = (n.name for n in linears[:2])  # graph order: forward's order
    overflows = {n: bool(pairs.any_input_can_overflow(codes, qmax).any()) for n, (codes, _, _, qmax) in layers.items()}
    assert overflows[plain_name] and not overflows[gated_name]
    full = model.plain.weight.detach().abs().amax(1) / 127.5
    torch.testing.assert_close(layers[plain_name][1].float(), full.float())


class _WeightOnly:
    """What a plan reads of a weight observer: the weight and the int8 code range."""

    quant_min, quant_max = -128, 127

    def __init__(self, weight: Tensor) -> None:
        self.weight = weight


def test_a_layer_added_without_saying_gated_is_priced_as_ungated() -> None:
    """``ModelPlan.add``'s default: twins as in ``GatedTwin`` (equal weights, equal inputs
    through their own observers), the first added with ``gated=True``, the second without
    saying. The budget (half their multiply-adds) holds one doubling; a gate shrinks the
    gated twin's error, so the doubling goes to the second, exactly as when it is added
    with ``gated=False`` (were both gated, the tie would go to the first added)."""
    twin = GatedTwin().gated
    weight = twin.weight.detach()
    assert bool(pairs.any_input_can_overflow(pairs.full_range_codes(weight)).any())
    x = torch.randn(32, 128, generator=torch.Generator().manual_seed(3))
    macs = weight.numel()

    def plan(**plain_gated: bool) -> DepthPlan:
        observers = [HistogramObserver(), HistogramObserver()]
        for observer in observers:
            observer(x)
        model_plan = ModelPlan(budget=0.5)
        model_plan.add("gated", _WeightOnly(weight), observers[0], macs, gated=True)
        model_plan.add("plain", _WeightOnly(weight), observers[1], macs, **plain_gated)
        return model_plan.plan()

    default = plan()
    assert default.doubled == {"plain"} and default.doubled_macs == macs
    explicit = plan(gated=False)
    assert (default.doubled, default.added_noise) == (explicit.doubled, explicit.added_noise)


def test_seven_bits_are_priced_at_the_rounding_they_add_over_eight() -> None:
    """The 7-bit option's price is the input rounding noise it adds over the 8-bit grid's:
    nothing on a grid that rounds no worse, and in proportion to the difference (noise of
    the input's rounding is linear in its ``E[dx^2]``, ``qcore.int8.noise``)."""
    from types import SimpleNamespace

    from qcore.int8.noise import InputStatistics
    from qcore.pt2e.range_plan import _Layer, _price

    weight = torch.randn(8, 16, generator=torch.Generator().manual_seed(3))
    layer = _Layer(
        "fc", SimpleNamespace(weight=weight, quant_min=-127, quant_max=127),
        SimpleNamespace(dtype=torch.uint8, quant_max=255), 128, 4, False,
    )

    def seven_bit(rounding: float) -> float:
        price = _price(layer, InputStatistics(0.5, 0.5, 1e-4), InputStatistics(0.5, 0.5, rounding))
        assert price is not None
        return price.seven_bit

    assert seven_bit(1e-4) == 0.0
    assert seven_bit(4e-4) == pytest.approx(3 * seven_bit(2e-4), rel=1e-9) and seven_bit(2e-4) > 0


def test_a_layer_on_more_positions_counts_less_in_proportion() -> None:
    """Across layers, one on P positions counts 1/P (large feature maps sit early, and the
    zoo's measured sensitivities fall with P). With a zero-mean input the layer's signal
    and its 7-bit noise both vary per position, so pooling over positions cancels in
    their ratio and only the 1/P weight is left: the same layer's price on 4 positions is
    half its price on 2."""
    from types import SimpleNamespace

    from qcore.int8.noise import InputStatistics
    from qcore.pt2e.range_plan import _Layer, _price

    weight = torch.randn(8, 16, generator=torch.Generator().manual_seed(3))

    def seven_bit(positions: int) -> float:
        layer = _Layer(
            "fc", SimpleNamespace(weight=weight, quant_min=-127, quant_max=127),
            SimpleNamespace(dtype=torch.uint8, quant_max=255), 128, positions, False,
        )
        price = _price(layer, InputStatistics(0.0, 1.0, 1e-4), InputStatistics(0.0, 1.0, 3e-4))
        assert price is not None
        return price.seven_bit

    assert seven_bit(2) > 0
    assert seven_bit(4) == pytest.approx(seven_bit(2) / 2, rel=1e-9)
    assert seven_bit(1) == pytest.approx(4 * seven_bit(4), rel=1e-9)


def test_narrowing_is_priced_at_the_noise_it_adds_over_the_full_range(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A layer that can overflow pays for its narrowed weights the rounding noise they add
    over the full range's: nothing when the narrowed grid is the full one (as if no channel
    needed narrowing), and a positive price for the real narrowed grid."""
    from types import SimpleNamespace

    from qcore.int8.noise import InputStatistics
    from qcore.pt2e import range_plan as pt2e_plan
    from qcore.pt2e.range_plan import _Layer, _price

    weight = torch.randn(8, 16, generator=torch.Generator().manual_seed(3))
    weight[:, :2] = 4.0  # two full-scale input channels: their pair sums overflow
    layer = _Layer(
        "fc", SimpleNamespace(weight=weight, quant_min=-128, quant_max=127),
        SimpleNamespace(dtype=torch.uint8, quant_max=255), 128, 4, False,
    )
    statistics = InputStatistics(0.5, 0.5, 1e-4)
    real = _price(layer, statistics, None)
    assert real is not None and real.can_overflow and real.narrowed > 0
    monkeypatch.setattr(pt2e_plan, "never_overflow_half_ranges", lambda w, native, full: [full] * w.shape[0])
    unchanged = _price(layer, statistics, None)
    assert unchanged is not None and unchanged.can_overflow
    assert unchanged.narrowed == 0.0


def test_a_layer_whose_worst_pair_sum_is_exactly_int16_max_cannot_overflow() -> None:
    """The planner's boundary: on inputs up to code 151, weight codes 127 and 90 sum to at
    most 217 x 151 = 32767, an int16, so the layer cannot overflow and is priced so; one
    code more (127 and 91: 32918) can."""
    from types import SimpleNamespace

    from qcore.int8.noise import InputStatistics
    from qcore.pt2e.range_plan import _Layer, _price

    def price(second: int) -> bool:
        weight = torch.tensor([[1.0, second / 127.5]])
        layer = _Layer(
            "fc", SimpleNamespace(weight=weight, quant_min=-128, quant_max=127),
            SimpleNamespace(dtype=torch.uint8, quant_max=151), 2, 1, False,
        )  # fmt: skip
        priced = _price(layer, InputStatistics(0.5, 0.5, 1e-4), None)
        assert priced is not None
        return priced.can_overflow

    assert (price(90), price(91)) == (False, True)


def test_a_layer_without_statistics_or_weight_or_signal_has_no_price() -> None:
    """What cannot be priced is not: a layer whose input has no statistics (never
    calibrated, or one value throughout), whose weight observer has seen no weight, or
    whose output carries no signal (an input that is zero throughout) gets no price; the
    plan gives it never-overflow weights on an 8-bit input."""
    from types import SimpleNamespace

    from qcore.int8.noise import InputStatistics
    from qcore.pt2e.range_plan import _Layer, _price

    weight = torch.randn(8, 16, generator=torch.Generator().manual_seed(3))

    def layer(w: Tensor | None) -> _Layer:
        return _Layer(
            "fc", SimpleNamespace(weight=w, quant_min=-128, quant_max=127),
            SimpleNamespace(dtype=torch.uint8, quant_max=255), 128, 4, False,
        )  # fmt: skip

    statistics = InputStatistics(0.5, 0.5, 1e-4)
    assert _price(layer(weight), statistics, None) is not None
    assert _price(layer(weight), None, statistics) is None
    assert _price(layer(None), statistics, statistics) is None
    assert _price(layer(weight), InputStatistics(0.0, 0.0, 1e-4), None) is None


def test_an_input_observer_that_cannot_requantize_is_never_offered_seven_bits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """7 bits are offered to the depth planner (``choose``) only for input observers that
    can give their qparams on another grid (``qparams_at``): torchao's own histogram
    observer on a layer that can overflow, with no budget to double it, gets never-overflow
    weights on its 8-bit input; the same input through this package's observer is offered
    7 bits, and takes them."""
    from qcore.int8 import depth_plan
    from qcore.pt2e import range_plan as pt2e_plan

    offered: list[set[object]] = []

    def choose(priced: Any, seven: Any, budget: float) -> DepthPlan:
        offered.append(set(seven))
        return depth_plan.choose(priced, seven, budget)

    monkeypatch.setattr(pt2e_plan, "choose", choose)
    weight = torch.randn(8, 16, generator=torch.Generator().manual_seed(3))
    weight[:, :2] = 4.0  # two full-scale input channels: their pair sums overflow
    x = torch.rand(32, 16, generator=torch.Generator().manual_seed(4)) * 0.01
    x[:, :2] = 1.0

    def plan(observer: object) -> DepthPlan:
        observer(x)  # type: ignore[operator]
        model_plan = ModelPlan(budget=0.0)
        model_plan.add("fc", _WeightOnly(weight), observer, weight.numel())
        return model_plan.plan()

    assert plan(HistogramObserver()).seven_bit == frozenset()
    ours = TargetHistogramObserver()
    assert plan(ours).seven_bit == {ours}
    assert offered == [set(), {ours}]

