"""Post-op fusion: what follows a prepacked kernel moves into it, up to the output quantize.

The family is the table :data:`UNARY` x :data:`BINARY` x (float32, bf16 operands) x (int8
output, float output). A post-op is written once as the PyTorch it is (``F.hardswish``,
``x + other`` then ``relu``) and traced, so the pattern is whatever Inductor's
decomposition of it is in this torch (SiLU, for instance, is ``x / (1 + exp(-x))`` here).
The kernel itself is the pattern's free input ``x``; the checks below make sure it is a
plain prepacked kernel whose only readers are the fused nodes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch.fx import Node

from qinductor_x86 import _torch_private as private
from qinductor_x86.lowering import ops, tracing
from qinductor_x86.lowering.context import CompileContext, ancestors, current, val

BOTH = frozenset({"conv", "linear"})
#: Where a kernel's output qparams start in its arguments (prepack's layout), by kind.
OUTPUT_AT = {"conv": 11, "linear": 7}
FLOATS = (torch.float32, torch.bfloat16)
INT8_RANGES = {torch.uint8: (0, 255), torch.int8: (-128, 127)}


@dataclass(frozen=True)
class Unary:
    """A unary post-op: its PyTorch, oneDNN's name for it, and the kernels that have it."""

    name: str
    fn: Callable[[torch.Tensor], torch.Tensor]
    attr: str
    kinds: frozenset[str] = BOTH
    scalars: tuple[str, ...] = ()
    algorithm: str = ""


def _hardtanh(x: torch.Tensor) -> torch.Tensor:
    return F.hardtanh(x, float(tracing.MAGIC["min_value"]), float(tracing.MAGIC["max_value"]))


def _leaky_relu(x: torch.Tensor) -> torch.Tensor:
    return F.leaky_relu(x, float(tracing.MAGIC["negative_slope"]))


#: The unary post-ops, and which oneDNN int8 kernels support each (torch 2.13's ATen).
UNARY = (
    Unary("none", lambda x: x, "none"),
    Unary("relu", torch.relu, "relu"),
    Unary("hardtanh", _hardtanh, "hardtanh", scalars=("min_value", "max_value")),
    # (lambdas: tracing needs one-argument functions; these also take an ``inplace`` flag)
    Unary("hardswish", lambda x: F.hardswish(x), "hardswish"),  # noqa: PLW0108
    Unary("silu", lambda x: F.silu(x), "swish"),  # noqa: PLW0108
    Unary("gelu", lambda x: F.gelu(x), "gelu", frozenset({"linear"}), algorithm="none"),  # noqa: PLW0108
    Unary(
        "gelu(tanh)",
        lambda x: F.gelu(x, approximate="tanh"),
        "gelu",
        frozenset({"linear"}),
        algorithm="tanh",
    ),
    Unary("leaky_relu", _leaky_relu, "leaky_relu", frozenset({"linear"}), ("negative_slope",)),
    Unary("tanh", torch.tanh, "tanh", frozenset({"linear"})),
)
RELU = UNARY[1]


@dataclass(frozen=True)
class Binary:
    """``x + other`` (either operand order), then a unary post-op."""

    name: str
    swapped: bool
    then: Unary

    def __call__(self, x: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
        return self.then.fn(other + x if self.swapped else x + other)


BINARY = tuple(
    Binary(f"add{'' if then is UNARY[0] else ' + ' + then.name}", swapped, then)
    for then in (UNARY[0], RELU)
    for swapped in (False, True)
)

#: (kernel dtype, extra-input dtype) pairs a region is traced for: int8-mixed-bf16 graphs
#: add float32 residuals to bf16 kernels.
OPERAND_DTYPES = (
    (torch.float32, torch.float32),
    (torch.bfloat16, torch.bfloat16),
    (torch.bfloat16, torch.float32),
)


@dataclass(frozen=True)
class Row:
    """One registered pattern: a post-op, and whether the output quantize is part of it."""

    post: Unary | Binary
    quantized_output: bool

    @property
    def unary(self) -> Unary:
        return self.post.then if isinstance(self.post, Binary) else self.post

    @property
    def label(self) -> str:
        parts = [self.post.name] if self.post is not UNARY[0] else []
        return " + ".join([*parts, *(["quantize"] if self.quantized_output else [])])


def register(pass_dict: Any) -> None:
    """Trace every row of the table and register it into ``pass_dict`` (duplicates, such as
    relu on float32 and bf16, once)."""
    seen: set[str] = set()
    posts: tuple[Unary | Binary, ...] = (*UNARY, *BINARY)
    for post, quantized, (dtype, other_dtype) in itertools.product(
        posts, (True, False), OPERAND_DTYPES
    ):
        binary = isinstance(post, Binary)
        if (post is UNARY[0] and not quantized) or (not binary and other_dtype != dtype):
            continue
        examples = [torch.randn(2, 8, dtype=dtype)]
        examples += [torch.randn(2, 8, dtype=other_dtype)] if binary else []
        region = tracing.trace(
            post if isinstance(post, Binary) else post.fn,
            examples,
            ["x", "other"] if binary else ["x"],
            scalars=post.then.scalars if isinstance(post, Binary) else post.scalars,
        )
        pattern = tracing.output_quant(region) if quantized else region
        if repr(pattern) in seen:
            continue
        seen.add(repr(pattern))
        row = Row(post, quantized)
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
        if kind not in row.unary.kinds:
            return ctx.decline(anchor, f"oneDNN's int8 {kind} has no {row.unary.name} post-op")
        if ctx.others_follow and not row.quantized_output and not isinstance(row.post, Binary):
            # torch's (and torchao's) copy fuses a float-output unary post-op itself, in a
            # pass after its int8-output fusions; a kernel that already carries a post-op
            # trips its assertion when another of its patterns matches what follows. So
            # leave this one to it: the kernel is the same, rewritten once.
            return False
        if any(user not in match.nodes for user in x.users):
            return ctx.decline(anchor, f"{x.name}'s float output is read elsewhere too")
        if row.quantized_output and not _fusable_quantize(ctx, match, anchor):
            return False
        if isinstance(row.post, Binary):
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
        narrow = row.quantized_output and _narrower_than_dtype(kwargs)
        if narrow and not isinstance(row.post, Binary) and unary.attr in _CLAMPS:
            post, narrow = _range_as_hardtanh(unary, post, kwargs), False
        erased_extra: list[Node] = []
        if not isinstance(row.post, Binary):
            target, new_args = x.target, (*head, *out, *post)
        elif kind == "conv":
            target, new_args, erased_extra = _conv_binary(kwargs, head, out, post)
        else:
            target, new_args = _linear_binary(x, kwargs, head=head, out=out, post=post, anchor=anchor)
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
        arity = "binary" if isinstance(row.post, Binary) else "unary"
        family = f"q{kind}{'2d' if (kind, arity) == ('conv', 'binary') else ''}_{arity}_matcher"
        dtype = "int8" if row.quantized_output else "float"
        ctx.record(f"{kind} + {row.label} ({dtype} output)", family, len(replaced), match)

    return rewrite


#: Unary post-ops that are a clamp, into which a narrower quant range folds.
_CLAMPS = ("none", "relu", "hardtanh")


def _narrower_than_dtype(kwargs: dict[str, Any]) -> bool:
    return (kwargs["o_qmin"], kwargs["o_qmax"]) != INT8_RANGES[kwargs["o_dtype"]]


def _range_as_hardtanh(
    unary: Unary, post: tuple[Any, ...], kwargs: dict[str, Any]
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
    new_args = (*head[:6], accum, *head[6:], *out, accum_scale, accum_zp, "sum", 1.0, *post)
    return ops.QCONV_BINARY, new_args, extra


def _linear_binary(
    x: Node,
    kwargs: dict[str, Any],
    *,
    head: tuple[Any, ...],
    out: tuple[Any, ...],
    post: tuple[Any, ...],
    anchor: Node,
) -> tuple[Any, tuple[Any, ...]]:
    """``qlinear_pointwise.binary``: "add" into a quantized output, in-place "sum" into a
    float output when the added tensor is a buffer nobody reads afterwards."""
    other: Node = kwargs["other"]
    past = ancestors(x)
    overwritable = (
        other.op == "call_function"
        and other.target not in ops.VIEWS
        and all(u is anchor or u in past for u in other.users)
        and val(other).dtype == out[2]
    )
    binary = "add" if kwargs.get("o_dtype") is not None or not overwritable else "sum"
    target = ops.QLINEAR_BINARY_TENSOR if x.target is ops.QLINEAR_TENSOR else ops.QLINEAR_BINARY
    new_args = (*head[:6], other, head[6], *out, 1.0, 0, binary, 1.0, *post)
    return target, new_args
