"""Signed-int8 graphs (XNNPACK's quantizer: int8 activations) compile to oneDNN's int8
kernels once each activation quantize is re-based to uint8 (zero point + 128), exactly.

The models here are the shapes that CNNs and MLPs don't have: attention (linears on 3-D
inputs, matmuls between two quantized activations, quantizes lifted over view / permute /
transpose, codes reaching their dequantizes through views) and functional convolutions
(a transposed conv, which stays in float with a reason, and a 3-D conv, which the XNNPACK
quantizer rewrites as a conv2d). Each model is
compiled once (module-scoped), for the target whose route matters: full-range weights on
an AVX2 target (ops that can overflow run on a doubled reduction), narrowed weights on a
VNNI target.

Every compile runs in a fresh interpreter, the one of its lowering mode (``probe_modes.py``,
which calls :func:`compile_cases`): ``standalone`` switched torch's own x86 passes off
first, ``builtins`` leaves them registered (torch's default) and compiles these cases last,
after its measurements of torch's copy alone; so that their behaviour on signed graphs
never depends on what this test process compiled before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import graph_lowering as gl
import lowering_zoo as zoo
import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import qcore
from qcore.metrics import sqnr
from qinductor_x86.lowering import floatweights, signed
from qinductor_x86.lowering.context import CompileContext

qd = torch.ops.quantized_decomposed
REBASED = "int8 activation re-based to uint8 (zero point + 128)"


def test_rebasing_int8_activations_to_uint8_changes_no_value() -> None:
    def signed_graph(x: torch.Tensor) -> torch.Tensor:
        q = qd.quantize_per_tensor.default(x, 0.05, -7, -128, 127, torch.int8)
        return torch.relu(qd.dequantize_per_tensor.default(q, 0.05, -7, -128, 127, torch.int8))

    x = torch.linspace(-9, 9, 997)  # past both ends of the int8 range, every code on the way
    gm = make_fx(signed_graph, tracing_mode="fake")(x)
    expected = gm(x)
    signed.to_unsigned(CompileContext(gm, qcore.host.parse_target("avx2"), {}))
    gm.recompile()
    dtypes = {n.args[5] for n in gm.graph.nodes if n.target in (qd.quantize_per_tensor.default, qd.dequantize_per_tensor.default)}
    assert dtypes == {torch.uint8}
    assert torch.equal(gm(x), expected)


def test_codes_read_through_views_and_by_other_ops_are_rebased_exactly() -> None:
    """quantize -> view -> permute -> dequantize (quant lift-up's shape), codes returned as
    they are (a reader that is no dequantize), and int8 codes that come from a graph input:
    every dequantize ends up uint8, every value as before."""

    def signed_graph(x: torch.Tensor, codes: torch.Tensor) -> tuple[torch.Tensor, ...]:
        q = qd.quantize_per_tensor.default(x, 0.05, 3, -128, 127, torch.int8)
        moved = q.view(2, 3, 4).permute(0, 2, 1)
        a = qd.dequantize_per_tensor.default(moved, 0.05, 3, -128, 127, torch.int8)
        b = qd.dequantize_per_tensor.default(q, 0.1, -5, -128, 127, torch.int8)  # other qparams
        c = qd.dequantize_per_tensor.default(codes, 0.02, 0, -128, 127, torch.int8)
        # moved * 2: an op on the int8 codes that does not commute with the + 128
        return a.softmax(-1), b, moved * 2, c

    x = torch.linspace(-9, 9, 24).reshape(6, 4)
    codes = torch.arange(-128, 128, dtype=torch.int8)
    gm = make_fx(signed_graph, tracing_mode="fake")(x, codes)
    expected = gm(x, codes)
    signed.to_unsigned(CompileContext(gm, qcore.host.parse_target("avx2"), {}))
    gm.recompile()
    dequantized = {n.args[5] for n in gm.graph.nodes if n.target is qd.dequantize_per_tensor.default}
    assert dequantized == {torch.uint8}
    # the view and the permute pass the re-based codes on: only their dtype changes
    moves = [n for n in gm.graph.nodes if n.target in (torch.ops.aten.view.default, torch.ops.aten.permute.default)]
    assert len(moves) == 2 and {n.meta["val"].dtype for n in moves} == {torch.uint8}
    # codes change dtype through int16 twice: back to int8 for the product, the input's to uint8
    widened = [n for n in gm.graph.nodes if n.target is torch.ops.prims.convert_element_type.default and n.args[1] is torch.int16]
    assert len(widened) == 2, gm.code
    for want, got in zip(expected, gm(x, codes), strict=True):
        assert want.dtype == got.dtype and torch.equal(want, got)


def test_a_weight_left_in_float_is_dequantized_at_compile_time() -> None:
    """A transposed conv's dequantized weight becomes a float constant with the same values
    (no dequantize of a weight is left for another pass to match)."""
    w = torch.randint(-127, 128, (4, 4, 3, 3), dtype=torch.int8)
    scales, zero_points = torch.rand(4) / 50 + 1e-3, torch.zeros(4, dtype=torch.int64)

    def graph(x: torch.Tensor, w: torch.Tensor, s: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        wf = qd.dequantize_per_channel.default(w, s, z, 1, -127, 127, torch.int8)
        return torch.nn.functional.conv_transpose2d(x, wf, padding=1)

    x = zoo.example(1, 4, 5, 5)
    gm = make_fx(graph)(x, w, scales, zero_points)
    expected = gm(x, w, scales, zero_points)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    constants = dict(zip(placeholders[1:], (w, scales, zero_points), strict=True))
    ctx = CompileContext(gm, qcore.host.parse_target("avx2"), constants)
    floatweights.fold(ctx)
    gm.recompile()
    assert not any(n.target is qd.dequantize_per_channel.default for n in gm.graph.nodes)
    assert ctx.lowered[floatweights.FOLDED] == 1
    assert "transposed convolution" in next(iter(ctx.declined.values()))
    assert torch.equal(gm(x, w, scales, zero_points), expected)


@pytest.mark.parametrize("weight", ["codes", "quantized in the graph"])
def test_a_per_tensor_int8_weight_is_no_activation_and_is_dequantized_at_compile_time(weight: str) -> None:
    """A linear on an int8 activation and a per-tensor int8 weight (XNNPACK's quantizer
    without per-channel weights: no int8 kernel takes it), given as int8 codes or as a
    float constant quantized in the graph (``convert_pt2e(fold_quantize=False)``): only
    the activation is re-based; the int8 codes become a float constant here, the weight
    quantized in the graph keeps its int8 quantize and dequantize (constants, which
    freezing folds); eager's values, exactly."""
    i8 = (-128, 127, torch.int8)
    codes = torch.randint(-127, 128, (8, 16), generator=torch.Generator().manual_seed(1), dtype=torch.int8)
    floats = codes.float() * 0.01

    def graph(x: torch.Tensor) -> torch.Tensor:
        w = codes if weight == "codes" else gl.q(floats, 0.01, 0, i8)
        return torch.nn.functional.linear(gl.dq(gl.q(x, 0.02, 3, i8), 0.02, 3, i8), gl.dq(w, 0.01, 0, i8))

    lowered = gl.lower(graph, [torch.randn(4, 16, generator=torch.Generator().manual_seed(3))])
    assert lowered.record.lowered[REBASED] == 1, lowered.record.lowered
    int8_codes = [n for n in lowered.calls(qd.dequantize_per_tensor.default) if n.args[5] is torch.int8]
    if weight == "codes":  # dequantized here; a quantize in the graph is freezing's to fold
        assert lowered.record.lowered[floatweights.FOLDED] == 1, lowered.record.lowered
        assert not int8_codes
    else:
        assert len(int8_codes) == 1 and int8_codes[0].args[0].target is qd.quantize_per_tensor.default
    assert torch.equal(lowered.output, lowered.eager)


# attention and functional convs, one compile each ----------------------------------------


@dataclass(frozen=True)
class Case:
    """A model, the target it is compiled for, and what its lowering must contain:
    ``lowered`` int8 convs/linears, ``in_float`` reasons for what stays in float."""

    make: Any
    inputs: Any
    target: str
    lowered: int
    in_float: tuple[str, ...] = ()
    attention: bool = False

    @property
    def narrow(self) -> bool:
        # a VNNI-targeted compile runs single-depth kernels: weights no CPU can saturate keep
        # it exact on this AVX2 host too; the AVX2 route doubles full-range ops' reduction
        return self.target != "avx2"


def _sequence() -> tuple[torch.Tensor]:
    return (zoo.example(2, 6, 32, seed=3),)


TWO_ACTIVATIONS = "stays in float: its right operand is not symmetric int8 (zero point 0)"
CASES = {
    "pool, cat and flatten (a CNN), avx2": Case(zoo.PoolCat, lambda: (zoo.example(2, 4, 16, 16),), "avx2", 4),
    "encoder layer (gelu), avx2": Case(zoo.EncoderLayer, _sequence, "avx2", 6, (TWO_ACTIVATIONS,), True),
    "encoder layer (relu), avx512_vnni": Case(
        lambda: zoo.EncoderLayer(activation="relu"), _sequence, "avx512_vnni", 6, (TWO_ACTIVATIONS,), True
    ),
    "attention, avx512_vnni": Case(zoo.Attention, _sequence, "avx512_vnni", 4, (TWO_ACTIVATIONS,), True),
    "functional convs, avx2": Case(
        zoo.FunctionalConvs,
        zoo.functional_conv_inputs,
        "avx2",
        # conv2d, conv1d and the 3-D conv, which the XNNPACK quantizer rewrites as a conv2d
        # over depth-stacked slices (qcore.pt2e.annotation.transforms.conv3d_as_conv2d); the
        # transposed conv stays in float
        3,
        ("a transposed convolution has no oneDNN int8 lowering here",),
    ),
}


def compile_case(case: Case) -> dict[str, Any]:
    """Quantize, compile with the lowering, and what the tests check, as JSON values."""
    torch.manual_seed(0)  # the zoo's nn.Linear layers are initialised at random
    model, inputs = case.make().eval(), case.inputs()
    converted = zoo.quantize(model, inputs, "xnnpack")
    signed_codes = any(
        n.args[5] is torch.int8 for n in converted.graph.nodes if n.target is qd.quantize_per_tensor.default
    )
    if case.narrow:
        zoo.narrow_weights(converted)
    with torch.no_grad():
        reference = zoo.as_tuple(model(*inputs))
    result = zoo.lower(converted, inputs, target=case.target)
    report = result.report
    outputs = list(zip(zoo.as_tuple(result.eager), reference, zoo.as_tuple(result.output), strict=True))
    return {
        "error": None,
        "signed_codes": signed_codes,
        "codes": result.codes_json(),
        "sqnr": [[sqnr(r, o), sqnr(r, e)] for e, r, o in outputs],
        "lowered": dict(report.lowered),
        "in_float": sorted({node.reason for node in report.left_in_float}),
        "lift_ups": report.lift_ups,
        "int8_kernels": len(result.kernels),
        "signed_in_code": any("torch.int8" in line for line in result.code.splitlines() if "quantize" in line),
    }


PROBED = (("standalone", "signed"), ("builtins", "signed"))


@pytest.fixture(scope="module")
def standalone(probes: Any) -> dict[str, Any]:
    """Every case compiled in the fresh interpreter with torch's own x86 passes switched off
    (what runs after this lowering then is only Inductor)."""
    return probes.result("standalone", "signed")  # type: ignore[no-any-return]


@pytest.mark.parametrize("name", list(CASES))
def test_signed_models_compute_their_eager_converted_codes(standalone: dict[str, Any], name: str) -> None:
    result = standalone[name]
    assert result["error"] is None, result["error"]
    assert result["signed_codes"]  # XNNPACK's quantizer made int8 activations
    zoo.assert_exact(result["codes"])
    for ours, eager in result["sqnr"]:
        assert ours >= eager - 0.1


@pytest.mark.parametrize("name", list(CASES))
def test_signed_models_lower_every_conv_and_linear_they_can(standalone: dict[str, Any], name: str) -> None:
    result, case = standalone[name], CASES[name]
    assert result["error"] is None, result["error"]
    lowered = result["lowered"]
    prepacked = sum(n for pattern, n in lowered.items() if "weight prepack" in pattern)
    doubled = sum(n for pattern, n in lowered.items() if "reduction doubled" in pattern)
    assert lowered[REBASED] > 0
    assert prepacked == case.lowered
    assert result["int8_kernels"] == prepacked  # a doubled op is still one kernel
    if case.target != "avx2":
        assert doubled == 0  # narrowed weights: nothing to double on any target
    assert not any("int8 codes" in reason for reason in result["in_float"])  # all rebased
    for reason in case.in_float:
        assert any(reason in r for r in result["in_float"]), (reason, result["in_float"])
    if case.attention:  # the quantizes after view / transpose were lifted above them, and
        assert result["lift_ups"] > 0  # each left a requantize of its own codes, dropped
        assert lowered["requantize with the same qparams dropped (the codes themselves)"] > 0
    # Inductor's dequantize lowering asserts its input dtype: an int8 activation left next
    # to a rebased one is what broke the encoder layer. Nothing signed is left to quantize.
    assert not result["signed_in_code"]


# torch's own x86 passes registered too ----------------------------------------------------

BUILTIN_CASES = ("encoder layer (gelu), avx2", "functional convs, avx2")


def test_torchs_builtin_passes_find_nothing_to_mis_lower(probes: Any) -> None:
    """With torch's copy of the x86 passes registered (torch's default, which registers it
    at the process's first compile) and run in freezing after this lowering, the signed
    graphs still compile to exactly the eager converted codes, with no kernel beyond this
    lowering's: nothing is left for it (torch 2.13's qconv prepack packs a transposed conv
    as a plain one, and would add a kernel)."""
    from qinductor_x86.lowering import torch_carries_x86_passes

    results = probes.result("builtins", "signed")
    # upstream's copy: torch's own on 2.13, torchao 0.18's where torch dropped it (2.14 on)
    upstream = "torch" if torch_carries_x86_passes() else "torchao"
    assert results["_other_passes"][f"{upstream} weight prepack and fusion"], results["_other_passes"]
    for name in BUILTIN_CASES:
        result = results[name]
        assert result["error"] is None, result["error"]
        zoo.assert_exact(result["codes"])
        assert result["int8_kernels"] == CASES[name].lowered, result


def compile_cases(names: list[str]) -> dict[str, Any]:
    """Each case compiled (see :func:`compile_case`); an error is reported as its result."""
    results: dict[str, Any] = {}
    for name in names:
        try:
            results[name] = compile_case(CASES[name])
        except Exception as error:  # noqa: BLE001 - reported to the test, which names it
            results[name] = {"error": f"{type(error).__name__}: {error}"[:3000]}
    return results
