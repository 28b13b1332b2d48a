"""PT2E annotations as plain text, to compare a quantizer with the upstream one it mirrors.

``annotation_texts(annotated_graph)`` turns every node's quantization annotation into data
(which input gets which spec, the output's spec, whether the node ends an int8 pattern),
with each spec written out field by field (dtype and range, scheme, axis, static or
dynamic, observer and its arguments, or ``shared(a->b)``). Two quantizers agree on a graph
exactly when their texts are equal, and ``differences`` says where they do not; the text is
also what a table of upstream's expected annotations, stored as JSON, holds.
"""

from __future__ import annotations

from typing import Any

from torch.fx import GraphModule, Node
from torchao.quantization.pt2e.quantizer import SharedQuantizationSpec
from torchao.quantization.pt2e.quantizer.quantizer import Q_ANNOTATION_KEY

__all__ = ["annotation_texts", "differences", "spec_text"]


def spec_text(spec: Any) -> str | None:
    """``uint8[0,255] per_tensor_affine axis=None static HistogramObserver(eps=...)`` or
    ``shared(a->b)``; None for no spec."""
    if spec is None:
        return None
    if isinstance(spec, SharedQuantizationSpec):
        edge = spec.edge_or_node
        return (
            f"shared({'->'.join(n.name for n in edge) if isinstance(edge, tuple) else edge.name})"
        )
    ctr = spec.observer_or_fake_quant_ctr
    partial = getattr(ctr, "p", None)
    ctr_name = getattr(getattr(partial, "func", ctr), "__name__", repr(ctr))
    args = ",".join(
        f"{k}={_arg_text(v)}" for k, v in sorted(getattr(partial, "keywords", {}).items())
    )
    kind = "dynamic" if spec.is_dynamic else "static"
    return (
        f"{str(spec.dtype).removeprefix('torch.')}[{spec.quant_min},{spec.quant_max}] "
        f"{str(spec.qscheme).removeprefix('torch.')} axis={spec.ch_axis} {kind} {ctr_name}({args})"
    )


def _arg_text(value: Any) -> str:
    """Observer arguments, including ``Observer.with_args(...)`` ones."""
    partial = getattr(value, "p", None)
    if partial is not None:
        inner = ",".join(f"{k}={v!r}" for k, v in sorted(partial.keywords.items()))
        return f"{partial.func.__name__}({inner})"
    return str(getattr(value, "__name__", repr(value)))


def _ends_int8_pattern(annotation: Any) -> bool:
    """torchao's x86 ``_is_output_of_quantized_pattern``, qinductor-x86's
    ``quantized_output``."""
    return bool(
        getattr(annotation, "_is_output_of_quantized_pattern", False)
        or getattr(annotation, "quantized_output", False)
    )


def annotation_texts(gm: GraphModule) -> dict[str, Any]:
    """Node name -> its annotation as plain data: whether it is claimed, input specs by
    input name, output spec, and whether it ends an int8 pattern."""
    result: dict[str, Any] = {}
    for node in gm.graph.nodes:
        ann = node.meta.get(Q_ANNOTATION_KEY)
        if ann is None:
            continue
        entry: dict[str, Any] = {"annotated": bool(ann._annotated)}
        if ann.input_qspec_map:
            entry["inputs"] = {
                n.name: spec_text(q) for n, q in ann.input_qspec_map.items() if isinstance(n, Node)
            }
        if ann.output_qspec is not None:
            entry["output"] = spec_text(ann.output_qspec)
        if _ends_int8_pattern(ann):
            entry["int8_out"] = True
        result[node.name] = entry
    return result


def differences(
    expected: dict[str, Any], ours: dict[str, Any], reference: str = "upstream"
) -> dict[str, dict[str, Any]]:
    """The nodes whose annotations differ, with both sides (``reference`` names the first)."""
    return {
        node: {reference: expected.get(node), "ours": ours.get(node)}
        for node in sorted(set(expected) | set(ours))
        if expected.get(node) != ours.get(node)
    }
