"""Small models holding each x86 pattern, for qcore's conformance kit (``example`` of
each annotator). Built from modules: the recipe recognises layers by their module."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from qinductor_x86.postop_table import POST_OPS

Example = tuple[nn.Module, tuple[torch.Tensor, ...]]
ExampleFn = Callable[[], Example]

#: Each post-op's module, by the post-op's name.
_UNARY: dict[str, Callable[[], nn.Module]] = {
    p.name: next(s for s in p.sources if isinstance(s, type)) for p in POST_OPS if p.sources
}


class _Chain(nn.Module):
    """``layer [→ bn] [→ + residual] [→ unary]``, the residual being the block's input."""

    def __init__(self, layer: nn.Module, bn: nn.Module | None, add: bool, unary: str | None):
        super().__init__()
        self.layer = layer
        self.bn = bn
        self.add = add
        self.unary = _UNARY[unary]() if unary else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.layer(x)
        if self.bn is not None:
            y = self.bn(y)
        if self.add:
            y = y + x
        if self.unary is not None:
            y = self.unary(y)
        return y  # type: ignore[no-any-return]  # nn.Module calls are untyped


def conv(add: bool = False, unary: str | None = None) -> ExampleFn:
    return lambda: (_Chain(nn.Conv2d(4, 4, 3, padding=1), None, add, unary), (_image(),))


def qat_conv_bn(add: bool = False, unary: str | None = None) -> ExampleFn:
    """In training mode (the kit trains QAT-only annotators' examples)."""
    return lambda: (
        _Chain(nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4), add, unary),
        (_image(),),
    )


def linear(add: bool = False, unary: str | None = None) -> ExampleFn:
    return lambda: (_Chain(nn.Linear(8, 8), None, add, unary), (torch.randn(3, 8),))


class _MatMul(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(self.proj(x), x.transpose(-2, -1))


def matmul() -> Example:
    return _MatMul(), (torch.randn(2, 3, 8),)


class _Passthrough(nn.Module):
    """conv → max_pool2d → (cat with a second conv) → avg / adaptive pool → flatten → fc:
    every int8-in/int8-out op after a quantized producer."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(4, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 4, 1)
        self.max = nn.MaxPool2d(2)
        self.avg = nn.AvgPool2d(2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> Any:
        y = torch.cat([self.max(self.conv1(x)), self.max(self.conv2(x))], dim=1)
        return self.fc(torch.flatten(self.pool(self.avg(y)), 1))


def passthrough() -> Example:
    return _Passthrough(), (_image(),)


def _image() -> torch.Tensor:
    return torch.randn(2, 4, 8, 8)
