"""Comparing a backend's derived PT2E flow with its FX flow, model by model.

Both flows are run on the same float model and calibration batches: FX with
``qcore.fx.prepare`` / ``qcore.fx.convert`` (and, for the op comparison, torch's
reference representation of the same prepared model), PT2E with ``torch.export``,
``prepare_pt2e`` on ``qcore.get_quantizer(backend)``, ``convert_pt2e``. What each flow decided to
quantize is read before conversion, call by call (a module, function or method call, as
FX sees them): FX's from the dtypes ``prepare_fx`` recorded for each node
(``target_dtype_info``), the derived flow's from the annotations on the calls of the
exported graph (:func:`decided_kinds`), counted by kind (``conv2d``, ``add``, ``relu``,
...), a fused FX module counting as the ops it fuses. :func:`quantized_kinds` reads a
converted graph instead (an op that reads a dequantized value or feeds a quantize).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule, Node

import qcore
import qcore.fx
from qcore._torch_private import Q_ANNOTATION_KEY
from qcore.int8.engine import quantized_engine
from qcore.metrics import sqnr
from qcore.zoo.models import ModelCase

__all__ = [
    "FlowResult",
    "derived_decided_kinds",
    "fx_decided_kinds",
    "quantized_kinds",
    "run_derived",
    "run_fx",
]

#: aten / torch function names to the kind both flows are compared by.
_ALIASES = {
    "relu_": "relu", "add_": "add", "iadd": "add", "mul_": "mul", "imul": "mul",
    "hardtanh_": "hardtanh", "relu6": "hardtanh", "batchnorm2d": "batchnorm2d",
    "conv2d_relu": "conv2d", "linear_relu": "linear", "concat": "cat", "concatenate": "cat",
    "leakyrelu": "leaky_relu", "floor_divide": "floordiv", "sub_": "sub", "isub": "sub",
    "div_": "div", "truediv": "div", "batch_norm": "batchnorm", "layernorm": "layer_norm", "adaptiveavgpool2d":
    "adaptive_avg_pool2d", "maxpool2d": "max_pool2d", "constantpad2d": "pad",
    "convtranspose2d": "conv_transpose2d", "convtranspose1d": "conv_transpose1d",
    "convtranspose3d": "conv_transpose3d", "flatten": "flatten", "avgpool2d": "avg_pool2d",
    # indexing: FX records it as getitem, which multi-output ops use as bookkeeping too
    "select": "getitem", "slice": "getitem",
}  # fmt: skip
_QUANTIZE = ("quantize_per_tensor", "quantize_per_channel")


@dataclass
class FlowResult:
    converted: GraphModule
    output: torch.Tensor
    sqnr: float
    kinds: Counter[str]


def _kind(name: str) -> str:
    name = name.lower().split(".")[-1]
    return _ALIASES.get(name, name)


def _is_dequantized(value: Any) -> bool:
    if not isinstance(value, Node):
        return False
    return value.target == "dequantize" or "dequantize_per" in str(value.target)


def _feeds_quantize(node: Node) -> bool:
    return any(
        u.target in (torch.quantize_per_tensor, torch.quantize_per_channel)
        or any(q in str(u.target) for q in _QUANTIZE)
        for u in node.users
    )


def _fx_kinds(node: Node, modules: dict[str, nn.Module]) -> list[str]:
    if node.op == "call_module":
        module = modules[str(node.target)]
        parts = list(module.children()) if isinstance(module, nn.Sequential) else [module]
        kinds = [_kind(type(p).__name__) for p in parts]
        if "Add" in type(module).__name__:  # ConvAdd2d / ConvAddReLU2d keep add as a function
            kinds.insert(1, "add")
        return kinds
    if node.op in ("call_function", "call_method"):
        return [_kind(str(getattr(node.target, "__name__", node.target)))]
    return []


def quantized_kinds(gm: GraphModule) -> Counter[str]:
    """Ops (by kind) of a converted FX reference or PT2E graph that read a dequantized
    value or feed a quantize op: the ops the flow runs in int8."""
    modules = dict(gm.named_modules())
    counts: Counter[str] = Counter()
    # ops on parameters alone are constants: convert_pt2e folds them, FX keeps them
    live = {n for n in gm.graph.nodes if n.op == "placeholder"}
    for node in gm.graph.nodes:
        shape = node.target in (getattr, "size") or "sym_size" in str(node.target)
        if not shape and any(a in live for a in node.all_input_nodes):
            live.add(node)
        if node.op not in ("call_function", "call_method", "call_module") or node not in live:
            continue
        if _is_dequantized(node) or any(q in str(node.target) for q in _QUANTIZE):
            continue
        if str(node.target) in ("dequantize", "to", "size", "contiguous"):
            continue
        if not (any(_is_dequantized(a) for a in node.all_input_nodes) or _feeds_quantize(node)):
            continue
        if node.op == "call_function" and hasattr(node.target, "_schema"):
            counts[_kind(str(node.target).split(".")[-2])] += 1
        else:
            counts.update(_fx_kinds(node, modules))
    for bookkeeping in ("getitem", "getattr"):
        counts.pop(bookkeeping, None)
    return counts


_QUANTIZED_DTYPES = (torch.quint8, torch.qint8, torch.uint8, torch.int8, torch.qint32)


def _name_kind(name: str) -> str:
    name = name.rsplit(".", 1)[-1].strip("_").lower()
    return _ALIASES.get(name, name)


def fx_decided_kinds(prepared: GraphModule) -> Counter[str]:
    """Calls of an FX-prepared model ``prepare_fx`` runs quantized: their input
    activation's recorded target dtype is a quantized one."""
    modules = dict(prepared.named_modules())
    counts: Counter[str] = Counter()
    for node in prepared.graph.nodes:
        info = node.meta.get("target_dtype_info") or {}
        ctr = info.get("input_act_obs_or_fq_ctr")
        if node.op not in ("call_function", "call_method", "call_module") or ctr is None:
            continue
        if getattr(ctr(), "dtype", None) not in _QUANTIZED_DTYPES:
            continue
        if node.op == "call_module":
            counts.update(_name_kind(k) for k in _fx_kinds(node, modules))
        else:
            counts[_name_kind(str(getattr(node.target, "__name__", node.target)))] += 1
    for bookkeeping in ("getitem", "getattr", "size"):
        counts.pop(bookkeeping, None)
    return counts


def derived_decided_kinds(annotated: GraphModule) -> Counter[str]:
    """Calls of an exported graph a PT2E quantizer annotated (some node of the call has an
    input or output spec), by the kind FX would see them as."""

    from qcore.pt2e.derived.sources import calls

    counts: Counter[str] = Counter()
    for call in calls(annotated):
        anns = [n.meta.get(Q_ANNOTATION_KEY) for n in call.nodes]
        if any(a is not None and (a.input_qspec_map or a.output_qspec) for a in anns):
            signature = call.signature.removeprefix("module:")
            counts[_name_kind(signature)] += 1
    for bookkeeping in ("getitem", "getattr", "size"):
        counts.pop(bookkeeping, None)
    return counts


def _outputs(model: nn.Module, batches: list[tuple[Any, ...]]) -> torch.Tensor:
    """The model's (first) output on every batch, flattened into one tensor: an SQNR over
    all of them is not decided by the few codes one small batch rounds the other way
    (one ULP in a float conv, on another CPU, is enough for that)."""
    outs = []
    with torch.no_grad():
        for inputs in batches:
            out = model(*inputs)
            outs.append((out[0] if isinstance(out, tuple) else out).flatten())
    return torch.cat(outs)


def run_fx(model_case: ModelCase, backend: str) -> FlowResult:
    """``qcore.fx`` on ``model_case``: SQNR of the converted model, and the quantized op
    kinds of torch's reference representation of the same calibrated model."""
    model = model_case.model()
    batches = model_case.calibration_batches()
    prepared = qcore.fx.prepare(model, backend, batches[0])
    with torch.no_grad():
        for batch in batches:
            prepared(*batch)
    decided = fx_decided_kinds(prepared)
    with quantized_engine("onednn"):
        converted = qcore.fx.convert(prepared)
        out = _outputs(converted, batches)
    expected = _outputs(model, batches)
    return FlowResult(converted, out, sqnr(expected, out), decided)


def run_derived(model_case: ModelCase, backend: str, **options: Any) -> FlowResult:
    """The derived PT2E flow on ``model_case``: export, prepare, calibrate, convert."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    model = model_case.model()
    batches = model_case.calibration_batches()
    exported = torch.export.export(model, batches[0]).module()
    quantizer = qcore.get_quantizer(backend, model=model, **options)
    prepared = prepare_pt2e(exported, quantizer)
    decided = derived_decided_kinds(prepared)
    with torch.no_grad():
        for batch in batches:
            prepared(*batch)
    converted = convert_pt2e(prepared)
    out = _outputs(converted, batches)
    expected = _outputs(model, batches)
    return FlowResult(converted, out, sqnr(expected, out), decided)
