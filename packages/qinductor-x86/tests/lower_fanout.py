"""Lower graphs whose int8 results have several readers ("fan-out") and measure the code.

Run for ``test_lowering_fanout.py`` in the interpreter of each lowering mode
(``probe_modes.py``): ``torch`` in mode ``builtins`` (torch 2.13's built-in x86 passes,
alone), ``ours`` in mode ``standalone`` (qinductor-x86 alone, torch's copy switched off),
once per target: avx2 and avx512_vnni.

Every graph is quantized by torchao 0.18's ``X86InductorQuantizer`` (full-range int8
weights, loaded without its pass registration) and compiled with freezing. For each: the
oneDNN int8 kernels Inductor's generated code calls, the packed weights they read (each
kernel's ``qw`` argument), the compiled output against the eager converted model (and its
raw values, for comparing the two lowerings), and for ours the report's doubled-reduction
entries and how many layers can overflow a 16-bit pair (by brute force, independently).
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable
from typing import Any

import lowering_zoo as zoo
import torch
from test_lowering_saturation import INT16_MAX, brute_force_worst_pair, int8_weights
from torch import nn

TARGETS = ("avx2", "avx512_vnni")
KERNEL = "torch.ops.onednn.q"
DTYPES = ("torch.uint8", "torch.int8", "torch.float32", "torch.bfloat16")


def kernel_calls(code: str) -> list[tuple[str, str]]:
    """("kernel -> output dtype", its packed weight) for each oneDNN int8 kernel call in the generated code:
    the calls are single Python statements, and every such kernel's fourth argument is
    ``qw``, the packed weight."""
    calls = []
    for line in code.splitlines():
        if KERNEL not in line or line.lstrip().startswith("#"):
            continue
        for node in ast.walk(ast.parse(line.strip())):
            if isinstance(node, ast.Call) and ast.unparse(node.func).startswith(KERNEL):
                name = ast.unparse(node.func).removeprefix("torch.ops.onednn.")
                # the first dtype among the arguments is the output's
                out = next(a for a in map(ast.unparse, node.args) if a in DTYPES)
                calls.append((f"{name} -> {out.removeprefix('torch.')}", ast.unparse(node.args[3])))
    return calls


class FanOut(nn.Module):
    """``t = join(l1(x), l2(x)); y = l3(t) + l4(t)``: the joined result is read by two
    linears (``joined``: its width)."""

    def __init__(
        self, join: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], joined: int = 16
    ) -> None:
        super().__init__()
        self.join = join
        self.l1, self.l2 = nn.Linear(16, 16), nn.Linear(16, 16)
        self.l3, self.l4 = nn.Linear(joined, 16), nn.Linear(joined, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = self.join(self.l1(x), self.l2(x))
        return self.l3(t) + self.l4(t)


def _cat(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.cat([a, b], dim=-1)


def _flattened_sum(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A sum on a 3-D input, flattened: the flattened codes are what fans out."""
    return torch.flatten(a + b, 1)


GRAPHS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]] = {
    "add_2d": (lambda: FanOut(operator.add), (8, 16)),
    "add_3d": (lambda: FanOut(operator.add), (2, 4, 16)),
    "cat": (lambda: FanOut(_cat, 32), (8, 16)),
    "reshape": (lambda: FanOut(_flattened_sum, 64), (2, 4, 16)),
}


def measure(converted: Any, x: torch.Tensor, target: str | None) -> dict[str, Any]:
    """Compiled by this package's lowering for ``target``, or (None) by torch's passes."""
    result = zoo.lower(converted, (x,), target=target, lowered=target is not None)
    calls = kernel_calls(result.code)
    assert len(calls) == len(result.kernels)
    measured = {
        "kernels": [name for name, _ in calls],
        "packed_weights": [weight for _, weight in calls],
        "our_packed_constants": sorted(
            set(re.findall(r"\b_qinductor_x86_packed\d+\b", result.code))
        ),
        "rel_l2_compiled_vs_eager": result.relative_l2,
        "output": result.output.flatten().tolist(),
    }
    if target is not None:
        measured["doubled"] = result.count("reduction doubled")
        measured["prepacked"] = result.count("weight prepack")
    return measured


def measure_all(mode: str) -> dict[str, Any]:
    """Every graph: ``torch`` compiled by torch's passes alone (mode ``builtins``), ``ours``
    by this package's lowering alone (mode ``standalone``), once per target."""
    results: dict[str, Any] = {}
    for name, (make, shape) in GRAPHS.items():
        torch.manual_seed(0)
        x = zoo.example(*shape, seed=1)
        converted = zoo.quantize(make().eval(), (x,), "torchao")
        if mode == "torch":
            results[name] = measure(converted, x, None)
            continue
        overflowing = sum(
            brute_force_worst_pair(w, 255) > INT16_MAX for w in int8_weights(converted)
        )
        for target in TARGETS:
            results[f"{name}@{target}"] = {
                **measure(converted, x, target),
                "can_overflow": overflowing,
            }
    return results
