"""The host-evaluation trap: convert_fx under qnnpack clamps wrongly; we warn, by name."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Iterator

import pytest
import torch
from torch.ao.quantization import get_default_qconfig_mapping
from torch.ao.quantization.quantize_fx import convert_fx
from torch.fx import GraphModule

import qcore
from qbackend_executorch.host import (
    HostEvaluationWarning,
    check_host_evaluation,
    convert,
    host_hazards,
)
from qcore.zoo.models import ModelCase, case, sqnr
from qcore.zoo.suite.flow import prepare_and_calibrate, run


@pytest.fixture
def engine() -> Iterator[Callable[[str], None]]:
    previous = torch.backends.quantized.engine

    def use(name: str) -> None:
        torch.backends.quantized.engine = name

    yield use
    torch.backends.quantized.engine = previous


def _host_warnings(call: Callable[[], object]) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return [str(w.message) for w in caught if issubclass(w.category, HostEvaluationWarning)]


def _prepared(model_case: ModelCase) -> GraphModule:
    # torch's quint8 mapping: the one whose convert_fx output runs on host kernels at all
    return prepare_and_calibrate(
        model_case, get_default_qconfig_mapping("qnnpack"), qcore.get_backend_config("executorch")
    )


@pytest.mark.parametrize("name", ["conv2d_relu6", "conv2d_hardtanh"])
def test_the_trap_is_real_and_the_warning_names_the_module(
    name: str, engine: Callable[[str], None]
) -> None:
    model_case = case(name)
    expected = run(model_case.model(), model_case)
    prepared = _prepared(model_case)
    engine("qnnpack")
    host = convert(copy.deepcopy(prepared), reference=False)
    messages = _host_warnings(lambda: run(host, model_case))
    assert len(messages) == 1 and "affected: act" in messages[0]
    assert sqnr(expected, run(host, model_case)) < 5  # the wrong numbers being warned about
    reference = convert(copy.deepcopy(prepared))
    assert _host_warnings(lambda: run(reference, model_case)) == []
    assert sqnr(expected, run(reference, model_case)) >= 30


def test_plain_convert_fx_models_are_checked_on_request(engine: Callable[[str], None]) -> None:
    model_case = case("mobilenet")
    prepared = _prepared(model_case)
    engine("qnnpack")
    host = convert_fx(
        copy.deepcopy(prepared), backend_config=qcore.get_backend_config("executorch")
    )
    assert host_hazards(host) == ["stem.2", "block1.expand.2", "block2.expand.2"]
    with pytest.warns(HostEvaluationWarning, match=r"stem\.2, block1\.expand\.2"):
        check_host_evaluation(host)
    reference = convert(copy.deepcopy(prepared))
    assert host_hazards(reference) == []


def test_no_warning_under_an_engine_without_the_bug(engine: Callable[[str], None]) -> None:
    model_case = case("conv2d_relu6")
    prepared = _prepared(model_case)
    engine("qnnpack")
    host = convert(copy.deepcopy(prepared), reference=False)
    engine("x86")
    assert _host_warnings(lambda: run(host, model_case)) == []
    assert check_host_evaluation(host) == []
    assert sqnr(run(model_case.model(), model_case), run(host, model_case)) >= 30


def test_clamps_on_float_tensors_are_not_hazards() -> None:
    linear = case("linear_relu")  # no clamp at all
    assert host_hazards(convert(_prepared(linear), reference=False)) == []
    share = case("share_qparams")  # torch.clamp after a quantized conv chain: flagged
    assert host_hazards(convert(_prepared(share), reference=False)) == ["clamp"]
    assert host_hazards(convert(_prepared(share))) == []
