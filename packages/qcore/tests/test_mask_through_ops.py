"""qcore.pt2e.annotation.observable: an additive mask is recognised through every op that only
moves, broadcasts or casts its values, one exported node of each, and not through an op
that computes new values.

The ops are written out here (the spellings export records for ``x.expand``, ``x.view``,
``x.reshape``, ``x.unsqueeze``, ``x.squeeze(d)``, ``x[:, a:b]``, ``x.permute``, ``x.t()``,
``x.contiguous()``, ``x.clone()``, ``x.to(dtype)``, ``x.t()``, ``x.squeeze((d,))``,
``x[0]``; and, in graphs built by hand, the two Inductor's decompositions make): a mask
behind one the module does not see through would be observed, and its add quantized with
a scale of ~1e36. Together they are ``qcore.pt2e.annotation.ops.SAME_VALUES``. And a
mask is recognised whichever op builds it from its constant (``where`` in each overload,
``masked_fill``, ``full`` and its kin, ``fill``, a scaling ``mul``; the in-place ones as
``export(...).module()`` keeps them): a fill the module does not know hides the mask the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import Tensor, nn

from qcore.pt2e.annotation import observable, ops
from qcore.pt2e.annotation.claims import is_op
from qcore.pt2e.annotation.observable import additive_mask_value
from qcore.zoo.suite.pt2e import exported

aten = torch.ops.aten
MIN = torch.finfo(torch.float32).min

#: each op, and a call of it on the mask
SAME_VALUES: dict[Any, Callable[[Tensor], Tensor]] = {
    aten.expand.default: lambda a: aten.expand.default(a, [6, 6]),
    aten.view.default: lambda a: aten.view.default(a, [6, 6]),
    aten.reshape.default: lambda a: aten.reshape.default(a, [6, 6]),
    aten.unsqueeze.default: lambda a: aten.unsqueeze.default(a, 0),
    aten.squeeze.dim: lambda a: aten.squeeze.dim(aten.unsqueeze.default(a, 0), 0),
    aten.slice.Tensor: lambda a: aten.slice.Tensor(a, 1, 0, 6),
    aten.permute.default: lambda a: aten.permute.default(a, [1, 0]),
    aten.transpose.int: lambda a: aten.transpose.int(a, 0, 1),
    aten.contiguous.default: aten.contiguous.default,
    aten.clone.default: aten.clone.default,
    aten.to.dtype: lambda a: aten.to.dtype(a, torch.float32),
    aten.to.dtype_layout: lambda a: aten.to.dtype_layout(a, dtype=torch.float32, layout=torch.strided),
    aten._to_copy.default: lambda a: aten._to_copy.default(a, dtype=torch.float32),
    aten.t.default: aten.t.default,
    aten.squeeze.dims: lambda a: aten.squeeze.dims(aten.unsqueeze.default(a, 0), [0]),
    aten.select.int: lambda a: aten.select.int(aten.unsqueeze.default(a, 0), 0, 0),
}
#: ops export does not record (Inductor's decompositions make them), each with its call
#: in a graph built by hand
UNEXPORTED: dict[Any, tuple[Any, ...]] = {
    aten._unsafe_view.default: ([6, 6],),
    torch.ops.prims.convert_element_type.default: (torch.float32,),
}
#: ops that compute new values from the mask: what comes out is no mask any more
COMPUTING: dict[str, Callable[[Tensor], Tensor]] = {
    "neg": aten.neg.default,
    "sum": lambda a: aten.sum.dim_IntList(a, [0], True),
    "cumsum": lambda a: aten.cumsum.default(a, 1),
}


class MaskThrough(nn.Module):
    def __init__(self, op: Callable[[Tensor], Tensor]) -> None:
        super().__init__()
        self.op = op

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        additive = torch.where(mask.bool(), torch.zeros(()), MIN)
        return x + self.op(additive)


def _added(op: Callable[[Tensor], Tensor]) -> tuple[float | None, set[object]]:
    """The mask value the add's second input holds, and the graph's ops."""
    gm = exported(MaskThrough(op), (torch.randn(6, 6), torch.ones(6, 6).long()))
    (add,) = [n for n in gm.graph.nodes if n.target == aten.add.Tensor]
    return additive_mask_value(add.args[1], gm), {n.target for n in gm.graph.nodes}


@pytest.mark.parametrize("op", list(SAME_VALUES), ids=str)
def test_a_mask_is_seen_through_each_value_preserving_op(op: Any) -> None:
    value, ops = _added(SAME_VALUES[op])
    assert op in ops  # export kept the op under test
    assert value == MIN


@pytest.mark.parametrize("op", list(UNEXPORTED), ids=str)
def test_a_mask_is_seen_through_each_op_of_inductors_graphs(op: Any) -> None:
    gm = exported(MaskThrough(lambda a: a), (torch.randn(6, 6), torch.ones(6, 6).long()))
    (add,) = [n for n in gm.graph.nodes if n.target == aten.add.Tensor]
    with gm.graph.inserting_before(add):
        moved = gm.graph.call_function(op, (add.args[1], *UNEXPORTED[op]))
    add.args = (add.args[0], moved)
    gm.recompile()
    assert additive_mask_value(moved, gm) == MIN
    assert additive_mask_value(gm.graph.call_function(aten.neg.default, (moved,)), gm) is None


def test_every_op_of_the_shared_set_is_covered_here() -> None:
    assert set(SAME_VALUES) | set(UNEXPORTED) == set(ops.SAME_VALUES)


@pytest.mark.parametrize("name", sorted(COMPUTING))
def test_a_mask_is_not_seen_through_an_op_that_computes(name: str) -> None:
    assert _added(COMPUTING[name])[0] is None


class MaskedFill(nn.Module):
    """The mask built by ``masked_fill`` (zeros where attended, ``finfo.min`` elsewhere)."""

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        return x + torch.zeros(6, 6).masked_fill(~mask.bool(), MIN)


def test_a_mask_built_by_masked_fill_holds_its_fill_value() -> None:
    gm = exported(MaskedFill(), (torch.randn(6, 6), torch.ones(6, 6).long()))
    assert aten.masked_fill.Scalar in {n.target for n in gm.graph.nodes}
    (add,) = [n for n in gm.graph.nodes if n.target == aten.add.Tensor]
    assert additive_mask_value(add.args[1], gm) == MIN


class NestedFills(nn.Module):
    """The fill value sits in the inner of several nested ``where``s, each reading the
    previous one twice (a diamond: a walk that revisits would take 2^depth steps)."""

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        keep = mask.bool()
        additive = torch.where(keep, torch.zeros(()), MIN)
        for _ in range(30):
            additive = torch.where(keep, additive, additive)
        return x + additive


def test_a_fill_nested_in_fills_many_levels_deep_is_found_once() -> None:
    gm = exported(NestedFills(), (torch.randn(6, 6), torch.ones(6, 6).long()))
    (add,) = [n for n in gm.graph.nodes if n.target == aten.add.Tensor]
    assert sum(str(n.target).startswith("aten.where") for n in gm.graph.nodes) == 31
    assert additive_mask_value(add.args[1], gm) == MIN


def test_a_diamond_of_fills_without_a_huge_constant_visits_each_node_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Thirty nested ``where``s each reading the previous one twice, none holding a huge
    constant: the answer is None, found by looking at each node once (a walk that revisits
    would take 2^30 steps: counted here, and stopped at a thousand)."""
    from qcore.pt2e.annotation import observable

    class PlainDiamond(nn.Module):
        def forward(self, x: Tensor, mask: Tensor) -> Tensor:
            keep, additive = mask.bool(), torch.zeros(6, 6) + 1.0
            for _ in range(30):
                additive = torch.where(keep, additive, additive)
            return x + additive

    gm = exported(PlainDiamond(), (torch.randn(6, 6), torch.ones(6, 6).long()))
    (add,) = [n for n in gm.graph.nodes if n.target == aten.add.Tensor and n.args[0].op == "placeholder"]
    looked = []

    def counted(node: object, ops: object) -> bool:
        looked.append(node)
        assert len(looked) < 1000, "the walk revisits nodes"
        return is_op(node, ops)  # type: ignore[arg-type]

    monkeypatch.setattr(observable, "is_op", counted)
    assert additive_mask_value(add.args[1], gm) is None
    assert 0 < len(looked) < 200


#: each op that builds a mask from a constant, and a mask built by it (added to ``x``;
#: ``m`` marks what is attended); ``fill.Scalar`` is what a decomposition makes of ``fill_``
FILLS: dict[Any, Callable[[Tensor, Tensor], Tensor]] = {
    aten.where.self: lambda x, m: torch.where(m.bool(), torch.zeros(6, 6), torch.full((6, 6), MIN)),
    aten.where.ScalarOther: lambda x, m: torch.where(m.bool(), x * 0, MIN),
    aten.where.ScalarSelf: lambda x, m: torch.where(~m.bool(), MIN, x * 0),
    aten.where.Scalar: lambda x, m: torch.where(m.bool(), 0.0, MIN),
    aten.masked_fill.Scalar: lambda x, m: torch.zeros(6, 6).masked_fill(~m.bool(), MIN),
    aten.masked_fill_.Scalar: lambda x, m: torch.zeros(6, 6).masked_fill_(~m.bool(), MIN),
    aten.full.default: lambda x, m: torch.full((6, 6), MIN),
    aten.full_like.default: lambda x, m: torch.full_like(x, MIN),
    aten.new_full.default: lambda x, m: x.new_full((6, 6), MIN),
    aten.fill.Scalar: lambda x, m: torch.zeros(6, 6).fill_(MIN),
    aten.fill_.Scalar: lambda x, m: torch.zeros(6, 6).fill_(MIN),
    aten.mul.Tensor: lambda x, m: (1.0 - m.float()) * MIN,
}


class FilledMask(nn.Module):
    def __init__(self, build: Callable[[Tensor, Tensor], Tensor]) -> None:
        super().__init__()
        self.build = build

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        return x + self.build(x, mask)


@pytest.mark.parametrize("op", list(FILLS), ids=str)
def test_a_mask_built_by_each_constant_fill_holds_its_fill_value(op: Any) -> None:
    example = (torch.randn(6, 6), torch.ones(6, 6).long())
    program = torch.export.export(FilledMask(FILLS[op]), example)
    if op is aten.fill.Scalar:
        program = program.run_decompositions({})
    gm = program.module()
    assert isinstance(gm, torch.fx.GraphModule)
    assert op in {n.target for n in gm.graph.nodes}  # the graph builds the mask with it
    (add,) = [n for n in gm.graph.nodes if n.target == aten.add.Tensor and n.args[0].op == "placeholder"]
    assert additive_mask_value(add.args[1], gm) == MIN


def test_every_constant_fill_is_covered_here() -> None:
    assert set(FILLS) == observable._CONSTANT_FILLS
