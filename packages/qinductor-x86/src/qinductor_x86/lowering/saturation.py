"""The policy for int8 ops that can saturate oneDNN's kernels on the target CPU.

Without VNNI, oneDNN multiplies uint8 activations by int8 weights with ``vpmaddubsw``: the
products of neighbouring input channels ``2j`` and ``2j + 1`` (of a group, at one kernel
tap) are added in a saturating 16-bit lane (see ``qcore.int8.saturation``). Whether an op can
overflow at all follows from its integer weights and the range of its activation codes,
both known when the graph is frozen, so the decision is made per op, exactly:

* an op that cannot overflow (most ops of small models, and every op on a VNNI or AMX
  target) is lowered as usual;
* an op that can overflow is lowered **exactly** as one kernel with its reduction doubled:
  every input channel ``k`` becomes the pair ``(2k, 2k + 1)``, the weight keeps ``w[k]`` at
  ``2k`` and holds 0 at ``2k + 1``, and the activation codes are fed twice
  (``repeat_interleave(2)`` on the uint8 codes, before the kernel). Each 16-bit lane then
  holds a single product, ``|a * w| <= 255 * 128 = 32640``, which never saturates; the
  zero weights add nothing, so the activation's scale and zero point are unchanged, and
  the weight's per-output-channel scales too. The cost is twice the multiply-adds of that
  op and one uint8 copy of its input, never a second kernel or a wrong number, and
  ``report()`` lists the op.

The earlier route, two kernels on half weights whose float outputs were added, doubled the
kernel count and broke post-op fusion of the add that follows (its sum stayed float32).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from torch.fx import Node

from qcore.int8.cpu_profile import Int8Host
from qcore.int8.saturation import INT16_MAX, worst_case_pair_sum
from qinductor_x86.lowering import ops
from qinductor_x86.lowering.context import CompileContext, val

#: The codes' ``meta`` key for their copies made twice over (by dimension), so that every
#: doubled kernel reading one tensor shares one copy.
DOUBLED_CODES = "qinductor_x86: activation codes doubled"


@dataclass(frozen=True)
class Verdict:
    """``double``: lower with the reduction doubled. ``worst``: the largest pair sum the op
    can reach with its weights as they are."""

    double: bool
    worst: int


def judge(weight: torch.Tensor, activation_qmax: int, target: Int8Host) -> Verdict:
    """Whether this op must take the doubled route on ``target``.

    ``weight``: the int8 codes, ``(out, in / groups, *kernel)`` (pairs never cross a group);
    ``activation_qmax``: the largest uint8 code its input can hold (its ``quant_max``).
    """
    worst = worst_case_pair_sum(weight, act_max=activation_qmax)
    return Verdict(double=target.saturates_u8s8 and worst > INT16_MAX, worst=worst)


def doubled_weight(weight: torch.Tensor) -> torch.Tensor:
    """``(out, 2 * in, *kernel)``: ``weight`` at the even input channels, 0 at the odd ones.

    Dimension 1 is the input channel of a group for a conv and the reduction of a linear,
    so group ``g`` of the result reads channels ``[2 g in, 2 (g + 1) in)``: exactly group
    ``g`` of the activation after :func:`doubled_codes`.
    """
    out = torch.zeros((weight.shape[0], 2 * weight.shape[1], *weight.shape[2:]), dtype=weight.dtype)
    out[:, ::2] = weight
    return out


def _size(ctx: CompileContext, node: Node, dim: int) -> int | Node:
    """``node``'s size along ``dim``: the number, or a ``sym_size`` node where it is symbolic."""
    size = val(node).shape[dim]
    return size if isinstance(size, int) else ctx.call(ops.aten.sym_size.int, (node, dim))


def doubled_codes(ctx: CompileContext, codes: Node, dim: int) -> Node:
    """``codes.repeat_interleave(2, dim)`` in the graph, on the uint8 codes, shared by every
    doubled kernel that reads ``codes``.

    Written as ``dim`` moved last, ``unsqueeze -> expand`` to pairs, one contiguous
    ``clone``, a ``view`` joining the pairs and ``dim`` moved back: Inductor makes the clone a
    plain loop over (..., n, 2) and the rest views of its buffer, which every reader
    reads (a view chain without the clone would be materialized once per external kernel
    that reads it). The earlier ``codes[..., iota(2 n) // 2]`` (``aten.index``) became a
    scalar loop with an integer division per code: 190 us for 64 x 2048 codes on an AVX2
    target, against 56 us for the clone, which made a doubled classifier cost several
    per cent of an MLP's time. The view takes the batch as ``-1`` and any other symbolic
    size (a conv's spatial sizes under ``dynamic=True``) from ``sym_size`` in the graph.
    """
    rank = len(val(codes).shape)
    dim %= rank
    made: dict[int, Node] = codes.meta.setdefault(DOUBLED_CODES, {})
    if dim in made and made[dim].graph is ctx.graph and made[dim] in ctx.graph.nodes:
        return made[dim]
    # the doubled dimension last, each code next to its copy, then back where it was
    order = [d for d in range(rank) if d != dim] + [dim]
    back = sorted(range(rank), key=order.__getitem__)
    # before the first reader of ``codes``, so that it precedes every reader it may serve
    # (codes nothing reads yet, just made: where the caller is inserting)
    first_reader = next((node for node in ctx.graph.nodes if node in codes.users), None)
    with ctx.graph.inserting_before(first_reader) if first_reader else contextlib.nullcontext():
        moved = codes if dim == rank - 1 else ctx.call(ops.aten.permute.default, (codes, order))
        column = ctx.call(ops.aten.unsqueeze.default, (moved, -1))
        pairs = ctx.call(ops.aten.expand.default, (column, [-1] * rank + [2]))
        copied = ctx.call(ops.aten.clone.default, (pairs,), {"memory_format": torch.contiguous_format})
        # (a view Inductor lowers: ``flatten`` would be an external call of its own; a
        # symbolic size is read in the graph, where ``int`` would specialize the compile)
        sizes = [_size(ctx, moved, d) for d in range(1, rank - 1)]
        doubled_size = 2 * int(val(moved).shape[-1])  # (channels: a weight's, never symbolic)
        doubled = ctx.call(ops.aten.view.default, (copied, [-1, *sizes, doubled_size]))
        if dim != rank - 1:
            doubled = ctx.call(ops.aten.permute.default, (doubled, back))
    made[dim] = doubled
    return doubled
