"""Per-layer weight ranges for an FX-prepared model: record inputs, then choose.

Only layers whose weight observer is a :class:`qcore.int8.weight_ranges.TargetWeightObserver`
take part: the mapping put one there because the target CPU saturates. For each, the
float input the layer saw during calibration is sampled (a capped copy, taken by a hook
on the layer's input observer), and at convert time
:func:`qcore.int8.saturation.choose_weight_ranges` picks each channel's weight range.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.ao.quantization.observer import ObserverBase
from torch.fx import GraphModule, Node
from torch.utils.hooks import RemovableHandle

from qcore import _torch_private as private
from qcore.int8.calibration import InputRecorder
from qcore.int8.saturation import Geometry, RangeChoice, choose_weight_ranges
from qcore.int8.weight_ranges import TargetWeightObserver

__all__ = ["WeightedLayer", "choose_ranges", "record_inputs", "weighted_layers"]

_CONVS = (nn.Conv1d, nn.Conv2d, nn.Conv3d)


@dataclass(frozen=True)
class WeightedLayer:
    """A conv or linear of the prepared graph with a target-aware weight observer."""

    node: Node
    weight: Tensor
    geometry: Geometry
    input_observer: str


def _conv_geometry(conv: nn.modules.conv._ConvNd) -> Geometry | None:
    if conv.padding_mode != "zeros":
        return None  # the padding is a separate op there; keep such layers safe
    padding = conv.padding if isinstance(conv.padding, str) else tuple(conv.padding)
    return Geometry.conv(tuple(conv.stride), padding, tuple(conv.dilation), conv.groups)


def _root_module(module: nn.Module) -> nn.Module:
    """The conv/linear inside a fused module (``ConvReLU2d`` -> its ``Conv2d``); any other
    module as it is: a container called whole (a non-traceable ``nn.Sequential``) is one
    FX quantizes nothing inside, so no weighted layer, whatever it holds."""
    while private.is_fused_module(module):
        module = module[0]
    return module


def _uses_target_observer(qconfig: Any) -> bool:
    return qconfig is not None and isinstance(qconfig.weight(), TargetWeightObserver)


#: Ops that torch lowers to kernels deriving their output qparams from their input
#: (``quantized::add_scalar`` / ``mul_scalar``), ignoring the observer after them.
_DERIVED_QPARAMS_OPS = {operator.add, operator.iadd, operator.mul, operator.imul,
                        operator.sub, operator.isub, torch.add, torch.mul, torch.sub,
                        "add", "add_", "mul", "mul_", "sub", "sub_"}


def _has_scalar_operand(node: Node) -> bool:
    return node.target in _DERIVED_QPARAMS_OPS and any(
        isinstance(a, int | float) for a in node.args
    )


def _input_observer(gm: GraphModule, node: Node) -> str | None:
    """The observer whose qparams the layer's int8 input really has, if there is one."""
    source = node.args[0] if node.args else None
    if not (isinstance(source, Node) and source.op == "call_module"):
        return None
    module = gm.get_submodule(str(source.target))
    if not (isinstance(module, ObserverBase) and module.dtype == torch.quint8):
        return None
    producer = source.args[0] if source.args else None
    while isinstance(producer, Node) and _is_relu(gm, producer):
        producer = producer.args[0] if producer.args else None  # fused into the op before
    if isinstance(producer, Node) and _has_scalar_operand(producer):
        return None  # torch derives these qparams: unknown here, so the layer stays safe
    return str(source.target)


def _is_relu(gm: GraphModule, node: Node) -> bool:
    if node.op == "call_module":
        return isinstance(gm.get_submodule(str(node.target)), nn.ReLU)
    return node.target in {torch.relu, torch.nn.functional.relu, "relu", "relu_"}


def _module_layer(gm: GraphModule, node: Node) -> tuple[Tensor, Geometry] | None:
    module = gm.get_submodule(str(node.target))
    if not _uses_target_observer(getattr(module, "qconfig", None)):
        return None
    root = _root_module(module)
    if isinstance(root, nn.Linear):
        return root.weight, Geometry.linear()
    if isinstance(root, _CONVS):
        geometry = _conv_geometry(root)
        return (root.weight, geometry) if geometry is not None else None
    return None


_FUNCTIONAL_CONVS = frozenset(
    {torch.nn.functional.conv1d, torch.nn.functional.conv2d, torch.nn.functional.conv3d}
)


#: A functional conv's parameters, in order, and the defaults of those a call may omit:
#: torch's ``prepare_fx`` records a call as written, keywords included.
_CONV_PARAMETERS = ("input", "weight", "bias", "stride", "padding", "dilation", "groups")
_CONV_DEFAULTS: dict[str, object] = {"bias": None, "stride": 1, "padding": 0, "dilation": 1, "groups": 1}


def _argument(node: Node, name: str) -> object:
    index = _CONV_PARAMETERS.index(name)
    if index < len(node.args):
        return node.args[index]
    return node.kwargs.get(name, _CONV_DEFAULTS.get(name))


def _functional_layer(gm: GraphModule, node: Node) -> tuple[Tensor, Geometry] | None:
    if node.target is not torch.nn.functional.linear and node.target not in _FUNCTIONAL_CONVS:
        return None
    observer_node = _argument(node, "weight")
    if not (isinstance(observer_node, Node) and observer_node.op == "call_module"):
        return None
    if not isinstance(gm.get_submodule(str(observer_node.target)), TargetWeightObserver):
        return None
    attr = observer_node.args[0]
    if not (isinstance(attr, Node) and attr.op == "get_attr"):
        return None
    try:
        weight = gm.get_parameter(str(attr.target))
    except AttributeError:
        return None  # a buffer or a constant: no trained weight whose range is decided here
    if node.target is torch.nn.functional.linear:
        return weight, Geometry.linear()
    spatial = weight.dim() - 2
    stride, dilation = (_per_dim(_argument(node, n), spatial) for n in ("stride", "dilation"))
    written, groups = _argument(node, "padding"), _argument(node, "groups")
    padding = written if written in ("same", "valid") else _per_dim(written, spatial)
    if stride is None or dilation is None or padding is None or not isinstance(groups, int):
        return None
    return weight, Geometry.conv(stride, padding, dilation, groups)


def _per_dim(value: object, dims: int) -> tuple[int, ...] | None:
    """A conv argument as one int per spatial dim (torch repeats a single int), or None
    when it is not made of ints (a value traced from the input)."""
    if isinstance(value, int):
        return (value,) * dims
    if isinstance(value, tuple | list) and all(isinstance(v, int) for v in value):
        return tuple(value)
    return None


def weighted_layers(gm: GraphModule) -> list[WeightedLayer]:
    """The layers of ``gm`` whose weight range is decided per layer."""
    found: list[WeightedLayer] = []
    for node in gm.graph.nodes:
        described: tuple[Tensor, Geometry] | None = None
        if node.op == "call_module":
            described = _module_layer(gm, node)
        elif node.op == "call_function":
            described = _functional_layer(gm, node)
        observer = _input_observer(gm, node) if described is not None else None
        if described is not None and observer is not None:
            found.append(WeightedLayer(node, described[0], described[1], observer))
    return found


def _call_sites(gm: GraphModule) -> dict[int, int]:
    """How many graph nodes call each module object (FX shares one observer among ops
    that share quantization parameters, under several names)."""
    sites: dict[int, int] = {}
    for node in gm.graph.nodes:
        if node.op == "call_module":
            key = id(gm.get_submodule(str(node.target)))
            sites[key] = sites.get(key, 0) + 1
    return sites


def record_inputs(
    gm: GraphModule, layers: list[WeightedLayer]
) -> tuple[dict[str, InputRecorder], list[RemovableHandle]]:
    """A recorder per layer node: a pre-hook on the layer's module, or for a functional
    layer a hook on its input observer when no other op calls that observer."""
    recorders: dict[str, InputRecorder] = {}
    handles: list[RemovableHandle] = []
    sites = _call_sites(gm)
    for layer in layers:
        recorder = InputRecorder()
        if layer.node.op == "call_module":
            module = gm.get_submodule(str(layer.node.target))
            if sites[id(module)] != 1:
                continue  # a reused module sees several inputs; keep it safe
            handles.append(module.register_forward_pre_hook(recorder.pre_hook))
        else:
            observer = gm.get_submodule(layer.input_observer)
            if sites[id(observer)] != 1:
                continue
            handles.append(observer.register_forward_hook(recorder.hook))
        recorders[layer.node.name] = recorder
    return recorders, handles


def choose_ranges(
    gm: GraphModule,
    layers: list[WeightedLayer],
    recorders: dict[str, InputRecorder],
) -> dict[str, tuple[Tensor, RangeChoice]]:
    """Node name -> (weight, choice) for every layer whose inputs were recorded."""
    choices: dict[str, tuple[Tensor, RangeChoice]] = {}
    for layer in layers:
        recorder = recorders.get(layer.node.name)
        inputs = recorder.inputs() if recorder is not None else None
        if inputs is None:
            continue
        observer: Any = gm.get_submodule(layer.input_observer)
        scale, zero_point = observer.calculate_qparams()
        qparams = (
            float(scale.reshape(-1)[0]),
            int(zero_point.reshape(-1)[0]),
            int(observer.quant_min),
            int(observer.quant_max),
        )
        full = _full_qrange(gm, layer)
        choice = choose_weight_ranges(layer.weight, inputs, qparams, layer.geometry, full)
        choices[layer.node.name] = (layer.weight, choice)
    return choices


def _full_qrange(gm: GraphModule, layer: WeightedLayer) -> tuple[int, int]:
    node = layer.node
    observer: Any
    if node.op == "call_module":
        observer = getattr(gm.get_submodule(str(node.target)), "qconfig").weight()  # noqa: B009
    else:
        observer = gm.get_submodule(str(node.args[1].target))  # type: ignore[union-attr]
    return int(observer.quant_min), int(observer.quant_max)
