"""Input-channel orders that no int16 pair can overflow (``qcore.int8.pairing``), and the
graph rewrite that gives a linear layer such an order
(``qcore.pt2e.annotation.channel_order``). Overflow is judged by brute force
(``int16_pairs``: every pair on every corner of its input box), not by the code under test.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import int16_pairs as brute
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from qcore.int8.pairing import safe_order
from qcore.pt2e.annotation.channel_order import REORDERED, order_inputs_for_int16_pairs


def _codes(out: int, channels: int, seed: int, taps: tuple[int, ...] = ()) -> torch.Tensor:
    """Full-range codes of Gaussian weights (each output channel reaches 127 or -128)."""
    weight = torch.randn(out, channels, *taps, generator=torch.Generator().manual_seed(seed))
    return brute.full_range_codes(weight)


@pytest.mark.parametrize(
    ("out", "channels", "taps"),
    [(10, 2048, ()), (4, 63, ()), (2, 64, (3, 3))],
    ids=["classifier head", "odd channel count", "conv taps"],
)
def test_an_order_found_is_a_permutation_no_input_can_overflow(out: int, channels: int, taps: tuple[int, ...]) -> None:
    _assert_safe_permutation(_codes(out, channels, seed=channels, taps=taps))


def test_the_benchmark_mlps_head_has_an_order_on_every_cpu() -> None:
    """The head of ``benchmarks/x86_int8.py``'s MLP, built as it is (``nn.Linear``'s
    uniform initialisation): most channels share the largest code, so the walk over
    equally hard channels must be the same on every CPU."""
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10))
    _assert_safe_permutation(brute.full_range_codes(mlp[-1].weight.detach()))


def _assert_safe_permutation(codes: torch.Tensor) -> None:
    assert brute.any_input_can_overflow(codes).any()  # (the natural order can)
    order = safe_order(codes)
    assert order is not None
    assert sorted(order.tolist()) == list(range(codes.shape[1]))
    assert not brute.any_input_can_overflow(codes.index_select(1, order)).any()


def test_seven_bit_inputs_leave_room_that_uint8_ones_do_not() -> None:
    """At ``act_max`` 127 a pair may sum to 258 codes, which two int8 weights never reach:
    any order is safe; at 255 the limit is 128, and four large weights of one sign have
    no order (where two of the other sign would: each meets one of them)."""
    codes = torch.tensor([[127, 127, 127, 127]])
    assert safe_order(codes) is None
    mixed = safe_order(torch.tensor([[127, 127, -128, -128]]))
    assert mixed is not None and sorted(mixed.tolist()) == [0, 1, 2, 3]
    assert not brute.any_input_can_overflow(torch.tensor([[127, 127, -128, -128]]).index_select(1, mixed)).any()
    order = safe_order(codes, act_max=127)
    assert order is not None and not brute.any_input_can_overflow(codes.index_select(1, order), qmax=127).any()


def test_a_pair_at_the_limit_is_taken() -> None:
    """Same-sign weights summing to exactly ``INT16_MAX // act_max`` (128 at 255) share a
    lane: 255 * 128 = 32640; zeros add nothing to either sign."""
    codes = torch.tensor([[-128, 0, -128, 0]])
    order = safe_order(codes)
    assert order is not None and not brute.any_input_can_overflow(codes.index_select(1, order)).any()
    assert brute.worst_pair_sums(codes.index_select(1, order)).max() == 255 * 128
    # the same for positive weights, where inputs up to 258 leave 127 codes a lane
    positive = torch.tensor([[127, 0, 127, 0]])
    order = safe_order(positive, act_max=258)
    assert order is not None and brute.worst_pair_sums(positive.index_select(1, order), qmax=258).max() == 258 * 127
    # a pair sum of exactly 32767 (= 151 * 217) does not overflow
    exact = torch.tensor([[100, 117]])
    order = safe_order(exact, act_max=151)
    assert order is not None and brute.worst_pair_sums(exact.index_select(1, order), qmax=151).max() == 32767


def test_the_hardest_channels_take_the_partners_only_they_can_use() -> None:
    """Two 100s fit only beside a 28 or a -100; the -100s only beside a 28 or a 100. Taking
    the first partner that fits (a 28 for each 100) leaves the two -100s together (200 >
    128): the search gives each 100 a -100, so the 28s pair with each other."""
    codes = torch.tensor([[100, 100, 28, 28, -100, -100]])
    order = safe_order(codes)
    assert order is not None
    assert not brute.any_input_can_overflow(codes.index_select(1, order)).any()


def test_a_wide_layer_has_no_safe_order() -> None:
    """Every channel is large in some of 512 outputs: no pairing exists, and the search
    says so rather than returning an order that overflows."""
    assert safe_order(_codes(512, 256, seed=1)) is None


class TwoLinears(nn.Module):
    """A body and a classifier head of ten classes, its weights Gaussian (as trained
    weights look: few large ones), ``between`` them an element-wise op."""

    def __init__(self, between: Callable[[torch.Tensor], torch.Tensor] = torch.relu) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.body, self.head = nn.Linear(32, 256), nn.Linear(256, 10)
        nn.init.normal_(self.head.weight)
        self.between = between

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.between(self.body(x)))


#: Each element-wise op of ``channel_order.ELEMENTWISE``, as a model calls it.
BETWEEN: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": F.relu, "relu_": functools.partial(F.relu, inplace=True), "gelu": F.gelu,
    "silu": F.silu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "hardtanh": F.hardtanh,
    "hardtanh_": functools.partial(F.hardtanh, inplace=True), "relu6": F.relu6,
    "hardswish": F.hardswish, "leaky_relu": F.leaky_relu, "elu": F.elu,
    "dropout": functools.partial(F.dropout, p=0.1, training=False), "clone": torch.clone,
    "two of them": lambda y: torch.tanh(F.gelu(y)),
}  # fmt: skip


@pytest.mark.parametrize("between", BETWEEN)
def test_every_element_wise_op_lets_the_order_through(between: str) -> None:
    x = torch.randn(4, 32)
    model = TwoLinears(BETWEEN[between]).eval()
    gm = order_inputs_for_int16_pairs(torch.export.export(model, (x,)).module())
    assert [n.name for n in gm.graph.nodes if REORDERED in n.meta] == ["linear_1"]
    assert torch.allclose(gm(x), model(x), rtol=1e-5, atol=1e-6)


def test_an_op_across_channels_stops_it() -> None:
    """A cumulative sum reads the body's output channels in their order: reordering them
    past it would change the function, so nothing moves."""
    gm = order_inputs_for_int16_pairs(
        torch.export.export(TwoLinears(lambda y: y.cumsum(-1)).eval(), (torch.randn(4, 32),)).module()
    )
    assert not [n for n in gm.graph.nodes if REORDERED in n.meta]


def test_a_head_after_a_linear_takes_a_safe_order_and_the_same_function() -> None:
    """The head's full-range codes overflow in the model's order; after the rewrite they
    cannot, the body's rows and bias moved with them, the graph computes the same values,
    and the model exported from is unchanged."""
    model, x = TwoLinears().eval(), torch.randn(4, 32)
    before = brute.full_range_codes(model.head.weight)
    assert brute.any_input_can_overflow(before).any()
    kept = {name: p.detach().clone() for name, p in model.named_parameters()}
    gm = order_inputs_for_int16_pairs(torch.export.export(model, (x,)).module())

    (head,) = [n for n in gm.graph.nodes if REORDERED in n.meta]
    weight = gm.get_parameter(str(head.args[1].target))
    assert not brute.any_input_can_overflow(brute.full_range_codes(weight)).any()
    assert torch.allclose(gm(x), model(x), rtol=1e-5, atol=1e-6)
    assert gm.code.count("_reordered") == 3  # (the code reads the new tensors)
    assert all(torch.equal(p, kept[name]) for name, p in model.named_parameters())


def test_a_linear_whose_input_has_another_reader_keeps_its_order() -> None:
    """The body's output also reaches the graph output: reordering it would change what
    that reader sees, so nothing moves."""

    class Shared(TwoLinears):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
            hidden = self.body(x)
            return self.head(hidden), hidden

    gm = order_inputs_for_int16_pairs(torch.export.export(Shared().eval(), (torch.randn(4, 32),)).module())
    assert not [n for n in gm.graph.nodes if REORDERED in n.meta]


def _reordered(model: nn.Module, act_max: int = 255) -> list[str]:
    gm = order_inputs_for_int16_pairs(torch.export.export(model.eval(), (torch.randn(4, 32),)).module(), act_max)
    return [str(n.name) for n in gm.graph.nodes if REORDERED in n.meta]


def test_a_head_at_exactly_the_limit_keeps_its_order() -> None:
    """Codes 127 and 90 side by side in every row (the row's largest weight 127.5 units,
    a code of 127): a pair sum of 217, and 217 * 151 = 32767, no overflow on inputs up
    to 151; one more and it would reorder."""
    model = TwoLinears()
    with torch.no_grad():
        model.head.weight.zero_()
        model.head.weight[:, :2] = torch.tensor([127.5, 90.0])
    assert _reordered(model, act_max=151) == []
    assert _reordered(model, act_max=152) == ["linear_1"]


class Tied(TwoLinears):
    """The head's weight read twice (its sum added to the logits)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) + self.head.weight.sum()


class Computed(TwoLinears):
    """The body's weight computed in the graph (doubled), not a constant of its own."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = F.linear(x, self.body.weight * 2, self.body.bias)
        return self.head(torch.relu(hidden))


@pytest.mark.parametrize("model", [Tied, Computed], ids=["tied head weight", "computed body weight"])
def test_a_weight_read_elsewhere_or_computed_keeps_the_order(model: type[TwoLinears]) -> None:
    """A tied weight would reorder its other reader too; a computed one has no tensor to
    reorder: both layers keep their order (where the plain model reorders its head)."""
    assert _reordered(TwoLinears()) == ["linear_1"]
    assert _reordered(model()) == []
