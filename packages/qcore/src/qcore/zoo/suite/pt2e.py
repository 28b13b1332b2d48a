"""Comparing a PT2E quantizer with a reference quantizer, annotation by annotation.

A quantizer that re-implements another one (this project's XNNPACK and x86 quantizers
re-implement ExecuTorch's and torchao's) is checked against it in two ways, and a
plugin's tests can do the same:

* the annotations both write on the same model, as plain data (:func:`annotations_of`): one
  entry per annotated node, specs as one line of text each, so that two results compare
  with ``==``, print readably (:func:`differences`) and can be checked in as a JSON table
  generated once from the reference (so the comparison needs no reference installed);
* the converted models' outputs on a held-out batch (:func:`quantized_outputs`), which
  must be bit-identical when the annotations are.

Annotations are taken either straight from ``annotate`` (:func:`annotate`) or as
``prepare_pt2e`` / ``prepare_qat_pt2e`` call it (:func:`recorded_annotations`), so both
quantizers see exactly the graph users give them (batch norm folded for PTQ, kept for QAT).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor, nn
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e import move_exported_model_to_eval
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e, prepare_qat_pt2e
from torchao.quantization.pt2e.quantizer import Quantizer, SharedQuantizationSpec

from qcore._torch_private import Q_ANNOTATION_KEY, annotation_is_claimed

__all__ = [
    "Flags",
    "InputsBySeed",
    "Recording",
    "Zoo",
    "annotate",
    "annotations_of",
    "differences",
    "exported",
    "prepare",
    "quantized_outputs",
    "quantizing",
    "recorded_annotations",
    "seeded_inputs",
    "spec_text",
]

#: Extra marks an annotation may carry (a quantizer's own annotation subclass): name ->
#: whether the annotation has it. A mark that holds adds ``name: True`` to the entry.
Flags = Mapping[str, Callable[[Any], bool]]
#: Example inputs by seed: seed 0 is the example for export, the others calibrate.
InputsBySeed = Callable[[int], tuple[Tensor, ...]]
#: A parity zoo: model name -> (model factory, its inputs by seed).
Zoo = dict[str, tuple[Callable[[], nn.Module], InputsBySeed]]


def seeded_inputs(*shape: int) -> InputsBySeed:
    """One standard-normal tensor of ``shape`` per seed, the same in every process."""
    return lambda seed: (torch.randn(*shape, generator=torch.Generator().manual_seed(seed)),)


def spec_text(spec: Any) -> str | None:
    """One line per spec: ``int8[-128,127] per_tensor_affine axis=None static
    HistogramObserver(eps=0.000244)``, or ``shared(a->b)`` for a shared spec."""
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


def annotations_of(gm: GraphModule, flags: Flags | None = None) -> dict[str, Any]:
    """Node name -> its annotation as plain data: whether it is claimed (``annotated``),
    input specs by input name (``inputs``), the output spec (``output``), and each of
    ``flags`` that holds."""
    result: dict[str, Any] = {}
    for node in gm.graph.nodes:
        ann = node.meta.get(Q_ANNOTATION_KEY)
        if ann is None:
            continue
        entry: dict[str, Any] = {"annotated": annotation_is_claimed(ann)}
        if ann.input_qspec_map:
            entry["inputs"] = {
                n.name: spec_text(q) for n, q in ann.input_qspec_map.items() if isinstance(n, Node)
            }
        if ann.output_qspec is not None:
            entry["output"] = spec_text(ann.output_qspec)
        entry.update({name: True for name, holds in (flags or {}).items() if holds(ann)})
        result[node.name] = entry
    return result


def quantizing(annotated: Mapping[str, Any]) -> dict[str, Any]:
    """The entries that quantize something (specs or a flag), without the claimed but
    empty ones."""
    return {n: a for n, a in annotated.items() if set(a) - {"annotated"}}


def differences(
    expected: Mapping[str, Any],
    actual: Mapping[str, Any],
    *,
    names: tuple[str, str] = ("reference", "ours"),
) -> dict[str, dict[str, Any]]:
    """Node -> both entries, for every node whose entries differ (empty when equal)."""
    return {
        node: {names[0]: expected.get(node), names[1]: actual.get(node)}
        for node in sorted(set(expected) | set(actual))
        if expected.get(node) != actual.get(node)
    }


def exported(model: nn.Module, example: tuple[Tensor, ...]) -> GraphModule:
    """``torch.export.export(model, example).module()``, as users hand it to a quantizer."""
    gm = torch.export.export(model, example).module()
    assert isinstance(gm, GraphModule)
    return gm


def annotate(quantizer: Any, gm: GraphModule, flags: Flags | None = None) -> dict[str, Any]:
    """``transform_for_annotation`` and ``annotate`` on ``gm``, outside ``prepare_pt2e``."""
    gm = quantizer.transform_for_annotation(gm)
    quantizer.annotate(gm)
    return annotations_of(gm, flags)


class Recording(Quantizer):  # type: ignore[misc]
    """A quantizer that delegates to ``inner`` and records, in ``seen``, the annotations
    ``annotate`` wrote, as ``prepare_pt2e`` / ``prepare_qat_pt2e`` call it."""

    def __init__(self, inner: Any, flags: Flags | None = None) -> None:
        super().__init__()
        self.inner = inner
        self.flags = flags
        self.seen: dict[str, Any] | None = None

    def transform_for_annotation(self, model: GraphModule) -> GraphModule:
        return self.inner.transform_for_annotation(model)  # type: ignore[no-any-return]

    def annotate(self, model: GraphModule) -> GraphModule:
        self.inner.annotate(model)
        self.seen = annotations_of(model, self.flags)
        return model

    def validate(self, model: GraphModule) -> None:
        self.inner.validate(model)

    def prepare_obs_or_fq_callback(
        self, model: GraphModule, edge_or_node_to_obs_or_fq: Any
    ) -> None:
        self.inner.prepare_obs_or_fq_callback(model, edge_or_node_to_obs_or_fq)


def prepare(
    quantizer: Any, model: nn.Module, example: tuple[Tensor, ...], qat: bool = False
) -> GraphModule:
    """Export ``model`` and run ``prepare_pt2e`` (``prepare_qat_pt2e`` for QAT) on it."""
    prepared: GraphModule = (prepare_qat_pt2e if qat else prepare_pt2e)(
        exported(model, example), quantizer
    )
    return prepared


def recorded_annotations(
    quantizer: Any,
    model: nn.Module,
    example: tuple[Tensor, ...],
    *,
    qat: bool = False,
    flags: Flags | None = None,
) -> dict[str, Any]:
    """The annotations ``quantizer`` writes on ``model`` inside ``prepare_pt2e`` (or
    ``prepare_qat_pt2e``)."""
    recording = Recording(quantizer, flags)
    prepare(recording, model, example, qat)
    assert recording.seen is not None, "prepare never called annotate"
    return recording.seen


def quantized_outputs(
    quantizer: Any,
    model: nn.Module,
    inputs: InputsBySeed,
    *,
    qat: bool = False,
    calibration: int = 4,
    held_out: int = 100,
) -> tuple[Tensor, Tensor]:
    """(quantized output, float output) on the held-out batch ``inputs(held_out)``, after
    prepare and calibration on ``inputs(1)`` .. ``inputs(calibration)`` (for QAT: that
    many training-mode passes, then the model moved to eval) and ``convert_pt2e``."""
    reference = copy.deepcopy(model)
    prepared = prepare(quantizer, model, inputs(0), qat)
    with torch.no_grad():
        for seed in range(1, calibration + 1):
            prepared(*inputs(seed))
    if qat:
        move_exported_model_to_eval(prepared)
    converted = convert_pt2e(prepared)
    batch = inputs(held_out)
    with torch.no_grad():
        return converted(*batch), reference.eval()(*batch)
