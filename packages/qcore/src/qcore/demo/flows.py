"""The demo's flows, discovered from the plugin registry: whatever is installed runs.

* every backend plugin: FX graph mode through ``qcore.fx`` (native kernels, or the
  reference representation for backends that declare it);
* every quantizer plugin: PT2E (``torch.export``, ``prepare_pt2e``, ``convert_pt2e``);
  when a lowering of the same name is installed, the converted model is compiled with
  ``torch.compile`` (freezing on) inside that lowering, and the compiled model is measured.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

import qcore
import qcore.fx
from qcore._torch_private import inductor_freezing
from qcore.demo.progress import progress
from qcore.int8.engine import quantized_engine
from qcore.plugins.api import backend_quantized_engine
from qcore.plugins.extras import require_pt2e

__all__ = ["Flow", "Quantized", "compile_frozen", "discover_flows"]


@dataclass
class Quantized:
    """A quantized model ready to run, and what the flow did to it."""

    model: Callable[[Tensor], Tensor]
    lowered: str
    left_in_float: str
    note: str = ""


@dataclass(frozen=True)
class Flow:
    """One row of the demo: how to quantize a float model with one plugin."""

    label: str
    plugin: str
    distribution: str
    #: ``quantize(model, calibration_batches, compile)``; ``compile=False`` skips the
    #: lowering (the per-layer chart measures the eager converted model)
    quantize: Callable[[nn.Module, list[Tensor], bool], Quantized]
    compiles: bool = False


def _calibrate(model: Callable[[Tensor], Any], batches: list[Tensor]) -> None:
    with torch.no_grad():
        for batch in progress(batches, desc="calibrating", unit="batch"):
            model(batch)


# FX ----------------------------------------------------------------------------------


_COMPUTE = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear)


def _fx_counts(converted: torch.fx.GraphModule) -> tuple[str, str]:
    """What an FX convert produced: host int8 ops, or int8 weights of the reference
    representation (run by the backend's own runtime); and compute left in float."""
    modules = dict(converted.named_modules())
    kernels, reference, floating = 0, 0, []
    for node in converted.graph.nodes:
        if node.op == "call_module":
            kind = type(modules[str(node.target)]).__module__
            if kind.startswith("torch.ao.nn.quantized.reference"):
                reference += 1
            elif kind.startswith("torch.ao.nn"):
                kernels += 1
            elif isinstance(modules[str(node.target)], _COMPUTE):
                floating.append(str(node.target))
        elif node.op == "call_function":
            target = str(node.target)
            kernels += "quantized." in target
            reference += "quantize_per_channel" in target
    lowered = f"{kernels} int8 ops" if kernels else f"{reference} int8 layers (reference)"
    return lowered, _float_summary(floating)


def _float_summary(names: list[str]) -> str:
    if not names:
        return "none"
    shown = ", ".join(names[:3])
    return f"{len(names)}: {shown}" + (", ..." if len(names) > 3 else "")


def _fx_flow(backend: str) -> Callable[[nn.Module, list[Tensor], bool], Quantized]:
    def run(model: nn.Module, batches: list[Tensor], compile: bool) -> Quantized:
        del compile  # FX flows run the converted model as it is
        engine = backend_quantized_engine(backend)
        with quantized_engine(engine) if engine else contextlib.nullcontext():
            prepared = qcore.fx.prepare(model, backend, batches[0])
            _calibrate(prepared, batches)
            converted = qcore.fx.convert(prepared)
        lowered, left = _fx_counts(converted)
        ranges = qcore.fx.weight_ranges(converted)
        narrowed = sum(1 for c in ranges.values() if c.narrowed)
        note = f"{narrowed} layer(s) with narrowed weight ranges" if narrowed else ""
        return Quantized(converted, lowered, left, note)

    return run


# PT2E --------------------------------------------------------------------------------


def _pt2e_flow(
    name: str, lowering: str | None
) -> Callable[[nn.Module, list[Tensor], bool], Quantized]:
    def run(model: nn.Module, batches: list[Tensor], compile: bool) -> Quantized:
        # without torchao the flow is skipped, naming the extra (a PluginError, see run_demo)
        require_pt2e(f"qcore demo's PT2E {name} flow")
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

        quantizer = qcore.get_quantizer(name)
        exported = _export(model, batches[0])
        # annotated on a copy (exporting again would cost as much as the first export)
        not_quantized = qcore.explain_not_quantized(exported, quantizer)
        prepared = prepare_pt2e(exported, quantizer)
        _calibrate(prepared, batches)
        converted = convert_pt2e(prepared)
        left = _float_summary([f.node for f in not_quantized])
        weights = sum("dequantize_per_channel" in str(n.target) for n in converted.graph.nodes)
        if lowering is None or not compile:
            return Quantized(converted, f"{weights} int8 layers (reference)", left)
        return _compiled(converted, lowering, batches[0], left)

    return run


def compile_frozen(model: Callable[[Tensor], Tensor], example: Tensor) -> Callable[[Tensor], Tensor]:
    """``torch.compile`` with freezing (constant weights, as the int8 lowerings need),
    compiled now on ``example`` so that later calls only run."""
    with inductor_freezing():
        compiled: Callable[[Tensor], Tensor] = torch.compile(model)
        with torch.no_grad():
            compiled(example)
    return compiled


def _export(model: nn.Module, example: Tensor) -> torch.fx.GraphModule:
    """The PT2E graph, with a dynamic batch size (calibrate and evaluate differ)."""
    batch = torch.export.Dim("batch")
    exported: torch.fx.GraphModule = torch.export.export(
        model, (example,), dynamic_shapes=({0: batch},)
    ).module()
    return exported


def _compiled(
    converted: torch.fx.GraphModule, lowering: str, example: Tensor, left: str
) -> Quantized:
    with qcore.get_lowering(lowering) as installed:
        compiled = compile_frozen(converted, example)
        report = installed.report()
    kernels = getattr(report, "int8_kernels", None)
    lowered = f"{kernels} int8 kernels" if kernels is not None else str(report).splitlines()[0]
    in_float = getattr(report, "left_in_float", None)
    if in_float is not None and left == "none" and in_float:
        left = f"{len(in_float)} q/dq"
    return Quantized(compiled, lowered, left, note=f"compiled with the {lowering} lowering")


# discovery ---------------------------------------------------------------------------


def discover_flows() -> list[Flow]:
    """A flow per available backend and quantizer plugin, first-party or not."""
    plugins = [p for p in qcore.list_plugins() if p.status == "available"]
    lowerings = {p.name for p in plugins if p.kind == "lowering"}
    flows: list[Flow] = []
    for p in plugins:
        if p.kind == "backend":
            flows.append(Flow(f"FX {p.name}", p.name, p.distribution, _fx_flow(p.name)))
        elif p.kind == "quantizer":
            lowering = p.name if p.name in lowerings else None
            label = f"PT2E {p.name}" + (" + Inductor" if lowering else "")
            flows.append(
                Flow(label, p.name, p.distribution, _pt2e_flow(p.name, lowering), bool(lowering))
            )
    return flows
