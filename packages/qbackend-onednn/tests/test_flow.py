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
from torch import nn
from torch.ao.quantization import default_dynamic_qconfig, get_default_qconfig_mapping

import qcore
from qcore.engine import quantized_engine
from qcore.testing.flow import assert_same_outputs, ptq, quantized_op_count, run
from qcore.testing.models import ModelCase, all_cases, case, sqnr
from qcore.testing.reference import config_pair

CASES = all_cases()
TORCH_MAPPING_FAILS: dict[str, type[Exception]] = {
    "linear_tanh": LookupError,
    "linear_tanh_mixed": LookupError,
    "conv_transpose2d": AssertionError,
}
FLOAT_ONLY = {"embedding", "embedding_bag"}  # onednn's weight-only qint8 cannot match them
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
    if case.name not in FLOAT_ONLY:
        assert quantized_op_count(converted) > 0, f"{case.name}: nothing was quantized"
    score = sqnr(run(case.model(), case), out)
    assert score >= MIN_SQNR_DB, f"{case.name}: SQNR {score:.1f} dB"


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
