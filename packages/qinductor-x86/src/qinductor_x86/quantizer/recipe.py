"""The x86 recipe as data: which calls are recognised, which fusions exist, which ops
run in int8.

Every fusion is one :class:`Fusion` row, written as the sequence of its calls
(``Fusion.of("conv2d", "add", "relu")``); the annotation it gets follows from that shape
(see :mod:`qinductor_x86.quantizer.annotators`). The rows and their order are torchao 0.18's
``X86InductorQuantizer`` recipe; the order decides which pattern claims a node two
patterns could take.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

import qcore.pt2e.annotation.ops as shared_ops
from qinductor_x86.postop_table import ADD, POST_OPS, PostOp

aten = torch.ops.aten

#: Calls the recipe recognises, by name: the module types and functions torch's source
#: partitions attribute a node to (functional equivalents as torchao lists them), the
#: post-ops' from their table.
SOURCES: Mapping[str, tuple[Any, ...]] = {
    "conv2d": (nn.Conv2d, F.conv2d),
    "conv1d": (nn.Conv1d, F.conv1d),
    # fusions start from nn.Linear only; a lone linear may also be F.linear (as upstream)
    "linear": (nn.Linear,),
    "any_linear": (nn.Linear, F.linear),
    "batch_norm": (nn.BatchNorm2d, F.batch_norm),
    ADD.name: ADD.sources,
    **{p.name: p.sources for p in POST_OPS if p.sources},
}
_LINEAR_OPS = shared_ops.LINEAR
#: The aten op a recognised layer call must end in for its pattern to be quantized.
LAYER_OPS: Mapping[str, frozenset[Any]] = {
    "conv2d": frozenset({aten.conv2d.default}),
    "conv1d": frozenset({aten.conv1d.default}),
    "linear": _LINEAR_OPS,
    "any_linear": _LINEAR_OPS,
}


def post_ops_after(layer: str, *, add: bool = False) -> tuple[PostOp, ...]:
    """The unary post-ops the recipe fuses after ``layer`` (after its fused add), in order."""
    return tuple(p for p in POST_OPS if layer in p.after and (p.after_add or not add))


#: Ops that run in int8 when their input is int8 and give int8 out, so a quantized
#: producer's int8 output flows through them (their output shares the input's qparams),
#: each with the module types and functions that call it (torchao's setters scope an
#: operator by these; see the ``int8_passthrough`` annotator's ``called_as``).
INT8_IN_INT8_OUT_CALLED_AS: Mapping[Any, tuple[Any, ...]] = {
    aten.max_pool2d.default: (nn.MaxPool2d, F.max_pool2d),
    aten.cat.default: (torch.cat,),
    aten.avg_pool2d.default: (nn.AvgPool2d, F.avg_pool2d),
    aten.adaptive_avg_pool2d.default: (nn.AdaptiveAvgPool2d, F.adaptive_avg_pool2d),
    aten.flatten.using_ints: (torch.flatten,),
}
INT8_IN_INT8_OUT = frozenset(INT8_IN_INT8_OUT_CALLED_AS)


@dataclass(frozen=True)
class Fusion:
    """One fusion pattern: a layer call, then optionally batch norm (QAT graphs, before
    folding), an ``add`` with one extra input, and a unary post-op, each call feeding
    the next."""

    calls: tuple[str, ...]

    @classmethod
    def of(cls, *calls: str) -> Fusion:
        unknown = [c for c in calls if c not in SOURCES]
        if unknown or calls[0] not in LAYER_OPS:
            raise ValueError(f"Fusion{calls}: unknown calls {unknown} or no layer first")
        return cls(calls)

    @property
    def layer(self) -> str:
        return self.calls[0]

    @property
    def is_linear(self) -> bool:
        return self.layer in {"linear", "any_linear"}

    @property
    def batch_norm(self) -> bool:
        return "batch_norm" in self.calls

    @property
    def add_position(self) -> int | None:
        """Where the ``add`` is in :attr:`calls`, if the fusion has one."""
        return self.calls.index(ADD.name) if ADD.name in self.calls else None

    @property
    def ends_in_unary(self) -> bool:
        """The last call is a unary post-op."""
        return self.calls[-1] not in {self.layer, "batch_norm", ADD.name}

    @property
    def sources(self) -> tuple[tuple[Any, ...], ...]:
        return tuple(SOURCES[c] for c in self.calls)
