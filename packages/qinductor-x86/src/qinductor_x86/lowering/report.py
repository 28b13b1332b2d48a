"""What a lowering did to the graphs it compiled: ``X86Lowering.report()``.

Per graph: each pattern lowered, with counts; the oneDNN int8 kernels the graph now calls;
and every quantize / dequantize still computed in float, with the reason. The reasons come
from the rewrites that were tried and declined (their checks say why), else from the op
next to the node: what reads a dequantized value, or what produced a quantized one.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from operator import getitem

from torch.fx import Graph, Node

from qinductor_x86.lowering import ops

LIFT_UP = "quantize lifted above views"


@dataclass(frozen=True)
class FloatNode:
    """A quantize or dequantize left in float (Inductor computes it in a pointwise kernel)."""

    node: str
    op: str
    reason: str


@dataclass
class GraphRecord:
    """One compiled graph. ``int8_kernels``: its oneDNN int8 conv/linear calls and ATen
    int8 weight-only matmuls."""

    lowered: Counter[str] = field(default_factory=Counter)
    left_in_float: list[FloatNode] = field(default_factory=list)
    int8_kernels: int = 0


@dataclass
class LoweringReport:
    """Everything compiled while the lowering was installed (since its last install)."""

    target: str
    other_passes: dict[str, bool] = field(default_factory=dict)
    graphs: list[GraphRecord] = field(default_factory=list)
    #: quantizes lifted above views (before the graphs above exist, so counted apart)
    lift_ups: int = 0

    @property
    def lowered(self) -> Counter[str]:
        total: Counter[str] = Counter()
        if self.lift_ups:
            total[LIFT_UP] = self.lift_ups
        for graph in self.graphs:
            total.update(graph.lowered)
        return total

    @property
    def left_in_float(self) -> list[FloatNode]:
        return [node for graph in self.graphs for node in graph.left_in_float]

    @property
    def int8_kernels(self) -> int:
        return sum(graph.int8_kernels for graph in self.graphs)

    def __str__(self) -> str:
        active = [name for name, on in self.other_passes.items() if on]
        lines = [
            f"x86 int8 lowering: {len(self.graphs)} quantized graph(s), "
            f"{self.int8_kernels} oneDNN int8 kernel(s)",
            f"target: {self.target}",
            f"other x86 int8 passes registered: {', '.join(active) or 'none'}",
            "lowered:",
            *(f"  {count:4d}  {name}" for name, count in sorted(self.lowered.items())),
            "left in float:",
            *(f"  {n.node} ({n.op}): {n.reason}" for n in self.left_in_float),
        ]
        return "\n".join(lines)


def left_in_float(graph: Graph, declined: dict[Node, str]) -> list[FloatNode]:
    """Every quantize / dequantize in ``graph``, with why it stays."""
    found = []
    for node in graph.nodes:
        if node.target in ops.Q_DQ:
            kind = _kind(node)
            found.append(FloatNode(node.name, kind, _reason(node, kind, declined)))
    return found


def everything_in_float(graph: Graph, reason: str) -> list[FloatNode]:
    return [FloatNode(n.name, _kind(n), reason) for n in graph.nodes if n.target in ops.Q_DQ]


def _kind(node: Node) -> str:
    if node.target is ops.DEQUANTIZE_PER_CHANNEL:
        return "dequantize (weight)"
    return "dequantize" if node.target in ops.DEQUANTIZE else "quantize"


def _reason(node: Node, kind: str, declined: dict[Node, str]) -> str:
    if node in declined:
        return declined[node]
    if kind == "quantize":
        producer = node.args[0]
        if isinstance(producer, Node) and producer in declined:
            return f"not fused into {producer.name}: {declined[producer]}"
        if not isinstance(producer, Node) or producer.op == "placeholder":
            return "quantizes a graph input (nothing computes it in int8)"
        return f"quantizes the float output of {_op(producer)}, which has no int8 kernel here"
    readers = [_consumer(user) for user in node.users]
    for reader in readers:
        if reader in declined:
            return f"{_op(reader)} ({reader.name}) stays in float: {declined[reader]}"
    if not readers:
        return "read by nothing but the graph output"
    reader = readers[0]
    if reader.target in ops.COMPUTE and kind == "dequantize":
        return f"{_op(reader)} has no oneDNN int8 form for two activation operands"
    return f"read by {_op(reader)}, which runs in float"


def _consumer(node: Node) -> Node:
    """The first reader that does something to the value, past views and dtype casts."""
    while node.target in ops.TO_COMPUTE and len(node.users) == 1:
        node = next(iter(node.users))
    return node


def _op(node: Node) -> str:
    if node.target is getitem and isinstance(node.args[0], Node):
        return _op(node.args[0])  # an output of a multi-output op: name the op
    return node.name if node.op != "call_function" else str(node.target)
