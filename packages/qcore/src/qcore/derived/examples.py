"""A small model holding a derived pattern, built from the pattern itself, so that the
conformance kit can exercise every derived annotator with no example written by hand.

The tree is evaluated on a float input: a module element is instantiated (convolutions,
linears and norms with a few channels, anything else with no arguments), a function or
method is called on its arguments, and each ``MatchAllNode`` is a further model input.
"""

from __future__ import annotations

import re
from typing import Any

import torch
from torch import Tensor, nn

from qcore.derived.patterns import DerivedPattern, is_match_all
from qcore.derived.sources import _OPERATOR_METHODS

_CHANNELS = 4
_SPATIAL = {"1d": (12,), "2d": (6, 6), "3d": (4, 4, 4)}


def _rank(tree: Any) -> str | None:
    """The spatial rank the pattern's elements ask for ("1d", "2d", "3d"), if any."""
    for part in tree if isinstance(tree, tuple) else (tree,):
        if isinstance(part, tuple):
            found = _rank(part)
            if found:
                return found
            continue
        name = getattr(part, "__name__", "") if not isinstance(part, str) else part
        m = re.search(r"([123]d)$", str(name).lower())
        if m:
            return m.group(1)
    return None


def _module(cls: type[nn.Module], rank: str | None) -> nn.Module:
    name = cls.__name__
    if name.startswith(("Conv", "ConvTranspose")):
        return cls(_CHANNELS, _CHANNELS, 3, padding=1)
    if name == "Linear":
        return cls(_CHANNELS, _CHANNELS)
    if name.startswith(("BatchNorm", "InstanceNorm")):
        return cls(_CHANNELS)
    if name == "LayerNorm":
        return cls(_SPATIAL.get(rank or "2d", (6, 6))[-1] if rank else _CHANNELS)
    if name == "GroupNorm":
        return cls(2, _CHANNELS)
    return cls()


class _PatternModel(nn.Module):
    """Evaluates the pattern tree; parameters for functional weighted calls."""

    def __init__(self, tree: Any, rank: str | None) -> None:
        super().__init__()
        self.tree = tree
        self.rank = rank
        self.layers = nn.ModuleList()
        self._build(tree)
        self.weight = nn.Parameter(
            torch.randn(_CHANNELS, _CHANNELS, *([3] * len(_SPATIAL.get(rank or "", ())))) * 0.3
        )
        self.bias = nn.Parameter(torch.randn(_CHANNELS) * 0.1)

    def _build(self, tree: Any) -> None:
        head, args = (tree[0], tree[1:]) if isinstance(tree, tuple) else (tree, ())
        for arg in args:
            self._build(arg)
        if isinstance(head, type) and not is_match_all(head):
            self.layers.append(_module(head, self.rank))

    def forward(self, *inputs: Tensor) -> Tensor:
        layers = iter(self.layers)
        extra = iter(inputs[1:])

        def run(tree: Any, x: Tensor) -> Tensor:
            head, args = (tree[0], tree[1:]) if isinstance(tree, tuple) else (tree, ())
            values = [next(extra) if (not isinstance(a, tuple) and is_match_all(a)) else run(a, x)
                      for a in args] or [x]  # fmt: skip
            if isinstance(head, type):
                return next(layers)(*values[:1])  # type: ignore[no-any-return]
            if isinstance(head, str):
                return getattr(values[0], head)(*values[1:])  # type: ignore[no-any-return]
            name = getattr(head, "__name__", "")
            if re.fullmatch(r"conv(_transpose)?[123]d|linear", name):
                return head(values[0], self.weight, self.bias)  # type: ignore[no-any-return]
            if name == "layer_norm":
                return head(values[0], values[0].shape[-1:])  # type: ignore[no-any-return]
            if head in _OPERATOR_METHODS or name in {"add", "sub", "mul", "div", "matmul"}:
                operands = values if len(values) > 1 else [values[0], values[0]]
                return head(*operands)  # type: ignore[no-any-return]
            return head(*values)  # type: ignore[no-any-return]

        return run(self.tree, inputs[0])


def _count_wildcards(tree: Any) -> int:
    if isinstance(tree, tuple):
        return sum(_count_wildcards(t) for t in tree)
    return 1 if is_match_all(tree) else 0


def example_for(pattern: DerivedPattern) -> tuple[nn.Module, tuple[Tensor, ...]]:
    """A model whose exported graph holds ``pattern``, and its inputs."""
    linear = "linear" in pattern.name
    rank = None if linear else _rank(pattern.tree)
    model = _PatternModel(pattern.tree, rank)
    shape = (2, _CHANNELS) if linear else (2, _CHANNELS, *_SPATIAL.get(rank or "2d", (6, 6)))
    generator = torch.Generator().manual_seed(0)
    inputs = tuple(torch.randn(shape, generator=generator)
                   for _ in range(1 + _count_wildcards(pattern.tree)))  # fmt: skip
    model.train(pattern.qat_only)
    return model, inputs
