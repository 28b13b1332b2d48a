"""The annotator of one derived pattern: find its matches, check the config against the
pattern's dtype configs, write the specs ``prepare_fx`` would insert as observers.

The pattern's root (its first executed op) gets input specs on its activation inputs and
a weight spec; extra inputs (``MatchAllNode`` arguments, e.g. the other side of a
conv-add) get input specs where the pattern consumes them; the output of the pattern's
last op gets its own spec, its input's (shared), or none, by observation type. A config
the pattern's dtype configs do not accept leaves the match in float, as in FX.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.ao.quantization import QConfigMapping
from torch.ao.quantization.backend_config import ObservationType
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e.quantizer import (
    QuantizationConfig,
    QuantizationSpec,
    SharedQuantizationSpec,
)

from qcore._torch_private import Q_ANNOTATION_KEY
from qcore.pt2e.annotation.claims import is_annotated, mark_annotated, passes, set_annotation
from qcore.pt2e.annotation.common_annotators import weight_spec_for_transpose
from qcore.pt2e.annotation.observable import non_quantizable_reason
from qcore.pt2e.annotation.ops import CONV, CONV_TRANSPOSE, LINEAR
from qcore.pt2e.derived.matching import Match, index, match_at, top_signatures
from qcore.pt2e.derived.patterns import DerivedPattern
from qcore.pt2e.derived.scoping import qconfig_for
from qcore.pt2e.derived.specs import NotDerivable, ReuseInputSpec, config_of, mismatch

_WEIGHTED_OPS = CONV | CONV_TRANSPOSE | LINEAR
#: ``meta`` key of an input spec that takes the producer's observer when the producer's
#: output is quantized to the same dtype (``prepare_fx`` reuses it instead of observing
#: again); :func:`share_reused_inputs` resolves it once every pattern is annotated.
REUSE_KEY = "qcore_derived_reusable_inputs"
#: ``meta`` key of a multi-input share-observer op's inputs, shared by
#: :func:`share_reused_inputs` once every pattern is annotated.
GROUP_KEY = "qcore_derived_shared_inputs"


@dataclass(frozen=True)
class MappingConfig(QuantizationConfig):  # type: ignore[misc]  # torchao is untyped
    """A config that stands for a whole ``QConfigMapping``: each match takes the qconfig
    ``prepare_fx`` would give its root call. Its own specs are the global qconfig's."""

    mapping: QConfigMapping | None = field(default=None, compare=False, hash=False)


def _config(config: QuantizationConfig, match: Match) -> QuantizationConfig | None:
    if not isinstance(config, MappingConfig) or config.mapping is None:
        return config
    root = match.root
    qconfig = qconfig_for(config.mapping, root, match.element_of(root))
    if qconfig is None:
        return None
    try:
        return config_of(qconfig, bool(config.is_qat))
    except NotDerivable:
        return None


def decline_reason(pattern: DerivedPattern, config: QuantizationConfig, match: Match) -> str | None:
    """Why this match stays in float under ``config`` (None: it is quantized)."""
    resolved = _config(config, match)
    if resolved is None:
        return "its qconfig is None or has no PT2E spec"
    why = mismatch(resolved, pattern.dtype_configs, _has_weight(pattern, match.root))
    if why:
        return f"the backend's dtype configs reject the config: {why}"
    owner = match.top.output.graph.owning_module
    for node in _activations(match.root)[0]:
        reason = non_quantizable_reason(node, owner) if owner is not None else None
        if reason:
            return reason
    return None


def _has_weight(pattern: DerivedPattern, root: Any) -> bool:
    """``prepare_fx`` checks the weight dtype where the op has a weight: a module's, or a
    functional call's weight argument when one is passed."""
    if not pattern.weighted:
        return False
    if root.is_module or _activations(root)[1] is not None:
        return True
    index = pattern.weight_index
    args = root.output.args
    return index is not None and len(args) > index and isinstance(args[index], Node)


def _activations(root: Any) -> tuple[list[Node], Node | None]:
    """The root call's activation inputs and its weighted aten node (if any)."""
    weighted = next((n for n in root.nodes if n.target in _WEIGHTED_OPS), None)
    if weighted is not None:
        act = weighted.args[0]
        return ([act] if isinstance(act, Node) else []), weighted
    return list(root.inputs), None


def _tensor_args(node: Node) -> int:
    """How many of ``node``'s positional arguments are tensors, as ``prepare_fx`` counts
    them for ``num_tensor_args_to_observation_type``: a size or other symbolic scalar is
    not one."""
    scalars = (int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)
    return sum(
        1 for a in node.args if isinstance(a, Node) and not isinstance(a.meta.get("val"), scalars)
    )


def _observation(pattern: DerivedPattern, root: Node, reference: bool) -> ObservationType:
    """How the match's output is observed. ``prepare_fx`` takes the observation from the
    config's table by the root call's tensor-argument count where it has one: ``x * 0.5``
    shares its input's observer. Under the reference representation (``reference``) those
    qparams are what the device computes with; a native convert swaps ``add``/``mul`` with
    a scalar for quantized kernels that derive their output qparams from the input's
    (the scale times the scalar; a zero point shifted by it) and ignore the observer,
    which an observer of the output's own range stands for better than the shared one,
    widened to cover input and output alike."""
    if not reference:
        return pattern.observation
    return pattern.observation_for(_tensor_args(root))


def _annotate(
    pattern: DerivedPattern, match: Match, config: QuantizationConfig, reference: bool
) -> None:
    root, top = match.root, match.top
    acts, weighted = _activations(root)
    act_spec = config.input_activation
    reusable: list[tuple[Node, Node]] = []
    inputs: dict[Node, dict[Node, Any]] = {}
    for a in acts:
        for consumer in root.nodes:
            if a in consumer.all_input_nodes:
                inputs.setdefault(consumer, {})[a] = act_spec
                reusable.append((a, consumer))
    for a, consumer in match.extra:
        inputs.setdefault(consumer, {})[a] = act_spec
        reusable.append((a, consumer))
    if weighted is not None and isinstance(weighted.args[1], Node):
        spec = config.weight
        if weighted.target in CONV_TRANSPOSE:
            spec = weight_spec_for_transpose(spec)
        inputs.setdefault(weighted, {})[weighted.args[1]] = spec
    observation = _observation(pattern, root.output, reference)
    output: Any = None
    dynamic = isinstance(act_spec, QuantizationSpec) and act_spec.is_dynamic
    if observation == ObservationType.OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT and not dynamic:
        output = config.output_activation
    elif observation == ObservationType.OUTPUT_SHARE_OBSERVER_WITH_INPUT and acts:
        first = next(c for c in root.nodes if acts[0] in c.all_input_nodes)
        output = SharedQuantizationSpec((acts[0], first))
        if len(acts) > 1 and len(root.nodes) == 1:
            first.meta[GROUP_KEY] = list(acts)
    if isinstance(act_spec, ReuseInputSpec) and acts:
        produced = acts[0].meta.get(Q_ANNOTATION_KEY)
        if getattr(produced, "output_qspec", None) is not None:  # else: finalize decides
            shared = SharedQuantizationSpec(acts[0])
            inputs = {n: {a: shared for a in m} for n, m in inputs.items()}
            output = shared
    for node in match.nodes():
        specs = inputs.get(node, {})
        out = output if node is top.output else None
        if specs or out is not None:
            set_annotation(node, specs, out)
    mark_annotated(match.nodes())
    for a, consumer in reusable:
        consumer.meta.setdefault(REUSE_KEY, set()).add(a)


def pattern_annotator(
    pattern: DerivedPattern, reference: bool = False
) -> Callable[..., list[list[Node]]]:
    """``fn(gm, config, filter_fn)`` for ``pattern``, as the annotator registry runs it;
    ``reference``: the backend's FX models convert to the reference representation."""
    wanted = top_signatures(pattern.tree)

    def annotate(
        gm: GraphModule, config: QuantizationConfig | None, filter_fn: Callable[[Node], bool] | None
    ) -> list[list[Node]]:
        if config is None:
            return []
        idx = index(gm)
        candidates = [c for s in wanted for c in idx.by_signature.get(s, [])]
        partitions = []
        for call in sorted(candidates, key=lambda c: -c.order):  # FX matches last node first
            match = match_at(pattern.tree, call, idx)
            if match is None or is_annotated(match.nodes()):
                continue
            if not passes(filter_fn, match.nodes()):
                continue
            if decline_reason(pattern, config, match) is not None:
                continue
            resolved = _config(config, match)
            assert resolved is not None
            _annotate(pattern, match, resolved, reference)
            partitions.append(match.nodes())
        return partitions

    return annotate


def pattern_why_not(pattern: DerivedPattern) -> Callable[[Node, QuantizationConfig], str | None]:
    """``why_not(node, config)`` for ``explain_not_quantized``: why ``pattern``, matched
    with ``node``'s call last, leaves it in float (its dtype configs, a None qconfig...)."""

    def why_not(node: Node, config: QuantizationConfig) -> str | None:
        gm = node.graph.owning_module
        if not isinstance(gm, GraphModule):
            return None
        idx = index(gm)
        call = next((c for c in idx.calls if node in c.nodes), None)
        match = match_at(pattern.tree, call, idx) if call is not None else None
        return None if match is None else decline_reason(pattern, config, match)

    return why_not


def share_reused_inputs(gm: GraphModule) -> None:
    """An input whose producer's output is quantized to the same dtype takes the
    producer's observer, as ``prepare_fx`` reuses it rather than observing again."""
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    for node in gm.graph.nodes:
        ann = node.meta.get(Q_ANNOTATION_KEY)
        for arg in node.meta.pop(REUSE_KEY, set()):
            if ann is None or arg not in ann.input_qspec_map:
                continue
            produced = arg.meta.get(Q_ANNOTATION_KEY)
            out = getattr(produced, "output_qspec", None)
            spec = ann.input_qspec_map[arg]
            if isinstance(spec, ReuseInputSpec):
                _resolve_reuse(node, arg, ann, out)
                continue
            if out is None or spec is None:
                continue
            if _dtype(out, gm) == getattr(spec, "dtype", None):
                ann.input_qspec_map[arg] = SharedQuantizationSpec(arg)
        group = node.meta.pop(GROUP_KEY, None)
        if group and ann is not None and group[0] in ann.input_qspec_map:
            _share_group(node, ann, group, order)


def _share_group(node: Node, ann: Any, group: list[Node], order: dict[Node, int]) -> None:
    """Every input of a multi-input op that shares its output's observer (``cat``) takes
    one observer, and so do the producers observed for it: FX points all those observer
    nodes at one observer (``_maybe_make_input_output_share_observers``). The anchor is
    the earliest quantized producer (torchao resolves a shared spec only towards nodes it
    has already seen); without one, the inputs share the first input's edge."""
    quantized = [
        a for a in group
        if getattr(a.meta.get(Q_ANNOTATION_KEY), "output_qspec", None) is not None
    ]  # fmt: skip
    if not quantized:
        edge = SharedQuantizationSpec((group[0], node))
        for arg in group[1:]:
            if arg is not group[0] and arg in ann.input_qspec_map:
                ann.input_qspec_map[arg] = edge
        return
    anchor = min(quantized, key=order.__getitem__)
    anchored = anchor.meta[Q_ANNOTATION_KEY]
    own = _resolved(anchored.output_qspec)
    if anchor is not group[0] and isinstance(own, QuantizationSpec):
        # FX's shared observer is the first input's; another input's producer joins it
        # without what its output shared before (a reshape's input, after a conv FX
        # leaves in float), so an anchor that is not the first input observes on its own
        anchored.output_qspec = own
    shared = SharedQuantizationSpec(anchor)
    for arg in group:
        if arg not in ann.input_qspec_map:
            continue
        ann.input_qspec_map[arg] = shared
        produced = arg.meta.get(Q_ANNOTATION_KEY)
        if (
            arg is not anchor
            and produced is not None
            # a producer sharing its own input's observer (a reshape after a conv FX
            # leaves in float) is repointed too, its input keeping that observer, as FX
            # repoints the observer node of its output only; fixed qparams stay
            and isinstance(produced.output_qspec, QuantizationSpec | SharedQuantizationSpec)
        ):
            produced.output_qspec = shared
    ann.output_qspec = shared


def _resolve_reuse(node: Node, arg: Node, ann: Any, produced: Any) -> None:
    """A reuse-input op (``ReuseInputObserver``) is quantized only after a quantized
    producer, and then shares its observer on both sides; otherwise it stays float."""
    if produced is None:
        del ann.input_qspec_map[arg]
        ann.output_qspec = None
        return
    ann.input_qspec_map[arg] = SharedQuantizationSpec(arg)
    ann.output_qspec = SharedQuantizationSpec(arg)


def _dtype(spec: Any, gm: GraphModule) -> torch.dtype | None:
    dtype = getattr(_resolved(spec), "dtype", None)
    return dtype if isinstance(dtype, torch.dtype) else None


def _resolved(spec: Any) -> Any:
    """The spec a chain of shared specs ends in (None where it ends unannotated)."""
    seen = 0
    while isinstance(spec, SharedQuantizationSpec) and seen < 64:
        edge = spec.edge_or_node
        seen += 1
        if isinstance(edge, tuple):
            producer, consumer = edge
            ann = consumer.meta.get(Q_ANNOTATION_KEY)
            spec = ann.input_qspec_map.get(producer) if ann is not None else None
        else:
            ann = edge.meta.get(Q_ANNOTATION_KEY)
            spec = ann.output_qspec if ann is not None else None
    return spec
