"""When post-op fusion may write into a residual's buffer, which residuals of another dtype
it fuses, and the clamp a narrow output range adds: each on one traced graph lowered
without Inductor (``graph_lowering``), against the same graph run eagerly.

oneDNN's int8 conv adds a residual in place (its "sum" post-op): with an int8 output it
sums into the residual's int8 codes, so it may only when nothing reads those codes after
the add and they are a buffer the graph made for that (a quantize's or a kernel's output),
not the caller's. Anything else must keep its codes: an output that reads them later and
the caller's own input tensor come out as eager computes them.
"""

from __future__ import annotations

from collections.abc import Callable

import graph_lowering as gl
import lowering_zoo as zoo
import pytest
import torch
import torch.nn.functional as F
from graph_lowering import Weight, dq, q

from qcore.metrics import sqnr
from qcore.testing.codes import compare_outputs
from qinductor_x86.lowering import ops
from qinductor_x86.lowering.kernels import QLinear

#: bf16 keeps 8 significant bits: each rounding errs by at most 2^-9 of the value. Eager
#: rounds the dequantized operands and the linear's output to bf16, the kernel computes on
#: the integer codes and rounds once: a few 2^-9 apart, 20 log10(2^9 / 3) = 44.6 dB.
BF16_DB = 44.0

CONV_IN = Weight.make(1, 8, 3, 3, 3)
CONV = Weight.make(2, 8, 8, 3, 3)
RESIDUAL = Weight.make(3, 8, 8, 1, 1)
LATER = Weight.make(4, 8, 8, 1, 1)
LINEAR = Weight.make(5, 16, 16)


def _exact(lowered: gl.Lowered) -> None:
    diffs = compare_outputs(lowered.eager, lowered.output)
    assert diffs and all(d.exact for d in diffs), "; ".join(map(str, diffs))


def _image(seed: int, channels: int = 3) -> torch.Tensor:
    return torch.randn(2, channels, 6, 6, generator=torch.Generator().manual_seed(seed))


def test_a_residual_whose_codes_are_read_after_the_add_keeps_them() -> None:
    """A conv's int8 output is the residual of another conv's add (+ relu + quantize) and
    is also read by a third conv after the add: the add must not sum into those codes
    (the third conv would read the sum), so both outputs are eager's, code for code."""

    def graph(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = q(F.relu(CONV_IN.conv(dq(q(x, 0.02, 128), 0.02, 128), padding=1)), 0.01, 0)
        a = CONV.conv(dq(y, 0.01, 0), padding=1)
        residual = q(RESIDUAL.conv(dq(y, 0.01, 0)), 0.01, 128)  # fresh int8 codes
        z = q(F.relu(a + dq(residual, 0.01, 128)), 0.02, 0)
        later = LATER.conv(dq(residual, 0.01, 128))  # reads them after the add
        return dq(z, 0.02, 0), later

    lowered = gl.lower(graph, [_image(0)])
    assert len(lowered.kernels) == 4
    _exact(lowered)


def test_a_residual_from_the_callers_codes_is_never_written() -> None:
    """The residual is the caller's own uint8 tensor (a graph input, channels-last as a
    conv's codes are, so a kernel could sum into it as it is): no buffer of the graph's,
    so the add must not. The input is as it was after the call, and the output is eager's,
    code for code."""

    def graph(x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        a = CONV.conv(dq(q(x, 0.02, 128), 0.02, 128), padding=1)
        return dq(q(F.relu(a + dq(residual, 0.01, 128)), 0.02, 0), 0.02, 0)

    generator = torch.Generator().manual_seed(1)
    residual = torch.randint(0, 256, (2, 8, 6, 6), dtype=torch.uint8, generator=generator)
    residual = residual.contiguous(memory_format=torch.channels_last)
    given = residual.clone()
    lowered = gl.lower(graph, [_image(2, 8), residual])
    assert torch.equal(residual, given)
    assert len(lowered.kernels) == 1
    _exact(lowered)


@pytest.mark.parametrize("cast_back", [False, True], ids=["float32 sum", "cast back to bf16"])
def test_a_bf16_kernel_adds_a_float32_residual_inside_the_kernel(cast_back: bool) -> None:
    """int8-mixed-bf16: a linear computed in bf16, plus a float32 residual (a dequantized
    activation), the sum in float32 or cast back to bf16 (an in-place ``y += residual`` on
    the bf16 output): the add, and the cast back, fuse into the kernel, whose output is the
    graph's (nothing is left after it), within :data:`BF16_DB` of eager (bf16 arithmetic,
    no codes to compare)."""
    bias = LINEAR.bias.to(torch.bfloat16)

    def graph(x: torch.Tensor) -> torch.Tensor:
        codes = q(x, 0.02, 128)
        weight = LINEAR.dequantized().to(torch.bfloat16)
        y = F.linear(dq(codes, 0.02, 128).to(torch.bfloat16), weight, bias)
        total = y + dq(codes, 0.02, 128)
        return total.to(torch.bfloat16) if cast_back else total

    lowered = gl.lower(graph, [torch.randn(4, 16, generator=torch.Generator().manual_seed(3))])
    (kernel,) = lowered.kernels
    assert kernel.target is ops.QLINEAR_BINARY
    assert lowered.gm.graph.output_node().args[0] is kernel
    assert lowered.output.dtype == lowered.eager.dtype
    assert sqnr(lowered.eager.float(), lowered.output.float()) >= BF16_DB


def _post_op_into(
    post: Callable[[torch.Tensor], torch.Tensor], qrange: tuple[int, int, torch.dtype],
    scale: float, zero_point: int, *, seed: int, spread: float = 2.0,
) -> gl.Lowered:
    """A linear, ``post`` on its float output, then a fused output quantize on ``qrange``
    (``(qmin, qmax, dtype)``), lowered on 64 rows of ``spread`` times normal inputs; one
    kernel."""

    def graph(x: torch.Tensor) -> torch.Tensor:
        y = post(LINEAR.linear(dq(q(x, 0.02, 128), 0.02, 128)))
        return dq(q(y, scale, zero_point, qrange), scale, zero_point, qrange)

    x = torch.randn(64, 16, generator=torch.Generator().manual_seed(seed)) * spread
    lowered = gl.lower(graph, [x])
    assert len(lowered.kernels) == 1
    return lowered


def test_codes_below_a_narrow_ranges_minimum_are_clamped_to_it() -> None:
    """A fused output quantize to int8 ``[-127, 127]`` (the symmetric range, one code short
    of int8's) after a post-op with no bounds of its own (tanh): oneDNN clamps its codes to
    the dtype, and the values below ``-127.5`` steps must still come out as -127. Exact
    against eager, where many outputs lie below."""
    scale = 1 / 200  # tanh reaches -1 = -200 steps
    lowered = _post_op_into(torch.tanh, (-127, 127, torch.int8), scale, 0, seed=4)
    # the one clamp the range needs: its top is int8's, which oneDNN saturates to anyway
    assert len(lowered.calls(torch.ops.aten.clamp_min.default)) == 1
    assert not lowered.calls(torch.ops.aten.clamp_max.default)
    assert (lowered.eager == -127 * scale).float().mean() > 0.05  # the clamp matters here
    _exact(lowered)


def test_codes_above_a_narrow_ranges_maximum_are_clamped_to_it() -> None:
    """The upper end: a fused output quantize to uint8 ``[0, 127]`` (7-bit activations)
    after tanh, whose codes oneDNN clamps to 255 only: the values beyond ``127`` steps must
    still come out as 127. Exact against eager, where many outputs lie above."""
    scale, zero_point = 1 / 100, 64  # tanh reaches 1 = code 164
    lowered = _post_op_into(torch.tanh, (0, 127, torch.uint8), scale, zero_point, seed=5)
    # the one clamp the range needs: its bottom is uint8's, which oneDNN saturates to anyway
    assert len(lowered.calls(torch.ops.aten.clamp_max.default)) == 1
    assert not lowered.calls(torch.ops.aten.clamp_min.default)
    assert (lowered.eager == (127 - zero_point) * scale).float().mean() > 0.05  # it matters
    _exact(lowered)


def test_an_output_quantize_to_16_bits_stays_outside_the_kernel() -> None:
    """A linear, tanh, then a quantize to int16 (a 16-bit activation): oneDNN's fused
    output is uint8 codes, so the quantize stays after the kernel (tanh fused, a float
    output), and its codes are eager's, all 65536 of the grid in reach."""
    lowered = _post_op_into(torch.tanh, (-32768, 32767, torch.int16), 1 / 30000, 0, seed=12)
    (kernel,) = lowered.kernels
    assert kernel.meta["val"].dtype == torch.float32
    assert lowered.calls(torch.ops.quantized_decomposed.quantize_per_tensor.default)
    _exact(lowered)


def test_a_16_bit_quantize_on_uint8s_range_still_stays_outside_the_kernel() -> None:
    """The dtype decides, not the range: a quantize to int16 whose range is ``[0, 255]``
    (uint8's codes, in int16's storage) is no uint8 output oneDNN can write, so it stays
    after a float-output kernel and its int16 codes are eager's. (An int8 quantize never
    arrives here as int8: the signed pass re-based it to uint8.) Whether tanh is fused into
    the kernel depends on whose passes run after ours (torch 2.13's copy takes float-output
    unaries), so only the quantize is checked."""
    lowered = _post_op_into(torch.tanh, (0, 255, torch.int16), 1 / 100, 100, seed=14)
    (kernel,) = lowered.kernels
    assert kernel.meta["val"].dtype == torch.float32
    quantizes = lowered.calls(torch.ops.quantized_decomposed.quantize_per_tensor.default)
    assert [q.args[3:] for q in quantizes if q.args[5] is torch.int16] == [(0, 255, torch.int16)]
    _exact(lowered)


@pytest.mark.parametrize("others", [False, True], ids=["alone", "next to torch's copy"])
def test_next_to_upstreams_passes_a_float_output_unary_is_left_to_them(
    monkeypatch: pytest.MonkeyPatch, others: bool
) -> None:
    """Where torch's (or torchao's) x86 passes run after this lowering, a float-output unary
    post-op is theirs to fuse (their later pattern would trip on a kernel that carries one
    already): the relu stays in the graph. A float-output add is fused either way."""
    from qinductor_x86 import _torch_private

    monkeypatch.setattr(_torch_private, "other_x86_copies_in_freezing", lambda: others)

    def unary(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(LINEAR.linear(dq(q(x, 0.02, 128), 0.02, 128)))

    def binary(x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return LINEAR.linear(dq(q(x, 0.02, 128), 0.02, 128)) + dq(q(r, 0.03, 100), 0.03, 100)

    x, r = torch.randn(4, 16, generator=torch.Generator().manual_seed(6)), torch.randn(4, 16)
    left = gl.lower(unary, [x])
    assert len(left.kernels) == 1
    assert bool(left.calls(torch.ops.aten.relu.default)) == others
    _exact(left)
    added = gl.lower(binary, [x, r])
    assert len(added.kernels) == 1 and not added.calls(torch.ops.aten.add.Tensor)
    _exact(added)


def test_a_linears_residual_read_after_the_add_is_not_overwritten() -> None:
    """A float-output linear plus a residual (a fresh float tensor, computed: no dequantize
    the lowering would copy per reader) that a later op reads again: the kernel adds it
    ("add") instead of summing into its buffer in place ("sum"), and the later reader sees
    the residual unchanged (exact against eager)."""

    def graph(x: torch.Tensor, r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        residual = torch.sin(r)
        y = LINEAR.linear(dq(q(x, 0.02, 128), 0.02, 128)) + residual
        return y, residual * 2

    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(7))
    r = torch.randn(4, 16, generator=torch.Generator().manual_seed(8))
    lowered = gl.lower(graph, [x, r])
    (kernel,) = lowered.kernels
    assert kernel.target is ops.QLINEAR_BINARY and "sum" not in kernel.args
    _exact(lowered)


def test_a_linears_residual_read_only_by_the_add_is_summed_in_place() -> None:
    """The other side: a fresh float residual that nothing reads after the add is summed
    into in place ("sum"), as torch's copy chooses; exact against eager."""

    def graph(x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return LINEAR.linear(dq(q(x, 0.02, 128), 0.02, 128)) + torch.sin(r)

    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(7))
    r = torch.randn(4, 16, generator=torch.Generator().manual_seed(8))
    lowered = gl.lower(graph, [x, r])
    (kernel,) = lowered.kernels
    assert kernel.target is ops.QLINEAR_BINARY and "sum" in kernel.args, kernel.args
    _exact(lowered)


def test_a_convs_float_residual_that_is_no_dequantize_is_added_outside_the_kernel() -> None:
    """A float-output conv plus the caller's own float tensor: oneDNN's conv sums in place
    into a dequantized residual only (torch's passes fuse nothing else), so the add stays
    after a plain conv kernel, the caller's tensor is as it was, and the output is eager's."""

    def graph(x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return CONV.conv(dq(q(x, 0.02, 128), 0.02, 128), padding=1) + r

    r = _image(11, 8).contiguous(memory_format=torch.channels_last)
    given = r.clone()
    lowered = gl.lower(graph, [_image(10, 8), r])
    assert torch.equal(r, given)
    (kernel,) = lowered.kernels
    assert kernel.target is ops.QCONV
    assert lowered.calls(torch.ops.aten.add.Tensor)
    _exact(lowered)


def test_each_fusion_counts_under_torchs_counter_of_its_kind() -> None:
    """torch's (and torchao's) fusion tests read Inductor's counters: a conv's residual add
    (+ relu) counts under the binary matcher, a conv's relu alone under the unary one, one
    each here, as their passes count them."""
    keys = ("qconv2d_binary_matcher_count", "qconv2d_unary_matcher_count")

    def counted(graph: Callable[..., torch.Tensor], *inputs: torch.Tensor) -> tuple[int, ...]:
        before = zoo.inductor_counters()
        gl.lower(graph, list(inputs))
        after = zoo.inductor_counters()
        return tuple(after.get(k, 0) - before.get(k, 0) for k in keys)

    def added(x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        y = CONV.conv(dq(q(x, 0.02, 128), 0.02, 128), padding=1) + dq(q(r, 0.03, 100), 0.03, 100)
        return dq(q(F.relu(y), 0.02, 0), 0.02, 0)

    def relu(x: torch.Tensor) -> torch.Tensor:
        return dq(q(F.relu(CONV.conv(dq(q(x, 0.02, 128), 0.02, 128), padding=1)), 0.02, 0), 0.02, 0)

    assert counted(added, _image(12, 8), _image(13, 8).contiguous(memory_format=torch.channels_last)) == (1, 0)
    assert counted(relu, _image(12, 8)) == (0, 1)


def test_a_residual_of_another_shape_is_not_fused() -> None:
    """An added tensor broadcast against the kernel's output (one row for every row): the
    binary kernels add same-shape tensors only, so the add stays outside the kernel and
    the output is eager's."""

    def graph(x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return LINEAR.linear(dq(q(x, 0.02, 128), 0.02, 128)) + torch.sin(r)

    inputs = [torch.randn(4, 16, generator=torch.Generator().manual_seed(9)), torch.randn(1, 16)]
    lowered = gl.lower(graph, inputs, run=False)  # (a binary kernel given it would crash)
    (kernel,) = lowered.kernels
    assert kernel.target is ops.QLINEAR
    assert lowered.calls(torch.ops.aten.add.Tensor)
    with torch.no_grad():
        diffs = compare_outputs(lowered.eager, lowered.gm(*inputs))
    assert diffs and all(d.exact for d in diffs), "; ".join(map(str, diffs))


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8])
def test_a_full_range_output_needs_no_clamp_of_its_own(dtype: torch.dtype) -> None:
    """oneDNN saturates a fused output's codes to its dtype: an output quantize over the
    dtype's whole range adds no clamp to the graph, and the codes are eager's (many at
    both ends here)."""
    qmin, qmax = (0, 255) if dtype == torch.uint8 else (-128, 127)
    zero_point, scale = (128 if dtype == torch.uint8 else 0), 1 / 200
    lowered = _post_op_into(torch.tanh, (qmin, qmax, dtype), scale, zero_point, seed=10)
    assert not lowered.calls(torch.ops.aten.clamp_min.default, torch.ops.aten.clamp_max.default)
    assert (lowered.eager == (qmin - zero_point) * scale).any()
    assert (lowered.eager == (qmax - zero_point) * scale).any()
    _exact(lowered)


def test_a_narrow_range_above_its_dtypes_minimum_bounds_the_merged_clamp() -> None:
    """A hardtanh to ``[-3, 3]`` merged into the float clamp that stands for a narrow
    output range ``[16, 200]`` of uint8, zero point 100: the float clamp's lower bound is
    ``(16 - 100) s``, above the hardtanh's, and oneDNN saturates only at code 0, so the
    bound alone keeps codes from falling below 16. Exact against eager, where many
    outputs sit at 16."""
    scale, zero_point = 1 / 50, 100

    def hardtanh(y: torch.Tensor) -> torch.Tensor:
        return F.hardtanh(y, -3.0, 3.0)

    lowered = _post_op_into(hardtanh, (16, 200, torch.uint8), scale, zero_point, seed=11, spread=3.0)
    assert (lowered.eager == (16 - zero_point) * scale).float().mean() > 0.05  # it binds
    # the merged post-op bounds the codes itself: no clamp of the codes after the kernel
    assert not lowered.calls(torch.ops.aten.clamp_min.default, torch.ops.aten.clamp_max.default)
    _exact(lowered)


def test_a_conv1d_fuses_its_relu_though_it_has_no_add_post_op() -> None:
    """oneDNN's int8 conv1d takes a relu post-op and no add: its relu (with an int8
    output) fuses into the kernel, and the output is eager's."""
    weight = Weight.make(12, 8, 3, 3)

    def graph(x: torch.Tensor) -> torch.Tensor:
        y = F.conv1d(dq(q(x, 0.02, 128), 0.02, 128), weight.dequantized(), weight.bias, padding=1)
        return dq(q(torch.relu(y), 0.01, 0), 0.01, 0)

    lowered = gl.lower(graph, [torch.randn(2, 3, 12, generator=torch.Generator().manual_seed(13))])
    (kernel,) = lowered.kernels
    assert "relu" in kernel.args and not lowered.calls(torch.ops.aten.relu.default), kernel.args
    _exact(lowered)


OTHER_LINEAR = Weight.make(6, 16, 16)


def test_of_two_kernel_outputs_added_the_left_operands_kernel_takes_the_add() -> None:
    """``linear_a(x) + linear_b(y)``: a linear adds any tensor of its output's shape, so
    either kernel could take the add. The kernel-on-the-left pattern is registered before
    its mirror, so the left operand's linear becomes the
    binary kernel, reading ``x``'s codes (scale 0.02), and ``linear_b`` stays plain; exact
    against eager."""

    def graph(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        left = LINEAR.linear(dq(q(x, 0.02, 128), 0.02, 128))
        right = OTHER_LINEAR.linear(dq(q(y, 0.03, 100), 0.03, 100))
        return left + right

    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(12))
    y = torch.randn(4, 16, generator=torch.Generator().manual_seed(13))
    lowered = gl.lower(graph, [x, y])
    (binary,) = lowered.calls(ops.QLINEAR_BINARY)
    (plain,) = lowered.calls(ops.QLINEAR)
    assert (binary.args[1], plain.args[1]) == (0.02, 0.03), (binary.args, plain.args)
    _exact(lowered)


def test_a_kernel_that_carries_a_post_op_already_takes_no_second_one() -> None:
    """A graph can hold a oneDNN kernel that carries a post-op when it arrives (a model
    that calls oneDNN's int8 linear itself, or a graph lowered once already): here a
    linear with its relu, then a hardtanh to ``[-0.5, 0.5]``. oneDNN's kernel takes one
    unary post-op, so the hardtanh must stay after it: fused, it would replace the relu
    and let the negative values through. The kernel keeps its relu, the hardtanh's clamps
    stay, and the output is eager's."""
    packed = torch.ops.onednn.qlinear_prepack(LINEAR.codes, [8, 16])
    w_zp = LINEAR.zero_points.to(torch.int32)

    def graph(x: torch.Tensor) -> torch.Tensor:
        y = ops.QLINEAR(
            q(x, 0.02, 128), 0.02, 128, packed, LINEAR.scales, w_zp, LINEAR.bias,
            1.0, 0, torch.float32, "relu", [], "",
        )  # fmt: skip
        return F.hardtanh(y, -0.5, 0.5)

    lowered = gl.lower(graph, [torch.randn(8, 16, generator=torch.Generator().manual_seed(15))])
    (kernel,) = lowered.kernels
    assert kernel.target is ops.QLINEAR and QLinear.of(kernel).attr == "relu", kernel.args
    assert lowered.calls(torch.ops.aten.clamp_min.default, torch.ops.aten.clamp_max.default)
    assert (lowered.eager == 0).float().mean() > 0.2  # the relu matters here
    _exact(lowered)
