"""Compile a PT2E-converted model under the x86 lowering and read what Inductor generated.

The kernels a compiled model calls are counted in Inductor's generated code (the way
torchao's and torch's own fusion tests count them), never taken from the lowering's
``report()``, which is the code under test.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import torch
from torch._inductor import config as inductor_config

import qcore

#: A oneDNN int8 conv or linear called from Inductor's generated code: (op, overload).
KERNEL_CALL = re.compile(r"torch\.ops\.onednn\.(q(?:conv|linear)\w*)\.(\w+)\(")


@dataclass(frozen=True)
class Compiled:
    """The eager converted model's output (the reference), the compiled one, the
    generated code, and what the lowering reported (to compare, never to count)."""

    eager: Any
    output: Any
    code: str
    report: Any

    @property
    def kernels(self) -> list[tuple[str, str]]:
        """Each oneDNN int8 kernel call in the generated code, one per call site."""
        return KERNEL_CALL.findall(self.code)


def compile_with_lowering(converted: Any, inputs: tuple[torch.Tensor, ...]) -> Compiled:
    """``converted`` run eagerly, then compiled with freezing (fresh caches) under the x86
    lowering, and run."""
    from torch._inductor.utils import run_and_get_code

    with torch.no_grad():
        eager = converted(*inputs)
    torch._dynamo.reset()
    with (
        inductor_config.patch(freezing=True, fx_graph_cache=False),
        torch.no_grad(),
        qcore.get_lowering("x86") as lowering,
    ):
        output, code = run_and_get_code(torch.compile(converted), *inputs)
    torch._dynamo.reset()
    return Compiled(eager, output, "\n".join(code), lowering.report())
