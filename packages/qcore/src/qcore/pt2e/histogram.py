"""torchao's histogram observer, with its range search walked on Python floats
(:mod:`qcore.int8.histogram_search`): the same ranges as torchao's, bit for bit, in a
fraction of ``convert_pt2e``'s time.

The class keeps torchao's name: the distributed sync rules and the annotation records
read observers by class, and this one is torchao's in everything it stores.
"""

from __future__ import annotations

from torch import Tensor
from torchao.quantization.pt2e import HistogramObserver as TorchaoHistogramObserver

from qcore.int8.histogram_search import search_range

__all__ = ["HistogramObserver"]


class HistogramObserver(TorchaoHistogramObserver):  # type: ignore[misc]  # torchao is untyped
    """torchao's ``HistogramObserver``; only the range search is computed differently."""

    def _non_linear_param_search(self) -> tuple[Tensor, Tensor]:
        return search_range(self, super()._non_linear_param_search)
