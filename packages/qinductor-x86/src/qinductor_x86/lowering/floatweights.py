"""A conv or linear this lowering leaves in float gets its weight dequantized at compile time.

After the pattern families ran, a ``dequantize(frozen int8 weight)`` still read by a conv or
matmul is one no family lowered (a transposed or 3-D convolution, a weight per tensor or on
another axis). Left as it is, it is exactly what torch's and torchao's copies of the x86
passes (in freezing, after this lowering) match, and they match too much: torch 2.13's
``qconv_weight_prepack`` ignores ``transposed`` and packs a transposed convolution as a plain
one (silently wrong when the shapes happen to agree, a oneDNN error otherwise). The
dequantized weight is computed here, once, with the same op the eager converted model runs,
and becomes a float constant: the op runs in float, exactly as in eager, nothing is left
for another pass to mis-lower, and ``report()`` says why it stayed in float.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch.fx import Node

from qinductor_x86.lowering import ops
from qinductor_x86.lowering.context import CompileContext
from qinductor_x86.lowering.kernels import Convolution
from qinductor_x86.lowering.prepack import unsupported_conv

FOLDED = "weight of a conv / linear left in float dequantized at compile time"
WEIGHT_DEQUANTIZE = frozenset({ops.DEQUANTIZE_PER_CHANNEL, *ops.DEQUANTIZE})


def fold(ctx: CompileContext) -> None:
    for dq in [n for n in ctx.graph.nodes if n.target in WEIGHT_DEQUANTIZE]:
        computes = _computes_reading(dq)
        args = [ctx.constant(a) if isinstance(a, Node) else a for a in dq.args]
        if not computes or any(a is None for a in args):
            continue  # not a weight, or not one freezing knows the value of
        for compute in computes:
            if compute not in ctx.declined:
                ctx.decline(compute, _reason(compute))
        value = cast(Any, dq.target)(*args, **dq.kwargs)
        with ctx.graph.inserting_before(dq):
            weight = ctx.constant_node("_qinductor_x86_float_weight", value)
        weight.meta["val"] = dq.meta.get("val")  # same shape and dtype, for later passes
        dq.replace_all_uses_with(weight)
        ctx.graph.erase_node(dq)
        ctx.record(FOLDED)


def _computes_reading(dq: Node) -> list[Node]:
    found, stack = [], list(dq.users)
    while stack:
        node = stack.pop()
        if node.target in ops.COMPUTE:
            found.append(node)
        elif node.target in ops.TO_COMPUTE:
            stack.extend(node.users)
    return found


def _reason(compute: Node) -> str:
    if compute.target is ops.aten.convolution.default:
        conv = Convolution.of(compute)
        value = conv.weight.meta.get("val") if isinstance(conv.weight, Node) else None
        # (a conv's weight has its input's rank)
        rank = value.dim() if isinstance(value, torch.Tensor) else None
        unsupported = unsupported_conv(conv, rank)
        if unsupported is not None:
            return unsupported
    return "its weight's quantization has no oneDNN int8 form here"
