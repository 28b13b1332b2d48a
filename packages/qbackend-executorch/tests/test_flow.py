"""End-to-end FX flow (reference representation) on the model zoo with ExecuTorch's config.

* under torch's mapping (``get_default_qconfig_mapping("qnnpack")``, quint8) on every
  model, and under this package's (qint8 symmetric) on the real models,
  ``qcore.get_backend_config("executorch")`` gives outputs bit-identical to torch's own
  ``get_executorch_backend_config()``;
* with this package's mapping every model scores at least 30 dB SQNR against float.
"""

from __future__ import annotations

from functools import partial

import pytest
import torch
from torch import nn
from torch.ao.quantization import (
    default_dynamic_qconfig,
    float16_dynamic_qconfig,
    get_default_qconfig_mapping,
)

import qcore
from qcore.testing.reference import config_pair, torch_backend_config
from qcore.zoo.models import ModelCase, all_cases, case, sqnr
from qcore.zoo.suite import flow

ptq = partial(flow.ptq, convert="reference")
same_outputs = partial(flow.assert_same_outputs, convert="reference")
run = flow.run

CASES = all_cases()
#: The weighted layers this package's mapping leaves in float, by case: torch 2.13's
#: executorch config (the reference) declares no pattern for conv1d, conv3d, transposed
#: convs or RNN modules (checked below). Every other weighted layer must be quantized.
STAYS_FLOAT: dict[str, set[str]] = {
    **{c.name: {"0"} for c in CASES if c.name.startswith(("conv1d", "conv3d"))},
    "conv_transpose2d": {"up"},
    "lstm": {"rnn"},
    "gru": {"rnn"},
}
#: Cases with nothing the backend quantizes: the converted model is the float model.
ALL_FLOAT = {c.name for c in CASES if c.name.startswith(("conv1d", "conv3d"))}
MIN_SQNR_DB = 30.0
CONFIGS = config_pair("executorch")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_torch_mapping_is_bit_identical_across_configs(case: ModelCase) -> None:
    same_outputs(case, get_default_qconfig_mapping("qnnpack"), *CONFIGS)


@pytest.mark.parametrize(
    "name", ["resnet", "mobilenet", "transformer", "functional", "share_qparams"]
)
def test_our_mapping_is_bit_identical_across_configs(name: str) -> None:
    same_outputs(case(name), qcore.get_qconfig_mapping("executorch"), *CONFIGS)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_our_mapping_sqnr(case: ModelCase) -> None:
    """Which layers stay float is the table's, no more; a model with anything to quantize
    is quantized and within the SQNR bar; one with nothing computes exactly in float."""
    converted = ptq(case, qcore.get_qconfig_mapping("executorch"), CONFIGS[0])
    out = run(converted, case)
    assert flow.float_weighted_layers(converted) == STAYS_FLOAT.get(case.name, set())
    if case.name in ALL_FLOAT:
        assert flow.quantized_op_count(converted) == 0
        assert torch.equal(out, run(case.model(), case))
        return
    if not case.name.startswith("embedding"):  # weight-only: no quantize op, checked below
        assert flow.quantized_op_count(converted) > 0, f"{case.name}: nothing was quantized"
    score = sqnr(run(case.model(), case), out)
    assert score >= MIN_SQNR_DB, f"{case.name}: SQNR {score:.1f} dB"


def test_the_float_layers_are_those_torchs_config_has_no_pattern_for() -> None:
    """The STAYS_FLOAT table against the reference: torch's own executorch config has no
    pattern for those module types, and has one for every other weighted layer type."""
    torchs = torch_backend_config("executorch")
    declared = {c.pattern for c in torchs.configs}
    for module_type in (nn.Conv1d, nn.Conv3d, nn.ConvTranspose2d, nn.LSTM, nn.GRU):
        assert module_type not in declared, module_type
    for module_type in (nn.Conv2d, nn.Linear, nn.Embedding, nn.EmbeddingBag):
        assert module_type in declared, module_type


def test_embeddings_are_weight_only_quantized() -> None:
    for name in ("embedding", "embedding_bag"):
        converted = ptq(case(name), qcore.get_qconfig_mapping("executorch"), CONFIGS[0])
        assert converted.embedding.weight_dtype == torch.quint8


@pytest.mark.parametrize(
    ("kind", "qconfig", "marker"),
    [
        ("dynamic", default_dynamic_qconfig, "quantize_per_tensor_dynamic"),
        ("fp16", float16_dynamic_qconfig, "float16"),
    ],
)
@pytest.mark.parametrize("name", ["linear", "transformer"])
def test_dynamic_linear(name: str, kind: str, qconfig: object, marker: str) -> None:
    model_case = case(name)
    mapping = qcore.get_qconfig_mapping("executorch").set_object_type(nn.Linear, qconfig)  # type: ignore[arg-type]
    converted = same_outputs(model_case, mapping, *CONFIGS)
    assert marker in converted.code, f"{kind} linear was not applied"
    assert sqnr(run(model_case.model(), model_case), run(converted, model_case)) >= MIN_SQNR_DB


QAT_CASES = [
    "resnet",
    "mobilenet",
    "transformer",
    "conv2d_bn_relu",
    "conv_bn_torch_add_relu_right",
    "linear_tanh",
    "add_tensor_relu_module",
    "conv2d_relu6",
    "share_qparams",
    "embedding_bag",
]


@pytest.mark.parametrize("name", QAT_CASES)
def test_qat_flow(name: str) -> None:
    """prepare_qat_fx, a few SGD steps towards the float outputs, reference convert."""
    float_out, simulated, out = flow.qat_outputs(case(name), "executorch", convert="reference")
    assert sqnr(simulated, out) >= 25, "the converted model departs from its QAT simulation"
    assert sqnr(float_out, out) >= MIN_SQNR_DB
