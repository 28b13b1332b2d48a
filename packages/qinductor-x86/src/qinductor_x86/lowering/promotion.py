"""Dequant promotion: a dequantize read by several ops is copied, one per reader.

A fusion rewrites ``dequantize -> op -> quantize`` into one kernel and removes the
dequantize; a shared dequantize would block every reader's fusion. The copies are cheap
(they are fused into their readers) and the values identical. What is copied is the
dequantize with its optional ``to(bfloat16)`` and reshape (the chain a linear reads), from
the deepest shared node up, as torch's pass does.
"""

from __future__ import annotations

from torch.fx import Node

from qinductor_x86.lowering import ops
from qinductor_x86.lowering.context import CompileContext
from qinductor_x86.lowering.counters import Family

#: What may follow a dequantize in the chain that gets copied, in order.
CHAIN = ((ops.CONVERT,), (ops.aten.reshape.default,))


def promote(ctx: CompileContext) -> None:
    changed = True
    while changed:  # a copy can expose a shared node further up the chain
        changed = False
        for dq in [n for n in ctx.graph.nodes if n.target in ops.DEQUANTIZE]:
            chain = _chain(dq)
            shared = chain[-1]
            if len(shared.users) > 1:
                for user in list(shared.users)[1:]:
                    _copy_for(ctx, chain, user)
                ctx.record("dequantize copied per reader", Family.DEQUANT_PROMOTION, len(chain))
                changed = True


def _chain(dq: Node) -> list[Node]:
    """``dq`` and what follows it while each link has a single reader."""
    chain = [dq]
    for allowed in CHAIN:
        last = chain[-1]
        if len(last.users) != 1:
            break
        (user,) = last.users
        if user.target in allowed:
            chain.append(user)
    return chain


def _copy_for(ctx: CompileContext, chain: list[Node], user: Node) -> None:
    previous = chain[0].args[0]
    with ctx.graph.inserting_before(user):
        for node in chain:
            copy = ctx.graph.call_function(node.target, (previous, *node.args[1:]), dict(node.kwargs))  # type: ignore[arg-type]
            copy.meta = dict(node.meta)
            previous = copy
    user.replace_input_with(chain[-1], previous)  # type: ignore[arg-type]
