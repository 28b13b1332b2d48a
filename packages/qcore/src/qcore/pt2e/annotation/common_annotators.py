"""Backend-agnostic PT2E annotators, and :data:`COMMON`, the ``"common"`` namespace's table.

They follow the annotation rules XNNPACK established and other int8 quantizers share:
an op (or an op fused with its ReLU) gets its activation inputs, weight and bias
annotated on the op and its output on the last node of the pattern; ops that only move
data share their input's qparams. Each annotator is a module constant (``LINEAR_RELU``,
``CONV``...) so that a quantizer's own table lists the ones it reuses by name (see
``qquantizer_xnnpack.annotators``); a fix to one reaches every quantizer that lists it.

Importing this module registers nothing: the registry defines the ``"common"`` namespace
from :data:`COMMON` on its first lookup (:mod:`qcore.pt2e.annotation.registry`).

Two deliberate differences from upstream, both only visible under scoping: a scope filter
is asked about the pattern's compute nodes only (a weight ``get_attr`` has no module stack,
so upstream never annotates a conv inside ``set_module_name``), and ``cat`` honours the
filter (upstream annotates it in every scope).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import torch
import torch.nn.functional as F
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e import WrapperModule
from torchao.quantization.pt2e.graph_utils import get_source_partitions
from torchao.quantization.pt2e.quantizer import (
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

from qcore._torch_private import Q_ANNOTATION_KEY, aten_pattern_graph, named_subgraph_matcher
from qcore.pt2e.annotation import ops
from qcore.pt2e.annotation.claims import (
    Filter,
    Partitions,
    has_output_qparams,
    is_annotated,
    is_op,
    mark_annotated,
    passes,
    set_annotation,
    sole_user,
)
from qcore.pt2e.annotation.observable import is_float_tensor, non_quantizable_reason
from qcore.pt2e.annotation.registry import Annotator


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
        if not is_op(node, ops.LINEAR) or not passes(filter_fn, [node]) or is_annotated([node]):
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
    if not (isinstance(act, Node) and isinstance(weight, Node)):
        # a hand-built graph; export makes every tensor argument a node
        raise ValueError(
            f"{op.name} ({op.target}): its input and weight must be graph nodes, "
            f"got {type(act).__name__} and {type(weight).__name__}"
        )
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
    targets: frozenset[Any],
    *,
    accept: Callable[[Node], bool] = lambda _: True,
    transpose: bool = False,
) -> Partitions:
    """``op → relu`` with the op's inputs on the op and the output on the relu."""
    partitions = []
    for relu in gm.graph.nodes:
        if not is_op(relu, ops.RELU) or not is_op(relu.args[0], targets):
            continue
        op = relu.args[0]
        if len(op.users) > 1:  # the pre-relu value escapes: nothing to fuse
            continue
        qspecs, inputs = _weighted_inputs(op, config, transpose)
        partition = [relu, *inputs]
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
    return _annotate_op_relu(gm, config, filter_fn, ops.LINEAR)


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
            if not is_op(op, ops.CONV_TRANSPOSE if transpose else ops.CONV):
                continue
            if is_op(sole_user(op), ops.RELU):  # left to the conv_relu annotator
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
        return _annotate_op_relu(
            gm,
            config,
            filter_fn,
            ops.CONV_TRANSPOSE if transpose else ops.CONV,
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


def _conv_bn_example(rank: int) -> tuple[torch.Tensor, ...]:
    """Inputs to trace the conv-bn pattern at ``rank`` spatial dims: x, weight, bias and
    batch_norm's four tensors. Only their shapes matter (the matcher ignores literals, and
    tracing reads no values), so ones: no draw from torch's RNG, which the user seeded."""
    return (
        torch.ones(1, 1, *(3,) * rank),
        torch.ones(1, 1, *(1,) * rank),
        *(torch.ones(1) for _ in range(5)),
    )


@functools.cache
def _conv_bn_matcher(conv_fn: Callable[..., Any], rank: int, relu: Callable[..., Any] | None) -> Any:
    """A matcher for ``conv_fn → batch_norm(training) [→ relu]``; built once per shape
    because exporting the pattern dominates annotation time otherwise."""

    # the pattern's signature is the conv-bn argument list the matcher binds
    def pattern(  # noqa: PLR0917
        x: Any, w: Any, b: Any, bn_w: Any, bn_b: Any, bn_rm: Any, bn_rv: Any
    ) -> Any:
        conv = conv_fn(x, w, b)
        out = F.batch_norm(conv, bn_rm, bn_rv, bn_w, bn_b, training=True)
        if relu is not None:
            out = relu(out)
        return out, {"input": x, "conv": conv, "weight": w, "bias": b, "output": out}

    graph = aten_pattern_graph(WrapperModule(pattern), _conv_bn_example(rank))
    graph.graph.eliminate_dead_code()
    graph.recompile()
    return named_subgraph_matcher(graph, ignore_literals=True)


def _is_batch_norm(node: Node) -> bool:
    """Any batch_norm op, whichever overload export produced (aten.batch_norm on newer
    torch, _native_batch_norm_legit and its variants on older ones)."""
    return node.op == "call_function" and "batch_norm" in str(node.target)


def conv_bn_annotator(relu: bool, transpose: bool) -> Callable[..., Partitions]:
    """conv[_transpose] → batch_norm [→ relu], as QAT graphs hold them before folding."""
    fns = (F.conv_transpose1d, F.conv_transpose2d) if transpose else (F.conv1d, F.conv2d)
    relus = (F.relu_, F.relu) if relu else (None,)

    def annotate(
        gm: GraphModule, config: QuantizationConfig | None, filter_fn: Filter
    ) -> Partitions:
        # matching needs the unused batch_norm outputs gone (upstream's annotators remove
        # dead code here on every graph, and so do these)
        gm.graph.eliminate_dead_code()
        gm.recompile()
        # every pattern holds a batch_norm: without one (any eval graph) nothing can match,
        # and exporting the twelve patterns would cost seconds per process for nothing
        if not any(_is_batch_norm(node) for node in gm.graph.nodes):
            return []
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


def binary_annotator(targets: frozenset[Any], with_relu: bool) -> Callable[..., Partitions]:
    """add/mul, optionally fused with a following relu. Tensor inputs that cannot be
    observed (integer, huge scalar) leave the op in float."""

    def annotate(
        gm: GraphModule, config: QuantizationConfig | None, filter_fn: Filter
    ) -> Partitions:
        partitions = []
        for node in gm.graph.nodes:
            if with_relu:
                if not is_op(node, ops.RELU) or not is_op(node.args[0], targets):
                    continue
                op, last = node.args[0], node
                if len(op.users) > 1:
                    continue
                partition = [last, op]
            else:
                if not is_op(node, targets):
                    continue
                op = last = node
                partition = [op]
            if is_annotated(partition) or not passes(filter_fn, partition):
                continue
            # (the schemas' two positional arguments: add's alpha is keyword-only)
            inputs = [a for a in op.args if isinstance(a, Node)]
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


def _traces_to_qparams(node: Node) -> bool:
    """Walk back through share-qparams ops to an annotated producer."""
    seen: set[Node] = set()
    while node not in seen:
        seen.add(node)
        if has_output_qparams(node):
            return True
        if not is_op(node, ops.SHARE_QPARAMS) or not isinstance(node.args[0], Node):
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
        if not is_op(cat, ops.CAT) or is_annotated([cat]) or not passes(filter_fn, [cat]):
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
        if not is_op(pool, ops.ADAPTIVE_AVG_POOL2D):
            raise ValueError(f"{pool} is not an aten adaptive_avg_pool2d operator")
        if is_annotated([pool]):
            continue
        partitions.append(part.nodes)
        act = pool.args[0]
        act_qspec = (
            SharedQuantizationSpec(act) if has_output_qparams(act) else get_input_act_qspec(config)
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
        if not is_op(pool, ops.MAX_POOL2D) or is_annotated([pool]) or not passes(filter_fn, [pool]):
            continue
        act = pool.args[0]
        if not isinstance(act, Node) or not has_output_qparams(act):
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
        # input and hidden state are usually read by one node (the GRU op): one
        # annotation must hold both, as a second would replace the first
        readers: dict[Node, dict[Node, Any]] = {}
        for source in part.input_nodes[:2]:
            readers.setdefault(next(iter(source.users)), {})[source] = get_input_act_qspec(config)
        for reader, specs in readers.items():
            set_annotation(reader, specs)
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
        if not is_op(node, ops.SHARE_QPARAMS) or not isinstance(node.args[0], Node):
            continue
        prev = node.args[0]
        ann = prev.meta.get(Q_ANNOTATION_KEY)
        if not ann or not ann.output_qspec or is_annotated([node]) or not is_float_tensor(node):
            continue
        shared = SharedQuantizationSpec(prev)
        set_annotation(node, {prev: shared}, shared)


# -- the "common" namespace ------------------------------------------------------------

_conv, _conv_transpose, _conv_relu, _conv_transpose_relu = conv_annotators(reject_grouped_transpose)


def _conv_bn(transpose: bool, relu: bool) -> Annotator:
    """The conv[_transpose] → batch_norm [→ relu] annotator of training graphs."""
    conv = "conv_transpose" if transpose else "conv"
    return Annotator(
        f"{conv}_bn{'_relu' if relu else ''}",  # one f-string: no '+' that runs at import
        conv_bn_annotator(relu, transpose),
        static=False,
        training_pattern=True,
        ops=ops.CONV_TRANSPOSE if transpose else ops.CONV,
        description=f"{conv} → batch_norm{' → relu' if relu else ''} in QAT graphs",
    )


CONV_BN_RELU = _conv_bn(transpose=False, relu=True)
CONV_BN = _conv_bn(transpose=False, relu=False)
CONV_TRANSPOSE_BN_RELU = _conv_bn(transpose=True, relu=True)
CONV_TRANSPOSE_BN = _conv_bn(transpose=True, relu=False)
LINEAR_RELU = Annotator(
    "linear_relu", annotate_linear_relu, ops=ops.LINEAR, description="linear → relu"
)
LINEAR = Annotator("linear", annotate_linear, dynamic=True, ops=ops.LINEAR, description="linear")
CONV = Annotator("conv", _conv, dynamic=True, ops=ops.CONV, description="conv1d/2d/3d")
CONV_TRANSPOSE = Annotator(
    "conv_transpose",
    _conv_transpose,
    dynamic=True,
    ops=ops.CONV_TRANSPOSE,
    description="conv_transpose, one group",
)
CONV_RELU = Annotator("conv_relu", _conv_relu, ops=ops.CONV, description="conv → relu")
CONV_TRANSPOSE_RELU = Annotator(
    "conv_transpose_relu",
    _conv_transpose_relu,
    ops=ops.CONV_TRANSPOSE,
    description="conv_transpose → relu, one group",
)
ADAPTIVE_AVG_POOL2D = Annotator(
    "adaptive_avg_pool2d",
    annotate_adaptive_avg_pool2d,
    ops=ops.ADAPTIVE_AVG_POOL2D,
    description="adaptive_avg_pool2d, output shares input qparams",
)
ADD_RELU = Annotator(
    "add_relu", binary_annotator(ops.ADD, True), ops=ops.ADD, description="add → relu"
)
ADD = Annotator("add", binary_annotator(ops.ADD, False), ops=ops.ADD, description="add")
MUL_RELU = Annotator(
    "mul_relu", binary_annotator(ops.MUL, True), ops=ops.MUL, description="mul → relu"
)
MUL = Annotator("mul", binary_annotator(ops.MUL, False), ops=ops.MUL, description="mul")
CAT = Annotator(
    "cat", annotate_cat, ops=ops.CAT, description="cat, qparams from an annotated input"
)
MAX_POOL2D = Annotator(
    "max_pool2d",
    annotate_max_pool2d,
    ops=ops.MAX_POOL2D,
    description="max_pool2d sharing an annotated producer's qparams",
)
GRU_IO_ONLY = Annotator(
    "gru_io_only",
    annotate_gru_io_only,
    ops=frozenset(),
    opt_in=True,
    description="GRU inputs and outputs only",
)

#: The ``"common"`` namespace in the order a quantizer runs it: training-graph conv-bn
#: first (its conv must not be taken by the plain conv annotators), fused op → relu
#: patterns before the op alone, data movement last (it follows annotated producers).
COMMON: tuple[Annotator, ...] = (
    CONV_BN_RELU,
    CONV_BN,
    CONV_TRANSPOSE_BN_RELU,
    CONV_TRANSPOSE_BN,
    LINEAR_RELU,
    LINEAR,
    CONV,
    CONV_TRANSPOSE,
    CONV_RELU,
    CONV_TRANSPOSE_RELU,
    ADAPTIVE_AVG_POOL2D,
    ADD_RELU,
    ADD,
    MUL_RELU,
    MUL,
    CAT,
    MAX_POOL2D,
    GRU_IO_ONLY,
)
