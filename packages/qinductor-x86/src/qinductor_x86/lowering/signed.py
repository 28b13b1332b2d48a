"""Signed int8 activations to uint8: oneDNN's int8 conv and matmul need unsigned inputs.

A quantizer for another backend (XNNPACK) quantizes activations to int8. For every code,
``clamp(round(v / s) + z + 128, qmin + 128, qmax + 128) == q_int8 + 128``, and the dequantize
with zero point ``z + 128`` gives back the same value: moving a quantize and its
dequantizes to uint8 with the zero point shifted by 128 changes no number. Weights (int8,
as oneDNN wants them) are left alone.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch.fx import Node

from qinductor_x86 import _torch_private as private
from qinductor_x86.lowering import ops
from qinductor_x86.lowering.context import CompileContext

SHIFT = 128


def to_unsigned(ctx: CompileContext) -> None:
    for quant in [n for n in ctx.graph.nodes if n.target in ops.QUANTIZE]:
        if quant.args[5] is not torch.int8 or ctx.constant(quant.args[0]) is not None:
            continue  # already unsigned, or a weight
        users = list(quant.users)
        if not users or any(u.target not in ops.DEQUANTIZE or u.args[1:] != quant.args[1:] for u in users):
            ctx.decline(quant, "its int8 codes are read by something other than a dequantize")
            continue
        for node in (quant, *users):
            _shift(ctx, node)
        ctx.record("int8 activation re-based to uint8 (zero point + 128)")


def _shift(ctx: CompileContext, node: Node) -> None:
    x, scale, zero_point, qmin, qmax, _ = node.args
    shifted: Any
    if isinstance(zero_point, Node):  # run-time qparams: shift in the graph
        with ctx.graph.inserting_before(node):
            shifted = ctx.call(ops.aten.add.Tensor, (zero_point, SHIFT))
    else:
        shifted = _int(zero_point) + SHIFT
    node.args = (x, scale, shifted, _int(qmin) + SHIFT, _int(qmax) + SHIFT, torch.uint8)
    node.meta["val"] = private.fake_value(cast(Any, node.target), node.args, node.kwargs)


def _int(value: Any) -> int:
    return int(value)
