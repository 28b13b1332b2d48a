"""The order the rewrites run in on one graph, and the pattern passes they own.

Runs on Inductor's inference graph before freezing (the joint-graph hook): the weights are
still graph inputs whose frozen values the compile already holds, and torch's or torchao's
own copies of these passes (registered in freezing) come after and find nothing left to do.
Each family has its own ``PatternMatcherPass``, built once per process on first install and
never registered anywhere global, so installing and uninstalling is exact.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch.fx import Graph

from qcore.int8.cpu_profile import Int8Host
from qinductor_x86 import _torch_private as private
from qinductor_x86.lowering import (
    activation_matmul,
    dataops,
    floatweights,
    fp16,
    intmm,
    ops,
    postops,
    prepack,
    promotion,
    signed,
    woq,
)
from qinductor_x86.lowering.context import CompileContext, lowering
from qinductor_x86.lowering.kernels import INT8_KERNELS
from qinductor_x86.lowering.report import GraphRecord, everything_in_float, left_in_float

#: The pattern passes (a name and what registers its patterns), in the order they run:
#: prepack creates the kernels post-op fusion grows, and data movement on codes needs the
#: quantizes fusion leaves.
PATTERN_PASS_ORDER: tuple[tuple[str, Callable[[Any], None]], ...] = (
    ("weight prepack", prepack.register),
    ("int8 matmul", intmm.register),
    ("fp16 dynamic linear", fp16.register),
    ("post-op fusion", postops.register),
    ("int8 data movement", dataops.register),
    ("int8 weight-only linear", woq.register),
)

FREEZING_OFF = (
    "not lowered: the compile does not freeze weights (set torch._inductor.config.freezing "
    "= True and run the compiled model under torch.no_grad())"
)
NO_ONEDNN = "not lowered: this torch build has no oneDNN (mkldnn) CPU backend"


@functools.cache
def pattern_passes() -> tuple[Any, ...]:
    """The pattern passes, traced and built on first use (a few seconds, once)."""
    built = []
    for name, register in PATTERN_PASS_ORDER:
        pattern_pass = private.PatternMatcherPass(pass_name=f"qinductor_x86: {name}")
        register(pattern_pass)
        built.append(pattern_pass)
    return tuple(built)


def is_quantized(graph: Graph) -> bool:
    """Whether ``graph`` holds anything this lowering handles: a quantize/dequantize, an
    int8 tensor cast to float (a weight-only quantized linear), an int8 matmul, or a weight
    kept in fp16."""
    return any(
        node.target in ops.Q_DQ
        or node.target is intmm.INT_MM
        or _int8_cast(node)
        or fp16.holds_fp16_weight(node)
        for node in graph.nodes
    )


def _int8_cast(node: Any) -> bool:
    source = node.args[0] if node.target is ops.CONVERT else None
    value = source.meta.get("val") if isinstance(source, torch.fx.Node) else None
    return isinstance(value, torch.Tensor) and value.dtype == torch.int8


def lower(graph: Graph, target: Int8Host) -> GraphRecord:
    """Rewrite ``graph`` in place; what was done, and what stays in float."""
    if not torch.backends.mkldnn.is_available():  # type: ignore[no-untyped-call]
        return GraphRecord(left_in_float=everything_in_float(graph, NO_ONEDNN))
    if not private.inductor_freezing_active():
        return GraphRecord(left_in_float=everything_in_float(graph, FREEZING_OFF))
    gm = graph.owning_module
    assert isinstance(gm, torch.fx.GraphModule)
    private.normalize_like_freezing(gm, joint_patterns=True)  # (a new gm.graph)
    graph = gm.graph
    context = CompileContext(
        gm, target, private.frozen_constants(gm), others_follow=private.other_x86_copies_in_freezing()
    )
    # eager work on the frozen weights (saturation analysis, prepacking) uses real tensors;
    # new nodes get their fake values from the compile's fake mode (CompileContext.call)
    with lowering(context), private.real_tensors():
        signed.to_unsigned(context)
        promotion.promote(context)
        for pattern_pass in pattern_passes():
            pattern_pass.apply(graph)
        # (what the patterns left in float: a linear's codes are its kernel's output now)
        int8_matmuls = activation_matmul.lower(context)
        floatweights.fold(context)  # what no family lowered: no other pass may take it
    graph.eliminate_dead_code()
    private.restore_views(gm)
    graph.lint()
    kernels = int8_matmuls + sum(
        n.target in INT8_KERNELS or n.target is ops.WEIGHT_ONLY for n in graph.nodes
    )
    return GraphRecord(context.lowered, left_in_float(graph, context.declined), kernels)
