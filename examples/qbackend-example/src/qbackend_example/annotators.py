"""The SiLU annotator this distribution adds to the XNNPACK quantizer.

Written only against public APIs: torchao's qspec helpers and qcore's annotation helpers.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e.quantizer import (
    QuantizationConfig,
    get_input_act_qspec,
    get_output_act_qspec,
)

from qcore.pt2e.annotation.claims import is_annotated, is_op, passes, set_annotation
from qcore.pt2e.annotation.registry import Annotator

SILU = frozenset({torch.ops.aten.silu.default, torch.ops.aten.silu_.default})


def annotate_silu(
    gm: GraphModule, config: QuantizationConfig | None, filter_fn: Callable[[Node], bool] | None
) -> list[list[Node]]:
    """SiLU with observed input and output, run by the chip's lookup-table kernel."""
    partitions = []
    for node in gm.graph.nodes:
        if not is_op(node, SILU) or is_annotated([node]) or not passes(filter_fn, [node]):
            continue
        act = node.args[0]
        if not isinstance(act, Node):
            continue
        set_annotation(node, {act: get_input_act_qspec(config)}, get_output_act_qspec(config))
        partitions.append([node])
    return partitions


def annotator_list() -> list[Annotator]:
    return [Annotator("silu", annotate_silu, ops=SILU, description="silu (LUT kernel)")]
