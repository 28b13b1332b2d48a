"""Quantize a few models, lower them with upstream's x86 Inductor passes (torch 2.13's
built-in copy; torchao 0.18's on the releases that dropped torch's)
(``freezing=True``, ``torch.compile``) and measure the result. Run for
``test_builtin_lowering.py`` in the interpreter of mode ``builtins`` (``probe_modes.py``),
before anything there installs a lowering of ours: no other pass (torchao's,
qinductor-x86's) may be registered, so the lowering is torch's own.

For each model: our quantizer built for a VNNI target and for this host's target, and
torchao 0.18's quantizer (loaded without its pass registration where torch carries its own
copy; as users import it where torchao's passes are upstream's) on the model or, when
torchao cannot quantize it, on its one-module-per-call-site twin. For each: the oneDNN
int8 kernels the generated code calls, the compiled output against the eager converted
one, and SQNR against the float model.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

import lower_models
import lowering_zoo as zoo
import torchao_reference
from torch._inductor import config as inductor_config

import qcore
from qinductor_x86 import lowering as x86_lowering
from qinductor_x86.quantizer import x86_inductor_quantizer as ours

#: model -> the model torchao quantizes in its place (itself, or its twin)
MODELS = {"resnet_reused": "resnet", "mobilenet": "mobilenet", "mlp": "mlp"}
VNNI = "avx512_vnni"


def quantized(
    module: Any, name: str, target: AbstractContextManager[Any], **options: Any
) -> zoo.HeldOut:
    with target:
        quantizer = module.X86InductorQuantizer().set_global(
            module.get_default_x86_inductor_quantization_config(**options)
        )
        return zoo.quantize_held_out(name, quantizer)


def measure(quantized: zoo.HeldOut) -> dict[str, Any]:
    measured, result = zoo.measure(quantized, lowered=False)
    measured["qconv"] = sum(k.startswith("qconv") for k in result.kernels)
    measured["qlinear"] = sum(k.startswith("qlinear") for k in result.kernels)
    return measured


def measure_all() -> dict[str, Any]:
    """Every model (mode ``builtins``: upstream's copy of the passes the only one registered,
    torch's own on 2.13, torchao 0.18's from 2.14 on).

    On a target that does not saturate, ``weight_rule`` changes nothing, so the model
    quantized for this host is the one quantized for a VNNI target: when the two converted
    models are the same (``lowering_zoo.same_converted_model``), the second is not compiled
    again (torch's passes do not read the int8 target; one thread is deterministic)."""
    # upstream's copy alone: torchao's registers a pre-grad pass of its own (from torch 2.14)
    assert x86_lowering.torch_carries_x86_passes() == (inductor_config.pre_grad_custom_pass is None)
    assert not x86_lowering.make_lowering().installed
    ref = torchao_reference.load()
    results: dict[str, Any] = {}
    for name, twin in MODELS.items():
        for_vnni = quantized(ours, name, qcore.host.targeting(VNNI))
        # for torch's passes, which saturate where this package's lowering is exact
        for_host = quantized(ours, name, nullcontext(), weight_rule="never_overflow")
        vnni = measure(for_vnni)
        same = zoo.same_converted_model(for_vnni.converted, for_host.converted)
        results[name] = {
            "ours_vnni": vnni,
            "ours_host": {**vnni, "compiled_once": True} if same else measure(for_host),
            "torchao": measure(quantized(ref, twin, nullcontext()))
            if x86_lowering.torch_carries_x86_passes()
            # torchao's passes, imported as users import them: the compile of mode
            # ``reference`` where the two share an interpreter (the same quantizer, config
            # and passes)
            else lower_models.torchao_static(twin),
        }
    return results
