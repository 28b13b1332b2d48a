"""This package's lowering run on one traced graph, without Inductor.

A function written the way a converted model computes (torch's quantize / dequantize ops
around float convs and linears) is traced with Inductor's decompositions (``fwd_only``,
the tracing the lowering's own patterns come from), so it has the form Inductor's
inference graph has; ``pipeline.lower`` rewrites it, and the rewritten graph runs eagerly,
oneDNN's int8 kernels included (an in-place "sum" really writes into its accumulator).
About a second per graph once the pattern passes are built, where a compile takes tens of
seconds: for the lowering's conditions, one graph each. Dynamo, freezing and Inductor's
code generation are the compiled tests' (test_lowering_patterns.py and others).

The reference is the same function run eagerly: torch's own quantize / dequantize
reference ops and float convs, never anything of this package's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

import qcore
from qinductor_x86 import _torch_private as private
from qinductor_x86.lowering import ops, pipeline

qd = torch.ops.quantized_decomposed
U8 = (0, 255, torch.uint8)


def q(x: torch.Tensor, scale: float, zero_point: int, qrange: tuple[int, int, torch.dtype] = U8) -> torch.Tensor:
    return qd.quantize_per_tensor.default(x, scale, zero_point, *qrange)  # type: ignore[no-any-return]


def dq(codes: torch.Tensor, scale: float, zero_point: int, qrange: tuple[int, int, torch.dtype] = U8) -> torch.Tensor:
    return qd.dequantize_per_tensor.default(codes, scale, zero_point, *qrange)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Weight:
    """A per-output-channel int8 weight as PT2E converts it (axis 0, zero points 0), with
    codes in [-64, 64]: no int16 pair of a uint8 x int8 product can overflow (255 * 128 <
    32767), so every kernel is exact on any CPU."""

    codes: torch.Tensor
    scales: torch.Tensor
    zero_points: torch.Tensor
    bias: torch.Tensor

    @staticmethod
    def make(seed: int, *shape: int, limit: int = 64) -> Weight:
        generator = torch.Generator().manual_seed(seed)
        codes = torch.randint(-limit, limit + 1, shape, generator=generator, dtype=torch.int8)
        scales = torch.rand(shape[0], generator=generator) / 100 + 1e-3
        zero_points = torch.zeros(shape[0], dtype=torch.int64)  # int64, as PT2E's are
        return Weight(codes, scales, zero_points, torch.randn(shape[0], generator=generator) / 10)

    def dequantized(self) -> torch.Tensor:
        return qd.dequantize_per_channel.default(  # type: ignore[no-any-return]
            self.codes, self.scales, self.zero_points, 0, -128, 127, torch.int8
        )

    def conv(self, x: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        return F.conv2d(x, self.dequantized(), self.bias, **kwargs)

    def linear(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.dequantized(), self.bias)


@dataclass(frozen=True)
class Lowered:
    """The rewritten graph, what the lowering recorded, and both sides' outputs."""

    gm: torch.fx.GraphModule
    record: Any
    eager: Any
    output: Any

    def calls(self, *targets: Any) -> list[torch.fx.Node]:
        return [n for n in self.gm.graph.nodes if n.target in targets]

    @property
    def kernels(self) -> list[torch.fx.Node]:
        """The oneDNN int8 conv / linear calls of the rewritten graph."""
        return self.calls(ops.QCONV, ops.QCONV_BINARY, ops.QLINEAR, ops.QLINEAR_TENSOR, ops.QLINEAR_BINARY)


def lower(
    fn: Callable[..., Any], inputs: Sequence[torch.Tensor], *, target: str = "avx512_vnni", run: bool = True
) -> Lowered:
    """``fn`` traced, lowered for the int8 ``target`` and run on ``inputs`` (each side on
    its own copy of them: an in-place kernel must not write into the reference's), unless
    ``run`` is False (output None: a test that checks the rewrite before a kernel that a
    wrong rewrite would crash runs it)."""
    with torch.no_grad():
        eager = fn(*(t.clone() for t in inputs))
        gm = private.fwd_only(fn, [t.clone() for t in inputs])
    # Inside a compile the lowering's new nodes get their fake values in the compile's
    # fake mode, which takes the real prepacked weights as inputs; a traced graph's values
    # have modes of their own, which must take them too.
    for node in gm.graph.nodes:
        mode = getattr(node.meta.get("val"), "fake_mode", None)
        if mode is not None:
            mode.allow_non_fake_inputs = True
    # the lowering runs only where weights are frozen: Inductor's freezing switch
    freezing = private.get_hook("freezing")
    private.set_hook("freezing", True)
    try:
        with torch.no_grad():
            record = pipeline.lower(gm.graph, qcore.host.parse_target(target))
    finally:
        private.set_hook("freezing", freezing)
    gm.recompile()
    if not run:
        return Lowered(gm, record, eager, None)
    with torch.no_grad():
        output = gm(*inputs)
    return Lowered(gm, record, eager, output)
