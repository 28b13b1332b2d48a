"""Graph rewrites a quantizer runs before it annotates (``transform_for_annotation``).

Each returns the same function in float and leaves annotation to the annotators:
Python scalars of binary ops become observable tensors, ``addmm`` with a constant weight
becomes the ``linear`` it is, 3-D convolutions become 2-D ones for backends without
them, and scaled-dot-product attention becomes its two matmuls around a softmax.
Importing this module registers nothing.
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch.fx import GraphModule, Node

from qcore.pt2e.annotation.claims import is_op
from qcore.pt2e.annotation.observable import is_float_tensor
from qcore.pt2e.annotation.ops import CONV3D

aten = torch.ops.aten


def attribute(gm: GraphModule, target: str) -> Any:
    """The value a ``get_attr`` of ``target`` (a dotted path) reads on ``gm``."""
    return operator.attrgetter(target)(gm)


def register_like(gm: GraphModule, name: str, value: torch.Tensor, like: Any) -> None:
    """``value`` as attribute ``name`` of ``gm``, of ``like``'s kind: a parameter (with its
    ``requires_grad``) where ``like`` is one, else a buffer."""
    if isinstance(like, torch.nn.Parameter):
        gm.register_parameter(name, torch.nn.Parameter(value, like.requires_grad))
    else:
        gm.register_buffer(name, value)


def scalars_to_attrs(
    gm: GraphModule, ops: frozenset[Any] = frozenset({aten.add.Tensor, aten.mul.Tensor})
) -> GraphModule:
    """Turn Python scalars of binary ops into tensor attributes so they can be observed.

    As upstream, a scalar becomes a float32 tensor, except on an op whose result is not
    floating point (``arange(n) + 1`` in Hugging Face's mask construction): there it
    takes the result's dtype. A float32 zero-dim tensor would promote ``int64 + 1`` to
    float32, and the indices built from it would then crash ``aten.index`` (ExecuTorch
    1.5.1's transform does that). A zero-dim tensor of the result's dtype promotes exactly
    as the scalar did, so no op changes its result's dtype.
    """
    taken = {name for name, _ in gm.named_buffers()} | set(dir(gm))
    counter = itertools.count()
    for node in list(gm.graph.nodes):
        if not is_op(node, ops) or all(isinstance(a, Node) for a in node.args):
            continue
        result_dtype = node.meta["val"].dtype
        dtype = torch.float32 if result_dtype.is_floating_point else result_dtype
        args = []
        for arg in node.args:
            if isinstance(arg, Node):
                args.append(arg)
                continue
            name = next(n for n in (f"_tensor_constant_{i}" for i in counter) if n not in taken)
            taken.add(name)
            value = torch.tensor(arg, dtype=dtype)
            gm.register_buffer(name, value)
            with gm.graph.inserting_before(node):
                attr = gm.graph.get_attr(name)
            attr.meta["val"] = node.meta["val"].fake_mode.from_tensor(value, static_shapes=True)
            args.append(attr)
        node.args = tuple(args)
    gm.recompile()
    return gm


def addmm_to_linear(gm: GraphModule) -> GraphModule:
    """``addmm(bias, x, weight)`` with a constant 2-D weight becomes ``linear(x,
    t(weight), bias)``: Hugging Face's ``Conv1D`` (GPT-2's projections) is a linear layer
    written as ``addmm``, which no linear annotator or int8 kernel would see otherwise.
    The weight stays the module's own attribute (a ``t`` view of it), so QAT still trains
    it. ``addmm`` with ``beta``/``alpha`` other than 1 is left alone."""
    changed = False
    for node in list(gm.graph.nodes):
        if not is_op(node, frozenset({aten.addmm.default})) or len(node.args) != 3:
            continue
        bias, act, weight = node.args
        if any(node.kwargs.get(k, 1) != 1 for k in ("beta", "alpha")):
            continue
        if not isinstance(weight, Node) or weight.op != "get_attr":
            continue
        if not all(is_float_tensor(n) for n in (bias, act, weight)):
            continue
        with gm.graph.inserting_before(node):
            transposed = gm.graph.call_function(aten.t.default, (weight,))
            transposed.meta = {**weight.meta, "val": weight.meta["val"].t()}
            linear = gm.graph.call_function(aten.linear.default, (act, transposed, bias))
        # recorded as an F.linear call, which recipes that match layers by their source
        # (the x86 one, as torchao's) take for the linear it is
        stack = node.meta.get("source_fn_stack") or [(node.name, None)]
        linear.meta = {**node.meta, "source_fn_stack": [*stack[:-1], (linear.name, F.linear)]}
        node.replace_all_uses_with(linear)
        gm.graph.erase_node(node)
        changed = True
    if changed:
        gm.recompile()
    return gm


SDPA = frozenset({aten.scaled_dot_product_attention.default})
_SDPA_ARGS = ("attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")


def sdpa_as_matmuls(gm: GraphModule) -> GraphModule:
    """``scaled_dot_product_attention`` becomes the attention it computes, ``softmax(q @
    k^T * scale [+ mask]) @ v``: the same function in float up to fp32 rounding, written
    with the two ``matmul`` calls a quantizer can quantize (the softmax's output included),
    as attention modules that spell it out are. A boolean mask keeps its meaning (masked
    scores are -inf, as the op's math form has them). Calls with dropout, causal masking
    or grouped heads, and values of unknown dtype, are left alone. The new nodes keep the
    call's metadata, so module scopes still find them."""
    for node in list(gm.graph.nodes):
        if is_op(node, SDPA) and (given := _plain_sdpa(node)) is not None:
            _replace_sdpa(gm, node, given)
    gm.recompile()
    return gm


def _plain_sdpa(node: Node) -> dict[str, Any] | None:
    given: dict[str, Any] = {
        "dropout_p": 0.0, "is_causal": False, "scale": None, "enable_gqa": False, "attn_mask": None,
    }  # fmt: skip
    given |= dict(zip(_SDPA_ARGS, node.args[3:], strict=False)) | dict(node.kwargs)
    values = [_fake(a) for a in node.args[:3]]
    if given["dropout_p"] or given["is_causal"] or given["enable_gqa"]:
        return None
    if not all(isinstance(v, torch.Tensor) and v.dtype.is_floating_point for v in values):
        return None
    return given


def _replace_sdpa(gm: GraphModule, sdpa: Node, given: dict[str, Any]) -> None:
    q, k, v = sdpa.args[:3]
    mask = given["attn_mask"]
    scale = given["scale"] if given["scale"] is not None else _fake(q).shape[-1] ** -0.5
    graph = gm.graph
    call = functools.partial(_call_like, sdpa)
    with graph.inserting_before(sdpa):
        scores = call(aten.mul.Tensor, call(aten.matmul.default, q, call(aten.transpose.int, k, -2, -1)), scale)
        if isinstance(mask, Node) and _fake(mask).dtype == torch.bool:
            scores = call(aten.masked_fill.Scalar, scores, call(aten.logical_not.default, mask), float("-inf"))
        elif isinstance(mask, Node):
            scores = call(aten.add.Tensor, scores, mask)
        attention = call(aten.matmul.default, call(aten.softmax.int, scores, -1), v)
    sdpa.replace_all_uses_with(attention)
    graph.erase_node(sdpa)


_CONV_ARGS = ("bias", "stride", "padding", "dilation", "groups")
_CONV_DEFAULTS: dict[str, Any] = {
    "bias": None,
    "stride": 1,
    "padding": 0,
    "dilation": 1,
    "groups": 1,
}


def conv3d_as_conv2d(gm: GraphModule) -> GraphModule:
    """Every 3-D convolution becomes one 2-D convolution over depth-stacked slices, the
    same function in float: for a kernel of depth ``kd``, the ``kd`` depth slices each
    output depth reads are stacked next to the channels (``C`` becomes ``C * kd``, the
    batch ``N * D_out``) and the weight is reshaped alike, ``(O, C/g, kd, kh, kw)`` to
    ``(O, C/g * kd, kh, kw)``; the result is reshaped back to ``(N, O, D_out, H, W)``.

    For backends with no 3-D convolution: ExecuTorch 1.5.1 has none in its XNNPACK
    delegate nor in its portable kernels, so a model with one cannot run there at all
    (and a quantized one cannot even be built: its weight's per-channel dequantize has
    no portable kernel). Its 2-D form is delegated and quantized like any conv2d, with
    the same per-output-channel weight scales; the activation observer also sees the
    zero padding, which can only widen its range to include 0.

    Run on an exported graph before annotation (the XNNPACK quantizer does, in
    ``transform_for_annotation``). Batched inputs of static shape only; the new nodes keep
    the conv's metadata, so module scopes still find it (an operator scope now sees
    ``conv2d``)."""
    for node in list(gm.graph.nodes):
        if is_op(node, CONV3D) and _static_batched_conv3d(node):
            _replace_conv3d(gm, node)
    gm.recompile()
    return gm


def _static_batched_conv3d(node: Node) -> bool:
    nodes = [a for a in (node.args[0], node.args[1], node) if isinstance(a, Node)]
    values = [v for v in (a.meta.get("val") for a in nodes) if isinstance(v, torch.Tensor)]
    return (
        len(values) == 3
        and values[0].dim() == 5
        and all(isinstance(d, int) for v in values for d in v.shape)
    )


def _triple(value: int | Sequence[int]) -> list[int]:
    values = [value] if isinstance(value, int) else list(value)
    return values * 3 if len(values) == 1 else values


def _replace_conv3d(gm: GraphModule, conv: Node) -> None:
    x, weight = conv.args[0], conv.args[1]
    assert isinstance(x, Node) and isinstance(weight, Node)
    given = {**_CONV_DEFAULTS, **dict(zip(_CONV_ARGS, conv.args[2:], strict=False)), **conv.kwargs}
    stride, dilation = _triple(given["stride"]), _triple(given["dilation"])
    batch, channels = x.meta["val"].shape[:2]
    out_channels, group_channels, depth, height, width = weight.meta["val"].shape
    out_depth = conv.meta["val"].shape[2]
    # (before, after) per spatial dim: "same" may pad one more after than before
    padding = given["padding"]
    if padding == "same":
        totals = [d * (k - 1) for d, k in zip(dilation, (depth, height, width), strict=True)]
        pads = [(t // 2, t - t // 2) for t in totals]
    else:
        pads = [(p, p) for p in _triple(0 if padding == "valid" else padding)]
    graph = gm.graph
    call = functools.partial(_call_like, conv)
    with graph.inserting_before(conv):
        flat = [p for before_after in reversed(pads) for p in before_after]  # W, H, D
        padded = call(aten.constant_pad_nd.default, x, flat, 0.0) if any(flat) else x
        span = stride[0] * (out_depth - 1) + 1
        slices = [
            call(aten.slice.Tensor, padded, 2, k * dilation[0], k * dilation[0] + span, stride[0])
            for k in range(depth)
        ]
        stacked = call(aten.stack.default, slices, 2)  # N, C, kd, D_out, H, W
        moved = call(aten.permute.default, stacked, [0, 3, 1, 2, 4, 5])  # N, D_out, C, kd, H, W
        rows, cols = moved.meta["val"].shape[4:]
        images = call(
            aten.reshape.default, moved, [batch * out_depth, channels * depth, rows, cols]
        )
        kernel = call(
            aten.reshape.default, weight, [out_channels, group_channels * depth, height, width]
        )
        flat_out = call(
            aten.conv2d.default, images, kernel, given["bias"], stride[1:], [0, 0], dilation[1:],
            given["groups"],
        )  # fmt: skip
        out_rows, out_cols = flat_out.meta["val"].shape[2:]
        unstacked = call(
            aten.reshape.default, flat_out, [batch, out_depth, out_channels, out_rows, out_cols]
        )
        result = call(aten.permute.default, unstacked, [0, 2, 1, 3, 4])
    conv.replace_all_uses_with(result)
    graph.erase_node(conv)


def _call_like(replaced: Node, op: Any, *args: Any) -> Node:
    """A call of ``op`` at the graph's insert point, with ``replaced``'s metadata (its module
    scope) and the value export would have recorded for it."""
    node = replaced.graph.call_function(op, args)
    node.meta = {key: value for key, value in replaced.meta.items() if key != "val"}
    node.meta["val"] = op(*(_fake(a) for a in args))
    return node


def _fake(arg: Any) -> Any:
    """The value export recorded for ``arg`` (a node, or a list that holds nodes)."""
    if isinstance(arg, Node):
        return arg.meta["val"]
    if isinstance(arg, list):
        return [_fake(a) for a in arg]
    return arg
