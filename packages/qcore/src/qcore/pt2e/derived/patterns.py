"""A ``BackendConfig``'s patterns as matchable trees, and those it cannot express.

Each pattern a user's model can contain (modules, functions, methods, and the fusion
chains and trees built from them) becomes a :class:`DerivedPattern`, in torch's reversed
nested-tuple form: ``(nn.ReLU, (nn.BatchNorm2d, nn.Conv2d))`` is relu(bn(conv(x))).
A fusion takes its dtype configs and observation type from its fused module's own
pattern, as ``prepare_fx`` sees them after ``fuse_fx``. Patterns of fused or QAT module
types (``nni.ConvReLU2d``, ``nniqat.Linear``) only exist after FX fusion or module
swapping; they are reached through the user-facing patterns and get no annotator.

What the bridge cannot express is returned as :class:`Underivable`, with the reason: a
custom module, a fuser with no aten counterpart, a root-node getter it cannot match, an
element export does not record, dtype configs PT2E has no form for.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.ao.quantization.backend_config import (
    BackendConfig,
    BackendPatternConfig,
    DTypeConfig,
    ObservationType,
)
from torch.ao.quantization.utils import MatchAllNode

from qcore.pt2e.derived.sources import OPERATOR_METHODS, qualified_name, signatures

#: Module namespaces whose types appear only after FX fusion or QAT/reference swaps.
_INTERNAL = ("torch.ao.nn.intrinsic", "torch.ao.nn.qat", "torch.ao.nn.quantized")
#: Fused module namespaces a fuser may produce and still map to aten ops one to one.
_FUSED_OK = ("torch.ao.nn.intrinsic", "torch.nn.")
#: Root-node getters that follow the first executed op of the pattern, as the matcher
#: does (qcore's pattern builder derives these).
_KNOWN_GETTER_MODULES = ("qcore.fx.patterns", "torch.ao.quantization")
#: Module classes whose aten op is not the snake-cased class name.
_MODULE_OPS = {
    "ReLU": "relu", "ReLU6": "hardtanh", "LeakyReLU": "leaky_relu", "PReLU": "prelu",
    "SiLU": "silu", "GELU": "gelu", "ELU": "elu", "Hardswish": "hardswish",
    "Hardsigmoid": "hardsigmoid", "Hardtanh": "hardtanh", "LayerNorm": "layer_norm",
    "GroupNorm": "group_norm", "InstanceNorm1d": "instance_norm",
    "InstanceNorm2d": "instance_norm", "InstanceNorm3d": "instance_norm",
    "BatchNorm1d": "batch_norm", "BatchNorm2d": "batch_norm", "BatchNorm3d": "batch_norm",
    "ConstantPad1d": "pad", "ConstantPad2d": "pad", "ConstantPad3d": "pad",
    "ReflectionPad2d": "pad", "ZeroPad2d": "pad", "EmbeddingBag": "embedding_bag",
    "AdaptiveAvgPool1d": "adaptive_avg_pool1d", "AdaptiveAvgPool2d": "adaptive_avg_pool2d",
    "AdaptiveAvgPool3d": "adaptive_avg_pool3d", "MaxPool1d": "max_pool1d",
    "MaxPool2d": "max_pool2d", "MaxPool3d": "max_pool3d", "AvgPool1d": "avg_pool1d",
    "AvgPool2d": "avg_pool2d", "AvgPool3d": "avg_pool3d", "ConvTranspose1d": "conv_transpose1d",
    "ConvTranspose2d": "conv_transpose2d", "ConvTranspose3d": "conv_transpose3d",
    "PixelShuffle": "pixel_shuffle", "Softmax": "softmax", "LogSoftmax": "log_softmax",
}  # fmt: skip
_RECURRENT = (nn.RNNBase, nn.RNNCellBase)
#: Calls export records no aten op for.
_NO_OP: tuple[Any, ...] = (nn.Identity, "contiguous", "detach")
_WEIGHTED = re.compile(r"^(conv\d?d|conv_transpose\dd|linear)$")


@dataclass(frozen=True)
class DerivedPattern:
    """One matchable pattern: ``tree`` in torch's reversed nested form, the dtype configs
    and observation type ``prepare_fx`` would apply, and what the annotator needs."""

    name: str
    text: str
    tree: Any
    dtype_configs: tuple[DTypeConfig, ...]
    observation: ObservationType
    weighted: bool = False
    #: the functional form's weight argument position (``input_type_to_index``)
    weight_index: int | None = None
    training_pattern: bool = False
    ops: frozenset[Any] = frozenset()
    #: ``num_tensor_args_to_observation_type``: the observation type by how many of the
    #: root call's arguments are tensors (binary ops: ``x + 1.0`` shares its input's
    #: observer, ``x + y`` does not); ``prepare_fx`` takes it over ``observation``
    by_tensor_args: tuple[tuple[int, ObservationType], ...] = ()

    def observation_for(self, tensor_args: int) -> ObservationType:
        """The observation type ``prepare_fx`` gives a match whose root call has
        ``tensor_args`` tensor arguments."""
        return dict(self.by_tensor_args).get(tensor_args, self.observation)

    @property
    def size(self) -> int:
        return sum(1 for _ in elements(self.tree))

    @property
    def dynamic(self) -> bool:
        return any(dc.is_dynamic for dc in self.dtype_configs)

    @property
    def static(self) -> bool:
        return any(not dc.is_dynamic for dc in self.dtype_configs)


@dataclass(frozen=True)
class Underivable:
    """A pattern of the backend the derived quantizer cannot express, and why; the ops it
    covers stay in float under the derived quantizer."""

    pattern: str
    reason: str
    #: aten ops and module classes (qualified names) the pattern's elements cover.
    ops: frozenset[Any] = frozenset()
    modules: frozenset[str] = frozenset()

    def __str__(self) -> str:
        return f"{self.pattern}: {self.reason}"

    def covers(self, node: Any) -> bool:
        """Whether ``node`` (an exported aten node) is one of the pattern's ops."""
        if node.target in self.ops:
            return True
        stack = (node.meta.get("nn_module_stack") or {}).values()
        return any(qualified_name(cls) in self.modules for _, cls in stack)


def reversed_tree(config: BackendPatternConfig) -> Any:
    """The config's pattern in torch's reversed nested-tuple form."""
    complex_format = config.to_dict().get("pattern_complex_format")
    if complex_format is not None:
        return complex_format
    pattern = config.pattern
    if not isinstance(pattern, tuple):
        return pattern
    tree: Any = pattern[0]
    for element in pattern[1:]:
        tree = (element, tree)
    return tree


def elements(tree: Any) -> Iterable[Any]:
    if isinstance(tree, tuple):
        for part in tree:
            yield from elements(part)
    else:
        yield tree


def is_match_all(element: Any) -> bool:
    return isinstance(element, type) and issubclass(element, MatchAllNode)


def element_name(element: Any) -> str:
    if is_match_all(element):
        return "any"
    if isinstance(element, str):
        return f"method_{element}"
    if element in OPERATOR_METHODS:
        return f"op_{element.__name__}"
    name = str(getattr(element, "__name__", "x")).strip("_")
    if isinstance(element, type):
        return name.lower()
    if str(getattr(element, "__module__", "")).startswith("torch.nn.functional"):
        return f"f_{name}"
    return f"torch_{name}"


def aten_ops(element: Any) -> frozenset[Any]:
    """The aten overloads a call of ``element`` exports to (best effort, for reports and
    operator scoping)."""
    if is_match_all(element):
        return frozenset()
    if isinstance(element, type):
        name = _MODULE_OPS.get(element.__name__, element.__name__.lower())
    elif isinstance(element, str):
        name = element
    elif element in OPERATOR_METHODS:
        name = OPERATOR_METHODS[element]
    else:
        name = str(getattr(element, "__name__", ""))
    packet = getattr(torch.ops.aten, name, None)
    if packet is None or not hasattr(packet, "overloads"):
        return frozenset()
    return frozenset(getattr(packet, o) for o in packet.overloads())


def _is_internal(element: Any) -> bool:
    return isinstance(element, type) and element.__module__.startswith(_INTERNAL)


def _custom_module(element: Any) -> bool:
    return (
        isinstance(element, type)
        and issubclass(element, nn.Module)
        and not is_match_all(element)
        and not element.__module__.startswith(("torch.nn", "torch.ao.nn"))
    )


def _root(tree: Any) -> Any:
    """The first-executed element: down the first non-wildcard argument."""
    while isinstance(tree, tuple):
        args = [a for a in tree[1:] if not (not isinstance(a, tuple) and is_match_all(a))]
        if not args:
            return tree[0]
        tree = args[0]
    return tree


def _has_bn_after_root(tree: Any) -> bool:
    parts = list(elements(tree))
    return any(
        isinstance(e, type) and issubclass(e, nn.modules.batchnorm._BatchNorm)
        for e in parts
        if e is not _root(tree)
    )


def _float_input(dc: DTypeConfig) -> bool:
    return dc.input_dtype in (torch.float32, torch.float16) or dc.output_dtype == torch.float16


def derive_patterns(
    backend_config: BackendConfig, text: Any, floats: Iterable[Any] = ()
) -> tuple[list[DerivedPattern], list[Underivable]]:
    """The matchable patterns of ``backend_config`` (larger first, as ``prepare_fx`` tries
    them) and the ones it cannot express. ``text(config)`` renders a pattern for people;
    ``floats``: the elements the backend's default mapping always keeps in float."""
    floats = list(floats)
    by_pattern = {c.pattern: c for c in backend_config.configs if c.pattern is not None}
    derived: list[DerivedPattern] = []
    skipped: list[Underivable] = []
    names: set[str] = set()
    for config in backend_config.configs:
        tree = reversed_tree(config)
        parts = list(elements(tree))
        label = text(config)
        covered = {
            "ops": frozenset().union(*(aten_ops(e) for e in parts)),
            "modules": frozenset(qualified_name(e) for e in parts if _custom_module(e)),
        }
        if any(_is_internal(e) for e in parts):
            continue  # reached through a fusion or a QAT swap of a user-facing pattern
        custom = [e for e in parts if _custom_module(e)]
        if custom:
            skipped.append(Underivable(label, f"custom module {qualified_name(custom[0])}: "
                                       "FX matches it only as a declared leaf module, "
                                       "export traces through it", **covered))  # fmt: skip
            continue
        recurrent = [e for e in parts if isinstance(e, type) and issubclass(e, _RECURRENT)]
        if recurrent:
            skipped.append(Underivable(label, f"{recurrent[0].__name__}: FX swaps it for a "
                                       "dynamically quantized module; PT2E has no aten "
                                       "counterpart", **covered))  # fmt: skip
            continue
        no_op = [e for e in parts if e in _NO_OP]
        if no_op:
            skipped.append(Underivable(label, f"{element_name(no_op[0])} exports to no aten op: "
                                       "nothing to quantize", **covered))  # fmt: skip
            continue
        if _root(tree) in floats:
            skipped.append(Underivable(label, "the backend's default QConfigMapping keeps it in "
                                       "float (its qconfig is None)", **covered))  # fmt: skip
            continue
        missing = [e for e in parts if isinstance(e, str) and not hasattr(torch.Tensor, e)]
        if missing:
            skipped.append(Underivable(label, f"Tensor has no method '{missing[0]}': nothing "
                                       "calls it, in FX or in export", **covered))  # fmt: skip
            continue
        unknown = [e for e in parts if not is_match_all(e) and not signatures(e)]
        if unknown:
            skipped.append(Underivable(label, f"element {unknown[0]!r} is not recorded by export",
                                       **covered))  # fmt: skip
            continue
        spec = config.to_dict()
        getter = spec.get("root_node_getter")
        if getter is not None and not str(getattr(getter, "__module__", "")).startswith(
            _KNOWN_GETTER_MODULES
        ):
            skipped.append(Underivable(label, f"root-node getter {getattr(getter, '__qualname__', getter)} "
                                       "cannot be matched on aten nodes", **covered))  # fmt: skip
            continue
        source = config
        if config.fuser_method is not None:
            fused = config.fused_module or config.root_module
            if fused is not None and not fused.__module__.startswith(_FUSED_OK):
                skipped.append(Underivable(label, f"fuser into {qualified_name(fused)} "
                                           "has no aten counterpart", **covered))  # fmt: skip
                continue
            source = by_pattern.get(fused, config) if fused is not None else config
        dtype_configs = tuple(source.dtype_configs)
        if not dtype_configs:
            continue  # FX leaves it in float too
        if all(_float_input(dc) for dc in dtype_configs):
            skipped.append(Underivable(label, "only weight-only or fp16 dtype configs, which "
                                       "have no derived PT2E form", **covered))  # fmt: skip
            continue
        root = _root(tree)
        base = "_".join(element_name(e) for e in reversed(parts))
        name = re.sub(r"[^0-9a-zA-Z_]", "_", base)
        suffix = 2
        while name in names:
            name, suffix = f"{re.sub(r'_v[0-9]+$', '', name)}_v{suffix}", suffix + 1
        names.add(name)
        derived.append(
            DerivedPattern(
                name=name,
                text=label,
                tree=tree,
                dtype_configs=dtype_configs,
                observation=source.observation_type,
                weighted=bool(_WEIGHTED.match(re.sub(r"^(torch_|f_)", "", element_name(root))))
                or "weight" in source.to_dict().get("input_type_to_index", {}),
                weight_index=source.to_dict().get("input_type_to_index", {}).get("weight"),
                training_pattern=_has_bn_after_root(tree),
                ops=frozenset().union(*(aten_ops(e) for e in parts)),
                by_tensor_args=tuple(
                    sorted(source.to_dict().get("num_tensor_args_to_observation_type", {}).items())
                ),
            )
        )
    derived.sort(key=lambda p: -p.size)  # stable: torch's order among equal sizes
    return derived, skipped
