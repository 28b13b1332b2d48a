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
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, cast

import torch
from torch.fx import Node

from qinductor_x86 import _torch_private as private
from qinductor_x86.lowering import ops, tracing
from qinductor_x86.lowering.context import CompileContext, ancestors, current, val
from qinductor_x86.lowering.counters import Family
from qinductor_x86.lowering.kernels import (
    BINARY_OF,
    INT8_KERNELS,
    KERNELS,
    QConv,
    QConvBinary,
    QLinear,
    QLinearBinary,
)
from qinductor_x86.postop_table import ADD, POST_OPS, PostOp

FLOATS = (torch.float32, torch.bfloat16)
#: The codes a fused output quantize writes: uint8's, as the signed pass (signed.py) has
#: re-based every int8 activation, a fused output included, before any fusion runs.
UINT8_RANGE = (0, 255)

#: No post-op: the output quantize alone fuses into the kernel (a clamp to nothing, so a
#: narrower output range folds into it as a hardtanh).
NONE = PostOp("none", fn=lambda x: x, attr="none", clamps=(-math.inf, math.inf))
#: The unary post-ops the kernels fuse, from the table (rows lowered through another have
#: no PyTorch of their own).
UNARY = (NONE, *(p for p in POST_OPS if p.fn is not None))
#: The kernels a narrower output quant range folds into as a hardtanh: those the table's
#: hardtanh row names (none without the row: the codes are clamped after the kernel).
HARDTANH_KERNELS = next((p.kernels for p in POST_OPS if p.attr == "hardtanh"), frozenset())


def traceable(post: PostOp) -> Callable[[torch.Tensor], torch.Tensor]:
    """``post`` as a function of ``x`` alone, its scalars the placeholders tracing captures."""
    fn = cast(Callable[..., torch.Tensor], post.fn)
    return lambda x: fn(x, *(tracing.placeholder(s) for s in post.scalars))


class Side(Enum):
    """Which operand of the binary post-op the kernel's output is."""

    LEFT = "left"
    RIGHT = "right"


@dataclass(frozen=True)
class Row:
    """One registered pattern: the table's binary post-op with the kernel's output as its
    ``side`` operand (None: no binary post-op), then ``unary``, then the output quantize
    or not.

    ``cast_back``: the sum cast back to the kernel's dtype before the rest, as an in-place
    ``kernel.add_(residual)`` of a bf16 kernel and a float32 residual computes it."""

    unary: PostOp
    side: Side | None
    quantized_output: bool
    cast_back: bool = False

    def region(self, *inputs: torch.Tensor) -> torch.Tensor:
        x, *other = inputs if self.side is not Side.RIGHT else inputs[::-1]
        y = ADD.fn(x, *other) if self.side is not None else x
        return traceable(self.unary)(y.to(inputs[0].dtype) if self.cast_back else y)

    @property
    def label(self) -> str:
        parts = [ADD.name] if self.side is not None else []
        parts += [self.unary.name] if self.unary is not NONE else []
        return " + ".join([*parts, *(["quantize"] if self.quantized_output else [])])


#: Unary rows, then binary ones (followed by nothing or a unary that may follow an add);
#: the rows that cast back last: traced on one dtype, one spells its twin's pattern, which
#: is registered first, under the twin.
ROWS = [
    *(Row(u, None, q) for u in UNARY for q in (True, False) if u is not NONE or q),
    *(
        Row(u, side, q, cast_back)
        for cast_back in (False, True)
        for u in (NONE, *(p for p in UNARY if p.after_add))
        for side in Side
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
        if (mixed and row.side is None) or (row.cast_back and not mixed):
            continue  # a unary row has no residual; with one dtype nothing is cast back
        dtypes = (dtype, other_dtype) if row.side is not None else (dtype,)
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
        if not isinstance(x, Node) or x.target not in BINARY_OF:
            return False  # not a kernel of ours: nothing to fuse into
        kind = KERNELS[x.target].kind
        anchor = match.output_node()
        kernel = _unary_kernel(x)
        if kernel.attr != "none" or kernel.o_dtype not in FLOATS:
            return False  # already carries a post-op or an output quantize
        name = kernel_name(kernel)
        if name not in row.unary.kernels:
            return ctx.decline(anchor, f"oneDNN's int8 {name} has no {row.unary.name} post-op")
        if row.side is not None and name not in ADD.kernels:
            return ctx.decline(anchor, f"oneDNN's int8 {name} has no {ADD.name} post-op")
        if ctx.others_follow and not row.quantized_output and row.side is None:
            # torch's (and torchao's) copy fuses a float-output unary post-op itself, in a
            # pass after its int8-output fusions; a kernel that already carries a post-op
            # trips its assertion when another of its patterns matches what follows. So
            # leave this one to it: the kernel is the same, rewritten once.
            return False
        if any(user not in match.nodes for user in x.users):
            return ctx.decline(anchor, f"{x.name}'s float output is read elsewhere too")
        if row.quantized_output and not _fusable_quantize(ctx, match, anchor):
            return False
        if row.side is not None:
            return _binary_ok(ctx, match, kind, x, anchor)
        return True

    return check


def kernel_name(kernel: QConv | QLinear) -> str:
    """The kernel as the post-op table names it: a conv by its spatial dims."""
    return f"conv{len(kernel.stride)}d" if isinstance(kernel, QConv) else "linear"


def _unary_kernel(node: Node) -> QConv | QLinear:
    """The arguments of the fusable kernel ``node`` calls."""
    kernel = KERNELS[node.target].args.of(node)
    assert isinstance(kernel, QConv | QLinear)
    return kernel


def _fusable_quantize(ctx: CompileContext, match: Any, anchor: Node) -> bool:
    k = match.kwargs
    low, high = UINT8_RANGE
    if k["o_dtype"] is not torch.uint8 or not low <= k["o_qmin"] <= k["o_qmax"] <= high:
        return ctx.decline(anchor, "its output is not uint8")
    return isinstance(k["o_scale"], float) and isinstance(k["o_zp"], int)


def _binary_ok(ctx: CompileContext, match: Any, kind: str, x: Node, anchor: Node) -> bool:
    other = match.kwargs["other"]
    x_val, other_val = val(x), val(other)
    if other_val is None or other_val.shape != x_val.shape or other is _unary_kernel(x).x:
        return ctx.decline(anchor, "the added tensor does not have the kernel's output shape")
    if kind == "linear":
        return True
    # oneDNN's int8 conv adds in place into a dequantized accumulator ("sum" post-op), as
    # torch's passes fuse it; dequant promotion left that dequantize one reader, the add
    if other.target is not ops.DEQUANTIZE[0]:
        return ctx.decline(anchor, "the conv's residual input is not a dequantized int8 tensor")
    if match.kwargs.get("o_dtype") is None:
        return True  # float output: the sum overwrites the dequantized copy, read only here
    accum = other.args[0]
    if accum is _unary_kernel(x).x:
        return ctx.decline(anchor, "the residual is the conv's own input (an in-place sum would overwrite it)")
    past = ancestors(x)
    later_readers = [u for u in accum.users if u is not other and u not in past]
    fresh = accum.target in ops.QUANTIZE or accum.target in INT8_KERNELS
    if later_readers or not fresh or val(accum).dtype != match.kwargs["o_dtype"]:
        return ctx.decline(anchor, "the residual's int8 buffer is read again after the add")
    return True


def _rewriter(row: Row) -> Callable[..., None]:
    def rewrite(match: Any, *args: Any, **kwargs: Any) -> None:
        ctx = current()
        x: Node = kwargs["x"]
        kernel = _unary_kernel(x)
        anchor = match.output_node()
        output = (
            Output(kwargs["o_scale"], kwargs["o_zp"], kwargs["o_dtype"])
            if row.quantized_output
            else Output(1.0, 0, val(anchor).dtype)
        )
        unary = row.unary
        post = Unary(unary.attr, [float(kwargs[s]) for s in unary.scalars], unary.algorithm)
        qrange = (kwargs.get("o_qmin"), kwargs.get("o_qmax"))
        narrow = row.quantized_output and qrange != UINT8_RANGE
        # a kernel without oneDNN's hardtanh (conv1d) keeps its post-op; its codes are clamped
        if narrow and row.side is None and unary.clamps is not None and kernel_name(kernel) in HARDTANH_KERNELS:
            post, narrow = _range_as_hardtanh(unary, post, kwargs), False
        erased_extra: list[Node] = []
        fused_kernel: QConv | QLinear | QConvBinary | QLinearBinary
        if row.side is None:
            fused_kernel = replace(kernel, **output.fields(), **post.fields())
        elif isinstance(kernel, QConv):
            fused_kernel, erased_extra = _conv_binary(kernel, kwargs, output, post)
        else:
            fused_kernel = _linear_binary(x, kernel, kwargs, output, post, match.nodes)
        target = BINARY_OF[x.target] if row.side is not None else x.target
        with ctx.graph.inserting_before(anchor):
            fused = ctx.call(target, fused_kernel.to_args())
            if narrow:
                fused = _clamp_codes(ctx, fused, kwargs["o_qmin"], kwargs["o_qmax"])
        anchor.replace_all_uses_with(fused)
        match.erase_nodes()
        replaced = [*match.nodes, x, *erased_extra]
        # the old kernel and the residual's dequantize were read only inside the match (the
        # checks decline anything else): they go with it
        for node in (x, *erased_extra):
            ctx.graph.erase_node(node)
        kind = KERNELS[x.target].kind
        dtype = "int8" if row.quantized_output else "float"
        ctx.record(
            f"{kind} + {row.label} ({dtype} output)", _COUNTERS[kind, row.side is not None],
            len(replaced), match,
        )  # fmt: skip

    return rewrite


#: torch's counter family for a fusion, by layer kind and whether it fuses an add.
_COUNTERS = {
    ("conv", False): Family.QCONV_UNARY,
    ("conv", True): Family.QCONV_BINARY,
    ("linear", False): Family.QLINEAR_UNARY,
    ("linear", True): Family.QLINEAR_BINARY,
}


@dataclass(frozen=True)
class Output:
    """A fused kernel's output: its quantize's parameters, or ``(1.0, 0, float dtype)``."""

    scale: Any
    zero_point: Any
    dtype: Any

    def fields(self) -> dict[str, Any]:
        return {"o_scale": self.scale, "o_zp": self.zero_point, "o_dtype": self.dtype}


@dataclass(frozen=True)
class Unary:
    """A fused unary post-op as oneDNN takes it: attribute, scalars, algorithm."""

    attr: str
    scalars: list[float]
    algorithm: str

    def fields(self) -> dict[str, Any]:
        return {"attr": self.attr, "scalars": self.scalars, "algorithm": self.algorithm}

    def binary_fields(self) -> dict[str, Any]:
        """The same, as a binary kernel's trailing unary post-op."""
        return {
            "unary_attr": self.attr,
            "unary_scalars": self.scalars,
            "unary_algorithm": self.algorithm,
        }


def _range_as_hardtanh(unary: PostOp, post: Unary, kwargs: dict[str, Any]) -> Unary:
    """A quant range narrower than its dtype (7-bit activations), as a float clamp before
    the fused quantize: ``q(clamp(y, (qmin - zp) s, (qmax - zp) s))`` has exactly the codes
    ``clamp(q(y), qmin, qmax)``. A clamp-like post-op (the table's ``clamps``: relu,
    hardtanh) merges into it."""
    scale, zero_point = kwargs["o_scale"], kwargs["o_zp"]
    low, high = (kwargs["o_qmin"] - zero_point) * scale, (kwargs["o_qmax"] - zero_point) * scale
    clamp_low, clamp_high = unary.bounds(post.scalars)
    return Unary("hardtanh", [max(low, clamp_low), min(high, clamp_high)], "")


def _clamp_codes(ctx: CompileContext, codes: Node, qmin: int, qmax: int) -> Node:
    """oneDNN clamps a fused output's codes to its dtype; a narrower quant range (7-bit
    activations) is one more clamp on the codes, exact since the ranges nest. Upper bound
    first: ``clamp_max(clamp_min(x))`` is what torch's copy takes for a hardtanh post-op."""
    low, high = UINT8_RANGE
    if qmax < high:
        codes = ctx.call(ops.aten.clamp_max.default, (codes, qmax))
    if qmin > low:
        codes = ctx.call(ops.aten.clamp_min.default, (codes, qmin))
    return codes


def _conv_binary(
    conv: QConv, kwargs: dict[str, Any], output: Output, post: Unary
) -> tuple[QConvBinary, list[Node]]:
    """``qconv2d_pointwise.binary`` with oneDNN's in-place "sum": into the raw int8
    accumulator when the output is quantized, into the dequantized copy otherwise."""
    dq_other: Node = kwargs["other"]
    if kwargs.get("o_dtype") is not None:
        accum, accum_scale, accum_zp, extra = dq_other.args[0], dq_other.args[1], dq_other.args[2], [dq_other]
    else:
        accum, accum_scale, accum_zp, extra = dq_other, 1.0, 0, []
    binary = QConvBinary(
        conv.x, conv.x_scale, conv.x_zp, conv.w, conv.w_scale, conv.w_zp, accum, conv.bias,
        conv.stride, conv.padding, conv.dilation, conv.groups,
        **output.fields(), accum_scale=accum_scale, accum_zp=accum_zp,
        binary_attr=ADD.in_place, alpha=1.0, **post.binary_fields(),
    )  # fmt: skip
    return binary, extra


def _linear_binary(  # noqa: PLR0917
    x: Node, linear: QLinear, kwargs: dict[str, Any], output: Output, post: Unary, fused: list[Node]
) -> QLinearBinary:
    """``qlinear_pointwise.binary``: "add" into a quantized output, in-place "sum" into a
    float output when the added tensor is a buffer nobody reads afterwards (its readers
    are the fused ``add`` and nodes the kernel depends on), as torch's copy chooses."""
    other: Node = kwargs["other"]
    past = ancestors(x)
    overwritable = (
        private.makes_new_tensor(other)
        and all(u in fused or u in past for u in other.users)
        and val(other).dtype == output.dtype
    )
    binary = ADD.attr if kwargs.get("o_dtype") is not None or not overwritable else ADD.in_place
    return QLinearBinary(
        linear.x, linear.x_scale, linear.x_zp, linear.w, linear.w_scale, linear.w_zp, other,
        linear.bias, **output.fields(), other_scale=1.0, other_zp=0, binary_attr=binary,
        alpha=1.0, **post.binary_fields(),
    )  # fmt: skip
