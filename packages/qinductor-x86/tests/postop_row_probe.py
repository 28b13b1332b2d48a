"""Quantize and compile, for each row named, a layer followed by that row's post-op, with
the post-op table edited before anything reads it:
``python postop_row_probe.py (without|added) ROW [ROW ...]``; the results come back through
``qcore.testing.fresh.emit`` as ``{row: result}``.

``without`` drops the rows from the table; ``added`` drops them and appends them again,
written here as a contributor adding those post-ops would write them (:data:`NEW_ROWS`).
Torch's own copy of the passes is switched off first (standalone mode). Run by
test_postop_table.py, one fresh interpreter per mode (the table is read once, when
the annotators and the lowering load; each row's model uses only its own post-op, so the
rows cannot stand in for one another). The rows: ``tanh`` (a plain one), ``leaky_relu`` (a
scalar argument), ``hardtanh`` (clamp-like, so a narrower output range folds into it).
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from qinductor_x86 import lowering as x86_lowering
from qinductor_x86 import postop_table as table

LINEAR, CONV2D = frozenset({"linear"}), frozenset({"conv2d"})
#: The new rows, each as one row of postop_table.py and nothing else.
NEW_ROWS = {
    # nn.Tanh after nn.Linear, fused into oneDNN's int8 linear as "tanh"
    "tanh": table.PostOp(
        "tanh", fn=torch.tanh, attr="tanh", sources=(nn.Tanh,), after=LINEAR, kernels=LINEAR
    ),
    # a scalar argument: naming it is all the lowering's patterns need to capture it
    "leaky_relu": table.PostOp(
        "leaky_relu", fn=F.leaky_relu, attr="leaky_relu", sources=(nn.LeakyReLU,), after=LINEAR,
        kernels=LINEAR, scalars=("negative_slope",),
    ),
    # clamp-like: its bounds are two of its scalars
    "hardtanh": table.PostOp(
        "hardtanh", fn=F.hardtanh, attr="hardtanh", sources=(nn.Hardtanh, F.hardtanh, F.hardtanh_),
        after=CONV2D, kernels=CONV2D | LINEAR, scalars=("min_value", "max_value"),
        clamps=("min_value", "max_value"),
    ),
}

mode, rows = sys.argv[1], sys.argv[2:]
# torch 2.13 carries its own copy of the passes, a hardtanh fusion among them: without it,
# the generated code is this lowering's alone on every torch, so it can tell the row's absence
x86_lowering.switch_off_torch_builtins()
shipped = {row: [p for p in table.POST_OPS if p.name == row] for row in rows}
table.POST_OPS = tuple(p for p in table.POST_OPS if p.name not in rows)
if mode == "added":
    table.POST_OPS += tuple(NEW_ROWS[row] for row in rows)

sys.path.insert(0, str(Path(__file__).parent))

import lowering_zoo as zoo  # noqa: E402  (after the table is edited)

import qcore  # noqa: E402
from qcore.testing.fresh import emit  # noqa: E402


class Chain(nn.Module):
    def __init__(self, first: nn.Module, act: nn.Module, second: nn.Module) -> None:
        super().__init__()
        self.first, self.act, self.second = first, act, second

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(self.act(self.first(x)))  # type: ignore[no-any-return]


#: Row -> the model, its input, the aten op of the post-op, the quantizer's options.
MODELS: dict[str, tuple[Any, ...]] = {
    "tanh": (lambda: Chain(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4)), (4, 8), torch.ops.aten.tanh.default, {}),
    "leaky_relu": (
        lambda: Chain(nn.Linear(8, 16), nn.LeakyReLU(0.2), nn.Linear(16, 4)), (4, 8),
        torch.ops.aten.leaky_relu.default, {},
    ),
    # 7-bit activations: the output range is narrower than uint8, what a clamp folds
    "hardtanh": (
        lambda: Chain(nn.Conv2d(3, 8, 3), nn.Hardtanh(-0.5, 0.75), nn.Conv2d(8, 4, 1)), (2, 3, 8, 8),
        torch.ops.aten.hardtanh.default, {"reduce_range": True},
    ),
}


def post_op_node(gm: torch.fx.GraphModule, target: Any) -> torch.fx.Node:
    return next(n for n in gm.graph.nodes if n.target == target)


def measure(row: str) -> dict[str, Any]:
    build, shape, target, options = MODELS[row]
    torch.manual_seed(0)
    model, inputs = build().eval(), (zoo.example(*shape),)
    exported = torch.export.export(model, inputs).module()
    annotated = qcore.get_quantizer("x86", **options).annotate(copy.deepcopy(exported))
    converted = zoo.quantize(model, inputs, qcore.get_quantizer("x86", **options))
    # the post-op's output quantize, as converted: (scale, zero point, qmin, qmax)
    quantize = next(iter(post_op_node(converted, target).users))
    lowered = zoo.lower(converted, inputs)
    return {
        "shipped_row_is_the_new_row": shipped[row] == [NEW_ROWS[row]],
        "annotated": "quantization_annotation" in post_op_node(annotated, target).meta,
        "lowered": dict(lowered.report.lowered),
        "kernel_lines": [line.strip() for line in lowered.code.splitlines() if "torch.ops.onednn." in line],
        "output_qparams": [quantize.args[i] for i in range(1, 5)],
        "codes": lowered.codes_json(),
    }


emit({row: measure(row) for row in rows})
