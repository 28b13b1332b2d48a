"""One pattern, one call: the row every family and fusion shape is made of.

``pattern_config`` is the single place where a ``BackendPatternConfig`` is created, so
every emitted row gets the same treatment: dtype configs validated and copied (presets are
shared module constants; a pattern must never alias them), bad input reported with the
pattern it belongs to, and torch's underscore setters reached through qcore's adapter.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from torch import nn
from torch.ao.quantization.backend_config import (
    BackendConfig,
    BackendPatternConfig,
    DTypeConfig,
    DTypeWithConstraints,
    ObservationType,
)

from qcore import _torch_private as private
from qcore.fx.dtypes import validate_dtype_config

#: A module class, a function / torch op, or a method name (``"relu"``).
Op = type[nn.Module] | Callable[..., Any] | str
#: An op or a tuple of ops: forward order (``(conv, bn, relu)``) unless given as a
#: ``complex_pattern``, where it is torch's reversed nested format.
Pattern = Any
ModuleType = type[nn.Module]

#: Where functional conv/linear find their weight and bias among the call's arguments.
WEIGHT_1_BIAS_2: Mapping[str, int] = {"weight": 1, "bias": 2}


_PREFIXES = (
    ("torch.nn.modules", "nn"),
    ("torch.ao.nn.intrinsic.qat", "nniqat"),
    ("torch.ao.nn.intrinsic", "nni"),
    ("torch.ao.nn.quantized.reference", "nnqr"),
    ("torch.ao.nn.qat", "nnqat"),
    ("torch.nn.functional", "F"),
    ("torch._C._nn", "F"),
    ("torch.ao.quantization.utils", ""),
    ("_operator", "operator"),
)


def describe(pattern: Pattern) -> str:
    """A short readable name for a pattern (``(nn.Conv2d, F.relu)``), for messages."""
    if isinstance(pattern, tuple):
        return "(" + ", ".join(describe(p) for p in pattern) + ")"
    if isinstance(pattern, str):
        return repr(pattern)
    name = getattr(pattern, "__name__", None)
    if name is None:
        return repr(pattern)
    module = getattr(pattern, "__module__", None) or "torch"
    for full, short in _PREFIXES:
        if module == full or module.startswith(full + "."):
            module = short
            break
    return f"{module}.{name}" if module else name


def _copied(config: DTypeConfig) -> DTypeConfig:
    """A copy that no later edit of ``config`` reaches: the config and its constraint
    records, whose fields are dtypes and numbers. ``copy.deepcopy`` gives the same at
    about 50 times the cost (it rebuilds every torch.dtype through pickling), and a
    backend config copies a dtype config per pattern: ~0.1 s per build, and plugins build
    one per FX flow and per qconfig mapping."""
    copied = copy.copy(config)
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if isinstance(value, DTypeWithConstraints):
            setattr(copied, field.name, copy.copy(value))
    return copied


def _checked_dtypes(pattern: Pattern, dtype_configs: Iterable[DTypeConfig]) -> list[DTypeConfig]:
    checked = []
    for index, config in enumerate(dtype_configs):
        try:
            validate_dtype_config(config)
        except ValueError as exc:
            raise ValueError(f"pattern {describe(pattern)}: dtype_configs[{index}]: {exc}") from exc
        checked.append(_copied(config))
    if not checked:
        raise ValueError(f"pattern {describe(pattern)}: needs at least one dtype config")
    return checked


def pattern_config(
    pattern: Pattern,
    dtype_configs: Sequence[DTypeConfig],
    *,
    complex_pattern: bool = False,
    observation: ObservationType | None = None,
    root: ModuleType | None = None,
    qat: ModuleType | None = None,
    reference: ModuleType | None = None,
    fused: ModuleType | None = None,
    fuser: Callable[..., Any] | None = None,
    root_node_getter: Callable[..., Any] | None = None,
    extra_inputs_getter: Callable[..., Any] | None = None,
    input_type_to_index: Mapping[str, int] | None = None,
    num_tensor_args: Mapping[int, ObservationType] | None = None,
) -> BackendPatternConfig:
    """One ``BackendPatternConfig``; every argument maps to one of its fields.

    ``root``/``reference`` pair a float module with the reference quantized module that
    replaces it at convert time; ``qat`` names the module swapped in by ``prepare_qat_fx``;
    ``fused``/``fuser`` say what a multi-op pattern becomes at fusion. Leave
    ``observation`` unset for torch's default (separate input and output observers).
    """
    if not complex_pattern and isinstance(pattern, tuple) and len(pattern) not in (2, 3):
        raise ValueError(
            f"pattern {describe(pattern)}: a forward-order tuple must have 2 or 3 ops; "
            "use a qcore.fx.patterns.Chain for longer chains"
        )
    config = BackendPatternConfig() if complex_pattern else BackendPatternConfig(pattern)
    if complex_pattern:
        private.set_pattern_complex_format(config, pattern)
    config.set_dtype_configs(_checked_dtypes(pattern, dtype_configs))
    setters: list[tuple[Any, Callable[[Any], Any]]] = [
        (observation, config.set_observation_type),
        (root, config.set_root_module),
        (qat, config.set_qat_module),
        (reference, config.set_reference_quantized_module),
        (fused, config.set_fused_module),
        (fuser, config.set_fuser_method),
        (root_node_getter, lambda v: private.set_root_node_getter(config, v)),
        (extra_inputs_getter, lambda v: private.set_extra_inputs_getter(config, v)),
        (input_type_to_index or None, lambda v: private.set_input_type_to_index(config, dict(v))),
        (
            num_tensor_args or None,
            lambda v: private.set_num_tensor_args_to_observation_type(config, dict(v)),
        ),
    ]
    for value, setter in setters:
        if value is not None:  # unset: torch's default for the field
            setter(value)
    return config


def rows(
    ops: Iterable[Pattern], dtype_configs: Sequence[DTypeConfig], **fields: Any
) -> list[BackendPatternConfig]:
    """The same fields for many single-op patterns: one ``pattern_config`` per op."""
    return [pattern_config(op, dtype_configs, **fields) for op in ops]


def pattern_key(config: BackendPatternConfig) -> Pattern:
    """The pattern in torch's reversed nested format: how BackendConfig deduplicates."""
    as_dict = config.to_dict()
    if "pattern_complex_format" in as_dict:
        return as_dict["pattern_complex_format"]
    pattern = as_dict.get("pattern")
    if isinstance(pattern, tuple):
        *rest, last = pattern
        return (last, *reversed(rest)) if len(pattern) == 2 else (last, (rest[1], rest[0]))
    return pattern


def assemble(name: str, *groups: Iterable[BackendPatternConfig]) -> BackendConfig:
    """A ``BackendConfig`` named ``name`` from groups of pattern configs, in order.

    torch keeps the last of two configs for one pattern without a word; a table that
    declares a pattern twice is a mistake, so this raises ``ValueError`` naming it.
    Works in a fresh interpreter (see ``_torch_private.ensure_backend_config_utils``).
    """
    private.ensure_backend_config_utils()
    seen: set[Any] = set()
    backend = BackendConfig(name)
    for group in groups:
        for config in group:
            key = pattern_key(config)
            if key in seen:
                raise ValueError(f"backend '{name}': pattern {describe(key)} is declared twice")
            seen.add(key)
            backend.set_backend_pattern_config(config)
    return backend
