"""The ``"x86"`` annotator namespace: torchao 0.18's x86 Inductor recipe on qcore's
registry, registered when this module is imported.

The recipe's convention differs from the ``common`` annotators', which is why it has its
own writers: a conv / linear pattern annotates its *inputs* only (activation, weight,
bias) and marks its last node as ending a quantized pattern; an output is quantized by
the quantized op that consumes it, and ops that move int8 data (pools, ``cat``,
``flatten``) stay int8 after a quantized pattern and share its qparams (see
:mod:`qinductor_x86.quantizer.passthrough`). QAT graphs still hold batch norm, so their patterns
also quantize the pattern's output, which the QAT folding needs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e.quantizer import (
    QuantizationConfig,
    get_bias_qspec,
    get_input_act_qspec,
    get_output_act_qspec,
    get_weight_qspec,
)

import qcore.pt2e.annotation.ops as shared_ops
from qcore.int8 import cpu_profile as host
from qcore.pt2e.annotation.claims import is_annotated, mark_annotated
from qcore.pt2e.annotation.claims import passes as scope_accepts
from qcore.pt2e.annotation.registry import ANNOTATORS
from qinductor_x86._torch_private import is_fake_tensor
from qinductor_x86._version import __version__
from qinductor_x86.postop_table import ADD
from qinductor_x86.quantizer import examples, passthrough
from qinductor_x86.quantizer._marks import annotate_node
from qinductor_x86.quantizer.call_sites import CallSite, calls, chains
from qinductor_x86.quantizer.operators import X86Annotator
from qinductor_x86.quantizer.recipe import (
    INT8_IN_INT8_OUT,
    INT8_IN_INT8_OUT_CALLED_AS,
    LAYER_OPS,
    SOURCES,
    Fusion,
    post_ops_after,
)

Filter = Callable[[Node], bool] | None
Partitions = list[list[Node]]
AnnotateFn = Callable[[GraphModule, QuantizationConfig | None, Filter], Partitions]

aten = torch.ops.aten
ADD_OPS = shared_ops.ADD
SOFTMAX = frozenset({aten.softmax.int, aten._softmax.default})


# -- fusion patterns -------------------------------------------------------------------


def _extra_input(binary: Node, operand: Node) -> Node | None:
    """The ``add``'s other input, when ``operand`` is one of its first two arguments."""
    a, b = [*binary.args, None, None][:2]
    other = b if a is operand else a if b is operand else None
    return other if isinstance(other, Node) else None


def _annotate_layer(layer: Node, config: QuantizationConfig | None, alone: bool) -> None:
    inputs: dict[Node, Any] = {
        layer.args[0]: get_input_act_qspec(config),  # type: ignore[dict-item]
        layer.args[1]: get_weight_qspec(config),  # type: ignore[dict-item]
    }
    bias = layer.args[2] if len(layer.args) > 2 else None
    if isinstance(bias, Node):
        inputs[bias] = get_bias_qspec(config)
    annotate_node(layer, inputs, quantized_output=alone)


def _annotate_fusion(
    fusion: Fusion, chain: tuple[CallSite, ...], config: QuantizationConfig | None, filter_fn: Filter
) -> list[Node] | None:
    """Annotate one matched chain; None when the recipe declines it."""
    outputs = [call.output for call in chain]
    layer, last = outputs[0], outputs[-1]
    if layer.op != "call_function" or layer.target not in LAYER_OPS[fusion.layer]:
        return None
    if not all(isinstance(a, Node) for a in layer.args[:2]):
        return None
    extra = None
    if fusion.add_position is not None:
        operand, binary = outputs[fusion.add_position - 1], outputs[fusion.add_position]
        # the add is fused into the layer only when the layer's result has no other use
        if len(operand.users) != 1:
            return None
        extra = _extra_input(binary, operand)
        if extra is None:
            return None
    if is_annotated(outputs) or not scope_accepts(filter_fn, outputs):
        return None

    qat = fusion.batch_norm
    out_qspec = get_output_act_qspec(config) if qat else None
    _annotate_layer(layer, config, alone=len(chain) == 1)
    if fusion.add_position is not None:
        assert extra is not None
        binary = outputs[fusion.add_position]
        # a linear's extra input stays float: upstream found quantizing it costs accuracy
        extra_qspecs = {} if fusion.is_linear else {extra: get_input_act_qspec(config)}
        ends = binary is last
        annotate_node(binary, extra_qspecs, out_qspec if ends else None, quantized_output=ends)
    if fusion.ends_in_unary or (qat and fusion.add_position is None):
        # the post-op ends the pattern; in a QAT conv → bn, the batch norm does
        annotate_node(last, output=out_qspec, quantized_output=True)
    nodes = [n for call in chain for n in call.nodes]
    if qat:
        # claim batch norm's own nodes too (e.g. num_batches_tracked += 1), as upstream
        mark_annotated(nodes)
    return nodes


def fusion_annotator(*fusions: Fusion) -> AnnotateFn:
    """Annotate every match of ``fusions``, rows in order, each row's matches in the order
    torchao enumerates them. QAT rows (with batch norm) run for QAT configs only."""
    qat = fusions[0].batch_norm
    if any(f.batch_norm != qat for f in fusions):
        raise ValueError("a fusion annotator is either all-QAT or not QAT")

    def annotate(
        gm: GraphModule, config: QuantizationConfig | None, filter_fn: Filter
    ) -> Partitions:
        if qat and (config is None or not config.is_qat):
            return []
        partitions = []
        for fusion in fusions:
            for chain in chains(gm, fusion.sources):
                nodes = _annotate_fusion(fusion, chain, config, filter_fn)
                if nodes is not None:
                    partitions.append(nodes)
        return partitions

    return annotate


# -- single ops ------------------------------------------------------------------------


def _same_shape_tensors(node: Node) -> bool:
    if len(node.args) != 2 or not all(isinstance(a, Node) for a in node.args):
        return False
    values: list[Any] = [a.meta.get("val") for a in node.args]  # type: ignore[union-attr]
    return all(is_fake_tensor(v) for v in values) and values[0].shape == values[1].shape


#: The spec of one operand (the operand node, the op that reads it) under a config.
QSpecOf = Callable[[QuantizationConfig | None, Node, Node], Any]


def _input_act_qspec(config: QuantizationConfig | None, operand: Node, reader: Node) -> Any:
    return get_input_act_qspec(config)


def int8_matmul_qspec(config: QuantizationConfig | None, operand: Node, reader: Node) -> Any:
    """The config's activation spec (its observer), as oneDNN's int8 matmul of two
    activations takes it without zero-point corrections of the product's rows
    (``qinductor_x86.lowering.activation_matmul``): symmetric int8 codes, zero point 0, in
    [-127, 127]; but a softmax's probabilities on the left (through dropout) keep the
    config's uint8 spec,
    whose zero point is then 0 (an affine observer's range holds 0), all 8 bits for
    values in [0, 1]."""
    spec = get_input_act_qspec(config)
    if spec is None or (operand is reader.args[0] and _probabilities(operand)):
        return spec
    return dataclasses.replace(
        spec, dtype=torch.int8, quant_min=-127, quant_max=127, qscheme=torch.per_tensor_symmetric
    )


def _probabilities(node: Node) -> bool:
    """A softmax's output, through dropout (Hugging Face's eager attention has one)."""
    while node.target is aten.dropout.default and isinstance(node.args[0], Node):
        node = node.args[0]
    return node.target in SOFTMAX


def operands_annotator(
    target: Any,
    accept: Callable[[Node], bool] = lambda _: True,
    qspec_of: QSpecOf = _input_act_qspec,
) -> AnnotateFn:
    """Quantize every tensor operand of each ``target`` node that ``accept`` takes, with
    ``qspec_of``'s spec; its output ends an int8 pattern."""

    def annotate(
        gm: GraphModule, config: QuantizationConfig | None, filter_fn: Filter
    ) -> Partitions:
        partitions = []
        for node in gm.graph.nodes:
            if node.op != "call_function" or node.target != target or not accept(node):
                continue
            if is_annotated([node]) or not scope_accepts(filter_fn, [node]):
                continue
            operands = [a for a in node.args if isinstance(a, Node)]
            qspecs = {operand: qspec_of(config, operand, node) for operand in operands}
            annotate_node(node, qspecs, quantized_output=True)
            partitions.append([node])
        return partitions

    return annotate


#: Both operands of ``matmul``.
annotate_matmul = operands_annotator(aten.matmul.default)
#: Both operands of ``matmul``, as int8 codes an int8 matmul takes as they are; on a VNNI
#: or AMX target only (see :func:`_matmul_int8_why_not`).
annotate_matmul_int8 = operands_annotator(
    aten.matmul.default, lambda _: not host.target().saturates_u8s8, int8_matmul_qspec
)

#: Why ``matmul_int8`` leaves every matmul in float on a target without VNNI.
SATURATING_TARGET = (
    "matmul_int8 quantizes nothing on a target without VNNI: its int8 matmuls saturate "
    "there, and the exact form ran slower than float attention"
)


def _matmul_int8_why_not(node: Node, config: QuantizationConfig) -> str | None:
    return SATURATING_TARGET if host.target().saturates_u8s8 else None
#: Element-wise ``mul`` of two tensors of one shape (no broadcast, no scalar).
annotate_mul = operands_annotator(aten.mul.Tensor, _same_shape_tensors)


# -- why a node stayed in float (for qcore.explain_not_quantized) -----------------------


def _called_through(node: Node, kind: str) -> bool:
    gm = node.graph.owning_module
    return gm is not None and any(c.output is node for c in calls(gm, SOURCES[kind]))


def _layer_why_not(kind: str, module: str) -> Callable[[Node, QuantizationConfig], str | None]:
    def why_not(node: Node, config: QuantizationConfig) -> str | None:
        if node.target in LAYER_OPS[kind] and not _called_through(node, kind):
            return (
                f"not a call of {module}: the x86 recipe recognises layers by their module, "
                "as torchao 0.18 does"
            )
        return None

    return why_not


def _conv1d_why_not(node: Node, config: QuantizationConfig) -> str | None:
    if node.target != aten.conv1d.default:
        return None
    if not _called_through(node, "conv1d"):
        return "not a call of nn.Conv1d"
    after = " / ".join(f"nn.{p.label}" for p in post_ops_after("conv1d"))
    return f"conv1d is quantized only with an {after} after it (torchao 0.18's recipe)"


def _mul_why_not(node: Node, config: QuantizationConfig) -> str | None:
    return None if _same_shape_tensors(node) else "operands are not two tensors of one shape"


def _add_why_not(node: Node, config: QuantizationConfig) -> str | None:
    if node.target not in ADD_OPS:
        return None
    if not all(isinstance(a, Node) for a in node.args[:2]):
        return "adds a Python scalar: only an add of two tensors fuses into a conv / linear"
    if is_annotated([node]):
        return (
            "fused into the nn.Linear before it as its post-op; it shows as float because "
            "its other input stays float by design (as upstream)"
        )
    return "an add is quantized only as the post-op of the nn.Conv2d / nn.Linear it follows"


# -- registration ----------------------------------------------------------------------

CONV2D, LINEAR = LAYER_OPS["conv2d"], LAYER_OPS["linear"]


def _rows(layer: str, *tails: Sequence[str]) -> tuple[Fusion, ...]:
    return tuple(Fusion.of(layer, *tail) for tail in tails)


def _layer(  # noqa: PLR0917 (one row of the table below)
    name: str,
    fusions: tuple[Fusion, ...],
    ops: frozenset[Any],
    description: str,
    example: Any,
    why_not: Any = None,
    called_as: Mapping[Any, tuple[Any, ...]] | None = None,
) -> X86Annotator:
    qat = fusions[0].batch_norm
    return X86Annotator(
        name,
        fusion_annotator(*fusions),
        static=not qat,
        dynamic=True,
        training_pattern=qat,
        description=description,
        ops=ops,
        why_not=why_not,
        example=example,
        called_as=called_as or {},
    )


def _unary(layer: str, module: str, *before: str) -> tuple[tuple[Fusion, ...], str]:
    """The rows fusing each of ``layer``'s post-ops (after ``before``), and their description."""
    posts = post_ops_after(layer)
    names = " / ".join(p.label for p in posts)
    return _rows(layer, *((*before, p.name) for p in posts)), f"{module} → {names}"


def _after_add(
    layer: str,
    prefix: str,
    description: str,
    example: Any,
    *,
    bn: bool = False,
    why_not: Any = None,
) -> list[X86Annotator]:
    """``layer [→ bn] → add → post-op``, one annotator per post-op that may follow an add."""
    ops = (CONV2D if layer == "conv2d" else LINEAR) | ADD_OPS
    chain = ("batch_norm",) if bn else ()
    return [
        _layer(
            f"{prefix}_{p.name}",
            _rows(layer, (*chain, ADD.name, p.name)),
            ops,
            f"{description} → {p.label}",
            example(add=True, unary=p.name),
            why_not,
        )
        for p in post_ops_after(layer, add=True)
    ]


_QAT_UNARY = _unary("conv2d", "QAT: nn.Conv2d → BatchNorm2d", "batch_norm")
_CONV_UNARY, _CONV1D_UNARY = _unary("conv2d", "nn.Conv2d"), _unary("conv1d", "nn.Conv1d")
_LINEAR_UNARY = _unary("linear", "nn.Linear")

X86_ANNOTATORS: tuple[X86Annotator, ...] = (
    *_after_add(
        "conv2d",
        "qat_conv2d_bn_add",
        "QAT: nn.Conv2d → BatchNorm2d → add",
        examples.qat_conv_bn,
        bn=True,
    ),
    _layer(
        "qat_conv2d_bn_add",
        _rows("conv2d", ("batch_norm", ADD.name)),
        CONV2D | ADD_OPS,
        "QAT: nn.Conv2d → BatchNorm2d → add",
        examples.qat_conv_bn(add=True),
    ),
    _layer(
        "qat_conv2d_bn_unary",
        _QAT_UNARY[0],
        CONV2D,
        _QAT_UNARY[1],
        examples.qat_conv_bn(unary=_QAT_UNARY[0][-1].calls[-1]),
    ),
    _layer(
        "qat_conv2d_bn",
        _rows("conv2d", ("batch_norm",)),
        CONV2D,
        "QAT: nn.Conv2d → BatchNorm2d",
        examples.qat_conv_bn(),
    ),
    *_after_add(
        "conv2d", "conv2d_add", "nn.Conv2d → add (either side)", examples.conv, why_not=_add_why_not
    ),
    _layer(
        "conv2d_add",
        _rows("conv2d", (ADD.name,)),
        CONV2D | ADD_OPS,
        "nn.Conv2d → add (either side)",
        examples.conv(add=True),
        _add_why_not,
    ),
    _layer(
        "conv_unary",
        _CONV_UNARY[0] + _CONV1D_UNARY[0],
        CONV2D | {aten.conv1d.default},
        f"{_CONV_UNARY[1]}; {_CONV1D_UNARY[1]}",
        examples.conv(unary=_CONV_UNARY[0][-1].calls[-1]),
        _conv1d_why_not,
        # (torchao 0.18 maps nn.Conv2d twice and never nn.Conv1d; see the README)
        called_as={aten.conv1d.default: SOURCES["conv1d"]},
    ),
    _layer(
        "conv2d",
        _rows("conv2d", ()),
        CONV2D,
        "nn.Conv2d",
        examples.conv(),
        _layer_why_not("conv2d", "nn.Conv2d"),
        called_as={aten.conv2d.default: SOURCES["conv2d"]},
    ),
    *_after_add(
        "linear",
        "linear_add",
        "nn.Linear → add (either side; the other input stays float)",
        examples.linear,
        why_not=_add_why_not,
    ),
    _layer(
        "linear_add",
        _rows("linear", (ADD.name,)),
        LINEAR | ADD_OPS,
        "nn.Linear → add (either side; the other input stays float)",
        examples.linear(add=True),
        _add_why_not,
    ),
    _layer(
        "linear_unary",
        _LINEAR_UNARY[0],
        LINEAR,
        _LINEAR_UNARY[1],
        examples.linear(unary=_LINEAR_UNARY[0][-1].calls[-1]),
    ),
    _layer(
        "linear",
        _rows("any_linear", ()),
        LINEAR,
        "nn.Linear",
        examples.linear(),
        _layer_why_not("any_linear", "nn.Linear"),
        called_as={aten.linear.default: SOURCES["any_linear"]},
    ),
    X86Annotator(
        "matmul",
        annotate_matmul,
        dynamic=True,
        ops=frozenset({aten.matmul.default}),
        # as torchao's recipe: quantized by an operator's or a module's own config only
        opt_in=True,
        description="matmul, both operands (by operator or module name, or enable('matmul'))",
        example=examples.matmul,
        called_as={aten.matmul.default: (torch.matmul,)},
    ),
    X86Annotator(
        "matmul_int8",
        annotate_matmul_int8,
        dynamic=True,
        ops=frozenset({aten.matmul.default}),
        # after "matmul": a scoped config that runs both keeps torchao's annotation
        opt_in=True,
        description=(
            "matmul, operands as int8 matmuls take them (symmetric int8; probabilities "
            "uint8), and SDPA spelled out (enable('matmul_int8'); not torchao's): oneDNN "
            "int8 matmuls under qcore's x86 lowering"
        ),
        example=examples.matmul,
        why_not=_matmul_int8_why_not,
        called_as={aten.matmul.default: (torch.matmul,)},
    ),
    X86Annotator(
        "mul",
        annotate_mul,
        dynamic=True,
        ops=frozenset({aten.mul.Tensor}),
        description="mul of two tensors of one shape",
        why_not=_mul_why_not,
        called_as={aten.mul.Tensor: (torch.mul,)},
    ),
    X86Annotator(
        "int8_passthrough",
        passthrough.annotate_int8_passthrough,
        dynamic=True,
        ops=INT8_IN_INT8_OUT,
        description="max/avg/adaptive pool, cat, flatten after quantized patterns stay int8",
        why_not=passthrough.why_not,
        example=examples.passthrough,
        called_as=INT8_IN_INT8_OUT_CALLED_AS,
    ),
)

ANNOTATORS.define("x86", X86_ANNOTATORS, source=f"qinductor-x86 {__version__}")
