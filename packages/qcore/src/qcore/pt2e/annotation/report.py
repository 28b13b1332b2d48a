""" "Why was this not quantized?": every compute node an annotation left in float, and why.

Works for any quantizer with a registry's scoping (:class:`Scoped`, which
:class:`~qcore.pt2e.annotation.registry_quantizer.RegistryQuantizer` is): the reasons come
from the registry (is there an annotator for the op in this mode?), the quantizer's
scopes (which pass would own the node, is its config None, does the filter reject it?),
the node's inputs (can they be observed?), the annotator's own ``why_not`` hook and the
annotations of its neighbours.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch.fx import GraphModule, Node

from qcore._torch_private import Q_ANNOTATION_KEY, annotation_is_claimed, fold_batch_norms
from qcore.pt2e.annotation.observable import non_quantizable_reason
from qcore.pt2e.annotation.ops import ADD, CAT, CONV, CONV_TRANSPOSE, LINEAR, MUL
from qcore.pt2e.annotation.registry import Annotator, is_dynamic_config

aten = torch.ops.aten
#: Ops whose float execution costs real time; data movement is not reported.
COMPUTE_OPS = frozenset(
    {
        *CONV,
        *CONV_TRANSPOSE,
        *LINEAR,
        *ADD,
        *MUL,
        *CAT,
        aten.matmul.default,
        aten.mm.default,
        aten.bmm.default,
        aten.addmm.default,
        aten.sub.Tensor,
        aten.div.Tensor,
        aten.baddbmm.default,
        aten.einsum.default,
        aten.scaled_dot_product_attention.default,
        aten.embedding.default,
        aten.layer_norm.default,
        aten.batch_norm.default,
        aten._native_batch_norm_legit_no_training.default,
    }
)

NO_ANNOTATOR = "no annotator for the op"
EXCLUDED = "excluded by scope or filter"
NOT_QUANTIZABLE = "input not quantizable"
DECLINED = "annotator declined"
CONFLICT = "conflicting annotation"
NOT_DERIVED = "pattern not derivable"

#: The label of the global config's pass: the one pass that runs an opt-in annotator only
#: once it is enabled by name (every other pass is scoped).
GLOBAL_PASS = "global"


class Scoped(Protocol):
    """What the report reads of a quantizer: its annotators, its passes (config, scope
    filter, operator, label; most specific first) and its filter, and how it annotates."""

    @property
    def namespace(self) -> str: ...

    @property
    def filter_fn(self) -> Callable[[Node], bool] | None: ...

    def annotators(self) -> list[Annotator]: ...

    def selected(
        self, config: Any, operator: Any = None, *, scoped: bool = False
    ) -> list[Annotator]: ...

    def passes(self) -> list[tuple[Any, Callable[[Node], bool], Any, str]]: ...

    def has_qat_config(self) -> bool: ...

    def transform_for_annotation(self, model: GraphModule) -> GraphModule: ...

    def annotate(self, model: GraphModule) -> GraphModule: ...


@dataclass(frozen=True)
class FloatNode:
    """A compute node left in float: ``reason`` is one of the module constants, ``detail``
    says exactly what (which op, scope, input or neighbour)."""

    node: str
    op: str
    reason: str
    detail: str
    module: str = ""

    def __str__(self) -> str:
        where = f" in {self.module}" if self.module else ""
        return f"{self.node} ({self.op}){where}: {self.reason}: {self.detail}"


def _has_annotation(node: Node) -> bool:
    ann = node.meta.get(Q_ANNOTATION_KEY)
    return ann is not None and (bool(ann.input_qspec_map) or ann.output_qspec is not None)


def _quantized(node: Node) -> bool:
    """Annotated itself, or claimed by a fused pattern one of whose nodes next to it
    carries a spec (the pattern's output, or its quantized input: x86 leaves a fused
    add's output to whatever consumes it)."""
    if _has_annotation(node):
        return True
    ann = node.meta.get(Q_ANNOTATION_KEY)
    return (
        ann is not None
        and annotation_is_claimed(ann)
        and any(_has_annotation(n) for n in [*node.users, *node.all_input_nodes])
    )


def _module_path(node: Node) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    return str(list(stack.values())[-1][0]) if stack else ""


def _owner(quantizer: Scoped, node: Node) -> tuple[Any, str] | None:
    """The config and scope label of the pass that would annotate ``node``."""
    for config, scope, operator, label in quantizer.passes():
        if (
            operator is not None
            and node.target is not operator
            and getattr(node.target, "overloadpacket", None) is not operator
        ):
            continue
        if scope(node):
            return config, label
    return None


def _reason(quantizer: Scoped, node: Node, gm: GraphModule) -> tuple[str, str]:
    candidates = [a for a in quantizer.annotators() if a.handles(node.target)]
    # a derived quantizer (qcore.pt2e.derived) names the backend patterns it cannot express
    underivable = "; ".join(str(u) for u in getattr(quantizer, "underivable", ()) if u.covers(node))
    if underivable and not candidates:
        return NOT_DERIVED, underivable
    if not candidates:
        return NO_ANNOTATOR, f"'{quantizer.namespace}' has no annotator for {node.target}"
    owner = _owner(quantizer, node)
    if owner is None:
        return EXCLUDED, "no configured scope of the quantizer covers it"
    if owner[0] is None:
        return EXCLUDED, f"the {owner[1]} config is None"
    config, label = owner
    if quantizer.filter_fn is not None and not quantizer.filter_fn(node):
        return EXCLUDED, "the filter function rejects it"
    active = quantizer.selected(config, scoped=label != GLOBAL_PASS)
    mine = [a for a in active if a.handles(node.target)]
    if not mine:
        mode = "dynamic" if is_dynamic_config(config) else "QAT" if config.is_qat else "static"
        names = ", ".join(a.name for a in candidates)
        return NO_ANNOTATOR, f"{names} do not run for the {mode} config of the {label} pass"
    for arg in node.all_input_nodes:
        if node.target in CONV | CONV_TRANSPOSE | LINEAR and arg is not node.args[0]:
            continue  # weights and biases are not activations
        why = non_quantizable_reason(arg, gm)
        if why:
            return NOT_QUANTIZABLE, f"{arg.name}: {why}"
    for a in mine:
        if a.why_not is not None:
            why = a.why_not(node, config)
            if why:
                return DECLINED, f"{a.name}: {why}"
    claimed = [
        n.name
        for n in [*node.all_input_nodes, *node.users]
        if n.meta.get(Q_ANNOTATION_KEY) is not None
        and annotation_is_claimed(n.meta[Q_ANNOTATION_KEY])
        and n.op == "call_function"
        and not _has_annotation(n)
    ]
    if claimed:
        return CONFLICT, f"neighbour(s) {', '.join(claimed)} already belong to another pattern"
    if underivable:
        return NOT_DERIVED, underivable
    return DECLINED, f"{', '.join(a.name for a in mine)} matched no pattern around it"


def explain_not_quantized(
    model: GraphModule | torch.nn.Module,
    quantizer: Scoped,
    example_inputs: Sequence[Any] | None = None,
) -> list[FloatNode]:
    """Every compute node of ``model`` that ``quantizer`` leaves in float, with the reason.

    ``model`` may be an annotated graph (after ``prepare_pt2e``'s annotate step or
    ``quantizer.annotate``), an exported graph module not yet annotated (annotated here
    on a copy, after folding eval-mode batch norms as ``prepare_pt2e`` does), or an
    ``nn.Module`` with ``example_inputs`` (exported here).
    """
    if not isinstance(model, GraphModule):
        if example_inputs is None:
            raise ValueError(
                f"explain_not_quantized: {type(model).__name__} is not a GraphModule; "
                "pass example_inputs to export it"
            )
        model = torch.export.export(model, tuple(example_inputs)).module()
    assert isinstance(model, GraphModule)
    gm = model
    if not any(Q_ANNOTATION_KEY in n.meta for n in gm.graph.nodes):
        gm = copy.deepcopy(gm)
        if not quantizer.has_qat_config():
            fold_batch_norms(gm)  # what prepare_pt2e does first; prepare_qat_pt2e does not
        gm = quantizer.annotate(quantizer.transform_for_annotation(gm))
    report = []
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target not in COMPUTE_OPS or _quantized(node):
            continue
        reason, detail = _reason(quantizer, node, gm)
        report.append(FloatNode(node.name, str(node.target), reason, detail, _module_path(node)))
    return report
