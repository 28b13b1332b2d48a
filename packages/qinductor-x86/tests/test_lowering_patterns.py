"""Each pattern family lowers and stays exact, against the eager converted model: the
compiled model's output codes are the eager one's (``qcore.testing.codes``). Where the
arithmetic is bf16 rather than int8 codes, the claim is weaker and says so.

Counters and kernels against torch 2.13's own passes, on every family, are in
test_lowering_counters.py (each side in a fresh interpreter). Models whose weights cannot saturate any CPU (``narrow_weights``)
keep every comparison exact on VNNI and non-VNNI hosts alike; full-range models are in
test_lowering_saturation.py.
"""

from __future__ import annotations

import re
from typing import Any

import lowering_zoo as zoo
import pytest
import torch
import torch.nn.functional as F

import qcore
from qcore.metrics import sqnr

#: bf16 keeps 8 significant bits: each rounding errs by at most 2^-9 of the value. The
#: eager int8 weight-only linear rounds twice (the matmul's output, then the product with
#: the scales), the kernel once (it scales its fp32 sum): at most 3 * 2^-9 apart, which is
#: 20 log10(2^9 / 3) = 44.6 dB.
BF16_DB = 44.0

#: Parts of the fresh interpreters of probe_modes.py that this module reads (conftest.py)
PROBED = (("standalone", "runtime_weight"), ("standalone", "counters"))

#: Graphs of the counter zoo (lowering_counters_probe.py) that compose several patterns,
#: compiled there by this lowering alone, weights narrowed.
COMPOSED = (
    "conv stem (zoo)",  # conv post-ops and a residual
    "pool, cat, flatten (zoo)",  # pools, cat and flatten on codes
    "linear, 3-D inputs",
    "linear + add (+ relu)",  # linear residuals
)


@pytest.mark.parametrize("graph", COMPOSED)
def test_compiled_is_exact_and_leaves_its_inputs_alone(probes: Any, graph: str) -> None:
    """Every int8 kernel in the generated code is one the report counts; the codes are the
    eager converted model's; the compiled model does not write into its inputs (torch's
    copy does, for linear + x)."""
    result = probes.result("standalone", "counters")[graph]
    assert result["kernels"] and result["reported_kernels"] == len(result["kernels"]), result
    zoo.assert_exact(result["codes"])
    assert result["inputs_unchanged"]


def test_full_range_models_keep_their_accuracy() -> None:
    """As quantizers emit them (full-range weights): on any CPU the lowered model matches
    the eager converted one, and loses nothing against the float model. (torchao's
    quantizer: test_lowering_saturation.py, which compiles its model on both routes.)"""
    model, inputs = zoo.ConvStem(), (zoo.example(2, 3, 16, 16, seed=1),)
    with torch.no_grad():
        reference = model(*inputs)
    result = zoo.lower(zoo.quantize(model, inputs, "x86"), inputs)
    assert result.kernels
    zoo.assert_exact(result.codes)
    assert sqnr(reference, result.output) >= sqnr(reference, result.eager) - 0.1


@pytest.mark.parametrize("case", ["mlp", "conv"])
def test_seven_bit_activations_fuse_their_quantize_exactly(case: str) -> None:
    """``reduce_range``: uint8 codes in [0, 127]. No pair can overflow with such inputs,
    and the output quantize still fuses (oneDNN clamps to [0, 255]; one more clamp on the
    codes makes it [0, 127]). torch's copy, registered next to ours here, must not take
    that clamp for a hardtanh (it did, and failed, when the clamp read like one)."""
    model, inputs = (zoo.MLP(), (zoo.example(8, 32),)) if case == "mlp" else (zoo.ConvStem(), (zoo.example(2, 3, 16, 16),))
    converted = zoo.quantize(model, inputs, qcore.get_quantizer("x86", reduce_range=True))
    result = zoo.lower(converted, inputs)
    layers = 3 if case == "mlp" else 5
    assert len(result.kernels) == layers  # no split: safe on every CPU
    assert result.count("quantize (int8 output)") >= 2
    zoo.assert_exact(result.codes)


def test_int8_mixed_bf16_keeps_the_eager_models_accuracy_within_1_db() -> None:
    """Under autocast the dequantized values are bf16, and eager and the kernel round them
    each their own way before every quantize: codes move by a step here and there, and
    the moves compound over layers, so the codes are not compared. The claim is accuracy
    against the float model (fp32): within 1 dB of the eager converted model's under the
    same autocast. bf16 keeps 8 significant bits, so its rounding before a quantize is
    at most half a step on the largest values and far less on the rest, where int8's own
    rounding is up to half a step on every value: the noise it adds costs under 1 dB."""
    torch.manual_seed(0)
    model, inputs = zoo.Linear3D().eval(), (zoo.example(4, 6, 16),)
    with torch.no_grad():
        reference = model(*inputs)
    converted = zoo.narrow_weights(zoo.quantize(model, inputs, "x86"))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        result = zoo.lower(converted, inputs)
    assert result.count("prepack (int8-mixed-bf16)") == 3 and len(result.kernels) == 3
    assert result.output.dtype == torch.bfloat16
    assert sqnr(reference, result.output) >= sqnr(reference, result.eager) - 1.0


@pytest.mark.parametrize("shape", [(4, 32), (3, 4, 32)], ids=["2-D", "3-D"])
def test_int8_weight_only_linear(shape: tuple[int, ...]) -> None:
    """One weight-only kernel, within :data:`BF16_DB` of the eager model (bf16 arithmetic,
    no codes to compare)."""
    model, inputs = zoo.WeightOnlyLinear().eval(), (zoo.example(*shape).to(torch.bfloat16),)
    result = zoo.lower(model, inputs)
    assert len(re.findall(r"= \S*_weight_int8pack_mm\(", result.code)) == 1
    assert result.counters["woq_matcher_count"] == 1
    assert sqnr(result.eager, result.output) >= BF16_DB


def test_attention_quantizes_before_its_views() -> None:
    """Quant lift-up: the q/k/v projections end in a uint8 quantize, not in float views."""
    from qinductor_x86.quantizer.x86_inductor_quantizer import (
        get_default_x86_inductor_quantization_config,
    )

    model, inputs = zoo.Attention(), (zoo.example(2, 8, 32),)
    quantizer = qcore.get_quantizer("x86")
    quantizer.set_function_type_qconfig(torch.matmul, get_default_x86_inductor_quantization_config())
    result = zoo.lower(zoo.narrow_weights(zoo.quantize(model, inputs, quantizer)), inputs)
    assert result.counters["quant_lift_up_count"] >= 3
    assert result.report.lowered["linear + quantize (int8 output)"] >= 3
    assert len(result.kernels) == 4
    # torchao's asymmetric operands: the two activation x activation matmuls stay float,
    # and the report says why and what runs them in int8
    left = result.report.left_in_float
    assert len([n for n in left if "matmul_int8" in n.reason]) == 4
    assert not result.count("matmul of two int8 activations")
    zoo.assert_exact(result.codes)


class ActivationProduct(torch.nn.Module):
    """``a @ b^T`` of two activations, per head: what attention's scores are."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b.transpose(-2, -1))


class Probabilities(torch.nn.Module):
    """A product of two softmaxes: both operands non-negative."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a.softmax(-1), b.softmax(-1).transpose(-2, -1))


class Weighted(torch.nn.Module):
    """An activation times a parameter, one per head (a batched matmul no linear pattern
    takes): one operand is a constant."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 32, 8, generator=torch.Generator().manual_seed(1)))

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, self.w)


class Attended(torch.nn.Module):
    """Probabilities times values: a softmax's output on the left, the right symmetric."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a.softmax(-1), b.transpose(-2, -1))


class Products(torch.nn.Module):
    """The product of two activations, ``int8`` quantized by ``matmul_int8`` and ``kept``
    scoped out (float); ``attended``, whose left zero point :func:`_shift_left` moves off
    0; and two products the int8 matmul must not take: ``probabilities`` (torchao's
    ``matmul`` spec: uint8 with zero point 0 on both sides) and ``weighted``."""

    def __init__(self) -> None:
        super().__init__()
        self.int8, self.kept = ActivationProduct(), ActivationProduct()
        self.attended, self.probabilities, self.weighted = Attended(), Probabilities(), Weighted()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        modules = (self.int8, self.kept, self.attended, self.probabilities, self.weighted)
        return tuple(m(a, b) for m in modules)


#: ``_shift_left``'s shift of ``attended``'s probabilities, and their zero point after it.
SHIFT, SHIFTED_ZERO_POINT = 0.03, 64


def _shift_left(converted: Any) -> Any:
    """``attended``'s left operand shifted by ``-SHIFT`` before its quantize (and, with
    static qparams, its zero point set to ``SHIFTED_ZERO_POINT``): a left zero point no
    annotation gives (a softmax's is 0), which the lowering must take all the same."""
    graph = converted.graph
    softmax = next(
        n for n in graph.nodes if "softmax" in str(n.target) and "attended" in str(n.meta.get("nn_module_stack"))
    )
    quantizes = [n for n in softmax.users if "quantize" in str(n.target) or "choose_qparams" in str(n.target)]
    assert quantizes, "no quantize of attended's probabilities"
    for node in quantizes:
        with graph.inserting_before(node):
            shifted = graph.call_function(torch.ops.aten.sub.Tensor, (node.args[0], SHIFT))
        node.replace_input_with(node.args[0], shifted)
        if node.target is torch.ops.quantized_decomposed.quantize_per_tensor.default:
            for reader in (node, *node.users):
                reader.args = (*reader.args[:2], SHIFTED_ZERO_POINT, *reader.args[3:])
    converted.recompile()
    return converted


def _int8_reference(left: torch.Tensor, right: torch.Tensor, scale: float) -> torch.Tensor:
    """The integer product of two operands' codes (zero points taken off), times
    ``scale`` rounded once to fp32."""
    exact = torch.matmul(left.long(), right.long().transpose(-2, -1)).float()
    return exact * torch.tensor(scale, dtype=torch.float32)


def test_int8_matmul_of_two_activations_is_the_exact_integer_product() -> None:
    """``matmul_int8``'s operands on a VNNI target: the compiled product is the integer
    product of the codes (torch's own quantize) times the two scales, to the bit, one
    ``_int_mm`` per matrix; also with a left zero point of 64 (``attended``); the same
    product scoped out of quantization stays float. Codes near 127 on both sides, which
    oneDNN's kernels without VNNI saturate: on such a CPU that route is off by far
    (checked there instead), which is why the avx2 route keeps these matmuls in float (the
    attention test below)."""
    from qinductor_x86.quantizer.x86_inductor_quantizer import (
        get_default_x86_inductor_quantization_config,
    )

    gen = torch.Generator().manual_seed(0)
    a, b = (0.5 + 0.5 * torch.rand(2, 4, 16, 32, generator=gen) for _ in range(2))
    quantizer = qcore.get_quantizer("x86").enable("matmul_int8").set_module_name_qconfig("kept", None)
    quantizer.set_module_name_qconfig("probabilities", get_default_x86_inductor_quantization_config())
    with qcore.host.targeting("avx512_vnni"):  # (for avx2 the row quantizes nothing)
        converted = _shift_left(zoo.quantize(Products(), (a, b), quantizer))
    result = zoo.lower(converted, (a, b), target="avx512_vnni")
    int8, _, attended = result.output[:3]
    # the rest run in float, as their eager models do
    for compiled, eager in zip(result.output[3:], result.eager[3:], strict=True):
        assert torch.allclose(compiled, eager, rtol=1e-5, atol=1e-6)
    assert torch.allclose(result.output[1], result.eager[1], rtol=1e-5, atol=1e-6)
    # probabilities' two operands: torchao's spec; the weight is no activation's codes
    assert len([n for n in result.report.left_in_float if "not symmetric int8" in n.reason]) == 2

    quantize = torch.ops.quantized_decomposed.quantize_per_tensor.default
    # b's quantize reads its transpose (quantizing commutes with it)
    qparams = {
        _placeholder(n.args[0]): n.args[1:]
        for n in converted.graph.nodes
        if n.target is quantize and n.args[5] is torch.int8 and _placeholder(n.args[0], through_softmax=False)
    }
    codes = [quantize(x, *qparams[name]) for x, name in zip((a, b), ("a", "b"), strict=True)]
    assert all(c.dtype is torch.int8 and c.max() == 127 for c in codes)
    exact = _int8_reference(codes[0], codes[1], qparams["a"][0] * qparams["b"][0])
    p_scale = next(float(n.args[1]) for n in converted.graph.nodes if n.target is quantize and n.args[2] == SHIFTED_ZERO_POINT)
    p_codes = quantize(a.softmax(-1) - SHIFT, p_scale, SHIFTED_ZERO_POINT, 0, 255, torch.uint8)
    assert 0 < p_codes.min() < SHIFTED_ZERO_POINT < p_codes.max() < 255  # (none clamped)
    shifted = _int8_reference(p_codes.long() - SHIFTED_ZERO_POINT, codes[1], p_scale * qparams["b"][0])
    calls = [line for line in result.code.splitlines() if "_int_mm(" in line and not zoo.SIZE_CHECK.search(line)]
    lowered = {name: n for name, n in result.report.lowered.items() if "matmul" in name}
    corrected = "matmul of two int8 activations, plus 128 - z times the right operand's column sums"
    assert len(calls) == 2 * 2 * 4 and lowered == {"matmul of two int8 activations": 1, corrected: 1}
    if qcore.host.probe().saturates_u8s8:
        assert not torch.allclose(int8, exact, rtol=1e-2)
    else:
        assert torch.equal(int8, exact) and torch.equal(attended, shifted)


def test_dynamic_int8_matmuls_are_the_exact_integer_products_of_run_time_codes() -> None:
    """Dynamic ``matmul_int8`` on a VNNI target: the qparams computed at run time, each
    product is the integer product of the codes of torch's own dynamic quantize (its
    ``choose_qparams``) times the two scales, to the bit; also with a left zero point
    computed at run time (``attended`` shifted: 30); torchao's asymmetric spec stays
    float, and the report says why. On a saturating CPU the first product must be off by
    far instead (see the static test above)."""
    from qinductor_x86.quantizer.config import EPS as eps
    from qinductor_x86.quantizer.x86_inductor_quantizer import (
        X86InductorQuantizer,
        get_default_x86_inductor_quantization_config,
    )

    gen = torch.Generator().manual_seed(0)
    a, b = (0.5 + 0.5 * torch.rand(2, 4, 16, 32, generator=gen) for _ in range(2))
    quantizer = X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config(is_dynamic=True))
    quantizer.enable("matmul_int8").set_module_name_qconfig("kept", None).set_module_name_qconfig("weighted", None)
    quantizer.set_module_name_qconfig("probabilities", get_default_x86_inductor_quantization_config(is_dynamic=True))
    with qcore.host.targeting("avx512_vnni"):
        converted = _shift_left(zoo.quantize(Products(), (a, b), quantizer))
    result = zoo.lower(converted, (a, b), target="avx512_vnni")
    # probabilities' two operands (torchao's spec)
    assert len([n for n in result.report.left_in_float if "not symmetric int8" in n.reason]) == 2

    qd = torch.ops.quantized_decomposed

    def codes(x: torch.Tensor, symmetric: bool) -> tuple[torch.Tensor, float]:
        if symmetric:
            scale, zero_point = qd.choose_qparams_symmetric.tensor(x, -127, 127, eps, torch.int8)
            return qd.quantize_per_tensor.tensor(x, scale, zero_point, -127, 127, torch.int8), float(scale)
        scale, zero_point = qd.choose_qparams.tensor(x, 0, 255, eps, torch.uint8)
        assert zero_point.item() not in (0, 128)  # (the shift's point: no special case)
        quantized = qd.quantize_per_tensor.tensor(x, scale, zero_point, 0, 255, torch.uint8)
        return quantized.long() - zero_point, float(scale)

    (qa, sa), (qb, sb) = codes(a, True), codes(b.transpose(-2, -1), True)
    # (shifted values on both sides of 0: where the range holds 0 already, Inductor's own
    # decomposition of choose_qparams, which leaves 0 out, chooses the eager op's qparams)
    shifted = a.softmax(-1) - SHIFT
    assert shifted.min() < 0 < shifted.max()
    qp, sp = codes(shifted, False)
    qb = qb.transpose(-2, -1)
    exact = _int8_reference(qa, qb, sa * sb), _int8_reference(qp, qb, sp * sb)
    calls = [line for line in result.code.splitlines() if "_int_mm(" in line and not zoo.SIZE_CHECK.search(line)]
    assert len(calls) == 2 * 2 * 4 and result.count("matmul of two int8 activations") == 2
    assert result.count("column sums") == 1  # (attended's)
    if qcore.host.probe().saturates_u8s8:  # (codes near 127 on both sides: saturated)
        assert not torch.allclose(result.output[0], exact[0], rtol=1e-2)
    else:
        assert torch.equal(result.output[0], exact[0]) and torch.equal(result.output[2], exact[1])


def test_a_symbolic_batch_keeps_attentions_int8_operands_in_float_and_says_why() -> None:
    """Exported with a dynamic batch and compiled with ``dynamic=True``: one ``_int_mm``
    per matrix needs a fixed count, so the matmul stays float (the eager model's
    computation), and the report says why."""
    from torch._inductor.utils import run_and_get_code
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    a, b = zoo.example(3, 4, 8, 16), zoo.example(3, 4, 8, 16, seed=1)
    batch = torch.export.Dim("batch")
    with qcore.host.targeting("avx512_vnni"):  # (the row quantizes nothing for avx2)
        exported = torch.export.export(ActivationProduct(), (a, b), dynamic_shapes=({0: batch}, {0: batch}))
        prepared = prepare_pt2e(exported.module(), qcore.get_quantizer("x86").enable("matmul_int8"))
        prepared(a, b)
        converted = convert_pt2e(prepared)
    inputs = (zoo.example(2, 4, 8, 16, seed=2), zoo.example(2, 4, 8, 16, seed=3))
    lowering = qcore.get_lowering("x86")
    with zoo.fresh_compile(), qcore.host.targeting("avx512_vnni"), lowering, torch.no_grad():
        output, code = run_and_get_code(torch.compile(converted, dynamic=True), *inputs)
        eager = converted(*inputs)
    assert "_int_mm(" not in "\n".join(code)
    assert [n for n in lowering.report().left_in_float if "batch size is symbolic" in n.reason]
    assert torch.allclose(output, eager, rtol=1e-5, atol=1e-6)


def _placeholder(node: Any, through_softmax: bool = True) -> str:
    """The graph input ``node`` computes (through its first arguments), or "" where the
    way passes a softmax and ``through_softmax`` is off."""
    while node.op != "placeholder":
        if not through_softmax and "softmax" in str(node.target):
            return ""
        node = node.args[0]
    return str(node.name)


class SdpaAttention(zoo.Attention):
    """``zoo.Attention`` written as Hugging Face writes it: ``F.scaled_dot_product_attention``
    with an additive padding mask."""

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        b, t, c = x.shape

        def split(y: torch.Tensor) -> torch.Tensor:
            return y.view(b, t, self.heads, c // self.heads).transpose(1, 2)

        y = F.scaled_dot_product_attention(split(self.q(x)), split(self.k(x)), split(self.v(x)), attn_mask=mask)
        return self.out(y.transpose(1, 2).reshape(b, t, c))  # type: ignore[no-any-return]


@pytest.mark.parametrize("target", ["avx2", "avx512_vnni"])
def test_attention_runs_its_matmuls_in_int8_and_stays_exact(target: str) -> None:
    """``enable("matmul_int8")`` on Hugging Face's spelling of attention: the quantizer
    spells the scaled-dot-product attention out, both of its matmuls become int8 matmuls
    (2 x 4 heads each), and the output is the eager converted model's in codes. The
    products are exact and scaled once where eager sums fp32 products: the codes after them
    may differ by one where eager's value lies within fp32 rounding of a step, which
    ``assert_exact`` bounds. The probabilities are uint8 codes (zero point 0), corrected by
    the value codes' column sums. Compiled for the avx2 route (the model quantized for a
    VNNI target), both matmuls stay float, and the report says why."""
    if target == "avx512_vnni":
        zoo.skip_on_a_saturating_cpu()
    mask = torch.zeros(2, 1, 1, 8)
    mask[1, ..., 6:] = -1e4  # the second sequence's last two tokens are padding
    model, inputs = SdpaAttention(), (zoo.example(2, 8, 32), mask)
    with qcore.host.targeting("avx512_vnni"):  # (for avx2 the row quantizes nothing)
        converted = zoo.quantize(model, inputs, qcore.get_quantizer("x86").enable("matmul_int8"))
    result = zoo.lower(zoo.narrow_weights(converted), inputs, target=target)
    calls = [line for line in result.code.splitlines() if "_int_mm(" in line and not zoo.SIZE_CHECK.search(line)]
    in_float = [n for n in result.report.left_in_float if "bmm" in n.reason]
    int8 = target == "avx512_vnni"
    assert result.count("matmul of two int8 activations") == (2 if int8 else 0)
    assert len(calls) == (2 * 2 * 4 if int8 else 0)
    assert result.report.int8_kernels == len(result.kernels) + len(calls)
    assert (not in_float) if int8 else (in_float and all("saturating 16-bit lanes" in n.reason for n in in_float))
    zoo.assert_exact(result.codes)


def test_dynamic_quantization_uses_run_time_qparams() -> None:
    model, inputs = zoo.MLP(), (zoo.example(8, 32),)
    converted = zoo.narrow_weights(zoo.quantize(model, inputs, qcore.get_quantizer("x86", is_dynamic=True)))
    result = zoo.lower(converted, inputs)
    assert result.kernels.count("qlinear_pointwise") == 3
    assert "qlinear_pointwise.tensor(" in result.code
    zoo.assert_exact(result.codes)


def test_a_quantized_model_with_nothing_lowered_warns_and_says_why() -> None:
    import torch._inductor.config as inductor_config

    from qinductor_x86.lowering.custom_passes import NoInt8KernelsWarning

    model, inputs = zoo.MLP(), (zoo.example(4, 32),)
    converted = zoo.quantize(model, inputs, "x86")
    lowering = qcore.get_lowering("x86")
    with (
        zoo.fresh_compile(),
        inductor_config.patch(freezing=False),
        lowering,
        pytest.warns(NoInt8KernelsWarning, match="freez"),
    ):
        _, code = zoo.compile_and_run(converted, inputs)
    assert not zoo.int8_kernel_calls(code)
    left = lowering.report().left_in_float
    assert left and all("freez" in node.reason for node in left)


def test_conv_residual_adds_run_in_place_and_exactly() -> None:
    """Two residual adds, each one ``qconv2d_pointwise.binary`` with oneDNN's in-place "sum"
    in Inductor's generated code: add + relu + quantize into the other branch's fresh
    uint8 codes (a uint8 output), and a float-output add into the dequantized residual.
    Exact in codes (``qcore.testing.codes``). Both adds are this lowering's: torch's copy,
    registered in this process too, would fuse the float-output one if it declined."""
    model, inputs = zoo.ConvBranches(), (zoo.example(2, 3, 8, 8),)
    converted = zoo.narrow_weights(zoo.quantize(model, inputs, "x86"))
    result = zoo.lower(converted, inputs)
    binary = [line for line in result.code.splitlines()
              if "onednn.qconv2d_pointwise.binary" in line and not zoo.SIZE_CHECK.search(line)]
    assert len(binary) == 2 and all("'sum'" in line for line in binary), binary
    assert sorted("torch.uint8" in line for line in binary) == [False, True], binary
    assert sorted(result.kernels) == ["qconv2d_pointwise"] * 2 + ["qconv_pointwise"] * 3
    lowered = result.report.lowered
    assert lowered["conv + add + relu + quantize (int8 output)"] == lowered["conv + add (float output)"] == 1
    zoo.assert_exact(result.codes)


def test_a_weight_that_is_no_frozen_constant_stays_float_and_says_why(probes: Any) -> None:
    """int8 weight codes that arrive as an input: freezing makes no constant of them, so
    the linear stays float and the report says so; the compile runs as eager does. (This
    lowering alone, in a fresh interpreter: torch's copy, registered in this one, would
    prepack such a weight at run time and fail.)"""
    measured = probes.result("standalone", "runtime_weight")
    assert measured["kernels"] == []
    assert any("its weight is not a frozen constant" in reason for reason in measured["reasons"])
    zoo.assert_exact(measured["codes"])


def test_a_dynamic_batch_compiles_on_the_doubled_route_exactly() -> None:
    """Exported with a dynamic batch and compiled with ``dynamic=True`` for the avx2
    route: the input's shape is unknown when the weight is prepacked (oneDNN takes no
    shape hint then), and each linear whose pairs can overflow still runs on its doubled
    reduction, one kernel each, exact against the eager converted model on a batch of
    another size than the export's."""
    from torch._inductor.utils import run_and_get_code
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)).eval()
    with torch.no_grad():  # two full-scale input channels: their u8 x s8 pair sums overflow
        model[0].weight.mul_(0.1)
        model[0].weight[:, :2] = 1.0
    batch = torch.export.Dim("batch")
    with qcore.host.targeting("avx2"):
        exported = torch.export.export(model, (zoo.example(6, 64),), dynamic_shapes=({0: batch},))
        prepared = prepare_pt2e(exported.module(), qcore.get_quantizer("x86", weight_rule="per_layer"))
        for seed in range(1, 4):
            prepared(zoo.example(6, 64, seed=seed))
        converted = convert_pt2e(prepared)
        inputs = (zoo.example(5, 64, seed=9),)
        eager = zoo.eager_reference(converted, inputs)
        lowering = qcore.get_lowering("x86")
        with zoo.fresh_compile(), lowering, torch.no_grad():
            output, code = run_and_get_code(torch.compile(converted, dynamic=True), *inputs)
    result = zoo.Lowered(eager.output, output, "\n".join(code), lowering.report(), {}, eager.tie_variants)
    assert re.search(r"\bs\d+\b", result.code), "the batch was specialized: nothing dynamic compiled"
    assert result.count("reduction doubled") == 2
    assert len(result.kernels) == result.report.int8_kernels == 2
    zoo.assert_exact(result.codes)


def test_dynamic_spatial_sizes_stay_symbolic_on_the_doubled_route_and_exact() -> None:
    """A conv net exported with dynamic height and width, compiled once with
    ``dynamic=True`` for the avx2 route: the doubled codes' view reads the spatial sizes
    in the graph, so the conv's input stays symbolic and a second size runs the same
    compiled code (no recompile); both sizes exact against the eager converted model."""
    from torch._dynamo.utils import counters
    from torch._inductor.utils import run_and_get_code
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    model = torch.nn.Sequential(torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 1))
    with torch.no_grad():  # two full-scale input channels: their u8 x s8 pair sums overflow
        model[0].weight.mul_(0.1)
        model[0].weight[:, :2] = 1.0
    height, width = torch.export.Dim("height", min=4, max=64), torch.export.Dim("width", min=4, max=64)
    with qcore.host.targeting("avx2"):
        exported = torch.export.export(
            model.eval(), (zoo.example(2, 8, 12, 12),), dynamic_shapes=({2: height, 3: width},)
        )
        prepared = prepare_pt2e(exported.module(), qcore.get_quantizer("x86", weight_rule="per_layer"))
        for seed in range(1, 4):
            prepared(zoo.example(2, 8, 12, 12, seed=seed))
        converted = convert_pt2e(prepared)
        sizes = [(zoo.example(2, 8, 10, 14, seed=9),), (zoo.example(2, 8, 16, 9, seed=5),)]
        eager = [zoo.eager_reference(converted, inputs) for inputs in sizes]
        lowering = qcore.get_lowering("x86")
        with zoo.fresh_compile(), lowering, torch.no_grad():
            compiled = torch.compile(converted, dynamic=True)
            output, code = run_and_get_code(compiled, *sizes[0])
            graphs = counters["stats"]["unique_graphs"]
            second = compiled(*sizes[1])
            recompiled = counters["stats"]["unique_graphs"] - graphs
    result = zoo.Lowered(eager[0].output, output, "\n".join(code), lowering.report(), {}, eager[0].tie_variants)
    assert result.count("reduction doubled") >= 1
    # each conv reads its doubled codes as a view of symbolic height and width
    views = re.findall(r"qconv_pointwise\.\w+\(reinterpret_tensor\(\w+, \(([^)]*)\)", result.code)
    assert views and all(re.search(r"\bs\d+\b", view) for view in views), views
    assert recompiled == 0
    zoo.assert_exact(result.codes)
    again = zoo.Lowered(eager[1].output, second, result.code, result.report, {}, eager[1].tie_variants)
    zoo.assert_exact(again.codes)
