"""Quant lift-up: a quantize after a chain of views moves above the chain.

In attention blocks a linear's output is reshaped and permuted before it is quantized for
the matmul: ``linear -> view -> permute -> quantize``. Views only move values, so quantizing
first is exact, and it leaves ``dequantize -> linear -> quantize``, which fuses into one
int8 kernel with a uint8 output (and the views then move 4x fewer bytes). Runs before
autograd tracing, where torch runs its own copy (which then finds nothing left to lift).
"""

from __future__ import annotations

from torch.fx import Graph, Node

from qinductor_x86.lowering import counters, ops

#: The views torch's pass lifts over (a per-tensor quantize commutes with each): all but
#: ``_unsafe_view``, which torch's pass leaves alone. Lifting exactly where torch's does
#: keeps its counters and its later patterns seeing the same graph.
LIFTABLE = ops.VIEWS - {ops.aten._unsafe_view.default}


def lift_quantizes(graph: Graph) -> int:
    lifted = 0
    for quant in [n for n in graph.nodes if n.target in ops.QUANTIZE]:
        if len(quant.all_input_nodes) != 1 or not _is_view(quant.args[0]):
            continue  # run-time qparams, or nothing to lift over
        first_view = quant.args[0]
        assert isinstance(first_view, Node)
        while _is_view(first_view.args[0]) and len(first_view.users) == 1:
            first_view = first_view.args[0]
        source = first_view.args[0]
        if len(first_view.users) != 1 or not isinstance(source, Node) or len(source.users) != 1:
            continue  # someone else reads the float values on the way
        with graph.inserting_before(first_view):
            lifted_quant = graph.call_function(quant.target, (source, *quant.args[1:]), dict(quant.kwargs))
        lifted_quant.meta = dict(quant.meta)
        first_view.replace_input_with(source, lifted_quant)
        quant.replace_all_uses_with(quant.args[0])
        graph.erase_node(quant)
        counters.lifted_up()
        lifted += 1
    return lifted


def _is_view(node: object) -> bool:
    return isinstance(node, Node) and node.op == "call_function" and node.target in LIFTABLE
