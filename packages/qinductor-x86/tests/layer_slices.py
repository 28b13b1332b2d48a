"""One int8 layer of a PT2E-converted model, taken out on its own, and the int16 pair sums
oneDNN's kernels for CPUs without VNNI would form on its input (test_budgeted_default.py).

A layer (a conv or linear reading ``dequantize(quantize(x))`` and a per-channel dequantized
int8 weight) is copied with everything it reads but ``x``, which becomes the input: the same
qparams, weights and bias, compiled as one kernel. The pair sums are computed here in int64
from the codes the eager model quantizes ``x`` to, pairing input channels ``2j`` and
``2j + 1`` of a group at one kernel tap, as ``vpmaddubsw`` does (``qcore.int8.saturation``),
independently of the lowering.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.fx import Graph, GraphModule, Interpreter, Node

WEIGHTED = (torch.ops.aten.conv2d.default, torch.ops.aten.linear.default)


def weighted_layers(converted: GraphModule) -> dict[str, Node]:
    """Every conv and linear of ``converted``, by node name, in graph order."""
    return {n.name: n for n in converted.graph.nodes if n.target in WEIGHTED}


def int8_weight(converted: GraphModule, layer: Node) -> torch.Tensor:
    """The int8 codes of ``layer``'s weight (the input of its per-channel dequantize)."""
    return converted.get_buffer(str(layer.args[1].args[0].target))  # type: ignore[union-attr]


def input_quantize(layer: Node) -> Node:
    """The quantize whose codes ``layer`` reads (through its input's dequantize)."""
    return layer.args[0].args[0]  # type: ignore[union-attr,return-value]


def one_layer(converted: GraphModule, layer: Node) -> GraphModule:
    """``layer`` alone: a model whose input is the float tensor ``layer``'s input quantize
    reads, and whose output is ``layer``'s float output."""
    graph = Graph()
    env: dict[Node, Node] = {input_quantize(layer).args[0]: graph.placeholder("x")}  # type: ignore[dict-item]

    def copy(node: Node) -> Node:
        if node not in env:
            env[node] = graph.node_copy(node, copy)
        return env[node]

    graph.output(copy(layer))
    return GraphModule(converted, graph)


def input_qparams(layer: Node) -> tuple[float, int]:
    """(scale, zero point) of the codes ``layer`` reads."""
    scale, zero_point = input_quantize(layer).args[1:3]
    return float(scale), int(zero_point)  # type: ignore[arg-type]


def quant_max(layer: Node) -> int:
    """The largest code ``layer``'s input can hold (its quantize's ``quant_max``)."""
    return int(input_quantize(layer).args[4])  # type: ignore[arg-type]


def values(converted: GraphModule, inputs: tuple[torch.Tensor, ...], nodes: list[Node]) -> dict[Node, Any]:
    """What ``nodes`` compute when the eager ``converted`` model runs on ``inputs``."""
    wanted, found = set(nodes), {}

    class Recorder(Interpreter):
        def run_node(self, node: Node) -> Any:
            out = super().run_node(node)
            if node in wanted:
                found[node] = out
            return out

    with torch.no_grad():
        Recorder(converted).run(*inputs)
    return found


def input_codes(model: GraphModule, inputs: tuple[torch.Tensor, ...], layer: Node) -> torch.Tensor:
    """The uint8 codes ``layer`` of ``model`` reads when the eager ``model`` runs on ``inputs``."""
    quantize = input_quantize(layer)
    return values(model, inputs, [quantize])[quantize]  # type: ignore[no-any-return]


def layer_macs(converted: GraphModule, inputs: tuple[torch.Tensor, ...]) -> dict[str, int]:
    """Each conv's and linear's multiply-adds at single depth on ``inputs``: its weight's
    size times its output positions (the output's size over its channels), from the eager
    model's own outputs."""
    layers = weighted_layers(converted)
    outputs = values(converted, inputs, list(layers.values()))
    macs = {}
    for name, layer in layers.items():
        out, weight = outputs[layer], int8_weight(converted, layer)
        channels = out.shape[1] if layer.target is torch.ops.aten.conv2d.default else out.shape[-1]
        macs[name] = weight.numel() * out.numel() // channels
    return macs


def worst_pair_sum(layer: Node, codes: torch.Tensor, weight: torch.Tensor) -> int:
    """The largest ``|a[2j] w[2j] + a[2j+1] w[2j+1]|`` ``layer`` forms on the activation
    ``codes`` (uint8) with its int8 ``weight``, over every output, position and tap, and
    every group of a conv. Taps in a conv's padding count as 0 (both channels of a pair are
    padding there or neither: a lower bound of the kernel's sums, enough to show that one
    passes int16)."""
    a, w = codes.to(torch.int64), weight.to(torch.int64)
    if layer.target is torch.ops.aten.linear.default:
        # (rows, 1, 1, in) against (1, out, 1, in): a linear is a conv of one tap
        return _worst(a.reshape(-1, 1, 1, a.shape[-1]), w.reshape(1, w.shape[0], 1, -1))
    given = list(layer.args[3:7])
    stride, padding, dilation, groups = [*given, *(1, 0, 1, 1)[len(given) :]]
    taps = w.shape[2] * w.shape[3]
    columns = F.unfold(a.double(), w.shape[2:], dilation=dilation, padding=padding, stride=stride)
    columns = columns.to(torch.int64).reshape(a.shape[0], a.shape[1], taps, -1)  # (n, in, taps, positions)
    per_group, out_per_group = a.shape[1] // groups, w.shape[0] // groups  # type: ignore[operator]
    worst = 0
    for g in range(groups):  # type: ignore[call-overload]
        acts = columns[:, g * per_group : (g + 1) * per_group].permute(0, 3, 2, 1)  # (n, positions, taps, in)
        ws = w[g * out_per_group : (g + 1) * out_per_group].reshape(out_per_group, per_group, taps)
        worst = max(worst, _worst(acts.reshape(-1, 1, taps, per_group), ws.transpose(1, 2).unsqueeze(0)))
    return worst


def _worst(acts: torch.Tensor, weights: torch.Tensor) -> int:
    """max |pair sum| of ``acts`` (rows, 1, taps, in) against ``weights`` (1, out, taps, in),
    pairing ``in`` as ``(2j, 2j + 1)`` (an odd last channel pairs with nothing: a zero)."""
    if acts.shape[-1] % 2:
        acts, weights = F.pad(acts, (0, 1)), F.pad(weights, (0, 1))
    rows = max(1, 2**22 // weights[..., 0::2].numel())  # bounded memory: 4M sums at a time
    worst = 0
    for row in acts.split(rows):
        sums = row[..., 0::2] * weights[..., 0::2] + row[..., 1::2] * weights[..., 1::2]
        worst = max(worst, int(sums.abs().max()))
    return worst
