"""Which int8 layers pay for a doubled reduction, and which inputs drop to 7 bits, within a
budget of multiply-adds.

On a CPU without VNNI a layer whose int8 weights and uint8 input can overflow an int16
pair (see :mod:`qcore.int8.saturation`) is computed exactly in one of three ways:

* **narrowed weights**: the channels that can overflow get the widest range no input can
  overflow (:func:`qcore.int8.saturation.never_overflow_half_ranges`); the weights'
  rounding noise grows;
* **a 7-bit input**: codes in ``[0, 127]`` never overflow a pair of full-range weights
  (``2 * 127 * 128 = 32512``); the input's rounding noise grows, for every layer that
  reads that tensor, because one observer quantizes it for all of them;
* **a doubled reduction** (the x86 lowering's route): full accuracy at twice the layer's
  multiply-adds.

:func:`choose` prices each layer's options in added output noise relative to the
layer's own output (:mod:`qcore.int8.noise`), picks per input tensor the cheaper of
7 bits and 8 bits, and then spends the budget on the doublings that remove the most noise
per extra multiply-add: per tensor, the options form a curve of noise against
multiply-adds, and the budget goes to the steepest segments of all curves first (the
greedy rule of a multiple-choice knapsack on convex curves). Plain numbers in, a plan
out: no torch here.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["DOUBLED_MAC_BUDGET", "DepthPlan", "LayerPrice", "choose"]

#: The default budget: doubled reductions may add this fraction of the multiply-adds of
#: the model's int8 layers at single depth. The aim is at most 5 % more time than
#: torchao's single-depth model; a doubled kernel also reads its split weights twice and
#: costs about a tenth more than its multiply-adds (measured: 5.0 % doubled multiply-adds
#: made a MobileNetV2-style net 5.5 % slower, benchmarks/README.md), hence 4.5 %.
DOUBLED_MAC_BUDGET = 0.045


@dataclass(frozen=True)
class LayerPrice:
    """One weighted int8 layer, priced.

    ``group``: the observer of its input (a tensor read by several layers has one).
    ``macs``: multiply-adds per sample (None: unknown, never doubled). ``can_overflow``:
    whether its full-range weights can overflow a pair on its 8-bit input. ``narrowed`` /
    ``seven_bit``: the output noise the layer gains, relative to its output's power, with
    never-overflow weights on an 8-bit input / full-range weights on a 7-bit input.
    """

    key: Hashable
    group: Hashable
    macs: int | None
    can_overflow: bool
    narrowed: float
    seven_bit: float


@dataclass(frozen=True)
class DepthPlan:
    """The choice: inputs quantized to 7 bits (by group), layers on a doubled reduction;
    every other layer that can overflow gets never-overflow weights on an 8-bit input."""

    seven_bit: frozenset[Hashable]
    doubled: frozenset[Hashable]
    total_macs: int
    doubled_macs: int
    #: the summed relative noise the plan adds over full-range weights on 8-bit inputs
    added_noise: float


class _Option(NamedTuple):
    macs: int
    noise: float
    seven_bit: bool
    doubled: tuple[Hashable, ...]


def _options(readers: Sequence[LayerPrice], seven_allowed: bool) -> list[_Option]:
    """A group's options: 7 bits, or 8 bits with its best ``k`` doublings for each ``k``."""
    overflowing = [r for r in readers if r.can_overflow]
    base = sum(r.narrowed for r in overflowing)
    options = [_Option(0, base, False, ())]
    if seven_allowed:
        options.append(_Option(0, sum(r.seven_bit for r in readers), True, ()))
    priced = [(r, r.macs) for r in overflowing if r.macs]  # (unknown size: never doubled)
    priced.sort(key=lambda p: p[0].narrowed / p[1], reverse=True)
    macs, noise = 0, base
    doubled: tuple[Hashable, ...] = ()
    for reader, reader_macs in priced:
        macs += reader_macs
        noise -= reader.narrowed
        doubled = (*doubled, reader.key)
        options.append(_Option(macs, max(noise, 0.0), False, doubled))
    return options


def _hull(options: list[_Option]) -> list[_Option]:
    """The lower convex chain from the cheapest zero-cost option: each step the option
    that removes the most noise per extra multiply-add."""
    chain = [min((o for o in options if o.macs == 0), key=lambda o: (o.noise, o.seven_bit))]
    for _ in options:  # each step adds multiply-adds: never more steps than options
        here = chain[-1]
        better = [o for o in options if o.macs > here.macs and o.noise < here.noise]
        if not better:
            break
        chain.append(max(better, key=lambda o: ((here.noise - o.noise) / (o.macs - here.macs), -o.macs)))
    return chain


def _slope(chain: list[_Option], i: int) -> float:
    """Noise removed per extra multiply-add by step ``i`` of a group's chain."""
    return (chain[i].noise - chain[i + 1].noise) / (chain[i + 1].macs - chain[i].macs)


def choose(
    layers: Sequence[LayerPrice],
    seven_bit_groups: Collection[Hashable],
    budget: float = DOUBLED_MAC_BUDGET,
) -> DepthPlan:
    """The plan for ``layers``: ``seven_bit_groups`` are the inputs whose observer can take
    7 bits; doublings add at most ``budget`` times the layers' single-depth multiply-adds
    (layers of unknown size count for none and are never doubled)."""
    groups: dict[Hashable, list[LayerPrice]] = {}
    for layer in layers:
        groups.setdefault(layer.group, []).append(layer)
    total = sum(layer.macs or 0 for layer in layers)
    allowance = budget * total
    chains = {g: _hull(_options(readers, g in seven_bit_groups)) for g, readers in groups.items()}
    position = dict.fromkeys(chains, 0)
    blocked: set[Hashable] = set()
    spent = 0
    while True:
        # each group's next step only (its later ones need it): the steepest first; equal
        # slopes keep the groups' order (max returns the first of equals)
        open_groups = [g for g in chains if g not in blocked and position[g] + 1 < len(chains[g])]
        if not open_groups:
            break
        g = max(open_groups, key=lambda g: _slope(chains[g], position[g]))
        here, step = chains[g][position[g]], chains[g][position[g] + 1]
        cost = step.macs - here.macs
        if spent + cost > allowance:
            blocked.add(g)
            continue
        spent += cost
        position[g] += 1
    chosen = {g: chains[g][position[g]] for g in chains}
    return DepthPlan(
        seven_bit=frozenset(g for g, o in chosen.items() if o.seven_bit),
        doubled=frozenset(k for o in chosen.values() for k in o.doubled),
        total_macs=total,
        doubled_macs=sum(o.macs for o in chosen.values()),
        added_noise=sum(o.noise for o in chosen.values()),
    )
