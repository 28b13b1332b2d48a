"""Tiny models synthesized from FX backend patterns, for the conformance kit.

A pattern names ops, not a model. To push a pattern through ``prepare_fx``/``convert_fx``
we need a module whose traced graph contains exactly that pattern. Every op has one row in
``OP_ROWS``: the input ranks it accepts, how many tensor inputs it takes, and how to build
a block that calls it. Blocks are wired along the pattern's tree; any input a pattern
leaves open (``MatchAllNode``, the second operand of ``add``) becomes a model input.

Every dimension but the batch is ``WIDTH``, so channel-preserving ops (conv, bn, linear,
layer norm, LSTM) chain without per-pattern shape bookkeeping.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.ao.nn.intrinsic as nni
import torch.ao.nn.intrinsic.qat as nniqat
import torch.ao.nn.qat as nnqat
import torch.nn.functional as F
from torch import Tensor, nn
from torch.ao.quantization import default_embedding_qat_qconfig, default_qat_qconfig

from qcore.testing.patterns import PatternNode

WIDTH = 4
BATCH = 2
NUM_EMBEDDINGS = 10
ANY_RANK = (4, 3, 2, 5)
MAX_INPUTS = 3

Shape = tuple[int, ...]


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


@dataclass(frozen=True)
class OpRow:
    """How to put one op in a synthesized model."""

    build: Callable[[Any], nn.Module]  # the op -> a block calling it
    ranks: tuple[int, ...] = ANY_RANK  # accepted input ranks, preferred first
    arity: int = 1  # tensor inputs
    make_input: Callable[[Shape], Tensor] | None = None  # non-float inputs (indices)
    output: int | None = None  # element of a tuple output to pass on (RNNs)


def _module(*args: Any, ranks: tuple[int, ...] = ANY_RANK, **kwargs: Any) -> OpRow:
    return OpRow(lambda cls: cls(*args, **kwargs), ranks)


def _fused(*parts: Callable[[], Any], ranks: tuple[int, ...], arity: int = 1) -> OpRow:
    return OpRow(lambda cls: cls(*(p() for p in parts)), ranks, arity)


def _qat(*args: Any, ranks: tuple[int, ...], **kwargs: Any) -> OpRow:
    kwargs.setdefault("qconfig", default_qat_qconfig)

    def build(cls: Any) -> nn.Module:
        module: nn.Module = cls(*args, **kwargs)
        # torch's QAT linear-bn (and conv-bn) leave the bias as torch.empty: whatever the
        # memory held, NaN included, would make one pattern's model differ run to run
        bias = getattr(module, "bias", None)
        if isinstance(bias, nn.Parameter):
            with torch.no_grad():
                bias.uniform_(-0.5, 0.5)
        return module

    return OpRow(build, ranks)


def _function(
    call: Callable[..., Any], ranks: tuple[int, ...] = ANY_RANK, arity: int = 1, **params: Shape
) -> OpRow:
    return OpRow(lambda op: Call(lambda m, *xs: call(op, m, *xs), **params), ranks, arity)


def _unary(*args: Any, ranks: tuple[int, ...] = ANY_RANK, **kwargs: Any) -> OpRow:
    return _function(lambda op, m, x: op(x, *args, **kwargs), ranks)


def _method(*args: Any, ranks: tuple[int, ...] = ANY_RANK) -> OpRow:
    return OpRow(lambda name: Call(lambda m, x: getattr(x, name)(*args)), ranks)


def _indices(shape: Shape) -> Tensor:
    return torch.randint(0, NUM_EMBEDDINGS, shape[:2])


W = WIDTH
_BINARY = _function(lambda op, m, x, y: op(x, y), arity=2)
_LIST_BINARY = _function(lambda op, m, x, y: op([x, y], 1), arity=2)
_WEIGHTED = _function(
    lambda op, m, x: op(x, m.weight, m.bias), ranks=(2, 3, 4), weight=(W, W), bias=(W,)
)


def _conv_fn(dims: int, *settings: int) -> OpRow:
    """A functional conv with every setting spelled out: torch's native lowering reads
    stride/padding/... positionally and fails on a call that leaves them at defaults."""
    return _function(
        lambda op, m, x: op(x, m.weight, m.bias, *settings),
        ranks=(dims + 2,),
        weight=(W, W) + (1,) * dims,  # square channels: in/out order does not matter
        bias=(W,),
    )


def _conv_family(dims: int) -> dict[Any, OpRow]:
    conv, tconv = (getattr(nn, f"Conv{dims}d"), getattr(nn, f"ConvTranspose{dims}d"))
    bn = getattr(nn, f"BatchNorm{dims}d")
    rank = (dims + 2,)

    def part(cls: Any, *args: Any) -> Callable[[], Any]:
        return lambda: cls(*args)

    c, b, r = part(conv, W, W, 1), part(bn, W), part(nn.ReLU)
    rows: dict[Any, OpRow] = {
        conv: _module(W, W, 1, ranks=rank),
        tconv: _module(W, W, 1, ranks=rank),
        bn: _module(W, ranks=(2, 3) if dims == 1 else rank),
        # stride, padding, dilation, groups / stride, padding, output_padding, groups, dilation
        getattr(torch, f"conv{dims}d"): _conv_fn(dims, 1, 0, 1, 1),
        getattr(torch, f"conv_transpose{dims}d"): _conv_fn(dims, 1, 0, 0, 1, 1),
        getattr(nni, f"ConvReLU{dims}d"): _fused(c, r, ranks=rank),
        getattr(nni, f"ConvBn{dims}d"): _fused(c, b, ranks=rank),
        getattr(nni, f"ConvBnReLU{dims}d"): _fused(c, b, r, ranks=rank),
        getattr(nnqat, f"Conv{dims}d"): _qat(W, W, 1, ranks=rank),
        getattr(nniqat, f"ConvReLU{dims}d"): _qat(W, W, 1, ranks=rank),
        getattr(nniqat, f"ConvBn{dims}d"): _qat(W, W, 1, ranks=rank),
        getattr(nniqat, f"ConvBnReLU{dims}d"): _qat(W, W, 1, ranks=rank),
        getattr(nn, f"InstanceNorm{dims}d"): _module(W, ranks=rank),
        getattr(nn, f"AvgPool{dims}d"): _module(2, ranks=rank),
        getattr(nn, f"MaxPool{dims}d"): _module(2, ranks=rank),
        getattr(nn, f"AdaptiveAvgPool{dims}d"): _module(1, ranks=rank),
        getattr(F, f"max_pool{dims}d"): _unary(2, ranks=rank),
        getattr(F, f"avg_pool{dims}d"): _unary(2, ranks=rank),
        getattr(F, f"adaptive_avg_pool{dims}d"): _unary(1, ranks=rank),
    }
    if dims > 1:
        rows[getattr(nni, f"BNReLU{dims}d")] = _fused(b, r, ranks=rank)
    return rows


def _linear() -> Callable[[], Any]:
    return lambda: nn.Linear(W, W)


OP_ROWS: dict[Any, OpRow] = {
    **_conv_family(1),
    **_conv_family(2),
    **_conv_family(3),
    nn.Linear: _module(W, W, ranks=(2, 3, 4)),
    F.linear: _WEIGHTED,
    nnqat.Linear: _qat(W, W, ranks=(2, 3, 4)),
    nni.LinearReLU: _fused(_linear(), nn.ReLU, ranks=(2, 3, 4)),
    nni.LinearLeakyReLU: _fused(_linear(), nn.LeakyReLU, ranks=(2, 3, 4)),
    nni.LinearTanh: _fused(_linear(), nn.Tanh, ranks=(2, 3, 4)),
    nni.LinearBn1d: _fused(_linear(), lambda: nn.BatchNorm1d(W), ranks=(2,)),
    nniqat.LinearReLU: _qat(W, W, ranks=(2, 3, 4)),
    nniqat.LinearBn1d: _qat(W, W, ranks=(2,)),
    nni.ConvAdd2d: _fused(lambda: nn.Conv2d(W, W, 1), lambda: torch.add, ranks=(4,), arity=2),
    nni.ConvAddReLU2d: _fused(
        lambda: nn.Conv2d(W, W, 1), lambda: torch.add, nn.ReLU, ranks=(4,), arity=2
    ),
    # activations and other single-input modules
    **{
        cls: _module()
        for cls in (
            nn.ReLU,
            nn.ReLU6,
            nn.ELU,
            nn.LeakyReLU,
            nn.Hardswish,
            nn.Hardsigmoid,
            nn.Sigmoid,
            nn.Tanh,
            nn.Hardtanh,
            nn.SiLU,
            nn.GELU,
            nn.Mish,
            nn.PReLU,
            nn.Dropout,
            nn.Identity,
            nn.Flatten,
        )
    },
    nn.Softmax: _module(1),
    nn.LayerNorm: _module(W),
    nn.PixelShuffle: _module(2, ranks=(4,)),
    nn.PixelUnshuffle: _module(2, ranks=(4,)),
    nn.ConstantPad2d: _module(1, 0.0, ranks=(4, 3)),
    nn.Embedding: OpRow(lambda cls: cls(NUM_EMBEDDINGS, W), (2,), make_input=_indices),
    nn.EmbeddingBag: OpRow(lambda cls: cls(NUM_EMBEDDINGS, W), (2,), make_input=_indices),
    nnqat.Embedding: OpRow(
        lambda cls: cls(NUM_EMBEDDINGS, W, qconfig=default_embedding_qat_qconfig),
        (2,),
        make_input=_indices,
    ),
    nnqat.EmbeddingBag: OpRow(
        lambda cls: cls(NUM_EMBEDDINGS, W, qconfig=default_embedding_qat_qconfig),
        (2,),
        make_input=_indices,
    ),
    F.embedding: OpRow(
        lambda op: Call(lambda m, x: op(x, m.weight), weight=(NUM_EMBEDDINGS, W)),
        (2,),
        make_input=_indices,
    ),
    nn.LSTM: OpRow(lambda cls: cls(W, W), (3,), output=0),
    nn.GRU: OpRow(lambda cls: cls(W, W), (3,), output=0),
    nn.LSTMCell: OpRow(lambda cls: cls(W, W), (2,), output=0),
    nn.GRUCell: _module(W, W, ranks=(2,)),
    nn.RNNCell: _module(W, W, ranks=(2,)),
    # functions
    **{
        fn: _unary()
        for fn in (
            F.relu,
            torch.relu,
            F.relu6,
            F.elu,
            F.hardswish,
            F.hardsigmoid,
            torch.sigmoid,
            torch.tanh,
            F.silu,
            F.gelu,
            F.mish,
            F.leaky_relu,
            F.hardtanh,
            F.hardtanh_,
            F.leaky_relu_,
            F.instance_norm,
            torch.squeeze,
        )
    },
    F.dropout: _unary(training=False),
    F.interpolate: _unary(scale_factor=2.0, ranks=(4, 3)),
    F.pad: _unary((1, 1)),
    F.group_norm: _unary(2),
    F.layer_norm: _function(lambda op, m, x: op(x, (W,), m.weight, m.bias), weight=(W,), bias=(W,)),
    torch.clamp: _unary(-1.0, 1.0),
    torch.flatten: _unary(1),
    torch.mean: _unary(1),
    torch.narrow: _unary(1, 0, 2),
    torch.repeat_interleave: _unary(2, dim=1),
    torch.transpose: _unary(0, 1),
    torch.unsqueeze: _unary(0),
    torch.permute: _unary((1, 0), ranks=(2,)),
    torch.permute_copy: _unary((1, 0), ranks=(2,)),
    torch.pixel_shuffle: _unary(2, ranks=(4,)),
    torch.pixel_unshuffle: _unary(2, ranks=(4,)),
    operator.floordiv: _unary(2),
    **{
        op: _BINARY
        for op in (
            torch.add,
            operator.add,
            torch.sub,
            operator.sub,
            torch.mul,
            operator.mul,
            torch.div,
            operator.truediv,
        )
    },
    torch.matmul: _BINARY,
    torch.cat: _LIST_BINARY,
    torch.concat: _LIST_BINARY,
    torch.concatenate: _LIST_BINARY,
    torch.stack: _LIST_BINARY,
    # Tensor methods, as torch's patterns name them
    **{
        name: _method()
        for name in (
            "relu",
            "relu_",
            "sigmoid",
            "sigmoid_",
            "tanh",
            "tanh_",
            "hardsigmoid",
            "hardsigmoid_",
            "leaky_relu",
            "detach",
            "detach_",
            "contiguous",
            "squeeze",
            "squeeze_",
        )
    },
    "clamp": _method(-1.0, 1.0),
    "mean": _method(1),
    "unsqueeze": _method(0),
    "unsqueeze_": _method(0),
    "transpose": _method(0, 1),
    "permute": _method(1, 0, ranks=(2,)),
    "reshape": _method(-1),
    "view": _method(-1),
    "repeat": _method(1, 2, ranks=(2,)),
    "repeat_interleave": _method(2),
    "resize_": _method(BATCH, W, ranks=(2,)),
}


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


def row_for(op: Any, extra_rows: dict[Any, OpRow] | None = None) -> OpRow:
    """The row for ``op``; raise NotSynthesizableError naming it when there is none."""
    from qcore.fx.patterns.text import op_name

    rows = OP_ROWS if extra_rows is None else {**OP_ROWS, **extra_rows}
    try:
        return rows[op]
    except (KeyError, TypeError):  # TypeError: an unhashable op
        raise NotSynthesizableError(f"no synthesis row for op {op_name(op)}") from None


def _common_rank(rows: list[OpRow], ops: list[Any]) -> int:
    from qcore.fx.patterns.text import op_name

    for rank in rows[0].ranks:
        if all(rank in row.ranks for row in rows):
            return rank
    names = ", ".join(f"{op_name(op)} {row.ranks}" for op, row in zip(ops, rows, strict=True))
    raise NotSynthesizableError(f"no input rank accepted by every op: {names}")


def synthesize(
    tree: PatternNode, *, train: bool = False, extra_rows: dict[Any, OpRow] | None = None
) -> SynthCase:
    """A model whose traced graph is ``tree``, with example inputs; deterministic."""
    ops = tree.ops()
    rows = [row_for(op, extra_rows) for op in ops]
    shape: Shape = (BATCH,) + (WIDTH,) * (_common_rank(rows, ops) - 1)
    blocks: list[nn.Module] = []
    steps: list[_Step] = []
    inputs: list[Tensor] = []

    def new_input(row: OpRow) -> tuple[str, int]:
        inputs.append(row.make_input(shape) if row.make_input else torch.randn(shape))
        return ("input", len(inputs) - 1)

    def visit(node: PatternNode) -> tuple[str, int]:
        row = row_for(node.op, extra_rows)
        args = [visit(child) if child is not None else new_input(row) for child in node.args]
        args += [new_input(row) for _ in range(row.arity - len(args))]
        blocks.append(row.build(node.op))
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
