"""Exactness of a quantized model's output, checked in integer codes.

A compiled or lowered int8 model is exact when it produces the codes its reference (the
eager converted model) produces. Where the output is itself dequantized codes, those are
the codes; where the last layer writes float (a conv or linear with no quantize after
it), both outputs are put on the grid a uint8 min/max observer would choose for the
reference's range (``(max - min) / 255``, its zero point), so that one code is one step
of the model's own int8 resolution. A float output holds values, not codes, so rounding
both onto that grid is not enough (an output off by just under half a step everywhere
would round to the same codes): a value further than :data:`MAX_VALUE_ERROR` of a step
from its reference counts as one step off even where its code is the same.

A relative-L2 tolerance is no substitute: 2e-2 (34 dB) lets a kernel be wrong on a few
outputs by many steps, or on all of them by a fraction of a step. Here every code must be
equal but for ties: a requantize between layers rounds a value that eager computes in
float and the kernel in integers, and the two break a tie at a half step differently only
when the float rounding (a relative 1e-6) lands the value on it. That moves one code by
one step; its effect on an output is a fraction of a step, so it changes an output code
by at most one, rarely. :data:`MAX_OFF_BY_ONE` bounds how rarely. Where ties are not rare
(an average pool's mean of ``N`` codes is a half step about once in ``N``), pass the eager
model's own outputs with its ties broken the other way (``variants``, from
:func:`qcore.testing.ties.tie_variants`): a code one of them changes may be off by one,
the way and as far as they move it, and is counted apart (``tie_excused``): at most
:data:`MAX_TIE_EXCUSED` of the codes, or what one variant moves where that is more.

Third-party lowerings can compare their compiled models with their eager ones the same
way::

    diff = compare_codes(eager_output, compiled_output)
    assert diff.exact, diff
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import Tensor

__all__ = [
    "MAX_OFF_BY_ONE",
    "MAX_TIE_EXCUSED",
    "MAX_VALUE_ERROR",
    "CodeDiff",
    "compare_codes",
    "compare_outputs",
]

#: The share of codes a tie may move by one step. fp32 keeps the eager model within about
#: 1e-7 of the kernel's exact integer sums, relatively (measured on this suite's models);
#: for a value of at most 255 steps that is 3e-5 of a step, so only about one code in
#: 10^4 can sit close enough to a half step to round the other way. One in a thousand is
#: ten times that, and still fails a kernel off by one step on 0.3 % of its codes.
MAX_OFF_BY_ONE = 1e-3

#: The share of codes the eager model's own ties may excuse (``tie_excused``), beyond
#: :data:`MAX_OFF_BY_ONE`, unless a single tie moves more (any one tie may go either way,
#: so the codes one variant moves are always excused: one tie of a 2 x 10 float output
#: moves a sample's ten logits, half of it). A structural tie is the mean of an even
#: number of codes landing on a half step: at most every other value of the layer that
#: computes it (a mean of two, an odd sum). Two correct roundings of a tie (eager's
#: float32 and half to even, a kernel's integers or another summation order) agree where
#: both land on the same side of the half step, so about half of them differ at most: a
#: quarter of the layer's codes. An output with more codes off by one than that is off by
#: one step, not tied, however many codes the variants together could move (every code
#: downstream of a tie is one of them: often most of an output).
MAX_TIE_EXCUSED = 0.25

#: How far (in steps of the grid) a value may lie from its reference and still count as
#: the same code. It matters for an output written in float, whose values are not codes:
#: fp32 keeps the eager model within about 3e-5 of a step of the kernel (above, and
#: measured on this suite's compiled models with float outputs: at most 3.4e-5), and this
#: is thirty times that (the margin :data:`qcore.testing.ties.TIE_MARGIN` gives a tie). A
#: kernel off by a share of a step on every output is off by more than this on every one.
MAX_VALUE_ERROR = 1e-3


@dataclass(frozen=True)
class CodeDiff:
    """Two outputs as uint8 codes on the reference's grid: how many codes, how many differ
    by exactly one step, and the largest difference in steps (``worst``). JSON-ready
    (:meth:`as_dict`), for measurements made in a fresh interpreter."""

    codes: int
    off_by_one: int
    worst: int
    scale: float
    zero_point: int
    same_shape: bool = True
    #: codes off by one step that the eager model itself moves when one of its own
    #: requantize ties breaks the other way (not counted in ``off_by_one``)
    tie_excused: int = 0
    #: the most codes one variant (one tie, or one group of ties) moves
    one_tie_moves: int = 0

    @property
    def allowed_off_by_one(self) -> int:
        """At most :data:`MAX_OFF_BY_ONE` of the codes, and at least one code."""
        return max(1, int(self.codes * MAX_OFF_BY_ONE))

    @property
    def allowed_tie_excused(self) -> int:
        """At most :data:`MAX_TIE_EXCUSED` of the codes, or the codes one variant moves
        where that is more."""
        return max(int(self.codes * MAX_TIE_EXCUSED), self.one_tie_moves)

    @property
    def exact(self) -> bool:
        """Equal codes, but for ties: none off by more than one step, at most
        :attr:`allowed_off_by_one` off by one, and at most :attr:`allowed_tie_excused`
        more off by one on the eager model's own ties."""
        return (
            self.same_shape
            and self.codes > 0
            and self.worst <= 1
            and self.off_by_one <= self.allowed_off_by_one
            and self.tie_excused <= self.allowed_tie_excused
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> CodeDiff:
        return cls(**values)

    def __str__(self) -> str:
        if not self.same_shape:
            return "outputs of different shapes"
        return (
            f"{self.off_by_one} of {self.codes} codes off by one step (at most "
            f"{self.allowed_off_by_one} allowed), worst {self.worst} steps of "
            f"{self.scale:.3g} (zero point {self.zero_point})"
            + (
                f"; {self.tie_excused} more on the eager model's own ties (at most "
                f"{self.allowed_tie_excused} allowed)"
                if self.tie_excused
                else ""
            )
        )


def grid(reference: Tensor) -> tuple[float, int]:
    """The scale and zero point a uint8 min/max observer picks for ``reference``'s range
    (the range always holds 0, as in torch's observers)."""
    low = min(float(reference.min()), 0.0)
    high = max(float(reference.max()), 0.0)
    scale = (high - low) / 255 if high > low else 1.0
    return scale, round(-low / scale)


def compare_codes(
    reference: Tensor,
    output: Tensor,
    *,
    scale: float | None = None,
    zero_point: int = 0,
    variants: Sequence[Tensor] = (),
) -> CodeDiff:
    """``reference`` and ``output`` as codes on one grid: the given ``scale`` and
    ``zero_point`` (the output's own qparams, where it has them), else :func:`grid` of the
    reference. Codes are not clamped to [0, 255], so an output beyond the reference's range
    counts by how far it lies; a value further than :data:`MAX_VALUE_ERROR` of a step from
    its reference is at least one step off. ``variants``: the reference with one of its
    ties broken the other way, each (see the module docstring)."""
    import torch

    reference, output = reference.detach().double(), output.detach().double()
    if reference.shape != output.shape:
        return CodeDiff(reference.numel(), 0, 0, 0.0, 0, same_shape=False)
    if scale is None:
        scale, zero_point = grid(reference)
    codes = torch.round(reference / scale)
    steps = _steps(reference, codes, output, scale)
    if not bool(torch.isfinite(output).all()):
        steps = torch.where(torch.isfinite(output), steps, torch.full_like(steps, 2**31))
    on_ties, one_tie_moves = _ties(reference, codes, output, scale, variants)
    return CodeDiff(
        codes=reference.numel(),
        off_by_one=int(((steps == 1) & ~on_ties).sum()),
        tie_excused=int(((steps == 1) & on_ties).sum()),
        one_tie_moves=one_tie_moves,
        worst=int(steps.max()) if steps.numel() else 0,
        scale=scale,
        zero_point=zero_point,
    )


def _steps(reference: Tensor, codes: Tensor, output: Tensor, scale: float) -> Tensor:
    """How many steps each value of ``output`` lies from ``reference`` (whose codes on the
    grid are ``codes``): the codes' difference, or one where the codes are equal but the
    values are more than :data:`MAX_VALUE_ERROR` of a step apart (a float output)."""
    import torch

    steps = (codes - torch.round(output / scale)).abs()
    apart = (reference - output).abs() > MAX_VALUE_ERROR * scale
    return torch.where((steps == 0) & apart, torch.ones_like(steps), steps)


def _ties(
    reference: Tensor, codes: Tensor, output: Tensor, scale: float, variants: Sequence[Tensor]
) -> tuple[Tensor, int]:
    """Which values of ``output`` the eager model's own ties explain, and the most codes one
    variant moves. A value is explained where a variant moves it, and where it lies no
    further from the reference, each way, than the variants together move it that way
    (each tie broken the other way moves it by its variant's difference; a kernel breaks
    some of them so, not the others): an output off the other way, or by more, is not
    the reference with some of its ties broken the other way."""
    import torch

    moved = torch.zeros_like(reference, dtype=torch.bool)
    down, up = torch.zeros_like(reference), torch.zeros_like(reference)
    one_tie_moves = 0
    for variant in variants:
        if variant.shape != reference.shape:
            continue
        value = variant.detach().double()
        moves = _steps(reference, codes, value, scale) > 0
        moved |= moves
        one_tie_moves = max(one_tie_moves, int(moves.sum()))
        down += (value - reference).clamp(max=0.0)
        up += (value - reference).clamp(min=0.0)
    off, slack = output - reference, MAX_VALUE_ERROR * scale
    return moved & (off >= down - slack) & (off <= up + slack), one_tie_moves


def compare_outputs(reference: Any, output: Any, *, variants: Sequence[Any] = ()) -> list[CodeDiff]:
    """:func:`compare_codes` of each tensor of two outputs (a tensor, or a tuple or list
    of them), in order; a different number of tensors fails as a shape mismatch.
    ``variants``: whole outputs of the reference model with ties broken the other way."""
    references, outputs = _tensors(reference), _tensors(output)
    if len(references) != len(outputs):
        return [CodeDiff(0, 0, 0, 0.0, 0, same_shape=False)]
    per_tensor = [_tensors(v) for v in variants]
    return [
        compare_codes(r, o, variants=[v[i] for v in per_tensor if len(v) == len(references)])
        for i, (r, o) in enumerate(zip(references, outputs, strict=True))
    ]


def _tensors(value: Any) -> Sequence[Tensor]:
    return list(value) if isinstance(value, (tuple, list)) else [value]
