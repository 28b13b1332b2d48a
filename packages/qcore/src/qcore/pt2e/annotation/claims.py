"""Claiming nodes for an annotator, and asking a quantizer's scope about them.

Every annotator, in qcore and in plugins, marks the nodes it quantizes as claimed so that
no later annotator takes them again, and asks the scope filter (``set_module_name``,
``set_operator_type``...) about a pattern's compute nodes only. These helpers are the
shared vocabulary for that; importing this module registers nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from torch.fx import Node
from torchao.quantization.pt2e.quantizer import QuantizationAnnotation

from qcore._torch_private import Q_ANNOTATION_KEY, annotation_is_claimed, claim_annotation

# a type alias evaluated at import: an edit of its `|` fails the import, not a test
Filter = Callable[[Node], bool] | None  # pragma: no mutate
Partitions = list[list[Node]]


def is_op(node: object, targets: frozenset[Any]) -> bool:
    return isinstance(node, Node) and node.op == "call_function" and node.target in targets


def is_annotated(nodes: Iterable[Node | None]) -> bool:
    """Any node of a pattern already claimed by an annotator."""
    return any(
        n is not None
        and Q_ANNOTATION_KEY in n.meta
        and annotation_is_claimed(n.meta[Q_ANNOTATION_KEY])
        for n in nodes
    )


def mark_annotated(nodes: Iterable[Node | None]) -> None:
    for n in nodes:
        if n is not None:
            claim_annotation(n.meta.setdefault(Q_ANNOTATION_KEY, QuantizationAnnotation()))


def passes(filter_fn: Filter, nodes: Iterable[Node]) -> bool:
    """The scope filter accepts every compute node of the pattern."""
    return filter_fn is None or all(filter_fn(n) for n in nodes if n.op == "call_function")


def computing(output: Node, nodes: Iterable[Node]) -> set[Node]:
    """``output`` and the nodes among ``nodes`` it depends on: what one call site of a
    module called at several sites computed."""
    inside, seen, stack = set(nodes), {output}, [output]
    while stack:
        for arg in stack.pop().all_input_nodes:
            if arg in inside and arg not in seen:
                seen.add(arg)
                stack.append(arg)
    return seen


def set_annotation(
    node: Node,
    inputs: dict[Node, Any] | None = None,
    output: Any = None,
) -> None:
    annotation = QuantizationAnnotation(input_qspec_map=inputs or {}, output_qspec=output)
    claim_annotation(annotation)
    node.meta[Q_ANNOTATION_KEY] = annotation


def sole_user(node: Node) -> Node | None:
    return next(iter(node.users)) if len(node.users) == 1 else None


def has_output_qparams(node: Node) -> bool:
    """An annotator has claimed ``node`` and given its output qparams of its own."""
    ann = node.meta.get(Q_ANNOTATION_KEY)
    return ann is not None and annotation_is_claimed(ann) and ann.output_qspec is not None
