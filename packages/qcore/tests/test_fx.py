"""qcore.fx: functional calls with keywords, per-layer weight ranges, the backend's convert.

The backends are fake distributions wrapping torch's own oneDNN config and mapping, so
qcore's suite needs no first-party plugin; the references are torch's raw FX flow.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path

import int16_pairs as pairs
import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.ao.quantization import get_default_qconfig_mapping
from torch.ao.quantization.backend_config import get_onednn_backend_config
from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

import qcore.errors
import qcore.fx
from qcore import host
from qcore.int8.engine import quantized_engine
from qcore.metrics import sqnr


@pytest.fixture
def backends(torch_onednn_plugins: None) -> Iterator[None]:
    """``fxnative`` and ``fxref`` (conftest.py), under torch's oneDNN engine."""
    with quantized_engine("onednn"):
        yield


def _param(*shape: int, seed: int, gain: float = 0.3) -> nn.Parameter:
    return nn.Parameter(torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * gain)


class Functional(nn.Module):
    """Functional convs and a linear, written with keywords (``keywords=True``) or
    positionally with every argument spelled out: the same computation."""

    def __init__(self, keywords: bool) -> None:
        super().__init__()
        self.keywords = keywords
        self.w1, self.b1 = _param(8, 3, 3, seed=1), _param(8, seed=2)
        self.w2, self.b2 = _param(8, 8, 3, 3, seed=3), _param(8, seed=4)
        self.w3 = _param(4, 8, 1, 1, 1, seed=5)
        self.w4 = _param(6, 48, seed=6)

    def forward(self, x: Tensor) -> Tensor:
        if self.keywords:
            y = F.relu(F.conv1d(x, self.w1, self.b1, padding=1))
            z = F.relu(F.conv2d(y.unsqueeze(2), self.w2, bias=self.b2, padding="same"))
            v = F.conv3d(z.unsqueeze(2), weight=self.w3)
            out = F.linear(v.flatten(1), weight=self.w4)
        else:
            y = F.relu(F.conv1d(x, self.w1, self.b1, (1,), (1,), (1,), 1))
            z = F.relu(F.conv2d(y.unsqueeze(2), self.w2, self.b2, (1, 1), (1, 1), (1, 1), 1))
            v = F.conv3d(z.unsqueeze(2), self.w3, None, (1, 1, 1), (0, 0, 0), (1, 1, 1), 1)
            out = F.linear(v.flatten(1), self.w4, None)
        return out


def _batches(count: int = 3) -> list[Tensor]:
    return [torch.randn(4, 3, 12, generator=torch.Generator().manual_seed(100 + i))
            for i in range(count)]


def _torch_flow(model: nn.Module, batches: list[Tensor]) -> nn.Module:
    config = get_onednn_backend_config()
    prepared = prepare_fx(model, get_default_qconfig_mapping("onednn"), (batches[0],),
                          backend_config=config)
    with torch.no_grad():
        for batch in batches:
            prepared(batch)
    return convert_fx(prepared, backend_config=config)


def test_torch_alone_cannot_convert_functional_calls_with_keywords(backends: None) -> None:
    with pytest.raises((RuntimeError, AssertionError)):
        _torch_flow(Functional(keywords=True).eval(), _batches())


def test_keyword_calls_quantize_exactly_like_their_positional_form(backends: None) -> None:
    batches = _batches()
    with host.targeting("avx512_vnni"):  # torch's mapping, untouched
        ours = qcore.fx.quantize(Functional(keywords=True).eval(), "fxnative", batches)
    reference = _torch_flow(Functional(keywords=False).eval(), batches)
    with torch.no_grad():
        assert torch.equal(ours(batches[0]), reference(batches[0]))


def test_keyword_calls_are_accurate_on_this_host(backends: None) -> None:
    batches = _batches()
    ours = qcore.fx.quantize(Functional(keywords=True).eval(), "fxnative", batches)
    with torch.no_grad():
        float_out = Functional(keywords=True).eval()(batches[0])
        assert sqnr(float_out, ours(batches[0])) >= 30


def test_reference_backends_convert_to_the_reference_representation(backends: None) -> None:
    batches = _batches()
    converted = qcore.fx.quantize(Functional(keywords=True).eval(), "fxref", batches)
    targets = [str(n.target) for n in converted.graph.nodes]
    assert not any("quantized." in t for t in targets)  # no host kernels
    assert any("quantize_per_tensor" in t for t in targets)
    assert any("conv2d" in t for t in targets)


class TwoLinears(nn.Module):
    """``hot``'s full-range weights overflow int16 pairs on a non-VNNI CPU; ``cold``'s
    cannot: each of its channels has one large weight, every other one near zero."""

    def __init__(self) -> None:
        super().__init__()
        self.hot = nn.Linear(64, 16)
        self.cold = nn.Linear(16, 8)
        with torch.no_grad():
            self.hot.weight.copy_(_param(16, 64, seed=7, gain=1.0))
            self.hot.bias.copy_(_param(16, seed=8))
            one_hot = torch.zeros(8, 16)
            one_hot[torch.arange(8), torch.arange(0, 16, 2)] = 1.0
            self.cold.weight.copy_(one_hot + _param(8, 16, seed=9, gain=1e-3))
            self.cold.bias.copy_(_param(8, seed=10))

    def forward(self, x: Tensor) -> Tensor:
        return self.cold(F.relu(self.hot(x)))


def _two_linear_batches() -> list[Tensor]:
    return [torch.randn(32, 64, generator=torch.Generator().manual_seed(i)) for i in range(3)]


def _input_qparams(converted: nn.Module, layer: str) -> tuple[float, int]:
    """Scale and zero point of the quantize feeding ``layer`` (torch's observer chose them)."""
    node = next(n for n in converted.graph.nodes if n.op == "call_module" and n.target == layer)
    quantize = node.args[0]
    while quantize.target is not torch.quantize_per_tensor:
        quantize = quantize.args[0]
    scale, zero_point = (getattr(converted, a.target) for a in quantize.args[1:3])
    return float(scale), int(zero_point)


def test_saturating_target_narrows_only_the_layers_that_overflow(backends: None) -> None:
    """Against brute force: every int16 pair sum of the converted weight codes with every
    calibration input's uint8 codes, and the documented rule restated on those sums."""
    model, batches = TwoLinears().eval(), _two_linear_batches()
    with host.targeting("avx2"):
        converted = qcore.fx.quantize(model, "fxnative", batches)
    hot = converted.get_submodule("hot").weight()
    rows = pairs.linear_rows(pairs.input_codes(torch.cat(batches), *_input_qparams(converted, "hot")))
    weight = model.hot.weight.detach()
    assert bool(pairs.overflows(rows, pairs.full_range_codes(weight)).any())
    assert not bool(pairs.overflows(rows, hot.int_repr()).any())
    halves = pairs.expected_half_ranges(rows, weight)
    assert 0 < sum(h < 127.5 for h in halves) < len(halves)
    expected = weight.abs().amax(1) / torch.tensor(halves, dtype=torch.float64)
    torch.testing.assert_close(hot.q_per_channel_scales(), expected)
    # the cold layer: no uint8 input at all can overflow it, so it keeps the full range
    cold = model.cold.weight.detach()
    assert not bool(pairs.any_input_can_overflow(pairs.full_range_codes(cold)).any())
    cold_scales = converted.get_submodule("cold").weight().q_per_channel_scales()
    torch.testing.assert_close(cold_scales, cold.abs().amax(1).double() / 127.5)


def test_non_saturating_target_is_bit_identical_to_torchs_flow(backends: None) -> None:
    batches = _two_linear_batches()
    with host.targeting("avx512_vnni"):
        ours = qcore.fx.quantize(TwoLinears().eval(), "fxnative", batches)
    assert qcore.fx.weight_ranges(ours) == {}
    reference = _torch_flow(TwoLinears().eval(), batches)
    with torch.no_grad():
        assert torch.equal(ours(batches[0]), reference(batches[0]))


def test_convert_names_what_is_missing(backends: None) -> None:
    model, batches = TwoLinears().eval(), _two_linear_batches()
    raw = prepare_fx(model, get_default_qconfig_mapping("onednn"), (batches[0],),
                     backend_config=get_onednn_backend_config())
    with pytest.raises(ValueError, match=r"not prepared by qcore\.fx\.prepare; pass backend="):
        qcore.fx.convert(raw)
    # named, the backend converts a raw prepare_fx model exactly as torch's convert_fx does
    # (a VNNI target: the mapping is torch's own, so there is nothing of qcore's to add)
    with host.targeting("avx512_vnni"):
        raw = prepare_fx(TwoLinears().eval(), get_default_qconfig_mapping("onednn"),
                         (batches[0],), backend_config=get_onednn_backend_config())
        with torch.no_grad():
            for batch in batches:
                raw(batch)
        reference = convert_fx(copy.deepcopy(raw), backend_config=get_onednn_backend_config())
        ours = qcore.fx.convert(raw, backend="fxnative")
    assert {type(m).__name__ for m in ours.modules()} >= {"Linear", "LinearReLU"}
    assert type(ours.hot).__module__.startswith("torch.ao.nn.intrinsic.quantized")
    with torch.no_grad():
        assert torch.equal(ours(batches[0]), reference(batches[0]))
    prepared = qcore.fx.prepare(TwoLinears().eval(), "fxnative", batches[0])
    with pytest.raises(ValueError, match="prepared for backend 'fxnative', not 'fxref'"):
        qcore.fx.convert(prepared, backend="fxref")
    with pytest.raises(ValueError, match="at least one calibration batch"):
        qcore.fx.quantize(TwoLinears().eval(), "fxnative", [])


class EvenSame(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = _param(4, 3, 2, 2, seed=9)

    def forward(self, x: Tensor) -> Tensor:
        return F.conv2d(x, self.w, padding="same")


def test_asymmetric_same_padding_is_refused_naming_the_call(backends: None) -> None:
    with pytest.raises(ValueError, match=r"conv2d.*padding='same' with kernel \(2, 2\)"):
        qcore.fx.prepare(EvenSame().eval(), "fxnative", torch.randn(1, 3, 6, 6))


def _one_hot_linear(seed: int) -> nn.Linear:
    """A layer no uint8 input can overflow: one large weight per output channel."""
    layer = nn.Linear(16, 8)
    with torch.no_grad():
        one_hot = torch.zeros(8, 16)
        one_hot[torch.arange(8), torch.arange(0, 16, 2)] = 1.0
        layer.weight.copy_(one_hot + _param(8, 16, seed=seed, gain=1e-3))
    return layer


class AfterOps(nn.Module):
    """Two layers no input can overflow: ``flat`` is fed by ``flatten(1)`` (an integer
    argument, but an op with its own observed qparams), ``scaled`` by ``* 0.5`` (torch's
    ``mul_scalar`` derives its output qparams from its input, ignoring the observer)."""

    def __init__(self) -> None:
        super().__init__()
        self.flat = _one_hot_linear(11)
        self.scaled = _one_hot_linear(12)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        return self.flat(x.flatten(1)), self.scaled(F.relu(x.flatten(1) * 0.5))


def _scales(converted: nn.Module, layer: str) -> Tensor:
    return converted.get_submodule(layer).weight().q_per_channel_scales()


def test_only_layers_whose_input_qparams_are_known_take_a_chosen_range(backends: None) -> None:
    """The documented rule: a layer that no input can overflow keeps the full range
    (scale = amax / 127.5) when its input's qparams are its observer's; after an op
    whose qparams torch derives (a scalar ``mul``), it keeps the safe range (63.5)."""
    model = AfterOps().eval()
    batches = [torch.rand(8, 4, 4, generator=torch.Generator().manual_seed(i)) for i in range(2)]
    for name in ("flat", "scaled"):
        weight = model.get_submodule(name).weight.detach()
        assert not bool(pairs.any_input_can_overflow(pairs.full_range_codes(weight)).any())
    with host.targeting("avx2"):
        converted = qcore.fx.quantize(model, "fxnative", batches)
    amax = {n: model.get_submodule(n).weight.detach().abs().amax(1).double() for n in ("flat", "scaled")}
    torch.testing.assert_close(_scales(converted, "flat"), amax["flat"] / 127.5)
    torch.testing.assert_close(_scales(converted, "scaled"), amax["scaled"] / 63.5)


def test_a_layer_fed_an_already_quantized_input_keeps_the_safe_range(backends: None) -> None:
    """No observer precedes a layer whose model input arrives quantized
    (``input_quantized_indexes``): nothing was recorded, so the safe range it is."""
    from torch.ao.quantization.fx.custom_config import PrepareCustomConfig

    model = nn.Sequential(_one_hot_linear(13)).eval()
    x = torch.rand(8, 16, generator=torch.Generator().manual_seed(0))
    with host.targeting("avx2"):
        prepared = qcore.fx.prepare(
            model, "fxnative", x,
            prepare_custom_config=PrepareCustomConfig().set_input_quantized_indexes([0]),
        )
        layer = next(n for n in prepared.graph.nodes if n.target == "0")
        assert layer.args[0].op == "placeholder"  # no observer between
        with torch.no_grad():
            prepared(x)
        converted = qcore.fx.convert(prepared)
    assert qcore.fx.weight_ranges(converted) == {}
    torch.testing.assert_close(_scales(converted, "0"), model[0].weight.detach().abs().amax(1).double() / 63.5)


class SameConv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(16, 8, 3, padding="same")
        with torch.no_grad():
            self.conv.weight.copy_(_param(8, 16, 3, 3, seed=14, gain=1.0))

    def forward(self, x: Tensor) -> Tensor:
        return self.conv(x)


def test_a_conv_module_with_same_padding_narrows_what_overflows(backends: None) -> None:
    """Against brute force on every output position (all 128 are sampled), the input
    padded with the zero point's code as 'same' pads it: the documented per-channel rule.
    (The reference representation: torch's native quantized conv rejects 'same'.)"""
    model = SameConv().eval()
    x = torch.rand(2, 16, 8, 8, generator=torch.Generator().manual_seed(15)) * 3
    with host.targeting("avx2"):
        converted = qcore.fx.quantize(model, "fxref", [x])
    scale, zero_point = _input_qparams(converted, "conv")
    rows = pairs.conv_rows(pairs.input_codes(x, scale, zero_point), (3, 3), 1, zero_point)
    weight = model.conv.weight.detach()
    halves = pairs.expected_half_ranges(rows, weight)
    assert sum(h < 127.5 for h in halves) > 0
    expected = weight.reshape(8, -1).abs().amax(1).double() / torch.tensor(halves, dtype=torch.float64)
    torch.testing.assert_close(converted.conv.weight_scale.double(), expected)


@pytest.mark.parametrize("dtype", [torch.quint8, torch.qint8])
def test_only_layers_with_uint8_inputs_take_part(dtype: torch.dtype) -> None:
    """The emulation is of uint8 x int8 kernels: a layer whose input observer is signed
    (int8 activations, another kernel's business) keeps the safe range untouched."""
    from torch.ao.quantization import MinMaxObserver, QConfig, QConfigMapping
    from torch.ao.quantization.backend_config import (
        BackendConfig,
        BackendPatternConfig,
        DTypeConfig,
        ObservationType,
    )

    from qcore.fx.ranges import weighted_layers
    from qcore.int8.weight_ranges import TargetWeightObserver

    config = BackendConfig("signed").set_backend_pattern_config(
        BackendPatternConfig(nn.Linear)
        .set_observation_type(ObservationType.OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT)
        .add_dtype_config(DTypeConfig(input_dtype=dtype, output_dtype=dtype, weight_dtype=torch.qint8))
        .set_root_module(nn.Linear)
        .set_reference_quantized_module(torch.ao.nn.quantized.reference.Linear)
    )
    mapping = QConfigMapping().set_global(
        QConfig(activation=MinMaxObserver.with_args(dtype=dtype), weight=TargetWeightObserver)
    )
    prepared = prepare_fx(nn.Sequential(nn.Linear(16, 8)).eval(), mapping, (torch.randn(2, 16),),
                          backend_config=config)
    observer = next(n for n in prepared.graph.nodes if n.target == "0").args[0]
    assert observer.op == "call_module"  # observed in both cases, with dtype's observer
    layers = [(layer.node.target, layer.input_observer) for layer in weighted_layers(prepared)]
    assert layers == ([("0", observer.target)] if dtype == torch.quint8 else [])


class FunctionalLinear(nn.Module):
    """``F.linear`` on a parameter no input can overflow: its input observer, called by
    this layer alone, records the calibration inputs."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(_one_hot_linear(18).weight.detach().clone())

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.w)


class FunctionalConv(nn.Module):
    """``F.conv2d`` (1x1) on the same kind of parameter."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(_one_hot_linear(20).weight.detach().clone()[..., None, None])

    def forward(self, x: Tensor) -> Tensor:
        return F.conv2d(x, self.w)


@pytest.mark.parametrize("layer", ["linear", "conv2d"])
def test_a_functional_layer_takes_its_chosen_range(backends: None, layer: str) -> None:
    """Full range (scale = amax / 127.5): the layer's inputs were recorded and no input
    can overflow its codes; without a recording it would keep the safe range (63.5)."""
    model = (FunctionalLinear() if layer == "linear" else FunctionalConv()).eval()
    weight = model.w.detach()
    assert not bool(pairs.any_input_can_overflow(pairs.full_range_codes(weight)).any())
    shape = (8, 16) if layer == "linear" else (2, 16, 4, 4)
    x = torch.rand(*shape, generator=torch.Generator().manual_seed(19))
    with host.targeting("avx2"):
        converted = qcore.fx.quantize(model, "fxref", [x])
    quantize = next(n for n in converted.graph.nodes if n.target is torch.quantize_per_channel)
    scale = getattr(converted, str(quantize.args[1].target))
    torch.testing.assert_close(scale.double(), weight.reshape(8, -1).abs().amax(1).double() / 127.5)


def test_only_ints_describe_a_conv_argument() -> None:
    """One int per spatial dim: a single int repeated (as torch does), a sequence of ints
    as written; anything else (a traced value, a float, a string) describes nothing."""
    from qcore.fx.ranges import _per_dim

    assert _per_dim((1, 2), 2) == (1, 2) and _per_dim([3], 1) == (3,) and _per_dim(2, 3) == (2, 2, 2)
    assert all(_per_dim(v, 2) is None for v in (None, "same", (1, 2.0), 1.0))


class InputWeight(nn.Module):
    """``F.linear`` whose weight is a model input, next to a parameter of the same name."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 16))

    def forward(self, x: Tensor, w: Tensor) -> Tensor:
        return F.linear(x, w) + F.linear(x, self.w)


def test_only_a_parameter_weight_is_a_layers_weight(backends: None) -> None:
    """A weight that arrives as an input (named like a parameter) is not the layer's
    parameter: only the call on ``self.w`` is decided per layer."""
    from qcore.fx.ranges import weighted_layers

    example = (torch.rand(4, 16), torch.randn(8, 16))
    with host.targeting("avx2"):
        prepared = qcore.fx.prepare(InputWeight().eval(), "fxref", example)
    layers = weighted_layers(prepared)
    assert [layer.node.args[1].args[0].target for layer in layers] == ["w"]
    assert [layer.node.args[1].args[0].op for layer in layers] == ["get_attr"]


class DataDependent(nn.Module):
    """Python control flow on a tensor's value: torch.fx cannot trace it; export can."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x: Tensor) -> Tensor:
        if x.sum() > 0:  # the line tracing stops at
            return self.linear(x)
        return -self.linear(x)


def test_an_untraceable_model_names_its_line_and_the_pt2e_flow(backends: None) -> None:
    with pytest.raises(qcore.errors.FxTraceError) as raised:
        qcore.fx.prepare(DataDependent().eval(), "fxnative", (torch.randn(2, 4),))
    message = str(raised.value)
    assert f"{__file__}:" in message and "in forward" in message
    line = int(message.split(f"{__file__}:")[1].split(maxsplit=1)[0])
    assert "if x.sum() > 0" in Path(__file__).read_text().splitlines()[line - 1]
    assert "'pt2e:fxnative'" in message and "DataDependent" in message
    assert isinstance(raised.value.__cause__, torch.fx.proxy.TraceError)


def test_an_error_outside_tracing_is_not_called_a_trace_error(backends: None) -> None:
    """Only a failure inside torch.fx's tracer is renamed; one raised before tracing
    starts (torch checks the mapping first) passes through as raised."""
    with pytest.raises(AssertionError, match="must be a QConfigMapping"):
        qcore.fx.prepare(nn.Linear(4, 4).eval(), "fxnative", (torch.randn(2, 4),),
                         mapping="not a qconfig")  # type: ignore[arg-type]  # fmt: skip


class EmptySlot(nn.Module):
    """A linear followed by an empty ``nn.Sequential`` (a slot for optional layers), kept
    whole by ``prepare_custom_config``: a module call that holds no layer."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(16, 8)
        self.slot = nn.Sequential()

    def forward(self, x: Tensor) -> Tensor:
        return self.slot(self.linear(x))


class WrappedSlot(nn.Module):
    """A linear followed by a one-layer ``nn.Sequential``, kept whole by
    ``prepare_custom_config``: FX quantizes no layer inside a container it calls whole."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(16, 8)
        self.slot = nn.Sequential(nn.Linear(8, 8))

    def forward(self, x: Tensor) -> Tensor:
        return self.slot(self.linear(x))


@pytest.mark.parametrize("model", [EmptySlot, WrappedSlot], ids=["empty", "one layer"])
def test_a_sequential_called_whole_is_no_layer(backends: None, model: type[nn.Module]) -> None:
    """A container kept whole carries the backend's qconfig like every module, but FX
    quantizes nothing inside it: empty, it holds no layer; holding one, that linear has no
    weight observer and runs in float. Only fused modules (``LinearReLU``: a sequence)
    are unwrapped to their layer, so ``linear`` alone is a weighted layer."""
    from torch.ao.quantization.fx.custom_config import PrepareCustomConfig

    from qcore.fx.ranges import weighted_layers

    custom = PrepareCustomConfig().set_non_traceable_module_names(["slot"])
    with host.targeting("avx2"):
        prepared = qcore.fx.prepare(model().eval(), "fxref", (torch.rand(4, 16),),
                                    prepare_custom_config=custom)
    assert any(n.op == "call_module" and n.target == "slot" for n in prepared.graph.nodes)
    assert [layer.node.target for layer in weighted_layers(prepared)] == ["linear"]


class BufferWeight(nn.Module):
    """``F.linear`` on a buffer: a constant the model holds, not a trained parameter."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("w", _one_hot_linear(18).weight.detach().clone())

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.w)


def test_a_functional_layer_on_a_buffer_is_no_weighted_layer(backends: None) -> None:
    """Its weight input is observed like a parameter's, but only parameters are the
    weights whose range is decided per layer: no layer, and the flow converts."""
    from qcore.fx.ranges import weighted_layers

    x = torch.rand(8, 16, generator=torch.Generator().manual_seed(19))
    with host.targeting("avx2"):
        prepared = qcore.fx.prepare(BufferWeight().eval(), "fxref", (x,))
    observed = next(n for n in prepared.graph.nodes if n.target is F.linear).args[1]
    assert observed.op == "call_module" and observed.args[0].op == "get_attr"
    assert weighted_layers(prepared) == []
