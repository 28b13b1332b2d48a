"""qcore.fx.ranges: the FX spellings it recognises. An op with a scalar operand whose
output qparams torch derives from its input (``quantized::add_scalar`` / ``mul_scalar``)
leaves the next layer's input qparams unknown, so that layer keeps the safe weight range;
a relu between them fuses into the op, so the walk back passes it.

Every spelling FX records is written out here, one node each: the operator, its in-place
form, the torch function and the Tensor method (also in place). A spelling missing from
the module's sets would let the layer after it take a range chosen for qparams it does
not get.
"""

from __future__ import annotations

import operator
from typing import Any

import pytest
import torch
from torch.fx import Graph

from qcore.fx.ranges import _has_scalar_operand, _is_relu

DERIVED = [
    ("call_function", operator.add), ("call_function", operator.iadd),
    ("call_function", operator.mul), ("call_function", operator.imul),
    ("call_function", operator.sub), ("call_function", operator.isub),
    ("call_function", torch.add), ("call_function", torch.mul), ("call_function", torch.sub),
    ("call_method", "add"), ("call_method", "add_"), ("call_method", "mul"),
    ("call_method", "mul_"), ("call_method", "sub"), ("call_method", "sub_"),
]  # fmt: skip
#: the same arithmetic torch quantizes with an observer of its own
OBSERVED = [
    ("call_function", operator.truediv), ("call_function", torch.div),
    ("call_method", "div"), ("call_method", "flatten"), ("call_function", torch.cat),
]  # fmt: skip


def _node(kind: str, target: Any, other: Any) -> Any:
    graph = Graph()
    x = graph.placeholder("x")
    operand = graph.placeholder("y") if other == "tensor" else other
    node = graph.create_node(kind, target, (x, operand))
    graph.output(node)
    return node


@pytest.mark.parametrize(("kind", "target"), DERIVED, ids=str)
def test_each_spelling_with_a_scalar_operand_has_derived_qparams(kind: str, target: Any) -> None:
    assert _has_scalar_operand(_node(kind, target, 0.5))
    assert _has_scalar_operand(_node(kind, target, 2))  # an int scalar too
    assert not _has_scalar_operand(_node(kind, target, "tensor"))  # two tensors: observed


@pytest.mark.parametrize(("kind", "target"), OBSERVED, ids=str)
def test_other_ops_with_a_scalar_keep_their_observers_qparams(kind: str, target: Any) -> None:
    assert not _has_scalar_operand(_node(kind, target, 0.5))


@pytest.mark.parametrize(
    ("kind", "target"),
    [("call_function", torch.relu), ("call_function", torch.nn.functional.relu),
     ("call_method", "relu"), ("call_method", "relu_")],
    ids=str,
)  # fmt: skip
def test_each_relu_spelling_is_seen_through_to_the_op_before_it(kind: str, target: Any) -> None:
    """A relu after a scalar op fuses into it: the walk back from a layer's input observer
    passes every spelling of relu (and nothing else) to find the scalar op."""
    relu = _node(kind, target, None)
    relu.args = relu.args[:1]
    gm = torch.fx.GraphModule(torch.nn.Module(), relu.graph)
    assert _is_relu(gm, relu)
    assert not _is_relu(gm, _node("call_function", torch.sigmoid, None))
    assert not _is_relu(gm, _node("call_method", "clamp", None))
