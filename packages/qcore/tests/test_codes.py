"""``qcore.testing.codes``: exactness in integer codes, with ties bounded.

References here are written by hand: codes chosen, then dequantized with the formula."""

from __future__ import annotations

import torch

from qcore.testing.codes import MAX_OFF_BY_ONE, CodeDiff, compare_codes, compare_outputs

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
