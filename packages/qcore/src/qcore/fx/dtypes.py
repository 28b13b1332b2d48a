"""Named dtype configs for FX backends, and the validation that keeps impossible ones out.

A ``DTypeConfig`` says which dtypes a pattern accepts for its input, output, weight and
bias. torch accepts any combination silently; a typo there (a weight range wider than the
dtype, a scale floor of 0) only shows up as a qconfig that is ignored without a word at
``prepare_fx`` time. :func:`dtype_config` and :func:`constraints` build configs through
:func:`validate_dtype_config`, which raises a ``ValueError`` naming the offending field.

The presets are the configs the first-party backends use; the names say what they hold
rather than which backend first needed them, so a third party can reuse them as rows.
Treat them as read-only: the pattern builder copies them into every pattern it emits.
"""

from __future__ import annotations

import math

import torch
from torch.ao.quantization.backend_config import DTypeConfig, DTypeWithConstraints

__all__ = [
    "ACT_QINT8_SCALE_MIN_2_NEG_12",
    "DYNAMIC_FP16",
    "DYNAMIC_INT8",
    "DYNAMIC_QINT8_SYMMETRIC",
    "FIXED_QPARAMS_0_TO_1",
    "FIXED_QPARAMS_NEG1_TO_1",
    "INPUT_OUTPUT_ONLY_QUINT8",
    "OP_FP16",
    "OP_QINT8_SYMMETRIC",
    "OP_QUINT8",
    "SCALE_MIN_2_NEG_12",
    "WEIGHTED_INT8",
    "WEIGHTED_QINT8_SYMMETRIC",
    "WEIGHT_ONLY_QINT8",
    "WEIGHT_ONLY_QUINT4X2",
    "WEIGHT_ONLY_QUINT8",
    "WEIGHT_QINT8_SYMMETRIC_127",
    "constraints",
    "dtype_config",
    "validate_constraints",
    "validate_dtype_config",
]

DTypeLike = torch.dtype | DTypeWithConstraints | None

# Quantized dtypes have no torch.iinfo; their integer ranges are fixed by the dtype.
_QUANTIZED_RANGES: dict[torch.dtype, tuple[int, int]] = {
    torch.qint8: (-128, 127),
    torch.quint8: (0, 255),
    torch.qint32: (-(2**31), 2**31 - 1),
    torch.quint4x2: (0, 15),
    torch.quint2x4: (0, 3),
}


def _integer_range(dtype: torch.dtype) -> tuple[int, int] | None:
    if dtype in _QUANTIZED_RANGES:
        return _QUANTIZED_RANGES[dtype]
    if dtype.is_floating_point or dtype.is_complex or dtype == torch.bool:
        return None
    info = torch.iinfo(dtype)
    return int(info.min), int(info.max)


def _check_positive(field: str, value: float | None) -> None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise ValueError(f"{field} must be a positive finite number, got {value!r}")


def validate_constraints(field: str, spec: DTypeWithConstraints) -> DTypeWithConstraints:
    """Check one ``DTypeWithConstraints``; ``field`` (e.g. ``weight_dtype``) names it in errors.

    Bounds must lie inside the dtype's integer range and in order, scales must be
    positive, and an exact zero point must be representable: any of these broken makes
    every qconfig fail the backend's dtype check, so the pattern silently stays float.
    """
    dtype = spec.dtype
    bounds = {
        "quant_min_lower_bound": spec.quant_min_lower_bound,
        "quant_max_upper_bound": spec.quant_max_upper_bound,
        "scale_min_lower_bound": spec.scale_min_lower_bound,
        "scale_max_upper_bound": spec.scale_max_upper_bound,
        "scale_exact_match": spec.scale_exact_match,
        "zero_point_exact_match": spec.zero_point_exact_match,
    }
    if dtype is None:
        given = [name for name, value in bounds.items() if value is not None]
        if given:
            raise ValueError(f"{field}.{given[0]} is set but {field} has no dtype")
        return spec
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"{field}.dtype must be a torch.dtype, got {dtype!r}")
    qmin, qmax = spec.quant_min_lower_bound, spec.quant_max_upper_bound
    rng = _integer_range(dtype)
    for name, value in (("quant_min_lower_bound", qmin), ("quant_max_upper_bound", qmax)):
        if value is None:
            continue
        if rng is None:
            raise ValueError(f"{field}.{name} is set but {dtype} is not an integer dtype")
        if not rng[0] <= value <= rng[1]:
            raise ValueError(
                f"{field}.{name}={value} lies outside the range of {dtype} [{rng[0]}, {rng[1]}]"
            )
    if qmin is not None and qmax is not None and qmin > qmax:
        raise ValueError(
            f"{field}.quant_min_lower_bound={qmin} > {field}.quant_max_upper_bound={qmax}"
        )
    for name in ("scale_min_lower_bound", "scale_max_upper_bound", "scale_exact_match"):
        _check_positive(f"{field}.{name}", bounds[name])
    smin, smax = spec.scale_min_lower_bound, spec.scale_max_upper_bound
    if smin is not None and smax is not None and smin > smax:
        raise ValueError(
            f"{field}.scale_min_lower_bound={smin} > {field}.scale_max_upper_bound={smax}"
        )
    zp = spec.zero_point_exact_match
    if zp is not None:
        low = qmin if qmin is not None else (rng[0] if rng else None)
        high = qmax if qmax is not None else (rng[1] if rng else None)
        if low is None or high is None or not low <= zp <= high:
            raise ValueError(
                f"{field}.zero_point_exact_match={zp} is not representable in {dtype} "
                f"with range [{low}, {high}]"
            )
    return spec


def validate_dtype_config(config: DTypeConfig) -> DTypeConfig:
    """Raise ``ValueError`` naming the field when ``config`` cannot describe real kernels."""
    if not isinstance(config, DTypeConfig):
        raise ValueError(f"expected a DTypeConfig, got {type(config).__name__}")
    validate_constraints("input_dtype", config.input_dtype_with_constraints)
    validate_constraints("output_dtype", config.output_dtype_with_constraints)
    validate_constraints("weight_dtype", config.weight_dtype_with_constraints)
    if config.bias_dtype is not None and not isinstance(config.bias_dtype, torch.dtype):
        raise ValueError(f"bias_dtype must be a torch.dtype, got {config.bias_dtype!r}")
    if config.is_dynamic is not None and not isinstance(config.is_dynamic, bool):
        raise ValueError(f"is_dynamic must be a bool or None, got {config.is_dynamic!r}")
    if config.is_dynamic:
        # Dynamic quantization computes activation qparams at run time and returns float.
        out = config.output_dtype
        if out is not None and not out.is_floating_point:
            raise ValueError(
                f"output_dtype={out} with is_dynamic=True: dynamic patterns output float"
            )
        if config.input_dtype is None:
            raise ValueError("input_dtype must be set when is_dynamic=True")
    return config


def constraints(
    dtype: torch.dtype,
    *,
    quant_min: int | None = None,
    quant_max: int | None = None,
    scale_min: float | None = None,
    scale_max: float | None = None,
    scale: float | None = None,
    zero_point: int | None = None,
) -> DTypeWithConstraints:
    """A validated ``DTypeWithConstraints`` with short keyword names.

    ``quant_min``/``quant_max`` bound the qconfig's range, ``scale_min``/``scale_max`` its
    scale, ``scale``/``zero_point`` fix the qparams exactly (sigmoid, tanh).
    """
    spec = DTypeWithConstraints(
        dtype=dtype,
        quant_min_lower_bound=quant_min,
        quant_max_upper_bound=quant_max,
        scale_min_lower_bound=scale_min,
        scale_max_upper_bound=scale_max,
        scale_exact_match=scale,
        zero_point_exact_match=zero_point,
    )
    return validate_constraints(str(dtype), spec)


def dtype_config(
    input: DTypeLike = None,
    output: DTypeLike = None,
    weight: DTypeLike = None,
    bias: torch.dtype | None = None,
    *,
    is_dynamic: bool | None = None,
) -> DTypeConfig:
    """A validated ``DTypeConfig``; fields left ``None`` mean "not quantized / not present"."""
    return validate_dtype_config(DTypeConfig(input, output, weight, bias, is_dynamic))


#: The smallest activation/weight scale XNNPACK-style symmetric int8 kernels accept.
SCALE_MIN_2_NEG_12 = 2.0**-12

#: Symmetric int8 activations whose scale must stay at or above 2**-12.
ACT_QINT8_SCALE_MIN_2_NEG_12 = constraints(torch.qint8, scale_min=SCALE_MIN_2_NEG_12)

#: Symmetric int8 weights restricted to [-127, 127] (so negation cannot overflow),
#: with the same scale floor as the activations.
WEIGHT_QINT8_SYMMETRIC_127 = constraints(
    torch.qint8, quant_min=-127, quant_max=127, scale_min=SCALE_MIN_2_NEG_12
)

#: Output range [0, 1) of sigmoid-like ops, fixed so the op needs no observer.
FIXED_QPARAMS_0_TO_1 = constraints(
    torch.quint8, quant_min=0, quant_max=255, scale=1.0 / 256.0, zero_point=0
)

#: Output range [-1, 1) of tanh, fixed so the op needs no observer.
FIXED_QPARAMS_NEG1_TO_1 = constraints(
    torch.quint8, quant_min=0, quant_max=255, scale=2.0 / 256.0, zero_point=128
)

#: Conv/linear with quint8 activations, qint8 weights and float bias (fbgemm/oneDNN style).
WEIGHTED_INT8 = dtype_config(torch.quint8, torch.quint8, torch.qint8, torch.float)

#: Ops without weights running on quint8 tensors (add, pooling, ...).
OP_QUINT8 = dtype_config(torch.quint8, torch.quint8)

#: Dynamic int8: quint8 activations quantized at run time, qint8 weights, float output.
DYNAMIC_INT8 = dtype_config(
    torch.quint8, torch.float, torch.qint8, torch.float, is_dynamic=True
)

#: Dynamic symmetric int8 with the XNNPACK scale floor and [-127, 127] weights.
DYNAMIC_QINT8_SYMMETRIC = dtype_config(
    ACT_QINT8_SCALE_MIN_2_NEG_12,
    torch.float,
    WEIGHT_QINT8_SYMMETRIC_127,
    torch.float,
    is_dynamic=True,
)

#: Dynamic fp16: activations and weights cast to float16, float output.
DYNAMIC_FP16 = dtype_config(
    torch.float16, torch.float, torch.float16, torch.float, is_dynamic=True
)

#: fp16 end to end (input, output, weight and bias).
OP_FP16 = dtype_config(torch.float16, torch.float16, torch.float16, torch.float16)

#: Only the weight is quantized (embeddings): qint8 weight, float activations.
WEIGHT_ONLY_QINT8 = dtype_config(torch.float, torch.float, torch.qint8)

#: Only the weight is quantized, as quint8.
WEIGHT_ONLY_QUINT8 = dtype_config(torch.float, torch.float, torch.quint8)

#: Only the weight is quantized, packed 4-bit.
WEIGHT_ONLY_QUINT4X2 = dtype_config(torch.float, torch.float, torch.quint4x2)

#: Quantized input and output around float weights (layer norm): the op runs on
#: quantized tensors but its affine parameters stay float.
INPUT_OUTPUT_ONLY_QUINT8 = dtype_config(torch.quint8, torch.quint8, torch.float, torch.float)

#: Symmetric qint8 conv/linear (XNNPACK-style), borrowed by ExecuTorch.
WEIGHTED_QINT8_SYMMETRIC = dtype_config(
    ACT_QINT8_SCALE_MIN_2_NEG_12,
    ACT_QINT8_SCALE_MIN_2_NEG_12,
    WEIGHT_QINT8_SYMMETRIC_127,
    torch.float,
)

#: Symmetric qint8 ops without weights (add, pooling, ...), XNNPACK-style.
OP_QINT8_SYMMETRIC = dtype_config(ACT_QINT8_SCALE_MIN_2_NEG_12, ACT_QINT8_SCALE_MIN_2_NEG_12)
