"""Weight observers whose int8 range fits the target CPU, and mappings that use them.

A backend whose kernels are oneDNN's (the FX ``onednn`` backend, the x86 PT2E quantizer)
calls :func:`fit_qconfig_mapping` (FX) or uses :class:`TargetWeightObserver` directly. On a
target that does not saturate (VNNI, AMX, non-x86) nothing changes. On one that does:

* post-training observers become :class:`TargetWeightObserver`: safe weights
  (:data:`SAFE_QRANGE`) unless a per-layer choice gives each channel its range.
  ``qcore.fx.convert`` (and the x86 quantizer) make those choices on calibration data
  with :func:`qcore.int8.saturation.choose_weight_ranges` and apply them through
  :func:`applying`; torch's raw ``convert_fx`` sees no choices and keeps every layer safe;
* QAT fake-quants train with the safe range (a per-layer switch after training would
  change the very weights the network was trained against).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import torch
from torch.ao.quantization.observer import PerChannelMinMaxObserver

from qcore.int8.cpu_profile import Int8Host, target
from qcore.int8.saturation import SAFE_HALF_RANGE, RangeChoice

if TYPE_CHECKING:
    from torch.ao.quantization import QConfigMapping
    from torch.ao.quantization.qconfig import QConfigAny

__all__ = [
    "SAFE_QRANGE",
    "TargetWeightObserver",
    "applying",
    "fit_qconfig",
    "fit_qconfig_mapping",
    "map_qconfigs",
]

#: The int8 observer range whose scale is ``amax / SAFE_HALF_RANGE``.
SAFE_QRANGE = (-64, 63)

#: weight tensor id -> (the tensor, the choice); the tensor is held so its id stays unique
_Choices = Mapping[int, tuple[torch.Tensor, RangeChoice]]
_active: ContextVar[_Choices | None] = ContextVar("qcore_weight_range_choices", default=None)


@contextmanager
def applying(choices: Mapping[torch.Tensor, RangeChoice]) -> Iterator[None]:
    """Make :class:`TargetWeightObserver` use ``choices`` (weight tensor -> choice)."""
    token = _active.set({id(w): (w, c) for w, c in choices.items()})
    try:
        yield
    finally:
        _active.reset(token)


class TargetWeightObserver(PerChannelMinMaxObserver):
    """Per-channel symmetric int8 weights, safe on a saturating CPU unless told otherwise.

    Observes like torch's observer for ``full_qrange``, then scales each channel's
    quantization scale up: to the safe range by default, or to the per-channel ranges of
    a choice made for this weight (see :func:`applying`). The codes stay inside
    ``full_qrange``, so every downstream consumer of ``quant_min``/``quant_max`` works.
    """

    def __init__(
        self,
        ch_axis: int = 0,
        dtype: torch.dtype = torch.qint8,
        qscheme: torch.qscheme = torch.per_channel_symmetric,
        full_qrange: tuple[int, int] = (-128, 127),
        **kwargs: Any,
    ) -> None:
        super().__init__(
            ch_axis=ch_axis,
            dtype=dtype,
            qscheme=qscheme,
            quant_min=full_qrange[0],
            quant_max=full_qrange[1],
            **kwargs,
        )
        self._observed: weakref.ReferenceType[torch.Tensor] | None = None

    def choice(self) -> RangeChoice | None:
        """The per-layer choice that applies to the weight this observer saw, if any."""
        observed = self._observed() if self._observed is not None else None
        if observed is None:
            return None
        entry = (_active.get() or {}).get(id(observed))
        return entry[1] if entry is not None and entry[0] is observed else None

    def forward(self, x_orig: torch.Tensor) -> torch.Tensor:
        self._observed = weakref.ref(x_orig)
        result: torch.Tensor = super().forward(x_orig)  # type: ignore[no-untyped-call]
        return result

    @torch.jit.export
    def calculate_qparams(self, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        scale, zero_point = super().calculate_qparams()
        choice = self.choice()
        if choice is None:
            full_half = (self.quant_max - self.quant_min) / 2
            factor = torch.full_like(scale, full_half / SAFE_HALF_RANGE, dtype=torch.float64)
        else:
            factor = choice.scale_factors()
        if bool((factor == 1).all()):
            return scale, zero_point  # untouched: bit-identical to torch's observer
        return (scale.double() * factor).to(scale.dtype), zero_point


def _narrow(factory: Any) -> Any:
    """The int8 weight factory ``factory`` made safe, or ``factory`` if it already is."""
    probe = factory()
    if probe.dtype != torch.qint8:
        return factory
    lo, hi = int(probe.quant_min), int(probe.quant_max)
    if (hi - lo) / 2 <= SAFE_HALF_RANGE:
        return factory
    if type(probe) is PerChannelMinMaxObserver and probe.qscheme == torch.per_channel_symmetric:
        return TargetWeightObserver.with_args(ch_axis=probe.ch_axis, full_qrange=(lo, hi))
    # fake-quants (QAT) and other observers: the safe range, statically
    return factory.with_args(quant_min=SAFE_QRANGE[0], quant_max=SAFE_QRANGE[1])


def fit_qconfig(qconfig: QConfigAny) -> QConfigAny:
    """``qconfig`` with its int8 weight observer or fake-quant made safe (see module doc)."""
    if qconfig is None or qconfig.weight is None:
        return qconfig
    return type(qconfig)(activation=qconfig.activation, weight=_narrow(qconfig.weight))


def map_qconfigs(
    mapping: QConfigMapping, change: Callable[[QConfigAny], QConfigAny]
) -> QConfigMapping:
    """Replace every qconfig of ``mapping`` by ``change(qconfig)``, in place, and return it.

    Each distinct qconfig object is changed once, so equal entries stay one object and
    torch's fusion check that member types share a qconfig still holds.
    """
    memo: dict[int, QConfigAny] = {}

    def once(qconfig: QConfigAny) -> QConfigAny:
        if id(qconfig) not in memo:
            memo[id(qconfig)] = change(qconfig)
        return memo[id(qconfig)]

    mapping.global_qconfig = once(mapping.global_qconfig)
    tables: list[dict[Any, QConfigAny]] = [
        mapping.object_type_qconfigs,
        mapping.module_name_regex_qconfigs,
        mapping.module_name_qconfigs,
        mapping.module_name_object_type_order_qconfigs,
    ]
    for table in tables:
        for key, qconfig in list(table.items()):
            table[key] = once(qconfig)
    return mapping


def fit_qconfig_mapping(mapping: QConfigMapping, host: Int8Host | None = None) -> QConfigMapping:
    """Make every qconfig of ``mapping`` safe on ``host`` (default: the current target).

    In place, and returned; a no-op for targets that do not saturate.
    """
    if not (host or target()).saturates_u8s8:
        return mapping
    return map_qconfigs(mapping, fit_qconfig)
