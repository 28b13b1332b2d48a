"""qcore.pt2e.annotation.common_annotators: the common annotators, node by node.

Where upstream annotates the same way, the reference is torchao 0.18's own XNNPACK
quantizer (``torchao.testing.pt2e._xnnpack_quantizer``: its annotators, its
``propagate_annotation``), run on the same exported graph with the same config. Where this
project deliberately differs (cat's qparams source, more share-qparams ops, transposed
weights per channel on axis 1, scoping) or upstream has no annotator (plain
``conv_transpose``, ``addmm``), the expected annotations are written out here from the
rules the module documents.
"""

from __future__ import annotations

import copy
import dataclasses
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.fx import GraphModule
from torchao.quantization.pt2e.quantizer import (
    QuantizationAnnotation,
    QuantizationConfig,
    get_output_act_qspec,
)
from torchao.testing.pt2e._xnnpack_quantizer import (
    XNNPACKQuantizer,
    get_symmetric_quantization_config,
)

from qcore.pt2e.annotation.claims import computing
from qcore.pt2e.annotation.common_annotators import propagate_shared_qparams
from qcore.pt2e.annotation.registry import Annotator
from qcore.pt2e.annotation.registry_quantizer import RegistryQuantizer
from qcore.pt2e.annotation.report import DECLINED, NO_ANNOTATOR, explain_not_quantized
from qcore.pt2e.annotation.transforms import addmm_to_linear, scalars_to_attrs
from qcore.zoo.suite.pt2e import (
    annotate,
    differences,
    exported,
    quantizing,
    spec_text,
)

aten = torch.ops.aten


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
        warnings.simplefilter("ignore")  # upstream's quantizer warns that it is deprecated
        yield


def _config(qat: bool = False) -> QuantizationConfig:
    return get_symmetric_quantization_config(is_per_channel=True, is_qat=qat)


def _labels(config: QuantizationConfig) -> dict[str | None, str]:
    """Spec text -> a short name: ``act`` / ``out`` are the same spec in these configs."""
    return {
        spec_text(config.input_activation): "act",
        spec_text(config.weight): "weight",
        None: "none",
    }


def _short(annotated: dict[str, Any], config: QuantizationConfig) -> dict[str, Any]:
    """``quantizing(annotated)`` with specs as ``act``/``weight``/``none``/``shared(...)``,
    and a transposed conv's per-channel weight spec as ``weight@1``."""
    names = _labels(config)
    axis1 = spec_text(config.weight).replace("axis=0", "axis=1")  # type: ignore[union-attr]

    def short(text: str | None) -> str:
        if text == axis1:
            return "weight@1"
        return names.get(text, text or "none")

    result: dict[str, Any] = {}
    for node, entry in quantizing(annotated).items():
        item: dict[str, Any] = {}
        if "inputs" in entry:
            item["inputs"] = {k: short(v) for k, v in entry["inputs"].items()}
        if "output" in entry:
            item["output"] = short(entry["output"])
        result[node] = item
    return result


# -- against torchao's XNNPACK quantizer ------------------------------------------------


class ConvChain(nn.Module):
    """conv → relu; a conv whose value escapes to a relu and another conv (no fusion); a
    conv without bias; non-share ops (sigmoid) and share ops (max_pool2d, flatten) after
    quantized outputs; a relu after a quantized output, left to propagation."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 4, 3)
        self.c2 = nn.Conv2d(4, 4, 1)
        self.c3 = nn.Conv2d(4, 4, 1, bias=False)
        self.c4 = nn.Conv1d(4, 4, 3)

    def forward(self, x: Tensor) -> tuple[Tensor, ...]:
        y = F.relu(self.c1(x))
        z = self.c2(y)
        w = self.c3(z)
        pooled = F.max_pool2d(F.relu(z), 2).flatten(1)
        return torch.sigmoid(w), F.relu(w), pooled, self.c4(w.flatten(2))


class LinearMix(nn.Module):
    """linear → relu, linear without bias, add/mul of two tensors, with a relu or not,
    a relu after an add whose value escapes, binary ops with Python scalars, and a linear
    whose pre-relu value escapes too (no fusion)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8, bias=False)
        self.c = nn.Linear(8, 4)
        self.d = nn.Linear(8, 8)

    def forward(self, x: Tensor) -> tuple[Tensor, ...]:
        h = F.relu(self.a(x))
        g = self.b(h)
        s = g + h
        e = self.d(x)
        return (self.c(s) * 0.5, F.relu(g * h), F.relu(g + 1.0), F.relu(s), torch.tanh(g),
                F.relu(e), e)  # fmt: skip


class ConvBn(nn.Module):
    """QAT graphs: conv2d → bn → relu, conv2d (no bias) → bn, conv1d → bn → relu."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)
        self.c2, self.b2 = nn.Conv2d(4, 4, 1, bias=False), nn.BatchNorm2d(4)
        self.c3, self.b3 = nn.Conv1d(4, 4, 1), nn.BatchNorm1d(4)

    def forward(self, x: Tensor) -> Tensor:
        y = F.relu(self.b1(self.c1(x)))
        z = self.b2(self.c2(y))
        return F.relu(self.b3(self.c3(z.flatten(2))))


UPSTREAM_CASES = {
    "conv_chain": (ConvChain, (torch.randn(1, 3, 8, 8),)),
    "linear_mix": (LinearMix, (torch.randn(2, 8),)),
}


@pytest.mark.parametrize("case", sorted(UPSTREAM_CASES))
def test_annotations_equal_torchaos_xnnpack_quantizer(case: str) -> None:
    model_cls, example = UPSTREAM_CASES[case]
    config = _config()
    torch.manual_seed(0)
    ours = annotate(Common().set_global(config), exported(model_cls().eval(), example))
    torch.manual_seed(0)
    theirs = annotate(XNNPACKQuantizer().set_global(config), exported(model_cls().eval(), example))
    assert differences(theirs, ours, names=("torchao", "ours")) == {}
    assert len(quantizing(ours)) >= 8  # the comparison covers real annotations


def test_qat_conv_bn_annotations_equal_torchaos_xnnpack_quantizer() -> None:
    """On a graph exported in training mode, batch norms unfolded (as QAT sees them)."""
    config, example = _config(qat=True), (torch.randn(2, 3, 8, 8),)
    torch.manual_seed(0)
    ours = annotate(Common().set_global(config), exported(ConvBn().train(), example))
    torch.manual_seed(0)
    theirs = annotate(XNNPACKQuantizer().set_global(config), exported(ConvBn().train(), example))
    assert differences(theirs, ours, names=("torchao", "ours")) == {}
    short = _short(ours, config)
    # each conv observes its input and weight; each pattern's last node its output
    assert {n for n, e in short.items() if "weight" in e.get("inputs", {}).values()} == {
        "conv2d",
        "conv2d_1",
        "conv1d",
    }
    assert {n for n, e in short.items() if e.get("output") == "act"} == {
        "relu",
        "batch_norm_1",
        "relu_1",
    }


# -- the project's own rules, written out -------------------------------------------------


class Shares(nn.Module):
    """A quantized conv feeding share-qparams ops (permute, reshape: this project's list
    is longer than upstream's), a non-share op (sigmoid) and a share op after that; a cat whose
    first input is unquantized and whose second traces back to the conv through a relu."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)

    def forward(self, x: Tensor, y: Tensor) -> tuple[Tensor, ...]:
        c = self.conv(x)
        flat = c.permute(0, 2, 3, 1).reshape(-1, 4)
        squashed = torch.sigmoid(flat).transpose(0, 1)
        joined = torch.cat([y, F.relu(c)], 1)
        return flat, squashed, joined, torch.cat([y, x], 1)


def test_share_qparams_ops_and_cat_follow_the_quantized_producer() -> None:
    config = _config()
    example = (torch.randn(1, 3, 4, 4), torch.randn(1, 2, 4, 4))
    got = _short(annotate(Common().set_global(config), exported(Shares().eval(), example)), config)
    assert got == {
        "conv2d": {
            "inputs": {"x": "act", "conv_weight": "weight", "conv_bias": "none"},
            "output": "act",
        },
        # share ops after a quantized output share it, down the chain
        "permute": {"inputs": {"conv2d": "shared(conv2d)"}, "output": "shared(conv2d)"},
        "reshape": {"inputs": {"permute": "shared(permute)"}, "output": "shared(permute)"},
        "relu": {"inputs": {"conv2d": "shared(conv2d)"}, "output": "shared(conv2d)"},
        # cat: qparams owned by the first input that traces back to a quantized output
        "cat": {"inputs": {"relu": "act", "y": "shared(relu->cat)"}, "output": "shared(relu->cat)"},
        # none does: the first input owns them
        "cat_1": {"inputs": {"y": "act", "x": "shared(y->cat_1)"}, "output": "shared(y->cat_1)"},
    }  # sigmoid and the transpose after it stay float


class Pools(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)
        self.pool_conv = nn.AdaptiveAvgPool2d(1)
        self.pool_input = nn.AdaptiveAvgPool2d(1)

    def forward(self, x: Tensor) -> tuple[Tensor, ...]:
        c = self.conv(x)
        return self.pool_conv(c), self.pool_input(x), F.max_pool2d(c, 2), F.max_pool2d(x, 2)


def test_pools_share_an_annotated_producers_qparams() -> None:
    """adaptive_avg_pool2d shares its producer's qparams when that is quantized, else
    observes its input; max_pool2d shares an annotated producer's and is left alone
    after an unquantized one."""
    config = _config()
    gm = exported(Pools().eval(), (torch.randn(1, 3, 4, 4),))
    got = _short(annotate(Common().set_global(config), gm), config)
    assert got == {
        "conv2d": {
            "inputs": {"x": "act", "conv_weight": "weight", "conv_bias": "none"},
            "output": "act",
        },
        "adaptive_avg_pool2d": {
            "inputs": {"conv2d": "shared(conv2d)"},
            "output": "shared(conv2d->adaptive_avg_pool2d)",
        },
        "adaptive_avg_pool2d_1": {
            "inputs": {"x": "act"},
            "output": "shared(x->adaptive_avg_pool2d_1)",
        },
        "max_pool2d": {"inputs": {"conv2d": "shared(conv2d)"}, "output": "shared(conv2d)"},
    }


class Transposed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.plain = nn.ConvTranspose2d(4, 6, 2)
        self.fused = nn.ConvTranspose2d(6, 4, 2, bias=False)
        self.grouped = nn.ConvTranspose2d(4, 4, 2, groups=2)
        self.conv3d = nn.Conv3d(2, 2, 1)

    def forward(self, x: Tensor, v: Tensor) -> tuple[Tensor, ...]:
        return F.relu(self.fused(self.plain(x))), F.relu(self.grouped(x)), F.relu(self.conv3d(v))


def test_transposed_convs_are_per_channel_on_axis_1_and_one_group_only() -> None:
    config = _config()
    example = (torch.randn(1, 4, 4, 4), torch.randn(1, 2, 2, 2, 2))
    got = _short(
        annotate(Common().set_global(config), exported(Transposed().eval(), example)), config
    )
    assert got == {
        "conv_transpose2d": {
            "inputs": {"x": "act", "plain_weight": "weight@1", "plain_bias": "none"},
            "output": "act",
        },
        "conv_transpose2d_1": {"inputs": {"conv_transpose2d": "act", "fused_weight": "weight@1"}},
        "relu": {"output": "act"},
        "conv3d": {"inputs": {"v": "act", "conv3d_weight": "weight", "conv3d_bias": "none"}},
        "relu_2": {"output": "act"},
    }  # the grouped transposed conv stays float, and so does its relu


class Scoped(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Sequential(nn.Linear(4, 4))
        self.c = nn.Conv2d(1, 1, 1)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        return self.b(self.a(x)), self.c(x[None])


def _quantized_nodes(quantizer: RegistryQuantizer) -> set[str]:
    gm = exported(Scoped().eval(), (torch.randn(1, 4, 4),))
    return set(quantizing(annotate(quantizer, gm)))


def _in_a(node: torch.fx.Node) -> bool:
    return any(path == "a" for path, _ in node.meta.get("nn_module_stack", {}).values())


def test_scopes_leave_what_they_exclude_in_float() -> None:
    """A ``None`` config leaves its scope in float; a scoped config quantizes only its
    scope; the filter function applies to every pass."""
    config = _config()
    assert _quantized_nodes(Common().set_global(config)) == {"linear", "linear_1", "conv2d"}
    assert _quantized_nodes(Common().set_global(config).set_module_name("b", None)) == {
        "linear",
        "conv2d",
    }
    assert _quantized_nodes(Common().set_module_name("b", config)) == {"linear_1"}
    no_linears = Common().set_global(config).set_module_type(nn.Linear, None)
    assert _quantized_nodes(no_linears) == {"conv2d"}
    not_a = Common().set_global(config).set_filter_function(lambda n: not _in_a(n))
    assert _quantized_nodes(not_a) == {"linear_1", "conv2d"}


class Gru(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(4, 6)
        self.fc = nn.Linear(6, 2)

    def forward(self, x: Tensor, h: Tensor) -> tuple[Tensor, Tensor]:
        y, hn = self.gru(x, h)
        return self.fc(y), hn


def test_gru_io_only_is_opt_in_and_quantizes_the_grus_inputs_and_outputs() -> None:
    """Against torchao's XNNPACK quantizer, which runs the same annotator by default, but
    for the GRU node: both inputs (``x`` and the hidden state ``h``) are read by that one
    node, and its one annotation holds both specs. (torchao writes them one after the
    other into separate annotations, in the order of a set: one input, either of them,
    keeps its spec.)"""
    config, example = _config(), (torch.randn(5, 1, 4), torch.randn(1, 1, 6))
    torch.manual_seed(0)
    ours = annotate(
        Common().set_global(config).enable("gru_io_only"), exported(Gru().eval(), example)
    )
    torch.manual_seed(0)
    theirs = annotate(XNNPACKQuantizer().set_global(config), exported(Gru().eval(), example))
    diff = differences(theirs, ours, names=("torchao", "ours"))
    assert set(diff) <= {"gru"}, diff
    short = _short(ours, config)
    assert short["gru"] == {"inputs": {"x": "act", "h": "act"}}
    assert short["getitem"] == short["getitem_1"] == {"output": "act"}
    assert set(short) == {"gru", "getitem", "getitem_1", "linear"}
    torch.manual_seed(0)
    default = annotate(Common().set_global(config), exported(Gru().eval(), example))
    assert set(quantizing(default)) == {"linear"}  # opt-in: the GRU stays float


class Addmm(nn.Module):
    """Hugging Face's ``Conv1D``: ``addmm(bias, x, weight)`` with a parameter weight (then a
    real linear); the same with a weight computed in the graph, and with ``beta`` other
    than 1."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(8, 4))
        self.bias = nn.Parameter(torch.randn(4))
        self.fc = nn.Linear(4, 4)

    def forward(self, x: Tensor, w: Tensor) -> tuple[Tensor, ...]:
        return (
            self.fc(torch.addmm(self.bias, x, self.weight)),
            torch.addmm(self.bias, x, w * 2),
            torch.addmm(self.bias, x, self.weight, beta=0.5),
        )


class OptInPool(Common):
    """``"common"`` with its max-pool annotator opt-in (as XNNPACK registers its own) and
    no propagation after annotating: a pool is annotated by that annotator or not at all."""

    def annotators(self) -> list[Annotator]:
        return [
            dataclasses.replace(a, opt_in=True) if a.name == "max_pool2d" else a
            for a in super().annotators()
        ]

    def finalize(self, model: GraphModule) -> None:
        return None


class ConvPool(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 1)

    def forward(self, x: Tensor) -> Tensor:
        return F.max_pool2d(self.conv(x), 2) + 1.0


class Pooled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = ConvPool()

    def forward(self, x: Tensor) -> Tensor:
        return self.features(x)  # type: ignore[no-any-return]


def test_an_opt_in_annotator_runs_in_every_scoped_pass_and_by_name_in_the_global_one() -> None:
    """``Annotator.opt_in``'s one meaning: the global config leaves it out unless enabled
    by name; a module name's, a module type's or an operator's config runs it in its
    scope. (The pool shares an annotated producer's qparams: its conv is annotated by an
    earlier pass where the operator pass alone would find it float.)"""
    pool, config = aten.max_pool2d.default, _config()
    graph = exported(Pooled().eval(), (torch.randn(1, 2, 4, 4),))

    def pool_output(quantizer: RegistryQuantizer) -> str | None:
        entry = quantizing(annotate(quantizer, copy.deepcopy(graph))).get("max_pool2d", {})
        return entry.get("output")  # type: ignore[no-any-return]

    assert pool_output(OptInPool().set_global(config)) is None
    assert pool_output(OptInPool().set_global(config).enable("max_pool2d")) == "shared(conv2d)"
    assert pool_output(OptInPool().set_module_name("features", config)) == "shared(conv2d)"
    assert pool_output(OptInPool().set_module_type(ConvPool, config)) == "shared(conv2d)"
    by_operator = OptInPool().set_module_name("features.conv", config)
    assert pool_output(by_operator.set_operator_type(pool, config)) == "shared(conv2d)"


class OptInDecliner(Common):
    """One opt-in annotator, for ``linear``, that declines every one it is shown."""

    def annotators(self) -> list[Annotator]:
        return [
            Annotator(
                "declining_linear",
                lambda gm, config, filter_fn: None,
                ops=frozenset({aten.linear.default}),
                opt_in=True,
                why_not=lambda node, config: "it declines every linear",
            )
        ]


class InBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = nn.Linear(4, 4)

    def forward(self, x: Tensor) -> Tensor:
        return self.block(x)  # type: ignore[no-any-return]


def test_the_report_says_an_opt_in_annotator_ran_in_a_scoped_pass_only() -> None:
    """The not-quantized report follows the same meaning: in a scoped pass the opt-in
    annotator ran (and declined, saying why); in the global pass it did not run."""
    graph = exported(InBlock().eval(), (torch.randn(2, 4),))
    scoped = OptInDecliner().set_module_name("block", _config())
    (report,) = explain_not_quantized(copy.deepcopy(graph), scoped)
    assert (report.reason, report.detail) == (DECLINED, "declining_linear: it declines every linear")
    (report,) = explain_not_quantized(copy.deepcopy(graph), OptInDecliner().set_global(_config()))
    assert (report.reason, report.detail) == (
        NO_ANNOTATOR,
        "declining_linear do not run for the static config of the global pass",
    )


def test_an_operator_config_that_would_quantize_nothing_is_refused_saying_why() -> None:
    """An operator config whose operator no annotator of the config's kind handles says
    so at prepare rather than quantizing nothing."""
    add = aten.add.Tensor
    graph = exported(ConvPool().eval(), (torch.randn(1, 2, 4, 4),))
    dynamic = get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True)
    with pytest.raises(ValueError) as raised:
        OptInPool().set_operator_type(add, dynamic).annotate(copy.deepcopy(graph))
    assert str(raised.value) == (
        f"OptInPool.set_operator_type({add}, ...): no annotator of 'common' handles it "
        "with a dynamic config"
    )


class NoPropagation(Common):
    """``"common"`` without the propagation after annotating: each annotator on its own."""

    def finalize(self, model: GraphModule) -> None:
        return None


def test_a_max_pool_shares_its_annotated_producers_qparams_by_its_own_annotator() -> None:
    """The max-pool annotator itself (no propagation after it, which would reach the same
    result): the pool's input and output share the conv's output qparams."""
    annotated = annotate(
        NoPropagation().set_global(_config()), exported(ConvPool().eval(), (torch.randn(1, 2, 4, 4),))
    )
    pool = quantizing(annotated)["max_pool2d"]
    assert pool["inputs"] == {"conv2d": "shared(conv2d)"} and pool["output"] == "shared(conv2d)"


def test_addmm_with_a_constant_weight_becomes_the_linear_it_is() -> None:
    model, example = Addmm().eval(), (torch.randn(3, 8), torch.randn(8, 4))
    gm = addmm_to_linear(exported(model, example))
    ops = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert ops.count(aten.linear.default) == 2  # the converted addmm, and fc as it was
    assert ops.count(aten.addmm.default) == 2  # a computed weight, and beta = 0.5
    linear = next(n for n in gm.graph.nodes if n.target == aten.linear.default)
    transposed = linear.args[1]
    assert transposed.target == aten.t.default and transposed.args[0].op == "get_attr"
    assert "aten.linear" in gm.code  # the module runs what its graph says
    with torch.no_grad():
        for got, expected in zip(gm(*example), model(*example), strict=True):
            torch.testing.assert_close(got, expected)


def test_the_linear_an_addmm_becomes_keeps_the_calls_it_was_made_in() -> None:
    """Its ``source_fn_stack`` is the addmm's with the innermost call now ``F.linear``:
    the outer calls (the layers it was written in) stay as they were."""
    gm = exported(Addmm().eval(), (torch.randn(3, 8), torch.randn(8, 4)))
    addmm = next(n for n in gm.graph.nodes if n.target == aten.addmm.default)
    outer = [("block", nn.Sequential), ("layer", nn.Linear)]
    addmm.meta["source_fn_stack"] = [*outer, (addmm.name, torch.addmm)]
    gm = addmm_to_linear(gm)
    linear = next(n for n in gm.graph.nodes if n.target == aten.linear.default)
    assert linear.meta["source_fn_stack"] == [*outer, (linear.name, F.linear)]


def test_a_config_selects_the_annotators_of_its_kind_in_order() -> None:
    """Static configs (QAT too) run the conv-bn annotators first and every static one;
    dynamic configs the weighted ops that take run-time activation qparams; opt-in
    annotators in a scoped pass, and in the global one only when enabled."""
    static = ["conv_bn_relu", "conv_bn", "conv_transpose_bn_relu", "conv_transpose_bn",
              "linear_relu", "linear", "conv", "conv_transpose", "conv_relu",
              "conv_transpose_relu", "adaptive_avg_pool2d", "add_relu", "add", "mul_relu",
              "mul", "cat", "max_pool2d"]  # fmt: skip
    quantizer = Common()
    assert [a.name for a in quantizer.selected(_config())] == static
    assert [a.name for a in quantizer.selected(_config(qat=True))] == static
    dynamic = get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True)
    assert [a.name for a in quantizer.selected(dynamic)] == ["linear", "conv", "conv_transpose"]
    scoped = [a.name for a in quantizer.selected(_config(), scoped=True)]
    assert scoped == [*static, "gru_io_only"]
    assert [a.name for a in quantizer.enable("gru_io_only").selected(_config())] == scoped
    assert [a.name for a in quantizer.selected(_config(), aten.linear)] == ["linear_relu", "linear"]
    # what listings (``qcore show``) print for each: the QAT conv-bn ones are not static
    marks = {a.name: a.marks for a in quantizer.annotators()}
    assert {n for n, m in marks.items() if m == "training-pattern"} == set(static[:4])
    assert {n for n, m in marks.items() if m == "static dynamic"} == {
        "linear",
        "conv",
        "conv_transpose",
    }
    assert marks["gru_io_only"] == "static opt-in"
    assert set(marks) == {*static, "gru_io_only"}


def test_computing_is_what_one_output_depends_on_among_the_nodes() -> None:
    """A module called at two sites: each output computes from its own call's nodes only."""
    graph = torch.fx.Graph()
    x, y = graph.placeholder("x"), graph.placeholder("y")
    a1 = graph.call_function(torch.relu, (x,))
    b1 = graph.call_function(torch.neg, (a1,))
    a2 = graph.call_function(torch.relu, (y,))
    b2 = graph.call_function(torch.add, (a2, b1))
    graph.output((b1, b2))
    members = [a1, b1, a2, b2]
    assert computing(b1, members) == {a1, b1}
    assert computing(b2, members) == {a1, b1, a2, b2}
    assert computing(b2, [a2, b2]) == {a2, b2}  # nothing outside the nodes given


def _annotate_relu_output(
    gm: GraphModule, config: QuantizationConfig | None, filter_fn: Any
) -> list[Any]:
    """An extension's annotator: every relu's output observed."""
    for node in gm.graph.nodes:
        if node.target == aten.relu.default and filter_fn(node):
            node.meta["quantization_annotation"] = QuantizationAnnotation(
                output_qspec=get_output_act_qspec(config), _annotated=True
            )
    return []


def test_extension_annotators_run_only_when_enabled() -> None:
    """A quantizer runs its namespace's own annotators; those an extension added run
    once ``use_extensions()`` (what ``qcore.get_quantizer`` calls) says so."""
    from qcore.pt2e.annotation.registry import ANNOTATORS, Annotator

    ANNOTATORS.define("test-extensions", (ANNOTATORS.get("common", "linear"),), source="test")
    ANNOTATORS.add("test-extensions", Annotator("relu_out", _annotate_relu_output), source="ext")

    class Owned(RegistryQuantizer):
        namespace = "test-extensions"

    model, example = nn.Sequential(nn.Linear(4, 4), nn.ReLU()).eval(), (torch.randn(2, 4),)
    plain = quantizing(annotate(Owned().set_global(_config()), exported(model, example)))
    extended = quantizing(
        annotate(Owned().use_extensions().set_global(_config()), exported(model, example))
    )
    assert set(plain) == {"linear"} and set(extended) == {"linear", "relu"}


@pytest.mark.parametrize("literal", ["input", "weight"])
def test_a_conv_whose_input_or_weight_is_no_graph_node_is_refused_by_name(literal: str) -> None:
    """A hand-built graph may pass a tensor itself where export puts a node: the conv and
    conv-relu annotators refuse such a conv naming it, and annotate nothing (a literal
    input left unchecked would be annotated silently, a tensor keying its qspec map)."""
    from qcore.pt2e.annotation.common_annotators import conv_annotators

    graph = torch.fx.Graph()
    x, w = graph.placeholder("x"), graph.placeholder("w")
    tensor = torch.ones(1, 1, 3, 3)
    args = (tensor, w) if literal == "input" else (x, tensor)
    fused = graph.call_function(aten.conv2d.default, args)
    alone = graph.call_function(aten.conv2d.default, args)
    graph.output((graph.call_function(aten.relu.default, (fused,)), alone))
    model = GraphModule(nn.Module(), graph)
    got = "Tensor and Node" if literal == "input" else "Node and Tensor"
    conv, _, conv_relu, _ = conv_annotators()
    for annotator, name in ((conv, alone.name), (conv_relu, fused.name)):
        message = rf"^{name} \(aten\.conv2d\.default\): its input and weight must be graph nodes, got {got}$"
        with pytest.raises(ValueError, match=message):
            annotator(model, _config(), None)
    assert not any(n.meta.get("quantization_annotation") for n in model.graph.nodes)


def test_each_conv_bn_annotator_is_named_for_the_convs_it_quantizes() -> None:
    """The QAT conv → batch_norm annotators: a transposed one's name, description and ops
    all say conv_transpose; a plain one's all say conv."""
    from qcore.pt2e.annotation import common_annotators as common
    from qcore.pt2e.annotation import ops

    for annotator, transposed, relu in (
        (common.CONV_BN, False, False),
        (common.CONV_BN_RELU, False, True),
        (common.CONV_TRANSPOSE_BN, True, False),
        (common.CONV_TRANSPOSE_BN_RELU, True, True),
    ):
        conv = "conv_transpose" if transposed else "conv"
        assert annotator.name == f"{conv}_bn{'_relu' if relu else ''}"
        assert annotator.description.startswith(f"{conv} → batch_norm")
        assert annotator.ops == (ops.CONV_TRANSPOSE if transposed else ops.CONV)
        assert annotator.training_pattern and not annotator.static


def test_conv_bn_patterns_are_exported_only_for_a_graph_that_holds_a_batch_norm() -> None:
    """Exporting the twelve conv-bn patterns costs seconds per process: an eval graph (no
    batch_norm left) must not pay it, and a training graph must still be matched."""
    from qcore.pt2e.annotation import common_annotators as common

    common._conv_bn_matcher.cache_clear()
    example = (torch.randn(2, 3, 8, 8),)
    # (an eval graph as prepare_pt2e annotates it: batch norms folded into their convs)
    eval_graph = annotate(Common().set_global(_config()), exported(ConvChain().eval(), example))
    assert common._conv_bn_matcher.cache_info().currsize == 0
    assert len(quantizing(eval_graph)) >= 4  # (the convs were annotated all the same)
    trained = annotate(Common().set_global(_config(qat=True)), exported(ConvBn().train(), example))
    assert common._conv_bn_matcher.cache_info().currsize > 0
    # the batch_norm after the bias-less conv observes its output: a match of the pattern
    assert _short(trained, _config(qat=True))["batch_norm_1"].get("output") == "act"


def test_a_quantizer_configures_qat_when_any_pass_does() -> None:
    """``has_qat_config`` (read by ``explain_not_quantized``, which must leave batch norms
    unfolded for QAT as ``prepare_qat_pt2e`` does) is true when the global pass or any
    scoped pass configures QAT, false for static configs and for a pass that sets None."""
    static, qat = get_symmetric_quantization_config(), get_symmetric_quantization_config(is_qat=True)
    assert not Common().set_global(static).has_qat_config()
    assert not Common().set_global(static).set_module_name("head", None).has_qat_config()
    assert Common().set_global(qat).has_qat_config()
    assert Common().set_global(static).set_module_name("head", qat).has_qat_config()
    assert Common().set_module_name("head", None).set_global(qat).has_qat_config()
