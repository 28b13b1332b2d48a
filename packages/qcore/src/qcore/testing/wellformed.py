"""Static rules a BackendPatternConfig must satisfy before torch ever sees a model.

torch accepts nearly anything in a BackendPatternConfig and fails much later, inside
``prepare_fx``, with a message about a node rather than the pattern that caused it. These
rules catch such configs up front and name the offending field.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.ao.quantization.backend_config import (
    BackendPatternConfig,
    DTypeConfig,
    DTypeWithConstraints,
    ObservationType,
)

from qcore.testing.patterns import MalformedPatternError, pattern_tree

#: dtypes a DTypeConfig may name: quantized storage, the int types PT2E-style configs
#: use, and the float types of weight-only / dynamic / fp16 configs.
SANE_DTYPES: frozenset[torch.dtype] = frozenset(
    {
        torch.quint8,
        torch.qint8,
        torch.qint32,
        torch.quint4x2,
        torch.quint2x4,
        torch.uint8,
        torch.int8,
        torch.int16,
        torch.uint16,
        torch.int32,
        torch.float32,
        torch.float16,
        torch.bfloat16,
    }
)
_BIAS_DTYPES = frozenset({torch.float32, torch.float16, torch.bfloat16, torch.qint32, torch.int32})
_MODULE_FIELDS = (
    "root_module",
    "qat_module",
    "reference_quantized_module_for_root",
    "fused_module",
)
_TENSOR_ARG_COUNTS = frozenset({0, 1, 2})
_INPUT_TYPES = frozenset({"weight", "bias"})


def _dtype_problems(field: str, value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, DTypeWithConstraints):
        problems = _dtype_problems(field, value.dtype)
        qmin, qmax = value.quant_min_lower_bound, value.quant_max_upper_bound
        if qmin is not None and qmax is not None and qmin > qmax:
            problems.append(f"{field}: quant_min_lower_bound {qmin} > quant_max_upper_bound {qmax}")
        for bound in ("scale_min_lower_bound", "scale_max_upper_bound", "scale_exact_match"):
            scale = getattr(value, bound)
            if scale is not None and scale <= 0:
                problems.append(f"{field}: {bound} must be positive, got {scale}")
        return problems
    if not isinstance(value, torch.dtype):
        return [f"{field}: {value!r} is not a torch.dtype"]
    if value not in SANE_DTYPES:
        return [f"{field}: {value} is not a quantization dtype"]
    return []


def _dtype_config_problems(index: int, config: Any) -> list[str]:
    where = f"dtype_configs[{index}]"
    if not isinstance(config, DTypeConfig):
        return [f"{where}: a {type(config).__name__}, expected a DTypeConfig"]
    problems: list[str] = []
    for field in ("input_dtype", "output_dtype", "weight_dtype", "bias_dtype"):
        declared = getattr(config, f"{field}_with_constraints", None) or getattr(config, field)
        problems += _dtype_problems(f"{where}.{field}", declared)
    if config.bias_dtype is not None and config.bias_dtype not in _BIAS_DTYPES:
        problems.append(f"{where}.bias_dtype: {config.bias_dtype} is not a bias dtype")
    if config.is_dynamic and config.output_dtype not in (None, torch.float32, torch.float16):
        problems.append(f"{where}: is_dynamic, but output_dtype is {config.output_dtype}")
    return problems


def _is_module_class(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, nn.Module)


def pattern_problems(config: object) -> list[str]:
    """Everything wrong with one pattern config, each naming its field; empty when fine."""
    if not isinstance(config, BackendPatternConfig):
        return [f"a {type(config).__name__}, expected a BackendPatternConfig"]
    try:
        tree = pattern_tree(config)
    except MalformedPatternError as exc:
        return [f"pattern: {exc}"]
    spec = config.to_dict()
    problems: list[str] = []
    observation: Any = config.observation_type  # typed, but set by third-party code
    if not isinstance(observation, ObservationType):
        problems.append(f"observation_type: {observation!r} is not an ObservationType")
    for field in _MODULE_FIELDS:
        value = spec.get(field)
        if value is not None and not _is_module_class(value):
            problems.append(f"{field}: {value!r} is not an nn.Module class")
    fuser = spec.get("fuser_method")
    if fuser is not None and not callable(fuser):
        problems.append(f"fuser_method: {fuser!r} is not callable")
    if spec.get("fused_module") is not None and fuser is None:
        problems.append("fused_module is set but fuser_method is not: nothing builds it")
    if spec.get("reference_quantized_module_for_root") and spec.get("root_module") is None:
        problems.append("reference_quantized_module_for_root is set without root_module")
    single_module = not tree.args and _is_module_class(tree.op)
    if spec.get("qat_module") is not None and not single_module:
        problems.append("qat_module is set, but the pattern is not a single module class")
    counts = spec.get("num_tensor_args_to_observation_type", {})
    for count, observation in counts.items():
        if count not in _TENSOR_ARG_COUNTS or not isinstance(observation, ObservationType):
            problems.append(
                f"num_tensor_args_to_observation_type: {count!r} -> {observation!r} "
                "(keys must be 0, 1 or 2, values ObservationTypes)"
            )
    input_index = spec.get("input_type_to_index", {})
    for kind, index in input_index.items():
        if kind not in _INPUT_TYPES or not isinstance(index, int) or index < 0:
            problems.append(f"input_type_to_index: {kind!r} -> {index!r}")
    for getter in ("root_node_getter", "extra_inputs_getter"):
        if spec.get(getter) is not None and not callable(spec[getter]):
            problems.append(f"{getter}: {spec[getter]!r} is not callable")
    dtype_configs = config.dtype_configs
    if not dtype_configs and fuser is None:
        problems.append("dtype_configs: empty, and no fuser_method: the pattern does nothing")
    for index, dtype_config in enumerate(dtype_configs):
        problems += _dtype_config_problems(index, dtype_config)
    return problems
