"""Quantize held-out models, compile them (``freezing=True``) and measure, in a process of
its own, because which x86 int8 passes exist is process-wide and permanent:

* ``ours``: torch 2.13's copy switched off before the first compile, torchao's never
  imported; each model quantized by our x86 quantizer and, separately, by the XNNPACK
  quantizer (signed int8 activations), lowered by this package's lowering alone;
* ``torchao``: torchao 0.18's flow as users run it: its x86 quantizer module imported
  (which registers its passes, next to torch's default copy), its quantizer, no lowering
  of ours. torchao quantizes the reused-ReLU ResNet's one-ReLU-per-site twin, since it
  raises on the model itself.

For each: the oneDNN int8 kernels in the generated code, the compiled output against the
eager converted one, and SQNR of both against the float model.

    python lower_models.py MODE
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import lowering_zoo as zoo
import parity_models as pm

import qcore
from qcore.testing.fresh import emit

#: model -> the model torchao quantizes in its place (itself, or its twin)
MODELS = {
    "resnet_reused": "resnet",
    "mobilenet": "mobilenet",
    "inception": "inception",
    "transformer": "transformer",
    "mlp": "mlp",
}


def measure(name: str, quantizer: Any, lowered: bool = False) -> dict[str, Any]:
    measured, result = zoo.measure_held_out(name, quantizer, lowered=lowered)
    if lowered:
        measured["reported_kernels"] = result.report.int8_kernels
        measured["doubled"] = result.count("reduction doubled")
    return measured


def ours() -> dict[str, Any]:
    from qinductor_x86 import lowering as x86_lowering

    x86_lowering.switch_off_torch_builtins()
    results: dict[str, Any] = {}
    for name in MODELS:
        results[name] = {
            "x86": measure(name, qcore.get_quantizer("x86"), lowered=True),
            "xnnpack": measure(
                name, qcore.get_quantizer("xnnpack", is_per_channel=True), lowered=True
            ),
        }
    results["_other_passes"] = x86_lowering.other_x86_passes()
    return results


def torchao() -> dict[str, Any]:
    import torchao_reference

    module = torchao_reference.load_with_side_effects()
    results: dict[str, Any] = {}
    for name, twin in MODELS.items():
        results[name] = measure(twin, pm.quantizer_for(module, "static"))
    return results


if __name__ == "__main__":
    host = qcore.host.target()
    results = ours() if sys.argv[1] == "ours" else torchao()
    results["_host"] = {"isa": host.isa, "saturates_u8s8": host.saturates_u8s8}
    emit(results)
