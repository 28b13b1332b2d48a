"""``qcore.testing.ties``: outputs of a converted model with its own requantize ties
broken the other way, and ``compare_outputs`` excusing exactly the codes they move.

The model is written by hand: quantize, dequantize, a mean of two codes (an average
pool), quantize again. With a power-of-two scale every mean of an odd pair sum is a half
step in exact float32 arithmetic, so which codes are ties is known without the code under
test."""

from __future__ import annotations

import pytest
import torch
import torchao.quantization.pt2e  # noqa: F401  (registers torch.ops.quantized_decomposed)
from torch import fx

from qcore.testing.codes import compare_codes, compare_outputs
from qcore.testing.ties import MAX_VARIANTS, tie_variants

SCALE = 0.25


def _pool_of_two(x: torch.Tensor) -> torch.Tensor:
    ops = torch.ops.quantized_decomposed
    q = ops.quantize_per_tensor.default(x, SCALE, 0, 0, 255, torch.uint8)
    d = ops.dequantize_per_tensor.default(q, SCALE, 0, 0, 255, torch.uint8)
    pooled = torch.nn.functional.avg_pool1d(d.unsqueeze(0), 2).squeeze(0)
    q2 = ops.quantize_per_tensor.default(pooled, SCALE, 0, 0, 255, torch.uint8)
    return ops.dequantize_per_tensor.default(q2, SCALE, 0, 0, 255, torch.uint8)


def _model() -> fx.GraphModule:
    return fx.symbolic_trace(_pool_of_two)


def _input(codes: list[int]) -> torch.Tensor:
    return torch.tensor(codes, dtype=torch.float32) * SCALE


#: pairs (10, 11): mean 10.5, a tie (torch rounds it to 10, half to even);
#: pairs (10, 12): mean 11, no tie
TIED, UNTIED = [10, 11] * 4, [10, 12] * 4


def test_no_tie_no_variant() -> None:
    assert tie_variants(_model(), (_input(UNTIED),)) == []


def test_each_tie_is_broken_the_other_way_in_its_own_variant() -> None:
    x = _input(TIED + UNTIED)
    eager = _model()(x)
    variants = tie_variants(_model(), (x,))
    assert len(variants) == 4
    for i, variant in enumerate(variants):
        moved = ((variant - eager) / SCALE).round().int().tolist()
        assert moved == [1 if j == i else 0 for j in range(8)], moved


def test_a_kernel_that_breaks_the_ties_upwards_is_exact_only_with_the_variants() -> None:
    # four tied outputs of sixteen: a quarter, as many as MAX_TIE_EXCUSED lets ties excuse
    x = _input(TIED + UNTIED * 3)
    eager = _model()(x)
    upwards = eager + torch.tensor([SCALE] * 4 + [0.0] * 12)
    plain = compare_codes(eager, upwards, scale=SCALE)
    assert (plain.off_by_one, plain.exact) == (4, False)
    variants = tie_variants(_model(), (x,))
    excused = compare_codes(eager, upwards, scale=SCALE, variants=variants)
    assert (excused.off_by_one, excused.tie_excused, excused.exact) == (0, 4, True)
    assert "4 more on the eager model's own ties (at most 4 allowed)" in str(excused)

    # whole outputs, on the grid of the reference's range: pairs (0, 0) and (255, 255) make
    # it [0, 255 * SCALE], one code per SCALE
    x = _input([*TIED, 0, 0, 255, 255, *UNTIED * 3])
    eager = _model()(x)
    upwards = eager + torch.tensor([SCALE] * 4 + [0.0] * 14)
    variants = [(v,) for v in tie_variants(_model(), (x,))]
    (whole,) = compare_outputs((eager,), (upwards,), variants=variants)
    assert (whole.scale, whole.off_by_one, whole.tie_excused, whole.exact) == (SCALE, 0, 4, True)


def test_ties_excuse_at_most_a_quarter_of_the_codes() -> None:
    """Half the outputs tied, all broken upwards: each is one a variant moves, and still
    too many to be ties (MAX_TIE_EXCUSED)."""
    x = _input(TIED + UNTIED)
    eager = _model()(x)
    upwards = eager + torch.tensor([SCALE] * 4 + [0.0] * 4)
    diff = compare_codes(eager, upwards, scale=SCALE, variants=tie_variants(_model(), (x,)))
    assert (diff.off_by_one, diff.tie_excused, diff.exact) == (0, 4, False), str(diff)
    assert "(at most 2 allowed)" in str(diff)


@pytest.mark.parametrize("where", [slice(4, 6), slice(0, 1)])
def test_codes_off_elsewhere_or_by_two_still_fail(where: slice) -> None:
    x = _input(TIED + UNTIED)
    eager = _model()(x)
    variants = tie_variants(_model(), (x,))
    wrong = eager.clone()
    # two untied codes off by one, or a tied code off by two
    wrong[where] += SCALE * (1 if where.start == 4 else 2)
    diff = compare_codes(eager, wrong, scale=SCALE, variants=variants)
    assert not diff.exact, diff


def test_many_ties_are_grouped() -> None:
    x = _input([10, 11] * (MAX_VARIANTS * 3))
    variants = tie_variants(_model(), (x,))
    assert len(variants) == MAX_VARIANTS
    eager = _model()(x)
    moved = torch.zeros(eager.shape, dtype=torch.bool)
    for variant in variants:
        moved |= variant != eager
    assert bool(moved.all())


def _pool_then_transpose(x: torch.Tensor) -> torch.Tensor:
    ops = torch.ops.quantized_decomposed
    q = ops.quantize_per_tensor.default(x, SCALE, 0, 0, 255, torch.uint8)
    d = ops.dequantize_per_tensor.default(q, SCALE, 0, 0, 255, torch.uint8)
    pooled = torch.nn.functional.avg_pool1d(d, 2).t()  # strided, as attention's views are
    q2 = ops.quantize_per_tensor.default(pooled, SCALE, 0, 0, 255, torch.uint8)
    return ops.dequantize_per_tensor.default(q2, SCALE, 0, 0, 255, torch.uint8)


def test_a_strided_requantize_is_flipped_in_its_logical_order() -> None:
    model = fx.symbolic_trace(_pool_then_transpose)
    # rows pool to (10.5, 11) and (11, 10.5): ties at [0][0] and [1][1], in logical order
    x = _input([10, 11, 10, 12, 10, 12, 10, 11]).reshape(2, 4)
    eager = model(x)
    moved = [((v - eager) / SCALE).round().int().tolist() for v in tie_variants(model, (x,))]
    assert moved == [[[1, 0], [0, 0]], [[0, 0], [0, 1]]], moved


def test_a_module_without_a_graph_is_named() -> None:
    with pytest.raises(TypeError, match=r"got Linear, not a torch\.fx\.GraphModule"):
        tie_variants(torch.nn.Linear(2, 2), (torch.ones(2),))  # type: ignore[arg-type]
