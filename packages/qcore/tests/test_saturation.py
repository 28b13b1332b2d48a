"""qcore.int8.saturation: the emulated non-VNNI arithmetic and the per-channel range choice.

Checked against independent references: a plain-Python pairwise int16 accumulation, the
brute-force pair sums of ``int16_pairs`` (never this module's own ``worst_case_pair_sum``
or ``weight_codes``), torch's own convolutions, and, on a host without VNNI, oneDNN's int8
kernels themselves.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import int16_pairs as pairs
import pytest
import torch
import torch.nn.functional as F

from qcore import host
from qcore.int8 import saturation
from qcore.int8.engine import quantized_engine
from qcore.int8.saturation import (
    SAFE_HALF_RANGE,
    Geometry,
    _rows,
    choose_weight_ranges,
    emulate_accumulators,
    never_overflow_half_ranges,
    range_cost_db,
    weight_codes,
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
    """Brute force over every uint8 input: the module's safe range keeps every pair in
    int16 where the full range does not, a depthwise layer (one channel per group, paired
    with a zero) cannot overflow, and its emulation is the exact per-channel sum."""
    gen = torch.Generator().manual_seed(1)
    w = torch.randn(16, 8, 3, 3, generator=gen)
    full = pairs.full_range_codes(w)
    safe, _ = pairs.codes_for(w, [SAFE_HALF_RANGE] * 16)
    assert bool(pairs.any_input_can_overflow(full).any())
    assert not bool(pairs.any_input_can_overflow(safe).any())
    depthwise = pairs.full_range_codes(torch.randn(16, 1, 3, 3, generator=gen))
    assert not bool(pairs.any_input_can_overflow(depthwise).any())
    x = torch.full((4, 16, 9), 255)
    grouped = emulate_accumulators(x, depthwise.reshape(16, 1, 9), groups=16)
    exact = torch.einsum("sct,ct->sc", x, depthwise.reshape(16, 9))  # group c: channel c alone
    assert torch.equal(grouped, exact.double())


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


@pytest.mark.parametrize(("dims", "geometry"), GEOMETRIES)
def test_few_positions_give_every_input_patch_in_output_order(dims: int, geometry: Geometry) -> None:
    """With no more positions than ``count``, the rows are all of them, in torch's output
    order (batch, then positions): row ``i`` times the weight is output position ``i`` of
    torch's conv, and there are exactly as many rows as positions (a padding resolved
    wrongly shifts the patches or drops positions)."""
    gen = torch.Generator().manual_seed(12)
    x = torch.randn(2, 4, *([7] * dims), generator=gen, dtype=torch.float64)
    w = torch.randn(6, 4 // geometry.groups, *([3] * dims), generator=gen, dtype=torch.float64)
    conv = (F.conv1d, F.conv2d, F.conv3d)[dims - 1]
    reference = conv(x, w, None, geometry.stride, geometry.padding, geometry.dilation,
                     geometry.groups)
    positions = reference.movedim(1, -1).reshape(-1, 6)  # (batch * positions, out channels)
    rows = _rows(x, w, geometry, count=10_000, seed=0)
    assert rows.shape == (positions.shape[0], 4, 3**dims)
    per_group, flat = 6 // geometry.groups, w.reshape(6, w.shape[1], -1)
    outputs = torch.cat([
        torch.einsum("sct,oct->so", rows[:, g * w.shape[1]:(g + 1) * w.shape[1]],
                     flat[g * per_group:(g + 1) * per_group])
        for g in range(geometry.groups)
    ], 1)
    torch.testing.assert_close(outputs, positions, rtol=0, atol=1e-10)


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
    # the evidence the choice reports, recomputed by brute force on the same positions
    assert choice.sqnr_full == pytest.approx(sqnr(reference, full), abs=0.01)
    assert choice.sqnr_chosen == pytest.approx(sqnr(reference, narrowed), abs=0.01)
    for codes, reported in ((pairs.full_range_codes(w), choice.saturated), (chosen, choice.saturated_chosen)):
        flat = codes.reshape(16, -1, 9)
        exact = torch.einsum("sct,oct->so", rows, flat)
        clamped = pairs.saturated_accumulators(rows, flat) != exact
        assert reported == pytest.approx(float(clamped.double().mean()), abs=1e-12)
    assert choice.saturated > 0 and choice.saturated_chosen == 0


def test_linear_choice_follows_the_documented_rule_on_every_row() -> None:
    """A linear layer on a 3-D input (every row of every batch is a reduction input):
    with no more rows than ``samples`` all are used, and the choice is the documented rule
    on the brute-force pair sums; with fewer samples, a subset of the rows can only show
    lower peaks, so no channel gets a narrower range than with all of them."""
    gen = torch.Generator().manual_seed(16)
    w = torch.randn(16, 48, generator=gen)
    x = torch.rand(4, 30, 48, generator=gen) * 2  # 120 rows
    qparams = (2 / 255, 0, 0, 255)
    rows = pairs.linear_rows(pairs.input_codes(x, 2 / 255, 0))
    expected = pairs.expected_half_ranges(rows, w)
    assert 0 < sum(h < 127.5 for h in expected) < 16
    assert list(choose_weight_ranges(w, x, qparams, Geometry.linear()).half_ranges) == expected
    subset = choose_weight_ranges(w, x, qparams, Geometry.linear(), samples=40)
    assert all(s >= e for s, e in zip(subset.half_ranges, expected, strict=True))
    sampled = _rows(x, w, Geometry.linear(), count=40, seed=0)[..., 0]  # 40 distinct rows
    assert sampled.shape == (40, 48) and len({tuple(r.tolist()) for r in sampled}) == 40
    assert all(bool((x.reshape(-1, 48) == r).all(1).any()) for r in sampled)
    assert list(subset.half_ranges) != [127.5] * 16  # 40 rows still show overflows


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


def test_a_geometry_is_a_value() -> None:
    """Equal geometries are equal and hash alike (they key per-layer choices), and none
    can change once made."""
    a, b = Geometry.conv((1, 1), (0, 0), (1, 1)), Geometry.conv((1, 1), (0, 0), (1, 1))
    assert a == b and hash(a) == hash(b) and len({a, b, Geometry.linear()}) == 2
    with pytest.raises(AttributeError):
        a.groups = 2  # type: ignore[misc]


def test_when_every_channel_narrows_the_evidence_is_the_narrowed_layers() -> None:
    """Large same-sign weights on large inputs: every channel overflows at full range and
    takes a narrower one; the chosen SQNR and saturation are those of the chosen codes
    (brute force), not the full-range ones."""
    gen = torch.Generator().manual_seed(23)
    w = torch.rand(8, 32, generator=gen) + 0.5
    x = torch.rand(64, 32, generator=gen) * 2
    rows = pairs.linear_rows(pairs.input_codes(x, 2 / 255, 0))
    expected = pairs.expected_half_ranges(rows, w)
    assert all(h < 127.5 for h in expected)
    choice = choose_weight_ranges(w, x, (2 / 255, 0, 0, 255), Geometry.linear())
    assert list(choice.half_ranges) == expected
    reference = x.double() @ w.double().T
    outputs = {}
    for name, halves in (("full", [127.5] * 8), ("chosen", expected)):
        codes, w_scale = pairs.codes_for(w, halves)
        flat = codes.reshape(8, 32, 1)
        outputs[name] = pairs.saturated_accumulators(rows, flat).double() * (2 / 255) * w_scale
    assert choice.sqnr_chosen == pytest.approx(sqnr(reference, outputs["chosen"]), abs=0.01)
    assert choice.sqnr_full == pytest.approx(sqnr(reference, outputs["full"]), abs=0.01)
    assert choice.saturated > 0 and choice.saturated_chosen == 0


def test_weight_codes_stay_int8_for_any_half_range() -> None:
    """Codes are clamped to [-128, 127]: a half range wider than the full one saturates
    the extreme weights instead of leaving the dtype."""
    weight = torch.tensor([[1.0, -1.0, 0.5], [-2.0, 2.0, 0.25]])
    codes, scales = weight_codes(weight, 200.0)
    assert codes.tolist() == [[127, -128, 100], [-128, 127, 25]]
    torch.testing.assert_close(scales, torch.tensor([1 / 200, 2 / 200], dtype=torch.float64).float().double())


def test_a_zero_weight_channel_does_not_hide_the_other_pairs() -> None:
    """Input channel 1 has zero weights everywhere: its pair (0, 1) cannot saturate, the
    others still do, and each accumulator equals the brute-force int16 pair sums."""
    gen = torch.Generator().manual_seed(17)
    rows = torch.randint(0, 256, (9, 6, 2), generator=gen)
    codes = torch.randint(-128, 128, (5, 6, 2), generator=gen)
    codes[:, 1] = 0
    expected = pairs.saturated_accumulators(rows, codes)
    assert not torch.equal(expected, torch.einsum("sct,oct->so", rows, codes))  # it saturates
    assert torch.equal(emulate_accumulators(rows, codes), expected.double())


def test_a_pair_sum_of_exactly_the_int16_limit_is_no_overflow() -> None:
    """With 151 as the largest input code, codes 127 + 90 make 217 * 151 = 32767: exactly
    the limit, which fits; the channel keeps the full range. (The default input range is
    uint8's [0, 255].)"""
    weight = torch.tensor([[1.0, 90 / 127.5], [1.0, 0.5]], dtype=torch.float64)
    codes, _ = weight_codes(weight, 127.5)
    assert codes[0].tolist() == [127, 90]
    assert pairs.worst_pair_sums(codes[:1], 151).tolist() == [pairs.INT16_MAX]
    assert not bool(pairs.any_input_can_overflow(codes[:1], 151).any())
    assert bool(pairs.any_input_can_overflow(codes[:1], 152).any())  # one code more overflows
    assert never_overflow_half_ranges(weight, 151) == (127.5, 127.5)
    assert never_overflow_half_ranges(weight) == never_overflow_half_ranges(weight, 255)


def test_calibration_at_exactly_the_int16_limit_keeps_the_full_range() -> None:
    """Inputs on [0, 151], calibrated at the top code: the channel of codes 127 + 90 peaks
    at 217 * 151 = 32767, above the 90 % headroom line but not past int16's top, which no
    input can pass: it keeps the full range. Its twin of codes 127 + 91 (one more) can
    overflow, peaks at 218 * 151 = 32918 and takes the widest candidate under the line."""
    weight = torch.tensor([[1.0, 90 / 127.5], [1.0, 91 / 127.5]], dtype=torch.float64)
    assert pairs.full_range_codes(weight).tolist() == [[127, 90], [127, 91]]
    x = torch.ones(4, 2, dtype=torch.float64)
    rows = pairs.linear_rows(pairs.input_codes(x, 1 / 151, 0, 0, 151))
    assert pairs.peaks(rows, pairs.full_range_codes(weight)).tolist() == [pairs.INT16_MAX, 32918]
    expected = pairs.expected_half_ranges(rows, weight, qmax=151)
    assert expected == [127.5, 111.5]
    choice = choose_weight_ranges(weight, x, (1 / 151, 0, 0, 151), Geometry.linear())
    assert list(choice.half_ranges) == expected


@pytest.mark.parametrize("chunk", [1 << 6, 1 << 23])
@pytest.mark.parametrize("groups", [1, 2])
def test_emulation_in_chunks_misses_no_output_channel(
    monkeypatch: pytest.MonkeyPatch, chunk: int, groups: int
) -> None:
    """Large layers are emulated a block of output channels at a time: with blocks of one
    channel (more output channels than input channels) and of all of them, every
    accumulator equals the brute-force int16 pair sums."""
    monkeypatch.setattr(saturation, "_CHUNK_ELEMENTS", chunk)
    gen = torch.Generator().manual_seed(11)
    rows = torch.randint(0, 256, (7, 4 * groups, 3), generator=gen)
    codes = torch.randint(-128, 128, (6 * groups, 4, 3), generator=gen)
    got = emulate_accumulators(rows, codes, groups=groups)
    expected = torch.cat([
        pairs.saturated_accumulators(rows[:, 4 * g : 4 * (g + 1)], codes[6 * g : 6 * (g + 1)])
        for g in range(groups)
    ], 1)
    assert torch.equal(got, expected.double())
    exact = torch.cat([
        torch.einsum("sct,oct->so", rows[:, 4 * g : 4 * (g + 1)], codes[6 * g : 6 * (g + 1)])
        for g in range(groups)
    ], 1)
    assert not torch.equal(expected, exact)  # the case saturates somewhere


@pytest.mark.parametrize("chunk", [1 << 6, 1 << 10])
def test_emulation_holds_at_most_a_chunk_of_pair_sums_at_once(
    monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """The memory bound: each block of pair sums the emulation forms holds at most
    ``_CHUNK_ELEMENTS`` values, or one output channel's when that alone is larger (7 rows
    x 2 pairs x 9 taps = 126 per channel: blocks of one channel, then of eight)."""
    monkeypatch.setattr(saturation, "_CHUNK_ELEMENTS", chunk)
    einsum, sizes = torch.einsum, []

    def counted(*args: object) -> torch.Tensor:
        out = einsum(*args)
        if out.dim() == 4:  # (the pair sums: rows, channels, pairs, taps)
            sizes.append((out.numel(), out.shape[1]))
        return out

    monkeypatch.setattr(torch, "einsum", counted)
    gen = torch.Generator().manual_seed(12)
    rows = torch.randint(0, 256, (7, 4, 9), generator=gen)
    codes = torch.randint(-128, 128, (20, 4, 9), generator=gen)
    emulate_accumulators(rows, codes)
    per_channel = 7 * 2 * 9
    assert sizes and all(n <= max(chunk, per_channel) for n, _ in sizes), sizes
    assert sum(channels for _, channels in sizes) == 20
    assert max(channels for _, channels in sizes) == max(1, chunk // per_channel)


def _range_cost_by_hand(
    weight: torch.Tensor, halves: list[float], moments: tuple[float, float], input_noise: float
) -> float:
    """The documented noise model, written out per output channel."""
    mean, mean_square = moments
    variance = mean_square - mean**2
    w = weight.double().reshape(weight.shape[0], -1)

    def total(half_ranges: list[float]) -> float:
        codes, scale = pairs.codes_for(weight, half_ranges)
        noise = 0.0
        for o in range(w.shape[0]):
            error = codes.reshape(w.shape)[o].double() * scale[o] - w[o]
            noise += variance * float((error**2).sum()) + mean**2 * float(error.sum()) ** 2
            noise += input_noise * float((w[o] ** 2).sum())
        return noise

    return max(0.0, 10 * math.log10(total(halves) / total([127.5] * w.shape[0])))


@pytest.mark.parametrize("shape", [(6, 10), (4, 3, 3, 3)])
@pytest.mark.parametrize(("moments", "input_noise"), [((0.5, 0.4), 1e-4), ((-0.2, 2.0), 0.0), ((1.0, 1.0), 3e-3)])
def test_range_cost_is_the_documented_noise_model(
    shape: tuple[int, ...], moments: tuple[float, float], input_noise: float
) -> None:
    weight = torch.randn(*shape, generator=torch.Generator().manual_seed(13))
    halves = [63.5, 127.5, 95.5, 79.5, 111.5, 63.5][: shape[0]]
    expected = _range_cost_by_hand(weight, halves, moments, input_noise)
    assert expected > 0.01  # narrowing costs something here
    assert range_cost_db(weight, halves, 127.5, moments, input_noise) == pytest.approx(expected, rel=1e-9)
    # the full range costs nothing, and a range finer than the full one is no cost either
    assert range_cost_db(weight, [127.5] * shape[0], 127.5, moments, input_noise) == 0.0
    assert range_cost_db(weight, [127.5] * shape[0], 63.5, moments, input_noise) == 0.0


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
    codes, w_scale = pairs.codes_for(w, [half] * w.shape[0])
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
    exa = (torch.einsum("sct,oct->so", cols, flat.double()) - comp) * scale * w_scale
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
    codes, _ = pairs.codes_for(weight, halves.tolist())
    # brute force: every pair (an odd last channel with a zero) on every input in [0, act_max]
    assert not bool(pairs.any_input_can_overflow(codes, act_max).any()), halves
    assert bool((halves >= pairs.SAFE_HALF_RANGE).all()) and bool((halves <= 127.5).all())
    # tight: a channel kept below the full range has a pair within two codes of the limit
    limit = pairs.INT16_MAX // act_max
    narrowed = halves < 127.5
    peaks = pairs.worst_pair_sums(codes, 1)  # the largest |code pair| of each channel
    assert bool((peaks[narrowed] >= limit - 2).all()), (halves, peaks)


def test_without_a_seed_the_sampled_positions_are_seed_zeros() -> None:
    """The choice is reproducible across calls and processes: a call without ``seed``
    samples what ``seed=0`` samples (documented default), where another seed's sample
    chooses differently."""
    gen = torch.Generator().manual_seed(16)
    w = torch.randn(16, 48, generator=gen)
    x = torch.rand(4, 30, 48, generator=gen) * 2  # 120 rows, 40 sampled
    qparams = (2 / 255, 0, 0, 255)
    default = choose_weight_ranges(w, x, qparams, Geometry.linear(), samples=40)
    zero = choose_weight_ranges(w, x, qparams, Geometry.linear(), samples=40, seed=0)
    other = choose_weight_ranges(w, x, qparams, Geometry.linear(), samples=40, seed=1)
    assert list(default.half_ranges) == list(zero.half_ranges) != list(other.half_ranges)


@pytest.mark.parametrize(("below_tie", "narrowed"), [(0.5e-3, True), (2e-3, False)])
def test_a_weight_within_the_margin_of_a_tie_counts_as_rounding_up(below_tie: float, narrowed: bool) -> None:
    """A channel ``[amax, w]`` at full range: amax is code 127, and ``w`` sits just below
    the tie between codes 1 and 2. Rounded as float64 rounds it, the pair is 128 (safe
    with uint8 inputs: 128 * 255 <= 32767); a float32 quantize may round it up to 2, a
    pair of 129. Within the margin (1e-3 codes) the check counts it as 2 and narrows the
    channel; farther below the tie it keeps the full range."""
    weight = torch.tensor([[1.0, (1.5 - below_tie) / 127.5]], dtype=torch.float64)
    codes, _ = weight_codes(weight, 127.5)
    assert codes.tolist() == [[127, 1]]  # float64's rounding: a safe pair
    (half,) = never_overflow_half_ranges(weight, 255, 127.5)
    assert (half < 127.5) == narrowed, half


def test_a_linear_samples_its_default_number_of_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ``samples``, the choice reads 512 rows (documented) of a linear's
    calibration input, all distinct, drawn from all of them; an input with fewer rows
    gives every one of its rows."""
    sampled = []

    def spy(*args: object) -> torch.Tensor:
        rows = _rows(*args)  # type: ignore[arg-type]
        sampled.append(rows)
        return rows

    monkeypatch.setattr(saturation, "_rows", spy)
    gen = torch.Generator().manual_seed(17)
    w, x = torch.randn(4, 24, generator=gen), torch.rand(8, 100, 24, generator=gen)  # 800 rows
    choose_weight_ranges(w, x, (1 / 255, 0, 0, 255), Geometry.linear())
    (rows,) = sampled
    assert rows.shape == (512, 24, 1)
    assert len({tuple(r) for r in rows.squeeze(-1).tolist()}) == 512
    choose_weight_ranges(w, x[:1, :10], (1 / 255, 0, 0, 255), Geometry.linear())
    few = sampled[1].squeeze(-1)
    assert sorted(map(tuple, few.tolist())) == sorted(map(tuple, x[0, :10].tolist()))
