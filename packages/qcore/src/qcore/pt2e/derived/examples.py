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
from torch.ao.quantization.backend_config import ObservationType

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


#: Arguments of calls that need more than their input, by function, method or module
#: class name (a callable receives the input tensor).
_ARGS: dict[str, Any] = {
    "adaptive_avg_pool": (2,), "adaptive_max_pool": (2,), "max_pool": (2,), "avg_pool": (2,),
    "pad": lambda x: ((1, 1),), "clamp": (-1.0, 1.0), "clip": (-1.0, 1.0), "hardtanh": (),
    "permute": lambda x: (tuple(reversed(range(x.dim()))),),
    "permute_copy": lambda x: (tuple(reversed(range(x.dim()))),), "reshape": lambda x: ((x.shape[0], -1),),
    "view": lambda x: ((x.shape[0], -1),), "transpose": (0, 1), "unsqueeze": (1,),
    "softmax": {"dim": 1}, "log_softmax": {"dim": 1}, "chunk": (2, 1), "narrow": (1, 0, 2),
    "interpolate": {"scale_factor": 2.0}, "repeat": lambda x: ((1,) * x.dim(),),
    "expand": lambda x: (tuple(x.shape),), "flatten": (1,), "pixel_shuffle": (2,),
    "pixel_unshuffle": (2,), "channel_shuffle": (2,), "split": (2, 1), "tile": lambda x: ((1,) * x.dim(),),
    "group_norm": (2,), "unsqueeze_": (1,), "resize_": lambda x: (tuple(x.shape),), "repeat_interleave": (2, 1), "layer_norm": lambda x: (x.shape[-1:],),
}  # fmt: skip
_MODULE_ARGS: dict[str, Any] = {
    "AdaptiveAvgPool": (2,), "AdaptiveMaxPool": (2,), "MaxPool": (2,), "AvgPool": (2,),
    "ConstantPad": (1, 0.0), "ReflectionPad": (1,), "ReplicationPad": (1,), "ZeroPad": (1,),
    "Softmax": {"dim": 1}, "LogSoftmax": {"dim": 1}, "Upsample": {"scale_factor": 2.0},
    "PixelShuffle": (2,), "PixelUnshuffle": (2,), "ChannelShuffle": (2,),
}  # fmt: skip
_BINARY = frozenset({"add", "sub", "mul", "div", "matmul", "floordiv", "truediv", "pow"})
_LISTS = frozenset({"cat", "concat", "concatenate", "stack", "hstack", "vstack"})


def _lookup(table: dict[str, Any], name: str) -> Any:
    key = re.sub(r"(_?[123]d)$", "", name)
    return table.get(name, table.get(key, ()))


def _call(fn: Any, name: str, x: Tensor, rest: list[Tensor]) -> Tensor:
    """``fn`` called on ``x`` (and ``rest``) with the arguments its name needs."""
    if name in _LISTS:
        return fn([x, *(rest or [x])], 1)  # type: ignore[no-any-return]
    extra = _lookup(_ARGS, name)
    extra = extra(x) if callable(extra) else extra
    if isinstance(extra, dict):
        return fn(x, *rest, **extra)  # type: ignore[no-any-return]
    return fn(x, *rest, *extra)  # type: ignore[no-any-return]


def _module(cls: type[nn.Module], last: int) -> nn.Module:
    name = cls.__name__
    extra = _lookup(_MODULE_ARGS, name)
    if extra:
        return cls(**extra) if isinstance(extra, dict) else cls(*extra)
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
    return cls()


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
                return _call(getattr(torch.Tensor, head), head, values[0], values[1:])
            name = getattr(head, "__name__", "")
            if re.fullmatch(r"conv(_transpose)?[123]d|linear", name):
                return head(values[0], self.weight, self.bias)  # type: ignore[no-any-return]
            if head in OPERATOR_METHODS or name in _BINARY:
                operands = values if len(values) > 1 else [values[0], values[0]]
                return head(*operands)  # type: ignore[no-any-return]
            return _call(head, name, values[0], values[1:])

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
