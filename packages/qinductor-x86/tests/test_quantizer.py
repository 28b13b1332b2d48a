"""The x86 quantizer's configs, torchao-named setters and not-quantized report."""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Iterator

import parity_models as pm
import pytest
import torch
import torchao_reference
from torch import nn
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

import qcore
from qcore.pt2e.annotation.report import DECLINED, EXCLUDED, NO_ANNOTATOR
from qcore.zoo.suite.pt2e import exported, quantizing, spec_text
from qinductor_x86.quantizer import x86_inductor_quantizer as ours
from qinductor_x86.quantizer.x86_inductor_quantizer import (
    X86InductorQuantizer,
    get_default_x86_inductor_quantization_config,
)

REF = torchao_reference.load()
OPTIONS = [
    dict(zip(("is_qat", "is_dynamic", "reduce_range"), flags, strict=True))
    for flags in itertools.product((False, True), repeat=3)
]


@pytest.fixture(autouse=True)
def vnni_target() -> Iterator[None]:
    with qcore.host.targeting("avx512_vnni"):
        yield


def _text(config: object) -> list[object]:
    specs = ("input_activation", "output_activation", "weight", "bias")
    return [spec_text(getattr(config, s)) for s in specs] + [config.is_qat]  # type: ignore[attr-defined]


@pytest.mark.parametrize("options", OPTIONS, ids=str)
def test_default_configs_are_torchaos(options: dict[str, bool]) -> None:
    mine = get_default_x86_inductor_quantization_config(**options)
    assert _text(mine) == _text(REF.get_default_x86_inductor_quantization_config(**options))
    assert mine.input_activation.dtype == torch.uint8
    assert mine.weight.qscheme == torch.per_channel_symmetric


def test_fp16_linear_config_is_torchaos() -> None:
    assert _text(ours.get_x86_inductor_linear_dynamic_fp16_config()) == _text(
        REF.get_x86_inductor_linear_dynamic_fp16_config()
    )


def test_configs_are_cached_per_target() -> None:
    config = get_default_x86_inductor_quantization_config(is_dynamic=True)
    assert get_default_x86_inductor_quantization_config(False, True) is config
    with qcore.host.targeting("avx2"):
        assert get_default_x86_inductor_quantization_config(is_dynamic=True) is not config


def test_get_quantizer_passes_its_options_to_the_default_config() -> None:
    q = qcore.get_quantizer("x86", is_dynamic=True, reduce_range=True)
    assert isinstance(q, X86InductorQuantizer)
    assert q.get_global_quantization_config() is get_default_x86_inductor_quantization_config(
        is_dynamic=True, reduce_range=True
    )
    with pytest.raises(TypeError, match="is_per_channel"):
        qcore.get_quantizer("x86", is_per_channel=True)


def _annotated(quantizer: object, model: str) -> dict[str, object]:
    return quantizing(pm.recorded(quantizer, model))


def test_conv1d_module_type_is_scoped_where_torchao_ignores_it() -> None:
    """torchao 0.18 maps nn.Conv2d twice and nn.Conv1d never (README: deviations)."""
    config = get_default_x86_inductor_quantization_config()
    mine = _annotated(X86InductorQuantizer().set_module_type_qconfig(nn.Conv1d, config), "conv1d")
    # conv1d → ReLU, and conv1d → BatchNorm1d (folded by prepare_pt2e) → ReLU; not the
    # lone conv1d_1
    assert sorted(mine) == ["conv1d", "conv1d_2", "relu", "relu_1"]
    with pytest.warns(UserWarning, match="Unable to customize"):
        theirs = REF.X86InductorQuantizer().set_module_type_qconfig(
            nn.Conv1d, REF.get_default_x86_inductor_quantization_config()
        )
    assert _annotated(theirs, "conv1d") == {}


def test_an_unknown_module_type_warns_and_changes_nothing() -> None:
    q = X86InductorQuantizer()
    with pytest.warns(UserWarning, match="cannot scope"):
        q.set_module_type_qconfig(nn.LayerNorm, get_default_x86_inductor_quantization_config())
    assert q.operator_type_config == {}


def test_conv_plus_scalar_quantizes_where_torchao_fails() -> None:
    class ConvPlusOne(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv, self.relu = nn.Conv2d(3, 4, 3, padding=1), nn.ReLU()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.relu(self.conv(x) + 1.0)  # type: ignore[no-any-return]

    torch.manual_seed(0)
    model, x = ConvPlusOne().eval(), torch.randn(2, 3, 8, 8)
    with pytest.raises(AssertionError):
        prepare_pt2e(
            exported(model, (x,)),
            REF.X86InductorQuantizer().set_global(
                REF.get_default_x86_inductor_quantization_config()
            ),
        )
    prepared = prepare_pt2e(exported(model, (x,)), qcore.get_quantizer("x86"))
    prepared(x)
    converted = convert_pt2e(prepared)
    assert any("quantize_per_channel" in str(n.target) for n in converted.graph.nodes)
    with torch.no_grad():
        assert qcore.metrics.sqnr(model(x), converted(x)) > 30
    reasons = qcore.explain_not_quantized(model, qcore.get_quantizer("x86"), (x,))
    assert [(r.node, r.reason) for r in reasons] == [("add", DECLINED)]
    assert "Python scalar" in reasons[0].detail


def _reasons(model: str, quantizer: X86InductorQuantizer) -> dict[str, tuple[str, str]]:
    built, example = pm.build(model)
    return {
        r.node: (r.reason, r.detail) for r in qcore.explain_not_quantized(built, quantizer, example)
    }


def test_report_names_functional_layers_and_the_recipe_limits() -> None:
    reasons = _reasons("functional", qcore.get_quantizer("x86"))
    assert reasons["conv2d"][0] == DECLINED and "not a call of nn.Conv2d" in reasons["conv2d"][1]
    assert reasons["linear"][0] == DECLINED and "not a call of nn.Linear" in reasons["linear"][1]
    assert "conv2d_1" not in reasons  # the nn.Conv2d calls are quantized
    conv1d = _reasons("conv1d", qcore.get_quantizer("x86"))
    assert conv1d["conv1d_1"][0] == DECLINED and "only with an nn.ReLU" in conv1d["conv1d_1"][1]
    assert "conv1d" not in conv1d  # conv1d → ReLU is quantized
    layer_norms = _reasons("transformer", qcore.get_quantizer("x86"))
    assert layer_norms["layer_norm"][0] == NO_ANNOTATOR


def test_report_names_a_none_operator_config() -> None:
    config = get_default_x86_inductor_quantization_config()
    q = X86InductorQuantizer().set_global(config).set_function_type_qconfig(torch.mul, None)
    reasons = _reasons("transformer", q)
    assert reasons["mul_1"][0] == EXCLUDED and "operator aten.mul.Tensor" in reasons["mul_1"][1]


def test_mixing_qat_and_ptq_configs_warns_and_keeps_the_first() -> None:
    ptq = get_default_x86_inductor_quantization_config()
    q = X86InductorQuantizer().set_global(ptq)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        q.set_module_name_qconfig("fc", get_default_x86_inductor_quantization_config(is_qat=True))
    assert [str(w.message) for w in caught] == [
        "Mixed QAT and Non-QAT quantization config is not supported.",
        "Skip the quantization config for fc.",
    ]
    assert q.module_name_config == {}
    assert q.get_global_quantization_config() is ptq


def test_importing_the_quantizer_registers_no_inductor_pass(
    import_census: dict[str, object],
) -> None:
    """Unlike torchao's x86 quantizer module, which installs its Inductor passes: in a fresh
    interpreter, ``qcore.get_quantizer("x86")`` changes no Inductor hook and imports none
    of torchao's x86 modules (conftest.py's census)."""
    assert import_census["quantizer"] == []
    assert import_census["torchao_x86_modules"] == []
    assert import_census["quantizer_type"] == "X86InductorQuantizer"
