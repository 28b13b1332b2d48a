"""Quantize a few models, lower them with torch 2.13's built-in x86 Inductor passes
(``freezing=True``, ``torch.compile``) and measure the result. Run for
``test_builtin_lowering.py`` in the interpreter of mode ``builtins`` (``probe_modes.py``),
before anything there installs a lowering of ours: no other pass (torchao's,
qinductor-x86's) may be registered, so the lowering is torch's own.

For each model: our quantizer built for a VNNI target and for this host's target, and
torchao 0.18's quantizer (loaded without its pass registration) on the model or, when
torchao cannot quantize it, on its one-module-per-call-site twin. For each: the oneDNN
int8 kernels the generated code calls, the compiled output against the eager converted
one, and SQNR against the float model.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

import lowering_zoo as zoo
import torchao_reference
from torch._inductor import config as inductor_config

import qcore
from qinductor_x86 import quantizer as ours

#: model -> the model torchao quantizes in its place (itself, or its twin)
MODELS = {"resnet_reused": "resnet", "mobilenet": "mobilenet", "mlp": "mlp"}
VNNI = "avx512_vnni"


def lower(
    module: Any, name: str, target: AbstractContextManager[Any], **options: Any
) -> dict[str, Any]:
    with target:
        quantizer = module.X86InductorQuantizer().set_global(
            module.get_default_x86_inductor_quantization_config(**options)
        )
        measured, result = zoo.measure_held_out(name, quantizer, lowered=False)
    measured["qconv"] = sum(k.startswith("qconv") for k in result.kernels)
    measured["qlinear"] = sum(k.startswith("qlinear") for k in result.kernels)
    return measured


def measure_all() -> dict[str, Any]:
    """Every model (mode ``builtins``: torch's copy the only one registered)."""
    assert inductor_config.pre_grad_custom_pass is None, "a custom pre-grad pass is installed"
    ref = torchao_reference.load()
    return {
        name: {
            "ours_vnni": lower(ours, name, qcore.host.targeting(VNNI)),
            # for torch's passes, which saturate where this package's lowering is exact
            "ours_host": lower(ours, name, nullcontext(), weight_rule="never_overflow"),
            "torchao": lower(ref, MODELS[name], nullcontext()),
        }
        for name in MODELS
    }
