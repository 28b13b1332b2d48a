"""Data movement on codes (max-pool, reshape, cat, a requantize) is exact only between one
(scale, zero point) on both sides: each case on one traced graph lowered without
Inductor (``graph_lowering``), against the same graph run eagerly. With the same qparams
the op runs on the uint8 codes; with others it must keep its requantize.
"""

from __future__ import annotations

from collections.abc import Callable

import graph_lowering as gl
import pytest
import torch
import torch.nn.functional as F
from graph_lowering import dq, q

from qcore.testing.codes import compare_outputs
from qinductor_x86.lowering import ops

#: (scale, zero point) of the codes every op reads, and of the other side where it differs
IN, OTHER = (0.02, 128), (0.03, 100)


def _ops_on_codes(lowered: gl.Lowered) -> list[torch.fx.Node]:
    """Pools, reshapes and cats of the rewritten graph that read and write uint8 codes."""
    moves = (ops.quantized.max_pool2d.default, ops.aten.cat.default, ops.aten.reshape.default, ops.aten.view.default)
    return [n for n in lowered.calls(*moves) if n.meta["val"].dtype == torch.uint8]


def _requantizes(lowered: gl.Lowered) -> list[torch.fx.Node]:
    """Quantizes of the rewritten graph that read a computed value (not a graph input)."""
    return [n for n in lowered.calls(*ops.QUANTIZE) if n.args[0].op != "placeholder"]


def _graph(out: tuple[float, int]) -> Callable[..., tuple[torch.Tensor, ...]]:
    """Max-pool, reshape, cat (with a second input in ``out``'s qparams) and a plain
    requantize, from codes in :data:`IN` to codes in ``out``; each op on its own input, so
    that no dequantize is shared."""

    def graph(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, d: torch.Tensor, e: torch.Tensor) -> tuple[torch.Tensor, ...]:
        pooled = q(F.max_pool2d(dq(q(a, *IN), *IN), 3, 2, 1), *out)
        flat = q(dq(q(b, *IN), *IN).reshape(2, -1), *out)
        joined = q(torch.cat([dq(q(c, *IN), *IN), dq(q(d, *out), *out)], 1), *out)
        requantized = q(dq(q(e, *IN), *IN), *out)
        return tuple(dq(codes, *out) for codes in (pooled, flat, joined, requantized))

    return graph


def _inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return [torch.randn(2, 4, 9, 9, generator=generator) * 2 for _ in range(5)]


def test_data_movement_between_equal_qparams_runs_on_the_codes() -> None:
    """The control: with the same qparams on both sides the ops are rewritten onto the
    codes (so the graphs below are ones the patterns match), exactly."""
    lowered = gl.lower(_graph(IN), _inputs())
    assert len(_ops_on_codes(lowered)) == 3
    assert not _requantizes(lowered)
    diffs = compare_outputs(lowered.eager, lowered.output)
    assert all(d.exact and d.off_by_one == 0 for d in diffs), "; ".join(map(str, diffs))


@pytest.mark.parametrize(
    "other", [OTHER, (IN[0], OTHER[1]), (OTHER[0], IN[1])], ids=["both", "zero point", "scale"]
)
def test_data_movement_between_other_qparams_keeps_its_requantize(other: tuple[float, int]) -> None:
    """The same graph into other qparams (another scale, zero point, or both): moving the
    codes would give them the wrong values, so every op stays float and requantizes, and
    every output is eager's."""
    lowered = gl.lower(_graph(other), _inputs())
    diffs = compare_outputs(lowered.eager, lowered.output)
    assert len(diffs) == 4 and all(d.exact and d.off_by_one == 0 for d in diffs), "; ".join(map(str, diffs))
    assert not _ops_on_codes(lowered)
    assert len(_requantizes(lowered)) == 4
