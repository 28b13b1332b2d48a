"""What one compile's passes share: the graph, its frozen weights, the target, the record.

Inductor's pattern matcher calls handlers with a match only, so the pipeline publishes the
context of the graph it is rewriting in a context variable for their duration.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx import Graph, GraphModule, Node

from qcore.int8.cpu_profile import Int8Host
from qinductor_x86 import _torch_private as private
from qinductor_x86.lowering.counters import Family, bump


@dataclass
class CompileContext:
    """One graph being lowered.

    ``lowered`` counts each pattern rewritten, by a name people read in ``report()``;
    ``declined`` holds, per node, why a rewrite that was tried did not apply (the reason
    ``report()`` gives for the quantize/dequantize nodes left around it).
    """

    gm: GraphModule
    target: Int8Host
    constants: dict[Node, torch.Tensor]
    #: torch's or torchao's copy of these passes runs in freezing, after this lowering
    others_follow: bool = False
    lowered: Counter[str] = field(default_factory=Counter)
    declined: dict[Node, str] = field(default_factory=dict)

    @property
    def graph(self) -> Graph:
        return self.gm.graph

    def constant(self, node: Any) -> torch.Tensor | None:
        """The real value of ``node`` if freezing makes it a constant (a weight)."""
        return self.constants.get(node) if isinstance(node, Node) else None

    def record(
        self, pattern: str, counter: Family | None = None, nodes: int = 0, match: Any = None
    ) -> None:
        """One rewrite: a ``report()`` entry and, when torch's copy has one, its counters
        (``nodes``: what torch's pattern for it matches; ``match``: our pattern pass's
        match, when the rewrite is a handler of one)."""
        self.lowered[pattern] += 1
        if counter is not None:
            bump(counter, nodes, None if match is None else len(match.nodes))

    def decline(self, node: Node, reason: str) -> bool:
        """Remember why ``node`` was not rewritten; returns False for use in extra checks."""
        self.declined[node] = reason
        return False

    def call(self, target: Any, args: Sequence[Any], kwargs: dict[str, Any] | None = None) -> Node:
        """A new call node, with the fake value later passes read (``meta["val"]``)."""
        node = self.graph.call_function(target, tuple(args), kwargs or {})
        node.meta["val"] = private.fake_value(target, node.args, node.kwargs)
        return node

    def constant_node(self, name: str, value: torch.Tensor) -> Node:
        """A ``get_attr`` node for a new frozen constant (a prepacked weight)."""
        return self.graph.get_attr(private.register_constant(self.gm, name, value))


_current: ContextVar[CompileContext | None] = ContextVar("qinductor_x86_compile", default=None)


def current() -> CompileContext:
    context = _current.get()
    if context is None:
        raise RuntimeError("a qinductor-x86 pattern ran outside of its lowering pass")
    return context


@contextlib.contextmanager
def lowering(context: CompileContext) -> Iterator[CompileContext]:
    token = _current.set(context)
    try:
        yield context
    finally:
        _current.reset(token)


def ancestors(node: Node) -> set[Node]:
    """Every node ``node`` depends on (to tell a buffer's past readers from its future)."""
    seen: set[Node] = set()
    stack = list(node.all_input_nodes)
    while stack:
        current_node = stack.pop()
        if current_node not in seen:
            seen.add(current_node)
            stack.extend(current_node.all_input_nodes)
    return seen


def val(node: Any) -> Any:
    """``node``'s fake value, or None for constants and nodes without one."""
    return node.meta.get("val") if isinstance(node, Node) else None
