"""Converting for ExecuTorch, and evaluating the result on a host without being misled.

ExecuTorch consumes the *reference* representation (``convert_to_reference_fx``): float
ops between explicit quantize/dequantize pairs. Evaluated on a host, that representation
computes what the device will, and :func:`convert` produces it by default.

The trap: ``convert_fx`` instead lowers to torch's host quantized kernels, and under the
``qnnpack`` quantized engine torch 2.13 clamps quantized *channels-last* tensors wrongly
(``hardtanh``, ``relu6`` and ``clamp``; quantized convs produce channels-last outputs).
A ``Conv2d -> ReLU6`` model then scores about -1 dB SQNR against float, while its
reference representation scores about 38 dB. :func:`convert` with ``reference=False``
installs a check that raises :class:`HostEvaluationWarning` on every forward run under
that engine, naming the offending modules; :func:`check_host_evaluation` runs the same
check on any converted model, e.g. one made by calling ``convert_fx`` directly.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.ao.quantization.backend_config import BackendConfig
from torch.fx import GraphModule, Node

__all__ = [
    "HostEvaluationWarning",
    "check_host_evaluation",
    "convert",
    "host_hazards",
    "install_host_evaluation_check",
]

HAZARD_ENGINE = "qnnpack"
"""The quantized engine whose clamping kernels mishandle channels-last tensors."""

_CLAMPING_MODULES: tuple[type[nn.Module], ...] = (nn.Hardtanh,)  # nn.ReLU6 subclasses it
_CLAMPING_FUNCTIONS: frozenset[Callable[..., Any]] = frozenset(
    {F.hardtanh, F.hardtanh_, F.relu6, torch.clamp, torch.clip}
)
_CLAMPING_METHODS = frozenset({"clamp", "clamp_", "clip", "clip_", "hardtanh", "hardtanh_"})
_QUANTIZE_FUNCTIONS: frozenset[Callable[..., Any]] = frozenset(
    {torch.quantize_per_tensor, torch.quantize_per_channel}
)


class HostEvaluationWarning(UserWarning):
    """A model converted for ExecuTorch is being evaluated through a host path that
    computes some of its ops wrongly."""


def convert(
    prepared: GraphModule,
    *,
    reference: bool = True,
    backend_config: BackendConfig | None = None,
) -> GraphModule:
    """Convert a prepared (and calibrated or trained) model with this backend's config.

    ``reference=True`` (the default) gives the representation ExecuTorch consumes, which
    is also the right one to evaluate on a host. ``reference=False`` lowers to torch's host
    quantized kernels and installs :func:`install_host_evaluation_check` on the result.
    """
    from torch.ao.quantization.quantize_fx import convert_fx, convert_to_reference_fx

    if backend_config is None:
        from qcore import get_backend_config

        backend_config = get_backend_config("executorch")
    if reference:
        return convert_to_reference_fx(prepared, backend_config=backend_config)
    converted = convert_fx(prepared, backend_config=backend_config)
    install_host_evaluation_check(converted)
    return converted


def host_hazards(model: GraphModule) -> list[str]:
    """Nodes of ``model`` that clamp a quantized tensor with a host kernel.

    Modules are named by their path (``features.act``), functions and methods by their
    node name. A reference-representation model has none: its clamps see float tensors.
    """
    modules = dict(model.named_modules())
    quantized: set[Node] = set()
    hazards: list[str] = []
    for node in model.graph.nodes:
        inputs_quantized = any(arg in quantized for arg in node.all_input_nodes)
        if _produces_quantized(node, modules, inputs_quantized):
            quantized.add(node)
        first = node.args[0] if node.args else None
        if isinstance(first, Node) and first in quantized and _is_clamp(node, modules):
            hazards.append(str(node.target) if node.op == "call_module" else node.name)
    return hazards


def check_host_evaluation(model: GraphModule) -> list[str]:
    """Warn (:class:`HostEvaluationWarning`) if running ``model`` now, under the current
    quantized engine, would compute some of its clamps wrongly; return those nodes."""
    if torch.backends.quantized.engine != HAZARD_ENGINE:
        return []
    hazards = host_hazards(model)
    if hazards:
        _warn(hazards)
    return hazards


def install_host_evaluation_check(model: GraphModule) -> GraphModule:
    """Make every forward of ``model`` warn while the hazardous engine is active.

    The graph is inspected once, here; each call only compares the engine name.
    """
    hazards = host_hazards(model)
    if not hazards:
        return model

    def check(module: nn.Module, args: Any) -> None:
        if torch.backends.quantized.engine == HAZARD_ENGINE:
            _warn(hazards)

    model.register_forward_pre_hook(check)
    return model


def _warn(hazards: list[str]) -> None:
    warnings.warn(
        f"this model was converted for ExecuTorch with convert_fx and is running under the "
        f"'{HAZARD_ENGINE}' quantized engine, whose clamping kernels (hardtanh/relu6/clamp) "
        f"give wrong results on channels-last quantized tensors in torch "
        f"{torch.__version__}; affected: {', '.join(hazards)}. Evaluate the reference "
        "representation instead (qbackend_executorch.convert(prepared), i.e. "
        "convert_to_reference_fx), which is also what ExecuTorch consumes.",
        HostEvaluationWarning,
        stacklevel=3,
    )


def _produces_quantized(node: Node, modules: dict[str, nn.Module], inputs_quantized: bool) -> bool:
    if node.op == "call_method":
        return node.target != "dequantize" and inputs_quantized
    if node.op == "call_function":
        if node.target in _QUANTIZE_FUNCTIONS:
            return True
        namespace = getattr(node.target, "__module__", "") or ""
        return namespace.startswith("torch._ops.quantized") or inputs_quantized
    if node.op == "call_module":
        owner = type(modules[str(node.target)]).__module__
        is_host_kernel = owner.startswith("torch.ao.nn.quantized") and not owner.startswith(
            ("torch.ao.nn.quantized.reference", "torch.ao.nn.quantized.dynamic")
        )
        return is_host_kernel or inputs_quantized
    return False


def _is_clamp(node: Node, modules: dict[str, nn.Module]) -> bool:
    if node.op == "call_module":
        return isinstance(modules[str(node.target)], _CLAMPING_MODULES)
    if node.op == "call_function":
        return node.target in _CLAMPING_FUNCTIONS
    return node.op == "call_method" and node.target in _CLAMPING_METHODS
