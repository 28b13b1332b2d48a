"""The two ways a model is quantized, as the tuner needs them: prepare with some ops left
in float, say which nodes were quantized, convert to the reference form or to the model a
user deploys. A flow is named the way users name it; nothing here knows a backend.

* an FX backend (``"onednn"``, ``"executorch"``, a third party's): ``qcore.fx.prepare``
  with a ``QConfigMapping``; an op is left in float by a ``None`` entry for its module
  name, or for its position among the calls of its function in its module;
* a PT2E quantizer (``"xnnpack"``, ``"x86"``, ``"pt2e:onednn"`` for the one derived from
  a backend, or a ``Quantizer`` object): export, ``prepare_pt2e``; an op is left in float
  by ``set_module_name(path, None)`` when it is the only op of its module, else by a
  filter function that skips its nodes (every quantizer on qcore's annotator registry
  has both).
"""

from __future__ import annotations

import copy
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch import nn
from torch.fx import GraphModule, Node

from qcore._torch_private import Q_ANNOTATION_KEY
from qcore.tuning.switches import QuantizedOp, Roles

if TYPE_CHECKING:
    from torch.ao.quantization import QConfigMapping
    from torchao.quantization.pt2e.quantizer import Quantizer

__all__ = ["Flow", "FxFlow", "Pt2eFlow", "as_tuple", "calibrate", "resolve_flow"]

_INTEGER_DTYPES = frozenset({
    torch.quint8, torch.qint8, torch.uint8, torch.int8, torch.int16, torch.uint16,
    torch.qint32, torch.int32, torch.quint4x2,
})  # fmt: skip


def as_tuple(batch: Any) -> tuple[Any, ...]:
    return batch if isinstance(batch, tuple) else (batch,)


def calibrate(prepared: nn.Module, batches: Iterable[Any]) -> int:
    """Run every batch through ``prepared``; returns how many ran."""
    count = 0
    with torch.no_grad():
        for batch in batches:
            prepared(*as_tuple(batch))
            count += 1
    if not count:
        raise ValueError("calibration gave no batch")
    return count


class Flow(Protocol):
    """What the tuner asks of a flow (see the module docstring)."""

    label: str

    def configuration(self, model: nn.Module, floating: Sequence[QuantizedOp]) -> Any: ...

    def prepare(
        self, model: nn.Module, example_inputs: tuple[Any, ...], config: Any
    ) -> GraphModule: ...

    def roles(self, prepared: GraphModule) -> Roles: ...

    def reference(self, prepared: GraphModule) -> GraphModule: ...

    def convert(self, prepared: GraphModule) -> GraphModule: ...


def _leaf_scopes(ops: Sequence[QuantizedOp], floating: Sequence[QuantizedOp]) -> set[str]:
    """Module paths whose ops are all in ``floating`` and hold no other op below them."""
    left = {op.name for op in floating}
    scopes: set[str] = set()
    for op in floating:
        path = op.module_path
        if not path:
            continue
        inside = [o for o in ops if o.module_path == path or o.module_path.startswith(path + ".")]
        if all(o.name in left for o in inside):
            scopes.add(path)
    return scopes


class SkipNodes:
    """A PT2E filter function: accepts every node but those named (the ops left in
    float), and only what the quantizer's own filter accepted."""

    def __init__(self, names: Iterable[str], then: Callable[[Node], bool] | None) -> None:
        self.names = frozenset(names)
        self.then = then

    def __call__(self, node: Node) -> bool:
        return node.name not in self.names and (self.then is None or self.then(node))

    def __repr__(self) -> str:
        return f"SkipNodes({sorted(self.names)})"


class Pt2eFlow:
    """Export, ``prepare_pt2e`` with the quantizer ``make()`` builds, ``convert_pt2e``."""

    def __init__(self, label: str, make: Callable[[], Quantizer]) -> None:
        self.label = label
        self.make = make
        self.ops: Sequence[QuantizedOp] = ()

    def configuration(self, model: nn.Module, floating: Sequence[QuantizedOp]) -> Quantizer:
        """The quantizer with ``floating`` left in float, through its scoping API."""
        from qcore.pt2e.annotation.registry_quantizer import RegistryQuantizer

        quantizer = self.make()
        if not floating:
            return quantizer
        if not isinstance(quantizer, RegistryQuantizer):
            raise TypeError(
                f"qcore.tune: quantizer {self.label} ({type(quantizer).__qualname__}) is not "
                "built on qcore's annotator registry (qcore.pt2e.annotation.RegistryQuantizer), so "
                "it has no scoping to leave an op in float"
            )
        scopes = _leaf_scopes(self.ops, floating)
        for path in sorted(scopes):
            quantizer.set_module_name(path, None)
        names = [m for op in floating if op.module_path not in scopes for m in op.members]
        if names:
            quantizer.set_filter_function(SkipNodes(names, quantizer.filter_fn))
        return quantizer

    def prepare(
        self, model: nn.Module, example_inputs: tuple[Any, ...], config: Any
    ) -> GraphModule:
        from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

        from qcore.pt2e.export import export

        prepared: GraphModule = prepare_pt2e(export(model, example_inputs), config)
        return prepared

    def roles(self, prepared: GraphModule) -> Roles:
        roles = Roles()
        for node in prepared.graph.nodes:
            annotation = node.meta.get(Q_ANNOTATION_KEY)
            if node.op != "call_function" or annotation is None:
                continue
            if annotation.output_qspec is not None:
                roles.output_quantized.add(node.name)
            if annotation.input_qspec_map or annotation.output_qspec is not None:
                roles.quantizing.add(node.name)
                stack = list(node.meta.get("nn_module_stack", {}).values())
                path = str(stack[-1][0]) if stack else ""
                kind = str(getattr(node.target, "__name__", node.target)).split(".")[0]
                roles.places[node.name] = (path, kind, (node.name,), "")
        return roles

    def reference(self, prepared: GraphModule) -> GraphModule:
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e

        converted: GraphModule = convert_pt2e(copy.deepcopy(prepared), fold_quantize=False)
        return converted

    def convert(self, prepared: GraphModule) -> GraphModule:
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e

        converted: GraphModule = convert_pt2e(prepared)
        return converted


def _quantizing(constructor: Any) -> bool:
    """Whether an FX observer constructor makes an integer observer (not a float
    placeholder)."""
    if constructor is None:
        return False
    try:
        dtype = getattr(constructor(), "dtype", None)
    except (TypeError, ValueError):  # one that needs arguments is no integer observer
        return False
    return dtype in _INTEGER_DTYPES


class FxFlow:
    """``qcore.fx.prepare`` with a ``QConfigMapping``, ``qcore.fx.convert``."""

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.label = backend

    def configuration(self, model: nn.Module, floating: Sequence[QuantizedOp]) -> QConfigMapping:
        """The backend's mapping with ``None`` for each op left in float."""
        from qcore.plugins.api import get_qconfig_mapping

        mapping = get_qconfig_mapping(self.backend, model=model)
        for op in floating:
            for address in op.address or ():
                if address[0] == "module":
                    mapping.set_module_name(address[1], None)
                else:
                    _, path, function, index = address
                    mapping.set_module_name_object_type_order(path, function, index, None)
        return mapping

    def prepare(
        self, model: nn.Module, example_inputs: tuple[Any, ...], config: Any
    ) -> GraphModule:
        from qcore.fx.flow import prepare

        return prepare(model, self.backend, example_inputs, mapping=config)

    def roles(self, prepared: GraphModule) -> Roles:
        from qcore._torch_private import fx_node_scopes

        scopes = fx_node_scopes(prepared)
        modules = dict(prepared.named_modules())
        order: dict[tuple[str, Any], int] = defaultdict(int)
        roles = Roles()
        for node in prepared.graph.nodes:
            if node.op not in ("call_function", "call_method", "call_module"):
                continue
            if node.op == "call_module" and "activation_post_process" in str(node.target):
                continue
            path = scopes.get(node.name, ("", None))[0]
            place: tuple[str, str, Any, str]
            if node.op == "call_module":
                place = (str(node.target), type(modules[node.target]).__name__,
                         (("module", str(node.target)),), "")  # fmt: skip
            elif node.op == "call_function":
                index = order[(path, node.target)]
                order[(path, node.target)] += 1
                kind = getattr(node.target, "__name__", str(node.target))
                place = (path, kind, (("function", path, node.target, index),), "")
            else:
                place = (path, str(node.target), None,
                         "a QConfigMapping cannot address one method call")  # fmt: skip
            info = node.meta.get("target_dtype_info") or {}
            if _quantizing(info.get("output_act_obs_or_fq_ctr")):
                roles.output_quantized.add(node.name)
            if any(_quantizing(info.get(k)) for k in
                   ("input_act_obs_or_fq_ctr", "weight_obs_or_fq_ctr", "output_act_obs_or_fq_ctr")):  # fmt: skip
                roles.quantizing.add(node.name)
                roles.places[node.name] = place
        return roles

    def reference(self, prepared: GraphModule) -> GraphModule:
        from torch.ao.quantization.quantize_fx import convert_to_reference_fx

        from qcore.fx.normalize import normalize_functional_calls
        from qcore.plugins.api import get_backend_config

        model = copy.deepcopy(prepared)
        normalize_functional_calls(model)
        converted: GraphModule = convert_to_reference_fx(
            model, backend_config=get_backend_config(self.backend)
        )
        return converted

    def convert(self, prepared: GraphModule) -> GraphModule:
        from qcore.fx.flow import convert

        return convert(prepared)


def resolve_flow(flow: str | Quantizer, quantizer_options: dict[str, Any]) -> Flow:
    """The flow ``flow`` names: an FX backend by its name (``fx:NAME`` to insist), a PT2E
    quantizer by its name (``pt2e:NAME`` for one derived from a backend), or a quantizer."""
    from qcore.plugins.api import get_quantizer
    from qcore.plugins.discovery import REGISTRY

    if not isinstance(flow, str):
        quantizer = flow
        return Pt2eFlow(type(quantizer).__qualname__, lambda: copy.deepcopy(quantizer))
    kind, _, name = flow.rpartition(":")
    if kind not in ("", "fx", "pt2e"):
        raise ValueError(f"flow {flow!r}: the prefix is fx: or pt2e:, not {kind}:")
    is_backend = name in REGISTRY.names("backend")
    if kind == "fx" or (not kind and is_backend):
        if quantizer_options:
            raise TypeError(
                f"flow {flow!r} is the FX backend {name}, which takes no quantizer options "
                f"(got {sorted(quantizer_options)}); use pt2e:{name} for its PT2E quantizer"
            )
        from qcore.plugins.api import get_backend_config

        get_backend_config(name)  # an unknown or broken backend says so now
        return FxFlow(name)
    options = dict(quantizer_options)
    get_quantizer(name, **options)  # an unknown name or a bad option says so now
    return Pt2eFlow(name, lambda: get_quantizer(name, **options))
