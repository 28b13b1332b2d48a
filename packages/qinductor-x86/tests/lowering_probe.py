"""Compile quantized models with the lowering in a process of its own, print JSON.

Which other x86 int8 passes exist is process-wide and permanent (torch registers its copy
at the first compile, torchao at import), so each mode needs a fresh interpreter:

* ``standalone``: torch's copy switched off before the first compile, torchao's never
  imported; this package's lowering is the only one;
* ``torchao``: torchao's x86 quantizer module imported as users import it (it registers
  its passes and overwrites ``pre_grad_custom_pass``); the lowering installed after it.

Run by test_lowering_modes.py: ``python lowering_probe.py MODE`` (``lowering_zoo.run_script``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import lowering_zoo as zoo
import torch
import torch._inductor.config as inductor_config

import qcore
from qcore.testing.fresh import emit
from qinductor_x86 import lowering as x86_lowering


def compile_one(
    model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], quantizer: Any, narrow: bool = False
) -> dict[str, Any]:
    converted = zoo.quantize(model, inputs, quantizer)
    if narrow:  # fusions, not splits, on any host
        zoo.narrow_weights(converted)
    result = zoo.lower(converted, inputs)
    return {
        "kernels": len(result.kernels),
        "reported_kernels": result.report.int8_kernels,
        "relative_l2": result.relative_l2,
        "counters": {k: v for k, v in result.counters.items() if k.endswith("_count")},
        "lowered": dict(result.report.lowered),
    }


def standalone() -> dict[str, Any]:
    x86_lowering.switch_off_torch_builtins()
    results = {
        "conv, x86 quantizer": compile_one(
            zoo.ConvStem(), (zoo.example(2, 3, 16, 16),), "x86", narrow=True
        ),
        "linear, xnnpack quantizer": compile_one(zoo.MLP(), (zoo.example(8, 32),), "xnnpack"),
    }
    return {"results": results, "other_passes": x86_lowering.other_x86_passes()}


def with_torchao() -> dict[str, Any]:
    import torchao_reference

    module = torchao_reference.load_with_side_effects()
    theirs = inductor_config.pre_grad_custom_pass
    lowering = qcore.get_lowering("x86")
    lowering.install()
    chained = inductor_config.pre_grad_custom_pass
    quantizer = module.X86InductorQuantizer()
    quantizer.set_global(module.get_default_x86_inductor_quantization_config())
    result = compile_one(zoo.ConvStem(), (zoo.example(2, 3, 16, 16),), quantizer)
    lowering.uninstall()
    return {
        "result": result,
        "other_passes": x86_lowering.other_x86_passes(),
        "theirs_kept_in_chain": isinstance(chained, list) and chained[0] is theirs,
        "theirs_restored": inductor_config.pre_grad_custom_pass is theirs,
    }


if __name__ == "__main__":
    emit(standalone() if sys.argv[1] == "standalone" else with_torchao())
