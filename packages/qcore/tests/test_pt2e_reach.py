"""qcore.pt2e.range_reach: how much of a layer's relative noise its residual adds let
through, from the observers around them; and the ``budgeted`` plan that weighs prices by it.

The factors are checked against values worked out by hand from the powers given here, and
the plan's choice against codes that can or cannot overflow (brute force, ``int16_pairs``).
"""

from __future__ import annotations

import int16_pairs as pairs
import pytest
import torch
from test_pt2e_plan import GatedTwin, _layers, _quantizer
from torch import Tensor, nn
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from qcore import host
from qcore.int8.depth_plan import DOUBLED_MAC_BUDGET
from qcore.pt2e.range_reach import residual_paths


class TwoBlocks(nn.Module):
    """``a`` is the branch of the first add, ``b`` of the second, ``head`` reads the last."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.head = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x: Tensor) -> Tensor:
        y = x + self.a(x)
        z = self.b(y) + y
        return self.head(z)


def _graph() -> dict[str, torch.fx.Node]:
    gm = torch.export.export(TwoBlocks(), (torch.randn(2, 8),)).module()
    return {n.name: n for n in gm.graph.nodes}


def _reach(mapping_by_name: dict[object, str], powers: dict[str, float]) -> dict[str, float]:
    nodes = _graph()

    def key(k: object) -> object:
        return tuple(nodes[n] for n in k) if isinstance(k, tuple) else nodes[str(k)]

    mapping = {key(k): v for k, v in mapping_by_name.items()}
    layers = {name: nodes[name] for name in ("linear", "linear_1", "linear_2")}
    paths = residual_paths(nodes.values(), mapping, layers)
    return paths.reach(powers.get)


def test_the_graph_is_what_the_factors_below_assume() -> None:
    nodes = _graph()
    assert [nodes["add"].args[0].name, nodes["add"].args[1].name] == ["x", "linear"]
    assert [nodes["add_1"].args[0].name, nodes["add_1"].args[1].name] == ["linear_1", "add"]
    assert nodes["linear_2"].args[0] is nodes["add_1"]


def test_a_branch_without_an_observer_gets_the_share_its_trunk_leaves() -> None:
    """``b``'s output has no observer: its share of ``P(z) = 8`` is ``1 - P(y) / P(z)``
    with ``P(y) = 4``. ``a``: ``1 - 3 / 4`` at the first add, then ``y`` reaches the
    second add both as ``b``'s input (share 1/2) and as its trunk (``4 / 8``). ``head``
    reaches the output through no add."""
    reach = _reach({("x", "add"): "x", ("add", "add_1"): "y", "add_1": "z"}, {"x": 3.0, "y": 4.0, "z": 8.0})
    assert reach == pytest.approx({"linear": 0.25 * 0.5, "linear_1": 0.5, "linear_2": 1.0})


def test_an_observed_operand_gets_its_own_share() -> None:
    reach = _reach(
        {("x", "add"): "x", ("linear_1", "add_1"): "b", ("add", "add_1"): "y", "add_1": "z"},
        {"x": 3.0, "b": 2.0, "y": 4.0, "z": 8.0},
    )
    assert reach["linear_1"] == pytest.approx(2.0 / 8.0)
    # y's two ways: through b's input (its share now 1/4) and as the trunk (1/2): the larger
    assert reach["linear"] == pytest.approx(0.25 * 0.5)


def test_an_add_whose_output_no_observer_gives_dilutes_nothing() -> None:
    reach = _reach({("x", "add"): "x", ("add", "add_1"): "y"}, {"x": 3.0, "y": 4.0})
    assert reach == pytest.approx({"linear": 0.25, "linear_1": 1.0, "linear_2": 1.0})


def test_shares_stay_within_zero_and_one() -> None:
    """A trunk louder than the sum (they cancel) leaves the branch nothing; an operand
    louder than the sum is not amplified."""
    reach = _reach(
        {("x", "add"): "x", ("add", "add_1"): "y", "add_1": "z"}, {"x": 5.0, "y": 4.0, "z": 2.0}
    )
    assert reach == pytest.approx({"linear": 0.0, "linear_1": 0.0, "linear_2": 1.0})
    observed = _reach(
        {("x", "add"): "x", ("linear_1", "add_1"): "b", ("add", "add_1"): "y", "add_1": "z"},
        {"x": 3.0, "b": 10.0, "y": 4.0, "z": 8.0},
    )
    assert observed["linear_1"] == pytest.approx(1.0)


def test_a_layer_whose_output_reaches_nothing_is_not_diluted() -> None:
    graph = torch.fx.Graph()
    x, w = graph.placeholder("x"), graph.placeholder("w")
    unread = graph.call_function(torch.ops.aten.linear.default, (x, w))
    graph.output(x)
    paths = residual_paths(graph.nodes, {}, {"unread": unread})
    assert paths.reach({}.get) == {"unread": 1.0}


def test_unknown_or_empty_powers_dilute_nothing() -> None:
    mapping = {("x", "add"): "x", ("add", "add_1"): "y", "add_1": "z"}
    assert _reach(mapping, {}) == pytest.approx(dict.fromkeys(("linear", "linear_1", "linear_2"), 1.0))
    # a power of zero is no power: the second add's output tells nothing
    assert _reach(mapping, {"x": 3.0, "y": 4.0, "z": 0.0}) == pytest.approx({"linear": 0.25, "linear_1": 1.0, "linear_2": 1.0})


class ResidualTwin(nn.Module):
    """``GatedTwin``'s two linears, one feeding a residual add onto a trunk louder than
    itself, the other the output; ``diluted`` comes first in the graph, so equal prices
    would give it the one doubling the budget holds."""

    def __init__(self) -> None:
        super().__init__()
        twin = GatedTwin()
        self.diluted, self.plain, self.filler = twin.gated, twin.plain, twin.filler

    def forward(self, a: Tensor, b: Tensor, c: Tensor, trunk: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return trunk + self.diluted(a), self.plain(b), self.filler(c)


def test_the_doubling_goes_to_the_layer_whose_noise_reaches_the_output_undiluted() -> None:
    model = ResidualTwin().eval()
    x = torch.randn(32, 128, generator=torch.Generator().manual_seed(3))
    c = torch.randn(32, 640, generator=torch.Generator().manual_seed(4))
    trunk = 40 * torch.randn(32, 128, generator=torch.Generator().manual_seed(5))
    macs = [m.weight.numel() for m in (model.diluted, model.plain, model.filler)]
    assert macs[0] <= DOUBLED_MAC_BUDGET * sum(macs) < 2 * macs[0]  # room for one twin
    with host.targeting("avx2"):
        exported = torch.export.export(model, (x, x.clone(), c, trunk)).module()
        prepared = prepare_pt2e(exported, _quantizer())
        prepared(x, x.clone(), c, trunk)
        converted: torch.fx.GraphModule = convert_pt2e(prepared)
    layers = _layers(converted)
    linears = converted.graph.find_nodes(op="call_function", target=torch.ops.aten.linear.default)
    diluted, plain = (n.name for n in linears[:2])
    overflows = {n: bool(pairs.any_input_can_overflow(codes, qmax).any()) for n, (codes, _, _, qmax) in layers.items()}
    assert overflows[plain] and not overflows[diluted]
    full = model.plain.weight.detach().abs().amax(1) / 127.5
    torch.testing.assert_close(layers[plain][1].float(), full.float())
