"""Data movement on int8 codes: dequantize -> max-pool / cat / reshape -> quantize, with the
same qparams on both sides, is the op applied to the uint8 codes directly (exact: these ops
only select and move values, and quantize(dequantize(c)) == c); dequantize -> quantize
alone is the codes themselves."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from operator import getitem
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch.fx import Node

from qinductor_x86 import _torch_private as private
from qinductor_x86.lowering import ops, tracing
from qinductor_x86.lowering.context import current, val
from qinductor_x86.lowering.counters import Family


@dataclass(frozen=True)
class DataOp:
    """``region``: the float op on a dequantized activation, traced; ``replace``: the same
    op on the codes, from the matched op node; ``family``: torch's counter for it."""

    name: str
    family: Family
    region: Callable[[torch.Tensor], torch.Tensor]
    replace: Callable[[Node, list[Node]], tuple[Any, tuple[Any, ...]]]
    example_shape: tuple[int, ...] = (2, 4, 9, 9)


def _max_pool_codes(pool: Node, codes: list[Node]) -> tuple[Any, tuple[Any, ...]]:
    # _low_memory_max_pool_with_offsets(x, kernel, stride, padding, dilation, ceil_mode)
    return ops.quantized.max_pool2d.default, (codes[0], *pool.args[1:6])


def _reshape_codes(reshape: Node, codes: list[Node]) -> tuple[Any, tuple[Any, ...]]:
    return ops.aten.reshape.default, (codes[0], reshape.args[1])


DATA_OPS = (
    DataOp(
        "max_pool2d",
        Family.QMAXPOOL2D,
        lambda x: F.max_pool2d(tracing.dq_activation(x), 3, 2, 1),
        _max_pool_codes,
    ),
    DataOp(
        "reshape",
        Family.QRESHAPE,
        lambda x: tracing.dq_activation(x).reshape(2, -1),
        _reshape_codes,
    ),
)


def register(pass_dict: Any) -> None:
    for op in DATA_OPS:
        example = torch.zeros(op.example_shape, dtype=torch.uint8)  # (tracing reads no value)
        region = tracing.trace(
            op.region, [example], ["x"], scalars=tracing.activation_scalars(False), ignore=(bool,)
        )
        private.register_graph_pattern(
            tracing.output_quant(region), extra_check=_same_qparams, pass_dict=pass_dict
        )(_rewriter(op))
    # cat takes any number of dequantized inputs: a list pattern, with and without a dim
    dequantized = private.CallFunction(ops.DEQUANTIZE[0], *(private.Arg() for _ in range(6)))
    # a requantize with the dequantize's own qparams (XNNPACK's shared-qparams views leave
    # them, once quant lift-up moved the quantize over its view) gives back the codes
    requantized = private.CallFunction(
        ops.DEQUANTIZE[0], private.KeywordArg("x"), *(private.Arg() for _ in range(5))
    )
    private.register_graph_pattern(
        tracing.output_quant(requantized), extra_check=_same_qparams, pass_dict=pass_dict
    )(_requantize)
    for dim in ((private.KeywordArg("dim"),), ()):
        cat = private.CallFunction(ops.aten.cat.default, private.ListOf(dequantized), *dim)
        private.register_graph_pattern(
            tracing.output_quant(cat), extra_check=_same_qparams, pass_dict=pass_dict
        )(_cat)


def _same_qparams(match: Any) -> bool:
    """Every input dequantize and the output quantize use one (scale, zero point, range,
    dtype): only then is the op on codes the op on values."""
    ctx = current()
    quant = match.output_node()
    wanted = quant.args[1:]
    for dq in (n for n in match.nodes if n.target is ops.DEQUANTIZE[0]):
        scale, *rest = dq.args[1:]
        same_scale = math.isclose(cast(float, scale), cast(float, wanted[0]), rel_tol=1e-5)
        if not (same_scale and tuple(rest) == tuple(wanted[1:])):
            return ctx.decline(quant, "its input and output qparams differ")
    return True


def _rewriter(op: DataOp) -> Callable[..., None]:
    def rewrite(match: Any, *args: Any, **kwargs: Any) -> None:
        moving = next(
            n for n in match.nodes if n.target not in (*ops.DEQUANTIZE, *ops.QUANTIZE, getitem)
        )
        target, new_args = op.replace(moving, [kwargs["x"]])
        _replace(match, target, new_args, op.name, op.family)

    return rewrite


def _cat(match: Any, *args: Any, **kwargs: Any) -> None:
    cat = next(n for n in match.nodes if n.target is ops.aten.cat.default)
    codes = [dq.args[0] for dq in cat.args[0]]
    _replace(match, ops.aten.cat.default, (codes, *cat.args[1:]), "cat", Family.QCAT)


def _requantize(match: Any, *args: Any, **kwargs: Any) -> None:
    match.output_node().replace_all_uses_with(kwargs["x"])
    match.erase_nodes()
    current().record("requantize with the same qparams dropped (the codes themselves)")


def _replace(match: Any, target: Any, new_args: tuple[Any, ...], name: str, family: Family) -> None:
    ctx = current()
    quant = match.output_node()
    with ctx.graph.inserting_before(quant):
        on_codes = ctx.call(target, new_args)
    quant.replace_all_uses_with(on_codes)
    match.erase_nodes()
    ctx.record(f"{name} on int8 codes ({val(on_codes).dtype})", family, len(match.nodes), match)

