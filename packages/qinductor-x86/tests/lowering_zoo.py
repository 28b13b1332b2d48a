"""Models, quantization, compilation and fresh-interpreter helpers for the lowering's tests.

Inputs to the lowering are PT2E-converted models from three independent sources: this
package's x86 quantizer (``qcore.get_quantizer("x86")``), torchao 0.18's
``X86InductorQuantizer`` (loaded without its pass registration, see torchao_reference.py),
and the XNNPACK quantizer (signed int8 activations). References are the eager converted
model and the float model, never outputs of the lowering itself.

Which x86 int8 passes exist is process-wide and permanent (torch registers its copy at
the first compile, torchao at import), so the measurements of this folder that need one
lowering mode run in the fresh interpreter of that mode (``probe_modes.py``, one per mode
and test session, through conftest.py's ``probes`` fixture), and the scripts that change
what a process loads run in one of their own (:func:`run_script`); they report with
``qcore.testing.fresh.emit``. They run on one thread: oneDNN's int8 kernels for CPUs
without VNNI give different results from run to run with two threads (seen with
``ONEDNN_MAX_CPU_ISA=AVX2`` on torch 2.13: the same ResNet compiled by torch's own passes
came out 0.3 % or 3.5 % off its eager model, for torchao's quantizer and ours alike), and
a test must not depend on that race. One thread is deterministic on both kinds of CPU.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import parity_models as pm
import torch
import torch.nn.functional as F
from torch import nn

import qcore
from qcore.metrics import sqnr
from qcore.testing import fresh
from qcore.testing.codes import CodeDiff, compare_outputs
from qcore.testing.ties import tie_variants

HERE = Path(__file__).parent

#: Inductor's check of each extern kernel's output in its generated code, whose message
#: names the FX node's target: ``assert_size_stride(buf, sizes, strides, msg)`` up to torch
#: 2.14, ``assert_tensor_metadata(buf, sizes, strides, dtype, msg)`` from 2.15 on.
SIZE_CHECK = re.compile(r"assert_(?:size_stride|tensor_metadata)\(")

#: Lines of Inductor's generated code that call a oneDNN int8 kernel.
_KERNEL_CALL = re.compile(r"torch\.ops\.onednn\.(qconv\w*|qlinear\w*)\.\w+\(")


# models -------------------------------------------------------------------------------


class ConvStem(nn.Module):
    """conv+relu, conv+relu6, conv+hardswish, conv+silu, and a residual add (+relu)."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, padding=1)
        self.c2 = nn.Conv2d(16, 16, 3, padding=1)
        self.c3 = nn.Conv2d(16, 16, 1)
        self.c4 = nn.Conv2d(16, 16, 3, padding=1, groups=4)
        self.c5 = nn.Conv2d(16, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.c1(x))
        y = F.relu(self.c2(y) + y)
        y = F.hardswish(self.c3(y))
        y = F.relu6(self.c4(y))
        return F.silu(self.c5(y))


class MLP(nn.Module):
    """Linear layers with gelu and relu, on 2-D input."""

    def __init__(self, sizes: tuple[int, ...] = (32, 64, 64, 10)) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(sizes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = F.gelu(x) if i % 2 == 0 else F.relu(x)
        return x


class Linear3D(nn.Module):
    """Linear on a contiguous 3-D input, on a strided one, and without a bias."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(16, 32)
        self.b = nn.Linear(32, 16, bias=False)
        self.c = nn.Linear(16, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.a(x))
        y = self.b(y)
        return self.c(y.transpose(0, 1))


class LinearResidual(nn.Module):
    """linear + add (+ relu): the binary post-ops of linear layers."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(24, 24)
        self.b = nn.Linear(24, 24)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.a(x) + x)
        return self.b(y) + y


class ConvBranches(nn.Module):
    """Conv branches added: one conv's int8 output is the other's residual, a fresh buffer
    nobody reads again, so the add (+ relu + quantize) runs in place on it; the last add
    has a float output, so it runs in place on the dequantized residual."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.c3 = nn.Conv2d(8, 8, 1)
        self.c4 = nn.Conv2d(8, 8, 1)
        self.c5 = nn.Conv2d(8, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.c1(x))
        z = F.relu(self.c2(y) + self.c3(y))
        return self.c4(z) + self.c5(y)


class RuntimeWeight(nn.Module):
    """A converted linear whose int8 weight codes arrive as a model input: freezing makes
    no constant of them, so there is nothing to prepack."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("w_scale", torch.full((8,), 0.01))
        self.register_buffer("w_zp", torch.zeros(8, dtype=torch.int64))
        self.bias = nn.Parameter(torch.randn(8, generator=torch.Generator().manual_seed(0)))

    def forward(self, x: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
        ops = torch.ops.quantized_decomposed
        xq = ops.quantize_per_tensor.default(x, 0.02, 100, 0, 255, torch.uint8)
        xd = ops.dequantize_per_tensor.default(xq, 0.02, 100, 0, 255, torch.uint8)
        wd = ops.dequantize_per_channel.default(codes, self.w_scale, self.w_zp, 0, -128, 127, torch.int8)
        return F.linear(xd, wd, self.bias)


def runtime_weight_lowered() -> dict[str, Any]:
    """:class:`RuntimeWeight` compiled under this package's lowering alone (a standalone
    mode's part): its int8 kernels, the reasons the report gives, its codes against eager."""
    codes = torch.randint(-64, 64, (8, 16), dtype=torch.int8, generator=torch.Generator().manual_seed(1))
    result = lower(RuntimeWeight().eval(), (example(4, 16), codes))
    reasons = sorted({node.reason for node in result.report.left_in_float})
    return {"kernels": result.kernels, "reasons": reasons, "codes": result.codes_json()}


class PoolCat(nn.Module):
    """Max-pool, cat and flatten on int8 codes between quantized convs."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(4, 8, 3, padding=1)
        self.c2 = nn.Conv2d(4, 8, 1)
        self.c3 = nn.Conv2d(16, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(x, 2)
        y = torch.cat([self.c1(x), self.c2(x)], 1)
        y = F.max_pool2d(self.c3(y), 2)
        return self.fc(torch.flatten(y, 1))


class Attention(nn.Module):
    """A self-attention block: linear projections viewed into heads before the matmuls."""

    def __init__(self, dim: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v = (nn.Linear(dim, dim) for _ in range(3))
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        h = self.heads

        def split(y: torch.Tensor) -> torch.Tensor:
            return y.view(b, t, h, c // h).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        attention = torch.matmul(q, k.transpose(-2, -1)) / (c // h) ** 0.5
        y = torch.matmul(attention.softmax(-1), v)
        return self.out(y.transpose(1, 2).reshape(b, t, c))


class WeightOnlyLinear(nn.Module):
    """``F.linear(x, w.to(x.dtype)) * scales`` with an int8 weight: int8 weight-only."""

    def __init__(self, in_features: int = 32, out_features: int = 16) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        weight = torch.randn(out_features, in_features, generator=generator)
        scales = weight.abs().amax(1) / 127
        self.register_buffer("w", torch.round(weight / scales[:, None]).to(torch.int8))
        self.register_buffer("scales", scales.to(torch.bfloat16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.w.to(x.dtype)) * self.scales  # type: ignore[operator]


def example(*shape: int, seed: int = 0, shift: float = 0.0, spread: float = 1.0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator) * spread + shift


# quantization -------------------------------------------------------------------------


def torchao_quantizer(**config: Any) -> Any:
    """torchao 0.18's X86InductorQuantizer, without its import side effects."""
    import torchao_reference

    reference = torchao_reference.load()
    quantizer = reference.X86InductorQuantizer()
    quantizer.set_global(reference.get_default_x86_inductor_quantization_config(**config))
    return quantizer


QUANTIZERS: dict[str, Callable[[], Any]] = {
    "x86": lambda: qcore.get_quantizer("x86"),
    "torchao": torchao_quantizer,
    "xnnpack": lambda: qcore.get_quantizer("xnnpack", is_per_channel=True),
}


def quantize(
    model: nn.Module,
    inputs: tuple[torch.Tensor, ...],
    quantizer: str | Any = "x86",
    calibration: list[tuple[torch.Tensor, ...]] | None = None,
) -> torch.fx.GraphModule:
    """The PT2E flow of the design guide: export, prepare, calibrate, convert."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    chosen = QUANTIZERS[quantizer]() if isinstance(quantizer, str) else quantizer
    exported = torch.export.export(model.eval(), inputs).module()
    prepared = prepare_pt2e(exported, chosen)
    with torch.no_grad():
        for batch in calibration or [inputs]:
            prepared(*batch)
    converted: torch.fx.GraphModule = convert_pt2e(prepared)
    return converted


def narrow_weights(
    converted: torch.fx.GraphModule, only: Callable[[torch.fx.Node], bool] | None = None
) -> torch.fx.GraphModule:
    """Requantize every int8 weight to [-64, 64] (codes halved, scales doubled): a model that
    cannot saturate oneDNN's kernels on any CPU, so that fusions are exercised, and compared
    exactly, on VNNI and non-VNNI hosts alike. The eager reference is this same model.
    ``only``: narrow the weights whose dequantize node it accepts, no other."""
    dequantize = torch.ops.quantized_decomposed.dequantize_per_channel.default
    for node in converted.graph.nodes:
        if node.target is not dequantize or (only is not None and not only(node)):
            continue
        weight, scale = (converted.get_buffer(str(n.target)) for n in node.args[:2])
        weight.copy_(torch.div(weight, 2, rounding_mode="floor"))
        scale.mul_(2)
    return converted


# compilation --------------------------------------------------------------------------


@contextmanager
def fresh_compile() -> Iterator[None]:
    """Freezing on, Dynamo's caches and torch's counters cleared, errors raised (Dynamo
    would otherwise fall back to eager silently and a failed lowering would look fine).

    Constants stay buffers: Inductor inlines a frozen 1-D constant of at most 8 values
    (the per-channel scales, zero points and bias of the zoo's 8-channel layers) as a
    generated kernel of its own, one gcc run each, which a real model's channel counts
    never produce; a quarter of this package's kernels were those. The integration,
    demo and shipping tests compile with Inductor's defaults."""
    import torch._dynamo
    import torch._dynamo.config
    import torch._inductor.config as inductor_config
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    with (
        inductor_config.patch(freezing=True, fx_graph_cache=False, always_keep_tensor_constants=True),
        torch._dynamo.config.patch(suppress_errors=False),
    ):
        yield
    torch._dynamo.reset()


def compile_and_run(model: Any, inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, str]:
    """The compiled model's output and Inductor's generated code (inference, frozen)."""
    from torch._inductor.utils import run_and_get_code

    with torch.no_grad():
        output, code = run_and_get_code(torch.compile(model), *inputs)
    return output, "\n".join(code)


def as_tuple(value: Any) -> tuple[torch.Tensor, ...]:
    """A model's output as a tuple of tensors (one tensor, or several)."""
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def int8_kernel_calls(code: str) -> list[str]:
    """The oneDNN int8 kernels Inductor's generated code calls, one entry per call site."""
    return _KERNEL_CALL.findall(code)


def inductor_counters() -> dict[str, int]:
    from torch._dynamo.utils import counters

    return dict(counters["inductor"])


#: Why a VNNI-route compile of full-range weights cannot be checked for exactness here.
SATURATING_CPU = (
    "this CPU adds u8 x s8 pairs in saturating int16 lanes (no VNNI, or oneDNN capped at "
    "AVX2): the VNNI route's single-depth kernels overflow on full-range weights here, as "
    "torch's own do; its numbers are checked on a CPU with VNNI"
)


def skip_on_a_saturating_cpu() -> None:
    """Skip, with :data:`SATURATING_CPU`, where this CPU's int8 kernels saturate."""
    import pytest

    if qcore.host.probe().saturates_u8s8:
        pytest.skip(SATURATING_CPU)


def assert_exact(diffs: list[CodeDiff] | list[dict[str, Any]]) -> None:
    """Every output in the same codes as its reference, but for ties
    (``qcore.testing.codes``); ``diffs`` as measured, or as a fresh interpreter reported
    them (:meth:`CodeDiff.as_dict`)."""
    made = [d if isinstance(d, CodeDiff) else CodeDiff.from_dict(d) for d in diffs]
    assert made and all(d.exact for d in made), "; ".join(map(str, made))


@dataclass(frozen=True)
class Lowered:
    """One compile of a converted model: the eager converted model's output (the
    reference), the compiled one, Inductor's generated code, the lowering's report (None
    when only the passes registered anyway ran) and torch's ``counters["inductor"]``."""

    eager: Any
    output: Any
    code: str
    report: Any
    counters: dict[str, int]
    #: the eager output with the converted model's own requantize ties broken the other
    #: way (``qcore.testing.ties``)
    tie_variants: list[Any] = field(default_factory=list)

    @property
    def kernels(self) -> list[str]:
        return int8_kernel_calls(self.code)

    @property
    def codes(self) -> list[CodeDiff]:
        """The compiled output against the eager converted one, in codes, each output
        tensor on its own (``qcore.testing.codes``), codes on the eager model's own ties
        excused."""
        return compare_outputs(self.eager, self.output, variants=self.tie_variants)

    def codes_json(self) -> list[dict[str, Any]]:
        """:attr:`codes` as JSON values, for a fresh interpreter's report."""
        return [d.as_dict() for d in self.codes]

    def count(self, phrase: str) -> int:
        """How many rewrites the report lists under a name containing ``phrase``."""
        return sum(n for name, n in self.report.lowered.items() if phrase in name)


@dataclass(frozen=True)
class Eager:
    """The eager converted model's output on some inputs, and its tie variants (see
    :class:`Lowered`): the reference of every compile of that model on those inputs."""

    output: Any
    tie_variants: list[Any]


def eager_reference(converted: Any, inputs: tuple[torch.Tensor, ...]) -> Eager:
    """``converted`` run eagerly on ``inputs``, with its ties broken the other way."""
    with torch.no_grad():
        eager = converted(*inputs)
    # a hand-written module has no requantize graph to read: its ties cannot be excused
    variants = tie_variants(converted, inputs) if isinstance(converted, torch.fx.GraphModule) else []
    return Eager(eager, variants)


def lower(
    converted: Any,
    inputs: tuple[torch.Tensor, ...],
    *,
    target: str | None = None,
    lowered: bool = True,
    reference: Eager | None = None,
) -> Lowered:
    """Run ``converted`` eagerly (unless ``reference`` is its :func:`eager_reference` on
    ``inputs`` already: a model compiled for two targets), then compile it with freezing
    (fresh caches) and run it: under this package's lowering (``lowered=False``: only the
    passes registered anyway), for the int8 ``target`` if given."""
    made = reference if reference is not None else eager_reference(converted, inputs)
    eager, variants = made.output, made.tie_variants
    lowering = qcore.get_lowering("x86") if lowered else None
    with (
        fresh_compile(),
        qcore.host.targeting(target) if target is not None else nullcontext(),
        lowering if lowering is not None else nullcontext(),
    ):
        output, code = compile_and_run(converted, inputs)
        counters = inductor_counters()
    report = lowering.report() if lowering is not None else None
    return Lowered(eager, output, code, report, counters, variants)


@dataclass(frozen=True)
class HeldOut:
    """Model ``name`` of the parity zoo, quantized (four calibration batches), and a
    held-out batch with the float model's output on it."""

    model: Any
    converted: Any
    inputs: tuple[torch.Tensor, ...]
    reference: torch.Tensor


def quantize_held_out(name: str, quantizer: Any) -> HeldOut:
    model, example = pm.build(name)
    inputs = pm.lookup(name)[1]
    converted = quantize(model, example, quantizer, [inputs(seed) for seed in range(1, 5)])
    held_out = inputs(100)
    with torch.no_grad():
        reference = model(*held_out)
    return HeldOut(model, converted, held_out, reference)


def measure(quantized: HeldOut, *, lowered: bool) -> tuple[dict[str, Any], Lowered]:
    """``quantized`` compiled (see :func:`lower`), on its held-out batch: the int8 kernels,
    the compiled output against the eager converted one, and SQNR of both against float."""
    result = lower(quantized.converted, quantized.inputs, lowered=lowered)
    measured = {
        "kernels": len(result.kernels),
        "codes_compiled_vs_eager": result.codes_json(),
        "sqnr_eager": sqnr(quantized.reference, result.eager),
        "sqnr_compiled": sqnr(quantized.reference, result.output),
    }
    return measured, result


def measure_held_out(name: str, quantizer: Any, *, lowered: bool) -> tuple[dict[str, Any], Lowered]:
    """Model ``name`` of the parity zoo quantized by ``quantizer`` and measured (see
    :func:`quantize_held_out` and :func:`measure`)."""
    return measure(quantize_held_out(name, quantizer), lowered=lowered)


def same_converted_model(a: torch.fx.GraphModule, b: torch.fx.GraphModule) -> bool:
    """Whether two converted models compute the same thing, by construction: the same
    generated code, and equal values (dtype, shape and every element) of everything the
    code reads with ``get_attr``. A submodule call makes the answer no, unless nothing reads
    its result and it holds no state (export's input guards, ``_guards_fn``, which can
    only raise)."""
    if a.code != b.code:
        return False
    for node in a.graph.nodes:
        if node.op == "call_module":
            called = [m.get_submodule(str(node.target)) for m in (a, b)]
            if node.users or any(dict(m.state_dict()) for m in called):
                return False
        if node.op != "get_attr":
            continue
        mine, theirs = (_attr(m, str(node.target)) for m in (a, b))
        if not (
            isinstance(mine, torch.Tensor)
            and isinstance(theirs, torch.Tensor)
            and mine.dtype == theirs.dtype
            and torch.equal(mine, theirs)
        ):
            return False
    return True


def _attr(module: torch.nn.Module, target: str) -> Any:
    for name in target.split("."):
        module = getattr(module, name)
    return module


#: The held-out batches of :func:`torchaos_eager_sqnr` (of ``qcore.zoo.architectures``).
HELD_OUT = (50,)


@functools.cache
def torchaos_eager_sqnr(name: str, held_out: tuple[int, ...] = HELD_OUT) -> float:
    """SQNR against the float model of architecture ``name`` (``qcore.zoo.architectures``)
    quantized by torchao 0.18's quantizer (full-range weights; it reads no int8 target),
    eager, on the ``held_out`` batches as one: three calibration batches, the accuracy
    reference of test_architecture_accuracy.py and test_budgeted_default.py, computed once
    a session."""
    from qcore.zoo.architectures import architecture

    case = architecture(name)
    model = case.model()
    calibration = [case.inputs(b) for b in range(1, 4)]
    theirs = quantize(model, case.inputs(0), "torchao", calibration)
    return held_out_sqnr(model, theirs, [case.inputs(b) for b in held_out])


def held_out_sqnr(model: nn.Module, quantized: nn.Module, batches: list[tuple[torch.Tensor, ...]]) -> float:
    """SQNR of ``quantized`` against float ``model`` over ``batches`` concatenated."""
    with torch.no_grad():
        reference = torch.cat([model(*batch) for batch in batches])
        return sqnr(reference, torch.cat([quantized(*batch) for batch in batches]))


def probe_interpreter(mode: str) -> str:
    """The lowering mode whose fresh interpreter (``probe_modes.py``) runs ``mode``'s parts:
    ``builtins`` runs in ``reference``'s where the two set up the same passes, torchao's
    alone (a torch without its own copy, 2.14 on); every other mode in its own."""
    from qinductor_x86.lowering import torch_carries_x86_passes

    if mode == "builtins" and not torch_carries_x86_passes():
        return "reference"
    return mode


def run_script(script: str, *args: str, timeout: float = 900.0) -> Any:
    """Run ``script`` of this folder in a fresh interpreter on one thread; what it emitted."""
    outcome = fresh.run_script(HERE / script, *args, threads=1, timeout=timeout)
    assert outcome.ok, outcome.describe()
    return outcome.result()


# models appended for signed-int8 (XNNPACK-quantized) graphs ----------------------------


class EncoderLayer(nn.Module):
    """A post-norm transformer encoder layer on (batch, tokens, dim): 4 heads of nn.Linear
    q/k/v/out projections, torch.matmul for scores and for attention x values, softmax,
    residual adds, LayerNorm, and a Linear-activation-Linear feed-forward."""

    def __init__(self, dim: int = 32, heads: int = 4, hidden: int = 64, activation: str = "gelu") -> None:
        super().__init__()
        self.attention = Attention(dim, heads)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.up, self.down = nn.Linear(dim, hidden), nn.Linear(hidden, dim)
        self.activation = F.gelu if activation == "gelu" else F.relu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm1(x + self.attention(x))
        return self.norm2(x + self.down(self.activation(self.up(x))))


class FunctionalConvs(nn.Module):
    """Convolutions written as functional calls on weight parameters: F.conv2d with keyword
    padding, F.conv_transpose2d (a weight shaped like a plain conv's: a pass that ignores
    ``transposed`` lowers it without an error, to wrong numbers), F.conv1d and F.conv3d."""

    def __init__(self, channels: int = 8) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(0)

        def weight(*shape: int) -> nn.Parameter:
            return nn.Parameter(torch.randn(*shape, generator=generator) * 0.2)

        self.w2, self.b2 = weight(channels, 4, 3, 3), weight(channels)
        self.wt = weight(channels, channels, 3, 3)
        self.w1 = weight(6, 4, 3)
        self.w3 = weight(4, 4, 3, 3, 3)

    def forward(
        self, x: torch.Tensor, x1: torch.Tensor, x3: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        y = F.relu(F.conv2d(x, self.w2, self.b2, padding="same"))
        y = F.conv_transpose2d(y, self.wt, padding=1)
        return y, F.conv1d(x1, self.w1, padding=1), F.conv3d(x3, self.w3, stride=1, padding=1)


def functional_conv_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return example(2, 4, 8, 8), example(2, 4, 10, seed=1), example(1, 4, 4, 5, 5, seed=2)
