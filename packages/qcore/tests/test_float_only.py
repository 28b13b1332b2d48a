"""No annotation observes a tensor that is not floating point, and the scalar lifting done
before annotation never changes an op's result dtype (issue 20: Hugging Face's mask
construction, ``arange(n) + 0`` used as ``aten.index`` indices, crashed calibration)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import Tensor, nn
from torch.fx import GraphModule
from torchao.quantization.pt2e import HistogramObserver, PerChannelMinMaxObserver
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
from torchao.quantization.pt2e.quantizer import QuantizationConfig, QuantizationSpec

from qcore.metrics import sqnr
from qcore.pt2e.annotation.claims import set_annotation
from qcore.pt2e.annotation.common_annotators import annotate_linear
from qcore.pt2e.annotation.observable import (
    additive_mask_value,
    is_float_tensor,
    non_float_quantized,
    non_quantizable_reason,
)
from qcore.pt2e.annotation.registry import ANNOTATORS, Annotator
from qcore.pt2e.annotation.registry_quantizer import RegistryQuantizer
from qcore.pt2e.annotation.transforms import scalars_to_attrs
from qcore.zoo.suite.pt2e import exported

MIN = torch.finfo(torch.float32).min


def int8_config() -> QuantizationConfig:
    """XNNPACK's shape of config: int8 affine activations, per-channel int8 weights."""
    act = QuantizationSpec(
        dtype=torch.int8,
        quant_min=-128,
        quant_max=127,
        qscheme=torch.per_tensor_affine,
        observer_or_fake_quant_ctr=HistogramObserver.with_args(eps=2**-12),
    )
    weight = QuantizationSpec(
        dtype=torch.int8,
        quant_min=-127,
        quant_max=127,
        qscheme=torch.per_channel_symmetric,
        ch_axis=0,
        observer_or_fake_quant_ctr=PerChannelMinMaxObserver.with_args(eps=2**-12),
    )
    return QuantizationConfig(act, act, weight, None)


class ScalarMath(nn.Module):
    """Binary ops with Python scalars on float, int64, int32 and bool tensors."""

    def forward(self, x: Tensor, ids: Tensor) -> tuple[Tensor, ...]:
        positions = torch.arange(x.shape[1]) + 0  # int64 + int: int64
        small = ids.to(torch.int32) * 2  # int32 * int: int32
        flags = (ids > 3) + True  # bool + bool: bool
        halves = ids * 0.5  # int64 * float: float32
        return x * 0.5 + 1.0, positions, small, flags, halves


class MaskedAttention(nn.Module):
    """Scores plus Hugging Face's additive mask, whose rows come from integer indices."""

    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(8, 8)
        self.k = nn.Linear(8, 8)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        n = x.shape[1]
        rows = torch.arange(n) + 0  # the integer add the lifting used to make float
        keep = mask.bool()[:, None, :].expand(-1, n, -1)[:, rows][:, :, rows]
        additive = torch.where(keep, torch.zeros(()), MIN)
        scores = self.q(x) @ self.k(x).transpose(1, 2) * 2.0 + additive
        return torch.cat([scores.softmax(-1) @ x, x], dim=-1)


def _ids(seed: int) -> Tensor:
    return torch.randint(0, 8, (2, 6), generator=torch.Generator().manual_seed(seed))


def test_lifted_scalars_keep_every_result_dtype() -> None:
    model = ScalarMath()
    example = (torch.randn(2, 6), _ids(0))
    gm = exported(model, example)
    lifted = scalars_to_attrs(gm)
    assert not any(
        isinstance(a, int | float)
        for n in lifted.graph.nodes
        if n.op == "call_function"
        for a in n.args[:2]
        if n.target in (torch.ops.aten.add.Tensor, torch.ops.aten.mul.Tensor)
    ), "a scalar was left unlifted"
    expected = model(*example)
    got = lifted(*example)
    assert [t.dtype for t in got] == [t.dtype for t in expected]
    for g, e in zip(got, expected, strict=True):
        assert torch.equal(g, e)


class Common(RegistryQuantizer):
    namespace = "common"

    def transform_for_annotation(self, model: GraphModule) -> GraphModule:
        return scalars_to_attrs(model)


def _batch() -> tuple[Tensor, Tensor]:
    x = torch.randn(2, 6, 8, generator=torch.Generator().manual_seed(0))
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[1, -2:] = 0
    return x, mask


def _calibrated(model: nn.Module, quantizer: Any) -> GraphModule:
    x, mask = _batch()
    prepared = prepare_pt2e(exported(model, (x, mask)), quantizer)
    with torch.no_grad():
        prepared(x, mask)
    return prepared


def test_hf_style_mask_calibrates_and_converts_with_no_observer_on_non_float() -> None:
    torch.manual_seed(0)
    model = MaskedAttention().eval()
    prepared = _calibrated(model, Common().set_global(int8_config()))
    observed = [
        n.args[0]
        for n in prepared.graph.nodes
        if n.op == "call_module" and "activation_post_process" in str(n.target)
    ]
    assert observed, "nothing was quantized"
    assert all(is_float_tensor(n) for n in observed), [n.name for n in observed]
    x, mask = _batch()  # the calibration batch: the SQNR measures rounding, not clipping
    with torch.no_grad():
        # an observed mask (scale ~1e36) rounds every score to zero: 6.6 dB here
        assert sqnr(model(x, mask), convert_pt2e(prepared)(x, mask)) >= 25


def test_additive_masks_are_recognized_and_left_in_float() -> None:
    gm = exported(MaskedAttention().eval(), (torch.randn(2, 6, 8), torch.ones(2, 6).long()))
    gm = scalars_to_attrs(gm)
    where = next(n for n in gm.graph.nodes if "where" in str(n.target))
    assert additive_mask_value(where, gm) == MIN
    reason = non_quantizable_reason(where, gm)
    assert reason is not None and "additive mask" in reason
    linear = next(n for n in gm.graph.nodes if n.target == torch.ops.aten.linear.default)
    assert additive_mask_value(linear, gm) is None
    assert non_quantizable_reason(linear, gm) is None


class SmallMask(nn.Module):
    """A mask of ordinary magnitude (-1) is data like any other and stays observable."""

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        return x + torch.where(mask.bool(), 0.0, -1.0)


def test_a_mask_of_ordinary_magnitude_is_observable() -> None:
    gm = exported(SmallMask(), (torch.randn(2, 6), torch.ones(2, 6).long()))
    where = next(n for n in gm.graph.nodes if "where" in str(n.target))
    assert additive_mask_value(where, gm) is None


def _annotate_ids(gm: GraphModule, config: QuantizationConfig | None, filter_fn: Any) -> list[Any]:
    """A buggy annotator: observes the integer input of an embedding."""
    for node in gm.graph.nodes:
        if node.target == torch.ops.aten.embedding.default:
            set_annotation(node, {node.args[1]: config.input_activation if config else None})
    return []


class Embedder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(8, 4)
        self.fc = nn.Linear(4, 4)

    def forward(self, ids: Tensor) -> Tensor:
        return self.fc(self.emb(ids))


def test_an_annotator_that_observes_an_integer_tensor_is_named() -> None:
    ANNOTATORS.define(
        "test-float-only",
        (
            Annotator("linear", annotate_linear, description="linear"),
            Annotator("ids", _annotate_ids, description="observes ids (a bug)"),
        ),
        source="test",
    )

    class Buggy(RegistryQuantizer):
        namespace = "test-float-only"

    gm = exported(Embedder(), (_ids(0),))
    with pytest.raises(
        ValueError, match=r"annotator 'ids' annotated embedding.*ids \(torch.int64\)"
    ):
        prepare_pt2e(gm, Buggy().set_global(int8_config()))
    assert non_float_quantized(next(n for n in gm.graph.nodes if n.op == "placeholder")) == []


class IntCat(nn.Module):
    def forward(self, x: Tensor, ids: Tensor) -> tuple[Tensor, Tensor]:
        return torch.cat([ids, ids + 1], dim=1), torch.cat([x, x * 2], dim=1)


def test_cat_of_integer_tensors_stays_in_float() -> None:
    gm = exported(IntCat(), (torch.randn(2, 6), _ids(0)))
    Common().set_global(int8_config()).annotate(scalars_to_attrs(gm))
    cats = [n for n in gm.graph.nodes if n.target == torch.ops.aten.cat.default]
    int_cat, float_cat = cats
    assert "quantization_annotation" not in int_cat.meta
    assert "quantization_annotation" in float_cat.meta


class TupleOutputs(nn.Module):
    def forward(self, x: Tensor) -> tuple[Tensor, ...]:
        values, indices = torch.max(x, 1)
        first, second = torch.split(x, 3, 1)
        return values, indices, first, second


def test_an_observed_tuple_is_checked_element_by_element() -> None:
    """An op whose traced value is a tuple or list (``max.dim``: values and int64
    indices; ``split``: float pieces) is named by each non-float element it holds."""
    gm = exported(TupleOutputs(), (torch.randn(2, 6),))
    spec = int8_config().output_activation
    by_target = {n.target: n for n in gm.graph.nodes if n.op == "call_function"}
    maximum = by_target[torch.ops.aten.max.dim]
    split = by_target[torch.ops.aten.split.Tensor]
    assert isinstance(maximum.meta["val"], tuple) and isinstance(split.meta["val"], list)
    for node in (maximum, split):
        set_annotation(node, output=spec)
    assert non_float_quantized(maximum) == [f"{maximum.name} (torch.int64)"]
    assert non_float_quantized(split) == []
    del maximum.meta["val"]  # a value not recorded: nothing known to be non-float
    assert non_float_quantized(maximum) == []


class ViewedMask(nn.Module):
    """An additive mask moved through ``views`` value-preserving ops before the add."""

    def __init__(self, views: int) -> None:
        super().__init__()
        self.views = views

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        additive = torch.where(mask.bool(), torch.zeros(()), MIN)
        for i in range(self.views):
            additive = additive.unsqueeze(0) if i % 2 == 0 else additive.squeeze(0)
        return x + additive


@pytest.mark.parametrize("views", [0, 8, 40])
def test_a_mask_is_found_through_any_number_of_value_preserving_ops(views: int) -> None:
    """The walk back from an add's input to the huge constant visits each node once, so a
    long chain of views (a model that reshapes its mask per layer) costs what the chain
    is long, and the mask behind it is still found: missed, it would be observed and its
    add quantized with a scale of ~1e36."""
    gm = exported(ViewedMask(views), (torch.randn(2, 6), torch.ones(2, 6).long()))
    add = next(n for n in gm.graph.nodes if n.target == torch.ops.aten.add.Tensor)
    chain = [
        n
        for n in gm.graph.nodes
        if n.target in (torch.ops.aten.unsqueeze.default, torch.ops.aten.squeeze.dim)
    ]
    assert len(chain) == views
    assert additive_mask_value(add.args[1], gm) == MIN


class HugeScalar(nn.Module):
    """A binary op with a Python scalar too large for a histogram observer."""

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        return x + 3e16, x * 2.0


def test_a_huge_scalar_operand_leaves_its_op_in_float() -> None:
    gm = scalars_to_attrs(exported(HugeScalar(), (torch.randn(2, 6),)))
    add, mul = (n for n in gm.graph.nodes if n.op == "call_function")
    huge, ordinary = add.args[1], mul.args[1]
    assert huge.op == ordinary.op == "get_attr"
    reason = non_quantizable_reason(huge, gm)
    assert reason is not None and "too large to observe (3e+16)" in reason
    assert non_quantizable_reason(ordinary, gm) is None
    Common().set_global(int8_config()).annotate(gm)
    assert "quantization_annotation" not in add.meta
    assert "quantization_annotation" in mul.meta


def test_only_graph_values_can_be_float_tensors() -> None:
    gm = exported(IntCat(), (torch.randn(2, 6), _ids(0)))
    x, ids = (n for n in gm.graph.nodes if n.op == "placeholder")
    assert is_float_tensor(x) and not is_float_tensor(ids)
    assert not any(is_float_tensor(v) for v in (1.0, None, torch.randn(2)))


class NestedFillMask(nn.Module):
    """The huge value one fill deeper: ``where(mask, 0, full_like(x, MIN))``."""

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        return x + torch.where(mask.bool(), 0.0, torch.full_like(x, MIN))


class ConstantMask(nn.Module):
    """A mask built from a buffer alone (a ViT's), evaluated to see what it holds."""

    def __init__(self, keep: Tensor) -> None:
        super().__init__()
        self.register_buffer("keep", keep)

    def forward(self, x: Tensor) -> Tensor:
        return x + torch.where(self.keep, 0.0, MIN)


def _mask_of(model: nn.Module, *example: Tensor) -> tuple[GraphModule, Any]:
    gm = exported(model, example)
    add = next(n for n in gm.graph.nodes if n.target == torch.ops.aten.add.Tensor)
    return gm, add.args[1]


def test_masks_are_found_through_fills_and_evaluated_when_constant(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from qcore.pt2e.annotation import observable

    gm, mask = _mask_of(NestedFillMask(), torch.randn(2, 6), torch.ones(2, 6).long())
    evaluated: list[Any] = []
    monkeypatch.setattr(observable, "_evaluate_constant", lambda *a: evaluated.append(a))
    assert additive_mask_value(mask, gm) == MIN
    assert evaluated == []  # it reads a graph input: never run outside the graph
    monkeypatch.undo()
    keep = torch.ones(2, 6, dtype=torch.bool)
    gm, mask = _mask_of(ConstantMask(keep), torch.randn(2, 6))
    assert additive_mask_value(mask, gm) is None  # masks nothing: data like any other
    keep[1, -2:] = False
    gm, mask = _mask_of(ConstantMask(keep), torch.randn(2, 6))
    assert additive_mask_value(mask, gm) == MIN


def test_only_a_claimed_annotation_is_checked() -> None:
    """An annotation not yet claimed (``_annotated`` False: written by a transform or an
    annotator that then declined) is no quantizer's: nothing to name; the same annotation
    claimed names the int64 indices it would observe."""
    from torchao.quantization.pt2e.quantizer import QuantizationAnnotation

    from qcore._torch_private import Q_ANNOTATION_KEY

    gm = exported(TupleOutputs(), (torch.randn(2, 6),))
    maximum = next(n for n in gm.graph.nodes if n.target == torch.ops.aten.max.dim)
    spec = int8_config().output_activation
    maximum.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=spec)  # not claimed
    assert non_float_quantized(maximum) == []
    set_annotation(maximum, output=spec)  # the same, claimed
    assert non_float_quantized(maximum) == [f"{maximum.name} (torch.int64)"]
