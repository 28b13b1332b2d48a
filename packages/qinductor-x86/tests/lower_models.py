"""Quantize held-out models, compile them (``freezing=True``) and measure, in the
interpreter of a lowering mode (``probe_modes.py``), because which x86 int8 passes exist is
process-wide and permanent:

* :func:`ours` (mode ``standalone``): torch 2.13's copy switched off before the first
  compile, torchao's never imported; each model quantized by our x86 quantizer and,
  separately, by the XNNPACK quantizer (signed int8 activations), lowered by this
  package's lowering alone;
* :func:`torchao` (mode ``reference``): torchao 0.18's flow as users run it: its x86
  quantizer module imported (which registers its passes, next to torch's default copy),
  its quantizer, no lowering of ours. torchao quantizes the reused-ReLU ResNet's
  one-ReLU-per-site twin, since it raises on the model itself.

For each: the oneDNN int8 kernels in the generated code, the compiled output against the
eager converted one, and SQNR of both against the float model; for ours also what the
lowering reported and the counters it bumped.
"""

from __future__ import annotations

import functools
from typing import Any

import lowering_zoo as zoo
import parity_models as pm

import qcore

#: model -> the model torchao quantizes in its place (itself, or its twin)
#: (the Inception-style net's cat and pools: the counter zoo's cat, max-pool and
#: pool/cat graphs, and the ShuffleNetV2 of test_architecture_accuracy.py, on both routes)
MODELS = {
    "resnet_reused": "resnet",
    "mobilenet": "mobilenet",
    "transformer": "transformer",
    "mlp": "mlp",
}
#: the models also quantized by the XNNPACK quantizer (signed int8 activations): a conv
#: net and the MLP (test_lowering_modes.py counts its linears); the signed rewrite's
#: attention, encoder-layer, pool and cat cases are test_lowering_signed.py's
XNNPACK_MODELS = ("resnet_reused", "mlp")


def measure(name: str, quantizer: Any, lowered: bool = False) -> dict[str, Any]:
    measured, result = zoo.measure_held_out(name, quantizer, lowered=lowered)
    if lowered:
        measured["reported_kernels"] = result.report.int8_kernels
        measured["doubled"] = result.count("reduction doubled")
        measured["lowered"] = dict(result.report.lowered)
        measured["counters"] = {k: v for k, v in result.counters.items() if k.endswith("_count")}
    return measured


def ours() -> dict[str, Any]:
    """Mode ``standalone``."""
    measured: dict[str, Any] = {
        name: {"x86": measure(name, qcore.get_quantizer("x86"), lowered=True)} for name in MODELS
    }
    for name in XNNPACK_MODELS:
        quantizer = qcore.get_quantizer("xnnpack", is_per_channel=True)
        measured[name]["xnnpack"] = measure(name, quantizer, lowered=True)
    return measured


@functools.cache
def torchao_static(twin: str) -> dict[str, Any]:
    """Model ``twin`` quantized by torchao 0.18's quantizer as users import it (default
    static config), compiled by the passes this process registered (no lowering of ours)
    and measured, with its qconv and qlinear kernel calls counted. Once per interpreter:
    where modes ``reference`` and ``builtins`` share one (torchao's passes alone, torch 2.14
    on), test_lowering_models.py and test_builtin_lowering.py read the same compile."""
    import torchao_reference

    module = torchao_reference.load_with_side_effects()  # (imported by the mode's set-up)
    measured, result = zoo.measure_held_out(twin, pm.quantizer_for(module, "static"), lowered=False)
    measured["qconv"] = sum(k.startswith("qconv") for k in result.kernels)
    measured["qlinear"] = sum(k.startswith("qlinear") for k in result.kernels)
    return measured


def torchao() -> dict[str, Any]:
    """Mode ``reference``."""
    return {name: torchao_static(twin) for name, twin in MODELS.items()}
