"""End-to-end FX flow on the model zoo with the oneDNN backend.

* torch's default mapping: the outputs with ``qcore.get_backend_config("onednn")`` are
  bit-identical to those with torch's own ``get_onednn_backend_config()``, and torch's
  mapping fails exactly on the models this package's mapping exists to fix;
* this package's mapping: runs on every model, still bit-identical across the two
  configs, and at least 30 dB SQNR against the float model.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from torch import nn
from torch.ao.quantization import default_dynamic_qconfig, get_default_qconfig_mapping

import qcore
from qcore.int8.engine import quantized_engine
from qcore.testing.reference import config_pair, torch_backend_config
from qcore.zoo.models import ModelCase, all_cases, case, sqnr
from qcore.zoo.suite.flow import (
    assert_same_outputs,
    float_weighted_layers,
    ptq,
    quantized_op_count,
    run,
)

CASES = all_cases()
TORCH_MAPPING_FAILS: dict[str, type[Exception]] = {
    "linear_tanh": LookupError,
    "linear_tanh_mixed": LookupError,
    "conv_transpose2d": AssertionError,
}
#: The weighted layers this package's mapping leaves in float, by case, and why: the
#: embeddings (torch's oneDNN config declares them weight-only qint8, which the static
#: mapping cannot match), the transposed conv (mapping difference 1), the RNNs (their
#: patterns are dynamic only). Every other weighted layer must be quantized.
STAYS_FLOAT: dict[str, set[str]] = {
    "embedding": {"embedding"},
    "embedding_bag": {"embedding"},
    "conv_transpose2d": {"up"},
    "lstm": {"rnn"},
    "gru": {"rnn"},
}
#: Cases with nothing the backend quantizes: the converted model is the float model.
ALL_FLOAT = {"embedding", "embedding_bag"}
MIN_SQNR_DB = 30.0
CONFIGS = config_pair("onednn")


@pytest.fixture(autouse=True)
def onednn_engine() -> Iterator[None]:
    with quantized_engine("onednn"):
        yield


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_torch_mapping_is_bit_identical_across_configs(case: ModelCase) -> None:
    mapping = get_default_qconfig_mapping("onednn")
    if case.name not in TORCH_MAPPING_FAILS:
        assert_same_outputs(case, mapping, *CONFIGS)
        return
    for config in CONFIGS:
        with pytest.raises(TORCH_MAPPING_FAILS[case.name]):
            ptq(case, mapping, config)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_our_mapping_runs_everywhere_with_high_sqnr(case: ModelCase) -> None:
    mapping = qcore.get_qconfig_mapping("onednn", model=case.model())
    if case.name in TORCH_MAPPING_FAILS:  # elsewhere the torch-mapping test covers parity
        converted = assert_same_outputs(case, mapping, *CONFIGS)
    else:
        converted = ptq(case, mapping, CONFIGS[0])
    out = run(converted, case)
    assert float_weighted_layers(converted) == STAYS_FLOAT.get(case.name, set())
    if case.name in ALL_FLOAT:
        assert quantized_op_count(converted) == 0
        assert torch.equal(out, run(case.model(), case))
        return
    assert quantized_op_count(converted) > 0, f"{case.name}: nothing was quantized"
    score = sqnr(run(case.model(), case), out)
    assert score >= MIN_SQNR_DB, f"{case.name}: SQNR {score:.1f} dB"


def test_the_float_layers_are_what_torchs_config_and_the_mapping_say() -> None:
    """The STAYS_FLOAT table against the references: torch's own oneDNN config declares
    embeddings weight-only and RNNs dynamic-only, and this package's mapping sets the
    transposed convs to None."""
    weight_only, dynamic = set(), set()
    for config in torch_backend_config("onednn").configs:
        for dtype in config.dtype_configs:
            if dtype.input_dtype is torch.float32 and dtype.weight_dtype is torch.qint8:
                weight_only.add(config.pattern)
            if dtype.is_dynamic:
                dynamic.add(config.pattern)
    assert {nn.Embedding, nn.EmbeddingBag} <= weight_only
    static = {c.pattern for c in torch_backend_config("onednn").configs} - dynamic
    assert {nn.LSTM, nn.GRU} <= dynamic and not {nn.LSTM, nn.GRU} & static
    mapping = qcore.get_qconfig_mapping("onednn")
    assert mapping.object_type_qconfigs[nn.ConvTranspose2d] is None


@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_rnn_dynamic_quantization(name: str) -> None:
    case_ = case(name)
    rnn_type = nn.LSTM if name == "lstm" else nn.GRU
    mapping = qcore.get_qconfig_mapping("onednn", model=case_.model()).set_object_type(
        rnn_type, default_dynamic_qconfig
    )
    converted = assert_same_outputs(case_, mapping, *CONFIGS)
    assert type(converted.rnn).__module__.startswith("torch.ao.nn.quantized.dynamic")
    assert sqnr(run(case_.model(), case_), run(converted, case_)) >= MIN_SQNR_DB
