"""Compile one linear + add model and describe Inductor's generated code, on one side, in
the interpreter of its lowering mode (``probe_modes.py``; which x86 int8 passes exist is
process-wide and permanent):

* ``torch`` (mode ``reference``): torch 2.13's built-in passes, torchao's x86 quantizer
  module imported as users import it (its passes registered too); no lowering of ours;
* ``ours`` (mode ``standalone``): torch's copy switched off before the first compile,
  torchao's never registered; this package's lowering installed.

Two graphs, one compile each:

* ``linear + add``: the shape of torchao 0.18's ``test_qlinear_add_cpu``, two linear + add +
  relu blocks, the first with an int8 output (the next linears read it), the second with a
  float one. Quantized by this package's x86 quantizer, weights narrowed so that nothing
  saturates or is doubled on any CPU.
* ``int8 matmul``: torchao's dynamic int8 / SmoothQuant linear written out, ``_int_mm`` on
  int8 codes times the scales, in both of torchao's spellings (signed, with one activation
  scale and a bias; unsigned ``u8s8``, with one scale per row), full-range weights (they
  can saturate a CPU without VNNI, where eager ``_int_mm`` itself does). Its exact value,
  the integer product in float64 times the scales, is reported with the compiled output's
  distance to it.

What is reported is what upstream's fusion tests read off the code: how often each oneDNN
op name occurs anywhere in it (``FileCheck`` / ``count``), the ``assert_size_stride``
checks, and each kernel call with its post-op arguments. Neither graph depends on what
the interpreter compiled before: the code is Inductor's for this graph alone.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import lowering_zoo as zoo
import torch
from torch import nn

import qcore

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


class IntMatmuls(nn.Module):
    def __init__(self, rows: int = 8, k: int = 64, n: int = 24) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(0)

        def codes(*shape: int) -> torch.Tensor:
            return torch.randint(-127, 128, shape, dtype=torch.int8, generator=generator)

        def scales(*shape: int) -> torch.Tensor:
            return torch.rand(*shape, generator=generator) * 0.01 + 0.01

        self.b1, self.b2 = codes(k, n), codes(n, n)
        self.x_scale1, self.w_scale1, self.bias1 = scales(1, 1), scales(n), scales(n)
        self.x_scale2, self.w_scale2 = scales(rows, 1), scales(n)

    def forward(self, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch._int_mm(a, self.b1).to(torch.float32) * self.x_scale1 * self.w_scale1
        y = y + self.bias1
        codes = torch.clamp(torch.round(y * 8), -128, 127).to(torch.int8)
        # torchao's u8s8 spelling (torchao.kernel.intmm._int_scaled_matmul_cpu)
        acc = torch._int_mm((codes.to(torch.int32) + 128).to(torch.uint8), self.b2)
        acc = acc - self.b2.sum(dim=0, keepdim=True, dtype=torch.int32) * 128
        return y, acc.to(torch.float32) * self.x_scale2 * self.w_scale2

    def exact(self, a: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Both outputs from the integer products (the second from the compiled first
        output's codes: rounding ties may differ, the matmul must not)."""
        exact_y = (a.double() @ self.b1.double()) * self.x_scale1 * self.w_scale1 + self.bias1
        codes = torch.clamp(torch.round(y * 8), -128, 127).double()
        return exact_y, (codes @ self.b2.double()) * self.x_scale2 * self.w_scale2


def describe(code: str) -> dict[str, Any]:
    calls = []
    for line in code.splitlines():
        call = _CALL.match(line)
        if call:
            calls.append([call[1], *re.findall(r"'(\w*)'", call[2])])
    return {
        "op names": dict(Counter(_OP_NAME.findall(code))),
        "assert_size_stride": sum(bool(zoo.SIZE_CHECK.search(line)) for line in code.splitlines()),
        "calls": calls,
    }


def measure(side: str) -> dict[str, Any]:
    """Both graphs compiled by the passes of this interpreter's mode (``torch``) or by this
    package's lowering (``ours``), described."""
    torch.manual_seed(0)
    inputs = (zoo.example(4, 8, shift=1.0),)
    converted = zoo.narrow_weights(zoo.quantize(LinearAddBlocks(), inputs))
    linear_add = zoo.lower(converted, inputs, lowered=side == "ours")
    matmuls = IntMatmuls()
    codes = torch.randint(-128, 128, (8, 64), dtype=torch.int8, generator=torch.Generator().manual_seed(1))
    int8_matmul = zoo.lower(matmuls, (codes,), lowered=side == "ours")
    exact = matmuls.exact(codes, int8_matmul.output[0])
    return {
        "linear + add": describe(linear_add.code),
        "int8 matmul": describe(int8_matmul.code),
        "int8 matmul, relative distance to exact": [
            float((o.double() - e).norm() / e.norm())
            for e, o in zip(exact, int8_matmul.output, strict=True)
        ],
        # (ours: how many were doubled; on a target that saturates, both must be)
        "int8 matmul, doubled": int8_matmul.count("reduction doubled") if int8_matmul.report else None,
        "target saturates": qcore.host.target().saturates_u8s8,
    }
