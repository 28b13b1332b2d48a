"""Saturation safety: ops that can overflow oneDNN's 16-bit pair sums on a non-VNNI target
are lowered exactly as one kernel on a doubled reduction (a zero weight beside every weight,
each activation code fed twice); nothing changes on a VNNI target.

Which ops can overflow is computed here independently, by brute force over the extreme
activation codes of every input-channel pair (a pair sum is linear in each activation, so
its extremes are at the ends of the activation range).
"""

from __future__ import annotations

import re
from typing import Any

import lowering_zoo as zoo
import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

import qcore
from qcore.metrics import sqnr
from qinductor_x86.lowering import saturation
from qinductor_x86.lowering.context import CompileContext

INT16_MAX = 32767


def brute_force_worst_pair(weight: torch.Tensor, act_max: int) -> int:
    """max |a0*w0 + a1*w1| over a0, a1 in {0, act_max}, pairs (2j, 2j+1) of dim 1."""
    w = weight.to(torch.int64).reshape(weight.shape[0], weight.shape[1], -1)
    if w.shape[1] % 2:
        w = torch.nn.functional.pad(w, (0, 0, 0, 1))
    w0, w1 = w[:, 0::2], w[:, 1::2]
    sums = [a0 * w0 + a1 * w1 for a0 in (0, act_max) for a1 in (0, act_max)]
    return int(torch.stack(sums).abs().max())


def int8_weights(converted: torch.fx.GraphModule) -> list[torch.Tensor]:
    """The int8 weight of every per-channel dequantize in a converted model."""
    dequantize = torch.ops.quantized_decomposed.dequantize_per_channel.default
    return [
        converted.get_buffer(str(n.args[0].target))
        for n in converted.graph.nodes
        if n.target is dequantize
    ]


def test_doubled_reduction_computes_the_same_and_never_overflows() -> None:
    """Against the plain products in int64 / float64: linear and grouped conv."""
    generator = torch.Generator().manual_seed(0)
    weight = torch.randint(-128, 128, (32, 12, 3, 3), generator=generator, dtype=torch.int8)
    weight[0, :2, 0, 0] = 127  # a pair that overflows whatever the rest
    assert brute_force_worst_pair(weight, 255) > INT16_MAX
    doubled = saturation.doubled_weight(weight)
    assert doubled.dtype == torch.int8 and doubled.shape == (32, 24, 3, 3)
    assert brute_force_worst_pair(doubled, 255) <= INT16_MAX
    codes = torch.randint(0, 256, (2, 48, 7, 7), generator=generator, dtype=torch.uint8)
    expected = F.conv2d(codes.double(), weight.double(), groups=4)
    doubled_codes = codes.repeat_interleave(2, dim=1)
    assert torch.equal(F.conv2d(doubled_codes.double(), doubled.double(), groups=4), expected)

    matrix = weight[:, :, 0, 0].contiguous()
    rows = codes[:, :12, 0, 0].to(torch.int64)
    doubled_matrix = saturation.doubled_weight(matrix).to(torch.int64)
    assert torch.equal(
        rows.repeat_interleave(2, dim=-1) @ doubled_matrix.t(), rows @ matrix.to(torch.int64).t()
    )


def _with_doubled_codes(codes: torch.Tensor, dim: int, tracing_mode: str) -> tuple[torch.fx.GraphModule, list[torch.fx.Node]]:
    """A traced graph reading ``codes`` (a clone), returning ``doubled_codes`` along
    ``dim`` instead, asked for twice, as two doubled kernels reading the same codes ask."""
    gm = make_fx(lambda x: x.clone(), tracing_mode=tracing_mode)(codes)
    (placeholder,) = [n for n in gm.graph.nodes if n.op == "placeholder"]
    (output,) = [n for n in gm.graph.nodes if n.op == "output"]
    ctx = CompileContext(gm, qcore.host.parse_target("avx2"), {})
    with gm.graph.inserting_before(output):
        made = [saturation.doubled_codes(ctx, placeholder, dim) for _ in range(2)]
    output.args = (made[0],)
    gm.recompile()
    return gm, made


@pytest.mark.parametrize("dim", [0, 1, 2, 3])
def test_doubled_codes_are_each_code_twice_made_once_for_every_reader(dim: int) -> None:
    """``repeat_interleave(2, dim)`` exactly, built once however many kernels read it
    (one clone beside the graph's own), with the sizes of a static graph as numbers."""
    codes = torch.randint(0, 256, (2, 6, 5, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    gm, (first, again) = _with_doubled_codes(codes, dim, "fake")
    assert again is first
    assert sum(n.target is torch.ops.aten.clone.default for n in gm.graph.nodes) == 2
    assert not [n for n in gm.graph.nodes if n.target is torch.ops.aten.sym_size.int]
    assert torch.equal(gm(codes), codes.repeat_interleave(2, dim))


def test_doubled_codes_read_symbolic_sizes_in_the_graph() -> None:
    """Traced with symbolic sizes (a conv's spatial sizes under ``dynamic=True``), the
    doubled codes read them in the graph and are right for sizes other than the traced ones."""
    generator = torch.Generator().manual_seed(1)
    codes = torch.randint(0, 256, (2, 6, 5, 3), dtype=torch.uint8, generator=generator)
    gm, _ = _with_doubled_codes(codes, 1, "symbolic")
    assert [n for n in gm.graph.nodes if n.target is torch.ops.aten.sym_size.int]
    other = torch.randint(0, 256, (3, 6, 7, 4), dtype=torch.uint8, generator=generator)
    assert torch.equal(gm(other), other.repeat_interleave(2, 1))


TARGETS = ("avx2", "avx512_vnni")


@pytest.fixture(scope="module")
def full_range_stem() -> tuple[Any, torch.Tensor, dict[str, zoo.Lowered]]:
    """ConvStem as torchao's quantizer emits it (full-range weights), compiled once for each
    target; and the float model's output."""
    model, inputs = zoo.ConvStem(), (zoo.example(2, 3, 16, 16, seed=2),)
    with torch.no_grad():
        reference = model(*inputs)
    converted = zoo.quantize(model, inputs, "torchao")  # full-range weights
    return converted, reference, {t: zoo.lower(converted, inputs, target=t) for t in TARGETS}


@pytest.mark.parametrize("target", TARGETS)
def test_only_a_saturating_target_doubles_and_only_the_ops_that_can_overflow(
    full_range_stem: tuple[Any, torch.Tensor, dict[str, zoo.Lowered]], target: str
) -> None:
    """Convs (3 input channels, grouped, 1x1, an in-place residual sum) with torchao's
    full-range weights: one kernel per conv on both targets, exact on the saturating one.
    (Linear layers: test_lowering_fanout.py.)"""
    converted, _, lowered = full_range_stem
    weights = int8_weights(converted)
    unsafe = sum(brute_force_worst_pair(w, 255) > INT16_MAX for w in weights)
    assert unsafe > 0  # full-range int8 weights nearly always can; this model's do

    result = lowered[target]
    assert len(result.kernels) == len(weights)
    assert len(set(re.findall(r"\b_qinductor_x86_packed\d+\b", result.code))) == len(weights)
    if target == "avx2":
        assert result.count("reduction doubled") == unsafe
        # exact on any host: each int16 lane holds a single product
        zoo.assert_exact(result.codes)
    else:
        assert result.count("reduction doubled") == 0


@pytest.mark.parametrize("target", TARGETS)
def test_full_range_torchao_model_is_exact_and_keeps_its_accuracy(
    full_range_stem: tuple[Any, torch.Tensor, dict[str, zoo.Lowered]], target: str
) -> None:
    """(``test_lowering_patterns.test_full_range_models_keep_their_accuracy`` for torchao's
    quantizer.) As torchao emits it, the lowered model computes the eager converted one's
    codes, so it loses nothing against the float model: on the avx2 route on any CPU, and
    on the VNNI route on a CPU that does not saturate (a VNNI or AMX one, whose own route
    that is; elsewhere a skip that says so)."""
    _, reference, lowered = full_range_stem
    if target != "avx2":
        zoo.skip_on_a_saturating_cpu()
    result = lowered[target]
    assert result.kernels, target
    zoo.assert_exact(result.codes)
    assert sqnr(reference, result.output) >= sqnr(reference, result.eager) - 0.1, target


def test_never_overflow_weights_leave_nothing_to_double() -> None:
    """With ``weight_rule="never_overflow"`` the x86 quantizer quantizes for a CPU without
    VNNI with weights that no input can overflow, so the lowering keeps every op on its
    plain reduction and stays exact (the default rule is checked on real architectures in
    test_architecture_accuracy.py)."""
    model, inputs = zoo.ConvStem(), (zoo.example(2, 3, 16, 16, seed=2),)
    with qcore.host.targeting("avx2"):
        quantizer = qcore.get_quantizer("x86", weight_rule="never_overflow")
        converted = zoo.quantize(model, inputs, quantizer)
    weights = int8_weights(converted)
    assert weights and all(brute_force_worst_pair(w, 255) <= INT16_MAX for w in weights)
    # ... yet most channels keep more than the blanket 7-bit range
    assert sum(int(w.abs().amax()) > 64 for w in weights) > len(weights) // 2
    result = zoo.lower(converted, inputs, target="avx2")
    assert not any("reduction doubled" in name for name in result.report.lowered)
    assert len(result.kernels) == len(weights)
    zoo.assert_exact(result.codes)


def test_a_pair_sum_of_exactly_int16_max_fits_and_one_code_more_does_not() -> None:
    """The judge's boundary: 32767 is an int16, so a weight pair whose worst sum reaches
    exactly that on its activation range (here 151 x (127 + 90)) stays on the plain
    reduction; one weight code more (151 x 218) takes the doubled one."""
    avx2 = qcore.host.parse_target("avx2")
    exact = saturation.judge(torch.tensor([[127, 90]], dtype=torch.int8), 151, avx2)
    assert (exact.worst, exact.double) == (32767, False)
    over = saturation.judge(torch.tensor([[127, 91]], dtype=torch.int8), 151, avx2)
    assert (over.worst, over.double) == (32918, True)

