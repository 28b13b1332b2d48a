"""Read a BackendPatternConfig's pattern as one tree, whichever format it was given in.

torch has two spellings: the simple format lists a chain in execution order
(``(Conv2d, BatchNorm2d, ReLU)``); the complex format nests it in reverse, root first, each
op followed by its arguments (``(ReLU, (BatchNorm2d, Conv2d))``, or
``(add, (BatchNorm2d, Conv2d), MatchAllNode)`` where ``MatchAllNode`` is any node). The
kit needs one shape for both: the op and its argument subtrees, ``None`` for "any node".
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from torch.ao.quantization.backend_config import BackendPatternConfig
from torch.ao.quantization.utils import MatchAllNode


@dataclass(frozen=True)
class PatternNode:
    """One op of a pattern and its matched arguments (``None``: any node, e.g. an input)."""

    op: Any
    args: tuple[PatternNode | None, ...] = ()

    def walk(self) -> Iterator[PatternNode]:
        """Nodes in execution order: arguments before the op that consumes them."""
        for arg in self.args:
            if arg is not None:
                yield from arg.walk()
        yield self

    def ops(self) -> list[Any]:
        return [node.op for node in self.walk()]


class MalformedPatternError(ValueError):
    """A pattern that is neither a valid simple nor a valid complex-format pattern."""


def raw_pattern(config: BackendPatternConfig) -> tuple[Any, bool]:
    """The pattern as declared and whether it is in the complex format."""
    spec = config.to_dict()
    if "pattern" in spec and "pattern_complex_format" in spec:
        raise MalformedPatternError("sets both a simple and a complex-format pattern")
    if "pattern" in spec:
        return spec["pattern"], False
    if "pattern_complex_format" in spec:
        return spec["pattern_complex_format"], True
    raise MalformedPatternError("has no pattern")


def _check_op(op: Any, where: str) -> None:
    if isinstance(op, tuple):
        raise MalformedPatternError(f"{where}: a nested tuple where an op belongs: {op!r}")
    if op is MatchAllNode:
        raise MalformedPatternError(f"{where}: MatchAllNode can only be an argument")
    if not (isinstance(op, str) or callable(op)):
        raise MalformedPatternError(
            f"{where}: {op!r} is not an op (module class, function or method name)"
        )


def _complex_tree(pattern: Any) -> PatternNode | None:
    if pattern is MatchAllNode:
        return None
    if not isinstance(pattern, tuple):
        _check_op(pattern, "complex-format pattern")
        return PatternNode(pattern)
    if not pattern:
        raise MalformedPatternError("complex-format pattern: an empty tuple")
    op, *args = pattern
    _check_op(op, "complex-format pattern")
    return PatternNode(op, tuple(_complex_tree(a) for a in args))


def pattern_tree(config: BackendPatternConfig) -> PatternNode:
    """The pattern of ``config`` as a tree; MalformedPatternError says what is wrong."""
    pattern, complex_format = raw_pattern(config)
    if complex_format:
        tree = _complex_tree(pattern)
        if tree is None:
            raise MalformedPatternError("complex-format pattern: the root is MatchAllNode")
        return tree
    chain = pattern if isinstance(pattern, tuple) else (pattern,)
    if not chain:
        raise MalformedPatternError("an empty pattern tuple")
    node: PatternNode | None = None
    for op in chain:
        _check_op(op, "simple pattern (a chain in execution order)")
        node = PatternNode(op, () if node is None else (node,))
    assert node is not None
    return node
