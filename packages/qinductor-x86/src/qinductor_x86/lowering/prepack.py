"""oneDNN weight prepack: a dequantized conv or linear becomes one oneDNN int8 kernel.

The family is the table :data:`FORMS`: each row is the float computation the converted
graph performs on dequantized operands, written as PyTorch and traced. A linear on a 3-D
input is a reshape / mm / reshape in Inductor's graph, on a strided 3-D input an expand /
bmm (/ add), and with a bias an addmm: tracing the one ``F.linear`` at those shapes yields
each form. Every row is traced for float32 and for int8-mixed-bf16 (``to(bfloat16)`` on
both operands), and linear rows also with run-time (dynamic) activation qparams.

The weight is prepacked here, from its frozen value, as torch's freezing pass would; an op
that can saturate the target's kernels is still one kernel, on a doubled reduction with a
zero weight in every int16 pair (``saturation``), exact.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch.fx import Node

from qinductor_x86 import _torch_private as private
from qinductor_x86.lowering import ops, saturation, tracing
from qinductor_x86.lowering.context import CompileContext, current, val
from qinductor_x86.lowering.counters import Family
from qinductor_x86.lowering.kernels import Convolution, QConv, QLinear, float_output

#: Why a float conv has no oneDNN int8 form here (also said of one left in float later).
TRANSPOSED_CONV = "a transposed convolution has no oneDNN int8 lowering here"


def unsupported_conv(conv: Convolution, rank: int | None) -> str | None:
    """Why oneDNN's int8 conv cannot compute ``conv`` on tensors of ``rank`` dimensions
    (None: it can, as far as its kind and shape go)."""
    if conv.transposed:
        return TRANSPOSED_CONV
    if rank is not None and rank not in (3, 4):
        return f"a {rank - 2}-D convolution has no lowering here"
    return None


@dataclass(frozen=True)
class Form:
    """One spelling of a conv or linear in Inductor's graph, as the float code that makes it.

    ``x_shape``/``x_strides`` give the traced activation (a strided one yields the bmm form).
    """

    name: str
    kind: str
    compute: Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None], torch.Tensor]
    x_shape: tuple[int, ...]
    w_shape: tuple[int, ...]
    transposed_input: bool = False


def _grouped_conv(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    return F.conv2d(x, w, b, groups=int(tracing.MAGIC["groups"]))


#: The traced examples' sizes, each named once: tracing keeps ops and dtypes and turns sizes
#: into wildcards, so any sizes the forms accept trace the same patterns, and editing one
#: size cannot leave two shapes disagreeing. The conv's channels are a multiple of the
#: traced group count (``tracing.MAGIC["groups"]``, 5).
_BATCH, _ROWS, _FEATURES, _OUT = 2, 3, 16, 8
_CHANNELS, _PER_GROUP, _SPATIAL, _KERNEL = 10, 2, 7, 3

FORMS = (
    Form("conv", "conv", _grouped_conv, (_BATCH, _CHANNELS, _SPATIAL, _SPATIAL),
         (_CHANNELS, _PER_GROUP, _KERNEL, _KERNEL)),
    Form("linear", "linear", F.linear, (_ROWS, _FEATURES), (_OUT, _FEATURES)),
    Form("linear, 3-D input", "linear", F.linear, (_BATCH, _ROWS, _FEATURES), (_OUT, _FEATURES)),
    Form("linear, strided 3-D input", "linear", F.linear, (_ROWS, _BATCH, _FEATURES),
         (_OUT, _FEATURES), True),
)
DTYPES = (torch.float32, torch.bfloat16)


def _example(form: Form, dtype: torch.dtype, bias: bool, dynamic: bool) -> list[Any]:
    # Tracing records ops, dtypes and (wildcard) sizes, never the values: zeros serve, and
    # leave no literal whose change could not change a pattern.
    x = torch.zeros(form.x_shape, dtype=torch.uint8)
    if form.transposed_input:
        x = x.transpose(0, 1)
    out = form.w_shape[0]
    examples: list[Any] = [
        x,
        torch.zeros(form.w_shape, dtype=torch.int8),
        torch.ones(out),
        torch.zeros(out, dtype=torch.int64),
    ]
    if bias:
        examples.append(torch.zeros(out, dtype=dtype))
    if dynamic:
        examples += [torch.ones(()), torch.zeros((), dtype=torch.int64)]
    return examples


def _region(form: Form, dtype: torch.dtype, bias: bool, dynamic: bool) -> Callable[..., Any]:
    def region(*args: Any) -> torch.Tensor:
        x, w, w_scale, w_zp, *rest = args
        b = rest.pop(0) if bias else None
        xa = tracing.dq_activation(x, *rest) if dynamic else tracing.dq_activation(x)
        wa = tracing.dq_weight(w, w_scale, w_zp)
        if dtype != torch.float32:
            xa, wa = xa.to(dtype), wa.to(dtype)
        return form.compute(xa, wa, b)

    return region


def register(pass_dict: Any) -> None:
    """Trace every row of the table and register it into ``pass_dict``."""
    for form, dtype, bias, dynamic in itertools.product(FORMS, DTYPES, (True, False), (False, True)):
        if dynamic and form.kind == "conv":
            continue  # dynamic quantization applies to linear layers only
        argnames = ["x", "w", "w_scale", "w_zp", *(["b"] if bias else [])]
        argnames += ["x_scale", "x_zp"] if dynamic else []
        pattern = tracing.trace(
            _region(form, dtype, bias, dynamic),
            _example(form, dtype, bias, dynamic),
            argnames,
            scalars=(*tracing.activation_scalars(dynamic), "w_qmin", "w_qmax")
            + (("groups",) if form.kind == "conv" else ()),
        )
        private.register_graph_pattern(
            pattern, extra_check=_checker(form), pass_dict=pass_dict
        )(_rewriter(form, dynamic))


def _first(match: Any, targets: Any) -> Node:
    found: Node = next(n for n in match.nodes if n.target in targets)
    return found


def _checker(form: Form) -> Callable[[Any], bool]:
    def check(match: Any) -> bool:
        ctx = current()
        compute = _first(match, ops.COMPUTE)
        kwargs = match.kwargs
        x = val(kwargs["x"])
        if x is None or ctx.constant(kwargs["w"]) is None:
            return ctx.decline(compute, "its weight is not a frozen constant")
        if kwargs["x_qmin"] < 0 or kwargs["x_qmax"] > 255:
            return ctx.decline(compute, "its activation is not uint8")
        # (an int8 weight's range needs no check: the pattern's dequantize is int8's, and
        # torch's per-channel dequantize refuses a range wider than its dtype)
        if form.kind == "conv":
            # (the traced pattern says not transposed; never trust a wildcard here)
            unsupported = unsupported_conv(Convolution.of(compute), x.dim())
            if unsupported is not None:
                return ctx.decline(compute, unsupported)
            if ctx.constant(kwargs["w_scale"]) is None:
                return ctx.decline(compute, "its weight scales are not frozen constants")
            return True
        return linear_layout_ok(match, x, kwargs) or ctx.decline(
            compute, "its weight is not used as a plain transposed matrix"
        )

    return check


def linear_layout_ok(match: Any, x: torch.Tensor, kwargs: dict[str, Any]) -> bool:
    """The wildcard sizes are what a linear layer produces: ``w.t()``, and for the bmm
    form an activation expand that is the identity and a weight broadcast over batches."""
    permute = _first(match, (ops.aten.permute.default,))
    if list(permute.args[1]) != [1, 0]:  # type: ignore[arg-type]
        return False
    by_operand = {n.args[0] is permute: n for n in match.nodes if n.target is ops.aten.expand.default}
    if not by_operand:
        return True
    w, w_expand, act_expand = val(kwargs["w"]), by_operand[True], by_operand[False]
    return (
        list(act_expand.args[1]) == list(x.shape)
        and list(w_expand.args[1]) == [x.shape[0], w.shape[1], w.shape[0]]
    )


#: torch's counter family for prepacking a weight, by layer kind.
COUNTERS = {"conv": Family.QCONV_WEIGHT_PREPACK, "linear": Family.QLINEAR_WEIGHT_PREPACK}


def _rewriter(form: Form, dynamic: bool) -> Callable[..., None]:
    family = COUNTERS[form.kind]

    def rewrite(match: Any, *args: Any, **kwargs: Any) -> None:
        ctx = current()
        out = match.output_node()
        compute = _first(match, ops.COMPUTE)
        weight = ctx.constant(kwargs["w"])
        assert weight is not None
        verdict = saturation.judge(weight, int(kwargs["x_qmax"]), ctx.target)
        dtype = val(out).dtype
        torch_nodes = len(match.nodes) + _freezing_clone(form, compute)
        with ctx.graph.inserting_before(out):
            result = _kernel(
                ctx, form, dynamic, compute, kwargs, dtype=dtype, doubled=verdict.double
            )
        if verdict.double:
            ctx.record(
                f"{form.kind} with its reduction doubled, a zero weight in each int16 pair "
                f"({compute.name}: worst pair sum {verdict.worst} > 32767 on "
                f"{ctx.target.isa})"
            )
        out.replace_all_uses_with(result)
        match.erase_nodes()
        precision = "int8-mixed-bf16" if dtype == torch.bfloat16 else "int8-mixed-fp32"
        ctx.record(
            f"{form.name} weight prepack ({precision})",
            family,
            torch_nodes,
            match,
        )

    return rewrite


def _kernel(
    ctx: CompileContext,
    form: Form,
    dynamic: bool,
    compute: Node,
    kwargs: dict[str, Any],
    *,
    dtype: torch.dtype,
    doubled: bool,
) -> Node:
    """The prepacked kernel replacing the match: its packed-weight constant and its call.
    ``doubled``: on the doubled reduction that cannot saturate (``saturation``)."""
    weight = ctx.constant(kwargs["w"])
    assert weight is not None
    x = kwargs["x"]
    x_shape = static_shape(val(x))
    if doubled:
        # conv: input channels (dim 1); linear: the last dim, at any rank
        dim = 1 if form.kind == "conv" else val(x).dim() - 1
        x = saturation.doubled_codes(ctx, x, dim)
        weight = saturation.doubled_weight(weight)
        if x_shape is not None:
            x_shape[dim] *= 2
    conv = Convolution.of(compute) if form.kind == "conv" else None
    if conv is not None:
        packed = private.prepack_qconv(
            weight, ctx.constant(kwargs["w_scale"]), kwargs["x_scale"], kwargs["x_zp"],
            conv.stride, conv.padding, conv.dilation, conv.groups, x_shape,
        )  # fmt: skip
    else:
        # a weight folded from a transposed view (``F.linear(x, w.t())``, Hugging Face's
        # Conv1D) keeps its strides, which oneDNN's prepack ignores: the kernel would
        # compute with the transpose
        packed = private.prepack_qlinear(weight.contiguous(), x_shape)
    common: dict[str, Any] = {
        "x": x,
        "x_scale": kwargs["x_scale"],
        "x_zp": kwargs["x_zp"],
        "w": ctx.constant_node("_qinductor_x86_packed", packed),
        "w_scale": kwargs["w_scale"],
        "w_zp": _int32_zero_points(ctx, kwargs["w_zp"]),
        "bias": kwargs.get("b"),
        **float_output(dtype),
    }
    if conv is not None:
        geometry = {"stride": conv.stride, "padding": conv.padding, "dilation": conv.dilation}
        return ctx.call(ops.QCONV, QConv(**common, **geometry, groups=conv.groups).to_args())
    target = ops.QLINEAR_TENSOR if dynamic else ops.QLINEAR
    return ctx.call(target, QLinear(**common).to_args())


def _freezing_clone(form: Form, compute: Node) -> int:
    """1 when torch's pattern would also have matched the channels-last clone freezing
    puts on this conv's weight (this lowering runs before freezing adds it)."""
    weight = val(Convolution.of(compute).weight) if form.kind == "conv" else None
    return int(weight is not None and private.freezing_clones_conv_weight(weight))


def _int32_zero_points(ctx: CompileContext, w_zp: Any) -> Any:
    """The weight zero points as int32, the kernels' dtype: cast in the graph, where
    freezing folds the cast away (torch's lowering would otherwise convert them)."""
    return ctx.call(ops.CONVERT, (w_zp, torch.int32))


def static_shape(value: torch.Tensor) -> list[int] | None:
    """The activation shape a prepack may specialize on: None when a size is symbolic."""
    shape = value.shape
    return None if any(not isinstance(s, int) for s in shape) else [int(s) for s in shape]
