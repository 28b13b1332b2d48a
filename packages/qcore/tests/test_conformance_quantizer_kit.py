"""The PT2E half of the conformance kit, piece by piece: what counts as a valid annotation,
which example and config each annotator is checked on, and the verdicts of the flow.

``test_conformance_quantizer.py`` runs the kit on whole fake plugins; here each rule is
checked on a graph whose annotations the test writes itself, so every problem the kit
must name is provoked once and the expected report line is written out.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest
import torch
from torch import nn
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e import (
    HistogramObserver,
    PerChannelMinMaxObserver,
    PlaceholderObserver,
)
from torchao.quantization.pt2e.quantizer import (
    QuantizationAnnotation,
    QuantizationConfig,
    QuantizationSpec,
    SharedQuantizationSpec,
)

import qcore.host
from qcore._torch_private import Q_ANNOTATION_KEY
from qcore.pt2e.annotation.claims import is_op, set_annotation
from qcore.pt2e.annotation.common_annotators import COMMON, propagate_shared_qparams
from qcore.pt2e.annotation.registry import ANNOTATORS, Annotator
from qcore.pt2e.annotation.registry_quantizer import RegistryQuantizer
from qcore.pt2e.annotation.transforms import scalars_to_attrs
from qcore.testing import check_quantizer
from qcore.testing.quantizer_checks import (
    CANONICAL,
    _annotation_check,
    _config_for,
    _context,
    _example,
    _from_ops,
    _prepare_convert,
    validate_annotations,
)
from qcore.zoo.suite.fakes import FakeDist, one_plugin

aten = torch.ops.aten


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao's and export's notices
        yield


def _act() -> QuantizationSpec:
    return QuantizationSpec(
        dtype=torch.uint8, quant_min=0, quant_max=255, qscheme=torch.per_tensor_affine,
        observer_or_fake_quant_ctr=HistogramObserver.with_args(),
    )  # fmt: skip


def _config() -> QuantizationConfig:
    weight = QuantizationSpec(
        dtype=torch.int8, quant_min=-127, quant_max=127, qscheme=torch.per_channel_symmetric,
        ch_axis=0, observer_or_fake_quant_ctr=PerChannelMinMaxObserver.with_args(),
    )  # fmt: skip
    return QuantizationConfig(_act(), _act(), weight, None)


def _nothing(gm: GraphModule, config: Any, filter_fn: Any) -> list[list[Node]]:
    return []


# -- validate_annotations -------------------------------------------------------------------


def _linear() -> tuple[GraphModule, Node, Node, Node]:
    """An exported linear: (graph, its linear node, its input, its weight)."""
    gm = torch.export.export(nn.Linear(4, 2), (torch.randn(1, 4),)).module()
    (linear,) = [n for n in gm.graph.nodes if n.target == aten.linear.default]
    return gm, linear, linear.args[0], linear.args[1]


def _foreign() -> Node:
    """A node of another graph."""
    return _linear()[1]


def test_valid_annotations_of_the_pattern_op_pass() -> None:
    gm, linear, x, w = _linear()
    set_annotation(linear, {x: _act(), w: _act()}, _act())
    for ops in ({aten.linear.default}, {aten.linear}, {aten.linear.default, aten.relu.default}):
        assert validate_annotations(gm, frozenset(ops)) == [], ops  # an overload or its packet
    assert validate_annotations(gm, frozenset()) == []  # no ops: coverage not asked


@pytest.mark.parametrize("where", ["inputs", "output"])
def test_specs_on_either_side_cover_the_op(where: str) -> None:
    gm, linear, x, _ = _linear()
    if where == "inputs":
        set_annotation(linear, {x: _act()}, None)
    else:
        set_annotation(linear, {}, _act())
    assert validate_annotations(gm, frozenset({aten.linear.default})) == []


def test_an_annotation_without_specs_or_on_another_op_covers_nothing() -> None:
    gm, linear, x, _ = _linear()
    set_annotation(linear, {}, None)  # claimed, but quantizes nothing
    expected = ["no node of ['aten.linear.default'] was annotated"]
    assert validate_annotations(gm, frozenset({aten.linear.default})) == expected
    set_annotation(linear, {x: _act()}, _act())
    assert validate_annotations(gm, frozenset({aten.conv2d.default})) == [
        "no node of ['aten.conv2d.default'] was annotated"
    ]
    assert validate_annotations(gm, frozenset({aten.conv2d})) == [
        "no node of ['aten.conv2d'] was annotated"
    ]


def test_each_malformed_annotation_is_named() -> None:
    gm, linear, x, w = _linear()
    output = next(n for n in gm.graph.nodes if n.op == "output")
    foreign = _foreign()
    linear.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation(
        input_qspec_map={
            x: SharedQuantizationSpec((foreign, linear)),  # an edge from another graph
            w: "int8",  # not a spec
            output: _act(),  # a node, but not an input of the linear
        },
        output_qspec=SharedQuantizationSpec(foreign),
    )
    x.meta[Q_ANNOTATION_KEY] = {"output": _act()}  # not an annotation
    assert validate_annotations(gm, frozenset({aten.linear.default})) == [
        f"{x.name}: annotation is a dict",
        f"{linear.name}: input_qspec_map names {output.name}, not an input",
        f"{linear.name} output: shares with a node not in the graph",
        f"{linear.name} input {x.name}: shares with a node not in the graph",
        f"{linear.name} input {w.name}: str is not a qspec",
    ]


def test_shared_specs_within_the_graph_and_empty_specs_are_valid() -> None:
    gm, linear, x, w = _linear()
    set_annotation(linear, {x: _act(), w: None}, SharedQuantizationSpec((x, linear)))
    assert validate_annotations(gm, frozenset({aten.linear.default})) == []
    set_annotation(linear, {x: _act()}, SharedQuantizationSpec(x))
    assert validate_annotations(gm, frozenset({aten.linear.default})) == []


# -- which config, which example, which context ----------------------------------------------


def test_a_dynamic_only_annotator_is_checked_with_dynamic_activations() -> None:
    base = _config()
    dynamic = Annotator("d", _nothing, static=False, dynamic=True)
    got = _config_for(dynamic, base)
    assert got.input_activation is not None and got.input_activation.is_dynamic
    assert isinstance(got.input_activation.observer_or_fake_quant_ctr(), PlaceholderObserver)
    assert got.output_activation is None  # a dynamic pattern's output stays float
    assert got.weight is base.weight and got.input_activation.dtype == torch.uint8
    # the scale floor of XNNPACK's dynamic config (torchao.testing.pt2e's
    # get_symmetric_quantization_config(is_dynamic=True)): a constant input still
    # quantizes to finite values
    assert got.input_activation.observer_or_fake_quant_ctr().eps == 2**-12
    assert base.input_activation is not None and not base.input_activation.is_dynamic
    for other in (
        Annotator("s", _nothing),
        Annotator("sd", _nothing, dynamic=True),
        Annotator("t", _nothing, static=False, training_pattern=True),
    ):
        assert _config_for(other, base) is base, other.name
    no_activations = replace(base, input_activation=None)
    assert _config_for(dynamic, no_activations) is no_activations


def test_an_annotators_own_example_comes_first_then_the_canonical_one_then_its_ops() -> None:
    own = (nn.Identity(), (torch.ones(1),))
    assert _example(Annotator("linear", _nothing, example=lambda: own)) is own
    model, inputs = _example(Annotator("linear", _nothing))  # type: ignore[misc]
    assert isinstance(model, nn.Linear) and inputs[0].shape[-1] == model.in_features
    model, (x,) = _example(Annotator("mine", _nothing, ops=frozenset({aten.sigmoid.default})))  # type: ignore[misc]
    assert torch.equal(model(x), torch.sigmoid(x))


def test_the_example_from_ops_is_the_first_op_that_runs_on_one_tensor() -> None:
    # by name: add (needs a second tensor) fails, relu runs; sigmoid comes after relu
    ops = frozenset({aten.add.Tensor, aten.sigmoid.default, aten.relu.default})
    example = _from_ops(ops)
    assert example is not None
    model, (x,) = example
    assert x.dim() == 4 and x.dtype == torch.float32
    assert torch.equal(model(x), torch.relu(x))
    assert _from_ops(frozenset({aten.add.Tensor, aten.mul.Tensor})) is None
    assert _from_ops(frozenset()) is None


def test_canonical_examples_name_exactly_the_common_annotators() -> None:
    assert set(CANONICAL) == {a.name for a in COMMON}
    assert all(a.example is None for a in COMMON)  # so the kit uses CANONICAL for each


class _Owner:
    """What the kit asks of a quantizer: the namespace order, what a config selects, the
    global config and the graph transform (none here)."""

    def __init__(self, order: list[Annotator], selected: list[Annotator]) -> None:
        self._order, self._selected = order, selected
        self.global_config = _config()

    def transform_for_annotation(self, gm: GraphModule) -> GraphModule:
        return gm

    def annotators(self) -> list[Annotator]:
        return self._order

    def selected(self, config: Any) -> list[Annotator]:
        return self._selected


def test_the_context_is_the_selected_annotators_that_run_before() -> None:
    a, b, c, d = (Annotator(n, _nothing) for n in "abcd")
    owner = _Owner([a, b, c, d], [a, c, d])
    assert _context(d, None, owner) == [a, c]
    assert _context(c, None, owner) == [a]
    assert _context(b, None, owner) == [a]  # b itself is not selected: still checked
    assert _context(a, None, owner) == []


class Common(RegistryQuantizer):
    namespace = "common"

    def transform_for_annotation(self, model: GraphModule) -> GraphModule:
        return scalars_to_attrs(model)

    def finalize(self, model: GraphModule) -> None:
        propagate_shared_qparams(model)


@pytest.mark.parametrize("name", [a.name for a in COMMON])
def test_every_common_annotator_passes_on_its_canonical_example(name: str) -> None:
    """Each example holds its annotator's pattern and runs: an example that lacks the
    pattern (an add model that subtracts) annotates nothing, and one whose sizes do not
    fit fails to export."""
    quantizer = Common().set_global(_config())
    check, example, config, _ = _annotation_check("q", ANNOTATORS.get("common", name), quantizer)
    assert check.ok, check
    assert example is not None and config is not None


def test_a_pool_is_checked_after_its_context() -> None:
    """max_pool2d annotates only after an annotated producer: its check runs the
    namespace's earlier selected annotators (the conv) first."""
    quantizer = Common().set_global(_config())
    pool = ANNOTATORS.get("common", "max_pool2d")
    assert _annotation_check("q", pool, quantizer)[0].ok
    check = _annotation_check("q", pool, _Owner([pool], [pool]))[0]
    assert (check.ok, check.detail) == (
        False, "AssertionError: the annotator annotated nothing on its example model",
    )  # fmt: skip


class _Recorder:
    """An annotator fn that records the config and the mode it ran in, then annotates
    the linear nodes."""

    def __init__(self) -> None:
        self.configs: list[Any] = []

    def __call__(self, gm: GraphModule, config: Any, filter_fn: Any) -> list[list[Node]]:
        self.configs.append(config)
        found = [n for n in gm.graph.nodes if is_op(n, frozenset({aten.linear.default}))]
        for node in found:
            set_annotation(node, {node.args[0]: config.input_activation}, config.output_activation)
        return [[n] for n in found]


class _ModeModel(nn.Module):
    def __init__(self, modes: list[bool]) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 2)
        self.modes = modes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.modes.append(self.training)
        return self.lin(x)


@pytest.mark.parametrize(
    ("static", "training_pattern", "qat"), [(True, False, False), (False, True, True), (True, True, False)]
)
def test_a_training_pattern_is_checked_in_train_mode_with_a_qat_config(
    static: bool, training_pattern: bool, qat: bool
) -> None:
    modes: list[bool] = []
    recorder = _Recorder()
    annotator = Annotator(
        "rec", recorder, static=static, training_pattern=training_pattern,
        example=lambda: (_ModeModel(modes), (torch.randn(2, 4),)),
    )  # fmt: skip
    check, _, config, _ = _annotation_check("q", annotator, _Owner([annotator], []))
    assert check.ok, check
    assert modes and set(modes) == {qat}
    assert bool(config.is_qat) is qat and bool(recorder.configs[0].is_qat) is qat


def test_a_quantizer_that_builds_its_config_per_model_is_asked_for_it() -> None:
    recorder = _Recorder()
    model = nn.Linear(4, 2)
    annotator = Annotator("rec", recorder, example=lambda: (model, (torch.randn(2, 4),)))
    own = replace(_config(), output_activation=None)
    asked: list[tuple[nn.Module, bool]] = []

    def config_for_example(m: nn.Module, qat: bool) -> QuantizationConfig:
        asked.append((m, qat))
        return own

    quantizer = _Owner([annotator], [])
    quantizer.config_for_example = config_for_example  # type: ignore[attr-defined]
    check, _, config, _ = _annotation_check("q", annotator, quantizer)
    assert check.ok, check
    assert asked == [(model, False)] and config is own and recorder.configs == [own]


def test_an_annotator_that_only_adds_nodes_annotated_nothing() -> None:
    """The check compares the annotated nodes before and after: a node the annotator
    adds without annotating it is no annotation."""

    def adds_a_node(gm: GraphModule, config: Any, filter_fn: Any) -> list[list[Node]]:
        x = next(n for n in gm.graph.nodes if n.op == "placeholder")
        with gm.graph.inserting_after(x):
            gm.graph.call_function(aten.clone.default, (x,))
        return []

    example = (nn.Linear(4, 2), (torch.randn(2, 4),))
    annotator = Annotator("adder", adds_a_node, example=lambda: example)
    check = _annotation_check("q", annotator, _Owner([annotator], []))[0]
    assert (check.ok, check.detail) == (
        False, "AssertionError: the annotator annotated nothing on its example model",
    )  # fmt: skip


def test_an_annotator_that_raises_or_has_no_example_fails_naming_why() -> None:
    def broken(gm: GraphModule, config: Any, filter_fn: Any) -> None:
        raise ValueError("cannot annotate")

    raising = Annotator("linear", broken)
    check = _annotation_check("q", raising, _Owner([raising], []))[0]
    assert (check.ok, check.detail) == (False, "ValueError: cannot annotate")
    lonely = Annotator("lonely", _nothing, ops=frozenset({aten.add.Tensor}))
    check, example, config, target = _annotation_check("q", lonely, _Owner([lonely], []))
    assert (check.ok, check.detail) == (False, "no example model for ops ['aten.add.Tensor']")
    assert example is None and config is None and target is None


# -- an annotator that declines on some int8 targets --------------------------------------------

LINEAR = frozenset({aten.linear.default})
SATURATES = "saturates here"


def _unless_saturating(gm: GraphModule, config: Any, filter_fn: Any) -> list[list[Node]]:
    """Annotates the linears for a target whose u8 x s8 products do not saturate."""
    return [] if qcore.host.target().saturates_u8s8 else _Recorder()(gm, config, filter_fn)


def _why(node: Node, config: Any) -> str | None:
    """The reason, for the annotator's own ops only (another node's reason is not its)."""
    return SATURATES if qcore.host.target().saturates_u8s8 and is_op(node, LINEAR) else None


def _declining(fn: Any = _unless_saturating, why_not: Any = _why) -> Annotator:
    """Two linears: the reason they share is given once."""
    return Annotator(
        "declines", fn, ops=LINEAR, why_not=why_not,
        example=lambda: (nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2)), (torch.randn(2, 4),)),
    )  # fmt: skip


@pytest.mark.parametrize("here", ["avx2", "avx512_vnni"])
def test_an_annotator_that_declines_with_its_reason_is_checked_for_a_target_it_annotates_on(
    here: str,
) -> None:
    """The verdict does not depend on the CPU the kit runs on: declined on a saturating
    target with its reason, the annotation is checked for the first known target that
    does not saturate (amx), and the flow's check runs for that target too."""
    annotator = _declining()
    quantizer = _Owner([annotator], [])
    with qcore.host.targeting(here):
        check, example, _, target = _annotation_check("q", annotator, quantizer)
    assert check.ok, check
    if here == "avx2":
        assert target == "amx"
        assert check.detail == f"declines on target avx2 ({SATURATES}); checked for target amx"
    else:
        assert (target, check.detail) == (None, "")
    assert example is not None


@pytest.mark.parametrize(
    ("fn", "why_not", "detail"),
    [
        # no reason given: a silent decline
        (_unless_saturating, None, "the annotator annotated nothing on its example model"),
        (_unless_saturating, lambda n, c: None, "the annotator annotated nothing on its example model"),
        (_unless_saturating, lambda n, c: "", "the annotator annotated nothing on its example model"),
        # a reason, but no target it annotates on
        (_nothing, _why, f"the annotator annotated nothing on its example model for any int8 target ({SATURATES})"),
    ],
)
def test_a_decline_without_a_reason_or_on_every_target_fails(fn: Any, why_not: Any, detail: str) -> None:
    annotator = _declining(fn, why_not)
    with qcore.host.targeting("avx2"):
        check = _annotation_check("q", annotator, _Owner([annotator], []))[0]
    assert (check.ok, check.detail) == (False, f"AssertionError: {detail}")


# -- the flow's verdicts ----------------------------------------------------------------------


class _Outputs(nn.Module):
    def __init__(self, fn: Callable[[torch.Tensor], Any]) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.fn = fn

    def forward(self, x: torch.Tensor) -> Any:
        return self.fn(self.lin(x))


@pytest.mark.parametrize(
    ("outputs", "problem"),
    [
        (lambda y: y, ""),
        (lambda y: (y, y + 1), ""),
        (lambda y: y / 0.0, "the converted model computes non-finite values"),
        (lambda y: (y, y / 0.0), "the converted model computes non-finite values"),
        (lambda y: (y.argmax(-1), y / 0.0), "the converted model computes non-finite values"),
    ],
)
def test_the_converted_model_must_compute_finite_values(
    outputs: Callable[[torch.Tensor], Any], problem: str
) -> None:
    linear = ANNOTATORS.get("common", "linear")
    quantizer = Common().set_global(_config())
    example = (_Outputs(outputs).eval(), (torch.randn(3, 4),))
    assert _prepare_convert([linear], example, _config(), quantizer) == problem


class _Dropped(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin, self.drop = nn.Linear(4, 4), nn.Dropout(0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.lin(x))


def test_a_qat_flow_is_converted_in_eval_mode_and_must_give_one_output_per_input() -> None:
    """QAT prepares the model in training mode: converted as users convert it (moved to
    eval first), its dropout is off and two runs agree. A post-training example whose own
    forward drops at random (the ``f_dropout`` pattern's, ``F.dropout``'s default) is the
    op as written, not a flow left training: it passes."""
    linear = ANNOTATORS.get("common", "linear")
    quantizer = Common().set_global(_config())
    qat = replace(_config(), is_qat=True)
    trained = (_Dropped().train(), (torch.randn(8, 4),))
    assert _prepare_convert([linear], trained, qat, quantizer) == ""
    random = (_Outputs(lambda y: torch.nn.functional.dropout(y, 0.5)).eval(), (torch.randn(8, 4),))
    assert _prepare_convert([linear], random, _config(), quantizer) == ""


def test_a_flow_that_raises_names_the_error() -> None:
    linear = ANNOTATORS.get("common", "linear")
    quantizer = Common().set_global(_config())
    example = (nn.Linear(4, 2), (torch.randn(3, 5),))  # the sizes do not fit
    assert _prepare_convert([linear], example, _config(), quantizer).startswith("RuntimeError: ")


# -- check_quantizer's own verdicts -----------------------------------------------------------

PLUGIN = """
import torch
from torch import nn
from torchao.quantization.pt2e import HistogramObserver, PerChannelMinMaxObserver
from torchao.quantization.pt2e.quantizer import Quantizer, QuantizationConfig, QuantizationSpec
from qcore.pt2e.annotation.claims import is_op, set_annotation
from qcore.pt2e.annotation.registry_quantizer import RegistryQuantizer
from qcore.pt2e.annotation.registry import ANNOTATORS, Annotator
from qcore.plugin_api import QuantizerPlugin
import qcore.host

TANH = frozenset({torch.ops.aten.tanh.default})
LINEAR = frozenset({torch.ops.aten.linear.default})
SIGMOID = frozenset({torch.ops.aten.sigmoid.default})

def annotating(ops):
    def annotate(gm, config, filter_fn):
        found = [n for n in gm.graph.nodes if is_op(n, ops)]
        for node in found:
            set_annotation(node, {node.args[0]: config.input_activation}, config.output_activation)
        return [[n] for n in found]
    return annotate

class Tanh(nn.Module):
    def forward(self, x):
        return torch.tanh(x)

class Sigmoid(nn.Module):
    def forward(self, x):
        return torch.sigmoid(x)

class Sum(nn.Module):  # two inputs: the kit feeds each part of a joint model its own
    def forward(self, x, y):
        return torch.sigmoid(x) + y

#: training patterns: checked in train mode, converted together in one QAT flow
TRAINING = {
    "qat_one": Annotator("qat_one", annotating(TANH), static=False, training_pattern=True,
                         ops=TANH, example=lambda: (Tanh(), (torch.randn(2, 4),))),
    "qat_two": Annotator("qat_two", annotating(SIGMOID), static=False, training_pattern=True,
                         ops=SIGMOID, example=lambda: (Sum(), (torch.randn(2, 4), torch.randn(3, 1, 4)))),
}

def unless_saturating(ops):
    def annotate(gm, config, filter_fn):
        return [] if qcore.host.target().saturates_u8s8 else annotating(ops)(gm, config, filter_fn)
    return annotate

def saturates(node, config):
    return "saturates here" if qcore.host.target().saturates_u8s8 else None

#: own annotators: the training patterns, and one that declines on a saturating target
OWN = {
    **TRAINING,
    "declines": Annotator("declines", unless_saturating(LINEAR), ops=LINEAR, why_not=saturates,
                          example=lambda: (nn.Linear(4, 2), (torch.randn(2, 4),))),
    "qat_declines": Annotator("qat_declines", unless_saturating(SIGMOID), static=False, training_pattern=True,
                              ops=SIGMOID, why_not=saturates, example=lambda: (Sigmoid(), (torch.randn(2, 4),))),
}
ANNOTATORS.define(
    "fake_NAME", [OWN[n] if n in OWN else ANNOTATORS.get("common", n) for n in NAMES],
    source="fake-quantizer-NAME 1.0",
)

class Fake(RegistryQuantizer):
    namespace = "fake_NAME"

class Plain(Quantizer):
    def annotate(self, model):
        return model

    def validate(self, model):
        pass

def make(**options):
    act = QuantizationSpec(
        dtype=torch.uint8, quant_min=0, quant_max=255, qscheme=torch.per_tensor_affine,
        observer_or_fake_quant_ctr=HistogramObserver.with_args(),
    )
    weight = QuantizationSpec(
        dtype=torch.int8, quant_min=-127, quant_max=127, qscheme=torch.per_channel_symmetric,
        ch_axis=0, observer_or_fake_quant_ctr=PerChannelMinMaxObserver.with_args(),
    )
    config = QuantizationConfig(act, act, weight, None)
    return BUILD

PLUGIN = QuantizerPlugin(name="NAME", factory=make, annotator_namespace="fake_NAME")
"""


def _install(fake_dist: FakeDist, name: str, names: list[str], build: str) -> None:
    source = PLUGIN.replace("NAMES", repr(names)).replace("BUILD", build).replace("NAME", name)
    one_plugin(fake_dist, f"fake-quantizer-{name}", name, f"fake_quantizer_{name}", source,
               group="qcore.quantizers")  # fmt: skip


@pytest.mark.parametrize(
    ("name", "build", "detail"),
    [
        ("plainq", "Plain()", "Plain is not built on qcore's annotator registry"),
        ("noconfigq", "Fake()", "default quantizer has no global config"),
        ("raisingq", "1 / 0", "ZeroDivisionError"),
    ],
)
def test_a_quantizer_the_kit_cannot_check_fails_one_load_check(
    fake_dist: FakeDist, name: str, build: str, detail: str
) -> None:
    _install(fake_dist, name, ["linear"], build)
    results = check_quantizer(name)
    assert [(r.check, r.ok) for r in results] == [("load", False)]
    assert detail in results[0].detail


def test_an_empty_namespace_fails(fake_dist: FakeDist) -> None:
    _install(fake_dist, "emptyns", [], "Fake().set_global(config)")
    results = check_quantizer("emptyns")
    assert [(r.check, r.subject, r.ok, r.detail) for r in results] == [
        ("load", "emptyns", True, ""),
        ("annotator", "fake_emptyns", False, "namespace is empty"),
    ]


def test_training_patterns_are_converted_together_and_each_reported(fake_dist: FakeDist) -> None:
    """Both training patterns' examples go through one QAT flow (as one model of two
    parts, each fed its own inputs), the linear through its own PTQ flow; each is
    reported, and all pass."""
    _install(fake_dist, "qatq", ["qat_one", "linear", "qat_two"], "Fake().set_global(config)")
    results = check_quantizer("qatq")
    assert [(r.check, r.subject, r.ok, r.detail) for r in results] == [
        ("load", "qatq", True, ""),
        ("annotator", "qat_one", True, ""),
        ("annotator", "linear", True, ""),
        ("prepare-convert", "linear", True, ""),
        ("annotator", "qat_two", True, ""),
        ("prepare-convert", "qat_one", True, ""),
        ("prepare-convert", "qat_two", True, ""),
    ]


def test_the_flow_of_a_declining_annotator_runs_for_the_target_it_annotates_on(
    fake_dist: FakeDist,
) -> None:
    """check_quantizer on a saturating target: the annotator passes, and its prepare-convert
    check converts a quantized linear (on this target the annotator would leave it float:
    'the converted graph holds no quantize op')."""
    _install(fake_dist, "declinesq", ["declines", "qat_one", "qat_declines"], "Fake().set_global(config)")
    with qcore.host.targeting("avx2"):
        results = check_quantizer("declinesq")
    # a training pattern that declines here is converted on its own, for its target: in
    # the joint QAT flow the other part's quantize ops would hide that it quantized nothing
    assert [(r.check, r.subject, r.ok) for r in results] == [
        ("load", "declinesq", True),
        ("annotator", "declines", True),
        ("prepare-convert", "declines", True),
        ("annotator", "qat_one", True),
        ("annotator", "qat_declines", True),
        ("prepare-convert", "qat_declines", True),
        ("prepare-convert", "qat_one", True),
    ], results
    assert all("checked for target amx" in results[i].detail for i in (1, 4))
