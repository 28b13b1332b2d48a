"""torch.ao's histogram observer, with its range search walked on Python floats
(:mod:`qcore.int8.histogram_search`), and a QConfigMapping that uses it.

torch's default FX mappings (``get_default_qconfig_mapping("onednn")``, ``"x86"``,
``"qnnpack"``, ``"fbgemm"``) observe activations with ``HistogramObserver``, whose range
search takes most of ``convert_fx``'s time on a small model. :class:`HistogramObserver`
finds the same range, bit for bit, faster; :func:`with_faster_histograms` puts it in place
of torch's in a mapping, keywords kept, everything else left as it is. The class keeps
torch's name: the distributed sync rules read observers by class name, and this one is
torch's in everything it stores.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor
from torch.ao.quantization import QConfig, QConfigMapping
from torch.ao.quantization.observer import HistogramObserver as TorchHistogramObserver

from qcore._torch_private import observer_constructor_parts
from qcore.int8.histogram_search import search_range

__all__ = ["HistogramObserver", "with_faster_histograms"]


class HistogramObserver(TorchHistogramObserver):
    """torch.ao's ``HistogramObserver``; only the range search is computed differently."""

    def _non_linear_param_search(self) -> tuple[Tensor, Tensor]:
        return search_range(self, super()._non_linear_param_search)


def _faster(ctr: Any) -> Any:
    """``ctr``, or this module's observer with the same keywords where ``ctr`` builds
    torch's ``HistogramObserver`` itself (a subclass of it may search differently)."""
    cls, keywords = observer_constructor_parts(ctr)
    if cls is not TorchHistogramObserver or getattr(ctr, "callable_args", None):
        return ctr
    return HistogramObserver.with_args(**keywords)


def _faster_qconfig(qconfig: Any, done: dict[int, Any]) -> Any:
    if not isinstance(qconfig, QConfig):
        return qconfig  # None (left in float)
    if id(qconfig) not in done:  # one qconfig object stays one: prepare compares them
        activation, weight = _faster(qconfig.activation), _faster(qconfig.weight)
        done[id(qconfig)] = qconfig._replace(activation=activation, weight=weight)
    return done[id(qconfig)]


def with_faster_histograms(mapping: QConfigMapping) -> QConfigMapping:
    """A copy of ``mapping`` whose qconfigs build :class:`HistogramObserver` where they
    built torch's (same keywords); ``mapping`` itself is left unchanged. A model prepared
    with either converts to the same model."""
    done: dict[int, Any] = {}
    faster = QConfigMapping().set_global(_faster_qconfig(mapping.global_qconfig, done))
    for object_type, qconfig in mapping.object_type_qconfigs.items():
        faster.set_object_type(object_type, _faster_qconfig(qconfig, done))
    for regex, qconfig in mapping.module_name_regex_qconfigs.items():
        faster.set_module_name_regex(regex, _faster_qconfig(qconfig, done))
    for name, qconfig in mapping.module_name_qconfigs.items():
        faster.set_module_name(name, _faster_qconfig(qconfig, done))
    orders = mapping.module_name_object_type_order_qconfigs
    for (name, object_type, index), qconfig in orders.items():
        faster.set_module_name_object_type_order(
            name, object_type, index, _faster_qconfig(qconfig, done)
        )
    return faster
