"""qcore.int8.depth_plan: which layers pay for a doubled reduction and which inputs take 7
bits, within a budget of multiply-adds.

The references are brute force: every assignment of the options (per input: 7 or 8 bits;
per layer on an 8-bit input: narrowed or doubled), its added noise summed by the formula
written here, the best one within the budget.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qcore.int8.depth_plan import DepthPlan, LayerPrice, choose


def _noise(layers: Sequence[LayerPrice], seven: set[str], doubled: set[str]) -> float:
    """Added noise of an assignment: a 7-bit input costs each of its readers its
    ``seven_bit``; on 8 bits a layer that can overflow costs ``narrowed`` unless doubled."""
    total = 0.0
    for layer in layers:
        if layer.group in seven:
            total += layer.seven_bit
        elif layer.can_overflow and layer.key not in doubled:
            total += layer.narrowed
    return total


def _best(layers: Sequence[LayerPrice], allowed: set[str], budget: float) -> float:
    """The least added noise of any assignment whose doublings fit ``budget``."""
    total = sum(layer.macs or 0 for layer in layers)
    groups = sorted({str(layer.group) for layer in layers})
    doublable = [layer for layer in layers if layer.can_overflow and layer.macs]
    best = float("inf")
    for seven_flags in itertools.product((False, True), repeat=len(groups)):
        seven = {g for g, on in zip(groups, seven_flags, strict=True) if on}
        if not seven <= allowed:
            continue
        for flags in itertools.product((False, True), repeat=len(doublable)):
            chosen = [d for d, on in zip(doublable, flags, strict=True) if on]
            if any(d.group in seven for d in chosen):
                continue  # a 7-bit input leaves nothing to double
            if sum(d.macs or 0 for d in chosen) > budget * total:
                continue
            best = min(best, _noise(layers, seven, {str(d.key) for d in chosen}))
    return best


def _layer(key: str, group: str, macs: int, narrowed: float, seven_bit: float = 1e9) -> LayerPrice:
    return LayerPrice(key, group, macs, True, narrowed, seven_bit)


def test_doubles_where_it_removes_the_most_noise_per_multiply_add() -> None:
    """The budget (5 % of 2000 = 100 multiply-adds) fits ``dense`` alone, or ``head`` and
    ``mid`` together: the two small layers remove more noise (7.5 against 5)."""
    layers = [
        _layer("dense", "a", 90, 5.0),
        _layer("head", "b", 50, 4.0),
        _layer("mid", "c", 50, 3.5),
        LayerPrice("rest", "d", 1810, False, 0.0, 1e9),  # cannot overflow: no choice
    ]
    plan = choose(layers, set(), 0.05)
    assert plan.doubled == {"head", "mid"}
    assert plan.doubled_macs == 100 <= 0.05 * plan.total_macs
    assert plan.added_noise == _noise(layers, set(), {"head", "mid"}) == _best(layers, set(), 0.05)


def test_an_input_read_by_several_layers_takes_seven_bits_for_all_of_them() -> None:
    """One observer quantizes a tensor for every layer that reads it: ``left`` alone would
    take 7 bits (0.2 against 1.0), but ``right`` reads the same input and pays 1.5 for them,
    so the input stays on 8 bits (1.1 in all against 1.7). The input of ``p`` and ``q``
    takes 7 bits: 0.3 for both against 2.0."""
    layers = [
        _layer("left", "shared", 10, narrowed=1.0, seven_bit=0.2),
        _layer("right", "shared", 10, narrowed=0.1, seven_bit=1.5),
        _layer("p", "other", 10, narrowed=1.0, seven_bit=0.1),
        _layer("q", "other", 10, narrowed=1.0, seven_bit=0.2),
    ]
    plan = choose(layers, {"shared", "other"}, 0.0)
    assert plan.seven_bit == {"other"} and not plan.doubled
    assert plan.added_noise == _best(layers, {"shared", "other"}, 0.0)
    # an input that cannot take 7 bits (not this quantizer's observer) stays on 8
    assert choose(layers, {"shared"}, 0.0).seven_bit == set()


def test_with_no_budget_nothing_is_doubled_and_with_all_of_it_nothing_is_narrowed() -> None:
    layers = [_layer("x", "a", 10, 1.0), _layer("y", "b", 30, 0.5)]
    assert not choose(layers, set(), 0.0).doubled
    assert choose(layers, set(), 1.0).doubled == {"x", "y"}
    assert choose(layers, set(), 1.0).added_noise == 0


_prices = st.lists(
    st.tuples(
        st.sampled_from("abc"),  # group
        st.integers(1, 100),  # macs
        st.booleans(),  # can overflow
        st.floats(0, 10),  # narrowed
        st.floats(0, 10),  # seven bit
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=200, deadline=None)
@given(_prices, st.sets(st.sampled_from("abc")), st.sampled_from([0.0, 0.05, 0.2, 0.5]))
def test_plans_keep_the_budget_and_never_lose_to_not_doubling(
    prices: list[tuple[str, int, bool, float, float]], allowed: set[str], budget: float
) -> None:
    layers = [
        LayerPrice(f"l{i}", g, macs, over, narrowed if over else 0.0, seven)
        for i, (g, macs, over, narrowed, seven) in enumerate(prices)
    ]
    plan: DepthPlan = choose(layers, allowed, budget)
    assert plan.doubled_macs <= budget * plan.total_macs
    assert plan.doubled_macs == sum(x.macs or 0 for x in layers if x.key in plan.doubled)
    assert plan.seven_bit <= allowed
    assert all(x.can_overflow and x.group not in plan.seven_bit for x in layers if x.key in plan.doubled)
    assert abs(plan.added_noise - _noise(layers, set(plan.seven_bit), set(plan.doubled))) <= 1e-9
    assert plan.added_noise <= _best(layers, allowed, 0.0) + 1e-9
    assert plan.added_noise >= _best(layers, allowed, budget) - 1e-9


def _lower_left_hull(points: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """Andrew's monotone chain: the lower hull from the lowest zero-cost point, cut where the
    noise stops falling (an independent oracle for the planner's greedy steepest steps)."""
    start = min(p for p in points if p[0] == 0)
    right = sorted(p for p in points if p[0] > 0 and p[1] < start[1])
    hull = [start]
    for p in right:
        while len(hull) >= 2:
            (x1, y1), (x2, y2) = hull[-2], hull[-1]
            if (x2 - x1) * (p[1] - y1) - (y2 - y1) * (p[0] - x1) > 0:
                break  # a left turn: hull[-1] stays on the lower hull
            hull.pop()
        hull.append(p)
    lowest = min(range(len(hull)), key=lambda i: hull[i][1])
    return hull[: lowest + 1]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 10_000), st.floats(0, 100, allow_subnormal=False)),
        min_size=1,
        max_size=12,
        unique_by=lambda p: p[0],
    ),
    st.floats(50, 100),
)
def test_each_step_is_the_lower_hulls_next_point(
    points: list[tuple[int, float]], start_noise: float
) -> None:
    """Steps past the first: the gain per extra multiply-add counts from where the chain
    stands, not from zero (a second step to a cheaper but flatter option is the hull's)."""
    from qcore.int8.depth_plan import _hull, _Option

    options = [_Option(0, start_noise, False, ())]
    options += [_Option(m, n, False, (i,)) for i, (m, n) in enumerate(points)]
    expected = _lower_left_hull([(o.macs, o.noise) for o in options])
    got = [(o.macs, o.noise) for o in _hull(options)]
    # collinear points: the oracle drops the middle one, the planner may keep it
    assert [p for p in got if p in expected] == expected
    assert all(_on_segment(p, expected) for p in got if p not in expected), (got, expected)


def _on_segment(p: tuple[int, float], chain: list[tuple[int, float]]) -> bool:
    for (x1, y1), (x2, y2) in itertools.pairwise(chain):
        if x1 <= p[0] <= x2 and abs((x2 - x1) * (p[1] - y1) - (y2 - y1) * (p[0] - x1)) < 1e-6:
            return True
    return False


def test_no_step_is_taken_between_options_of_equal_multiply_adds() -> None:
    """Two options of equal cost whose gains from the start round to the same slope (a
    noise of 1e-20 is lost against 100): the chain steps to one of them and stops there.
    A step to the other would add no multiply-add (a gain per multiply-add of x / 0) to
    remove 1e-20 of noise: every step of the chain adds multiply-adds. (``choose`` never
    builds two options of equal nonzero cost; the chain is checked as the oracle above.)"""
    from qcore.int8.depth_plan import _hull, _Option

    options = [_Option(0, 100.0, False, ()), _Option(10, 1e-20, False, (0,)), _Option(10, 0.0, False, (1,))]
    chain = _hull(options)
    assert chain[0] == options[0] and len(chain) == 2 and chain[1].macs == 10
    assert abs(chain[1].noise) <= 1e-20
    # the oracle agrees: its hull, too, reaches the cost of 10 in one step
    assert [p[0] for p in _lower_left_hull([(o.macs, o.noise) for o in options])] == [0, 10]


def test_a_groups_second_doubling_costs_only_its_own_multiply_adds() -> None:
    """Two layers on one input, each doubled in turn along the group's curve: the budget
    (25 % of 800 = 200) pays for both, 100 each; the second step adds 100 to what the
    first spent, not the 200 its option holds in all."""
    layers = [
        _layer("first", "a", 100, 1.0),
        _layer("second", "a", 100, 0.5),
        LayerPrice("rest", "b", 600, False, 0.0, 1e9),
    ]
    plan = choose(layers, set(), 0.25)
    assert plan.doubled == {"first", "second"}
    assert plan.doubled_macs == 200 == 0.25 * plan.total_macs
    assert plan.added_noise == 0.0 == _best(layers, set(), 0.25)


def test_within_a_group_the_cheapest_noise_per_multiply_add_is_doubled_first() -> None:
    """``big`` removes more noise (2.0) but at 0.02 a multiply-add; ``small`` 1.5 at 0.15:
    the budget (5 % of 200 = 10) fits ``small`` alone, the better of the two first steps."""
    layers = [
        _layer("big", "a", 100, 2.0),
        _layer("small", "a", 10, 1.5),
        LayerPrice("rest", "b", 90, False, 0.0, 1e9),
    ]
    plan = choose(layers, set(), 0.05)
    assert plan.doubled == {"small"}
    assert plan.added_noise == 2.0 == _best(layers, set(), 0.05)


def test_the_step_taken_first_removes_the_most_noise_per_multiply_add_not_the_most_noise_left() -> None:
    """Two groups, one step affordable: ``a`` starts noisier (10, then 9.5 for 100
    multiply-adds: 0.005 per multiply-add), ``b`` quieter (2, then 0 for 100: 0.02). The
    plan doubles ``b``'s layer, which removes more noise for the same multiply-adds."""
    layers = [
        _layer("a1", "a", 100, 0.5),
        _layer("a2", "a", 100_000, 9.5),
        _layer("b1", "b", 100, 2.0),
    ]
    total = sum(layer.macs or 0 for layer in layers)
    plan = choose(layers, set(), budget=150 / total)  # one step of 100, not two
    assert plan.doubled == {"b1"}
    assert plan.doubled_macs == 100


def test_a_groups_next_step_is_priced_by_its_own_cost_not_its_last_steps() -> None:
    """Two groups, one step affordable: ``a``'s next step removes 2 for 100 multiply-adds
    (0.02 per multiply-add; its step after that, 8 more for 100,000, is far flatter), ``b``'s
    only step 1 for 100 (0.01). The plan takes ``a``'s first step: each step's slope is its
    own noise over its own multiply-adds."""
    layers = [
        _layer("a1", "a", 100, 2.0),
        _layer("a2", "a", 100_000, 8.0),
        _layer("b1", "b", 100, 1.0),
    ]
    total = sum(layer.macs or 0 for layer in layers)
    plan = choose(layers, set(), budget=150 / total)  # one step of 100, not two
    assert plan.doubled == {"a1"}
    assert plan.added_noise == 9.0 == _best(layers, set(), 150 / total)


def test_a_layer_price_is_frozen() -> None:
    """Prices are read by several groups' chains: none may change one after the fact."""
    import dataclasses

    price = _layer("a", "g", 10, 1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        price.narrowed = 0.0  # type: ignore[misc]


def test_a_layer_of_unknown_size_counts_for_no_multiply_adds() -> None:
    """``macs=None`` (a layer whose size the plan could not read) adds nothing to the
    total the budget is a share of, and is never doubled: with it, a budget of 0.8 of the
    known layer's 100 multiply-adds still cannot pay that layer's doubling (100)."""
    known = LayerPrice("known", "a", 100, True, 0.5, 1e9)
    unknown = LayerPrice("unknown", "b", None, True, 0.5, 1e9)
    plan = choose([known, unknown], seven_bit_groups=(), budget=0.8)
    assert plan.total_macs == 100
    assert plan.doubled == frozenset() and plan.doubled_macs == 0
    assert choose([known, unknown], seven_bit_groups=(), budget=1.0).doubled == {"known"}
