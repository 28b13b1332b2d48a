"""The oneDNN int8 kernels this lowering emits, one typed description each.

A kernel's arguments are positional in its schema (``onednn::qconv_pointwise`` takes 17).
Each kernel here is a frozen dataclass whose fields are those arguments, by name, in the
schema's order: :meth:`KernelArgs.of` reads a call node, :meth:`KernelArgs.to_args`
writes a call's arguments. Rewrites name what they read and change (``conv.o_dtype``,
``replace(conv, attr="relu")``), never a position. A field holds a graph node or a
constant, whichever the call has.

:data:`KERNELS` then says, per op overload, which description it takes, which layer kind
it computes, and torch's counter family for lowering it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar, Self

from torch.fx import Node

from qinductor_x86.lowering import ops
from qinductor_x86.lowering.counters import Family

#: A node or a constant, whichever the call holds.
Arg = Any


@dataclass(frozen=True)
class KernelArgs:
    """Fields in the schema's positional order (subclasses declare them)."""

    #: The argument torch's lowering handler realizes into a buffer first (a binary
    #: post-op's extra input), or None.
    realized: ClassVar[str | None] = None

    @classmethod
    def of(cls, node: Node) -> Self:
        """The arguments of call ``node`` (every kernel call here is positional)."""
        if node.kwargs or len(node.args) != len(fields(cls)):
            raise ValueError(f"{node.format_node()} is no positional call of {cls.__name__}")
        return cls(*node.args)

    def to_args(self) -> tuple[Arg, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))

    @classmethod
    def position(cls, name: str) -> int:
        return next(i for i, f in enumerate(fields(cls)) if f.name == name)


def float_output(o_dtype: Arg) -> dict[str, Arg]:
    """The unary kernels' tail as weight prepack writes it: a float ``o_dtype`` output and
    no post-op (post-op fusion may grow both later)."""
    return {"o_scale": 1.0, "o_zp": 0, "o_dtype": o_dtype, "attr": "none", "scalars": [], "algorithm": ""}


@dataclass(frozen=True)
class _Operands(KernelArgs):
    """The arguments every int8 kernel here starts with, in this order: the uint8 input
    and its qparams, the prepacked weight and its qparams (a dataclass puts a base's
    fields first, so each kernel below continues the schema from here)."""

    x: Arg
    x_scale: Arg
    x_zp: Arg
    w: Arg
    w_scale: Arg
    w_zp: Arg


@dataclass(frozen=True)
class QConv(_Operands):
    """``onednn::qconv_pointwise`` (``.default``: float activation qparams, ``.tensor``:
    tensors): a conv on uint8 codes and a prepacked weight, then a unary post-op ``attr``
    and, with an int8 ``o_dtype``, the output quantize."""

    bias: Arg
    stride: Arg
    padding: Arg
    dilation: Arg
    groups: Arg
    o_scale: Arg
    o_zp: Arg
    o_dtype: Arg
    attr: str
    scalars: Arg
    algorithm: Arg


@dataclass(frozen=True)
class QConvBinary(_Operands):
    """``onednn::qconv2d_pointwise.binary``: a conv whose result is added in place into
    ``accum`` (oneDNN's "sum"), then ``unary_attr`` and the output quantize."""

    realized: ClassVar[str | None] = "accum"

    accum: Arg
    bias: Arg
    stride: Arg
    padding: Arg
    dilation: Arg
    groups: Arg
    o_scale: Arg
    o_zp: Arg
    o_dtype: Arg
    accum_scale: Arg
    accum_zp: Arg
    binary_attr: str
    alpha: Arg
    unary_attr: Arg
    unary_scalars: Arg
    unary_algorithm: Arg


@dataclass(frozen=True)
class QLinear(_Operands):
    """``onednn::qlinear_pointwise`` (``.default`` / ``.tensor`` as for :class:`QConv`)."""

    bias: Arg
    o_scale: Arg
    o_zp: Arg
    o_dtype: Arg
    attr: str
    scalars: Arg
    algorithm: Arg


@dataclass(frozen=True)
class QLinearBinary(_Operands):
    """``onednn::qlinear_pointwise.binary`` (``.binary_tensor``): a linear, then
    ``binary_attr`` with ``other`` ("add", or "sum" in place into it), then ``unary_attr``."""

    realized: ClassVar[str | None] = "other"

    other: Arg
    bias: Arg
    o_scale: Arg
    o_zp: Arg
    o_dtype: Arg
    other_scale: Arg
    other_zp: Arg
    binary_attr: str
    alpha: Arg
    unary_attr: Arg
    unary_scalars: Arg
    unary_algorithm: Arg


@dataclass(frozen=True)
class Convolution(KernelArgs):
    """``aten.convolution``, the float conv a prepacked ``QConv`` replaces."""

    input: Arg
    weight: Arg
    bias: Arg
    stride: Arg
    padding: Arg
    dilation: Arg
    transposed: Arg
    output_padding: Arg
    groups: Arg


@dataclass(frozen=True)
class Kernel:
    """One kernel op overload: its arguments, the layer kind it computes ("conv",
    "linear"), and torch's counter family for lowering it to an external kernel."""

    args: type[QConv | QConvBinary | QLinear | QLinearBinary]
    kind: str
    lower_counter: Family


_CONV = Kernel(QConv, "conv", Family.QCONV_UNARY_LOWER)
_CONV_BINARY = Kernel(QConvBinary, "conv", Family.QCONV_BINARY_LOWER)
_LINEAR = Kernel(QLinear, "linear", Family.QLINEAR_UNARY_LOWER)
_LINEAR_BINARY = Kernel(QLinearBinary, "linear", Family.QLINEAR_BINARY_LOWER)

#: The oneDNN int8 kernels this lowering emits (and torch's copy emits): what "lowered"
#: means. Each op's two overloads take the activation's qparams as floats or as tensors.
KERNELS: dict[Any, Kernel] = {
    ops.QCONV: _CONV,
    ops.QCONV_TENSOR: _CONV,
    ops.QCONV_BINARY: _CONV_BINARY,
    ops.QCONV_BINARY_TENSOR: _CONV_BINARY,
    ops.QLINEAR: _LINEAR,
    ops.QLINEAR_TENSOR: _LINEAR,
    ops.QLINEAR_BINARY: _LINEAR_BINARY,
    ops.QLINEAR_BINARY_TENSOR: _LINEAR_BINARY,
}
INT8_KERNELS = frozenset(KERNELS)
#: The kernels a post-op can still be fused into (the plain forms weight prepack emits),
#: and the binary kernel each grows into with an add.
BINARY_OF: dict[Any, Any] = {
    ops.QCONV: ops.QCONV_BINARY,
    ops.QLINEAR: ops.QLINEAR_BINARY,
    ops.QLINEAR_TENSOR: ops.QLINEAR_BINARY_TENSOR,
}
