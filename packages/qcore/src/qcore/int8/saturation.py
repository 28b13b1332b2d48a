"""oneDNN's int8 arithmetic on CPUs without VNNI, emulated, and the weight range it needs.

Without VNNI, oneDNN multiplies uint8 activations by int8 weights with ``vpmaddubsw``: the
products of two neighbouring input channels at the same kernel tap (channels 2j and 2j+1
of a group) are added into one *saturating* int16 lane before the int32 accumulation. A
pair overflows when ``|x0*w0 + x1*w1| > 32767``. Weights in [-64, 63] can never overflow
(255 * 64 * 2 = 32640), whatever the activations; full-range weights overflow whenever two
large same-sign weights meet two large activation codes (uint8 codes include the zero
point, so activations with a zero point near 128 overflow even when their values are
small). Depthwise convolutions pair a channel with padding and never overflow.

This module holds the arithmetic only: :func:`worst_case_pair_sum` (can an op overflow
at all, from its integer weights) and :func:`choose_weight_ranges` (per output channel,
the widest range whose pair sums on calibration inputs stay clear of the int16 limit). The emulation matches the host's kernels: ``tests/test_saturation.py`` compares
it with oneDNN itself on a non-VNNI host.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from qcore.int8.noise import InputStatistics, LayerNoise, weight_codes
from qcore.metrics import sqnr

if TYPE_CHECKING:
    import torch
    from torch import Tensor

__all__ = [
    "CANDIDATE_HALF_RANGES",
    "HEADROOM",
    "INT16_MAX",
    "SAFE_HALF_RANGE",
    "Geometry",
    "range_cost_db",
    "RangeChoice",
    "choose_weight_ranges",
    "codes_near_ties_up",
    "emulate_accumulators",
    "never_overflow_half_ranges",
    "weight_codes",
    "worst_case_pair_sum",
]

INT16_MAX = 32767
INT16_MIN = -32768
#: Symmetric int8 weights are ``round(w / scale)`` with ``scale = amax / half_range``; torch's
#: full range [-128, 127] has half range 127.5. With 63.5 the codes stay in [-64, 64], and
#: 255 * 64 * 2 = 32640 <= 32767: no uint8 activation can overflow a pair.
SAFE_HALF_RANGE = 63.5
#: Narrower ranges tried per channel, from least to most narrowing.
CANDIDATE_HALF_RANGES = (111.5, 95.5, 79.5, SAFE_HALF_RANGE)
#: A channel keeps a range only if its calibration pair sums peak at most this fraction
#: of the int16 limit: held-out inputs reach somewhat beyond what calibration saw.
HEADROOM = 0.9
#: Output positions drawn from the calibration inputs to compare the weight forms.
DEFAULT_SAMPLES = 512
#: Upper bound on the elements of one intermediate tensor of the emulation.
_CHUNK_ELEMENTS = 1 << 23


@dataclass(frozen=True)
class Geometry:
    """How an int8 op reduces over its input: a linear layer, or an N-d convolution."""

    kind: Literal["linear", "conv"]
    stride: tuple[int, ...] = ()
    padding: tuple[int, ...] | str = ()
    dilation: tuple[int, ...] = ()
    groups: int = 1

    @classmethod
    def linear(cls) -> Geometry:
        return cls("linear")

    @classmethod
    def conv(
        cls,
        stride: tuple[int, ...],
        padding: tuple[int, ...] | str,
        dilation: tuple[int, ...],
        groups: int = 1,
    ) -> Geometry:
        return cls("conv", tuple(stride), padding, tuple(dilation), int(groups))


@dataclass(frozen=True)
class RangeChoice:
    """The weight range chosen for each output channel of one layer, and the evidence.

    ``half_ranges[o]``: channel ``o`` is quantized with ``scale = amax / half_ranges[o]``
    (``full_half_range`` for the untouched range). ``sqnr_full`` / ``sqnr_chosen``:
    layer-output SQNR (dB) against the float layer on the sampled calibration inputs,
    under the target's arithmetic, with full-range and with the chosen weights.
    ``saturated`` / ``saturated_chosen``: fraction of sampled outputs where a pair
    overflowed, with full-range and with the chosen weights.
    """

    half_ranges: tuple[float, ...]
    full_half_range: float
    sqnr_full: float
    sqnr_chosen: float
    saturated: float
    saturated_chosen: float = 0.0

    @property
    def narrowed(self) -> int:
        """How many channels got a narrower range than the full one."""
        return sum(h < self.full_half_range for h in self.half_ranges)

    def scale_factors(self) -> Tensor:
        """Per-channel factors turning full-range scales into the chosen ones."""
        import torch

        return self.full_half_range / torch.tensor(self.half_ranges, dtype=torch.float64)


def _even_channels(t: Tensor, dim: int) -> Tensor:
    """Pad one zero channel on ``dim`` when odd: oneDNN pads the reduction the same way."""
    import torch.nn.functional as F

    if t.shape[dim] % 2 == 0:
        return t
    pad = [0, 0] * (t.dim() - 1 - dim) + [0, 1]
    return F.pad(t, pad)


def worst_case_pair_sum(weight_q: Tensor, act_max: int = 255) -> int:
    """The largest ``|x0*w0 + x1*w1|`` any uint8 input in ``[0, act_max]`` can produce.

    ``weight_q``: integer weight codes, ``(out, in / groups, *kernel)`` or ``(out, in)``
    (pairs never cross a group, so grouped weights need no extra argument). A result
    above :data:`INT16_MAX` means the op can overflow on a non-VNNI CPU.
    """
    return int(_worst_pair_per_channel(weight_q, act_max).max())


def _worst_pair_per_channel(weight_q: Tensor, act_max: float) -> Tensor:
    """Per output channel, the largest ``|pair sum|`` any input can produce (float
    weights give the same for float pairs)."""
    import torch

    w = weight_q.detach()
    w = w.to(torch.int64) if not w.is_floating_point() else w.double()
    w = w.reshape(w.shape[0], w.shape[1], -1)  # a linear's (O, I) becomes (O, I, 1)
    w = _even_channels(w, 1)
    pairs = w.reshape(w.shape[0], w.shape[1] // 2, 2, w.shape[2])
    positive = pairs.clamp(min=0).sum(2)
    negative = pairs.clamp(max=0).sum(2)
    return torch.maximum(positive, -negative).amax((1, 2)) * act_max


def never_overflow_half_ranges(
    weight: Tensor, act_max: int = 255, full_half_range: float = 127.5
) -> tuple[float, ...]:
    """Per output channel, the widest half range whose codes no input can overflow.

    The calibration-free rule, for kernels that must be exact on any input: a pair of
    codes may sum to at most ``L = INT16_MAX // act_max`` (128 for uint8 activations).
    Rounding adds at most one to a pair, so a channel whose largest same-sign pair of
    float weights is ``P`` and whose largest weight is ``amax`` gets
    ``min(full, (L - 0.5) * amax / P)`` unless its full-range codes already cannot
    overflow. That is the full range wherever the largest weight's neighbours are small
    or of the other sign, and never below the safe range (``P <= 2 * amax``). Whether the
    full range is safe is decided on the codes (float32 scales), with every weight within
    :data:`_TIE_MARGIN` of a rounding tie rounded away from zero: the converted model's
    quantize computes its scale and the quotient in float32 its own way, and may round
    such a weight up where float64 rounds it down (a pair of 129 on a never-overflow
    layer, seen on MobileNetV3).
    """
    import torch

    w = weight.detach().double()
    limit = INT16_MAX // act_max
    amax = w.reshape(w.shape[0], -1).abs().amax(1)
    peak = _worst_pair_per_channel(w, 1).double()
    safe_at_full = _worst_pair_per_channel(codes_near_ties_up(w, full_half_range), act_max) <= INT16_MAX
    bound = (limit - 0.5) * amax / peak.clamp(min=1e-300)
    # No pair of the bound's codes exceeds L: the largest same-sign pair is L - 0.5 codes
    # before rounding, the two roundings add at most 1 (weights near a tie rounded away
    # from zero included), the clamp to 127 only lowers codes, a float32 scale moves a
    # pair by less than 1e-5 codes and the scale's eps floor only raises a scale; so every
    # pair sum is an integer of at most L, and L * act_max <= INT16_MAX. (A loop that
    # narrowed channels whose codes still overflowed never ran and was removed.)
    halves = torch.where(safe_at_full, full_half_range, bound.clamp(max=full_half_range))
    return tuple(float(h) for h in halves)


#: How close to a rounding tie (in codes) a weight counts as rounding away from zero when
#: a range is checked: float32 scales and quotients differ from float64 by far less.
_TIE_MARGIN = 1e-3


def codes_near_ties_up(weight: Tensor, half_ranges: Tensor | float) -> Tensor:
    """:func:`weight_codes`, with every weight within :data:`_TIE_MARGIN` of a tie
    rounded away from zero (the largest codes any float32 quantize of it can give)."""
    import torch

    _, scales = weight_codes(weight, half_ranges)
    shape = (-1,) + (1,) * (weight.dim() - 1)
    quotient = weight / scales.reshape(shape)
    magnitude = torch.floor(quotient.abs() + 0.5 + _TIE_MARGIN)
    # |quotient| <= 127.5 (the scale's half range), so only the top can pass int8's
    return torch.clamp(torch.sign(quotient) * magnitude, max=127)


def range_cost_db(
    weight: Tensor,
    half_ranges: Sequence[float],
    full_half_range: float,
    input_moments: tuple[float, float],
    input_noise: float,
) -> float:
    """How much more output noise a layer gets from ``half_ranges`` than from the full
    range, in dB, counting both of its int8 noise sources (:class:`qcore.int8.noise.LayerNoise`:
    the weight rounding met by the input, ``input_moments = (E[x], E[x^2])``, and the
    input's rounding ``input_noise = E[dx^2]`` met by the weights). Narrow weights cost
    little where the activations' noise dominates; bounding this per layer bounds the
    network's output noise the same way.
    """
    import torch

    layer = LayerNoise(weight, InputStatistics(*input_moments, input_noise))
    activation_noise = layer.input_rounding()
    narrowed = layer.weight_rounding(torch.tensor(half_ranges, dtype=torch.float64)).total
    narrowed += activation_noise
    full = layer.weight_rounding(full_half_range).total + activation_noise
    if narrowed <= full:
        return 0.0
    return 10 * math.log10(narrowed / full) if full > 0 else math.inf


def _resolve_padding(
    padding: tuple[int, ...] | str, kernel: tuple[int, ...], dilation: tuple[int, ...]
) -> list[tuple[int, int]]:
    if padding == "valid":
        return [(0, 0)] * len(kernel)
    if padding == "same":
        # torch pads 'same' with the odd element on the right
        totals = [d * (k - 1) for k, d in zip(kernel, dilation, strict=True)]
        return [(t // 2, t - t // 2) for t in totals]
    assert not isinstance(padding, str), padding
    return [(p, p) for p in padding]


def _sampled_patches(
    x: Tensor, kernel: tuple[int, ...], geometry: Geometry, count: int, generator: torch.Generator
) -> Tensor:
    """``(count, C, *kernel)`` input patches at distinct random output positions of a
    conv (all of them when there are at most ``count``)."""
    import torch
    import torch.nn.functional as F

    pads = _resolve_padding(geometry.padding, kernel, geometry.dilation)
    flat_pad = [p for pair in reversed(pads) for p in pair]
    view = F.pad(x, flat_pad)
    for axis, (k, s, d) in enumerate(
        zip(kernel, geometry.stride, geometry.dilation, strict=True)
    ):
        view = view.unfold(2 + axis, (k - 1) * d + 1, s)[..., ::d]
    batch, spatial = view.shape[0], view.shape[2 : 2 + len(kernel)]
    total = batch * int(torch.tensor(spatial).prod()) if spatial else batch
    # without replacement, and every position when there are few: drawing with
    # replacement misses a third of them, and the peak pair sum may sit in that third
    if total <= count:
        picks = torch.arange(total)
    else:
        picks = torch.randperm(total, generator=generator)[:count]
    index: list[Tensor] = []
    for size in reversed(spatial):
        index.append(picks % size)
        picks = picks // size
    index.append(picks)
    index.reverse()
    batch_idx, *spatial_idx = index
    patches: Tensor = view[(batch_idx, slice(None), *spatial_idx)]  # type: ignore[index]
    return patches


def _rows(x: Tensor, weight: Tensor, geometry: Geometry, count: int, seed: int) -> Tensor:
    """Sampled reduction inputs, ``(S, C_in, taps)``: the rows the op multiplies with."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    if geometry.kind == "linear":
        rows = x.reshape(-1, x.shape[-1])  # (fewer than count: all of them, in some order)
        return rows[torch.randperm(rows.shape[0], generator=generator)[:count]].unsqueeze(-1)
    kernel = tuple(weight.shape[2:])
    patches = _sampled_patches(x, kernel, geometry, count, generator)
    return patches.reshape(patches.shape[0], patches.shape[1], -1)


def emulate_accumulators(
    rows_u8: Tensor, weight_q: Tensor, groups: int = 1, saturate: bool = True
) -> Tensor:
    """int32 accumulators ``sum(x_u8 * w)`` per (row, output channel), as float64.

    ``rows_u8``: ``(S, C_in, taps)`` uint8 codes; ``weight_q``: ``(O, C_in/groups, taps)``.
    With ``saturate``, pairs of neighbouring channels are clamped to int16 first, as
    oneDNN's non-VNNI kernels do; without it, the exact result (VNNI, AMX).
    """
    import torch

    x = rows_u8.to(torch.float64)
    w = weight_q.to(torch.float64)
    w = w.reshape(w.shape[0], w.shape[1], -1)
    acc = _grouped_matmul(x, w, groups)
    return acc + _saturation_error(x, w, groups) if saturate else acc


def _saturation_error(x: Tensor, w: Tensor, groups: int) -> Tensor:
    """What int16 clamping of channel pairs adds to the exact accumulators, ``(S, O)``."""
    return _pair_stats(x, w, groups)[0]


def _pair_stats(x: Tensor, w: Tensor, groups: int) -> tuple[Tensor, Tensor]:
    """The saturation error ``(S, O)`` and each output channel's peak ``|pair sum|``."""
    import torch

    out_per_group, in_per_group = w.shape[0] // groups, w.shape[1]
    error = torch.zeros(x.shape[0], w.shape[0], dtype=torch.float64)
    peak = torch.zeros(w.shape[0], dtype=torch.float64)
    for g in range(groups):
        xg = _even_channels(x[:, g * in_per_group : (g + 1) * in_per_group], 1)
        wg = _even_channels(w[g * out_per_group : (g + 1) * out_per_group], 1)
        if xg.shape[1] == 2 and (wg[:, 1] == 0).all():
            continue  # one real channel paired with padding: |x * w| <= 255 * 128
        s, c, t = xg.shape
        xp = xg.reshape(s, c // 2, 2, t)
        wp = wg.reshape(wg.shape[0], c // 2, 2, t)
        step = max(1, _CHUNK_ELEMENTS // max(1, s * (c // 2) * t))
        for start in range(0, wg.shape[0], step):
            pair = torch.einsum("spct,opct->sopt", xp, wp[start : start + step])
            first = g * out_per_group + start
            stop = first + pair.shape[1]
            error[:, first:stop] = (pair.clamp(INT16_MIN, INT16_MAX) - pair).sum((2, 3))
            peak[first:stop] = pair.abs().amax((0, 2, 3))
    return error, peak


def choose_weight_ranges(
    weight: Tensor,
    inputs: Tensor,
    input_qparams: tuple[float, int, int, int],
    geometry: Geometry,
    full_qrange: tuple[int, int] = (-128, 127),
    *,
    samples: int = DEFAULT_SAMPLES,
    seed: int = 0,
) -> RangeChoice:
    """Per output channel, the widest weight range that leaves headroom on a saturating CPU.

    ``input_qparams``: ``(scale, zero_point, quant_min, quant_max)`` of the layer's uint8
    input. The layer's int16 pair sums are emulated on up to ``samples`` output positions
    of ``inputs`` (calibration data). Pair sums scale with the weight codes, so a channel
    that no input can overflow, or whose peak with full-range weights is at most
    :data:`HEADROOM` of the int16 limit, keeps the full range (and a layer where that
    holds everywhere is untouched); another
    takes the widest of :data:`CANDIDATE_HALF_RANGES` that brings its peak under that
    line, down to the safe range, which no input can overflow. The headroom is for inputs
    calibration never showed: int8 kernels that overflow on them are silently wrong,
    while a slightly narrower range costs a fraction of a bit.
    """
    import torch

    scale, zero_point, qmin, qmax = input_qparams
    rows = _rows(inputs.detach().float(), weight, geometry, samples, seed).double()
    rows_u8 = torch.clamp(torch.round(rows / scale) + zero_point, qmin, qmax)
    w = weight.detach().double().reshape(weight.shape[0], weight.shape[1], -1)
    reference = _grouped_matmul(rows, w, geometry.groups)
    full_half = (full_qrange[1] - full_qrange[0]) / 2
    limit = HEADROOM * INT16_MAX

    def emulate(half_ranges: Tensor | float) -> tuple[Tensor, Tensor, Tensor]:
        codes, w_scale = weight_codes(w, half_ranges)
        error, peak = _pair_stats(rows_u8, codes, geometry.groups)
        acc = _grouped_matmul(rows_u8, codes, geometry.groups) + error
        # oneDNN subtracts the zero point's contribution exactly, in int32
        return (acc - zero_point * codes.sum((1, 2))) * scale * w_scale, error, peak

    full_output, full_error, full_peak = emulate(full_half)
    # a channel no input can overflow keeps its range, whatever calibration showed
    overflowable = _worst_pair_per_channel(weight_codes(w, full_half)[0], int(qmax)) > INT16_MAX
    halves = torch.full((w.shape[0],), full_half, dtype=torch.float64)
    for candidate in sorted((h for h in CANDIDATE_HALF_RANGES if h < full_half), reverse=True):
        too_high = overflowable & (full_peak * (halves / full_half) > limit)
        halves = torch.where(too_high, torch.full_like(halves, candidate), halves)
    if bool((halves == full_half).all()):
        chosen_output, chosen_error = full_output, full_error
    else:
        chosen_output, chosen_error, _ = emulate(halves)
    return RangeChoice(
        tuple(float(h) for h in halves),
        full_half,
        sqnr(reference, full_output),
        sqnr(reference, chosen_output),
        float((full_error != 0).double().mean()),
        float((chosen_error != 0).double().mean()),
    )


def _grouped_matmul(rows: Tensor, w: Tensor, groups: int) -> Tensor:
    """``(S, C, T) x (O, C/groups, T) -> (S, O)``: a grouped conv at sampled positions."""
    import torch

    out_per_group, in_per_group = w.shape[0] // groups, w.shape[1]
    parts = [
        torch.einsum(
            "sct,oct->so",
            rows[:, g * in_per_group : (g + 1) * in_per_group],
            w[g * out_per_group : (g + 1) * out_per_group],
        )
        for g in range(groups)
    ]
    return torch.cat(parts, 1)
