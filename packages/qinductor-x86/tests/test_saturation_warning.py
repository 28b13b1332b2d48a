"""``convert_pt2e`` of the x86 quantizer's model warns, once per model, when the target
CPU saturates oneDNN's u8 x s8 pair sums (no VNNI), the converted model keeps weights
that can overflow them, and this package's lowering, the only one that computes those
layers exactly, is not installed; it stays quiet on a VNNI target, with never-overflow
weights, and under the lowering.

No compile: the claim is about the converted model. Which layers can overflow is
brute-forced here over the extreme activation codes of every input-channel pair of the
converted int8 weights (``test_lowering_saturation.brute_force_worst_pair``), with each
layer's input range read from its dequantize in the converted graph; the target is set
with ``qcore.host.targeting``, so both routes run on any machine.
"""

from __future__ import annotations

import warnings

import lowering_zoo as zoo
import pytest
import torch
from test_lowering_saturation import INT16_MAX, brute_force_worst_pair
from torch import nn

import qcore
from qinductor_x86.quantizer.saturation_warning import SaturatingWithoutLoweringWarning

_LINEAR = torch.ops.aten.linear.default


def _two_layers() -> nn.Module:
    """A narrow first layer (8 inputs, 1 % of the multiply-adds: inside the default's
    doubling budget) and a wide second one."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 256), nn.ReLU(), nn.Linear(256, 256)).eval()


def _all_positive() -> nn.Module:
    """One layer of all-positive weights: on inputs far from zero (a 7-bit grid costs them
    little) the default keeps the weights full range and cuts the input to 7 bits
    (doubling the only layer would double the model's multiply-adds)."""
    torch.manual_seed(0)
    layer = nn.Linear(8, 256)
    with torch.no_grad():
        layer.weight.abs_()
    return layer.eval()


def _convert(
    prepare_for: str,
    convert_for: str | None = None,
    model: nn.Module | None = None,
    shift: float = 0.0,
    **options: object,
) -> tuple[torch.fx.GraphModule, list[warnings.WarningMessage]]:
    """``model`` (``_two_layers()`` by default) quantized by
    ``qcore.get_quantizer("x86", **options)``, calibrated on normal inputs around
    ``shift``, prepared with the target ``prepare_for`` and converted with ``convert_for``
    (the same by default), and every :class:`SaturatingWithoutLoweringWarning` the flow
    raised (none filtered out)."""
    inputs = (zoo.example(16, 8, shift=shift),)
    calibration = [(zoo.example(16, 8, seed=s, shift=shift),) for s in range(1, 4)]
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    with qcore.host.targeting(prepare_for):
        quantizer = qcore.get_quantizer("x86", **options)
        exported = torch.export.export(model or _two_layers(), inputs).module()
        prepared = prepare_pt2e(exported, quantizer)
        with torch.no_grad():
            for batch in calibration:
                prepared(*batch)
    with qcore.host.targeting(convert_for or prepare_for), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        converted = convert_pt2e(prepared)
    return converted, [w for w in caught if issubclass(w.category, SaturatingWithoutLoweringWarning)]


def _linears(converted: torch.fx.GraphModule) -> dict[str, tuple[torch.Tensor, int]]:
    """Each linear's int8 weight and its input's largest code."""
    return {
        node.name: (
            converted.get_buffer(str(node.args[1].args[0].target)),
            int(node.args[0].args[4]),  # the input's dequantize_per_tensor: quant_max
        )
        for node in converted.graph.nodes
        if node.target is _LINEAR
    }


def _overflowing(converted: torch.fx.GraphModule) -> dict[str, int]:
    """Each linear whose int8 weight can overflow an int16 pair sum on its input's codes
    (brute force), with its worst pair sum."""
    worst = {name: brute_force_worst_pair(w, qmax) for name, (w, qmax) in _linears(converted).items()}
    return {name: pair for name, pair in worst.items() if pair > INT16_MAX}


@pytest.fixture
def not_installed() -> None:
    assert not qcore.get_lowering("x86").installed, "an earlier test left the lowering installed"


@pytest.mark.parametrize("rule", ["budgeted", "per_layer"])
def test_saturating_target_without_the_lowering_warns_once_naming_the_fixes(
    not_installed: None, rule: str
) -> None:
    """The default (``budgeted``: the narrow layer on full-range weights, doubled) and the
    accuracy-first rule (both layers full range) keep weights that overflow; one warning
    per model, on one line, naming an overflowing layer, the lowering and the other rule,
    at the line that called ``convert_pt2e``."""
    converted, caught = _convert("avx2", weight_rule=rule)
    overflowing = _overflowing(converted)
    assert len(overflowing) == (1 if rule == "budgeted" else 2), overflowing
    assert len(caught) == 1
    assert caught[0].filename == __file__
    message = str(caught[0].message)
    assert "\n" not in message
    named = [layer for layer in overflowing if f"'{layer}'" in message]
    assert len(named) == 1 and str(overflowing[named[0]]) in message, message
    assert "qcore.get_lowering('x86')" in message and "weight_rule='never_overflow'" in message


def test_no_warning_when_the_lowering_is_installed(not_installed: None) -> None:
    with qcore.get_lowering("x86"):
        converted, caught = _convert("avx2", weight_rule="per_layer")
    assert _overflowing(converted)  # the same weights as above: only the lowering is new
    assert caught == []


@pytest.mark.parametrize(
    ("prepare_for", "convert_for"), [("avx512_vnni", None), ("avx2", "avx512_vnni")]
)
def test_no_warning_on_a_vnni_target(not_installed: None, prepare_for: str, convert_for: str | None) -> None:
    """torchao's full-range weights overflow a pair sum, but VNNI sums in 32 bits; also a
    model prepared for a CPU without VNNI and converted for a VNNI fleet."""
    converted, caught = _convert(prepare_for, convert_for, weight_rule="per_layer")
    assert _overflowing(converted)
    assert caught == []


def test_no_warning_with_never_overflow_weights(not_installed: None) -> None:
    converted, caught = _convert("avx2", weight_rule="never_overflow")
    assert _overflowing(converted) == {}
    assert caught == []


def test_no_warning_for_full_range_weights_on_a_7_bit_input(not_installed: None) -> None:
    """The default's other way out: full-range weights on an input cut to 7 bits, whose
    pairs stay within 2 * 127 * 128 = 32512."""
    converted, caught = _convert("avx2", model=_all_positive(), shift=3.0)
    ((weight, qmax),) = _linears(converted).values()
    assert qmax == 127 and int(weight.abs().max()) >= 127
    assert brute_force_worst_pair(weight, 255) > INT16_MAX  # on 8 bits it would overflow
    assert _overflowing(converted) == {}
    assert caught == []
