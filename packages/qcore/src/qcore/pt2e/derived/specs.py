"""FX qconfigs as PT2E quantization specs, and the backend's dtype checks on those specs.

A ``QConfig`` holds torch.ao observer (or fake-quant) constructors; PT2E wants torchao
``QuantizationSpec``\\ s whose constructors are torchao's classes of the same name. The
observer's own attributes (dtype, range after ``reduce_range``, qscheme, channel axis,
``eps``) become the spec's fields, so the spec observes exactly what the qconfig would.
A fixed-qparams observer becomes a ``FixedQParamsQuantizationSpec``; qcore's
target-aware weight observer becomes its PT2E twin (:mod:`qcore.pt2e.ranges`), so the
weight-range choice on CPUs without VNNI carries over.

:func:`supports` is the backend's side: whether a spec pair satisfies one of a pattern's
``DTypeConfig``\\ s, with its ``DTypeWithConstraints`` (quant range bounds, minimum scale,
exact fixed qparams), as torch's ``prepare_fx`` decides it.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torchao.quantization.pt2e as ao_obs
from torch.ao.quantization import QConfig
from torch.ao.quantization.backend_config import DTypeConfig, DTypeWithConstraints
from torchao.quantization.pt2e.quantizer import (
    FixedQParamsQuantizationSpec,
    QuantizationConfig,
    QuantizationSpec,
    QuantizationSpecBase,
)

from qcore._torch_private import observer_constructor_parts
from qcore.pt2e.histogram import HistogramObserver
from qcore.pt2e.ranges import weight_observer_ctr

#: torch.ao quantized dtypes -> the plain dtypes PT2E specs use.
_DTYPES = {
    torch.quint8: torch.uint8,
    torch.qint8: torch.int8,
    torch.qint32: torch.int32,
    torch.uint8: torch.uint8,
    torch.int8: torch.int8,
}
#: Spec fields, set from the observer instance rather than copied as keywords.
_FIELDS = frozenset({"dtype", "qscheme", "quant_min", "quant_max", "ch_axis", "is_dynamic",
                     "reduce_range", "scale", "zero_point"})  # fmt: skip
_FIXED = ("FixedQParamsObserver", "FixedQParamsFakeQuantize")
#: Stands for "whatever the producer has": a reuse-input spec meets any dtype.
REUSE_DTYPE = torch.float32


class NotDerivable(ValueError):
    """A qconfig with no PT2E spec (fp16, float-qparams embeddings, custom observers)."""


def _keywords(ctr: Any) -> dict[str, Any]:
    return observer_constructor_parts(ctr)[1]


def _base_class(ctr: Any) -> type:
    cls = observer_constructor_parts(ctr)[0]
    if not isinstance(cls, type):
        raise NotDerivable(f"observer constructor {ctr!r} is not a class")
    return cls


def _torchao_ctr(ctr: Any) -> Any:
    """The torchao class of the same name with the qconfig's non-field keywords."""
    cls = _base_class(ctr)
    if cls.__name__ == "TargetWeightObserver":
        return weight_observer_ctr("calibrated")
    # torchao's histogram observer, its range search walked faster (the same ranges)
    twin = HistogramObserver if cls.__name__ == "HistogramObserver" else getattr(ao_obs, cls.__name__, None)
    if twin is None:
        raise NotDerivable(f"observer {cls.__module__}.{cls.__qualname__} has no torchao twin")
    kwargs = {k: v for k, v in _keywords(ctr).items() if k not in _FIELDS}
    if "observer" in kwargs:
        kwargs["observer"] = observer_constructor_parts(_torchao_ctr(kwargs["observer"]))[0]
    return twin.with_args(**kwargs)


@dataclass(frozen=True)
class ReuseInputSpec(QuantizationSpecBase):  # type: ignore[misc]  # torchao is untyped
    """``ReuseInputObserver``: the op takes its producer's qparams, or stays float after a
    float producer. Resolved to a shared spec or removed before ``prepare_pt2e`` sees it."""

    dtype: torch.dtype | None = None


def spec_of(ctr: Any) -> QuantizationSpecBase | None:
    """The PT2E spec observing what torch.ao observer constructor ``ctr`` observes."""
    if ctr is None:
        return None
    if _base_class(ctr).__name__ == "ReuseInputObserver":
        return ReuseInputSpec()
    if _base_class(ctr).__name__ == "NoopObserver":
        return None
    observer = ctr()
    inner = getattr(observer, "activation_post_process", observer)
    dtype = getattr(observer, "dtype", None)
    if dtype in (torch.float32, torch.float) and getattr(observer, "is_dynamic", False) is False:
        return None  # a float placeholder: this tensor stays float
    if dtype not in _DTYPES:
        raise NotDerivable(f"{type(observer).__name__} quantizes to {dtype}")
    qscheme = getattr(inner, "qscheme", torch.per_tensor_affine)
    if qscheme == torch.per_channel_affine_float_qparams:
        raise NotDerivable("float-qparams per-channel weights (weight-only embeddings)")
    qmin, qmax = int(inner.quant_min), int(inner.quant_max)
    if type(observer).__name__ in _FIXED:
        scale, zero_point = observer.calculate_qparams()
        return FixedQParamsQuantizationSpec(
            dtype=_DTYPES[dtype],
            scale=float(scale),
            zero_point=int(zero_point),
            quant_min=qmin,
            quant_max=qmax,
            qscheme=qscheme,
        )
    return QuantizationSpec(
        dtype=_DTYPES[dtype],
        observer_or_fake_quant_ctr=_torchao_ctr(ctr),
        quant_min=qmin,
        quant_max=qmax,
        qscheme=qscheme,
        ch_axis=getattr(inner, "ch_axis", None),
        is_dynamic=bool(getattr(observer, "is_dynamic", False)),
    )


@functools.lru_cache(maxsize=256)
def _config_of(qconfig: QConfig, is_qat: bool) -> QuantizationConfig:
    act = spec_of(qconfig.activation)
    weight = spec_of(qconfig.weight)
    dynamic = isinstance(act, QuantizationSpec) and act.is_dynamic
    return QuantizationConfig(act, None if dynamic else act, weight, None, is_qat)


def config_of(qconfig: QConfig, is_qat: bool = False) -> QuantizationConfig:
    """The PT2E config of ``qconfig`` (cached per qconfig object); raises
    :class:`NotDerivable` when one of its observers has no PT2E spec."""
    return _config_of(qconfig, is_qat)


# -- the backend's dtype checks -----------------------------------------------------------


@dataclass(frozen=True)
class SpecFacts:
    """What a dtype config constrains, read off a spec."""

    dtype: torch.dtype | None
    is_dynamic: bool
    quant_min: int | None
    quant_max: int | None
    eps: float | None
    fixed: tuple[float, int] | None


def facts(spec: QuantizationSpecBase | None) -> SpecFacts:
    if spec is None:
        return SpecFacts(None, False, None, None, None, None)
    if isinstance(spec, FixedQParamsQuantizationSpec):
        return SpecFacts(spec.dtype, False, spec.quant_min, spec.quant_max, None,
                         (spec.scale, spec.zero_point))  # fmt: skip
    if isinstance(spec, ReuseInputSpec):
        return SpecFacts(REUSE_DTYPE, False, None, None, None, None)
    if not isinstance(spec, QuantizationSpec):
        return SpecFacts(None, False, None, None, None, None)
    eps = _keywords(spec.observer_or_fake_quant_ctr).get("eps")
    if eps is None:
        eps = getattr(spec.observer_or_fake_quant_ctr(), "eps", None)
    eps_value = float(eps) if isinstance(eps, float | int | torch.Tensor) else None
    return SpecFacts(spec.dtype, spec.is_dynamic, spec.quant_min, spec.quant_max, eps_value, None)


_FLOAT_WEIGHT = SpecFacts(torch.float32, False, None, None, None, None)


def _plain(dtype: Any) -> Any:
    return _DTYPES.get(dtype, dtype)


def _meets(f: SpecFacts, want: DTypeWithConstraints | None) -> str | None:
    """Why ``f`` misses ``want`` (torch's dtype check and ``DTypeWithConstraints``)."""
    if want is None or want.dtype is None:
        return None
    if f.dtype is REUSE_DTYPE:
        return None
    if f.dtype != _plain(want.dtype):
        return f"dtype {f.dtype} is not {want.dtype}"
    lo, hi = want.quant_min_lower_bound, want.quant_max_upper_bound
    if (lo is not None and hi is not None) and (
        f.quant_min is None or f.quant_max is None or f.quant_min < lo or f.quant_max > hi
    ):
        return f"range [{f.quant_min}, {f.quant_max}] is outside [{lo}, {hi}]"
    if want.scale_min_lower_bound is not None and (
        f.eps is None or f.eps < want.scale_min_lower_bound
    ):
        return f"minimum scale {f.eps} is below {want.scale_min_lower_bound}"
    if want.scale_exact_match is not None and want.zero_point_exact_match is not None:
        if f.fixed is None:
            return "the op needs fixed qparams"
        scale, zero_point = f.fixed
        if abs(scale - want.scale_exact_match) > 1e-12 or zero_point != want.zero_point_exact_match:
            return f"fixed qparams ({scale}, {zero_point}) are not the op's"
    return None


def mismatch(
    config: QuantizationConfig, dtype_configs: Sequence[DTypeConfig], weighted: bool
) -> str | None:
    """None when ``config`` satisfies one of ``dtype_configs``; else why not (for the first)."""
    act = facts(config.input_activation)
    out = facts(config.output_activation)
    # no weight spec: the weight stays float, which a float weight dtype config accepts
    weight = facts(config.weight) if config.weight is not None else _FLOAT_WEIGHT
    reasons = []
    for dc in dtype_configs:
        if dc.input_dtype in (torch.float32, torch.float16) or dc.output_dtype == torch.float16:
            reasons.append(f"{dc.input_dtype} inputs have no derived PT2E form")
            continue
        if bool(dc.is_dynamic) != act.is_dynamic:
            reasons.append("dynamic" if dc.is_dynamic else "static" + " configs only")
            continue
        why = _meets(act, dc.input_dtype_with_constraints)
        if why is None and not dc.is_dynamic:
            why = _meets(out, dc.output_dtype_with_constraints)
        if why is None and weighted:
            why = _meets(weight, dc.weight_dtype_with_constraints)
        if why is None:
            return None
        reasons.append(why)
    return "; ".join(dict.fromkeys(reasons)) or "the pattern declares no dtype config"
