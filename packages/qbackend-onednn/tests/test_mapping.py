"""The oneDNN default mapping: each documented difference from torch's is needed, and
there is no other difference."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from torch import nn
from torch.ao.quantization import (
    FixedQParamsObserver,
    QConfig,
    default_weight_observer,
    get_default_qat_qconfig_mapping,
    get_default_qconfig_mapping,
)
from torch.ao.quantization.qconfig import qconfig_equals
from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx, prepare_qat_fx

import qcore
from qbackend_onednn.mapping import CONV_TRANSPOSE_OPS, EMBEDDING_MODULES, fused_module_type_chains
from qcore.int8.engine import quantized_engine
from qcore.testing.reference import torch_backend_config
from qcore.zoo.models import ModelCase, case, sqnr
from qcore.zoo.suite.flow import ptq, qat_outputs, run


@pytest.fixture(autouse=True)
def onednn_engine() -> Iterator[None]:
    with quantized_engine("onednn"):
        yield


def test_linear_tanh_fails_with_torch_mapping_and_runs_with_ours() -> None:
    linear_tanh = case("linear_tanh")
    config = qcore.get_backend_config("onednn")
    with pytest.raises(LookupError, match="LinearTanh"):
        ptq(linear_tanh, get_default_qconfig_mapping("onednn"), config)
    for model in (linear_tanh.model(), None):
        converted = ptq(linear_tanh, qcore.get_qconfig_mapping("onednn", model=model), config)
        assert type(converted.get_submodule("0")).__name__ == "LinearTanh"
        assert sqnr(run(linear_tanh.model(), linear_tanh), run(converted, linear_tanh)) >= 30


def _tanh_output_observer(model_case: ModelCase, with_model: bool) -> object:
    model = model_case.model()
    mapping = qcore.get_qconfig_mapping("onednn", model=model if with_model else None)
    prepared = prepare_fx(
        model, mapping, model_case.inputs(0), backend_config=qcore.get_backend_config("onednn")
    )
    tanh = next(n for n in prepared.graph.nodes if n.op == "call_module" and n.target == "4")
    (user,) = tanh.users
    return prepared.get_submodule(str(user.target)) if user.op == "call_module" else None


def test_standalone_tanh_keeps_torch_fixed_qparams_when_model_is_given() -> None:
    mixed = case("linear_tanh_mixed")  # Linear-Tanh (fused), Linear-ReLU, Tanh (standalone)
    observer = _tanh_output_observer(mixed, with_model=True)
    assert isinstance(observer, FixedQParamsObserver)
    assert observer.scale.item() == pytest.approx(2.0 / 256.0)
    # without names to restore, the standalone Tanh cannot meet its fixed-qparams
    # constraint and torch leaves it in float: documented, and still correct
    assert not isinstance(_tanh_output_observer(mixed, with_model=False), FixedQParamsObserver)


def test_conv_transpose_fails_with_torch_mapping() -> None:
    with pytest.raises(AssertionError, match="ConvTranspose"):
        ptq(case("conv_transpose2d"), get_default_qconfig_mapping("onednn"), torch_backend_config("onednn"))


def test_per_tensor_conv_transpose_would_run_but_is_wrong_on_onednn() -> None:
    """Why ConvTranspose stays in float rather than getting torch's x86 fix."""
    model_case = case("conv_transpose2d")
    global_qconfig = get_default_qconfig_mapping("onednn").global_qconfig
    assert global_qconfig is not None
    per_tensor = QConfig(activation=global_qconfig.activation, weight=default_weight_observer)
    mapping = get_default_qconfig_mapping("onednn").set_object_type(nn.ConvTranspose2d, per_tensor)
    expected = run(model_case.model(), model_case)
    broken = run(ptq(model_case, mapping, torch_backend_config("onednn")), model_case)
    assert sqnr(expected, broken) < 10
    ours = ptq(model_case, qcore.get_qconfig_mapping("onednn"), torch_backend_config("onednn"))
    assert sqnr(expected, run(ours, model_case)) >= 30


@pytest.mark.parametrize("is_qat", [False, True])
def test_differences_from_torch_are_only_the_documented_ones(is_qat: bool) -> None:
    """On a VNNI target; on one without VNNI only the weights differ (next test)."""
    model = case("linear_tanh_mixed").model()
    with qcore.host.targeting("avx512_vnni"):
        ours = qcore.get_qconfig_mapping("onednn", is_qat=is_qat, model=model)
    torch_mapping = (get_default_qat_qconfig_mapping if is_qat else get_default_qconfig_mapping)(
        "onednn"
    )
    assert qconfig_equals(ours.global_qconfig, torch_mapping.global_qconfig)
    floated = set(CONV_TRANSPOSE_OPS) | (set(EMBEDDING_MODULES) if is_qat else set())
    mine, theirs = ours.object_type_qconfigs, torch_mapping.object_type_qconfigs
    changed = {
        key
        for key in set(mine) | set(theirs)
        if (key in mine) != (key in theirs) or not qconfig_equals(mine.get(key), theirs.get(key))
    }
    assert changed == floated | {nn.Tanh}
    assert all(ours.object_type_qconfigs[op] is None for op in floated)
    assert nn.Tanh not in ours.object_type_qconfigs  # shares nn.Linear's (the global) qconfig
    tanh_qconfig = torch_mapping.object_type_qconfigs[nn.Tanh]
    assert set(ours.module_name_qconfigs) == {"1", "4"}  # the model's two Tanh instances
    assert all(qconfig_equals(q, tanh_qconfig) for q in ours.module_name_qconfigs.values())


@pytest.mark.parametrize("is_qat", [False, True])
def test_without_vnni_only_the_int8_weight_ranges_differ(is_qat: bool) -> None:
    model = case("linear_tanh_mixed").model()
    with qcore.host.targeting("avx512_vnni"):
        vnni = qcore.get_qconfig_mapping("onednn", is_qat=is_qat, model=model)
    with qcore.host.targeting("avx2"):
        avx2 = qcore.get_qconfig_mapping("onednn", is_qat=is_qat, model=model)
    pairs = [(vnni.global_qconfig, avx2.global_qconfig)]
    pairs += [(vnni.object_type_qconfigs[k], avx2.object_type_qconfigs[k])
              for k in vnni.object_type_qconfigs]
    pairs += [(vnni.module_name_qconfigs[k], avx2.module_name_qconfigs[k])
              for k in vnni.module_name_qconfigs]
    assert set(vnni.object_type_qconfigs) == set(avx2.object_type_qconfigs)
    weights = probe = torch.randn(8, 4, generator=torch.Generator().manual_seed(0))
    checked = 0
    for before, after in pairs:
        assert (before is None) == (after is None)
        if before is None or after is None:
            continue
        assert repr(before.activation) == repr(after.activation)
        old, new = before.weight(), after.weight()
        if old.dtype != torch.qint8 or old.qscheme not in (
            torch.per_channel_symmetric, torch.per_tensor_symmetric
        ):
            assert repr(before.weight) == repr(after.weight)
            continue
        old(probe)
        new(weights)
        (old_scale, _), (new_scale, _) = old.calculate_qparams(), new.calculate_qparams()
        # codes of the new weights stay within [-64, 64]: no pair can overflow int16
        amax = weights.abs().amax(1) if new_scale.numel() > 1 else weights.abs().amax()
        assert torch.round(amax / new_scale).max() <= 64
        assert (new_scale >= old_scale).all()
        checked += 1
    assert checked > 0


def test_mapping_without_fusable_pair_keeps_torch_tanh_entry() -> None:
    only_tanh = nn.Sequential(nn.Conv2d(3, 4, 1), nn.Tanh())
    with qcore.host.targeting("avx512_vnni"):
        ours = qcore.get_qconfig_mapping("onednn", model=only_tanh)
    torch_mapping = get_default_qconfig_mapping("onednn")
    assert qconfig_equals(
        ours.object_type_qconfigs[nn.Tanh], torch_mapping.object_type_qconfigs[nn.Tanh]
    )
    assert not ours.module_name_qconfigs


def test_fused_chains_come_from_the_backend_config() -> None:
    chains = fused_module_type_chains(qcore.get_backend_config("onednn"))
    assert (nn.Linear, nn.Tanh) in chains
    assert (nn.Conv2d, nn.BatchNorm2d, nn.ReLU) in chains


def test_qat_with_torch_mapping_fails_on_embedding_and_ours_runs() -> None:
    embedding = case("embedding")
    config = qcore.get_backend_config("onednn")
    example = embedding.inputs(0)
    with pytest.raises(AssertionError, match="per_channel_affine_float_qparams"):
        prepare_qat_fx(
            embedding.model().train(),
            get_default_qat_qconfig_mapping("onednn"),
            example,
            backend_config=config,
        )
    mapping = qcore.get_qconfig_mapping("onednn", is_qat=True, model=embedding.model())
    prepared = prepare_qat_fx(embedding.model().train(), mapping, example, backend_config=config)
    converted = convert_fx(prepared.eval(), backend_config=config)
    assert torch.equal(run(converted, embedding), run(embedding.model(), embedding))


QAT_CASES = [
    "transformer",
    "lstm",
    "conv1d_bn_relu",
    "conv2d_bn",
    "conv3d_bn_relu",
    "conv_torch_add_relu_left",
    "linear_tanh_mixed",
    "linear_leaky_relu",
    "mul_tensor_relu_torch",
    "concat",
    "layernorm",
    "conv_transpose2d",
    "conv2d_relu6",
]


@pytest.mark.parametrize("name", QAT_CASES)
def test_qat_flow(name: str) -> None:
    """prepare_qat_fx, a few SGD steps towards the float outputs, convert_fx."""
    float_out, simulated, out = qat_outputs(case(name), "onednn")
    assert sqnr(simulated, out) >= 30, "the converted model departs from its QAT simulation"
    assert sqnr(float_out, out) >= 30


class _LinearFunctionalTanh(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(16, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.linear(x))


def test_alignment_applies_when_only_the_root_type_is_a_module() -> None:
    """The fuser of (Linear, torch.tanh) builds an nn.Tanh member, so a model with a
    Linear and no Tanh module must still get the aligned entry. (torch 2.13's own fuser
    then rejects the function, whatever the mapping; qcore's conformance kit runs it.)"""
    ours = qcore.get_qconfig_mapping("onednn", model=_LinearFunctionalTanh())
    assert nn.Tanh not in ours.object_type_qconfigs
    assert not ours.module_name_qconfigs  # no Tanh instance to restore
    conv_only = qcore.get_qconfig_mapping("onednn", model=nn.Sequential(nn.Conv2d(3, 4, 1)))
    assert nn.Tanh in conv_only.object_type_qconfigs  # no Linear: torch's entry untouched
