"""Linear layers reordered so that int8 kernels without VNNI compute them exactly.

Such a kernel adds the products of input channels ``2j`` and ``2j + 1`` in a saturating
16-bit lane; full-range weights overflow it where two large same-sign weights meet. A
linear layer fed by another linear (through element-wise ops only) can take its input
channels in any order: the producer's output channels (its weight's rows and its bias)
move with them, and the graph computes the same function in float, up to the order of
fp32 sums. Where ``qcore.int8.pairing`` finds an order in which no pair can overflow,
the layer then runs at single depth with its full-range weights instead of a doubled
reduction or narrowed ones.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import GraphModule, Node

from qcore.int8.pairing import safe_order
from qcore.int8.saturation import INT16_MAX, codes_near_ties_up, worst_case_pair_sum
from qcore.pt2e.annotation.claims import is_op
from qcore.pt2e.annotation.ops import LINEAR
from qcore.pt2e.annotation.transforms import attribute, register_like

__all__ = ["ELEMENTWISE", "REORDERED", "order_inputs_for_int16_pairs"]

aten = torch.ops.aten

#: Ops that act on each value alone: a channel order passes through them unchanged.
ELEMENTWISE = frozenset(
    {
        aten.relu.default, aten.relu_.default, aten.gelu.default, aten.silu.default,
        aten.sigmoid.default, aten.tanh.default, aten.hardtanh.default, aten.hardtanh_.default,
        aten.relu6.default, aten.hardswish.default, aten.leaky_relu.default, aten.elu.default,
        aten.dropout.default, aten.clone.default,
    }
)  # fmt: skip
#: ``meta`` key on a reordered linear: the order its input channels took.
REORDERED = "qcore: input channels reordered for int16 pairs"


def order_inputs_for_int16_pairs(
    gm: GraphModule, act_max: int = 255, half_range: float = 127.5
) -> GraphModule:
    """Reorder the input channels of every linear whose full-range int8 weights
    (``half_range``, torch's per-channel observer's codes, weights near a rounding tie
    taken away from zero) can overflow an int16 pair on inputs up to ``act_max``, where a
    safe order exists and a linear producer can take it. New weight tensors are
    registered on ``gm``; the model they came from is left alone."""
    for consumer in [n for n in gm.graph.nodes if is_op(n, LINEAR)]:
        producer = _producer(gm, consumer)
        weight = _own_constant(gm, consumer.args[1])
        if producer is None or weight is None:
            continue
        codes = codes_near_ties_up(weight.detach().double(), half_range)
        if worst_case_pair_sum(codes, act_max) <= INT16_MAX:
            continue
        order = safe_order(codes, act_max)
        if order is None:
            continue
        _replace(gm, consumer.args[1], weight.index_select(1, order))
        for tensor in producer.args[1:]:
            if isinstance(tensor, Node):
                _replace(gm, tensor, _own_constant(gm, tensor).index_select(0, order))  # type: ignore[union-attr]
        consumer.meta[REORDERED] = order.tolist()
    gm.recompile()
    return gm


def _producer(gm: GraphModule, consumer: Node) -> Node | None:
    """The linear whose output alone ``consumer`` reads, through element-wise ops each
    read only by the next, with constant weights (and bias) of its own; else None."""
    node = consumer.args[0]
    while isinstance(node, Node) and len(node.users) == 1 and is_op(node, ELEMENTWISE):
        node = node.args[0]
    if not (isinstance(node, Node) and len(node.users) == 1 and is_op(node, LINEAR)):
        return None
    constants = [a for a in node.args[1:] if a is not None]
    return node if all(_own_constant(gm, a) is not None for a in constants) else None


def _own_constant(gm: GraphModule, node: Any) -> torch.Tensor | None:
    """The tensor a ``get_attr`` node that nothing else reads holds; else None (a tied
    weight would reorder its other reader too)."""
    if not (isinstance(node, Node) and node.op == "get_attr" and len(node.users) == 1):
        return None
    value = attribute(gm, str(node.target))
    return value if isinstance(value, torch.Tensor) else None


def _replace(gm: GraphModule, node: Node, value: torch.Tensor) -> None:
    """Point ``node`` at a new attribute of ``gm`` holding ``value``."""
    # (a new name each time: the target it derives from is a reordered one the second time)
    name = str(node.target).replace(".", "_") + "_reordered"
    register_like(gm, name, value.detach().clone(), attribute(gm, str(node.target)))
    node.target = name
