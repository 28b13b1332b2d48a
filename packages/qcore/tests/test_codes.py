"""``qcore.testing.codes``: exactness in integer codes, with ties bounded.

References here are written by hand: codes chosen, then dequantized with the formula."""

from __future__ import annotations

import torch

from qcore.testing.codes import (
    MAX_OFF_BY_ONE,
    MAX_TIE_EXCUSED,
    MAX_VALUE_ERROR,
    CodeDiff,
    compare_codes,
    compare_outputs,
)

SCALE, ZERO_POINT = 0.05, 17


def _dequantized(codes: torch.Tensor) -> torch.Tensor:
    return (codes.double() - ZERO_POINT) * SCALE


def _codes(n: int = 10_000, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 256, (n,), generator=torch.Generator().manual_seed(seed))


def test_equal_outputs_are_exact() -> None:
    reference = _dequantized(_codes()).float()
    diff = compare_codes(reference, reference.clone())
    assert diff == CodeDiff(10_000, 0, 0, diff.scale, diff.zero_point)
    assert diff.exact


def test_the_outputs_own_qparams_recover_its_codes() -> None:
    codes = _codes()
    moved = codes.clone()
    moved[:7] += 1
    diff = compare_codes(_dequantized(codes), _dequantized(moved), scale=SCALE, zero_point=ZERO_POINT)
    assert (diff.off_by_one, diff.worst) == (7, 1)
    assert diff.exact  # 7 <= 10


def test_ties_are_bounded_in_number() -> None:
    codes = _codes()
    allowed = int(10_000 * MAX_OFF_BY_ONE)
    assert allowed == 10
    for moved_codes, exact in ((allowed, True), (allowed + 1, False), (30, False)):
        moved = codes.clone()
        moved[:moved_codes] += 1
        diff = compare_codes(_dequantized(codes), _dequantized(moved), scale=SCALE, zero_point=0)
        assert diff.off_by_one == moved_codes and diff.exact is exact, (moved_codes, str(diff))


def test_one_code_two_steps_off_is_not_exact() -> None:
    codes = _codes()
    moved = codes.clone()
    moved[123] += 2
    diff = compare_codes(_dequantized(codes), _dequantized(moved), scale=SCALE)
    assert (diff.off_by_one, diff.worst, diff.exact) == (0, 2, False)


def test_a_small_output_may_have_one_tie() -> None:
    codes = _codes(20)
    moved = codes.clone()
    moved[0] += 1
    assert compare_codes(_dequantized(codes), _dequantized(moved), scale=SCALE).exact
    moved[1] -= 1
    assert not compare_codes(_dequantized(codes), _dequantized(moved), scale=SCALE).exact


def test_a_float_output_is_put_on_its_references_uint8_grid() -> None:
    """A layer that writes float: the grid of a uint8 min/max observer of the reference,
    so a 0.3 % error everywhere (a kernel slightly off on every output) moves many codes."""
    reference = torch.randn(4096, generator=torch.Generator().manual_seed(1))
    diff = compare_codes(reference, reference * (1 + 1e-7))
    expected_scale = (float(reference.max()) - float(reference.min())) / 255
    assert abs(diff.scale - expected_scale) < 1e-12
    assert diff.zero_point == round(-float(reference.min()) / expected_scale)
    assert diff.exact
    skewed = compare_codes(reference, reference * 1.003)
    assert skewed.worst == 1 and not skewed.exact, str(skewed)


def test_a_float_output_off_by_under_half_a_step_everywhere_is_not_exact() -> None:
    """A float output (a float op after a dequantize, say) whose values sit on its grid's
    codes, written 0.4 of a step too high everywhere: every value still rounds to its
    reference's code, and none is the reference's value."""
    reference = _dequantized(_codes(4096)).float()
    step = (float(reference.max()) - min(float(reference.min()), 0.0)) / 255  # grid()
    for error in (0.4, 0.01, 2 * MAX_VALUE_ERROR):
        off = compare_codes(reference, reference + error * step)
        assert (off.off_by_one, off.worst, off.exact) == (4096, 1, False), (error, str(off))
    # fp32's own rounding of a value is far inside the bound
    assert compare_codes(reference, reference + MAX_VALUE_ERROR / 2 * step).exact


def test_a_small_float_output_off_by_a_hundredth_of_a_step_is_not_exact() -> None:
    """80 random values (an MLP's 8 x 10 logits), each 1 % of a step too high: on the grid
    alone about one code in a hundred would round the other way, which one code allows."""
    reference = torch.randn(8, 10, generator=torch.Generator().manual_seed(3))
    step = (float(reference.max()) - float(reference.min())) / 255
    diff = compare_codes(reference, reference + 0.01 * step)
    assert (diff.off_by_one, diff.exact) == (80, False), str(diff)


def _single_ties(codes: torch.Tensor, size: int) -> list[torch.Tensor]:
    """Variants that each move ``size`` codes of their own one step up (one tie each)."""
    variants = []
    for start in range(0, len(codes), size):
        moved = codes.clone()
        moved[start : start + size] += 1
        variants.append(_dequantized(moved))
    return variants


def test_tie_excuses_are_bounded_in_number() -> None:
    """Ties that together move every code excuse at most a quarter of them: a kernel one
    step up on more codes than that is not exact, each of its codes a variant's."""
    codes = _codes(1000)
    allowed = int(1000 * MAX_TIE_EXCUSED)
    assert allowed == 250
    variants = _single_ties(codes, 10)
    for moved_codes, exact in ((allowed, True), (allowed + 1, False), (1000, False)):
        moved = codes.clone()
        moved[:moved_codes] += 1
        diff = compare_codes(_dequantized(codes), _dequantized(moved), scale=SCALE, variants=variants)
        assert (diff.off_by_one, diff.tie_excused) == (0, moved_codes), str(diff)
        assert diff.exact is exact, str(diff)
    assert f"(at most {allowed} allowed)" in str(diff)


def test_one_tie_may_move_more_than_the_share() -> None:
    """One tie may go either way whatever it moves (a tie early in a network moves much of
    its output): the codes of the variant that moves the most are excused, not more."""
    codes = _codes(1000)
    one_tie = codes.clone()
    one_tie[:600] += 1
    variants = [_dequantized(one_tie), *_single_ties(codes, 10)]
    diff = compare_codes(_dequantized(codes), _dequantized(one_tie), scale=SCALE, variants=variants)
    assert (diff.off_by_one, diff.tie_excused, diff.allowed_tie_excused) == (0, 600, 600)
    assert diff.exact, str(diff)
    more = one_tie.clone()
    more[600] += 1  # and one more tie, of a variant that moves ten codes
    diff = compare_codes(_dequantized(codes), _dequantized(more), scale=SCALE, variants=variants)
    assert (diff.tie_excused, diff.exact) == (601, False), str(diff)


def test_a_tie_excuses_a_code_only_the_way_its_variant_moves_it() -> None:
    """A code one step down where the tie moves it one step up is not the eager model with
    that tie broken the other way."""
    codes = _codes(1000)
    variants = _single_ties(codes, 10)
    down = codes.clone()
    down[:5] -= 1
    diff = compare_codes(_dequantized(codes), _dequantized(down), scale=SCALE, variants=variants)
    assert (diff.off_by_one, diff.tie_excused, diff.exact) == (5, 0, False), str(diff)


def test_a_float_output_moved_by_ties_is_excused_only_as_far_as_they_move_it() -> None:
    """Ties upstream of a float-output layer move its values by shares of a step (here a
    third each, two ties overlapping on five values), rounding to the same codes: the
    variants excuse those values, by up to what the ties together move them, no others."""
    reference = _dequantized(_codes(400)).float()
    first, second = torch.zeros(400), torch.zeros(400)
    first[:10], second[5:15] = SCALE / 3, SCALE / 3
    variants = [reference + first, reference + second]
    both = compare_codes(reference, reference + first + second, scale=SCALE, variants=variants)
    assert (both.off_by_one, both.tie_excused, both.exact) == (0, 15, True), str(both)
    elsewhere = compare_codes(reference, reference + first.flip(0), scale=SCALE, variants=variants)
    assert (elsewhere.off_by_one, elsewhere.tie_excused) == (10, 0), str(elsewhere)
    assert not elsewhere.exact
    # a tie that moves every value by a third of a step excuses no error of 0.4 of a step
    everywhere = [reference + SCALE / 3]
    off = compare_codes(reference, reference + 0.4 * SCALE, scale=SCALE, variants=everywhere)
    assert (off.off_by_one, off.tie_excused, off.exact) == (400, 0, False), str(off)
    # the tie's move with a kernel's float32 rounding on top is still the tie's
    tied = everywhere[0].double() + MAX_VALUE_ERROR / 2 * SCALE
    assert compare_codes(reference, tied, scale=SCALE, variants=everywhere).exact


def test_outputs_beyond_the_references_range_are_not_clamped() -> None:
    reference = torch.linspace(-1, 1, 256)
    output = reference.clone()
    output[-1] = 3.0  # 2 beyond the range's end, which is 255 steps of 2 / 255 wide
    assert compare_codes(reference, output).worst in (254, 255, 256)  # (rounding halves)


def test_a_different_shape_or_a_non_finite_value_is_never_exact() -> None:
    reference = torch.linspace(-1, 1, 256)
    assert not compare_codes(reference, reference[:-1]).exact
    assert not compare_codes(reference, reference.reshape(16, 16)).exact
    broken = reference.clone()
    broken[3] = float("nan")
    assert not compare_codes(reference, broken).exact


def test_each_output_of_a_tuple_is_compared_on_its_own_grid() -> None:
    small, large = torch.linspace(-1, 1, 64), torch.linspace(-100, 100, 64)
    moved = large.clone()
    moved[5] += 200 / 255 * 2.5  # 2.5 of its own steps
    diffs = compare_outputs((small, large), (small.clone(), moved))
    assert [d.exact for d in diffs] == [True, False]
    assert not compare_outputs((small, large), (small,))[0].exact
    assert compare_outputs(small, small.clone())[0].exact
    assert CodeDiff.from_dict(diffs[1].as_dict()) == diffs[1]
