"""Patterns written as plain PyTorch functions, traced into Inductor patterns.

A pattern family here is a small function of its inputs (``F.linear(dq(x), dq(w), b)``,
``F.hardswish(x)``) traced with Inductor's own decompositions (``fwd_only``), so a pattern
has exactly the form the graph it is matched against has, whatever the decomposition of an
op is in this torch. Scalars the pattern must capture (quantization parameters, a clamp's
bounds) are traced with distinctive placeholder values and turned into keyword arguments
(``scalar_workaround``); lists (sizes, strides) are wildcards, which handlers read from the
matched nodes and check.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.fx.immutable_collections import immutable_list

from qinductor_x86 import _torch_private as private
from qinductor_x86 import postop_table
from qinductor_x86.lowering.ops import qd

#: Placeholder values for traced scalars. Each is used by exactly one argument and appears
#: nowhere else in a traced graph (no 0, 1, 2, 3, 6 or 0.5: decompositions bake those in).
#: The post-ops' scalars get theirs from :func:`placeholder`.
MAGIC: dict[str, float | int] = {
    "x_scale": 0.0421875,
    "x_zp": 37,
    "x_qmin": 11,
    "x_qmax": 243,
    "w_qmin": -121,
    "w_qmax": 119,
    "groups": 5,
}
#: The post-ops' scalars' placeholders: ``FIRST + STEP * i`` for the i-th scalar name of
#: the post-op table. Eighths off the integers, so none is a value above or one a
#: decomposition bakes in, and increasing, so a clamp's low bound (written first) traces
#: below its high one.
FIRST, STEP = -1.375, 6.0


def placeholder(name: str) -> float | int:
    """The traced value of scalar ``name``: :data:`MAGIC`, else a post-op's scalar, read
    from the post-op table (so a new row's scalars need no entry here)."""
    if name in MAGIC:
        return MAGIC[name]
    names = list(dict.fromkeys(s for p in postop_table.POST_OPS for s in p.scalars))
    if name not in names:
        raise KeyError(f"no traced scalar {name!r}: not a qparam and no post-op's scalar")
    return FIRST + STEP * names.index(name)


def trace(
    fn: Callable[..., torch.Tensor],
    examples: Sequence[Any],
    argnames: Sequence[str],
    *,
    scalars: Sequence[str] = (),
    ignore: tuple[type, ...] = (),
) -> Any:
    """The Inductor pattern of ``fn`` as Inductor sees it after freezing's normalisation.

    Lists (sizes, strides, permutations) are wildcards; so are the types in ``ignore``.
    """
    gm = private.fwd_only(fn, list(examples))
    private.normalize_like_freezing(gm)
    return private.fx_to_pattern(
        gm,
        ignore_types=(list, immutable_list, *ignore),
        argnames=list(argnames),
        scalar_workaround={name: placeholder(name) for name in scalars},
    )


def dq_activation(x: torch.Tensor, scale: Any = None, zero_point: Any = None) -> torch.Tensor:
    """A uint8 activation's dequantize with traced scalars, or the ``.tensor`` overload when
    scale and zero point are tensors (dynamic quantization computes them at run time)."""
    qmin, qmax = MAGIC["x_qmin"], MAGIC["x_qmax"]
    if scale is None:
        return qd.dequantize_per_tensor.default(  # type: ignore[no-any-return]
            x, MAGIC["x_scale"], MAGIC["x_zp"], qmin, qmax, torch.uint8
        )
    return qd.dequantize_per_tensor.tensor(  # type: ignore[no-any-return]
        x, scale, zero_point, qmin, qmax, torch.uint8
    )


def dq_weight(w: torch.Tensor, scale: torch.Tensor, zero_point: torch.Tensor) -> torch.Tensor:
    """A per-output-channel int8 weight's dequantize (axis 0, as PT2E converts them)."""
    return qd.dequantize_per_channel.default(  # type: ignore[no-any-return]
        w, scale, zero_point, 0, MAGIC["w_qmin"], MAGIC["w_qmax"], torch.int8
    )


def activation_scalars(dynamic: bool) -> tuple[str, ...]:
    """The traced scalars of ``dq_activation`` (dynamic: scale and zero point are inputs)."""
    return ("x_qmin", "x_qmax") if dynamic else ("x_scale", "x_zp", "x_qmin", "x_qmax")


def output_quant(pattern: Any) -> Any:
    """``pattern`` followed by a uint8/int8 per-tensor quantize of its result."""
    if hasattr(pattern, "users"):
        # a traced pattern's root has the users of a graph output (none); here it has one
        pattern = copy.copy(pattern)
        pattern.users = 1
    return private.CallFunction(
        qd.quantize_per_tensor.default,
        pattern,
        private.KeywordArg("o_scale"),
        private.KeywordArg("o_zp"),
        private.KeywordArg("o_qmin"),
        private.KeywordArg("o_qmax"),
        private.KeywordArg("o_dtype"),
    )
