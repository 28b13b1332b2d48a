"""Lower graphs whose int8 results have several readers ("fan-out") and measure the code.

Run in a fresh interpreter by ``test_lowering_fanout.py``, once per lowering:

    python lower_fanout.py torch OUT.json   # torch 2.13's built-in x86 passes, alone
    python lower_fanout.py ours OUT.json    # qinductor-x86 alone (torch's copy switched off),
                                            # once per target: avx2 and avx512_vnni

Every graph is quantized by torchao 0.18's ``X86InductorQuantizer`` (full-range int8
weights, loaded without its pass registration) and compiled with freezing. For each: the
oneDNN int8 kernels Inductor's generated code calls, the packed weights they read (each
kernel's ``qw`` argument), the compiled output against the eager converted model (and its
raw values, for comparing the two lowerings), and for ours the report's doubled-reduction
entries and how many layers can overflow a 16-bit pair (by brute force, independently).
"""

from __future__ import annotations

import ast
import json
import re
import sys
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import lowering_zoo as zoo
import torch
from test_lowering_saturation import brute_force_worst_pair
from torch import nn

import qcore

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


class FanOutAdd(nn.Module):
    """``t = l1(x) + l2(x); y = l3(t) + l4(t)``: the sum is read by two linears."""

    def __init__(self, features: int = 16) -> None:
        super().__init__()
        self.l1, self.l2, self.l3, self.l4 = (nn.Linear(features, features) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = self.l1(x) + self.l2(x)
        return self.l3(t) + self.l4(t)


class FanOutCat(nn.Module):
    """The concatenation of two linears' outputs, read by two linears."""

    def __init__(self) -> None:
        super().__init__()
        self.l1, self.l2 = nn.Linear(16, 16), nn.Linear(16, 16)
        self.l3, self.l4 = nn.Linear(32, 16), nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = torch.cat([self.l1(x), self.l2(x)], dim=-1)
        return self.l3(t) + self.l4(t)


class FanOutReshape(nn.Module):
    """A sum on a 3-D input, flattened, and the flattened codes read by two linears."""

    def __init__(self) -> None:
        super().__init__()
        self.l1, self.l2 = nn.Linear(16, 16), nn.Linear(16, 16)
        self.l3, self.l4 = nn.Linear(64, 16), nn.Linear(64, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = torch.flatten(self.l1(x) + self.l2(x), 1)
        return self.l3(t) + self.l4(t)


GRAPHS: dict[str, tuple[type[nn.Module], tuple[int, ...]]] = {
    "add_2d": (FanOutAdd, (8, 16)),
    "add_3d": (FanOutAdd, (2, 4, 16)),
    "cat": (FanOutCat, (8, 16)),
    "reshape": (FanOutReshape, (2, 4, 16)),
}


def measure(converted: Any, x: torch.Tensor, scope: AbstractContextManager[Any]) -> dict[str, Any]:
    with torch.no_grad():
        eager = converted(x)
    with zoo.fresh_compile(), scope:
        compiled, code = zoo.compile_and_run(converted, (x,))
    calls = kernel_calls(code)
    assert len(calls) == len(zoo.int8_kernel_calls(code))
    return {
        "kernels": [name for name, _ in calls],
        "packed_weights": [weight for _, weight in calls],
        "our_packed_constants": sorted(set(re.findall(r"\b_qinductor_x86_packed\d+\b", code))),
        "rel_l2_compiled_vs_eager": zoo.relative_l2(eager, compiled),
        "output": compiled.flatten().tolist(),
    }


def main(mode: str, out: Path) -> None:
    results: dict[str, Any] = {"_host": {"saturates_u8s8": qcore.host.target().saturates_u8s8}}
    if mode == "ours":
        from qinductor_x86.lowering import switch_off_torch_builtins

        switch_off_torch_builtins()
    for name, (model_type, shape) in GRAPHS.items():
        torch.manual_seed(0)
        x = zoo.example(*shape, seed=1)
        converted = zoo.quantize(model_type().eval(), (x,), "torchao")
        if mode == "torch":
            results[name] = measure(converted, x, nullcontext())
            continue
        overflowing = sum(
            brute_force_worst_pair(converted.get_buffer(str(node.args[0].target)), 255) > 32767
            for node in converted.graph.nodes
            if node.target is torch.ops.quantized_decomposed.dequantize_per_channel.default
        )
        for target in TARGETS:
            lowering = qcore.get_lowering("x86")
            with qcore.host.targeting(target):
                result = measure(converted, x, lowering)
            lowered = lowering.report().lowered
            result["doubled"] = sum(n for k, n in lowered.items() if "reduction doubled" in k)
            result["prepacked"] = sum(n for k, n in lowered.items() if "weight prepack" in k)
            result["can_overflow"] = overflowing
            results[f"{name}@{target}"] = result
    out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
