"""qcore.fx: functional calls with keywords, per-layer weight ranges, the backend's convert.

The backends are fake distributions wrapping torch's own oneDNN config and mapping, so
qcore's suite needs no first-party plugin; the references are torch's raw FX flow.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator

import int16_pairs as pairs
import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.ao.quantization import get_default_qconfig_mapping
from torch.ao.quantization.backend_config import get_onednn_backend_config
from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

import qcore.fx
from qcore import host
from qcore.engine import quantized_engine
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
