"""Exactness of a quantized model's output, checked in integer codes.

A compiled or lowered int8 model is exact when it produces the codes its reference (the
eager converted model) produces. Where the output is itself dequantized codes, those are
the codes; where the last layer writes float (a conv or linear with no quantize after
it), both outputs are put on the grid a uint8 min/max observer would choose for the
reference's range (``(max - min) / 255``, its zero point), so that one code is one step
of the model's own int8 resolution.

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
and is counted apart (``tie_excused``).

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

__all__ = ["MAX_OFF_BY_ONE", "CodeDiff", "compare_codes", "compare_outputs"]

#: The share of codes a tie may move by one step. fp32 keeps the eager model within about
#: 1e-7 of the kernel's exact integer sums, relatively (measured on this suite's models);
#: for a value of at most 255 steps that is 3e-5 of a step, so only about one code in
#: 10^4 can sit close enough to a half step to round the other way. One in a thousand is
#: ten times that, and still fails a kernel off by one step on 0.3 % of its codes.
MAX_OFF_BY_ONE = 1e-3


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

    @property
    def allowed_off_by_one(self) -> int:
        """At most :data:`MAX_OFF_BY_ONE` of the codes, and at least one code."""
        return max(1, int(self.codes * MAX_OFF_BY_ONE))

    @property
    def exact(self) -> bool:
        """Equal codes, but for ties: none off by more than one step, and at most
        :attr:`allowed_off_by_one` off by one."""
        return (
            self.same_shape
            and self.codes > 0
            and self.worst <= 1
            and self.off_by_one <= self.allowed_off_by_one
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
            + (f"; {self.tie_excused} more on the eager model's own ties" if self.tie_excused else "")
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
    counts by how far it lies. ``variants``: the reference with one of its ties broken the
    other way, each (see the module docstring)."""
    import torch

    reference, output = reference.detach().double(), output.detach().double()
    if reference.shape != output.shape:
        return CodeDiff(reference.numel(), 0, 0, 0.0, 0, same_shape=False)
    if scale is None:
        scale, zero_point = grid(reference)
    codes = torch.round(reference / scale)
    steps = (codes - torch.round(output / scale)).abs()
    if not bool(torch.isfinite(output).all()):
        steps = torch.where(torch.isfinite(output), steps, torch.full_like(steps, 2**31))
    on_ties = torch.zeros_like(steps, dtype=torch.bool)
    for variant in variants:
        if variant.shape == reference.shape:
            on_ties |= torch.round(variant.detach().double() / scale) != codes
    return CodeDiff(
        codes=reference.numel(),
        off_by_one=int(((steps == 1) & ~on_ties).sum()),
        tie_excused=int(((steps == 1) & on_ties).sum()),
        worst=int(steps.max()) if steps.numel() else 0,
        scale=scale,
        zero_point=zero_point,
    )


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
