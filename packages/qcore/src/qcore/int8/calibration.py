"""Capped samples of the calibration inputs a layer sees, for per-layer decisions."""

from __future__ import annotations

from collections.abc import Sequence
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

    def inputs_shaped(self, shape: Sequence[int | None]) -> Tensor | None:
        """The kept inputs of ``shape`` (``None``: any size on that axis). An observer
        that layers share (a ``relu`` feeding a conv1d and, through a ``reshape`` that
        shares its qparams, a conv3d) sees every layer's input: each layer must get its
        own, and channel counts alone do not tell a conv1d's input from a conv3d's."""
        return _batch([t for t in self.kept if _fits(t, shape)])


def _fits(t: Tensor, shape: Sequence[int | None]) -> bool:
    return t.dim() == len(shape) and all(
        want is None or size == want for size, want in zip(t.shape, shape, strict=True)
    )


def _batch(tensors: list[Tensor]) -> Tensor | None:
    if not tensors:
        return None
    same_shape = len({t.shape[1:] for t in tensors}) == 1
    return torch.cat(tensors) if same_shape else tensors[0]
