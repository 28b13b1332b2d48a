"""Capped samples of the calibration inputs a layer sees, for per-layer decisions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

__all__ = ["InputRecorder"]

#: Values kept per recorder: enough output positions to compare weight forms, little memory.
MAX_KEPT_ELEMENTS = 1 << 20


@dataclass
class InputRecorder:
    """Keeps the first calibration inputs, up to :data:`MAX_KEPT_ELEMENTS` values.

    Use :meth:`pre_hook` as a forward pre-hook on a layer, or :meth:`hook` as a forward
    hook on the layer's input observer (whose output is its input, unchanged).
    """

    kept: list[Tensor] = field(default_factory=list)
    size: int = 0

    def keep(self, value: Any) -> None:
        if self.size >= MAX_KEPT_ELEMENTS or not isinstance(value, Tensor):
            return
        value = value.detach()
        room = MAX_KEPT_ELEMENTS - self.size
        if value.dim() > 1 and value.numel() > room:
            value = value[: max(1, room // max(1, value[0].numel()))]
        self.kept.append(value.clone())
        self.size += value.numel()

    def pre_hook(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        self.keep(args[0] if args else None)

    def hook(self, module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
        self.keep(output)

    def inputs(self) -> Tensor | None:
        """Everything kept, as one batch when shapes agree (else the first batch)."""
        return _batch(self.kept)

    def inputs_with(self, channels: int, channel_axis: int) -> Tensor | None:
        """The kept inputs with ``channels`` along ``channel_axis``: an observer shared by
        layers of different widths serves each its own."""
        return _batch([t for t in self.kept if t.dim() > 1 and t.shape[channel_axis] == channels])


def _batch(tensors: list[Tensor]) -> Tensor | None:
    if not tensors:
        return None
    same_shape = len({t.shape[1:] for t in tensors}) == 1
    return torch.cat(tensors) if same_shape else tensors[0]
