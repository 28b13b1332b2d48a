"""What ExecuTorch's XNNPACK delegate took of a quantized program, what stayed in
ExecuTorch's portable runtime, and why: the delegation coverage of a lowering.

ExecuTorch's ``XnnpackPartitioner`` logs why it rejects a node it has a config for
(``WhyNoPartition`` records at debug level); :func:`watch` collects them while the
program is lowered, and :meth:`Coverage.report` reads the lowered program: the ops inside
each XNNPACK delegate call, and every op left outside with its reason::

    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from qquantizer_xnnpack.delegation import watch

    with watch() as coverage:
        edge = to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()])
    print(coverage.report(edge))   # before edge.to_executorch(), which rewrites the program

An op *computes in int8* when it reads a dequantized value (XNNPACK runs it as one
quantized kernel); quantize and dequantize ops are listed as such; everything else is
float. Nothing here imports ExecuTorch: the program is read as the graph it is.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from torch.fx import GraphModule, Node

__all__ = ["Coverage", "DelegationReport", "LeftOut", "watch"]

#: The logger ExecuTorch's XNNPACK partitioner configs log their rejections under.
PARTITIONER_LOGGER = "executorch.backends.xnnpack"
DELEGATE_CALL = "executorch_call_delegate"
XNNPACK_BACKEND = "XnnpackBackend"
#: What a quantize / dequantize op outside the delegate needs at ``to_executorch``.
NEEDS_QUANTIZED_KERNELS = (
    "ExecuTorch's portable runtime runs it only with its quantized kernels "
    "(import executorch.kernels.quantized before to_executorch, or it fails with "
    "'Missing out variants')"
)
NO_REASON = "no XNNPACK partition took it (the partitioner gave no reason)"


@dataclass(frozen=True)
class LeftOut:
    """An op ExecuTorch's portable runtime runs, with its kind and why XNNPACK left it."""

    node: str
    op: str
    kind: str
    reason: str

    def __str__(self) -> str:
        return f"{self.node} ({self.op}, {self.kind}): {self.reason}"


@dataclass
class DelegationReport:
    """``taken``: op (kind) -> count inside XNNPACK delegate calls; ``left_out``: every op
    of the program outside them."""

    delegate_calls: int = 0
    taken: Counter[str] = field(default_factory=Counter)
    left_out: list[LeftOut] = field(default_factory=list)

    @property
    def quantized_left_out(self) -> list[LeftOut]:
        """The ops left out that compute in int8, quantize or dequantize."""
        return [op for op in self.left_out if op.kind != "float"]

    def __str__(self) -> str:
        quantized = self.quantized_left_out
        floats = Counter(op.op for op in self.left_out if op.kind == "float")
        return "\n".join(
            [
                f"XNNPACK delegation: {self.delegate_calls} delegate call(s), "
                f"{sum(self.taken.values())} op(s) taken, {len(quantized)} quantized op(s) "
                f"and {sum(floats.values())} float op(s) left to the portable runtime",
                "taken by XNNPACK:",
                *(f"  {count:4d}  {name}" for name, count in sorted(self.taken.items())),
                "quantized ops left to the portable runtime:",
                *(f"  {op}" for op in quantized),
                "float ops left to the portable runtime:",
                *(
                    f"  {count:4d}  {name}: {_float_reasons(self.left_out, name)}"
                    for name, count in sorted(floats.items())
                ),
            ]
        )


class Coverage:
    """The partitioner's reasons, by node name, collected by :func:`watch`."""

    def __init__(self) -> None:
        self.reasons: dict[str, list[str]] = {}

    def report(self, edge: Any) -> DelegationReport:
        """The coverage of ``edge``, an ExecuTorch ``EdgeProgramManager`` returned by
        ``to_edge_transform_and_lower`` (or its ``exported_program()``)."""
        program = edge.exported_program() if hasattr(edge, "exported_program") else edge
        gm: GraphModule = program.graph_module
        report = DelegationReport()
        for node in gm.graph.nodes:
            if node.op != "call_function" or _name(node.target) == "getitem":
                continue
            if _name(node.target) == DELEGATE_CALL:
                lowered = getattr(gm, str(node.args[0].target))
                if getattr(lowered, "backend_id", None) != XNNPACK_BACKEND:
                    continue
                report.delegate_calls += 1
                inner: GraphModule = lowered.original_module.graph_module
                for op in inner.graph.nodes:
                    if op.op == "call_function" and _name(op.target) != "getitem":
                        report.taken[f"{_name(op.target)} ({_kind(op)})"] += 1
                continue
            report.left_out.append(
                LeftOut(node.name, _name(node.target), _kind(node), self._why(node))
            )
        return report

    def _why(self, node: Node) -> str:
        reasons = self.reasons.get(node.name)
        kind = _kind(node)
        if reasons:
            why = "XNNPACK partitioner: " + "; ".join(reasons)
        elif kind.startswith("dequantize"):
            why = _neighbour_reason(self, node, list(node.users), "read by")
        elif kind == "quantize" and isinstance(node.args[0], Node):
            why = _neighbour_reason(self, node, [node.args[0]], "quantizes the output of")
        else:
            why = NO_REASON
        if kind in {"quantize", "dequantize", "dequantize (weight)"}:
            why += f"; {NEEDS_QUANTIZED_KERNELS}"
        return why


def _neighbour_reason(coverage: Coverage, node: Node, neighbours: list[Node], verb: str) -> str:
    for other in neighbours:
        if other.op == "call_function" and _name(other.target) not in {DELEGATE_CALL, "getitem"}:
            return f"{verb} {_name(other.target)} ({other.name}), which stays out: {coverage._why(other)}"
    if neighbours and all(_name(n.target) == DELEGATE_CALL for n in neighbours if n.op == "call_function"):
        return f"{verb} an XNNPACK delegate call, but not taken into it"
    return NO_REASON


def _float_reasons(left: list[LeftOut], op: str) -> str:
    return "; ".join(sorted({entry.reason for entry in left if entry.op == op and entry.kind == "float"}))


class _Collector(logging.Handler):
    """Keeps each ``WhyNoPartition`` record's node and reason (read when it is logged: the
    partitioner reuses one such object for every rejection); passes every other record
    on to the logger's parent at the level it had, so that nothing else changes."""

    def __init__(self, coverage: Coverage, passes: int) -> None:
        super().__init__(logging.DEBUG)
        self.coverage = coverage
        self.passes = passes

    def emit(self, record: logging.LogRecord) -> None:
        why = record.msg
        node, reason = getattr(why, "node", None), getattr(why, "reason", None)
        if isinstance(node, Node) and isinstance(reason, str):
            found = self.coverage.reasons.setdefault(node.name, [])
            if reason not in found:
                found.append(reason)
        elif record.levelno >= self.passes:
            parent = logging.getLogger(PARTITIONER_LOGGER).parent
            if parent is not None:
                parent.handle(record)


@contextmanager
def watch() -> Iterator[Coverage]:
    """Collect the XNNPACK partitioner's reasons for what it leaves out, for the block;
    the partitioner's logger is as it was afterwards."""
    logger = logging.getLogger(PARTITIONER_LOGGER)
    coverage = Coverage()
    collector = _Collector(coverage, logger.getEffectiveLevel())
    level, propagate = logger.level, logger.propagate
    logger.addHandler(collector)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False  # the collector passes on what the user would have seen
    try:
        yield coverage
    finally:
        logger.removeHandler(collector)
        logger.setLevel(level)
        logger.propagate = propagate


def _name(target: Any) -> str:
    """``aten.convolution.default`` for ExecuTorch's edge ops as for torch's."""
    return str(getattr(target, "__name__", target))


def _kind(node: Node) -> str:
    name = _name(node.target)
    if name.startswith("quantized_decomposed.quantize"):
        return "quantize"
    if name.startswith("quantized_decomposed.dequantize"):
        return "dequantize (weight)" if "per_channel" in name else "dequantize"
    reads = [a for a in node.all_input_nodes if a.op == "call_function"]
    if any(_name(a.target).startswith("quantized_decomposed.dequantize") for a in reads):
        return "int8"
    return "float"
