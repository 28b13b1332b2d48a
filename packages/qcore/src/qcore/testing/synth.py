"""Tiny models synthesized from FX backend patterns, for the conformance kit.

A pattern names ops, not a model. To push a pattern through ``prepare_fx``/``convert_fx``
we need a module whose traced graph contains exactly that pattern. Every op has one row in
:data:`qcore.fx.patterns.examples.OP_EXAMPLES`, the table the derived quantizers' examples
read too: the input ranks it accepts, how many tensor inputs it takes, and how to build a
block that calls it. Blocks are wired along the pattern's tree; any input a pattern leaves
open (``MatchAllNode``, the second operand of ``add``) becomes a model input.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from qcore.fx.patterns.examples import (
    BATCH,
    OP_EXAMPLES,
    WIDTH,
    NoExampleError,
    OpExample,
    Shape,
    example_row,
)
from qcore.testing.patterns import PatternNode

MAX_INPUTS = 3


class NotSynthesizableError(Exception):
    """No model can be built for a pattern (an op without a row, or no common shape)."""


class Call(nn.Module):
    """Calls a function or Tensor-method op with this block's own parameters.

    FX traces through this module (it is not a torch.nn leaf), so the graph holds the op
    itself plus ``get_attr`` nodes for the weights, as a hand-written functional model would.
    """

    def __init__(self, fn: Callable[..., Any], **params: Shape) -> None:
        super().__init__()
        self.fn = fn
        for name, shape in params.items():
            self.register_parameter(name, nn.Parameter(torch.randn(shape) * 0.5))

    def forward(self, *xs: Any) -> Any:
        return self.fn(self, *xs)


def block(op: Any, row: OpExample, shape: Shape | None = None) -> nn.Module:
    """A module calling ``op`` as ``row`` says, on inputs of ``shape`` (by default, of
    the row's preferred rank)."""
    if row.build is not None:
        return row.build(op)
    shape = shape or (BATCH,) + (WIDTH,) * (row.ranks[0] - 1)
    # evaluated here: FX traces the block's forward, where a shape is not a number
    args = row.args(torch.empty(shape)) if callable(row.args) else row.args
    kwargs = row.kwargs
    if isinstance(op, type):
        return op(*args, **kwargs)  # type: ignore[no-any-return]
    if isinstance(op, str):
        return Call(lambda m, x: getattr(x, op)(*args, **kwargs))
    call = row.call
    if call is not None:
        return Call(lambda m, *xs: call(op, m, *xs), **row.params)
    names = list(row.params)
    return Call(
        lambda m, *xs: op(*xs, *(getattr(m, n) for n in names), *args, **kwargs), **row.params
    )


@dataclass(frozen=True)
class _Step:
    block: int
    args: tuple[tuple[str, int], ...]  # ("input", i) or ("step", j)
    output: int | None


class SynthModel(nn.Module):
    """Runs blocks along a pattern's tree; subclasses fix the number of model inputs."""

    def __init__(self, blocks: list[nn.Module], steps: list[_Step]) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.steps = steps

    def run(self, *inputs: Tensor) -> Any:
        values: list[Any] = []
        for step in self.steps:
            args = [inputs[i] if kind == "input" else values[i] for kind, i in step.args]
            value = self.blocks[step.block](*args)
            values.append(value if step.output is None else value[step.output])
        return values[-1]


class _Synth1(SynthModel):
    def forward(self, x0: Tensor) -> Any:
        return self.run(x0)


class _Synth2(SynthModel):
    def forward(self, x0: Tensor, x1: Tensor) -> Any:
        return self.run(x0, x1)


class _Synth3(SynthModel):
    def forward(self, x0: Tensor, x1: Tensor, x2: Tensor) -> Any:
        return self.run(x0, x1, x2)


_BY_INPUTS: dict[int, type[SynthModel]] = {1: _Synth1, 2: _Synth2, 3: _Synth3}


@dataclass(frozen=True)
class SynthCase:
    """A float model holding one pattern, an example input, and its float output."""

    model: nn.Module
    example_inputs: tuple[Tensor, ...]


def row_for(op: Any, extra_rows: dict[Any, OpExample] | None = None) -> OpExample:
    """The row for ``op``; raise NotSynthesizableError naming it and the table to edit
    when there is none."""
    rows = OP_EXAMPLES if extra_rows is None else {**OP_EXAMPLES, **extra_rows}
    try:
        return example_row(op, rows)
    except NoExampleError as exc:
        raise NotSynthesizableError(str(exc)) from None


def _common_rank(rows: list[OpExample], ops: list[Any]) -> int:
    from qcore.fx.patterns.text import op_name

    for rank in rows[0].ranks:
        if all(rank in row.ranks for row in rows):
            return rank
    names = ", ".join(f"{op_name(op)} {row.ranks}" for op, row in zip(ops, rows, strict=True))
    raise NotSynthesizableError(f"no input rank accepted by every op: {names}")


def synthesize(
    tree: PatternNode, *, train: bool = False, extra_rows: dict[Any, OpExample] | None = None
) -> SynthCase:
    """A model whose traced graph is ``tree``, with example inputs; deterministic."""
    ops = tree.ops()
    rows = [row_for(op, extra_rows) for op in ops]
    shape: Shape = (BATCH,) + (WIDTH,) * (_common_rank(rows, ops) - 1)
    blocks: list[nn.Module] = []
    steps: list[_Step] = []
    inputs: list[Tensor] = []

    def new_input(row: OpExample) -> tuple[str, int]:
        inputs.append(row.make_input(shape) if row.make_input else torch.randn(shape))
        return ("input", len(inputs) - 1)

    def visit(node: PatternNode) -> tuple[str, int]:
        row = row_for(node.op, extra_rows)
        args = [visit(child) if child is not None else new_input(row) for child in node.args]
        args += [new_input(row) for _ in range(row.arity - len(args))]
        blocks.append(block(node.op, row, shape))
        steps.append(_Step(len(blocks) - 1, tuple(args), row.output))
        return ("step", len(steps) - 1)

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        visit(tree)
        if len(inputs) > MAX_INPUTS:
            raise NotSynthesizableError(f"pattern needs {len(inputs)} inputs, at most {MAX_INPUTS}")
        model = _BY_INPUTS[len(inputs)](blocks, steps)
        model.train(train)
        try:
            with torch.no_grad():
                model(*(x.clone() for x in inputs))
        except Exception as exc:  # any failure means the rows do not chain
            raise NotSynthesizableError(
                f"the float model for this pattern fails: {type(exc).__name__}: {exc}"
            ) from exc
    return SynthCase(model, tuple(inputs))
