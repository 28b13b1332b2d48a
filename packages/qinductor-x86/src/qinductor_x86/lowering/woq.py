"""int8 weight-only linear: ``F.linear(x, w.to(x.dtype)) * scales`` with an int8 weight and
a bf16 activation becomes ATen's ``_weight_int8pack_mm`` (the weight never leaves int8).

The family is the same layer written as PyTorch and traced at each activation layout
(2-D, 3-D, strided 3-D) plus the ``x @ w.t().to(dtype)`` spelling.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from qinductor_x86 import _torch_private as private
from qinductor_x86.lowering import ops, tracing
from qinductor_x86.lowering.context import current, val
from qinductor_x86.lowering.counters import Family


def _linear(x: torch.Tensor, w: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    return F.linear(x, w.to(x.dtype)) * scales


def _matmul(x: torch.Tensor, w: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    return torch.mm(x, w.t().to(x.dtype)) * scales


def _activation(shape: tuple[int, ...], transposed: bool = False) -> torch.Tensor:
    x = torch.randn(shape, dtype=torch.bfloat16)
    return x.transpose(0, 1) if transposed else x


#: (spelling, example activation)
FORMS: tuple[tuple[Callable[..., torch.Tensor], torch.Tensor], ...] = (
    (_linear, _activation((4, 16))),
    (_linear, _activation((2, 3, 16))),
    (_linear, _activation((3, 2, 16), transposed=True)),
    (_matmul, _activation((4, 16))),
)


def register(pass_dict: Any) -> None:
    weight = torch.randint(-128, 127, (8, 16), dtype=torch.int8)
    scales = torch.rand(8, dtype=torch.bfloat16)
    for fn, x in FORMS:
        pattern = tracing.trace(fn, [x, weight, scales], ["x", "w", "scales"])
        private.register_graph_pattern(pattern, extra_check=_check, pass_dict=pass_dict)(_rewrite)


def _check(match: Any) -> bool:
    """ATen's kernel takes a bf16 activation, an int8 (out, in) weight that is a frozen
    constant, and one bf16 scale per output channel (torch's conditions)."""
    ctx = current()
    x, w, scales = (val(match.kwargs[k]) for k in ("x", "w", "scales"))
    if ctx.constant(match.kwargs["w"]) is None or x is None or scales is None:
        return False
    return (
        x.dtype == torch.bfloat16
        and w.dtype == torch.int8
        and w.dim() == 2
        and scales.dtype == torch.bfloat16
        and tuple(scales.shape) == (w.shape[0],)
    )


def _rewrite(match: Any, *args: Any, **kwargs: Any) -> None:
    ctx = current()
    out = match.output_node()
    x, w = kwargs["x"], kwargs["w"]
    x_shape = list(val(x).shape)
    with ctx.graph.inserting_before(out):
        rows = ctx.call(ops.aten.reshape.default, (x, [-1, x_shape[-1]]))
        mm = ctx.call(ops.WEIGHT_ONLY, (rows, w, kwargs["scales"]))
        result = ctx.call(ops.aten.reshape.default, (mm, [*x_shape[:-1], val(w).shape[0]]))
    out.replace_all_uses_with(result)
    match.erase_nodes()
    ctx.record("int8 weight-only linear", Family.WOQ, len(match.nodes), match)
