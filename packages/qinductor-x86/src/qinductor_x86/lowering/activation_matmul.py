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

The left operand may have any zero point ``z`` (the row gives a softmax's probabilities
uint8 codes with zero point 0: all 8 bits for values in [0, 1]): flipped to int8 its codes
lack ``128 - z`` each, so the product gains ``128 - z`` times the right operand's column
sums, one small reduction added into whatever reads the product. The right operand must be
symmetric: another zero point there (torchao's ``matmul`` annotation) would need
corrections of every row, which cost more than the float matmul they replace
(``benchmarks/README.md``). A batch of symbolic size cannot be unrolled. Both stay in
float, and the report says why.

Dynamic quantization computes the qparams at run time: the scales then multiply in the
graph, the left zero point is a tensor, and the right operand is symmetric where its zero
point is torch's symmetric int8 ``choose_qparams``' (always 0; 128 once re-based).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import cast

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
#: (a left zero point z: its codes flipped to int8 lack 128 - z each)
CORRECTED = f"{LOWERED}, plus 128 - z times the right operand's column sums"
ASYMMETRIC = (
    "its right operand is not symmetric int8 (zero point 0): only the matmul_int8 row's "
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
    """Rewrite every float matmul of two dequantized int8 activations whose right operand
    is symmetric (:func:`_symmetric`); how many int8 matmul calls that made (one per
    matrix of a batch)."""
    calls = 0
    for matmul in [n for n in ctx.graph.nodes if n.target in MATMULS]:
        left, right = (_dequantized(ctx, operand) for operand in matmul.args[:2])
        if left is None or right is None:
            continue
        if not _symmetric(right[0]):
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
            offset = 0 if _symmetric(left[0]) else _offset(ctx, left[0].args[2])
            name = LOWERED
            if offset != 0:  # a = a8 + offset: the product gains offset x b's column sums
                wide = ctx.call(ops.CONVERT, (b, torch.int32))
                sums = ctx.call(ops.aten.sum.dim_IntList, (wide, [-2], True))
                correction = ctx.call(ops.aten.mul.Tensor, (sums, offset))
                product, name = ctx.call(ops.aten.add.Tensor, (product, correction)), CORRECTED
            as_float = ctx.call(ops.CONVERT, (product, torch.float32))
            scaled = ctx.call(ops.aten.mul.Tensor, (as_float, _scale(ctx, left[0].args[1], right[0].args[1])))
        matmul.replace_all_uses_with(scaled)
        ctx.graph.erase_node(matmul)
        ctx.record(name)
        calls += math.prod(shape[:-2])
    return calls


def _dequantized(ctx: CompileContext, operand: object) -> Operand | None:
    """The per-tensor dequantize of activation codes that ``operand`` reads through
    value-moving ops, and those ops; None where it reads anything else (a weight, a float
    value)."""
    chain: list[Node] = []
    node = operand
    while isinstance(node, Node) and node.target in BETWEEN:
        chain.append(node)
        node = node.args[0]
    if not (
        isinstance(node, Node)
        and node.target in ops.DEQUANTIZE
        and isinstance(node.args[0], Node)
        and ctx.constant(node.args[0]) is None
    ):
        return None
    return node, chain


def _symmetric(dequantize: Node) -> bool:
    """Whether the codes :func:`_replay` gives are the values' codes (nothing to correct):
    uint8 codes with zero point 128 (``signed`` re-based every int8 activation before),
    given, or at run time 128 plus the zero point of torch's symmetric int8
    ``choose_qparams``, which is always 0."""
    zero_point = dequantize.args[2]
    if not isinstance(zero_point, Node):
        return bool(zero_point == FLIP)
    chosen = zero_point.args[0]
    return bool(
        zero_point.target is ops.aten.add.Tensor
        and zero_point.args[1] == FLIP
        and isinstance(chosen, Node)
        and chosen.target is operator.getitem
        and chosen.args[1] == 1
        and isinstance(chosen.args[0], Node)
        and chosen.args[0].target is ops.CHOOSE_SYMMETRIC
        and chosen.args[0].args[4] is torch.int8
    )


def _offset(ctx: CompileContext, zero_point: object) -> int | Node:
    """What the int8 codes :func:`_replay` gives lack of the values' codes, ``128 - z``
    for zero point ``z``: in the graph where ``z`` is computed at run time."""
    if isinstance(zero_point, Node):
        return ctx.call(ops.aten.add.Tensor, (ctx.call(ops.aten.neg.default, (zero_point,)), FLIP))
    return FLIP - cast(int, zero_point)


def _scale(ctx: CompileContext, left: object, right: object) -> float | Node:
    """The product's scale, ``sa * sb`` rounded once to fp32: in the graph where the
    scales are run-time tensors (float64, as dynamic quantization computes them)."""
    if isinstance(left, Node):  # (one config quantizes both operands: both or neither)
        return ctx.call(ops.CONVERT, (ctx.call(ops.aten.mul.Tensor, (left, right)), torch.float32))
    return float(left) * float(right)  # type: ignore[arg-type]


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
