"""What weight prepack hands oneDNN's int8 kernels, what it refuses, and what it reports:
each on one traced graph lowered without Inductor (``graph_lowering``), against the same
graph run eagerly, and against the int16 pair sums computed here by brute force.
"""

from __future__ import annotations

import itertools

import graph_lowering as gl
import lowering_zoo as zoo
import pytest
import torch
import torch.nn.functional as F
from graph_lowering import Weight, dq, q

from qcore.testing.codes import compare_outputs

INT16_MAX = 32767


def _exact(lowered: gl.Lowered) -> None:
    diffs = compare_outputs(lowered.eager, lowered.output)
    assert diffs and all(d.exact for d in diffs), "; ".join(map(str, diffs))


def _rows(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_an_activation_whose_dequantize_claims_codes_past_255_stays_float_and_says_why() -> None:
    """uint8 codes dequantized with a range of ``[0, 256]``: no uint8 activation (a
    quantizer's bug, or codes that are no uint8 activation). The linear is not lowered, the
    report says why, and the output is eager's."""
    weight = Weight.make(1, 8, 16)

    def graph(codes: torch.Tensor) -> torch.Tensor:
        return weight.linear(dq(codes, 0.02, 128, (0, 256, torch.uint8)))

    codes = torch.randint(0, 256, (4, 16), dtype=torch.uint8, generator=torch.Generator().manual_seed(2))
    lowered = gl.lower(graph, [codes])
    assert not lowered.kernels
    assert any("its activation is not uint8" in node.reason for node in lowered.record.left_in_float)
    _exact(lowered)


def test_a_weight_range_wider_than_int8_cannot_reach_the_lowering() -> None:
    """Why weight prepack checks no weight range: torch's int8 per-channel dequantize
    refuses a range one code wider than int8's at either end, so no graph holds one."""
    weight = Weight.make(1, 8, 16)
    for qmin, qmax in ((-129, 127), (-128, 128)):
        with pytest.raises(AssertionError, match="out of bounds for dtype"):
            torch.ops.quantized_decomposed.dequantize_per_channel.default(
                weight.codes, weight.scales, weight.zero_points, 0, qmin, qmax, torch.int8
            )


@pytest.mark.parametrize("kind", ["conv", "linear"])
def test_kernels_take_the_weight_zero_points_as_int32(kind: str) -> None:
    """PT2E's weight zero points are int64; oneDNN's int8 kernels take int32 (torch's own
    Inductor lowering of these kernels converts them before the call): every kernel reads
    int32 zero points, and computes eager's codes."""
    weight = Weight.make(3, 8, 4, 3, 3) if kind == "conv" else Weight.make(3, 8, 16)

    def graph(x: torch.Tensor) -> torch.Tensor:
        x = dq(q(x, 0.02, 128), 0.02, 128)
        return weight.conv(x, padding=1) if kind == "conv" else weight.linear(x)

    lowered = gl.lower(graph, [_rows(4, 2, 4, 5, 5) if kind == "conv" else _rows(4, 6, 16)])
    (kernel,) = lowered.kernels
    w_zp = kernel.args[5]
    assert isinstance(w_zp, torch.fx.Node) and w_zp.meta["val"].dtype == torch.int32
    _exact(lowered)


def test_a_weight_multiplied_without_its_transpose_is_no_linears_weight() -> None:
    """``x @ w.permute(0, 1)`` on a square per-channel weight: the permute is the identity,
    so the channels the scales run along are the ones the product sums over, which no
    kernel's per-output-channel scales can express. Only ``w.t()`` (``permute(1, 0)``)
    makes a linear: this one stays float, code for code eager's."""
    weight = Weight.make(6, 16, 16)

    def graph(x: torch.Tensor) -> torch.Tensor:
        x = dq(q(x, 0.02, 128), 0.02, 128)
        return torch.addmm(weight.bias, x, weight.dequantized().permute(0, 1))

    lowered = gl.lower(graph, [_rows(5, 6, 16)])
    assert not lowered.kernels, [k.target for k in lowered.kernels]
    assert lowered.calls(torch.ops.aten.permute.default), "the trace lost the permute"
    _exact(lowered)


def _worst_pair_sum(codes: torch.Tensor, act_max: int = 255) -> int:
    """The largest ``|x0 w0 + x1 w1|`` over every pair of adjacent input channels of every
    row and every pair of uint8 inputs, enumerated (the sum is linear in each input, so
    its extremes are at 0 and ``act_max``)."""
    rows = codes.to(torch.int64).reshape(codes.shape[0], -1).tolist()
    return max(
        abs(x0 * row[i] + x1 * row[i + 1])
        for row in rows
        for i in range(0, len(row) - 1, 2)
        for x0, x1 in itertools.product((0, act_max), repeat=2)
    )


def test_the_report_names_each_doubled_layer_and_only_those() -> None:
    """Two linears for a CPU that adds u8 x s8 pairs in saturating int16 lanes (``avx2``):
    one with full-range weights, whose pairs can overflow (brute force), one with codes in
    [-64, 64], whose pairs cannot. The report has one doubled-reduction entry, for the
    first, with brute force's worst pair sum; and both compute eager's codes."""
    full = Weight.make(5, 16, 16, limit=127)
    narrow = Weight.make(6, 16, 16)
    worst_full, worst_narrow = _worst_pair_sum(full.codes), _worst_pair_sum(narrow.codes)
    assert worst_full > INT16_MAX >= worst_narrow

    def graph(x: torch.Tensor) -> torch.Tensor:
        y = q(F.relu(full.linear(dq(q(x, 0.02, 128), 0.02, 128))), 0.05, 0)
        return narrow.linear(dq(y, 0.05, 0))

    lowered = gl.lower(graph, [_rows(7, 6, 16)], target="avx2")
    assert len(lowered.kernels) == 2
    doubled = [name for name in lowered.record.lowered if "reduction doubled" in name]
    assert len(doubled) == 1 and lowered.record.lowered[doubled[0]] == 1, doubled
    assert f"worst pair sum {worst_full} > {INT16_MAX} on avx2" in doubled[0]
    _exact(lowered)


@pytest.mark.parametrize(("dims", "lowered_to_int8"), [(1, True), (2, True), (3, False)])
def test_1d_and_2d_convs_run_on_int8_kernels_and_a_3d_one_says_why_not(dims: int, lowered_to_int8: bool) -> None:
    """oneDNN's int8 conv here takes 3-D and 4-D activations (conv1d, conv2d); a conv3d
    stays in float with the reason named. Each computes eager's codes."""
    weight = Weight.make(5, 4, 3, *(3,) * dims)
    conv = (F.conv1d, F.conv2d, F.conv3d)[dims - 1]

    def graph(x: torch.Tensor) -> torch.Tensor:
        return conv(dq(q(x, 0.02, 128), 0.02, 128), weight.dequantized(), weight.bias, padding=1)

    lowered = gl.lower(graph, [_rows(6, 2, 3, *(5,) * dims)])
    assert len(lowered.kernels) == int(lowered_to_int8)
    reasons = [node.reason for node in lowered.record.left_in_float]
    assert any("3-D convolution has no lowering" in r for r in reasons) != lowered_to_int8, reasons
    _exact(lowered)


def test_a_prepack_gets_a_static_inputs_shape_and_no_shape_for_a_symbolic_one() -> None:
    """oneDNN's prepack may specialize on the activation's shape only where every size is
    known: a symbolic batch (``dynamic=True``) gives it none."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from qinductor_x86.lowering.prepack import static_shape

    assert static_shape(torch.empty(4, 8)) == [4, 8]
    traced = make_fx(lambda x: x + 1, tracing_mode="symbolic")(torch.empty(4, 8))
    (symbolic,) = [n.meta["val"] for n in traced.graph.nodes if n.op == "placeholder"]
    assert static_shape(symbolic) is None


@pytest.mark.parametrize("kind", ["conv", "linear"])
def test_a_doubled_kernels_prepack_specializes_on_the_doubled_codes_shape(
    monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """On the doubled reduction (``avx2``, full-range weights) the kernel reads codes with
    twice the reduced dim (a conv's channels, a linear's last dim): the shape oneDNN's
    prepack specializes the packed weight for is that one, the doubled codes' as the
    graph holds them, not the input's."""
    from qinductor_x86 import _torch_private as private

    hints: list[list[int] | None] = []
    name = "prepack_qconv" if kind == "conv" else "prepack_qlinear"
    real = getattr(private, name)

    def spy(*args: object) -> object:
        hints.append(args[-1])  # type: ignore[arg-type]
        return real(*args)

    monkeypatch.setattr(private, name, spy)
    weight = Weight.make(8, 8, 4, 3, 3, limit=127) if kind == "conv" else Weight.make(8, 8, 16, limit=127)

    def graph(x: torch.Tensor) -> torch.Tensor:
        x = dq(q(x, 0.02, 128), 0.02, 128)
        return weight.conv(x, padding=1) if kind == "conv" else weight.linear(x)

    lowered = gl.lower(graph, [_rows(9, 2, 4, 5, 5) if kind == "conv" else _rows(9, 3, 6, 16)], target="avx2")
    (kernel,) = lowered.kernels
    assert any("reduction doubled" in entry for entry in lowered.record.lowered), lowered.record.lowered
    codes = kernel.args[0].meta["val"]
    assert codes.shape[1 if kind == "conv" else -1] == 2 * (4 if kind == "conv" else 16)
    assert hints == [list(codes.shape)]
    _exact(lowered)


def test_an_activation_broadcast_over_rows_before_a_bmm_is_no_linears_input() -> None:
    """``bmm(x.expand(2, 5, 16), w.t().expand(2, 16, 8))`` with ``x`` of one row per batch:
    the weight is broadcast as a linear's is, but the activation's expand repeats its row,
    which a linear on ``x`` would not (it gives one row, not five). It stays float, code for
    code eager's."""
    weight = Weight.make(6, 8, 16)

    def graph(x: torch.Tensor) -> torch.Tensor:
        rows = dq(q(x, 0.02, 128), 0.02, 128).expand(2, 5, 16)
        return torch.bmm(rows, weight.dequantized().permute(1, 0).expand(2, 16, 8))

    lowered = gl.lower(graph, [_rows(10, 2, 1, 16)])
    assert not lowered.kernels, [k.target for k in lowered.kernels]
    _exact(lowered)


def test_a_convs_prepack_counts_the_nodes_torchs_pattern_matches() -> None:
    """One conv's weight prepack counts as torch's pass counts it after freezing, which
    clones the conv's weight first: four nodes (dequantize_per_tensor,
    dequantize_per_channel, the clone, convolution), the figure torchao's own fusion test
    asserts for one conv, though this lowering runs before the clone exists."""
    conv = Weight.make(2, 8, 3, 3, 3)

    def graph(x: torch.Tensor) -> torch.Tensor:
        return conv.conv(dq(q(x, 0.02, 128), 0.02, 128), padding=1)

    before = zoo.inductor_counters()
    lowered = gl.lower(graph, [_rows(11, 2, 3, 6, 6)])
    after = zoo.inductor_counters()
    counted = {k: after[k] - before.get(k, 0) for k in ("qconv_weight_prepack_matcher_count", "qconv_weight_prepack_matcher_nodes")}
    assert counted == {"qconv_weight_prepack_matcher_count": 1, "qconv_weight_prepack_matcher_nodes": 4}
    _exact(lowered)

