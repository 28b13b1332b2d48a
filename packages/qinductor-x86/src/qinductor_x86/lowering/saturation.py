"""The policy for int8 ops that can saturate oneDNN's kernels on the target CPU.

Without VNNI, oneDNN adds the uint8 x int8 products of neighbouring input channels in a
saturating 16-bit lane (see ``qcore.saturation``). Whether an op can overflow at all follows
from its integer weights and the range of its activation codes, both known when the graph
is frozen, so the decision is made per op, exactly:

* an op that cannot overflow (most ops of small models, and every op on a VNNI or AMX
  target) is lowered as usual;
* an op that can overflow is lowered **exactly** by splitting its weight into two halves,
  ``w = hi + lo`` with ``hi = floor(w / 2)`` and ``lo = w - hi``, both in [-64, 64], which
  can never overflow a pair (255 * 64 * 2 = 32640); the two int8 kernels share the input
  and the per-channel scales, their float outputs add up to the full product, and every
  accumulation stays exact. The cost is a second int8 kernel for that op, never a wrong
  number, and ``report()`` lists the op.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from qcore.host import Int8Host
from qcore.saturation import INT16_MAX, worst_case_pair_sum


@dataclass(frozen=True)
class Verdict:
    """``split``: lower as two halves. ``worst``: the largest pair sum the op can reach."""

    split: bool
    worst: int


def judge(weight: torch.Tensor, activation_qmax: int, target: Int8Host) -> Verdict:
    """Whether this op's weights must be split on ``target``.

    ``weight``: the int8 codes, ``(out, in / groups, *kernel)`` (pairs never cross a group);
    ``activation_qmax``: the largest uint8 code its input can hold (its ``quant_max``).
    """
    worst = worst_case_pair_sum(weight, act_max=activation_qmax)
    return Verdict(split=target.saturates_u8s8 and worst > INT16_MAX, worst=worst)


def halves(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``hi + lo == weight`` exactly, each in [-64, 64] (never overflows a pair)."""
    hi = torch.div(weight, 2, rounding_mode="floor")
    return hi, weight - hi
