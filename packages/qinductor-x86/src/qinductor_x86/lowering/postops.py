"""Post-op fusion: what follows a prepacked kernel moves into it, up to the output quantize.

The family is the post-op table (:mod:`qinductor_x86.postop_table`: its unary rows, and
its binary row on either side, then none or a unary row that may follow it) x (float32,
bf16 operands) x (int8 output, float output). A row's PyTorch (``F.hardswish``) is traced,
so the pattern is whatever Inductor's decomposition of it is in this torch (SiLU, for
instance, is ``x / (1 + exp(-x))`` here). The kernel itself is the pattern's free input
``x``; the checks below make sure it is a plain prepacked kernel whose only readers are the
fused nodes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import torch
from torch.fx import Node

from qinductor_x86 import _torch_private as private
from qinductor_x86.lowering import ops, tracing
from qinductor_x86.lowering.context import CompileContext, ancestors, current, val
from qinductor_x86.postop_table import ADD, POST_OPS, PostOp

#: Where a kernel's output qparams start in its arguments (prepack's layout), by kind.
OUTPUT_AT = {"conv": 11, "linear": 7}
FLOATS = (torch.float32, torch.bfloat16)
INT8_RANGES = {torch.uint8: (0, 255), torch.int8: (-128, 127)}

#: No post-op: the output quantize alone fuses into the kernel.
NONE = PostOp("none", lambda x: x, "none")
#: The unary post-ops the kernels fuse, from the table (rows lowered through another have
#: no PyTorch of their own).
UNARY = (NONE, *(p for p in POST_OPS if p.fn is not None))


def traceable(post: PostOp) -> Callable[[torch.Tensor], torch.Tensor]:
    """``post`` as a function of ``x`` alone, its scalars the placeholders tracing captures."""
    fn = cast(Callable[..., torch.Tensor], post.fn)
    return lambda x: fn(x, *(tracing.MAGIC[s] for s in post.scalars))


@dataclass(frozen=True)
class Row:
    """One registered pattern: the table's binary post-op with the kernel's output as its
    ``side`` operand ("" for none), then ``unary``, then the output quantize or not.

    ``cast_back``: the sum cast back to the kernel's dtype before the rest, as an in-place
    ``kernel.add_(residual)`` of a bf16 kernel and a float32 residual computes it."""

    unary: PostOp
    side: str
    quantized_output: bool
    cast_back: bool = False

    def region(self, *inputs: torch.Tensor) -> torch.Tensor:
        x, *other = inputs if self.side != "right" else inputs[::-1]
        y = ADD.fn(x, *other) if self.side else x
        return traceable(self.unary)(y.to(inputs[0].dtype) if self.cast_back else y)

    @property
    def label(self) -> str:
        parts = [ADD.name] if self.side else []
        parts += [self.unary.name] if self.unary is not NONE else []
        return " + ".join([*parts, *(["quantize"] if self.quantized_output else [])])


#: Unary rows, then binary ones (followed by nothing or a unary that may follow an add).
ROWS = [
    *(Row(u, "", q) for u in UNARY for q in (True, False) if u is not NONE or q),
    *(
        Row(u, side, q, cast_back)
        for cast_back in (True, False)
        for u in (NONE, *(p for p in UNARY if p.after_add))
        for side in ("left", "right")
        for q in (True, False)
    ),
]
#: (kernel dtype, extra-input dtype) pairs a region is traced for: int8-mixed-bf16 graphs
#: add float32 residuals to bf16 kernels.
OPERAND_DTYPES = (
    (torch.float32, torch.float32),
    (torch.bfloat16, torch.bfloat16),
    (torch.bfloat16, torch.float32),
)


def register(pass_dict: Any) -> None:
    """Trace every row and register it into ``pass_dict`` (duplicates, such as relu on
    float32 and bf16, once)."""
    seen: set[str] = set()
    for row, (dtype, other_dtype) in itertools.product(ROWS, OPERAND_DTYPES):
        mixed = other_dtype != dtype
        if (mixed and not row.side) or (row.cast_back and not mixed):
            continue  # a unary row has no residual; with one dtype nothing is cast back
        dtypes = (dtype, other_dtype) if row.side else (dtype,)
        region = tracing.trace(
            row.region,
            [torch.randn(2, 8, dtype=d) for d in dtypes],
            ["x", "other"][: len(dtypes)],
            scalars=row.unary.scalars,
        )
        pattern = tracing.output_quant(region) if row.quantized_output else region
        if repr(pattern) not in seen:
            seen.add(repr(pattern))
            private.register_graph_pattern(pattern, extra_check=_checker(row), pass_dict=pass_dict)(
                _rewriter(row)
            )


def _checker(row: Row) -> Callable[[Any], bool]:
    def check(match: Any) -> bool:
        ctx = current()
        x = match.kwargs["x"]
        kind = ops.FUSABLE.get(cast(Any, x.target)) if isinstance(x, Node) else None
        if kind is None:
            return False  # not a kernel of ours: nothing to fuse into
        anchor = match.output_node()
        at = OUTPUT_AT[kind]
        if x.args[at + 3] != "none" or x.args[at + 2] not in FLOATS:
            return False  # already carries a post-op or an output quantize
        if kind not in row.unary.kernels:
            return ctx.decline(anchor, f"oneDNN's int8 {kind} has no {row.unary.name} post-op")
        if ctx.others_follow and not row.quantized_output and not row.side:
            # torch's (and torchao's) copy fuses a float-output unary post-op itself, in a
            # pass after its int8-output fusions; a kernel that already carries a post-op
            # trips its assertion when another of its patterns matches what follows. So
            # leave this one to it: the kernel is the same, rewritten once.
            return False
        if any(user not in match.nodes for user in x.users):
            return ctx.decline(anchor, f"{x.name}'s float output is read elsewhere too")
        if row.quantized_output and not _fusable_quantize(ctx, match, anchor):
            return False
        if row.side:
            return _binary_ok(ctx, match, kind, x, anchor)
        return True

    return check


def _fusable_quantize(ctx: CompileContext, match: Any, anchor: Node) -> bool:
    k = match.kwargs
    full = INT8_RANGES.get(k["o_dtype"])
    if full is None or not full[0] <= k["o_qmin"] <= k["o_qmax"] <= full[1]:
        return ctx.decline(anchor, "its output is not int8 or uint8")
    return isinstance(k["o_scale"], float) and isinstance(k["o_zp"], int)


def _binary_ok(ctx: CompileContext, match: Any, kind: str, x: Node, anchor: Node) -> bool:
    other = match.kwargs["other"]
    x_val, other_val = val(x), val(other)
    if other_val is None or other_val.shape != x_val.shape or other is x.args[0]:
        return ctx.decline(anchor, "the added tensor does not have the kernel's output shape")
    if kind == "linear":
        return True
    # oneDNN's int8 conv adds in place into a dequantized accumulator ("sum" post-op)
    if other.target is not ops.DEQUANTIZE[0] or len(other.users) != 1:
        return ctx.decline(anchor, "the conv's residual input is not a dequantized int8 tensor")
    if match.kwargs.get("o_dtype") is None:
        return True  # float output: the sum overwrites the dequantized copy, read only here
    accum = other.args[0]
    if accum is x.args[0]:
        return ctx.decline(anchor, "the residual is the conv's own input (an in-place sum would overwrite it)")
    past = ancestors(x)
    later_readers = [u for u in accum.users if u is not other and u not in past]
    fresh = accum.target in ops.QUANTIZE or accum.target in ops.INT8_KERNELS
    if later_readers or not fresh or val(accum).dtype != match.kwargs["o_dtype"]:
        return ctx.decline(anchor, "the residual's int8 buffer is read again after the add")
    return True


def _rewriter(row: Row) -> Callable[..., None]:
    def rewrite(match: Any, *args: Any, **kwargs: Any) -> None:
        ctx = current()
        x: Node = kwargs["x"]
        kind = ops.FUSABLE[cast(Any, x.target)]
        anchor = match.output_node()
        at = OUTPUT_AT[kind]
        head = x.args[:at]
        out = (
            (kwargs["o_scale"], kwargs["o_zp"], kwargs["o_dtype"])
            if row.quantized_output
            else (1.0, 0, val(anchor).dtype)
        )
        unary = row.unary
        post = (unary.attr, [float(kwargs[s]) for s in unary.scalars], unary.algorithm)
        qrange = (kwargs.get("o_qmin"), kwargs.get("o_qmax"))
        narrow = row.quantized_output and qrange != INT8_RANGES[kwargs["o_dtype"]]
        if narrow and not row.side and unary.attr in _CLAMPS:
            post, narrow = _range_as_hardtanh(unary, post, kwargs), False
        erased_extra: list[Node] = []
        if not row.side:
            target, new_args = x.target, (*head, *out, *post)
        elif kind == "conv":
            target, new_args, erased_extra = _conv_binary(kwargs, head, out, post)
        else:
            target, new_args = _linear_binary(x, kwargs, head, out, post, match.nodes)
        with ctx.graph.inserting_before(anchor):
            fused = ctx.call(target, new_args)
            if narrow:
                fused = _clamp_codes(ctx, fused, kwargs["o_qmin"], kwargs["o_qmax"], kwargs["o_dtype"])
        anchor.replace_all_uses_with(fused)
        match.erase_nodes()
        replaced = [*match.nodes, x, *erased_extra]
        for node in (x, *erased_extra):
            if not node.users:
                ctx.graph.erase_node(node)
        arity = "binary" if row.side else "unary"
        family = f"q{kind}{'2d' if (kind, arity) == ('conv', 'binary') else ''}_{arity}_matcher"
        dtype = "int8" if row.quantized_output else "float"
        ctx.record(f"{kind} + {row.label} ({dtype} output)", family, len(replaced), match)

    return rewrite


#: Unary post-ops that are a clamp, into which a narrower quant range folds.
_CLAMPS = ("none", "relu", "hardtanh")


def _range_as_hardtanh(
    unary: PostOp, post: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, ...]:
    """A quant range narrower than its dtype (7-bit activations), as a float clamp before
    the fused quantize: ``q(clamp(y, (qmin - zp) s, (qmax - zp) s))`` has exactly the codes
    ``clamp(q(y), qmin, qmax)``. relu and hardtanh are clamps too, so they merge into it."""
    scale, zero_point = kwargs["o_scale"], kwargs["o_zp"]
    low, high = (kwargs["o_qmin"] - zero_point) * scale, (kwargs["o_qmax"] - zero_point) * scale
    if unary.attr == "relu":
        low = max(low, 0.0)
    elif unary.attr == "hardtanh":
        low, high = max(low, post[1][0]), min(high, post[1][1])
    return ("hardtanh", [low, high], "")


def _clamp_codes(ctx: CompileContext, codes: Node, qmin: int, qmax: int, dtype: Any) -> Node:
    """oneDNN clamps a fused output's codes to its dtype; a narrower quant range (7-bit
    activations) is one more clamp on the codes, exact since the ranges nest. Upper bound
    first: ``clamp_max(clamp_min(x))`` is what torch's copy takes for a hardtanh post-op."""
    low, high = INT8_RANGES[dtype]
    if qmax < high:
        codes = ctx.call(ops.aten.clamp_max.default, (codes, qmax))
    if qmin > low:
        codes = ctx.call(ops.aten.clamp_min.default, (codes, qmin))
    return codes


def _conv_binary(
    kwargs: dict[str, Any], head: tuple[Any, ...], out: tuple[Any, ...], post: tuple[Any, ...]
) -> tuple[Any, tuple[Any, ...], list[Node]]:
    """``qconv2d_pointwise.binary`` with oneDNN's in-place "sum": into the raw int8
    accumulator when the output is quantized, into the dequantized copy otherwise."""
    dq_other: Node = kwargs["other"]
    if kwargs.get("o_dtype") is not None:
        accum, accum_scale, accum_zp, extra = dq_other.args[0], dq_other.args[1], dq_other.args[2], [dq_other]
    else:
        accum, accum_scale, accum_zp, extra = dq_other, 1.0, 0, []
    new_args = (*head[:6], accum, *head[6:], *out, accum_scale, accum_zp, ADD.in_place, 1.0, *post)
    return ops.QCONV_BINARY, new_args, extra


def _linear_binary(  # noqa: PLR0917
    x: Node, kwargs: dict[str, Any], head: Any, out: Any, post: Any, fused: list[Node]
) -> tuple[Any, tuple[Any, ...]]:
    """``qlinear_pointwise.binary``: "add" into a quantized output, in-place "sum" into a
    float output when the added tensor is a buffer nobody reads afterwards (its readers
    are the fused ``add`` and nodes the kernel depends on), as torch's copy chooses."""
    other: Node = kwargs["other"]
    past = ancestors(x)
    overwritable = (
        private.makes_new_tensor(other)
        and all(u in fused or u in past for u in other.users)
        and val(other).dtype == out[2]
    )
    binary = ADD.attr if kwargs.get("o_dtype") is not None or not overwritable else ADD.in_place
    target = ops.QLINEAR_BINARY_TENSOR if x.target is ops.QLINEAR_TENSOR else ops.QLINEAR_BINARY
    new_args = (*head[:6], other, head[6], *out, 1.0, 0, binary, 1.0, *post)
    return target, new_args
