"""The ATen operator sets of the PT2E flow and the x86 lowering, each declared once.

Annotators, reports, the derived quantizer and the lowering's passes import them from
here; a plugin that needs one of these sets imports it rather than spelling the overloads
again (``tests/test_op_sets.py`` fails on a second declaration of the same set). The ops
that only move values are one table for every package and op space, :data:`VALUE_MOVES`
(each op's ATen overloads and FX forms): :data:`VIEWS`, :data:`MOVES`,
:data:`SAME_VALUES`, :data:`SHARE_QPARAMS` and the backends' FX lists (:func:`fx_forms`)
are built from it. Importing this module imports torch and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from qcore.pt2e.range_graph import ADDS

aten = torch.ops.aten
RELU = frozenset({aten.relu.default, aten.relu_.default})
LINEAR = frozenset({aten.linear.default})
CONV = frozenset(
    {
        aten.conv1d.default,
        aten.conv1d.padding,
        aten.conv2d.default,
        aten.conv2d.padding,
        aten.conv3d.default,
        aten.conv3d.padding,
    }
)
#: Overloads only, as in every set here: export records each call as one, never as an
#: overload packet (``Annotator.handles`` matches a packet a user scopes by).
CONV_TRANSPOSE = frozenset(
    {aten.conv_transpose1d.default, aten.conv_transpose2d.input, aten.conv_transpose3d.input}
)
ADD = ADDS  # (declared where the range plan, a layer below, reads residual adds)
MUL = frozenset({aten.mul.Tensor, aten.mul_.Tensor})
CAT = frozenset({aten.cat.default})
ADAPTIVE_AVG_POOL2D = frozenset({aten.adaptive_avg_pool2d.default})
MAX_POOL2D = frozenset({aten.max_pool2d.default})


class ValueMove(NamedTuple):
    """An op that only moves, copies, broadcasts, selects or stacks values: any per-value
    map (``+ 128`` on int8 codes, a quantize) commutes with it, and its output can keep
    its input's qparams. Each space a quantizer meets it in, in one row."""

    #: the ATen overloads an exported graph records for it
    aten: frozenset[Any] = frozenset()
    #: what an FX graph calls it by: torch functions, module types, Tensor method names
    #: (a ``qcore.fx.patterns.Op`` each; that module imports this one)
    fx: tuple[Any, ...] = ()
    #: a reshaping or permuting view, the kind torch's quant lift-up lifts a quantize over
    view: bool = False


#: The ops that only move values, declared once for every package and both op spaces: a
#: set of them anywhere else is built from these rows (``tests/test_op_sets.py``). Each
#: row's FX forms of one kind are in the order torch's backend configs list them.
VALUE_MOVES: Mapping[str, ValueMove] = {
    # ``_unsafe_view`` appears only after Inductor's decompositions
    "view": ValueMove(
        frozenset({aten.view.default, aten._unsafe_view.default}), ("view",), view=True
    ),
    "reshape": ValueMove(frozenset({aten.reshape.default}), ("reshape",), view=True),
    "permute": ValueMove(frozenset({aten.permute.default}), (torch.permute, "permute"), view=True),
    "transpose": ValueMove(
        frozenset({aten.transpose.int}), (torch.transpose, "transpose"), view=True
    ),
    "t": ValueMove(frozenset({aten.t.default})),
    "clone": ValueMove(frozenset({aten.clone.default})),
    "contiguous": ValueMove(frozenset({aten.contiguous.default}), ("contiguous",)),
    "expand": ValueMove(frozenset({aten.expand.default})),
    "unsqueeze": ValueMove(
        frozenset({aten.unsqueeze.default}), (torch.unsqueeze, "unsqueeze", "unsqueeze_")
    ),
    "squeeze": ValueMove(
        frozenset({aten.squeeze.dim, aten.squeeze.dims}), (torch.squeeze, "squeeze", "squeeze_")
    ),
    "slice": ValueMove(frozenset({aten.slice.Tensor})),
    "select": ValueMove(frozenset({aten.select.int})),
    "flatten": ValueMove(frozenset({aten.flatten.using_ints}), (nn.Flatten, torch.flatten)),
    # the copying forms of views, which ExecuTorch's edge dialect (it has no views) records
    "permute_copy": ValueMove(frozenset({aten.permute_copy.default}), (torch.permute_copy,)),
    "view_copy": ValueMove(frozenset({aten.view_copy.default})),
    "squeeze_copy": ValueMove(frozenset({aten.squeeze_copy.dim})),
    "slice_copy": ValueMove(frozenset({aten.slice_copy.Tensor})),
    "narrow": ValueMove(fx=(torch.narrow,)),
    "repeat": ValueMove(fx=("repeat",)),
    "repeat_interleave": ValueMove(fx=(torch.repeat_interleave, "repeat_interleave")),
    "detach": ValueMove(fx=("detach", "detach_")),
    "resize_": ValueMove(fx=("resize_",)),
    "identity": ValueMove(fx=(nn.Identity,)),
    "pixel_shuffle": ValueMove(fx=(nn.PixelShuffle, F.pixel_shuffle)),
    "pixel_unshuffle": ValueMove(fx=(nn.PixelUnshuffle, F.pixel_unshuffle)),
    "stack": ValueMove(fx=(torch.stack,)),
}  # fmt: skip


def fx_forms(*moves: str, kind: Literal["module", "function", "method"]) -> tuple[Any, ...]:
    """The FX forms of one kind of the named rows of :data:`VALUE_MOVES`, in order: torch's
    backend configs list module types, functions and method names apart, and the parity
    tests hold their order (torch breaks ties between patterns by it)."""
    return tuple(form for move in moves for form in VALUE_MOVES[move].fx if _kind(form) == kind)


def _kind(form: Any) -> str:
    return "module" if isinstance(form, type) else "method" if isinstance(form, str) else "function"


_MOVES_ATEN: frozenset[Any] = frozenset().union(*(m.aten for m in VALUE_MOVES.values()))

#: Views: the same values in another shape, read in place. Lifting a quantize over one,
#: or reading a value through one, is exact.
VIEWS = frozenset().union(*(m.aten for m in VALUE_MOVES.values() if m.view))
#: The value moves the PT2E walks (a mask's source, x86's ``+ 128`` on int8 codes) look
#: through: not the copying forms (ExecuTorch's edge dialect, which no such walk reads)
#: nor flatten, which none of the walks' tests (``test_mask_through_ops``, x86's signed
#: lowering) covers yet.
MOVES = _MOVES_ATEN - {
    aten.permute_copy.default,
    aten.view_copy.default,
    aten.squeeze_copy.dim,
    aten.slice_copy.Tensor,
    aten.flatten.using_ints,
}
#: What holds its first input's values, moved (:data:`MOVES`) or cast to another dtype.
SAME_VALUES = MOVES | {
    aten.to.dtype,
    aten.to.dtype_layout,
    aten._to_copy.default,
    torch.ops.prims.convert_element_type.default,
}
#: Ops whose output keeps its input's qparams: they move or select values, or clamp at a
#: bound the input range already contains. Dropout is identity in a deployed model.
#: The moves are torchao's XNNPACK quantizer's and the other spellings of them export
#: records (``x.transpose``, ``x.reshape``, ``x[:, a:b]``); the ones left out are shared
#: by neither (``packages/qcore/tests/test_annotation_op_sets.py`` holds both lists).
SHARE_QPARAMS = (
    _MOVES_ATEN
    - {
        aten._unsafe_view.default,
        aten.clone.default,
        aten.contiguous.default,
        aten.expand.default,
        aten.t.default,
        aten.unsqueeze.default,
        aten.squeeze.dims,
        aten.select.int,
    }
) | {
    aten.relu.default,
    aten.hardtanh.default,
    aten.hardtanh_.default,
    aten.max_pool2d.default,
    aten.mean.default,
    aten.mean.dim,
    aten.adaptive_avg_pool2d.default,
    aten.dropout.default,
    aten.dropout_.default,
}

#: The 3-D convolutions :func:`~qcore.pt2e.annotation.transforms.conv3d_as_conv2d` rewrites.
CONV3D = frozenset({aten.conv3d.default, aten.conv3d.padding})
