"""What a converted FX model left in float, and why, for the backend kit's verdicts.

A pattern with weights is quantized when each of its weighted modules and calls is: the
module became a quantized (or reference quantized) module, the call reads a dequantized
weight. A quantize op next to a float ``nn.Linear`` proves nothing: FX leaves a module in
float, between a quantize and a dequantize of its neighbours, when the mapping's qconfig
does not fit any of the pattern's dtype configs. :func:`contradiction` then names which
field of the pattern's dtype configs refuses the qconfig, so the report blames the
backend's declaration, not the mapping, when the declaration is at fault.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch.nn.functional as F
from torch import nn
from torch.ao.quantization import QConfigMapping
from torch.ao.quantization.backend_config import BackendPatternConfig, DTypeConfig
from torch.fx import GraphModule, Node

from qcore.fx.patterns.text import op_name

#: Float module classes whose weights a quantized pattern quantizes (subclasses included:
#: torch's reference quantized modules subclass them, and are told apart by their module).
WEIGHTED_MODULES: tuple[type[nn.Module], ...] = (
    nn.Linear,
    nn.Conv1d,
    nn.Conv2d,
    nn.Conv3d,
    nn.ConvTranspose1d,
    nn.ConvTranspose2d,
    nn.ConvTranspose3d,
    nn.Embedding,
    nn.EmbeddingBag,
    nn.RNNBase,
    nn.RNNCellBase,
)
#: Functional ops whose second argument is a weight.
WEIGHTED_CALLS = frozenset(
    {
        F.linear,
        F.conv1d,
        F.conv2d,
        F.conv3d,
        F.conv_transpose1d,
        F.conv_transpose2d,
        F.conv_transpose3d,
    }
)
_QUANTIZED_PACKAGE = "torch.ao.nn.quantized"


def float_weighted(converted: nn.Module) -> list[str]:
    """Each weighted module or call of ``converted`` that computes with a float weight."""
    found = [
        f"{type(module).__name__} '{path}'"
        for path, module in converted.named_modules()
        if isinstance(module, WEIGHTED_MODULES)
        and not type(module).__module__.startswith(_QUANTIZED_PACKAGE)
    ]
    graph = converted.graph if isinstance(converted, GraphModule) else None
    for node in graph.nodes if graph is not None else ():
        if node.op == "call_function" and node.target in WEIGHTED_CALLS:
            weight = node.args[1] if len(node.args) > 1 else node.kwargs.get("weight")
            if not _dequantized(weight):
                found.append(f"{node.target.__name__} call '{node.name}'")
    return found


def _dequantized(value: Any) -> bool:
    if not isinstance(value, Node):
        return False
    return value.target == "dequantize" or "dequantize" in str(value.target)


def contradiction(
    pattern_config: BackendPatternConfig, ops: Iterable[Any], mapping: QConfigMapping
) -> str | None:
    """Why the mapping's qconfig for the pattern's weighted op fits none of the pattern's
    dtype configs, naming the field; None when one fits, when the mapping gives the op no
    qconfig, or when no op is weighted."""
    for op in ops:
        if not _weighted(op):
            continue
        qconfig = mapping.object_type_qconfigs.get(op, mapping.global_qconfig)
        if qconfig is None:  # the mapping's own choice: nothing in the pattern refuses
            continue
        got = _observed(qconfig)
        reasons = [_refusal(config, got) for config in pattern_config.dtype_configs]
        if all(reasons):
            return (
                f"the pattern's dtype configs refuse the mapping's qconfig for {_name(op)}: "
                + "; ".join(dict.fromkeys(r for r in reasons if r))
            )
    return None


def unmapped(ops: Iterable[Any], mapping: QConfigMapping) -> list[str]:
    """The pattern's ops the mapping gives no qconfig: the mapping's own choice of float."""
    return [
        _name(op)
        for op in ops
        if mapping.object_type_qconfigs.get(op, mapping.global_qconfig) is None
    ]


def _weighted(op: Any) -> bool:
    return (isinstance(op, type) and issubclass(op, WEIGHTED_MODULES)) or op in WEIGHTED_CALLS


def _name(op: Any) -> str:
    return f"nn.{op.__name__}" if isinstance(op, type) else op_name(op)


def _observed(qconfig: Any) -> dict[str, Any]:
    """The dtypes a qconfig's observers produce."""
    act, weight = qconfig.activation(), qconfig.weight()
    return {
        "input": act.dtype,
        "output": act.dtype,
        "weight": weight.dtype,
        "dynamic": bool(getattr(act, "is_dynamic", False)),
    }


def _refusal(config: DTypeConfig, got: dict[str, Any]) -> str | None:
    """The first field of ``config`` that refuses what the qconfig observes, or None."""
    if bool(config.is_dynamic) != got["dynamic"]:
        return (
            f"is_dynamic={bool(config.is_dynamic)} in the dtype config, "
            f"{got['dynamic']} from the qconfig"
        )
    wanted = {"input": config.input_dtype, "weight": config.weight_dtype}
    if not got["dynamic"]:
        wanted["output"] = config.output_dtype
    for field, dtype in wanted.items():
        if dtype is not None and dtype != got[field]:
            return f"{field}_dtype {dtype} in the dtype config, {got[field]} from the qconfig"
    return None


__all__ = ["WEIGHTED_CALLS", "WEIGHTED_MODULES", "contradiction", "float_weighted", "unmapped"]
