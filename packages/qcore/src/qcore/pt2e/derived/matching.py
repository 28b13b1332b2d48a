"""Matching a derived pattern tree on the calls of an exported graph, as ``prepare_fx``
matches it on FX nodes: the top element may have any number of users, every element
below it exactly one, an element with arguments must match the call's argument count,
and ``MatchAllNode`` takes any argument (an extra input of the pattern)."""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

from torch.fx import GraphModule, Node

from qcore.pt2e.derived.patterns import is_match_all
from qcore.pt2e.derived.sources import OPERATOR_METHODS, Call, calls, signatures


@dataclass(frozen=True)
class Match:
    """A pattern matched: its calls (``top`` last in the tree, ``root`` executed first),
    the element each call matched, and the wildcard (extra) inputs with their consumer."""

    calls: tuple[Call, ...]
    elements: tuple[Any, ...]
    extra: tuple[tuple[Node, Node], ...]

    @property
    def top(self) -> Call:
        return self.calls[0]

    @property
    def root(self) -> Call:
        return min(self.calls, key=lambda c: c.order)

    def element_of(self, call: Call) -> Any:
        return self.elements[self.calls.index(call)]

    def nodes(self) -> list[Node]:
        return [n for c in self.calls for n in c.nodes]


class CallIndex:
    """The calls of one graph, by output node and by signature."""

    def __init__(self, gm: GraphModule) -> None:
        self.calls = calls(gm)
        self.by_output = {c.output: c for c in self.calls}
        self.by_signature: dict[str, list[Call]] = {}
        for c in self.calls:
            self.by_signature.setdefault(c.signature, []).append(c)
        self.size = len(gm.graph.nodes)


_INDEX: weakref.WeakKeyDictionary[GraphModule, CallIndex] = weakref.WeakKeyDictionary()


def index(gm: GraphModule) -> CallIndex:
    """The call index of ``gm``, built once per graph (every annotator reuses it)."""
    found = _INDEX.get(gm)
    if found is None or found.size != len(gm.graph.nodes):
        found = _INDEX[gm] = CallIndex(gm)
    return found


def _arguments(call: Call) -> list[Any]:
    return [call.inputs[0]] if call.is_module and call.inputs else list(call.output.args)


def _match(  # noqa: PLR0917 - one recursive step's whole state
    tree: Any, value: Any, idx: CallIndex, top: bool, found: list[tuple[Call, Any]],
    extra: list[tuple[Node, Node]], consumer: Node | None,
) -> bool:  # fmt: skip
    head, args = (tree[0], list(tree[1:])) if isinstance(tree, tuple) else (tree, [])
    if is_match_all(head):
        if isinstance(value, Node) and consumer is not None:
            extra.append((value, consumer))
        return True
    call = idx.by_output.get(value) if isinstance(value, Node) else None
    if call is None or call.signature not in signatures(head):
        return False
    if call.constant_receiver and head in OPERATOR_METHODS:
        return False  # FX saw the Tensor method, not the operator
    if not top and len(call.users()) > 1:
        return False
    found.append((call, head))
    if not args:
        return True
    actual = _arguments(call)
    if len(actual) != len(args):
        return False
    consumer_node = next((n for n in call.nodes if any(a in n.args for a in actual)), call.output)
    return all(
        _match(sub, a, idx, False, found, extra, consumer_node)
        for sub, a in zip(args, actual, strict=True)
    )


def match_at(tree: Any, call: Call, idx: CallIndex) -> Match | None:
    """The match of ``tree`` whose top element is ``call``, or None."""
    found: list[tuple[Call, Any]] = []
    extra: list[tuple[Node, Node]] = []
    if not _match(tree, call.output, idx, True, found, extra, None):
        return None
    if len({c for c, _ in found}) != len(found):
        return None
    return Match(tuple(c for c, _ in found), tuple(e for _, e in found), tuple(extra))


def top_signatures(tree: Any) -> frozenset[str]:
    return signatures(tree[0] if isinstance(tree, tuple) else tree)
