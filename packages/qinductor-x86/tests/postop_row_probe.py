"""Quantize and compile ``Linear → Tanh → Linear`` with the post-op table edited before
anything reads it: ``python postop_row_probe.py (without|added)``; the result comes back through
``qcore.testing.fresh.emit``.

``without`` drops the tanh row; ``added`` drops it and appends it again, written here as a
contributor adding a post-op would write it. Run by test_postop_table.py, each mode in a
fresh interpreter (the table is read once, when the annotators and the lowering load).
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import torch
from torch import nn

from qinductor_x86 import postop_table as table

#: The new row: nn.Tanh after nn.Linear, fused into oneDNN's int8 linear as "tanh".
LINEAR = frozenset({"linear"})
TANH = table.PostOp("tanh", torch.tanh, "tanh", (nn.Tanh,), after=LINEAR, kernels=LINEAR)

mode = sys.argv[1]
shipped = [p for p in table.POST_OPS if p.name == "tanh"]
table.POST_OPS = tuple(p for p in table.POST_OPS if p.name != "tanh")
if mode == "added":
    table.POST_OPS += (TANH,)

sys.path.insert(0, str(Path(__file__).parent))

import lowering_zoo as zoo  # noqa: E402  (after the table is edited)
from torchao.quantization.pt2e.quantizer.quantizer import Q_ANNOTATION_KEY  # noqa: E402

import qcore  # noqa: E402
from qcore.testing.fresh import emit  # noqa: E402


class LinearTanh(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))  # type: ignore[no-any-return]


def tanh_node(gm: torch.fx.GraphModule) -> torch.fx.Node:
    return next(n for n in gm.graph.nodes if n.target == torch.ops.aten.tanh.default)


torch.manual_seed(0)
model, inputs = LinearTanh().eval(), (zoo.example(4, 8),)
exported = torch.export.export(model, inputs).module()
annotated = qcore.get_quantizer("x86").annotate(copy.deepcopy(exported))
lowered = zoo.lower(zoo.quantize(model, inputs, "x86"), inputs)
emit(
    {
        "shipped_row_is_the_new_row": shipped == [TANH],
        "tanh_annotated": Q_ANNOTATION_KEY in tanh_node(annotated).meta,
        "lowered": dict(lowered.report.lowered),
        "codes": lowered.codes_json(),
    }
)
