"""Compile one linear + add model and describe Inductor's generated code, in a process of
its own (which x86 int8 passes exist is process-wide and permanent):

* ``torch``: torch 2.13's built-in passes, torchao's x86 quantizer module imported as users
  import it (its passes registered too); no lowering of ours;
* ``ours``: torch's copy switched off before the first compile, torchao's never
  registered; this package's lowering installed.

The model is the shape of torchao 0.18's ``test_qlinear_add_cpu``: two linear + add + relu
blocks, the first with an int8 output (the next linears read it), the second with a float
one. Quantized by this package's x86 quantizer, weights narrowed so that nothing saturates
or is doubled on any CPU. What is reported is what upstream's fusion tests read off the
code: how often each oneDNN op name occurs anywhere in it (``FileCheck`` / ``count``), the
``assert_size_stride`` checks, and each kernel call with its post-op arguments.

    python codegen_probe.py torch|ours
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import lowering_zoo as zoo
import torch
from torch import nn

from qcore.testing.fresh import emit

#: Every spelling of a oneDNN op in Python code: ``torch.ops.onednn.<op>.<overload>``.
_OP_NAME = re.compile(r"torch\.ops\.onednn\.\w+\.\w+")
#: A call of one: its name and its string arguments (binary and unary post-ops).
_CALL = re.compile(r"^\s*(?:\w+ = )?(torch\.ops\.onednn\.\w+\.\w+)\((.*)\)\s*$")


class LinearAddBlocks(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l1, self.l2, self.l3, self.l4 = (nn.Linear(8, 8) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.l1(x) + self.l2(x))
        return torch.relu(self.l3(y) + self.l4(y))


def describe(code: str) -> dict[str, Any]:
    calls = []
    for line in code.splitlines():
        call = _CALL.match(line)
        if call:
            calls.append([call[1], *re.findall(r"'(\w*)'", call[2])])
    return {
        "op names": dict(Counter(_OP_NAME.findall(code))),
        "assert_size_stride": sum("assert_size_stride(" in line for line in code.splitlines()),
        "calls": calls,
    }


def main(side: str) -> None:
    from qinductor_x86 import lowering as x86_lowering

    if side == "ours":
        x86_lowering.switch_off_torch_builtins()
    else:
        import torchao_reference

        torchao_reference.load_with_side_effects()
    torch.manual_seed(0)
    inputs = (zoo.example(4, 8, shift=1.0),)
    converted = zoo.narrow_weights(zoo.quantize(LinearAddBlocks(), inputs))
    result = zoo.lower(converted, inputs, lowered=side == "ours")
    emit(
        {
            **describe(result.code),
            "other passes": x86_lowering.other_x86_passes(),
        }
    )


if __name__ == "__main__":
    main(sys.argv[1])
