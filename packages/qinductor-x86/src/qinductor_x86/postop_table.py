"""The x86 post-ops, one row each: the single declaration both halves of this package read.

The quantizer's annotators fuse a row after the layer calls it names (recognising it by
its module types and functions, as torchao 0.18's recipe does), and the lowering traces
its PyTorch and fuses it into the oneDNN int8 kernels it names, with oneDNN's post-op
attribute. The two lists of layers differ on purpose: the quantizer follows torchao's
recipe, the lowering fuses whatever torch 2.13's kernels take. Adding a post-op is adding a
row here; rows keep torchao's order, which decides who wins a node two patterns could take.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

#: oneDNN's int8 kernels, a conv by its spatial dims: torch 2.13's take different post-ops
#: (conv3d none, conv1d relu alone, conv2d no linear-only ones, and only conv2d an add).
KERNELS = frozenset({"conv1d", "conv2d", "conv3d", "linear"})


@dataclass(frozen=True)
class PostOp:
    """One post-op. ``fn(x, *scalars)`` is its PyTorch (None: the lowering reaches it
    through another row, as ReLU6 is a hardtanh); ``attr``/``algorithm`` are oneDNN's
    names; ``after`` the layer calls the quantizer fuses it after; ``kernels`` the oneDNN
    int8 kernels that fuse it; ``after_add``: it may also follow a fused add.

    ``scalars``: the names of its arguments after ``x``, which the lowering's patterns
    capture (any values match; the kernel gets the matched ones). ``clamps``: for a
    clamp-like post-op, its bounds (each a number or one of its scalars): a narrower
    output quant range then merges with it into one oneDNN hardtanh."""

    name: str
    _: KW_ONLY  # a row reads as what each of its values is
    fn: Callable[..., torch.Tensor] | None
    attr: str = ""
    sources: tuple[Any, ...] = ()
    after: frozenset[str] = frozenset()
    kernels: frozenset[str] = KERNELS
    scalars: tuple[str, ...] = ()
    algorithm: str = ""
    after_add: bool = False
    clamps: tuple[float | str, float | str] | None = None

    def __post_init__(self) -> None:
        """A row's mistakes, named with the row, when the table is built (not at the
        first model that reaches it)."""
        problems = []
        for field in ("after", "kernels"):
            unknown = sorted(set(getattr(self, field)) - KERNELS)
            if unknown:
                problems.append(f"{field} names {unknown}, not among {sorted(KERNELS)}")
        if self.fn is not None and not self.attr:
            problems.append("fn given without the oneDNN attr the lowering fuses it as")
        if self.fn is None and self.attr:
            problems.append(f"attr {self.attr!r} given without the fn the lowering traces")
        if self.after and not self.sources:
            problems.append("after given without the sources the quantizer recognises it by")
        if self.sources and not any(isinstance(s, type) for s in self.sources):
            problems.append("sources hold no module class, which its example model is built from")
        named = [b for b in self.clamps or () if isinstance(b, str)]
        missing = [b for b in named if b not in self.scalars]
        if missing:
            problems.append(f"clamps name {missing}, which scalars {list(self.scalars)} lack")
        if problems:
            raise ValueError(f"post-op row {self.name!r}: " + "; ".join(problems))

    def bounds(self, values: Sequence[float]) -> tuple[float, float]:
        """The clamp's bounds, given the values of :attr:`scalars`."""
        if self.clamps is None:
            raise ValueError(f"post-op {self.name} is not clamp-like")
        named = dict(zip(self.scalars, values, strict=True))
        low, high = (named[b] if isinstance(b, str) else b for b in self.clamps)
        return low, high

    @property
    def label(self) -> str:
        """How a user knows it: its module's name (``ReLU6``), else its own."""
        return next((s.__name__ for s in self.sources if isinstance(s, type)), self.name)


@dataclass(frozen=True)
class BinaryPostOp:
    """A post-op with a second input, on either side; the lowering writes it into the
    kernel as ``attr``, or as ``in_place`` into a buffer nobody reads afterwards."""

    name: str
    fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    attr: str
    in_place: str
    sources: tuple[Any, ...]
    kernels: frozenset[str]


_CONV2D, _LINEAR = frozenset({"conv2d"}), frozenset({"linear"})
_CONV2D_LINEAR = _CONV2D | _LINEAR

POST_OPS: tuple[PostOp, ...] = (
    PostOp("relu", fn=torch.relu, attr="relu", sources=(nn.ReLU, F.relu, F.relu_),
           after=frozenset({"conv2d", "conv1d", "linear"}), kernels=KERNELS - {"conv3d"},
           after_add=True, clamps=(0.0, math.inf)),
    PostOp("hardtanh", fn=F.hardtanh, attr="hardtanh",
           sources=(nn.Hardtanh, F.hardtanh, F.hardtanh_), after=_CONV2D,
           kernels=_CONV2D_LINEAR, scalars=("min_value", "max_value"),
           clamps=("min_value", "max_value")),
    PostOp("hardswish", fn=F.hardswish, attr="hardswish", sources=(nn.Hardswish,),
           after=_CONV2D, kernels=_CONV2D_LINEAR),
    # the lowering reaches it through the hardtanh row (ReLU6 is a hardtanh)
    PostOp("relu6", fn=None, sources=(nn.ReLU6,), after=_CONV2D),
    PostOp("silu", fn=F.silu, attr="swish", sources=(nn.SiLU,), after=_CONV2D,
           kernels=_CONV2D_LINEAR),
    PostOp("leaky_relu", fn=F.leaky_relu, attr="leaky_relu", sources=(nn.LeakyReLU,),
           after=_LINEAR, kernels=_LINEAR, scalars=("negative_slope",)),
    PostOp("tanh", fn=torch.tanh, attr="tanh", sources=(nn.Tanh,), after=_LINEAR,
           kernels=_LINEAR),
    PostOp("gelu", fn=F.gelu, attr="gelu", sources=(nn.GELU,), after=_LINEAR,
           kernels=_LINEAR, algorithm="none"),
    # nn.GELU's other form: the quantizer's gelu row already claims every nn.GELU
    PostOp("gelu(tanh)", fn=partial(F.gelu, approximate="tanh"), attr="gelu",
           kernels=_LINEAR, algorithm="tanh"),
)

ADD = BinaryPostOp(
    "add", operator.add, "add", "sum", (operator.add, torch.add, operator.iadd, "add", "add_"),
    _CONV2D_LINEAR,
)
