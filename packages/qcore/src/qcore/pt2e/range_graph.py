"""What the int8 range choice reads of a weighted node (conv or linear) in an exported graph:
its reduction geometry, its input's shape, its multiply-adds, over how many positions its
output may be pooled, and whether its error reaches the network only through a gate."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor
from torch.fx import Node

from qcore.int8.saturation import Geometry

__all__ = [
    "ADDS",
    "WEIGHTED_OPS",
    "geometry_of",
    "input_shape_of",
    "is_gated",
    "macs_of",
    "positions_of",
]

_aten = torch.ops.aten
#: aten op -> number of spatial dims (0: linear). Their arguments: input, weight, bias,
#: then for convolutions stride, padding, dilation, groups.
WEIGHTED_OPS: Mapping[Any, int] = {
    _aten.linear.default: 0,
    _aten.conv1d.default: 1,
    _aten.conv2d.default: 2,
    _aten.conv3d.default: 3,
}
_CONVS = frozenset(op for op, dims in WEIGHTED_OPS.items() if dims)
#: A tensor add: a residual connection where both operands are tensors.
ADDS = frozenset({_aten.add.Tensor, _aten.add_.Tensor})


def _spatial(value: Any, dims: int, default: int) -> tuple[int, ...] | None:
    if value is None:
        return (default,) * dims
    if isinstance(value, int):
        return (value,) * dims
    if isinstance(value, list | tuple) and all(isinstance(v, int) for v in value):
        return tuple(value) * dims if len(value) == 1 else tuple(value)
    return None


def geometry_of(node: Node, dims: int) -> Geometry | None:
    """The op's reduction geometry from its aten arguments (defaults may be omitted)."""
    if dims == 0:
        return Geometry.linear()
    args = [*node.args, *([None] * (7 - len(node.args)))]
    stride, padding, dilation = (
        _spatial(args[3], dims, 1),
        _spatial(args[4], dims, 0),
        _spatial(args[5], dims, 1),
    )
    groups = 1 if args[6] is None else args[6]
    if stride is None or padding is None or dilation is None or not isinstance(groups, int):
        return None
    return Geometry.conv(stride, padding, dilation, groups)


def input_shape_of(node: Node) -> tuple[int | None, ...] | None:
    """The shape of the layer's input as exported, with the batch left open; None when
    export recorded none."""
    source = node.args[0]
    value = source.meta.get("val") if isinstance(source, Node) else None
    if not isinstance(value, Tensor) or value.dim() < 2:
        return None
    sizes = [size if isinstance(size, int) else None for size in value.shape]
    return (None, *sizes[1:])


def macs_of(node: Node) -> int | None:
    """Multiply-adds per sample of a conv or linear node: output elements per sample times
    the weight's elements per output channel (None where a size is symbolic)."""
    out = node.meta.get("val")
    weight = node.args[1].meta.get("val") if isinstance(node.args[1], Node) else None
    if not isinstance(out, Tensor) or not isinstance(weight, Tensor) or out.dim() < 2:
        return None
    sizes = [*out.shape[1:], *weight.shape[1:]]
    if not all(isinstance(size, int) for size in sizes):
        return None
    return math.prod(int(size) for size in sizes)


def positions_of(node: Node) -> int:
    """Over how many output positions per channel a network may pool this layer's output:
    a conv's spatial size (1 when a size is symbolic); 1 for a linear, whose tokens are
    read one by one (a class token, a per-token head)."""
    out = node.meta.get("val")
    if node.target not in _CONVS or not isinstance(out, Tensor) or out.dim() < 3:
        return 1
    sizes = out.shape[2:]
    if not all(isinstance(size, int) for size in sizes):
        return 1
    return math.prod(int(size) for size in sizes)


_GATES = frozenset({_aten.sigmoid.default, _aten.hardsigmoid.default})
#: Ops a path to a gate may pass through: activations between a squeeze-excitation's layers.
_ON_THE_WAY = frozenset(
    {_aten.relu.default, _aten.relu_.default, _aten.hardtanh.default, _aten.silu.default,
     _aten.hardswish.default, _aten.gelu.default}
)  # fmt: skip


def is_gated(node: Node, depth: int = 4) -> bool:
    """Whether every path from the layer's output meets a gate (a squeeze-excitation's
    sigmoid) first, through activations and the input of further layers: its error
    reaches the network through the gate's slope."""
    if not node.users:
        return False
    for user in node.users:
        if user.target in _GATES:
            continue
        passes = user.target in _ON_THE_WAY or (
            user.target in WEIGHTED_OPS and user.args[0] is node
        )
        if not (passes and depth > 0 and is_gated(user, depth - 1)):
            return False
    return True
