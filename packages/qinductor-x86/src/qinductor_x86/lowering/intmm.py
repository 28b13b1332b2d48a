"""int8 x int8 matmul with scales: torchao's dynamic int8 and SmoothQuant linears.

torchao's ``Int8DynamicActivationInt8WeightConfig``, ``Int8StaticActivationInt8WeightConfig``
and ``SmoothQuantConfig`` compute a linear as ``_int_mm(a, b)`` on int8 codes, then the
activation's scale (one per row, or one) and the weight's (one per column):
``_int_mm(a, b).to(dt) * x_scale * w_scale`` (+ bias). On a VNNI CPU without AMX torchao
writes the same product on unsigned codes (``torchao.kernel.intmm._int_scaled_matmul_cpu``):
``_int_mm(u8(a + 128), b) - 128 * b.sum(0)``. Both spellings are one oneDNN int8 linear on
the weight prepacked from its frozen value, with the weight scales inside the kernel (and
the activation's too when it is one number); a per-row activation scale, a bias and the
output cast follow as float ops, as torch's and torchao's copies of these passes do.

The family is the table :data:`FORMS`: the computation written as PyTorch (in torchao's
two spellings, with and without the reshapes a 3-D activation adds, the bias, and the
bf16 casts of autocast), traced. An op whose int8 products can saturate the target's
kernels (a CPU without VNNI, where ``_int_mm`` itself saturates in eager) takes the doubled
reduction of ``saturation``: exact.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.fx import Node

from qinductor_x86 import _torch_private as private
from qinductor_x86.lowering import ops, saturation, tracing
from qinductor_x86.lowering.context import CompileContext, current, val
from qinductor_x86.lowering.counters import Family
from qinductor_x86.lowering.kernels import QLinear, float_output
from qinductor_x86.lowering.prepack import static_shape

INT_MM = ops.aten._int_mm.default
#: torchao's shift of signed codes to unsigned ones (and of the accumulator back).
SHIFT = 128
#: The largest unsigned code oneDNN multiplies either spelling with: signed codes are
#: shifted by 128 inside a kernel without VNNI as they are by torchao's u8s8 spelling.
ACTIVATION_QMAX = 255


@dataclass(frozen=True)
class Form:
    """``unsigned``: torchao's u8s8 spelling; ``reshaped``: a 3-D activation viewed as rows
    and the result viewed back; ``cast``: autocast's casts of the scaled result and of the
    output; ``bias``: a bias added last."""

    unsigned: bool
    reshaped: bool
    cast: bool
    bias: bool

    def region(self, *args: torch.Tensor) -> torch.Tensor:
        a, b, x_scale, w_scale, *rest = args
        rows = a.reshape(-1, a.shape[-1]) if self.reshaped else a
        if self.unsigned:
            rows = (rows.to(torch.int32) + SHIFT).to(torch.uint8)
        acc: torch.Tensor = INT_MM(rows, b)
        if self.unsigned:
            acc = acc - b.sum(dim=0, keepdim=True, dtype=torch.int32) * SHIFT
        y = acc.to(x_scale.dtype) * x_scale
        if self.cast:
            y = y.to(torch.bfloat16)
        y = y * w_scale
        if self.reshaped:
            y = y.reshape(*a.shape[:-1], -1)
        if self.bias:
            y = y + rest[0]
        return y.to(torch.bfloat16) if self.cast else y

    @property
    def name(self) -> str:
        parts = ["int8 matmul", "u8s8" if self.unsigned else "s8s8"]
        parts += ["3-D"] * self.reshaped + ["bias"] * self.bias + ["bf16 casts"] * self.cast
        return ", ".join(parts)


#: Longest forms first: a form is a prefix of the same one with reshapes or a bias.
FORMS = tuple(
    Form(unsigned, reshaped, cast, bias)
    for reshaped, bias, unsigned, cast in itertools.product((True, False), repeat=4)
)


def _examples(form: Form) -> list[torch.Tensor]:
    a = torch.randint(-32, 31, (2, 24, 16) if form.reshaped else (24, 16), dtype=torch.int8)
    examples = [
        a,
        torch.randint(-32, 31, (16, 8), dtype=torch.int8),
        torch.rand(48 if form.reshaped else 24, 1),  # one scale per row
        torch.rand(8),  # (float32 under autocast too: the product is cast back to bf16)
    ]
    return [*examples, torch.rand(8)] if form.bias else examples


def register(pass_dict: Any) -> None:
    for form in FORMS:
        pattern = tracing.trace(
            form.region,
            _examples(form),
            ["a", "b", "x_scale", "w_scale", *(["bias"] if form.bias else [])],
            ignore=(torch.dtype,),  # checked on the matched values instead
        )
        private.register_graph_pattern(pattern, extra_check=_checker(form), pass_dict=pass_dict)(
            _rewriter(form)
        )


def weight_value(ctx: CompileContext, b: Any) -> torch.Tensor | None:
    """The frozen ``(in, out)`` int8 matrix ``b``: a constant, or the transpose torchao
    takes of its ``(out, in)`` weight."""
    value = ctx.constant(b)
    if value is None and isinstance(b, Node) and b.target is ops.aten.permute.default:
        inner = ctx.constant(b.args[0])
        if inner is not None and inner.dim() == 2 and list(b.args[1]) == [1, 0]:  # type: ignore[arg-type]
            value = inner.t()
    return value


def _checker(form: Form) -> Callable[[Any], bool]:
    def check(match: Any) -> bool:
        ctx = current()
        k = match.kwargs
        mm = next(n for n in match.nodes if n.target is INT_MM)
        weight = weight_value(ctx, k["b"])
        if weight is None or weight.dtype != torch.int8 or weight.dim() != 2:
            return ctx.decline(mm, "its weight is not a frozen int8 matrix")
        codes = val(mm.args[0])
        if codes is None or codes.dtype != (torch.uint8 if form.unsigned else torch.int8):
            return False
        if form.unsigned and not _shifted_by_128(match, mm):
            return False
        w_scale = val(k["w_scale"])
        if w_scale is None or tuple(w_scale.shape) != (weight.shape[1],):
            return ctx.decline(mm, "its weight scales are not one per output column")
        if form.bias and (val(k["bias"]) is None or val(k["bias"]).dim() != 1):
            return ctx.decline(mm, "its bias is not one per output column")
        # (dtypes are wildcards in the pattern) the scaled accumulator and the result are
        # float32 or bf16
        floats = [n for n in match.nodes if val(n) is not None and val(n).is_floating_point()]
        values = [val(n) for n in (*floats, k["x_scale"])]
        return all(v is not None and v.dtype in _FLOATS for v in values)

    return check


_FLOATS = (torch.float32, torch.bfloat16)


def _shifted_by_128(match: Any, mm: Node) -> bool:
    """The unsigned spelling's casts: signed codes to int32, +128, to uint8; its
    compensation summed in int32."""
    to_u8 = mm.args[0]
    assert isinstance(to_u8, Node)
    add = to_u8.args[0]
    to_i32 = add.args[0] if isinstance(add, Node) else None
    total = next((n for n in match.nodes if n.target is ops.aten.sum.dim_IntList), None)
    return (
        isinstance(to_i32, Node)
        and val(to_i32).dtype == torch.int32
        and val(to_i32.args[0]).dtype == torch.int8
        and total is not None
        and val(total).dtype == torch.int32
    )


def _rewriter(form: Form) -> Callable[..., None]:
    def rewrite(match: Any, *args: Any, **kwargs: Any) -> None:
        ctx = current()
        out = match.output_node()
        mm = next(n for n in match.nodes if n.target is INT_MM)
        weight = weight_value(ctx, kwargs["b"])
        assert weight is not None
        weight = weight.t().contiguous()  # (out, in), as oneDNN packs a linear's weight
        verdict = saturation.judge(weight, ACTIVATION_QMAX, ctx.target)
        dtype = val(out).dtype
        scalar_x_scale = _is_one_number(val(kwargs["x_scale"]))
        with ctx.graph.inserting_before(out):
            result = _kernel(ctx, form, match, weight, kwargs, dtype, scalar_x_scale, verdict.double)
        if verdict.double:
            ctx.record(
                f"linear with its reduction doubled, a zero weight in each int16 pair "
                f"({mm.name}: worst pair sum {verdict.worst} > 32767 on {ctx.target.isa})"
            )
        out.replace_all_uses_with(result)
        match.erase_nodes()
        # torch's pattern finds the compensation folded into a constant already
        compensation = 2 if form.unsigned else 0
        ctx.record(
            f"{form.name} weight prepack",
            Family.QLINEAR_WEIGHT_PREPACK,
            len(match.nodes) - compensation,
            match,
        )

    return rewrite


def _is_one_number(value: Any) -> bool:
    return value is not None and all(isinstance(s, int) for s in value.shape) and value.numel() == 1


def _kernel(  # noqa: PLR0917
    ctx: CompileContext,
    form: Form,
    match: Any,
    weight: torch.Tensor,
    kwargs: dict[str, Any],
    dtype: torch.dtype,
    scalar_x_scale: bool,
    doubled: bool,
) -> Node:
    """The oneDNN linear (and the float ops a per-row activation scale leaves after it)."""
    a: Node = kwargs["a"]
    # the matched views of a 3-D activation as rows and of the result back (their sizes
    # may be symbolic: reused as they are)
    reshapes = [n for n in match.nodes if n.target is ops.aten.reshape.default]
    to_rows = next((n for n in reshapes if n.args[0] is a), None)
    back = next((n for n in reshapes if n is not to_rows), None)
    rows = a
    if to_rows is not None and not scalar_x_scale:
        rows = ctx.call(ops.aten.reshape.default, to_rows.args)
    codes = rows
    if form.unsigned:
        as_int32 = ctx.call(ops.CONVERT, (rows, torch.int32))
        codes = ctx.call(ops.CONVERT, (ctx.call(ops.aten.add.Tensor, (as_int32, SHIFT)), torch.uint8))
    x_shape = static_shape(val(codes))
    if doubled:
        dim = val(codes).dim() - 1
        codes = saturation.doubled_codes(ctx, codes, dim)
        weight = saturation.doubled_weight(weight)
        if x_shape is not None:
            x_shape[dim] *= 2
    packed = ctx.constant_node("_qinductor_x86_packed", private.prepack_qlinear(weight, x_shape))
    w_scale = kwargs["w_scale"]
    if val(w_scale).dtype != torch.float32:
        w_scale = ctx.call(ops.CONVERT, (w_scale, torch.float32))
    bias = kwargs.get("bias")
    if scalar_x_scale:
        x_zp = (
            ctx.call(ops.aten.full.default, ([], SHIFT), {"dtype": torch.int32})
            if form.unsigned
            else None
        )
        kernel = QLinear(codes, kwargs["x_scale"], x_zp, packed, w_scale, None, bias, **float_output(dtype))
        return ctx.call(ops.QLINEAR_TENSOR, kernel.to_args())
    # oneDNN takes one activation scale: the per-row one multiplies the float result
    scaled_dtype = val(kwargs["x_scale"]).dtype
    zero_point = SHIFT if form.unsigned else 0
    kernel = QLinear(codes, 1.0, zero_point, packed, w_scale, None, None, **float_output(scaled_dtype))
    y = ctx.call(ops.QLINEAR, kernel.to_args())
    y = ctx.call(ops.aten.mul.Tensor, (y, kwargs["x_scale"]))
    if bias is not None:
        y = ctx.call(ops.aten.add.Tensor, (y, bias))
    if back is not None:
        y = ctx.call(ops.aten.reshape.default, (y, back.args[1]))
    if val(y).dtype != dtype:
        y = ctx.call(ops.CONVERT, (y, dtype))
    return y
