"""The x86 recipe as data: which calls are recognised, which fusions exist, which ops
run in int8.

Every fusion is one :class:`Fusion` row, written as the sequence of its calls
(``Fusion.of("conv2d", "add", "relu")``); the annotation it gets follows from that shape
(see :mod:`qinductor_x86.annotators`). The rows and their order are torchao 0.18's
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
#: The aten op a recognised layer call must end in for its pattern to be quantized.
LAYER_OPS: Mapping[str, frozenset[Any]] = {
    "conv2d": frozenset({aten.conv2d.default}),
    "conv1d": frozenset({aten.conv1d.default}),
    "linear": frozenset({aten.linear.default}),
    "any_linear": frozenset({aten.linear.default}),
}


def post_ops_after(layer: str, *, add: bool = False) -> tuple[PostOp, ...]:
    """The unary post-ops the recipe fuses after ``layer`` (after its fused add), in order."""
    return tuple(p for p in POST_OPS if layer in p.after and (p.after_add or not add))


#: Ops that run in int8 when their input is int8 and give int8 out, so a quantized
#: producer's int8 output flows through them (their output shares the input's qparams).
INT8_IN_INT8_OUT = frozenset(
    {
        aten.max_pool2d.default,
        aten.cat.default,
        aten.avg_pool2d.default,
        aten.adaptive_avg_pool2d.default,
        aten.flatten.using_ints,
    }
)
#: Ops a global config quantizes. One pattern holds exactly one of them.
DEFAULT_QUANTIZABLE = INT8_IN_INT8_OUT | {
    aten.conv1d.default,
    aten.conv2d.default,
    aten.linear.default,
    aten.mul.Tensor,
}
#: Ops quantized only when asked for by operator (``set_function_type_qconfig``) or by
#: module name: never by the global config.
OPT_IN_QUANTIZABLE = frozenset({aten.matmul.default})
QUANTIZABLE = DEFAULT_QUANTIZABLE | OPT_IN_QUANTIZABLE

#: Module types and functions the torchao-named setters accept, and the op each scopes.
#: (torchao 0.18 maps ``nn.Conv2d`` twice and never ``nn.Conv1d``; see the README.)
OPERATOR_OF: Mapping[Any, Any] = {
    **dict.fromkeys((nn.Conv1d, F.conv1d), aten.conv1d.default),
    **dict.fromkeys((nn.Conv2d, F.conv2d), aten.conv2d.default),
    **dict.fromkeys((nn.Linear, F.linear), aten.linear.default),
    **dict.fromkeys((nn.MaxPool2d, F.max_pool2d), aten.max_pool2d.default),
    **dict.fromkeys((nn.AvgPool2d, F.avg_pool2d), aten.avg_pool2d.default),
    **dict.fromkeys((nn.AdaptiveAvgPool2d, F.adaptive_avg_pool2d), aten.adaptive_avg_pool2d.default),
    torch.cat: aten.cat.default,
    torch.flatten: aten.flatten.using_ints,
    torch.matmul: aten.matmul.default,
    torch.mul: aten.mul.Tensor,
}


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
    def binary(self) -> int | None:
        """Position of the ``add`` in the chain, if any."""
        return self.calls.index(ADD.name) if ADD.name in self.calls else None

    @property
    def unary(self) -> bool:
        return self.calls[-1] not in {self.layer, "batch_norm", ADD.name}

    @property
    def sources(self) -> tuple[tuple[Any, ...], ...]:
        return tuple(SOURCES[c] for c in self.calls)
