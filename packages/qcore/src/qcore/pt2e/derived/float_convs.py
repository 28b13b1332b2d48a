"""A 1-D convolution left in float that reads a quantized tensor, as the same 2-D one.

ExecuTorch 1.5.1's XNNPACK lowering runs a 1-D convolution (``conv1d``,
``conv_transpose1d``) as a 2-D one, and where its input is a dequantize it quantizes the
unsqueezed input again, whether or not the convolution is quantized: a float one then has
a quantized input and a float weight, and the lowering raises "Weight and Input should
both be quantized" (ExecuTorch's own quantizer fails alike on a ``Conv1d`` it leaves in
float). A backend's patterns may well leave a 1-D convolution in float after a quantized
op: the ExecuTorch FX backend has no 1-D or transposed convolution pattern at all. So,
once every pattern is annotated, each such convolution becomes what XNNPACK runs for it,
``unsqueeze``, the 2-D convolution, ``squeeze``: the same function in float, reading no
dequantize itself. Its weight becomes a 4-D attribute of its own (a parameter if it was
one, which QAT then trains), a static weight the lowering can take, as it takes the 1-D
one.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import GraphModule, Node

from qcore._torch_private import Q_ANNOTATION_KEY
from qcore.pt2e.annotation.transforms import attribute, register_like

aten = torch.ops.aten
#: Each 1-D convolution, its 2-D counterpart and its arguments after the weight, with
#: their defaults and, for the list ones, what the added trailing dimension takes.
_AS_2D: dict[Any, tuple[Any, tuple[tuple[str, Any, Any], ...]]] = {
    aten.conv1d.default: (aten.conv2d.default, (
        ("bias", None, None), ("stride", [1], 1), ("padding", [0], 0), ("dilation", [1], 1),
        ("groups", 1, None))),
    aten.conv1d.padding: (aten.conv2d.padding, (
        ("bias", None, None), ("stride", [1], 1), ("padding", "valid", None),
        ("dilation", [1], 1), ("groups", 1, None))),
    aten.conv_transpose1d.default: (aten.conv_transpose2d.input, (
        ("bias", None, None), ("stride", [1], 1), ("padding", [0], 0),
        ("output_padding", [0], 0), ("groups", 1, None), ("dilation", [1], 1))),
}  # fmt: skip


def _annotated(node: Node) -> bool:
    ann = node.meta.get(Q_ANNOTATION_KEY)
    return ann is not None and bool(ann.input_qspec_map or ann.output_qspec is not None)


def _reads_quantized(conv: Node) -> bool:
    """The convolution stays float, its weight is an attribute, and its input is a
    quantized output (so, once converted, a dequantize)."""
    x, weight = conv.args[0], conv.args[1]
    if _annotated(conv) or not isinstance(x, Node):
        return False
    if not isinstance(weight, Node) or weight.op != "get_attr":
        return False  # a computed weight: no static one to give XNNPACK either way
    ann = x.meta.get(Q_ANNOTATION_KEY)
    return ann is not None and ann.output_qspec is not None


def float_1d_convs_as_2d(gm: GraphModule) -> GraphModule:
    """Rewrite every float 1-D convolution of annotated ``gm`` whose input is quantized
    (see the module docstring); the rest of the graph is left as it is."""
    changed = False
    for conv in list(gm.graph.nodes):
        if conv.op == "call_function" and conv.target in _AS_2D and _reads_quantized(conv):
            _rewrite(gm, conv)
            changed = True
    if changed:
        gm.recompile()
    return gm


def _trailing(value: Any, extra: Any) -> Any:
    """A 1-D argument (a one-element list, as export records it) with the added
    dimension's value; a string padding stays as it is."""
    if extra is None or isinstance(value, str):
        return value
    return [*value, extra]


def _weight_2d(gm: GraphModule, conv: Node, weight: Node) -> Node:
    """The weight attribute with a trailing unit dimension, as an attribute of its own
    (XNNPACK takes a float convolution only with a static weight), named after the conv
    (node names are unique)."""
    original = attribute(gm, str(weight.target))
    name = f"_qcore_{conv.name}_weight_as_2d"
    register_like(gm, name, original.detach().unsqueeze(-1), original)
    with gm.graph.inserting_after(weight):
        node = gm.graph.get_attr(name)
    node.meta = {**weight.meta, "val": weight.meta["val"].unsqueeze(-1)}
    return node


def _rewrite(gm: GraphModule, conv: Node) -> None:
    target, params = _AS_2D[conv.target]
    x, weight = conv.args[0], conv.args[1]
    assert isinstance(x, Node) and isinstance(weight, Node)
    given = dict(zip((p[0] for p in params), conv.args[2:], strict=False)) | dict(conv.kwargs)
    rest = [_trailing(given.get(name, default), extra) for name, default, extra in params]
    kernel = _weight_2d(gm, conv, weight)
    graph = gm.graph

    def call(op: Any, *args: Any) -> Node:
        node = graph.call_function(op, args)
        # the conv's own metadata: module scopes and reports still see one conv call
        node.meta = {k: v for k, v in conv.meta.items() if k != "val"}
        fake = [a.meta.get("val") if isinstance(a, Node) else a for a in args]
        node.meta["val"] = op(*fake)
        return node

    with graph.inserting_before(conv):
        image = call(aten.unsqueeze.default, x, -1)
        flat = call(target, image, kernel, *rest)
    # the conv node itself becomes the squeeze: its consumers' annotations name it
    conv.target = aten.squeeze.dim
    conv.args, conv.kwargs = (flat, -1), {}
