"""Backend-agnostic PT2E annotators, registered in the ``"common"`` namespace.

They follow the annotation rules XNNPACK established and other int8 quantizers share:
an op (or an op fused with its ReLU) gets its activation inputs, weight and bias
annotated on the op and its output on the last node of the pattern; ops that only move
data share their input's qparams. Quantizers reuse these objects in their own namespace
(see :mod:`qcore.annotation.registry`).

Two deliberate differences from upstream, both only visible under scoping: a scope filter
is asked about the pattern's compute nodes only (a weight ``get_attr`` has no module stack,
so upstream never annotates a conv inside ``set_module_name``), and ``cat`` honours the
filter (upstream annotates it in every scope).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

import torch
import torch.nn.functional as F
from torch.fx import GraphModule, Node
from torch.fx.passes.utils.matcher_with_name_node_map_utils import (
    SubgraphMatcherWithNameNodeMap,
)
from torchao.quantization.pt2e import WrapperModule
from torchao.quantization.pt2e.graph_utils import get_source_partitions
from torchao.quantization.pt2e.quantizer import (
    QuantizationAnnotation,
    QuantizationConfig,
    QuantizationSpec,
    SharedQuantizationSpec,
    annotate_input_qspec_map,
    annotate_output_qspec,
    get_bias_qspec,
    get_input_act_qspec,
    get_output_act_qspec,
    get_weight_qspec,
)
from torchao.quantization.pt2e.quantizer.quantizer import Q_ANNOTATION_KEY

from qcore._torch_private import (
    annotation_is_claimed,
    aten_pattern_graph,
    claim_annotation,
    is_fake_tensor,
)
from qcore.annotation.registry import ANNOTATORS, Annotator

Filter = Callable[[Node], bool] | None
Partitions = list[list[Node]]

aten = torch.ops.aten
RELU = frozenset({aten.relu.default, aten.relu_.default})
LINEAR = frozenset({aten.linear.default})
CONV = frozenset(
    {
        aten.conv1d.default,
        aten.conv1d.padding,
        aten.conv2d.default,
        aten.conv2d.padding,
        aten.conv3d.default,
        aten.conv3d.padding,
    }
)
CONV_TRANSPOSE = frozenset(
    {
        aten.conv_transpose1d,
        aten.conv_transpose1d.default,
        aten.conv_transpose2d,
        aten.conv_transpose2d.input,
        aten.conv_transpose3d,
        aten.conv_transpose3d.input,
    }
)
ADD = frozenset({aten.add.Tensor, aten.add_.Tensor})
MUL = frozenset({aten.mul.Tensor, aten.mul_.Tensor})
CAT = frozenset({aten.cat.default})
ADAPTIVE_AVG_POOL2D = frozenset({aten.adaptive_avg_pool2d.default})
MAX_POOL2D = frozenset({aten.max_pool2d.default})
#: Ops whose output keeps its input's qparams: they move or select values, or clamp at a
#: bound the input range already contains. Dropout is identity in a deployed model.
SHARE_QPARAMS = frozenset(
    {
        aten.relu.default,
        aten.hardtanh.default,
        aten.hardtanh_.default,
        aten.max_pool2d.default,
        aten.mean.default,
        aten.mean.dim,
        aten.permute.default,
        aten.permute_copy.default,
        aten.transpose.int,
        aten.squeeze.dim,
        aten.squeeze_copy.dim,
        aten.adaptive_avg_pool2d.default,
        aten.view_copy.default,
        aten.view.default,
        aten.reshape.default,
        aten.slice.Tensor,
        aten.slice_copy.Tensor,
        aten.flatten.using_ints,
        aten.dropout.default,
        aten.dropout_.default,
    }
)
#: torch.histc, behind HistogramObserver, fails on values above this.
HISTC_UPPER_BOUND = 3.4028235e15


# -- helpers ---------------------------------------------------------------------------


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


def is_float_tensor(node: object) -> bool:
    """Whether ``node`` is a graph value whose traced value is a floating-point tensor:
    the only kind an observer may see (an int8 observer on an index or a mask computes
    nonsense, and histogram observers crash on it)."""
    if not isinstance(node, Node):
        return False
    val = node.meta.get("val")
    return isinstance(val, torch.Tensor) and val.dtype.is_floating_point


def non_float_quantized(node: Node) -> list[str]:
    """The tensors a claimed annotation on ``node`` would observe that are not floating
    point, as ``"name (dtype)"``: empty for every annotation a quantizer may write."""
    ann = node.meta.get(Q_ANNOTATION_KEY)
    if ann is None or not annotation_is_claimed(ann):
        return []
    quantized = [n for n, spec in ann.input_qspec_map.items() if spec is not None]
    if ann.output_qspec is not None:
        quantized.append(node)
    return [
        f"{n.name} ({', '.join(str(d) for d in dtypes)})"
        for n in quantized
        if isinstance(n, Node) and (dtypes := _non_float_dtypes(n.meta.get("val")))
    ]


def _non_float_dtypes(val: object) -> list[torch.dtype]:
    """The non-floating-point dtypes of a traced value (a tensor, or a tuple of them);
    nothing for a value not recorded (the check is about known integer tensors)."""
    if isinstance(val, torch.Tensor):
        return [] if val.dtype.is_floating_point else [val.dtype]
    if isinstance(val, list | tuple):
        return [d for v in val for d in _non_float_dtypes(v)]
    return []


def non_quantizable_reason(node: Node, gm: GraphModule) -> str | None:
    """Why an activation input cannot be observed, or None if it can."""
    val = node.meta.get("val")
    if val is None or not is_fake_tensor(val):
        return "input has no traced tensor value"
    if val.dtype != torch.float32:
        return f"input is a non-float tensor ({val.dtype})"
    huge = _large_scalar(node, gm)
    if huge is not None and node.op == "get_attr":
        return f"input is a scalar too large to observe ({huge:g})"
    mask = None if huge is not None else additive_mask_value(node, gm)
    if mask is not None:
        return (
            f"input is an additive mask holding {mask:g}: an int8 scale spanning it rounds "
            "every other value to zero"
        )
    return None


def _large_scalar(node: object, gm: GraphModule) -> float | None:
    """The value of a one-element ``get_attr`` tensor or a Python number beyond what an
    observer can take, else None."""
    value: float | None = None
    if isinstance(node, int | float) and not isinstance(node, bool):
        value = float(node)
    elif isinstance(node, Node) and node.op == "get_attr":
        module_path, _, name = str(node.target).rpartition(".")
        tensor = getattr(gm.get_submodule(module_path), name, None)
        if isinstance(tensor, torch.Tensor) and tensor.numel() == 1:
            value = float(tensor.item())
    return value if value is not None and abs(value) > HISTC_UPPER_BOUND else None


#: Ops whose output holds one of their scalar or constant arguments (``where(mask, 0,
#: finfo.min)``, ``masked_fill``, ``full``) or scales by one (``(1 - mask) * finfo.min``).
_CONSTANT_FILLS = frozenset(
    {
        aten.where.self,
        aten.where.ScalarOther,
        aten.where.ScalarSelf,
        aten.where.Scalar,
        aten.masked_fill.Scalar,
        aten.full.default,
        aten.full_like.default,
        aten.new_full.default,
        aten.fill.Scalar,
        aten.mul.Tensor,
    }
)
#: Ops that only move, broadcast or cast their first input's values.
_SAME_VALUES = frozenset(
    {
        aten.expand.default,
        aten.view.default,
        aten.reshape.default,
        aten.unsqueeze.default,
        aten.squeeze.dim,
        aten.slice.Tensor,
        aten.permute.default,
        aten.transpose.int,
        aten.contiguous.default,
        aten.clone.default,
        aten.to.dtype,
        aten.to.dtype_layout,
        aten._to_copy.default,
    }
)


def additive_mask_value(node: Node, gm: GraphModule) -> float | None:
    """The huge constant (beyond :data:`HISTC_UPPER_BOUND`, e.g. ``finfo.min``) that
    ``node`` holds where it masks, if it is built from one: Hugging Face's attention
    masks are ``where(mask, 0, finfo(float32).min)``. Such a tensor added to attention
    scores must stay in float: its observed range would make the add's scale ~1e36.

    A mask computed from constants alone (a ViT's, which masks nothing) is evaluated:
    it is a mask here only if the huge value is really in it."""
    huge = _built_from_huge_constant(node, gm)
    if huge is None or _reads_graph_inputs(node):
        return huge
    value = _evaluate_constant(node, gm)
    if value is not None and bool((value.abs() <= HISTC_UPPER_BOUND).all()):
        return None
    return huge


def _reads_graph_inputs(node: Node) -> bool:
    seen, stack = {node}, [node]
    while stack:
        current = stack.pop()
        if current.op == "placeholder":
            return True
        for arg in current.all_input_nodes:
            if arg not in seen:
                seen.add(arg)
                stack.append(arg)
    return False


def _evaluate_constant(node: Node, gm: GraphModule) -> torch.Tensor | None:
    """The value of a node computed from attributes and constants only (no graph input),
    by running its ancestors; None if one of them cannot run outside the graph."""
    values: dict[Node, Any] = {}

    def value_of(n: Node) -> Any:
        if n in values:
            return values[n]
        if n.op == "get_attr":
            module_path, _, name = str(n.target).rpartition(".")
            result = getattr(gm.get_submodule(module_path), name)
        elif n.op == "call_function" and callable(n.target):
            args = torch.fx.node.map_arg(n.args, value_of)
            kwargs = torch.fx.node.map_arg(n.kwargs, value_of)
            result = n.target(*args, **kwargs)
        else:
            raise LookupError(n.name)
        values[n] = result
        return result

    try:
        with torch.no_grad():
            out = value_of(node)
    except (LookupError, RuntimeError, TypeError):
        return None
    return out if isinstance(out, torch.Tensor) else None


def _built_from_huge_constant(node: Node, gm: GraphModule, depth: int = 8) -> float | None:
    if depth == 0 or not isinstance(node, Node):
        return None
    if is_op(node, _SAME_VALUES):
        return _built_from_huge_constant(node.args[0], gm, depth - 1)  # type: ignore[arg-type]
    if not is_op(node, _CONSTANT_FILLS):
        return None
    for arg in [*node.args, *node.kwargs.values()]:
        huge = _large_scalar(arg, gm)
        if huge is None and is_op(arg, _CONSTANT_FILLS | _SAME_VALUES):
            huge = _built_from_huge_constant(arg, gm, depth - 1)  # type: ignore[arg-type]
        if huge is not None:
            return huge
    return None


def weight_spec_for_transpose(spec: QuantizationSpec | None) -> QuantizationSpec | None:
    """Transposed conv weights are (C_in, C_out/groups, ...): per channel means axis 1."""
    return None if spec is None else replace(spec, ch_axis=1)


def conv_transpose_groups(conv: Node) -> int:
    weight = conv.args[1]
    assert isinstance(weight, Node)
    return int(conv.meta["val"].shape[1] // weight.meta["val"].shape[1])


# -- compute ops -----------------------------------------------------------------------


def annotate_linear(
    gm: GraphModule, config: QuantizationConfig | None, filter_fn: Filter
) -> Partitions:
    partitions = []
    act_qspec, out_qspec = get_input_act_qspec(config), get_output_act_qspec(config)
    weight_qspec, bias_qspec = get_weight_qspec(config), get_bias_qspec(config)
    for node in gm.graph.nodes:
        if not is_op(node, LINEAR) or not passes(filter_fn, [node]) or is_annotated([node]):
            continue
        act, weight, bias = node.args[0], node.args[1], node.args[2] if len(node.args) > 2 else None
        annotate_input_qspec_map(node, act, act_qspec)
        annotate_input_qspec_map(node, weight, weight_qspec)
        partition = [node, weight]
        if bias:
            annotate_input_qspec_map(node, bias, bias_qspec)
            partition.append(bias)
        annotate_output_qspec(node, out_qspec)
        mark_annotated(partition)
        partitions.append(partition)
    return partitions


def _weighted_inputs(
    op: Node, config: QuantizationConfig | None, transpose: bool
) -> tuple[dict[Node, Any], list[Node]]:
    """The qspec map and partition nodes of a weighted op: activation, weight, bias."""
    act, weight = op.args[0], op.args[1]
    assert isinstance(act, Node) and isinstance(weight, Node)
    weight_qspec = get_weight_qspec(config)
    if transpose:
        weight_qspec = weight_spec_for_transpose(weight_qspec)
    qspecs: dict[Node, Any] = {act: get_input_act_qspec(config), weight: weight_qspec}
    partition = [op, weight]
    bias = op.args[2] if len(op.args) > 2 else None
    if isinstance(bias, Node):
        qspecs[bias] = get_bias_qspec(config)
        partition.append(bias)
    return qspecs, partition


def _annotate_op_relu(
    gm: GraphModule,
    config: QuantizationConfig | None,
    filter_fn: Filter,
    ops: frozenset[Any],
    *,
    accept: Callable[[Node], bool] = lambda _: True,
    transpose: bool = False,
) -> Partitions:
    """``op → relu`` with the op's inputs on the op and the output on the relu."""
    partitions = []
    for relu in gm.graph.nodes:
        if not is_op(relu, RELU) or not is_op(relu.args[0], ops):
            continue
        op = relu.args[0]
        if len(op.users) > 1:  # the pre-relu value escapes: nothing to fuse
            continue
        qspecs, partition = _weighted_inputs(op, config, transpose)
        partition.insert(0, relu)
        if is_annotated(partition) or not accept(op) or not passes(filter_fn, partition):
            continue
        set_annotation(op, qspecs)
        set_annotation(relu, output=get_output_act_qspec(config))
        mark_annotated(partition)
        partitions.append(partition)
    return partitions


def annotate_linear_relu(
    gm: GraphModule, config: QuantizationConfig | None, filter_fn: Filter
) -> Partitions:
    return _annotate_op_relu(gm, config, filter_fn, LINEAR)


def conv_annotators(
    reject: Callable[[Node, QuantizationConfig | None, bool], str | None] = lambda *_: None,
) -> tuple[Callable[..., Partitions], ...]:
    """conv, conv_transpose, conv_relu, conv_transpose_relu annotate functions.

    ``reject(conv, config, transpose)`` returns why a backend cannot run this conv
    quantized (group count, rank, depthwise), or None.
    """

    def conv(
        gm: GraphModule, config: QuantizationConfig | None, filter_fn: Filter, transpose: bool
    ) -> Partitions:
        partitions = []
        for op in gm.graph.nodes:
            if not is_op(op, CONV_TRANSPOSE if transpose else CONV):
                continue
            if is_op(sole_user(op), RELU):  # left to the conv_relu annotator
                continue
            qspecs, partition = _weighted_inputs(op, config, transpose)
            if is_annotated(partition) or reject(op, config, transpose):
                continue
            if not passes(filter_fn, partition):
                continue
            set_annotation(op, qspecs, get_output_act_qspec(config))
            mark_annotated(partition)
            partitions.append(partition)
        return partitions

    def conv_relu(
        gm: GraphModule, config: QuantizationConfig | None, filter_fn: Filter, transpose: bool
    ) -> Partitions:
        ops = CONV_TRANSPOSE if transpose else CONV
        return _annotate_op_relu(
            gm,
            config,
            filter_fn,
            ops,
            accept=lambda op: reject(op, config, transpose) is None,
            transpose=transpose,
        )

    return (
        functools.partial(conv, transpose=False),
        functools.partial(conv, transpose=True),
        functools.partial(conv_relu, transpose=False),
        functools.partial(conv_relu, transpose=True),
    )


def reject_grouped_transpose(
    conv: Node, config: QuantizationConfig | None, transpose: bool
) -> str | None:
    if transpose and conv_transpose_groups(conv) != 1:
        return f"transposed conv with {conv_transpose_groups(conv)} groups"
    return None


# -- conv-bn (QAT graphs) ---------------------------------------------------------------

_CONV1D_BN_INPUTS = (
    torch.randn(1, 1, 3),
    torch.randn(1, 1, 1),
    *(torch.randn(1) for _ in range(5)),
)
_CONV2D_BN_INPUTS = (
    torch.randn(1, 1, 3, 3),
    torch.randn(1, 1, 1, 1),
    *(torch.randn(1) for _ in range(5)),
)


@functools.cache
def _conv_bn_matcher(
    conv_fn: Callable[..., Any], rank: int, relu: str
) -> SubgraphMatcherWithNameNodeMap:
    """A matcher for ``conv_fn → batch_norm(training) [→ relu]``; built once per shape
    because exporting the pattern dominates annotation time otherwise."""

    # the pattern's signature is the conv-bn argument list the matcher binds
    def pattern(  # noqa: PLR0917
        x: Any, w: Any, b: Any, bn_w: Any, bn_b: Any, bn_rm: Any, bn_rv: Any
    ) -> Any:
        conv = conv_fn(x, w, b)
        out = F.batch_norm(conv, bn_rm, bn_rv, bn_w, bn_b, training=True)
        if relu:
            out = F.relu_(out) if relu == "relu_" else F.relu(out)
        return out, {"input": x, "conv": conv, "weight": w, "bias": b, "output": out}

    inputs = _CONV1D_BN_INPUTS if rank == 1 else _CONV2D_BN_INPUTS
    graph = aten_pattern_graph(WrapperModule(pattern), inputs)
    graph.graph.eliminate_dead_code()
    graph.recompile()
    return SubgraphMatcherWithNameNodeMap(graph, ignore_literals=True)


def conv_bn_annotator(relu: bool, transpose: bool) -> Callable[..., Partitions]:
    """conv[_transpose] → batch_norm [→ relu], as QAT graphs hold them before folding."""
    fns = (F.conv_transpose1d, F.conv_transpose2d) if transpose else (F.conv1d, F.conv2d)
    relus = ("relu_", "relu") if relu else ("",)

    def annotate(
        gm: GraphModule, config: QuantizationConfig | None, filter_fn: Filter
    ) -> Partitions:
        # matching needs the unused batch_norm outputs gone
        gm.graph.eliminate_dead_code()
        gm.recompile()
        matches = [
            m
            for (rank, fn), r in itertools.product(enumerate(fns, start=1), relus)
            for m in _conv_bn_matcher(fn, rank, r).match(gm.graph)
        ]
        partitions = []
        for match in matches:
            names = match.name_node_map
            conv, weight, bias = names["conv"], names["weight"], names["bias"]
            partition = [conv, weight] + ([bias] if bias is not None else [])
            if is_annotated(partition) or not passes(filter_fn, partition):
                continue
            qspecs = {names["input"]: get_input_act_qspec(config), weight: get_weight_qspec(config)}
            if bias is not None:
                qspecs[bias] = get_bias_qspec(config)
            set_annotation(conv, qspecs)
            set_annotation(names["output"], output=get_output_act_qspec(config))
            mark_annotated(partition)
            partitions.append(partition)
        return partitions

    return annotate


# -- binary ops ------------------------------------------------------------------------


def binary_annotator(ops: frozenset[Any], with_relu: bool) -> Callable[..., Partitions]:
    """add/mul, optionally fused with a following relu. Tensor inputs that cannot be
    observed (integer, huge scalar) leave the op in float."""

    def annotate(
        gm: GraphModule, config: QuantizationConfig | None, filter_fn: Filter
    ) -> Partitions:
        partitions = []
        for node in gm.graph.nodes:
            if with_relu:
                if not is_op(node, RELU) or not is_op(node.args[0], ops):
                    continue
                op, last = node.args[0], node
                if len(op.users) > 1:
                    continue
                partition = [last, op]
            else:
                if not is_op(node, ops):
                    continue
                op = last = node
                partition = [op]
            if is_annotated(partition) or not passes(filter_fn, partition):
                continue
            inputs = [a for a in op.args[:2] if isinstance(a, Node)]
            if any(non_quantizable_reason(a, gm) for a in inputs):
                continue
            act_qspec = get_input_act_qspec(config)
            if with_relu:
                set_annotation(op, dict.fromkeys(inputs, act_qspec))
                set_annotation(last, output=get_output_act_qspec(config))
            else:
                set_annotation(op, dict.fromkeys(inputs, act_qspec), get_output_act_qspec(config))
            partitions.append(partition + inputs)
        return partitions

    return annotate


# -- data movement ---------------------------------------------------------------------


def _has_output_qparams(node: Node) -> bool:
    ann = node.meta.get(Q_ANNOTATION_KEY)
    return ann is not None and annotation_is_claimed(ann) and ann.output_qspec is not None


def _traces_to_qparams(node: Node) -> bool:
    """Walk back through share-qparams ops to an annotated producer."""
    seen: set[Node] = set()
    while node not in seen:
        seen.add(node)
        if _has_output_qparams(node):
            return True
        if not is_op(node, SHARE_QPARAMS) or not isinstance(node.args[0], Node):
            return False
        node = node.args[0]
    return False


def annotate_cat(
    gm: GraphModule, config: QuantizationConfig | None, filter_fn: Filter
) -> Partitions:
    """All inputs and the output of cat share one set of qparams, owned by the first input
    that already has some (so cat follows the producer instead of re-observing)."""
    partitions = []
    for cat in gm.graph.nodes:
        if not is_op(cat, CAT) or is_annotated([cat]) or not passes(filter_fn, [cat]):
            continue
        inputs: Sequence[Any] = cat.args[0]
        if not all(is_float_tensor(a) for a in [*inputs, cat]):  # e.g. position ids
            continue
        source = next(
            (a for a in inputs if isinstance(a, Node) and _traces_to_qparams(a)), inputs[0]
        )
        shared = SharedQuantizationSpec((source, cat))
        qspecs: dict[Node, Any] = (
            {source: get_input_act_qspec(config)} if isinstance(source, Node) else {}
        )
        for a in inputs:
            qspecs.setdefault(a, shared)
        set_annotation(cat, qspecs, shared)
        partitions.append(cat.all_input_nodes)
    return partitions


def annotate_adaptive_avg_pool2d(
    gm: GraphModule, config: QuantizationConfig | None, filter_fn: Filter
) -> Partitions:
    """Output shares the input's qparams; the input is observed unless already annotated."""
    found = get_source_partitions(
        gm.graph, [torch.nn.AdaptiveAvgPool2d, F.adaptive_avg_pool2d], filter_fn
    )
    partitions = []
    for part in itertools.chain.from_iterable(found.values()):
        pool = part.output_nodes[0]
        if not is_op(pool, ADAPTIVE_AVG_POOL2D):
            raise ValueError(f"{pool} is not an aten adaptive_avg_pool2d operator")
        if is_annotated([pool]):
            continue
        partitions.append(part.nodes)
        act = pool.args[0]
        act_qspec = (
            SharedQuantizationSpec(act) if _has_output_qparams(act) else get_input_act_qspec(config)
        )
        set_annotation(pool, {act: act_qspec}, SharedQuantizationSpec((act, pool)))
    return partitions


def annotate_max_pool2d(
    gm: GraphModule, config: QuantizationConfig | None, filter_fn: Filter
) -> Partitions:
    """max_pool2d after an annotated producer shares its qparams (the spec's annotator;
    ``propagate_shared_qparams`` reaches the same result after the fact)."""
    partitions = []
    for pool in gm.graph.nodes:
        if not is_op(pool, MAX_POOL2D) or is_annotated([pool]) or not passes(filter_fn, [pool]):
            continue
        act = pool.args[0]
        if not isinstance(act, Node) or not _has_output_qparams(act):
            continue
        shared = SharedQuantizationSpec(act)
        set_annotation(pool, {act: shared}, shared)
        partitions.append([pool])
    return partitions


def annotate_gru_io_only(
    gm: GraphModule, config: QuantizationConfig | None, filter_fn: Filter
) -> Partitions:
    """Quantize a GRU's inputs and outputs, leaving its internals in float."""
    found = get_source_partitions(gm.graph, [torch.nn.GRU], filter_fn)
    partitions = []
    for part in itertools.chain.from_iterable(found.values()):
        partitions.append(part.nodes)
        if is_annotated(part.input_nodes + part.output_nodes):
            continue
        for source in part.input_nodes[:2]:  # input and hidden state
            set_annotation(next(iter(source.users)), {source: get_input_act_qspec(config)})
        if len(part.output_nodes) != 2:
            raise ValueError(
                f"GRU partition {part.nodes} has {len(part.output_nodes)} outputs, expected 2"
            )
        for out in part.output_nodes:
            set_annotation(out, output=get_output_act_qspec(config))
        mark_annotated(part.nodes)
    return partitions


def propagate_shared_qparams(gm: GraphModule) -> None:
    """After all annotators: a share-qparams op right after a quantized output shares it,
    so chains of views/pools stay quantized without an annotator each."""
    for node in gm.graph.nodes:
        if not is_op(node, SHARE_QPARAMS) or not isinstance(node.args[0], Node):
            continue
        prev = node.args[0]
        ann = prev.meta.get(Q_ANNOTATION_KEY)
        if not ann or not ann.output_qspec or is_annotated([node]) or not is_float_tensor(node):
            continue
        shared = SharedQuantizationSpec(prev)
        set_annotation(node, {prev: shared}, shared)


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


CONV3D = frozenset({aten.conv3d.default, aten.conv3d.padding})
_CONV_ARGS = ("bias", "stride", "padding", "dilation", "groups")
_CONV_DEFAULTS: dict[str, Any] = {"bias": None, "stride": 1, "padding": 0, "dilation": 1, "groups": 1}


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
    changed = False
    for node in list(gm.graph.nodes):
        if is_op(node, CONV3D) and _static_batched_conv3d(node):
            _replace_conv3d(gm, node)
            changed = True
    if changed:
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
    if padding == "valid":
        pads = [(0, 0)] * 3
    elif padding == "same":
        totals = [d * (k - 1) for d, k in zip(dilation, (depth, height, width), strict=True)]
        pads = [(t // 2, t - t // 2) for t in totals]
    else:
        pads = [(p, p) for p in _triple(padding)]
    graph = gm.graph

    def call(op: Any, *args: Any) -> Node:
        node = graph.call_function(op, args)
        node.meta = {k: v for k, v in conv.meta.items() if k != "val"}
        node.meta["val"] = op(*(_fake(a) for a in args))
        return node

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
        images = call(aten.reshape.default, moved, [batch * out_depth, channels * depth, rows, cols])
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


def _fake(arg: Any) -> Any:
    """The value export recorded for ``arg`` (a node, or a list that holds nodes)."""
    if isinstance(arg, Node):
        return arg.meta["val"]
    if isinstance(arg, list):
        return [_fake(a) for a in arg]
    return arg


# -- registration ----------------------------------------------------------------------

_conv, _conv_transpose, _conv_relu, _conv_transpose_relu = conv_annotators(reject_grouped_transpose)


def _qat_conv_bn(transpose: bool, relu: bool) -> Annotator:
    """The QAT-only conv[_transpose] → batch_norm [→ relu] annotator."""
    conv = "conv_transpose" if transpose else "conv"
    return Annotator(
        f"{conv}_bn" + ("_relu" if relu else ""),
        conv_bn_annotator(relu, transpose),
        static=False,
        qat_only=True,
        ops=CONV_TRANSPOSE if transpose else CONV,
        description=f"{conv} → batch_norm" + (" → relu" if relu else "") + " in QAT graphs",
    )


COMMON: tuple[Annotator, ...] = (
    *(_qat_conv_bn(transpose, relu) for transpose in (False, True) for relu in (True, False)),
    Annotator("linear_relu", annotate_linear_relu, ops=LINEAR, description="linear → relu"),
    Annotator("linear", annotate_linear, dynamic=True, ops=LINEAR, description="linear"),
    Annotator("conv", _conv, dynamic=True, ops=CONV, description="conv1d/2d/3d"),
    Annotator(
        "conv_transpose",
        _conv_transpose,
        dynamic=True,
        ops=CONV_TRANSPOSE,
        description="conv_transpose, one group",
    ),
    Annotator("conv_relu", _conv_relu, ops=CONV, description="conv → relu"),
    Annotator(
        "conv_transpose_relu",
        _conv_transpose_relu,
        ops=CONV_TRANSPOSE,
        description="conv_transpose → relu, one group",
    ),
    Annotator(
        "adaptive_avg_pool2d",
        annotate_adaptive_avg_pool2d,
        ops=ADAPTIVE_AVG_POOL2D,
        description="adaptive_avg_pool2d, output shares input qparams",
    ),
    Annotator("add_relu", binary_annotator(ADD, True), ops=ADD, description="add → relu"),
    Annotator("add", binary_annotator(ADD, False), ops=ADD, description="add"),
    Annotator("mul_relu", binary_annotator(MUL, True), ops=MUL, description="mul → relu"),
    Annotator("mul", binary_annotator(MUL, False), ops=MUL, description="mul"),
    Annotator("cat", annotate_cat, ops=CAT, description="cat, qparams from an annotated input"),
    Annotator(
        "max_pool2d",
        annotate_max_pool2d,
        ops=MAX_POOL2D,
        description="max_pool2d sharing an annotated producer's qparams",
    ),
    Annotator(
        "gru_io_only",
        annotate_gru_io_only,
        ops=frozenset(),
        opt_in=True,
        description="GRU inputs and outputs only",
    ),
)

ANNOTATORS.define("common", COMMON, source="qcore")
