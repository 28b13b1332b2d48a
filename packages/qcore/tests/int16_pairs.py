"""oneDNN's non-VNNI int8 reduction, brute force, written apart from qcore.int8.saturation.

Without VNNI, oneDNN multiplies uint8 input codes by int8 weight codes and adds the two
products of neighbouring input channels (2j, 2j+1, same kernel tap) in a saturating int16
lane (the package README, "int8 on CPUs without VNNI"). These helpers compute every such
pair sum in int64, with no sampling, so that a test can say which sums leave
[-32768, 32767] without asking the code under test; and the per-channel range rule that
code documents, restated from those sums.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

INT16_MIN, INT16_MAX = -32768, 32767
#: The documented rule: a channel whose pair sums on calibration peak above 90 % of the
#: int16 limit takes the widest of these half ranges that brings the peak under that line
#: (scale = amax / half range), down to 63.5, which no uint8 input can overflow (codes in
#: [-64, 64]: 2 * 64 * 255 = 32640).
FULL_HALF_RANGE = 127.5
SAFE_HALF_RANGE = 63.5
CANDIDATES = (111.5, 95.5, 79.5, SAFE_HALF_RANGE)
HEADROOM_LIMIT = 0.9 * INT16_MAX


def input_codes(x: Tensor, scale: float, zero_point: int, qmin: int = 0, qmax: int = 255) -> Tensor:
    """uint8 codes as torch's quantize rounds them (half to even)."""
    return torch.clamp(torch.round(x.double() / scale) + zero_point, qmin, qmax).to(torch.int64)


def full_range_codes(weight: Tensor) -> Tensor:
    """Per-output-channel symmetric int8 codes with torch's full range (half range 127.5)."""
    return codes_for(weight, [FULL_HALF_RANGE] * weight.shape[0])[0]


def linear_rows(codes: Tensor) -> Tensor:
    """``(rows, channels, 1)``: every input vector of a linear layer."""
    return codes.reshape(-1, codes.shape[-1]).unsqueeze(-1)


def conv_patches(x: Tensor, kernel: tuple[int, ...], padding: int, pad: float = 0.0) -> Tensor:
    """``(positions, channels, taps)`` in float64: every input patch of a stride-1 conv of
    a 1-, 2- or 3-d input, in output order (batch, then positions)."""
    dims = len(kernel)
    padded = F.pad(x.double(), [padding] * (2 * dims), value=pad)
    for axis, size in enumerate(kernel):
        padded = padded.unfold(2 + axis, size, 1)
    # (N, C, *positions, *kernel) -> (N * positions, C, taps)
    moved = padded.movedim(1, 1 + dims)
    return moved.reshape(-1, x.shape[1], int(torch.tensor(kernel).prod()))


def conv_rows(codes: Tensor, kernel: tuple[int, ...], padding: int, zero_point: int) -> Tensor:
    """The patches of uint8 codes, padded with the zero point's code (a real zero)."""
    return conv_patches(codes, kernel, padding, float(zero_point)).to(torch.int64)


def saturated_accumulators(rows: Tensor, weight_codes: Tensor) -> Tensor:
    """``(rows, out channels)``: int32 sums of int16-saturated pair sums, as the kernel
    accumulates them."""
    return pair_sums(rows, weight_codes).clamp(INT16_MIN, INT16_MAX).sum((2, 3))


def codes_for(weight: Tensor, half_ranges: list[float]) -> tuple[Tensor, Tensor]:
    """Symmetric int8 codes and float32 scales, ``scale = amax / half range`` per channel
    (torch's per-channel observer and reference quantization)."""
    flat = weight.detach().double().reshape(weight.shape[0], -1)
    scale = (flat.abs().amax(1) / torch.tensor(half_ranges, dtype=torch.float64)).float().double()
    codes = torch.clamp(torch.round(flat / scale[:, None]), -128, 127)
    return codes.reshape(weight.shape).to(torch.int64), scale


def pair_sums(rows: Tensor, weight_codes: Tensor) -> Tensor:
    """``(rows, out channels, pairs, taps)``: every int16 pair sum the kernel forms; an odd
    channel count pairs the last channel with a zero."""
    rows = rows.to(torch.int64)
    w = weight_codes.to(torch.int64).reshape(weight_codes.shape[0], weight_codes.shape[1], -1)
    if rows.shape[1] % 2:
        rows, w = F.pad(rows, (0, 0, 0, 1)), F.pad(w, (0, 0, 0, 1))
    even = rows[:, None, 0::2, :] * w[None, :, 0::2, :]
    odd = rows[:, None, 1::2, :] * w[None, :, 1::2, :]
    return even + odd


def peaks(rows: Tensor, weight_codes: Tensor) -> Tensor:
    """Per output channel, the largest ``|pair sum|`` on ``rows``."""
    return pair_sums(rows, weight_codes).abs().amax((0, 2, 3))


def overflows(rows: Tensor, weight_codes: Tensor) -> Tensor:
    """Per output channel, whether some pair sum on ``rows`` leaves the int16 range."""
    sums = pair_sums(rows, weight_codes)
    return ((sums < INT16_MIN) | (sums > INT16_MAX)).any(3).any(2).any(0)


def corner_rows(channels: int, taps: int = 1, qmax: int = 255) -> Tensor:
    """``(4, channels, taps)``: every input in ``[0, qmax]`` that can give a pair its
    extreme sums. A pair sum ``x0*w0 + x1*w1`` is linear in its two inputs, so over the
    box ``[0, qmax]^2`` it peaks at one of the box's four corners; and no two pairs share
    an input, so row ``k`` puts corner ``k`` on every pair at once and each pair meets all
    four corners somewhere in the four rows."""
    corners = torch.tensor([[0, 0], [0, qmax], [qmax, 0], [qmax, qmax]], dtype=torch.int64)
    rows = corners.repeat(1, (channels + 1) // 2)[:, :channels]
    return rows[:, :, None].expand(4, channels, taps)


def _any_input_rows(weight_codes: Tensor, qmax: int) -> Tensor:
    taps = int(torch.tensor(weight_codes.shape[2:], dtype=torch.int64).prod())
    return corner_rows(weight_codes.shape[1], taps, qmax)


def worst_pair_sums(weight_codes: Tensor, qmax: int = 255) -> Tensor:
    """Per output channel, the largest ``|pair sum|`` any uint8 input in ``[0, qmax]``
    can give (every pair on every corner of its input box)."""
    return peaks(_any_input_rows(weight_codes, qmax), weight_codes)


def any_input_can_overflow(weight_codes: Tensor, qmax: int = 255) -> Tensor:
    """Per output channel: whether some uint8 input in [0, qmax] takes a pair sum out of
    [-32768, 32767] (every pair on every corner of its input box)."""
    return overflows(_any_input_rows(weight_codes, qmax), weight_codes)


def expected_half_ranges(rows: Tensor, weight: Tensor, qmax: int = 255) -> list[float]:
    """The documented per-channel rule on every calibration row (no sampling)."""
    full = full_range_codes(weight)
    peak = peaks(rows, full).double()
    can = any_input_can_overflow(full, qmax)
    halves = []
    for channel in range(weight.shape[0]):
        if not bool(can[channel]) or float(peak[channel]) <= HEADROOM_LIMIT:
            halves.append(FULL_HALF_RANGE)
            continue
        fitting = [c for c in CANDIDATES if float(peak[channel]) * c / FULL_HALF_RANGE <= HEADROOM_LIMIT]
        halves.append(fitting[0] if fitting else CANDIDATES[-1])
    return halves
