"""qcore.pt2e.annotation.ops: every op of every operator set, one exported node each, gets the
annotation its set stands for, and each set holds exactly the ops written out here.

The lists below are the specification, written out rather than read from the module:
a set that loses an op leaves that op's node in float (or unfused), and a set that
gains one fails the exact comparison until the op gets a case here. Where torchao's
XNNPACK quantizer recognises an op as sharing its input's qparams, its own predicate is
asked too (``_is_share_obs_or_fq_op``), so that list is checked against upstream, not
only against this module; the ops this project adds are named with the reason.

Models call the aten overloads themselves (``aten.permute_copy.default(c, ...)``), so each
node is exactly the overload under test and no source partition (the pools' annotators
match ``nn.AdaptiveAvgPool2d``) stands in for the set.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
import torch
from torch import Tensor, nn
from torch.fx import GraphModule
from torchao.quantization.pt2e import HistogramObserver, PerChannelMinMaxObserver
from torchao.quantization.pt2e.quantizer import QuantizationConfig, QuantizationSpec
from torchao.testing.pt2e._xnnpack_quantizer_utils import _is_share_obs_or_fq_op

from qcore.pt2e.annotation import ops
from qcore.pt2e.annotation.common_annotators import propagate_shared_qparams
from qcore.pt2e.annotation.registry_quantizer import RegistryQuantizer
from qcore.pt2e.annotation.transforms import scalars_to_attrs
from qcore.zoo.suite.pt2e import annotations_of, exported, spec_text

aten = torch.ops.aten

#: conv{1,2,3}d, each as the two overloads export records: numeric padding (``default``)
#: and string padding, ``"same"``/``"valid"`` (``padding``).
CONV = {
    aten.conv1d.default, aten.conv1d.padding,
    aten.conv2d.default, aten.conv2d.padding,
    aten.conv3d.default, aten.conv3d.padding,
}  # fmt: skip
#: transposed convs have one overload each that export records (no string padding)
CONV_TRANSPOSE = {aten.conv_transpose1d.default, aten.conv_transpose2d.input,
                  aten.conv_transpose3d.input}  # fmt: skip
LINEAR = {aten.linear.default}
#: the functional and the in-place form, which export keeps (``inplace=True``, ``+=``)
RELU = {aten.relu.default, aten.relu_.default}
ADD = {aten.add.Tensor, aten.add_.Tensor}
MUL = {aten.mul.Tensor, aten.mul_.Tensor}
CAT = {aten.cat.default}
MAX_POOL2D = {aten.max_pool2d.default}
ADAPTIVE_AVG_POOL2D = {aten.adaptive_avg_pool2d.default}
CONV3D = {aten.conv3d.default, aten.conv3d.padding}

#: The ops torchao's XNNPACK quantizer propagates its input's qparams through.
SHARE_UPSTREAM = {
    aten.relu.default, aten.hardtanh.default, aten.hardtanh_.default,
    aten.max_pool2d.default, aten.mean.default, aten.mean.dim, aten.permute.default,
    aten.permute_copy.default, aten.squeeze.dim, aten.squeeze_copy.dim,
    aten.adaptive_avg_pool2d.default, aten.view_copy.default, aten.view.default,
    aten.slice_copy.Tensor, aten.flatten.using_ints,
}  # fmt: skip
#: This project's additions: the other spellings of the same data movement that export
#: records (``x.transpose``, ``x.reshape``, ``x[:, a:b]``), and dropout, an identity in a
#: deployed model.
SHARE_ADDED = {
    aten.transpose.int, aten.reshape.default, aten.slice.Tensor,
    aten.dropout.default, aten.dropout_.default,
}  # fmt: skip


class Common(RegistryQuantizer):
    """The ``"common"`` namespace as XNNPACK runs it: scalars lifted, qparams propagated."""

    namespace = "common"

    def transform_for_annotation(self, model: GraphModule) -> GraphModule:
        return scalars_to_attrs(model)

    def finalize(self, model: GraphModule) -> None:
        propagate_shared_qparams(model)


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao's deprecation notices
        yield


def _config() -> QuantizationConfig:
    """int8 activations per tensor, weights per channel along axis 0."""
    act = QuantizationSpec(
        dtype=torch.int8, quant_min=-128, quant_max=127, qscheme=torch.per_tensor_affine,
        observer_or_fake_quant_ctr=HistogramObserver.with_args(eps=2**-12),
    )  # fmt: skip
    weight = QuantizationSpec(
        dtype=torch.int8, quant_min=-127, quant_max=127, qscheme=torch.per_channel_symmetric,
        ch_axis=0, observer_or_fake_quant_ctr=PerChannelMinMaxObserver.with_args(eps=2**-12),
    )  # fmt: skip
    return QuantizationConfig(act, act, weight, None)


def _annotated(model: nn.Module, *example: Tensor) -> tuple[GraphModule, dict[str, Any]]:
    """The model exported and annotated by the common namespace: (graph, annotations)."""
    quantizer = Common().set_global(_config())
    gm = quantizer.transform_for_annotation(exported(model.eval(), example))
    quantizer.annotate(gm)
    return gm, annotations_of(gm)


def _by_target(gm: GraphModule) -> dict[Any, list[Any]]:
    found: dict[Any, list[Any]] = {}
    for node in gm.graph.nodes:
        if node.op == "call_function":
            found.setdefault(node.target, []).append(node)
    return found


# -- the sets are exactly these ------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("CONV", CONV),
        ("CONV_TRANSPOSE", CONV_TRANSPOSE),
        ("LINEAR", LINEAR),
        ("RELU", RELU),
        ("ADD", ADD),
        ("MUL", MUL),
        ("CAT", CAT),
        ("MAX_POOL2D", MAX_POOL2D),
        ("ADAPTIVE_AVG_POOL2D", ADAPTIVE_AVG_POOL2D),
        ("CONV3D", CONV3D),
        ("SHARE_QPARAMS", SHARE_UPSTREAM | SHARE_ADDED),
    ],
)
def test_each_operator_set_holds_exactly_the_overloads_written_here(
    name: str, expected: set[Any]
) -> None:
    assert getattr(ops, name) == expected


def test_the_share_list_is_upstreams_and_the_additions_named_here() -> None:
    assert all(_is_share_obs_or_fq_op(op) for op in SHARE_UPSTREAM)
    assert not any(_is_share_obs_or_fq_op(op) for op in SHARE_ADDED)  # ours alone


# -- and each op is annotated as its set says ----------------------------------------------


class Weighted(nn.Module):
    """One node of each weighted overload; each output read once (nothing to fuse)."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.c1s = nn.Conv1d(3, 4, 3), nn.Conv1d(3, 4, 3, padding="same")
        self.c2, self.c2s = nn.Conv2d(3, 4, 3), nn.Conv2d(3, 4, 3, padding="valid")
        self.c3, self.c3s = nn.Conv3d(3, 4, 3), nn.Conv3d(3, 4, 3, padding="same")
        self.t1, self.t2 = nn.ConvTranspose1d(3, 4, 2), nn.ConvTranspose2d(3, 4, 2)
        self.t3 = nn.ConvTranspose3d(3, 4, 2)
        self.lin = nn.Linear(8, 4)

    def forward(self, x1: Tensor, x2: Tensor, x3: Tensor, xl: Tensor) -> tuple[Tensor, ...]:
        return (
            self.c1(x1), self.c1s(x1), self.c2(x2), self.c2s(x2), self.c3(x3), self.c3s(x3),
            self.t1(x1), self.t2(x2), self.t3(x3), self.lin(xl),
        )  # fmt: skip


def test_every_weighted_overload_observes_its_input_weight_and_output() -> None:
    gm, got = _annotated(
        Weighted(),
        torch.randn(1, 3, 6), torch.randn(1, 3, 6, 6), torch.randn(1, 3, 4, 4, 4),
        torch.randn(2, 8),
    )  # fmt: skip
    config = _config()
    act, out = spec_text(config.input_activation), spec_text(config.output_activation)
    weight = spec_text(config.weight)
    # a transposed weight is (C_in, C_out, ...): per channel along axis 1
    weight_t = spec_text(replace(config.weight, ch_axis=1))  # type: ignore[type-var]
    assert weight is not None and "axis=0" in weight and weight_t != weight
    nodes = _by_target(gm)
    assert set(nodes) >= CONV | CONV_TRANSPOSE | LINEAR  # export recorded each overload
    for target in CONV | CONV_TRANSPOSE | LINEAR:
        (node,) = nodes[target]
        entry = got.get(node.name, {})
        expected_weight = weight_t if target in CONV_TRANSPOSE else weight
        inputs = {node.args[0].name: act, node.args[1].name: expected_weight}
        assert {k: v for k, v in entry.get("inputs", {}).items() if k in inputs} == inputs, (
            f"{target}: {entry}"
        )
        assert entry.get("output") == out, f"{target}: {entry}"


class Fused(nn.Module):
    """Each weighted or binary op followed by each relu form, the op's value read once."""

    def __init__(self) -> None:
        super().__init__()
        self.lin, self.lin_ = nn.Linear(8, 4), nn.Linear(8, 4)
        self.conv, self.conv_ = nn.Conv2d(3, 4, 1), nn.Conv2d(3, 4, 1)

    def forward(self, xl: Tensor, x: Tensor, y: Tensor) -> tuple[Tensor, ...]:
        return (
            aten.relu.default(self.lin(xl)),
            aten.relu_.default(self.lin_(xl)),
            aten.relu.default(self.conv(x)),
            aten.relu_.default(self.conv_(x)),
            aten.relu.default(aten.add.Tensor(x, y)),
            aten.relu_.default(aten.mul.Tensor(x, y)),
        )


def test_every_relu_form_fuses_with_the_op_before_it() -> None:
    """The op observes its inputs and not its output; the relu observes the output."""
    x = torch.randn(1, 3, 4, 4)
    gm, got = _annotated(Fused(), torch.randn(2, 8), x, torch.randn(1, 3, 4, 4))
    out = spec_text(_config().output_activation)
    relus = [n for n in gm.graph.nodes if n.target in RELU]
    assert {n.target for n in relus} == RELU and len(relus) == 6
    for relu in relus:
        producer = relu.args[0]
        assert got.get(relu.name) == {"annotated": True, "output": out}, relu.name
        assert "output" not in got[producer.name] and got[producer.name]["inputs"], producer.name


class Binary(nn.Module):
    def forward(self, x: Tensor, y: Tensor) -> tuple[Tensor, ...]:
        a, m = x.clone(), x.clone()
        return (
            aten.add.Tensor(x, y),
            aten.add_.Tensor(a, y),
            aten.mul.Tensor(x, y),
            aten.mul_.Tensor(m, y),
            aten.cat.default([x, y]),
        )


def test_every_add_mul_and_cat_form_observes_its_inputs_and_output() -> None:
    gm, got = _annotated(Binary(), torch.randn(2, 8), torch.randn(2, 8))
    config = _config()
    act, out = spec_text(config.input_activation), spec_text(config.output_activation)
    nodes = _by_target(gm)
    for target in ADD | MUL:
        (node,) = nodes[target]
        inputs = {a.name: act for a in node.args[:2]}
        assert got.get(node.name) == {"annotated": True, "inputs": inputs, "output": out}, target
    # cat: one set of qparams for every input and the output, owned by the first input
    # (neither traces back to a quantized output)
    (cat,) = nodes[aten.cat.default]
    assert got.get(cat.name) == {
        "annotated": True,
        "inputs": {"x": act, "y": "shared(x->cat)"},
        "output": "shared(x->cat)",
    }


class Shares(nn.Module):
    """A quantized conv read by one node of every share-qparams op and by ops of no set."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.conv_a, self.conv_b = (nn.Conv2d(3, 4, 1) for _ in range(3))

    def forward(self, x: Tensor) -> tuple[Tensor, ...]:
        c = self.conv(x)
        return (
            aten.relu.default(c),
            aten.hardtanh.default(c),
            aten.hardtanh_.default(self.conv_a(x)),  # in place: on a value of its own
            aten.max_pool2d.default(c, [2, 2]),
            aten.mean.default(c),
            aten.mean.dim(c, [2, 3]),
            aten.permute.default(c, [0, 2, 3, 1]),
            aten.permute_copy.default(c, [0, 2, 3, 1]),
            aten.transpose.int(c, 0, 1),
            aten.squeeze.dim(c, 0),
            aten.squeeze_copy.dim(c, 0),
            aten.adaptive_avg_pool2d.default(c, [1, 1]),
            aten.view_copy.default(c, [-1]),
            aten.view.default(c, [-1]),
            aten.reshape.default(c, [-1]),
            aten.slice.Tensor(c, 1, 0, 2),
            aten.slice_copy.Tensor(c, 1, 0, 2),
            aten.flatten.using_ints(c, 1),
            aten.sigmoid.default(c),  # of no set: stays float
            aten.unsqueeze.default(c, 0),  # a view, but not on the list: stays float
            aten.dropout_.default(self.conv_b(x), 0.5, False),
            # last: export reads c after an eval-mode dropout of c from the dropout
            aten.dropout.default(c, 0.5, False),
        )


def test_every_share_op_shares_its_quantized_producers_qparams() -> None:
    gm, got = _annotated(Shares(), torch.randn(1, 3, 4, 4))
    out = spec_text(_config().output_activation)
    share = SHARE_UPSTREAM | SHARE_ADDED
    checked = set()
    for node in gm.graph.nodes:
        if node.target not in share:
            continue
        producer = node.args[0].name
        assert got.get(producer, {}).get("output") == out, producer  # a quantized conv
        shared = f"shared({producer})"
        expected = {"annotated": True, "inputs": {producer: shared}, "output": shared}
        assert got.get(node.name) == expected, f"{node.target}: {got.get(node.name)}"
        checked.add(node.target)
    assert checked == share
    for target in (aten.sigmoid.default, aten.unsqueeze.default):
        (node,) = _by_target(gm)[target]
        assert node.name not in got, target


class PoolAfterView(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)

    def forward(self, x: Tensor) -> Tensor:
        return aten.max_pool2d.default(aten.view.default(self.conv(x), [1, 4, 4, 4]), [2, 2])


def test_a_max_pool_after_a_share_op_shares_through_it() -> None:
    """max_pool2d's own annotator runs before propagation and sees the view unannotated:
    only max_pool2d's place on the share list makes it follow the view."""
    _, got = _annotated(PoolAfterView(), torch.randn(1, 3, 4, 4))
    assert got.get("view") == {
        "annotated": True, "inputs": {"conv2d": "shared(conv2d)"}, "output": "shared(conv2d)",
    }  # fmt: skip
    assert got.get("max_pool2d") == {
        "annotated": True, "inputs": {"view": "shared(view)"}, "output": "shared(view)",
    }  # fmt: skip


@pytest.mark.parametrize(
    "op",
    sorted(CONV | CONV_TRANSPOSE | LINEAR | ADD | MUL | CAT | MAX_POOL2D | ADAPTIVE_AVG_POOL2D, key=str),
)
def test_every_annotated_op_can_be_scoped_by_operator_type(op: Any) -> None:
    """``set_operator_type`` accepts an op some annotator of the namespace handles."""
    Common().set_operator_type(op, None)
    Common().set_operator_type(op.overloadpacket, None)


def test_an_op_no_annotator_handles_cannot_be_scoped() -> None:
    with pytest.raises(ValueError, match=r"no annotator handles operator aten\.sigmoid\.default"):
        Common().set_operator_type(aten.sigmoid.default, None)


def test_fx_forms_of_a_kind_are_the_value_moves_forms_of_that_python_kind() -> None:
    """torch's backend configs list module types, functions and method names apart; each
    kind ``fx_forms`` gives is exactly the rows' forms of that Python kind, and the three
    kinds together are every FX form of the table."""
    rows = tuple(ops.VALUE_MOVES)
    modules = ops.fx_forms(*rows, kind="module")
    methods = ops.fx_forms(*rows, kind="method")
    functions = ops.fx_forms(*rows, kind="function")
    assert all(isinstance(f, type) for f in modules)
    assert methods and all(isinstance(f, str) for f in methods)
    assert functions and all(callable(f) and not isinstance(f, type | str) for f in functions)
    every = [f for move in ops.VALUE_MOVES.values() for f in move.fx]
    assert sorted(map(repr, (*modules, *methods, *functions))) == sorted(map(repr, every))
    assert ops.fx_forms("permute", kind="function") == (torch.permute,)
    assert ops.fx_forms("permute", kind="method") == ("permute",)


def test_the_views_are_the_ops_torchs_quantization_lift_up_treats_as_views() -> None:
    """``VIEWS`` (what x86's lowering lifts a quantize over, and reads values through) is
    torch's own list of the views its quantization lift-up pass crosses, plus
    ``_unsafe_view``, which only Inductor's decompositions produce."""
    from torch._inductor.fx_passes import quantization as torchs

    assert ops.VIEWS - {torch.ops.aten._unsafe_view.default} == set(torchs._VIEW_OPS)
