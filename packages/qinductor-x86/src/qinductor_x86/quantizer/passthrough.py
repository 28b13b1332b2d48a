"""int8 in, int8 out: pools, ``cat`` and ``flatten`` after quantized patterns.

oneDNN and Inductor run max / avg / adaptive-avg pooling, ``cat`` and ``flatten`` on int8
data directly, so when every input comes from a quantized pattern the op is quantized
too and its output keeps its input's qparams (:func:`share_int8_outputs`, run once after
every pass): the int8 tensor flows on without a dequantize / quantize pair.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e.quantizer import (
    QuantizationConfig,
    SharedQuantizationSpec,
    get_input_act_qspec,
)

from qcore.pt2e.annotation.claims import is_annotated
from qcore.pt2e.annotation.claims import passes as scope_accepts
from qcore.pt2e.annotation.registry import ANNOTATORS
from qinductor_x86._torch_private import Q_ANNOTATION_KEY
from qinductor_x86.quantizer._marks import annotate_node, ends_quantized_pattern
from qinductor_x86.quantizer.operators import quantizable
from qinductor_x86.quantizer.recipe import INT8_IN_INT8_OUT

Filter = Callable[[Node], bool] | None
aten = torch.ops.aten


def _inputs_to_check(node: Node) -> list[Node]:
    """The inputs that must be int8: every tensor of ``cat``, the first input otherwise."""
    return node.all_input_nodes if node.target == aten.cat.default else node.all_input_nodes[:1]


def _flatten_feeds_nothing_quantized(node: Node) -> bool:
    """A flatten stays float unless a quantizable op (or nothing) consumes it: int8 out
    of a flatten helps only an op that takes int8."""
    if node.target != aten.flatten.using_ints or not node.users:
        return False
    # (every x86 annotator's operators, those installed extensions added included)
    ops = quantizable(ANNOTATORS.annotators("x86"))
    return not any(u.target in ops for u in node.users)


def annotate_int8_passthrough(
    gm: GraphModule, config: QuantizationConfig | None, filter_fn: Filter
) -> list[list[Node]]:
    """In graph order, so a chain (conv → max_pool2d → flatten) stays int8 throughout."""
    act = get_input_act_qspec(config)
    partitions = []
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target not in INT8_IN_INT8_OUT:
            continue
        if is_annotated([node]) or not scope_accepts(filter_fn, [node]):
            continue
        if _flatten_feeds_nothing_quantized(node):
            continue
        if not all(ends_quantized_pattern(i) for i in _inputs_to_check(node)):
            continue
        if node.target == aten.cat.default:
            first = node.args[0][0]
            inputs = {first: act}
            shared = SharedQuantizationSpec((first, node))
            for other in node.args[0][1:]:
                inputs.setdefault(other, shared)  # cat([x, x]) observes x once
        else:
            inputs = {node.all_input_nodes[0]: act}
        annotate_node(node, inputs, quantized_output=True)
        partitions.append([node])
    return partitions


def share_int8_outputs(gm: GraphModule) -> None:
    """After every pass: a quantized int8-in/int8-out op's output shares the qparams of
    its (first) input, so no requantization happens between them."""
    for node in gm.graph.nodes:
        if node.target not in INT8_IN_INT8_OUT or not ends_quantized_pattern(node):
            continue
        source = node.args[0] if node.target == aten.max_pool2d.default else node.all_input_nodes[0]
        node.meta[Q_ANNOTATION_KEY].output_qspec = SharedQuantizationSpec((source, node))


def why_not(node: Node, config: QuantizationConfig) -> str | None:
    if _flatten_feeds_nothing_quantized(node):
        return "flatten feeds no quantizable op"
    if not all(ends_quantized_pattern(i) for i in _inputs_to_check(node)):
        return "an input does not come from a quantized pattern"
    return None
