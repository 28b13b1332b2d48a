"""qcore.int8.saturation: the emulated non-VNNI arithmetic and the per-channel range choice.

Checked against independent references: a plain-Python pairwise int16 accumulation,
torch's own convolutions, and, on a host without VNNI, oneDNN's int8 kernels themselves.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import int16_pairs as pairs
import pytest
import torch
import torch.nn.functional as F

from qcore import host
from qcore.engine import quantized_engine
from qcore.int8.saturation import (
    INT16_MAX,
    SAFE_HALF_RANGE,
    Geometry,
    _rows,
    choose_weight_ranges,
    emulate_accumulators,
    never_overflow_half_ranges,
    weight_codes,
    worst_case_pair_sum,
)
from qcore.metrics import sqnr


def _python_accumulators(x: list[list[int]], w: list[list[int]]) -> list[list[int]]:
    """oneDNN's non-VNNI reduction written out: int16-saturated channel pairs, int32 sum."""
    out = []
    for row in x:
        acc_row = []
        for weights in w:
            acc = 0
            for c in range(0, len(row), 2):
                pair = row[c] * weights[c] + (row[c + 1] * weights[c + 1] if c + 1 < len(row) else 0)
                acc += max(-32768, min(32767, pair))
            acc_row.append(acc)
        out.append(acc_row)
    return out


def test_emulation_matches_a_plain_pairwise_reduction() -> None:
    gen = torch.Generator().manual_seed(0)
    for channels in (1, 2, 5, 16):
        x = torch.randint(0, 256, (7, channels, 1), generator=gen)
        w = torch.randint(-128, 128, (3, channels, 1), generator=gen)
        expected = _python_accumulators(x[..., 0].tolist(), w[..., 0].tolist())
        got = emulate_accumulators(x, w, saturate=True)
        assert got.tolist() == expected
        exact = emulate_accumulators(x, w, saturate=False)
        assert torch.equal(exact, (x[..., 0].double() @ w[..., 0].double().T))


def test_depthwise_and_safe_weights_cannot_overflow() -> None:
    gen = torch.Generator().manual_seed(1)
    w = torch.randn(16, 8, 3, 3, generator=gen)
    full, _ = weight_codes(w, 127.5)
    safe, _ = weight_codes(w, SAFE_HALF_RANGE)
    assert worst_case_pair_sum(full) > INT16_MAX
    assert worst_case_pair_sum(safe) <= INT16_MAX
    depthwise, _ = weight_codes(torch.randn(16, 1, 3, 3, generator=gen), 127.5)
    assert worst_case_pair_sum(depthwise) <= INT16_MAX
    x = torch.full((4, 16, 9), 255)
    grouped = emulate_accumulators(x, depthwise.reshape(16, 1, 9), groups=16)
    assert torch.equal(grouped, emulate_accumulators(x, depthwise.reshape(16, 1, 9), 16, False))


GEOMETRIES = [
    (1, Geometry.conv((2,), (1,), (1,))),
    (2, Geometry.conv((1, 2), (1, 0), (2, 1), groups=2)),
    (2, Geometry.conv((1, 1), "same", (1, 1))),
    (3, Geometry.conv((1, 1, 2), (0, 1, 1), (1, 1, 1))),
]


@pytest.mark.parametrize(("dims", "geometry"), GEOMETRIES)
def test_sampled_rows_are_real_input_patches(dims: int, geometry: Geometry) -> None:
    """Each sampled row, times the weight, is one output position of torch's conv."""
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(2, 4, *([7] * dims), generator=gen)
    w = torch.randn(6, 4 // geometry.groups, *([3] * dims), generator=gen)
    conv = (F.conv1d, F.conv2d, F.conv3d)[dims - 1]
    reference = conv(x, w, None, geometry.stride, geometry.padding, geometry.dilation,
                     geometry.groups)
    positions = reference.transpose(0, 1).reshape(6, -1).T  # (positions, out channels)
    rows = _rows(x, w, geometry, count=32, seed=0)
    per_group = 6 // geometry.groups
    for row in rows:
        outputs = torch.cat([
            torch.einsum("ct,oct->o", row[g * w.shape[1]:(g + 1) * w.shape[1]],
                         w[g * per_group:(g + 1) * per_group].reshape(per_group, w.shape[1], -1))
            for g in range(geometry.groups)
        ])
        assert (positions - outputs).abs().amax(1).min() < 1e-4


def _relu_like(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    return torch.rand(*shape, generator=torch.Generator().manual_seed(seed)) * 3


SAME_3X3 = Geometry.conv((1, 1), (1, 1), (1, 1))


def test_choice_keeps_full_range_where_nothing_overflows() -> None:
    w = torch.randn(8, 16, 3, 3, generator=torch.Generator().manual_seed(3)) * 0.1
    x = _relu_like((2, 16, 8, 8), 4) * 0.01  # codes stay near 0: no pair can overflow
    choice = choose_weight_ranges(w, x, (3 / 255, 0, 0, 255), SAME_3X3)
    # brute force: no pair sum of the full-range codes leaves int16 at any position
    rows = pairs.conv_rows(pairs.input_codes(x, 3 / 255, 0), (3, 3), 1, 0)
    assert not bool(pairs.overflows(rows, pairs.full_range_codes(w)).any())
    assert choice.half_ranges == (127.5,) * 8
    assert torch.equal(choice.scale_factors(), torch.ones(8, dtype=torch.float64))


def _emulated_output(
    x: torch.Tensor, w: torch.Tensor, halves: list[float], qparams: tuple[float, int]
) -> torch.Tensor:
    """The saturating kernel's output at every position, brute force, in float."""
    scale, zero_point = qparams
    rows = pairs.conv_rows(pairs.input_codes(x, scale, zero_point), (3, 3), 1, zero_point)
    codes, w_scale = pairs.codes_for(w, halves)
    flat = codes.reshape(w.shape[0], w.shape[1], -1)
    acc = pairs.saturated_accumulators(rows, flat) - zero_point * flat.sum((1, 2))
    return acc.double() * scale * w_scale


@pytest.mark.parametrize("zero_point", [0, 128])
def test_choice_narrows_overflowing_channels_and_is_never_worse(zero_point: int) -> None:
    """Against brute force on every output position (128, all sampled): full-range codes
    overflow; the chosen ones never do, follow the documented rule, and the saturating
    kernel's output gets far closer to float."""
    w = torch.randn(16, 32, 3, 3, generator=torch.Generator().manual_seed(5))
    x = _relu_like((2, 32, 8, 8), 6) - (1.5 if zero_point else 0)
    scale = float((x.max() - x.min()) / 255)
    choice = choose_weight_ranges(w, x, (scale, zero_point, 0, 255), SAME_3X3)
    rows = pairs.conv_rows(pairs.input_codes(x, scale, zero_point), (3, 3), 1, zero_point)
    assert bool(pairs.overflows(rows, pairs.full_range_codes(w)).any())
    chosen, _ = pairs.codes_for(w, list(choice.half_ranges))
    assert not bool(pairs.overflows(rows, chosen).any())
    expected = pairs.expected_half_ranges(rows, w)
    assert list(choice.half_ranges) == expected
    assert 0 < sum(h < 127.5 for h in expected) <= 16
    reference = F.conv2d(x.double(), w.double(), padding=1).permute(0, 2, 3, 1).reshape(-1, 16)
    full = _emulated_output(x, w, [127.5] * 16, (scale, zero_point))
    narrowed = _emulated_output(x, w, expected, (scale, zero_point))
    assert sqnr(reference, narrowed) > sqnr(reference, full) + 3


@pytest.mark.parametrize("spike", [(0, 0), (3, 17), (9, 9), (13, 7), (16, 2), (19, 19)])
def test_every_position_is_seen_when_there_are_few(spike: tuple[int, int]) -> None:
    """One spike at one output position overflows one channel (a 1x1 conv: no other
    position sees it): with at most ``samples`` positions none may be missed, where a
    draw with replacement misses each with probability 1/e."""
    gen = torch.Generator().manual_seed(8)
    w = torch.randn(4, 8, 1, 1, generator=gen) * 0.1
    w[0, :2] = 1.0  # channel 0: a pair of two large same-sign weights
    x = torch.rand(1, 8, 20, 20, generator=gen) * 0.05
    x[0, :2, spike[0], spike[1]] = 1.0  # where that pair meets two full-scale inputs
    geometry = Geometry.conv((1, 1), (0, 0), (1, 1))
    choice = choose_weight_ranges(w, x, (1 / 255, 0, 0, 255), geometry, samples=400)
    rows = pairs.conv_rows(pairs.input_codes(x, 1 / 255, 0), (1, 1), 0, 0)
    assert rows.shape[0] == 400
    expected = pairs.expected_half_ranges(rows, w)
    assert expected[0] < 127.5  # the spike overflows at full range
    assert list(choice.half_ranges) == expected


@pytest.fixture
def onednn() -> Iterator[None]:
    with quantized_engine("onednn"):
        yield


def _host_conv(x: torch.Tensor, w: torch.Tensor, half: float, zero_point: int) -> tuple[
    torch.Tensor, torch.Tensor, torch.Tensor
]:
    """oneDNN's quantized conv on this host, and the emulated saturated / exact results."""
    scale = float((x.max() - x.min()) / 255)
    xq = torch.quantize_per_tensor(x, scale, zero_point, torch.quint8)
    codes, w_scale = weight_codes(w, half)
    wq = torch._make_per_channel_quantized_tensor(
        codes.to(torch.int8), w_scale, torch.zeros(w.shape[0], dtype=torch.long), 0
    )
    conv = torch.ao.nn.quantized.Conv2d(w.shape[1], w.shape[0], 3, padding=1)
    conv.set_weight_bias(wq, None)
    exact = F.conv2d(xq.dequantize(), wq.dequantize(), padding=1)
    conv.scale = float((exact.max() - exact.min()) / 255)
    conv.zero_point = int(-exact.min() / conv.scale)
    kernel = conv(xq).dequantize()
    # every position in order; padding is the zero point's code, as a real zero
    codes_in = F.pad(xq.int_repr().double(), (1, 1, 1, 1), value=zero_point)
    cols = F.unfold(codes_in, 3)  # (N, C*9, L)
    cols = cols.transpose(1, 2).reshape(-1, w.shape[1], 9)
    flat = codes.reshape(w.shape[0], w.shape[1], 9)
    comp = zero_point * flat.sum((1, 2))
    sat = (emulate_accumulators(cols, flat) - comp) * scale * w_scale
    exa = (emulate_accumulators(cols, flat, saturate=False) - comp) * scale * w_scale
    as_positions = kernel.permute(0, 2, 3, 1).reshape(-1, w.shape[0]).double()
    return as_positions, sat, exa


@pytest.mark.parametrize(("channels", "zero_point"), itertools.product((3, 32), (0, 100)))
def test_emulation_predicts_onednn_on_this_host(onednn: None, channels: int, zero_point: int) -> None:
    """Where the host saturates, the emulation is much closer to oneDNN than exact int8 is;
    where it does not (VNNI, AMX), oneDNN equals the exact result."""
    gen = torch.Generator().manual_seed(channels + zero_point)
    x = torch.rand(2, channels, 10, 10, generator=gen) * 4 - 4 * zero_point / 255
    w = torch.randn(16, channels, 3, 3, generator=gen)
    kernel, saturated, exact = _host_conv(x, w, 127.5, zero_point)
    # the overflow error (< 31 dB) stands well below the kernel's output rounding (~42 dB),
    # so whichever of the two the kernel follows is unmistakable on either kind of CPU
    assert sqnr(exact, saturated) < 31, "the case must overflow for the test to mean anything"
    if host.probe().saturates_u8s8:
        assert sqnr(saturated, kernel) > sqnr(exact, kernel) + 8
    else:
        assert sqnr(exact, kernel) > sqnr(saturated, kernel) + 8
    kernel, _, exact = _host_conv(x, w, SAFE_HALF_RANGE, zero_point)
    assert sqnr(exact, kernel) > 35  # safe weights: only output rounding, on every host


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("act_max", [255, 200, 127])
@pytest.mark.parametrize("shape", [(16, 64), (8, 6, 3, 3), (4, 3, 5), (6, 1)])
def test_never_overflow_ranges_hold_for_any_input_and_are_tight(
    seed: int, act_max: int, shape: tuple[int, ...]
) -> None:
    gen = torch.Generator().manual_seed(seed)
    weight = torch.randn(*shape, generator=gen) * torch.rand(shape[0], *([1] * (len(shape) - 1)), generator=gen)
    halves = torch.tensor(never_overflow_half_ranges(weight, act_max), dtype=torch.float64)
    codes, _ = weight_codes(weight, halves)
    flat = codes.reshape(codes.shape[0], codes.shape[1], -1)
    # brute force: every input in [0, act_max], one channel pair at a time
    for o, c, t in itertools.product(range(flat.shape[0]), range(0, flat.shape[1] - 1, 2), range(flat.shape[2])):
        w0, w1 = float(flat[o, c, t]), float(flat[o, c + 1, t])
        assert max(abs(w0 * x0 + w1 * x1) for x0 in (0, act_max) for x1 in (0, act_max)) <= INT16_MAX
    assert bool((halves >= SAFE_HALF_RANGE).all()) and bool((halves <= 127.5).all())
    # tight: a channel kept below the full range has a pair within two codes of the limit
    limit = INT16_MAX // act_max
    narrowed = halves < 127.5
    peaks = torch.tensor([worst_case_pair_sum(codes[o : o + 1], 1) for o in range(codes.shape[0])])
    assert bool((peaks[narrowed] >= limit - 2).all()), (halves, peaks)
