"""The x86 annotation record: torchao's annotation plus "this node ends a quantized
pattern", which decides whether the int8 data-movement ops after it stay int8."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch.fx import Node
from torchao.quantization.pt2e.quantizer import QuantizationAnnotation

from qcore.pt2e.annotation.claims import is_annotated, mark_annotated
from qinductor_x86._torch_private import Q_ANNOTATION_KEY


@dataclass
class X86Annotation(QuantizationAnnotation):  # type: ignore[misc]  # torchao is untyped
    """``quantized_output``: the node is the last node of a pattern that runs in int8
    (a quantized conv / linear with its post-ops, a quantized pool or cat), so its
    result is int8 in the lowered model."""

    quantized_output: bool = False


def annotate_node(
    node: Node,
    inputs: dict[Node, Any] | None = None,
    output: Any = None,
    *,
    quantized_output: bool = False,
) -> None:
    """Replace ``node``'s annotation and claim it, so no later pattern takes the node."""
    node.meta[Q_ANNOTATION_KEY] = X86Annotation(
        input_qspec_map=inputs or {}, output_qspec=output, quantized_output=quantized_output
    )
    mark_annotated([node])


def ends_quantized_pattern(node: Node) -> bool:
    """Claimed, and the last node of a pattern that runs in int8."""
    ann = node.meta.get(Q_ANNOTATION_KEY)
    return is_annotated([node]) and bool(getattr(ann, "quantized_output", False))
