"""Matmuls of two int8 activations (attention's ``q @ k^T`` and ``p @ v``) as oneDNN int8
matmuls.

The x86 quantizer's opt-in ``matmul_int8`` row quantizes both operands of a matmul to
symmetric int8 codes (zero point 0; 128 once ``signed`` re-based them to uint8 for oneDNN).
Inductor's graph then holds ``bmm(dequantize(a), dequantize(b))``, each operand through
views, a broadcast and a copy. This pass replays
those ops on the int8 codes and computes the product with torch's ``_int_mm``, one call per
matrix of the batch (Inductor writes each into its slice of one buffer), then multiplies by
``sa * sb`` in float, which Inductor fuses into whatever reads it (the softmax, the next
quantize). Only torch's own ops: an AOTInductor package of the graph runs with torch alone.

Against the eager converted model: eager sums the fp32 products of the dequantized values,
this the integer products exactly, then scales once. The two differ by fp32 rounding
(relative ~1e-7 of each sum), so a code computed from it can differ by one where eager's
value lies that close to a rounding boundary, and nowhere else.

Only on a target with VNNI (or AMX). Without it, oneDNN's int8 matmul sums the products of
neighbouring reduction indices in saturating 16-bit lanes (``saturation``), which two
activations can overflow (``2 * 255 * 127 > 32767``); splitting one operand into nibbles
keeps it exact, but oneDNN's AVX2 int8 matmuls then ran the BERT-style layer 1.27 x
slower than float attention (``benchmarks/README.md``): there the matmuls stay in float,
and the report says why.

The left operand may also be uint8 codes with zero point 0 (the row's spec for a softmax's
probabilities: all 8 bits for values in [0, 1]): flipped to int8 they lack 128 each, so the
product gains 128 times the right operand's column sums, one small reduction added into
whatever reads the product. Other zero points (torchao's ``matmul`` annotation) would need
corrections of every row and column, which cost more than the float matmul they replace
(``benchmarks/README.md``), and a batch of symbolic size cannot be unrolled: both stay in
float, and the report says why.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch.fx import Node

from qinductor_x86.lowering import ops
from qinductor_x86.lowering.context import CompileContext, val

#: The float matmuls of two tensors in Inductor's graph (a 3-D or 4-D matmul is a bmm).
MATMULS = frozenset({ops.aten.bmm.default, ops.aten.mm.default})
#: What sits between a dequantize and the matmul that reads it: value-moving ops only.
BETWEEN = frozenset(op for op in ops.TO_COMPUTE if op is not ops.CONVERT)
INT_MM = ops.aten._int_mm.default
#: uint8 codes with zero point 128 are int8 codes with their top bit flipped.
FLIP = 128

LOWERED = "matmul of two int8 activations"
ASYMMETRIC = (
    "its operands are not symmetric int8 (zero point 0): only the matmul_int8 row's "
    "annotation runs as an int8 matmul"
)
SYMBOLIC_BATCH = "its batch size is symbolic (one int8 matmul per matrix needs a fixed count)"
SATURATING = (
    "this target (no VNNI) sums int8 products in saturating 16-bit lanes: exact int8 "
    "matmuls of two activations run slower than float ones there"
)

#: An operand's dequantize and the ops between it and the matmul, nearest the matmul first.
Operand = tuple[Node, list[Node]]


def lower(ctx: CompileContext) -> int:
    """Rewrite every float matmul of two dequantized int8 activations :func:`_offset`
    takes; how many int8 matmul calls that made (one per matrix of a batch)."""
    lowered = calls = 0
    for matmul in [n for n in ctx.graph.nodes if n.target in MATMULS]:
        left, right = (_dequantized(ctx, operand) for operand in matmul.args[:2])
        if left is None or right is None:
            continue
        offset, right_offset = _offset(left[0], left=True), _offset(right[0], left=False)
        if offset is None or right_offset is None:
            ctx.decline(matmul, ASYMMETRIC)
            continue
        shape = val(matmul).shape
        if not all(isinstance(size, int) for size in shape):
            ctx.decline(matmul, SYMBOLIC_BATCH)
            continue
        if ctx.target.saturates_u8s8:
            ctx.decline(matmul, SATURATING)
            continue
        with ctx.graph.inserting_before(matmul):
            b = _replay(ctx, *right)
            product = _int8_product(ctx, _replay(ctx, *left), b)
            if offset:  # a = a8 + offset: the product gains offset x b's column sums
                wide = ctx.call(ops.CONVERT, (b, torch.int32))
                sums = ctx.call(ops.aten.sum.dim_IntList, (wide, [-2], True))
                correction = ctx.call(ops.aten.mul.Tensor, (sums, offset))
                product = ctx.call(ops.aten.add.Tensor, (product, correction))
            as_float = ctx.call(ops.CONVERT, (product, torch.float32))
            scale = float(left[0].args[1]) * float(right[0].args[1])  # type: ignore[arg-type]
            scaled = ctx.call(ops.aten.mul.Tensor, (as_float, scale))
        matmul.replace_all_uses_with(scaled)
        ctx.graph.erase_node(matmul)
        ctx.record(LOWERED)
        lowered += 1
        calls += math.prod(shape[:-2])
    return calls


def _dequantized(ctx: CompileContext, operand: object) -> Operand | None:
    """The per-tensor dequantize of activation codes that ``operand`` reads through
    value-moving ops, and those ops; None where it reads anything else (a weight, a float
    value, run-time qparams)."""
    chain: list[Node] = []
    node = operand
    while isinstance(node, Node) and node.target in BETWEEN:
        chain.append(node)
        node = node.args[0]
    if not (
        isinstance(node, Node)
        and node.target == ops.DEQUANTIZE[0]
        and len(node.all_input_nodes) == 1
        and ctx.constant(node.args[0]) is None
    ):
        return None
    return node, chain


def _offset(dequantize: Node, *, left: bool) -> int | None:
    """What the int8 codes :func:`_replay` gives lack of the values' codes (uint8 here:
    ``signed`` re-based every int8 activation before): 0 for symmetric int8 codes (zero
    point 128 once re-based), 128 for zero point 0 on the left (a softmax's
    probabilities); None for any other zero point, whose corrections would reach every
    row."""
    zero_point = dequantize.args[2]
    if not isinstance(zero_point, int):  # (run-time qparams)
        return None
    if zero_point == FLIP:
        return 0
    return FLIP if left and zero_point == 0 else None


def _replay(ctx: CompileContext, dequantize: Node, chain: Sequence[Node]) -> Node:
    """The int8 codes ``dequantize`` reads, through the ops of ``chain`` in graph order."""
    node = dequantize.args[0]
    assert isinstance(node, Node)
    # u - 128 as int8 is u with its top bit flipped (whatever the zero point): one
    # vectorized op Inductor fuses into the codes' producer (an int16 subtraction made
    # that loop scalar)
    flipped = ctx.call(ops.aten.bitwise_xor.Scalar, (node, FLIP))
    node = ctx.call(ops.aten.view.dtype, (flipped, torch.int8))
    for op in reversed(chain):
        node = ctx.call(op.target, (node, *op.args[1:]), dict(op.kwargs))
    return node


def _int8_product(ctx: CompileContext, a: Node, b: Node) -> Node:
    """``a @ b`` in int32, exact: ``(M, K) @ (K, N)`` or batched ``(B, M, K) @ (B, K, N)``."""
    if val(a).dim() == 2:
        return ctx.call(INT_MM, (a, b))
    # (stack as Inductor's decomposition spells it, which it lowers without copies)
    matrices = [
        ctx.call(ops.aten.unsqueeze.default, (ctx.call(INT_MM, (_matrix(ctx, a, i), _matrix(ctx, b, i))), 0))
        for i in range(val(a).shape[0])
    ]
    return ctx.call(ops.aten.cat.default, (matrices,))


def _matrix(ctx: CompileContext, batch: Node, index: int) -> Node:
    return ctx.call(ops.aten.select.int, (batch, 0, index))
