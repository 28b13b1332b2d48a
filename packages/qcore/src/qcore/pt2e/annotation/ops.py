"""The ATen operator sets of the PT2E flow and the x86 lowering, each declared once.

Annotators, reports, the derived quantizer and the lowering's passes import them from
here (the value-moving ones: :data:`VIEWS`, :data:`MOVES`, :data:`SAME_VALUES`); a plugin
that needs one of these sets imports it rather than spelling the overloads again
(``tests/test_op_sets.py`` fails on a second declaration of the same set).
Importing this module imports torch and nothing else.
"""

from __future__ import annotations

import torch

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
ADD = frozenset({aten.add.Tensor, aten.add_.Tensor})
MUL = frozenset({aten.mul.Tensor, aten.mul_.Tensor})
CAT = frozenset({aten.cat.default})
ADAPTIVE_AVG_POOL2D = frozenset({aten.adaptive_avg_pool2d.default})
MAX_POOL2D = frozenset({aten.max_pool2d.default})
#: Views: the same values in another shape, read in place (``_unsafe_view`` appears only
#: after Inductor's decompositions). Lifting a quantize over one, or reading a value
#: through one, is exact.
VIEWS = frozenset(
    {
        aten.view.default,
        aten.reshape.default,
        aten.permute.default,
        aten.transpose.int,
        aten._unsafe_view.default,
    }
)
#: Ops that only move, copy, broadcast or select values of their first input (the views
#: among them): any per-value map (``+ 128`` on int8 codes, a quantize) commutes with them.
MOVES = VIEWS | {
    aten.clone.default,
    aten.contiguous.default,
    aten.expand.default,
    aten.t.default,
    aten.unsqueeze.default,
    aten.squeeze.dim,
    aten.squeeze.dims,
    aten.slice.Tensor,
    aten.select.int,
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
SHARE_QPARAMS = frozenset(
    {
        aten.relu.default,
        aten.hardtanh.default,
        aten.hardtanh_.default,
        aten.max_pool2d.default,
        aten.mean.default,
        aten.mean.dim,
        aten.permute.default,
        aten.permute_copy.default,
        aten.transpose.int,
        aten.squeeze.dim,
        aten.squeeze_copy.dim,
        aten.adaptive_avg_pool2d.default,
        aten.view_copy.default,
        aten.view.default,
        aten.reshape.default,
        aten.slice.Tensor,
        aten.slice_copy.Tensor,
        aten.flatten.using_ints,
        aten.dropout.default,
        aten.dropout_.default,
    }
)

#: The 3-D convolutions :func:`~qcore.pt2e.annotation.transforms.conv3d_as_conv2d` rewrites.
CONV3D = frozenset({aten.conv3d.default, aten.conv3d.padding})
