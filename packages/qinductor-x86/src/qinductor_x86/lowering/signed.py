"""Signed int8 activations to uint8: oneDNN's int8 conv and matmul need unsigned inputs.

A quantizer for another backend (XNNPACK) quantizes activations to int8. For every code,
``clamp(round(v / s) + z + 128, qmin + 128, qmax + 128) == q_int8 + 128``, and a dequantize
with zero point ``z + 128`` gives back the same value: moving a quantize and its
dequantizes to uint8 with the zero point shifted by 128 changes no number. Weights (int8,
as oneDNN wants them) are left alone.

The codes of one quantize can reach their dequantizes through ops that only move or select
values (in attention: ``quantize -> view -> permute -> dequantize``, made by XNNPACK's
shared-qparams views and by quant lift-up); adding 128 commutes with those ops, so they are
followed and only their dtype changes. Any other reader of the codes (the graph output, an
op on codes) gets the int8 codes it read before, converted back exactly. An int8
dequantize whose codes do not come from a quantize in this graph (a graph input) reads
them converted to uint8. So no int8 activation is left for any later pass, this
lowering's or torch's: a mixed graph is what made Inductor assert on dtypes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import torch
from torch.fx import Node

from qinductor_x86 import _torch_private as private
from qinductor_x86.lowering import ops
from qinductor_x86.lowering.context import CompileContext

SHIFT = 128
REBASED = "int8 activation re-based to uint8 (zero point + 128)"

_a = ops.aten


@dataclass
class _Readers:
    """Where one quantize's codes go: ``moves`` (in graph order) pass them on, ``dequantizes``
    read them as int8 codes, and each ``(reader, source)`` in ``others`` reads ``source``."""

    moves: list[Node] = field(default_factory=list)
    dequantizes: list[Node] = field(default_factory=list)
    others: list[tuple[Node, Node]] = field(default_factory=list)


def to_unsigned(ctx: CompileContext) -> None:
    for quant in [n for n in ctx.graph.nodes if n.target in ops.QUANTIZE]:
        if quant.args[5] is not torch.int8 or _weight_codes(ctx, quant):
            continue  # already unsigned, or a weight
        readers = _readers(quant)
        for node in (quant, *readers.dequantizes):
            _shift(ctx, node)
        for node in readers.moves:  # same values + 128: only the dtype changes
            node.meta["val"] = private.fake_value(cast(Any, node.target), node.args, node.kwargs)
        for reader, source in readers.others:
            _to_int8_for(ctx, reader, source)
        ctx.record(REBASED)
    for dq in [n for n in ctx.graph.nodes if _int8_activation_dequantize(ctx, n)]:
        with ctx.graph.inserting_before(dq):
            dq.replace_input_with(dq.args[0], _plus(ctx, dq.args[0], SHIFT, torch.uint8))
        _shift(ctx, dq)
        ctx.record(REBASED)


def _readers(quant: Node) -> _Readers:
    found = _Readers()
    stack = [quant]
    while stack:
        source = stack.pop()
        for user in source.users:
            # (the dequantize of an int8 quantize's codes is int8's: a PT2E pair shares its dtype)
            if user.target in ops.DEQUANTIZE and user.args[0] is source:
                found.dequantizes.append(user)
            elif user.target in ops.MOVES and user.args[0] is source:  # (one source: met once)
                found.moves.append(user)
                stack.append(user)
            else:
                found.others.append((user, source))
    order = {node: i for i, node in enumerate(quant.graph.nodes)}
    found.moves.sort(key=order.__getitem__)
    return found


def _int8_activation_dequantize(ctx: CompileContext, node: Node) -> bool:
    return (
        node.target in ops.DEQUANTIZE
        and node.args[5] is torch.int8
        and isinstance(node.args[0], Node)
        and not _weight_codes(ctx, node.args[0])
    )


def _weight_codes(ctx: CompileContext, codes: Node) -> bool:
    """Codes known at compile time: a weight's, stored as int8 or quantized in the graph
    (``convert_pt2e(fold_quantize=False)``): neither its quantize nor its dequantize is an
    activation's, so :func:`to_unsigned` re-bases neither."""
    source = codes.args[0] if codes.target in ops.QUANTIZE else codes
    return isinstance(source, Node) and ctx.constant(source) is not None


def _to_int8_for(ctx: CompileContext, reader: Node, source: Node) -> None:
    """``reader`` reads the int8 codes it read before: ``source`` (now uint8) minus 128."""
    with ctx.graph.inserting_before(reader):
        reader.replace_input_with(source, _plus(ctx, source, -SHIFT, torch.int8))


def _plus(ctx: CompileContext, codes: Any, shift: int, dtype: torch.dtype) -> Node:
    """``codes + shift`` as ``dtype``, computed in int16 (exact for every int8/uint8 code)."""
    wide = ctx.call(ops.CONVERT, (codes, torch.int16))
    return ctx.call(ops.CONVERT, (ctx.call(_a.add.Tensor, (wide, shift)), dtype))


def _shift(ctx: CompileContext, node: Node) -> None:
    x, scale, zero_point, qmin, qmax, _ = cast(tuple[Any, ...], node.args)
    shifted: Any
    if isinstance(zero_point, Node):  # run-time qparams: shift in the graph
        with ctx.graph.inserting_before(node):
            shifted = ctx.call(ops.aten.add.Tensor, (zero_point, SHIFT))
    else:
        shifted = int(zero_point) + SHIFT
    node.args = (x, scale, shifted, int(qmin) + SHIFT, int(qmax) + SHIFT, torch.uint8)
    node.meta["val"] = private.fake_value(cast(Any, node.target), node.args, node.kwargs)

