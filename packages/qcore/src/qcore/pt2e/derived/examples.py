"""A small model holding a derived pattern, built from the pattern itself, so that the
conformance kit can exercise every derived annotator with no example written by hand.

The tree is evaluated on a float input: a module element is instantiated (convolutions,
linears and norms with a few channels, anything else with the arguments of its row of
``qcore.fx.patterns.examples.OP_EXAMPLES``), a function or method is called on its inputs
and its row's arguments, and each ``MatchAllNode`` is a further model input.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn
from torch.ao.quantization.backend_config import ObservationType

from qcore.fx.patterns.examples import OP_EXAMPLES, NoExampleError, OpExample, example_row
from qcore.pt2e.derived.patterns import DerivedPattern, is_match_all
from qcore.pt2e.derived.sources import OPERATOR_METHODS

_CHANNELS = 4
_CONV: dict[int, type[nn.Module]] = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}
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


_BINARY = frozenset({"add", "sub", "mul", "div", "matmul", "floordiv", "truediv", "pow"})
_LISTS = frozenset({"cat", "concat", "concatenate", "stack", "hstack", "vstack"})
_RANK = re.compile(r"(_?[123]d)$")
_WEIGHTED = re.compile(r"conv(_transpose)?[123]d|linear")


def _name(op: Any) -> str:
    return op if isinstance(op, str) else str(getattr(op, "__name__", ""))


def _row(op: Any) -> OpExample:
    """``op``'s row of ``OP_EXAMPLES``, else the row of an op of its name, else of its name
    without the rank (``torch.max_pool2d`` reads ``F.max_pool2d``'s row,
    ``nn.ReflectionPad1d`` ``nn.ReflectionPad2d``'s)."""
    try:
        return example_row(op)
    except NoExampleError:
        name, module = _name(op), isinstance(op, type)
        kin = [(_name(k), r) for k, r in OP_EXAMPLES.items() if isinstance(k, type) == module]
        found = [r for n, r in kin if n == name] or [
            r for n, r in kin if _RANK.sub("", n) == _RANK.sub("", name)
        ]
        if not found:
            raise
        return found[0]


def _arguments(op: Any) -> tuple[Any, Mapping[str, Any]]:
    row = _row(op)
    if row.derived_args is not None:
        return row.derived_args, {}
    return row.args, row.kwargs


def _kind(head: Any) -> str:
    """How the example calls a pattern element: as a ``module``; ``weighted``, with the
    model's weight and bias; on its ``operands`` (a binary operator); on a ``list`` of its
    inputs; or, the rest, with the arguments of its ``row`` of ``OP_EXAMPLES``."""
    name = _name(head)
    if isinstance(head, type):
        return "module"
    if name in _LISTS:
        return "list"
    if isinstance(head, str):
        return "row"
    if _WEIGHTED.fullmatch(name):
        return "weighted"
    if head in OPERATOR_METHODS or name in _BINARY:
        return "operands"
    return "row"


def _function(op: Any) -> Any:
    return getattr(torch.Tensor, op) if isinstance(op, str) else op


def _call(op: Any, x: Tensor, rest: list[Tensor]) -> Tensor:
    """``op`` (a function, or a method by name) called on ``x`` (and ``rest``) with the
    arguments of its row."""
    args, kwargs = _arguments(op)
    args = args(x) if callable(args) else args
    return _function(op)(x, *rest, *args, **kwargs)  # type: ignore[no-any-return]


def _module(cls: type[nn.Module], last: int) -> nn.Module:
    name = cls.__name__
    if name.startswith(("Conv", "ConvTranspose")):
        return cls(_CHANNELS, _CHANNELS, 3, padding=1)
    if name == "Linear":
        return cls(_CHANNELS, _CHANNELS)
    if name.startswith(("BatchNorm", "InstanceNorm")):
        return cls(_CHANNELS)
    if name == "LayerNorm":
        return cls(last)
    if name == "GroupNorm":
        return cls(2, _CHANNELS)
    args, kwargs = _arguments(cls)
    return cls(*args, **kwargs)


class _PatternModel(nn.Module):
    """Evaluates the pattern tree; parameters for functional weighted calls."""

    def __init__(self, tree: Any, rank: str | None, shape: tuple[int, ...], producer: bool) -> None:
        super().__init__()
        self.tree = tree
        self.rank = rank
        self.last = shape[-1]
        self.layers = nn.ModuleList()
        #: a quantized op before the pattern, for ops that share (or reuse) its qparams
        self.producer = (
            (
                nn.Linear(_CHANNELS, _CHANNELS)
                if len(shape) == 2
                else _CONV[len(shape) - 2](_CHANNELS, _CHANNELS, 1)
            )
            if producer
            else None
        )
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
            self.layers.append(_module(head, self.last))
        elif _kind(head) == "row":
            _row(head)  # an op without a row fails here, as the example is built

    def forward(self, *inputs: Tensor) -> Tensor:
        layers = iter(self.layers)
        extra = iter(inputs[1:])

        def run(tree: Any, x: Tensor) -> Tensor:
            head, args = (tree[0], tree[1:]) if isinstance(tree, tuple) else (tree, ())
            values = [next(extra) if (not isinstance(a, tuple) and is_match_all(a)) else run(a, x)
                      for a in args] or [x]  # fmt: skip
            kind = _kind(head)
            if kind == "module":
                return next(layers)(*values[:1])  # type: ignore[no-any-return]
            if kind == "weighted":
                return head(values[0], self.weight, self.bias)  # type: ignore[no-any-return]
            if kind == "operands":
                operands = values if len(values) > 1 else [values[0], values[0]]
                return head(*operands)  # type: ignore[no-any-return]
            if kind == "list":
                listed = [values[0], *(values[1:] or values[:1])]
                return _function(head)(listed, 1)  # type: ignore[no-any-return]
            return _call(head, values[0], values[1:])

        if self.producer is None:
            return run(self.tree, inputs[0])
        # the producer's output escapes too, so no fusion of the producer with the pattern
        # takes the pattern's first op away
        first = self.producer(inputs[0])
        return run(self.tree, first), first  # type: ignore[return-value]


def _count_wildcards(tree: Any) -> int:
    if isinstance(tree, tuple):
        return sum(_count_wildcards(t) for t in tree)
    return 1 if is_match_all(tree) else 0


def example_for(pattern: DerivedPattern) -> tuple[nn.Module, tuple[Tensor, ...]]:
    """A model whose exported graph holds ``pattern``, and its inputs."""
    linear = "linear" in pattern.name
    rank = None if linear else _rank(pattern.tree)
    shape = (2, _CHANNELS) if linear else (2, _CHANNELS, *_SPATIAL.get(rank or "2d", (6, 6)))
    shares = pattern.observation == ObservationType.OUTPUT_SHARE_OBSERVER_WITH_INPUT
    model = _PatternModel(pattern.tree, rank, shape, producer=shares)
    generator = torch.Generator().manual_seed(0)
    inputs = tuple(torch.randn(shape, generator=generator)
                   for _ in range(1 + _count_wildcards(pattern.tree)))  # fmt: skip
    model.train(pattern.training_pattern)
    if not pattern.training_pattern:  # in-place methods (``resize_``) refuse tensors needing grad
        model.requires_grad_(False)
    return model, inputs
