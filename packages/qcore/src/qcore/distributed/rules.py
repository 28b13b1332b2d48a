"""How each observer and fake-quantize class is reduced over ranks: one table row per class.

A row names the buffers that hold statistics and how ranks combine them. ``min``/``max``/
``sum`` are exact whatever order the data arrived in; ``histogram`` merges each rank's
histogram onto the common range (see :mod:`qcore.distributed.histogram`). Buffers listed in
``constant`` are configuration (``eps``, enable flags, qparams a fake quant derives) and are
left alone. ``refresh`` runs after the reduction, for state derived from the statistics.

Both observer families are covered: ``torch.ao.quantization`` (FX) and
``torchao.quantization.pt2e`` (PT2E). A subclass inherits its nearest ancestor's row, but
only while it registers no buffer the row does not name: new state gets a clear error
instead of a silent per-rank value. Third parties add rows with :func:`register_sync_rule`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

import torch
from torch import nn

__all__ = ["Reduction", "SyncRule", "register_sync_rule", "rule_for", "syncable"]

Reduction = Literal["min", "max", "sum"]


@dataclass(frozen=True)
class SyncRule:
    """How to make one observer's state the state of a single process over all ranks."""

    reduce: Mapping[str, Reduction] = field(default_factory=dict)
    #: ``histogram``, ``min_val`` and ``max_val`` merged onto the ranks' common range
    histogram: bool = False
    constant: frozenset[str] = frozenset()
    refresh: Callable[[nn.Module], None] | None = None

    def covers(self) -> frozenset[str]:
        hist = {"histogram", "min_val", "max_val"} if self.histogram else set()
        return frozenset(self.reduce) | self.constant | hist


def refresh_fake_quant_qparams(fake_quant: Any) -> None:
    """A fake quant's scale and zero point from its (synced) observer, as its forward would
    compute them. Left alone while its observer is disabled: frozen qparams stay frozen."""
    if not bool(fake_quant.observer_enabled[0]):
        return
    scale, zero_point = fake_quant.calculate_qparams()
    for name, computed in (("scale", scale), ("zero_point", zero_point)):
        held: torch.Tensor = getattr(fake_quant, name)
        if held.shape != computed.shape:
            held.resize_(computed.shape)
        held.copy_(computed.to(held.device))


_MIN_MAX: Mapping[str, Reduction] = MappingProxyType({"min_val": "min", "max_val": "max"})
_OBSERVER_CONSTANTS = frozenset({"eps"})
_FAKE_QUANT_CONSTANTS = frozenset(
    {"scale", "zero_point", "fake_quant_enabled", "observer_enabled", "eps"}
)
_STATELESS = SyncRule(constant=frozenset({"eps", "scale", "zero_point"}))

#: class name -> rule, for each family's module. Statistics of a fake quant live in its
#: ``activation_post_process`` observer, which has its own row.
_ROWS: Mapping[str, SyncRule] = {
    "MinMaxObserver": SyncRule(reduce=_MIN_MAX, constant=_OBSERVER_CONSTANTS),
    "MovingAverageMinMaxObserver": SyncRule(reduce=_MIN_MAX, constant=_OBSERVER_CONSTANTS),
    "PerChannelMinMaxObserver": SyncRule(reduce=_MIN_MAX, constant=_OBSERVER_CONSTANTS),
    "MovingAveragePerChannelMinMaxObserver": SyncRule(
        reduce=_MIN_MAX, constant=_OBSERVER_CONSTANTS
    ),
    "HistogramObserver": SyncRule(histogram=True, constant=_OBSERVER_CONSTANTS),
    "PlaceholderObserver": _STATELESS,
    "NoopObserver": _STATELESS,
    "ReuseInputObserver": _STATELESS,
    "FixedQParamsObserver": _STATELESS,
    "FakeQuantize": SyncRule(constant=_FAKE_QUANT_CONSTANTS, refresh=refresh_fake_quant_qparams),
    # qparams by its observer's formula, which convert uses; the fused kernel's own
    # formula differs in the last bits (0.4 % for per-channel symmetric), and it recomputes
    # them from the same synced statistics before it next fake-quantizes
    "FusedMovingAvgObsFakeQuantize": SyncRule(
        constant=_FAKE_QUANT_CONSTANTS, refresh=refresh_fake_quant_qparams
    ),
    "FixedQParamsFakeQuantize": SyncRule(constant=_FAKE_QUANT_CONSTANTS),
}
_FAMILIES = {
    "torch.ao.quantization.observer": "observer",
    "torch.ao.quantization.fake_quantize": "fake_quantize",
    "torchao.quantization.pt2e.observer": "observer",
    "torchao.quantization.pt2e.fake_quantize": "fake_quantize",
}
_RULES: dict[type, SyncRule] = {}
_BASES: list[type] = []
_LOADED: set[str] = set()


def _load_table() -> None:
    """Rows for each family already imported: a model can hold no observer of a family
    nobody imported, so the sync never pays for importing torchao (about a second)."""
    for module_name, kind in _FAMILIES.items():
        module = sys.modules.get(module_name)
        if module is None or module_name in _LOADED:
            continue
        _LOADED.add(module_name)
        _BASES.append(module.ObserverBase if kind == "observer" else module.FakeQuantizeBase)
        for class_name, rule in _ROWS.items():
            cls = getattr(module, class_name, None)
            if isinstance(cls, type):
                _RULES.setdefault(cls, rule)


def register_sync_rule(cls: type[nn.Module], rule: SyncRule) -> None:
    """Teach :func:`qcore.distributed.sync_observers` a custom observer or fake-quant class
    (a row here wins over one inherited from a parent class)."""
    _load_table()
    _RULES[cls] = rule


def syncable(module: nn.Module) -> bool:
    """Whether ``module`` is an observer or fake quantize of either family (or registered)."""
    _load_table()
    return isinstance(module, tuple(_BASES)) or type(module) in _RULES


def rule_for(name: str, module: nn.Module) -> SyncRule:
    """The row for ``module`` (``name`` is its path in the model, for the error)."""
    _load_table()
    cls = type(module)
    rule = next((_RULES[base] for base in cls.__mro__ if base in _RULES), None)
    what = f"{name!r} ({cls.__module__}.{cls.__qualname__})"
    if rule is None:
        raise TypeError(
            f"qcore.distributed: no sync rule for observer {what}; describe how its "
            "statistics combine over ranks with qcore.distributed.register_sync_rule"
        )
    unknown = sorted(
        buffer for buffer, _ in module.named_buffers(recurse=False)
        if buffer not in rule.covers()
    )  # fmt: skip
    if unknown:
        raise TypeError(
            f"qcore.distributed: observer {what} holds state {unknown} that the sync rule "
            "it inherits does not cover; register a rule for its class with "
            "qcore.distributed.register_sync_rule"
        )
    return rule
