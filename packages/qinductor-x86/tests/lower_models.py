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

    python lower_models.py MODE OUT.json
"""

from __future__ import annotations

import json
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import lowering_zoo as zoo
import parity_models as pm
import torch

import qcore
from qcore.metrics import sqnr

#: model -> the model torchao quantizes in its place (itself, or its twin)
MODELS = {
    "resnet_reused": "resnet",
    "mobilenet": "mobilenet",
    "inception": "inception",
    "transformer": "transformer",
    "mlp": "mlp",
}


def measure(name: str, quantizer: Any, lowering: Any = None) -> dict[str, Any]:
    converted, model, held_out = pm.convert(quantizer, name)
    with torch.no_grad():
        eager, reference = converted(*held_out), model(*held_out)
    with zoo.fresh_compile(), lowering if lowering is not None else nullcontext():
        compiled, code = zoo.compile_and_run(converted, held_out)
    kernels = zoo.int8_kernel_calls(code)
    result = {
        "kernels": len(kernels),
        "rel_l2_compiled_vs_eager": zoo.relative_l2(eager, compiled),
        "sqnr_eager": sqnr(reference, eager),
        "sqnr_compiled": sqnr(reference, compiled),
    }
    if lowering is not None:
        report = lowering.report()
        result["reported_kernels"] = report.int8_kernels
        result["doubled"] = sum(n for k, n in report.lowered.items() if "reduction doubled" in k)
    return result


def ours() -> dict[str, Any]:
    from qinductor_x86 import lowering as x86_lowering

    x86_lowering.switch_off_torch_builtins()
    lowering = qcore.get_lowering("x86")
    results: dict[str, Any] = {}
    for name in MODELS:
        results[name] = {
            "x86": measure(name, qcore.get_quantizer("x86"), lowering),
            "xnnpack": measure(name, qcore.get_quantizer("xnnpack", is_per_channel=True), lowering),
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
    mode, out = sys.argv[1], Path(sys.argv[2])
    host = qcore.host.target()
    results = ours() if mode == "ours" else torchao()
    results["_host"] = {"isa": host.isa, "saturates_u8s8": host.saturates_u8s8}
    out.write_text(json.dumps(results, indent=1))
