"""qcore.sensitivity / qcore.tune with qcore alone: a quantizer object on qcore's common
annotators (every first-party flow is tested in the repository's tests/test_tuning_flows.py).

The claims: the switchable reference model with every op in float is the float model; the
ranking's top three are what re-preparing with one op excluded gives (brute force, each
op's exclusion built from the flow's own configuration); a trained model that int8 makes
guess gets its held-out accuracy back with at most 10 % of its ops in float; a target out
of reach is reported, never silent.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch import Tensor
from torchao.testing.pt2e._xnnpack_quantizer import get_symmetric_quantization_config

import qcore
from qcore.pt2e.annotation.common_annotators import propagate_shared_qparams
from qcore.pt2e.annotation.registry_quantizer import RegistryQuantizer
from qcore.pt2e.annotation.transforms import scalars_to_attrs
from qcore.tuning import TuningWarning
from qcore.tuning.sensitivity import Session
from qcore.zoo.trained import branches, brute_force_ranking, outlier_transformer


class Common(RegistryQuantizer):
    """qcore's backend-agnostic annotators, XNNPACK's symmetric int8 config."""

    namespace = "common"

    def transform_for_annotation(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
        return scalars_to_attrs(model)

    def finalize(self, model: torch.fx.GraphModule) -> None:
        propagate_shared_qparams(model)


def _quantizer() -> Common:
    return Common().set_global(get_symmetric_quantization_config(is_per_channel=True))


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=UserWarning, module="torchao")
        warnings.filterwarnings("ignore", category=FutureWarning)
        yield


#: What the flow quantizes in :func:`branches`, by node name (XNNPACK's config: the
#: linears and the adds, the last add fused with its relu); each reads two operands
#: (input and weight; both summands).
_QUANTIZED_OPS = ("linear", "linear_1", "linear_2", "linear_3", "linear_4", "add", "add_1", "add_2")


def _dequantized_operands(model: torch.fx.GraphModule, example: tuple[Tensor, ...]) -> dict[str, int]:
    """Per linear / add node (by name), how many of its two operands are, in a run on
    ``example``, the value of a dequantize node of the graph (which differs from the
    float value that was quantized); ``output``: whether the model's output is one.
    Values, not switches: what each op really computed on."""
    values: dict[str, Any] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> Any:
            values[n.name] = super().run_node(n)
            return values[n.name]

    with torch.no_grad():
        Recorder(model).run(*example)
    dequantized = [
        values[n.name] for n in model.graph.nodes
        if str(n.target).startswith("quantized_decomposed.dequantize_per_")
        and not torch.equal(values[n.name], values[n.args[0].args[0].name])
    ]  # fmt: skip

    def is_dequantized(value: Any) -> bool:
        return any(d.shape == value.shape and torch.equal(d, value) for d in dequantized)

    counts = {}
    for node in model.graph.nodes:
        if node.target in (torch.ops.aten.linear.default, torch.ops.aten.add.Tensor):
            counts[node.name] = sum(is_dequantized(values[a.name]) for a in node.args[:2])
    (result,) = next(n for n in model.graph.nodes if n.op == "output").args[0]
    counts["output"] = int(is_dequantized(values[result.name]))
    return counts


def test_every_op_left_in_float_is_the_float_model_and_every_op_quantized_is_not() -> None:
    """Per op, by name: with every op quantized each linear and add computes on
    dequantized operands (its input and its weight; both summands) and the output is
    dequantized; with none, no op reads a dequantized value and the output is the float
    model's."""
    model, example, calibration = branches()
    session = Session(model, example, calibration, _quantizer())
    everything = session.board.quantize_only(session.board.names)
    assert _dequantized_operands(everything, example) == {**dict.fromkeys(_QUANTIZED_OPS, 2), "output": 1}
    nothing = session.board.quantize_only([])
    assert _dequantized_operands(nothing, example) == {**dict.fromkeys(_QUANTIZED_OPS, 0), "output": 0}
    with torch.no_grad():
        assert torch.allclose(nothing(*example), model(*example), rtol=1e-5, atol=1e-5)
    assert {op.kind for op in session.ops} >= {"linear", "add"}


def test_ranking_top_three_equals_brute_force_and_the_outlier_order() -> None:
    model, example, calibration = branches()
    session = Session(model, example, calibration, _quantizer())
    ranked = [cost.name for cost in session.costs()]
    assert ranked[:3] == brute_force_ranking(session)[:3]
    # the branches' input outliers decide it: a (x1000), b (x250), c (x60)
    paths = {op.name: op.module_path for op in session.ops}
    assert [paths[name] for name in ranked[:3]] == ["a", "b", "c"]


def test_tuning_a_trained_transformer_recovers_held_out_accuracy() -> None:
    case = outlier_transformer()
    float_accuracy = case.accuracy(case.model)
    result = qcore.tune(
        case.model, case.example_inputs, case.calibration, _quantizer(),
        metric=case.validation_accuracy, tolerance=0.01,
    )  # fmt: skip
    assert float_accuracy >= 0.99  # the task is learnt
    assert result.int8_score < result.float_score - 0.01  # and int8 loses it
    assert result.met, result.message
    assert len(result.float_ops) <= 0.1 * len(result.quantizable_ops)
    assert [op.module_path for op in result.float_ops] == ["embed"]
    assert case.accuracy(result.model) >= float_accuracy - 0.01  # data the tuner never saw


def test_a_target_out_of_reach_is_reported_and_warned() -> None:
    model, example, calibration = branches()
    with pytest.warns(TuningWarning, match="NOT met"):
        result = qcore.tune(
            model, example, calibration, _quantizer(), target_sqnr_db=200.0,
            max_float_fraction=0.1,
        )  # fmt: skip
    assert not result.met
    assert len(result.float_ops) == result.max_float_ops == len(result.quantizable_ops) // 10
    assert "budget" in result.message
    assert "NOT met" in result.report()


def test_a_quantizer_without_scoping_is_ranked_but_not_tuned_and_says_why() -> None:
    from torchao.testing.pt2e._xnnpack_quantizer import XNNPACKQuantizer

    model, example, calibration = branches()
    upstream = XNNPACKQuantizer().set_global(get_symmetric_quantization_config())
    costs = qcore.sensitivity(model, example, calibration, upstream)
    assert costs[0].module_path == "a"
    with pytest.raises(TypeError, match="annotator registry"):
        qcore.tune(
            model, example, calibration, upstream, target_sqnr_db=200.0, max_float_fraction=0.5
        )


class _NoFloatB(Common):
    """A quantizer that cannot leave module ``b`` in float (as torch 2.13's FX oneDNN
    lowering cannot leave a PReLU between quantized ops: benchmarks/README.md)."""

    def annotate(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
        if self.module_name_config.get("b", "quantized") is None:
            raise RuntimeError("b cannot run in float here")
        return super().annotate(model)


def test_an_op_the_flow_cannot_build_in_float_is_skipped_and_named() -> None:
    model, example, calibration = branches()
    quantizer = _NoFloatB().set_global(get_symmetric_quantization_config(is_per_channel=True))
    with pytest.warns(TuningWarning, match="could not build in float"):
        result = qcore.tune(
            model, example, calibration, quantizer, target_sqnr_db=200.0, max_float_fraction=0.3
        )
    assert [op.module_path for op in result.float_ops] == ["a", "c"]
    assert "could not build in float: linear_1 in b: RuntimeError: b cannot run" in result.message
