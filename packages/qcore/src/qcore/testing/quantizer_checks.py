"""Conformance checks for PT2E quantizer plugins.

For each annotator in the quantizer's registry namespace: export a small model holding the
annotator's pattern, run that annotator alone, check that what it wrote is a valid
annotation (specs of the right types, on inputs the node really has, shared specs pointing
at real edges, the pattern's own op covered), then run ``prepare_pt2e``, a calibration
pass and ``convert_pt2e`` with a quantizer made of that annotator only, and check that the
converted graph holds quantize ops and computes finite values (for a QAT flow, which
converts after moving the model to eval as users do, the same ones on a second run). An annotator that
declines its pattern on this int8 target, saying why, is checked for another target.

The small model comes from the annotator's ``example`` if it has one, else from the table
below by name, else from calling one of its ops on a float tensor.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.fx import GraphModule

from qcore._torch_private import Q_ANNOTATION_KEY, reused_pattern_graphs
from qcore.int8 import cpu_profile
from qcore.plugins.api import get_quantizer
from qcore.pt2e.annotation.claims import is_op
from qcore.pt2e.annotation.registry import ANNOTATORS
from qcore.testing.result import CheckResult, Progress, no_progress

Example = tuple[nn.Module, tuple[torch.Tensor, ...]]


class _Fn(nn.Module):
    """A model from a function and the modules it uses (so module-based partitions exist)."""

    def __init__(self, fn: Callable[..., torch.Tensor], **modules: nn.Module) -> None:
        super().__init__()
        self.fn = fn
        for name, module in modules.items():
            self.add_module(name, module)

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        return self.fn(self, *args)


#: The examples' sizes: batch, channels, image side, features, kernel (and sequence
#: length). Every example below is built from these alone: the checks hold for any sizes
#: that fit together and no result shows them, so they are the kit's only free choice.
_N, _C, _SIDE, _F, _K = 2, 4, 8, 8, 3


def _img() -> tuple[torch.Tensor, ...]:
    return (torch.randn(_N, _C, _SIDE, _SIDE),)


def _vec() -> torch.Tensor:
    return torch.randn(_N, _F)


def _conv(transpose: bool = False) -> nn.Module:
    return (nn.ConvTranspose2d if transpose else nn.Conv2d)(_C, _C, _K)


def _conv_bn(transpose: bool, relu: bool) -> Example:
    layers = [_conv(transpose), nn.BatchNorm2d(_C)] + ([nn.ReLU()] if relu else [])
    return nn.Sequential(*layers), _img()


def _binary(fn: Callable[..., torch.Tensor]) -> Example:
    return _Fn(lambda m, x, y: fn(x, y)), (_vec(), _vec())


#: Canonical models for the annotator names qcore's common namespace defines.
CANONICAL: dict[str, Callable[[], Example]] = {
    "linear": lambda: (nn.Linear(_F, _F), (_vec(),)),
    "linear_relu": lambda: (nn.Sequential(nn.Linear(_F, _F), nn.ReLU()), (_vec(),)),
    "conv": lambda: (_conv(), _img()),
    "conv_relu": lambda: (nn.Sequential(_conv(), nn.ReLU()), _img()),
    "conv_transpose": lambda: (_conv(transpose=True), _img()),
    "conv_transpose_relu": lambda: (nn.Sequential(_conv(transpose=True), nn.ReLU()), _img()),
    "conv_bn": lambda: _conv_bn(False, False),
    "conv_bn_relu": lambda: _conv_bn(False, True),
    "conv_transpose_bn": lambda: _conv_bn(True, False),
    "conv_transpose_bn_relu": lambda: _conv_bn(True, True),
    "adaptive_avg_pool2d": lambda: (
        _Fn(lambda m, x: m.pool(m.conv(x)), conv=_conv(), pool=nn.AdaptiveAvgPool2d(_K)),
        _img(),
    ),
    "max_pool2d": lambda: (_Fn(lambda m, x: F.max_pool2d(m.conv(x), _K), conv=_conv()), _img()),
    "add": lambda: _binary(torch.add),
    "add_relu": lambda: _binary(lambda x, y: F.relu(x + y)),
    "mul": lambda: _binary(torch.mul),
    "mul_relu": lambda: _binary(lambda x, y: F.relu(x * y)),
    "cat": lambda: (
        _Fn(lambda m, x, y: torch.cat([m.lin(x), y], dim=1), lin=nn.Linear(_F, _F)),
        (_vec(), _vec()),
    ),
    "gru_io_only": lambda: (nn.GRU(_F, _F), (torch.randn(_K, _N, _F),)),  # (time, batch, features)
}


def _from_ops(ops: frozenset[Any]) -> Example | None:
    """A one-op model for an annotator with no canonical example (extension ops)."""
    (x,) = _img()
    for op in sorted(ops, key=str):
        try:
            op(x)
        except Exception:  # noqa: BLE001 - the op wants other arguments; try the next one
            continue
        return _Fn(lambda m, t, op=op: op(t)), (x,)
    return None


def _example(annotator: Any) -> Example | None:
    if annotator.example is not None:
        example: Example = annotator.example()
        return example
    if annotator.name in CANONICAL:
        return CANONICAL[annotator.name]()
    return _from_ops(annotator.ops)


def _config_for(annotator: Any, base: Any) -> Any:
    """The base config, made dynamic for dynamic-only annotators."""
    from torchao.quantization.pt2e import PlaceholderObserver

    if annotator.static or annotator.training_pattern or base.input_activation is None:
        return base
    act = replace(
        base.input_activation,
        is_dynamic=True,
        observer_or_fake_quant_ctr=PlaceholderObserver.with_args(eps=2**-12),
    )
    return replace(base, input_activation=act, output_activation=None)


def validate_annotations(gm: GraphModule, ops: frozenset[Any]) -> list[str]:
    """Problems with the annotations in ``gm``; empty if they are valid."""
    from torchao.quantization.pt2e.quantizer import (
        QuantizationAnnotation,
        QuantizationSpecBase,
        SharedQuantizationSpec,
    )

    problems: list[str] = []
    nodes = set(gm.graph.nodes)
    covered = False
    for node in gm.graph.nodes:
        ann = node.meta.get(Q_ANNOTATION_KEY)
        if ann is None:
            continue
        if not isinstance(ann, QuantizationAnnotation):
            problems.append(f"{node.name}: annotation is a {type(ann).__name__}")
            continue
        specs = [("output", ann.output_qspec)]
        for arg, spec in (ann.input_qspec_map or {}).items():
            if arg not in node.all_input_nodes:
                problems.append(f"{node.name}: input_qspec_map names {arg}, not an input")
            specs.append((f"input {getattr(arg, 'name', arg)}", spec))
        for where, spec in specs:
            if spec is not None and not isinstance(spec, QuantizationSpecBase):
                problems.append(f"{node.name} {where}: {type(spec).__name__} is not a qspec")
            if isinstance(spec, SharedQuantizationSpec):
                edge = spec.edge_or_node
                ends = edge if isinstance(edge, tuple) else (edge,)
                if any(e not in nodes for e in ends):
                    problems.append(f"{node.name} {where}: shares with a node not in the graph")
        if (ann.input_qspec_map or ann.output_qspec is not None) and (
            node.target in ops
            or any(getattr(o, "overloadpacket", None) is node.target for o in ops)
            or any(getattr(node.target, "overloadpacket", None) is o for o in ops)
        ):
            covered = True
    if ops and not covered:
        problems.append(f"no node of {sorted(map(str, ops))} was annotated")
    return problems


def _context(annotator: Any, config: Any, owner: Any) -> list[Any]:
    """The annotators that run before ``annotator`` for ``config``: some patterns (a pool
    sharing its producer's qparams) only apply after those."""
    order = owner.annotators()
    before = order[: order.index(annotator)]
    return [a for a in owner.selected(config) if a in before]


def _annotated_nodes(gm: GraphModule) -> set[str]:
    return {n.name for n in gm.graph.nodes if Q_ANNOTATION_KEY in n.meta}


def _quantizer_of(annotators: list[Any], config: Any, owner: Any) -> Any:
    """A quantizer running just ``annotators`` (in order, each after its context)."""
    from torchao.quantization.pt2e.quantizer import Quantizer

    class Only(Quantizer):  # type: ignore[misc]
        def transform_for_annotation(self, model: GraphModule) -> GraphModule:
            result: GraphModule = owner.transform_for_annotation(model)
            return result

        def annotate(self, model: GraphModule) -> GraphModule:
            for annotator in annotators:
                for a in [*_context(annotator, config, owner), annotator]:
                    a.fn(model, config, None)
            return model

        def validate(self, model: GraphModule) -> None:
            pass

    return Only()


class _Together(nn.Module):
    """Several example models side by side, so QAT conversion (whose conv-bn folding
    costs ~25 s per call whatever the graph) runs once for all training-pattern annotators."""

    def __init__(self, examples: list[Example]) -> None:
        super().__init__()
        self.parts = nn.ModuleList(m for m, _ in examples)
        self.arity = [len(i) for _, i in examples]

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        outs, start = [], 0
        for part, n in zip(self.parts, self.arity, strict=True):
            outs.append(part(*inputs[start : start + n]))
            start += n
        return tuple(outs)


def _annotate(annotator: Any, config: Any, quantizer: Any, example: Example) -> tuple[GraphModule, bool]:
    """``example`` exported and annotated by ``annotator`` after its context, and whether
    the annotator wrote anything."""
    model, inputs = example
    gm = torch.export.export(model, inputs).module()
    annotated: GraphModule = quantizer.transform_for_annotation(gm)
    for a in _context(annotator, config, quantizer):
        a.fn(annotated, config, None)
    claimed_before = _annotated_nodes(annotated)
    annotator.fn(annotated, config, None)
    return annotated, _annotated_nodes(annotated) != claimed_before


def _declined(annotator: Any, config: Any, graph: GraphModule) -> str:
    """The reason ``annotator`` gives (its ``why_not``) for leaving its ops on ``graph``
    alone, or '' when it gives none for one of them."""
    if annotator.why_not is None:
        return ""
    reasons = [annotator.why_not(n, config) or "" for n in graph.graph.nodes if is_op(n, annotator.ops)]
    return "; ".join(sorted(set(reasons))) if all(reasons) else ""


def _annotation_check(
    plugin: str, annotator: Any, quantizer: Any
) -> tuple[CheckResult, Example | None, Any, str | None]:
    """Run ``annotator`` (after its context) on its example; validate what it wrote.

    An annotator may decline its pattern on the int8 target this process builds for,
    giving its reason (``why_not``): an int8 matmul that saturates on a CPU without VNNI.
    Its annotation is then checked for the first other known target it annotates on, so the
    verdict is the same on every host; the last value is that target (None: this one's).
    """

    def result(ok: bool, detail: str = "") -> CheckResult:
        return CheckResult(plugin, "annotator", annotator.name, ok, detail)

    with torch.random.fork_rng(devices=[]):  # seeded, and the caller's generator left alone
        torch.manual_seed(0)
        example = _example(annotator)
    if example is None:
        ops = sorted(map(str, annotator.ops))
        return result(False, f"no example model for ops {ops}"), None, None, None
    model, _ = example
    qat = annotator.training_pattern and not annotator.static
    model.train(qat)
    # a quantizer whose configs depend on the model (a backend's mapping) builds its own
    base = getattr(quantizer, "config_for_example", None)
    config = _config_for(annotator, base(model, qat) if base else quantizer.global_config)
    if qat:
        config = replace(config, is_qat=True)
    target, declined = None, ""
    try:
        annotated, wrote = _annotate(annotator, config, quantizer, example)
        if not wrote:
            declined = _declined(annotator, config, annotated)
            if not declined:
                raise AssertionError("the annotator annotated nothing on its example model")
            annotated, target = _on_another_target(annotator, config, quantizer, example, declined)
        problems = validate_annotations(annotated, annotator.ops)
    except Exception as exc:  # noqa: BLE001 - reported as a failed check, naming the error
        return result(False, f"{type(exc).__name__}: {exc}"), None, None, None
    detail = "; ".join(problems)
    if target is not None:
        here = cpu_profile.target().isa
        detail = f"declines on target {here} ({declined}); checked for target {target}" + (
            f": {detail}" if detail else ""
        )
    return result(not problems, detail), example, config, target


def _on_another_target(
    annotator: Any, config: Any, quantizer: Any, example: Example, declined: str
) -> tuple[GraphModule, str]:
    for name in cpu_profile.KNOWN_TARGETS:  # (this target's attempt declines again)
        with cpu_profile.targeting(name):
            annotated, wrote = _annotate(annotator, config, quantizer, example)
        if wrote:
            return annotated, name
    raise AssertionError(
        f"the annotator annotated nothing on its example model for any int8 target ({declined})"
    )


def _prepare_convert(annotators: list[Any], example: Example, config: Any, owner: Any) -> str:
    """Run the PT2E flow with a quantizer of ``annotators``; return a problem or ''."""
    from torchao.quantization.pt2e import move_exported_model_to_eval
    from torchao.quantization.pt2e.quantize_pt2e import (
        convert_pt2e,
        prepare_pt2e,
        prepare_qat_pt2e,
    )

    model, inputs = example
    try:
        gm = torch.export.export(model, inputs).module()
        quantizer = _quantizer_of(annotators, config, owner)
        prepared = (prepare_qat_pt2e if config.is_qat else prepare_pt2e)(gm, quantizer)
        prepared(*inputs)
        if config.is_qat:
            move_exported_model_to_eval(prepared)
        converted = convert_pt2e(prepared)
        outs, again = (_tensors(converted(*inputs)) for _ in range(2))
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {exc}"
    quant_ops = [n for n in converted.graph.nodes if "quantize_per" in str(n.target)]
    if not quant_ops:
        return "the converted graph holds no quantize op"
    if not all(torch.isfinite(o).all() for o in outs):
        return "the converted model computes non-finite values"
    # a QAT model converted without moving it to eval keeps its dropout (and batch norms)
    # training; a post-training example is as its author wrote it (F.dropout drops at random)
    if config.is_qat and not all(torch.equal(a, b) for a, b in zip(outs, again, strict=True)):
        return "the converted model gives other outputs on the same inputs (left in training mode?)"
    return ""


def _tensors(out: Any) -> list[torch.Tensor]:
    return [o for o in (out if isinstance(out, tuple) else (out,)) if isinstance(o, torch.Tensor)]


def check_quantizer(name: str, progress: Progress = no_progress) -> list[CheckResult]:
    """Every conformance check for PT2E quantizer ``name``, loaded through qcore."""
    # the QAT checks prepare and convert models with batch norms, where torchao re-exports
    # its conv-bn patterns on every call: once per run is enough
    with reused_pattern_graphs():
        return _check_quantizer(name, progress)


def _check_quantizer(name: str, progress: Progress) -> list[CheckResult]:
    from qcore.pt2e.annotation.registry_quantizer import RegistryQuantizer

    plugin = f"quantizer:{name}"
    try:
        quantizer = get_quantizer(name)
    except Exception as exc:  # noqa: BLE001
        return [CheckResult(plugin, "load", name, False, f"{type(exc).__name__}: {exc}")]
    if not isinstance(quantizer, RegistryQuantizer):
        kind = type(quantizer).__name__
        detail = f"{kind} is not built on qcore's annotator registry"
        return [CheckResult(plugin, "load", name, False, detail)]
    if quantizer.global_config is None:
        return [CheckResult(plugin, "load", name, False, "default quantizer has no global config")]
    results = [CheckResult(plugin, "load", name, True)]
    annotators = ANNOTATORS.annotators(quantizer.namespace)
    if not annotators:
        detail = "namespace is empty"
        results.append(CheckResult(plugin, "annotator", quantizer.namespace, False, detail))
    qat_group: list[tuple[Any, Example]] = []
    qat_config = None
    for done, annotator in enumerate(annotators):
        progress(done, len(annotators), "annotators")
        check, example, config, target = _annotation_check(plugin, annotator, quantizer)
        results.append(check)
        if example is None:
            continue
        if config.is_qat and target is None:
            qat_group.append((annotator, example))
            qat_config = config
            continue
        with cpu_profile.targeting(target) if target else nullcontext():
            problem = _prepare_convert([annotator], example, config, quantizer)
        results.append(CheckResult(plugin, "prepare-convert", annotator.name, not problem, problem))
    if qat_group:
        together = _Together([e for _, e in qat_group]).train()
        inputs = tuple(t for _, e in qat_group for t in e[1])
        problem = _prepare_convert(
            [a for a, _ in qat_group], (together, inputs), qat_config, quantizer
        )
        results += [
            CheckResult(plugin, "prepare-convert", a.name, not problem, problem)
            for a, _ in qat_group
        ]
    return results
