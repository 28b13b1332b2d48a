"""How a small model calls each op a pattern can name: one row per op, :data:`OP_EXAMPLES`.

A pattern names ops, not a model, and two readers build models from it: the backend
conformance kit (``qcore.testing.synth``, FX-traced) and the PT2E quantizer derived from a
``BackendConfig`` (``qcore.pt2e.derived.examples``, exported). Both take an op's arguments from
its row here, so an op a new pattern brings in needs one row, and either reader that meets
an op without one names it and this table.

Every dimension but the batch is ``WIDTH``, so channel-preserving ops (conv, bn, linear,
layer norm, LSTM) chain without per-pattern shape bookkeeping.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.ao.nn.intrinsic as nni
import torch.ao.nn.intrinsic.qat as nniqat
import torch.ao.nn.qat as nnqat
import torch.nn.functional as F
from torch import Tensor, nn
from torch.ao.quantization import default_embedding_qat_qconfig, default_qat_qconfig

from qcore.fx.patterns.rows import Op

WIDTH = 4
BATCH = 2
NUM_EMBEDDINGS = 10
ANY_RANK = (4, 3, 2, 5)

Shape = tuple[int, ...]
#: An op's arguments after its tensor inputs, or a function of its first input giving them.
Args = tuple[Any, ...] | Callable[[Tensor], tuple[Any, ...]]
#: Where the error for an op without a row sends people.
WHERE = "qcore.fx.patterns.examples.OP_EXAMPLES (packages/qcore/src/qcore/fx/patterns/examples.py)"


class NoExampleError(LookupError):
    """An op no row of :data:`OP_EXAMPLES` covers."""


@dataclass(frozen=True, kw_only=True)
class OpExample:
    """How to call one op in a small model.

    ``args``/``kwargs``: a function's or method's arguments after its tensor inputs (and
    after ``params``), a module class's constructor arguments. The kit's FX model also
    reads ``ranks`` (accepted input ranks, preferred first), ``arity`` (tensor inputs),
    ``params`` (parameters a function takes after its inputs, by name and shape), ``call``
    (``call(op, block, *inputs)`` where the call is not op(inputs, params, args)),
    ``build`` (a module class made otherwise than ``op(*args, **kwargs)``), ``make_input``
    (non-float inputs) and ``output`` (the element of a tuple output passed on).

    ``derived_args``: the derived quantizer's example passes these instead of ``args`` and
    ``kwargs``. The two tables this one replaced disagreed on these ops; each kept its own
    so that no example changed when they merged."""

    args: Args = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    ranks: tuple[int, ...] = ANY_RANK
    arity: int = 1
    params: Mapping[str, Shape] = field(default_factory=dict)
    call: Callable[..., Any] | None = None
    build: Callable[[Any], nn.Module] | None = None
    make_input: Callable[[Shape], Tensor] | None = None
    output: int | None = None
    derived_args: Args | None = None


def example_row(op: Op, rows: Mapping[Any, OpExample] | None = None) -> OpExample:
    """``op``'s row; :class:`NoExampleError` naming the op and the table if it has none."""
    from qcore.fx.patterns.text import op_name

    try:
        return (OP_EXAMPLES if rows is None else rows)[op]
    except (KeyError, TypeError):  # TypeError: an unhashable op
        raise NoExampleError(f"no example for op {op_name(op)}: add its row to {WHERE}") from None


def _fused(*parts: Callable[[], Any], ranks: tuple[int, ...], arity: int = 1) -> OpExample:
    return OpExample(build=lambda cls: cls(*(p() for p in parts)), ranks=ranks, arity=arity)


def _qat(*args: Any, ranks: tuple[int, ...], **kwargs: Any) -> OpExample:
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

    return OpExample(build=build, ranks=ranks)


def _indices(shape: Shape) -> Tensor:
    return torch.randint(0, NUM_EMBEDDINGS, shape[:2])


def _reversed_dims(x: Tensor) -> tuple[Any, ...]:
    return (tuple(reversed(range(x.dim()))),)


def _batch_rows(x: Tensor) -> tuple[Any, ...]:
    return ((x.shape[0], -1),)


def _ones(x: Tensor) -> tuple[Any, ...]:
    return ((1,) * x.dim(),)


def _same_shape(x: Tensor) -> tuple[Any, ...]:
    return (tuple(x.shape),)


W = WIDTH
_PLAIN = OpExample()
_BINARY = OpExample(arity=2)
_LIST_BINARY = OpExample(call=lambda op, m, x, y: op([x, y], 1), arity=2)
_WEIGHTED = OpExample(ranks=(2, 3, 4), params={"weight": (W, W), "bias": (W,)})
_PADDED = OpExample(args=(1,), ranks=(4, 3))


def _conv_fn(dims: int, *settings: int) -> OpExample:
    """A functional conv with every setting spelled out: torch's native lowering reads
    stride/padding/... positionally and fails on a call that leaves them at defaults."""
    return OpExample(
        args=settings,
        ranks=(dims + 2,),
        params={"weight": (W, W) + (1,) * dims, "bias": (W,)},  # square: in/out order moot
    )


def _conv_family(dims: int) -> dict[Any, OpExample]:
    conv, tconv = (getattr(nn, f"Conv{dims}d"), getattr(nn, f"ConvTranspose{dims}d"))
    bn = getattr(nn, f"BatchNorm{dims}d")
    rank = (dims + 2,)

    def part(cls: Any, *args: Any) -> Callable[[], Any]:
        return lambda: cls(*args)

    c, b, r = part(conv, W, W, 1), part(bn, W), part(nn.ReLU)
    pool = OpExample(args=(2,), ranks=rank)
    adaptive = OpExample(args=(1,), ranks=rank, derived_args=(2,))
    rows: dict[Any, OpExample] = {
        conv: OpExample(args=(W, W, 1), ranks=rank),
        tconv: OpExample(args=(W, W, 1), ranks=rank),
        bn: OpExample(args=(W,), ranks=(2, 3) if dims == 1 else rank),
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
        getattr(nn, f"InstanceNorm{dims}d"): OpExample(args=(W,), ranks=rank),
        getattr(nn, f"AvgPool{dims}d"): pool,
        getattr(nn, f"MaxPool{dims}d"): pool,
        getattr(nn, f"AdaptiveAvgPool{dims}d"): adaptive,
        getattr(F, f"max_pool{dims}d"): pool,
        getattr(F, f"avg_pool{dims}d"): pool,
        getattr(F, f"adaptive_avg_pool{dims}d"): adaptive,
    }
    if dims > 1:
        rows[getattr(nni, f"BNReLU{dims}d")] = _fused(b, r, ranks=rank)
    return rows


def _linear() -> Callable[[], Any]:
    return lambda: nn.Linear(W, W)


def _embedding(**kwargs: Any) -> OpExample:
    return OpExample(args=(NUM_EMBEDDINGS, W), kwargs=kwargs, ranks=(2,), make_input=_indices)


_EMBEDDING_QAT = {"qconfig": default_embedding_qat_qconfig}

#: One row per op, for the conformance kit and the derived quantizers alike.
OP_EXAMPLES: dict[Any, OpExample] = {
    **_conv_family(1),
    **_conv_family(2),
    **_conv_family(3),
    nn.Linear: OpExample(args=(W, W), ranks=(2, 3, 4)),
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
        cls: _PLAIN
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
    nn.Softmax: OpExample(args=(1,)),
    nn.LogSoftmax: OpExample(kwargs={"dim": 1}),
    nn.LayerNorm: OpExample(args=(W,)),
    nn.PixelShuffle: OpExample(args=(2,), ranks=(4,)),
    nn.PixelUnshuffle: OpExample(args=(2,), ranks=(4,)),
    nn.ChannelShuffle: OpExample(args=(2,)),
    nn.AdaptiveMaxPool2d: OpExample(args=(2,), ranks=(4,)),
    nn.Upsample: OpExample(kwargs={"scale_factor": 2.0}, ranks=(4, 3)),
    nn.ConstantPad2d: OpExample(args=(1, 0.0), ranks=(4, 3)),
    nn.ReflectionPad2d: _PADDED,
    nn.ReplicationPad2d: _PADDED,
    nn.ZeroPad2d: _PADDED,
    nn.Embedding: _embedding(),
    nn.EmbeddingBag: _embedding(),
    nnqat.Embedding: _embedding(**_EMBEDDING_QAT),
    nnqat.EmbeddingBag: _embedding(**_EMBEDDING_QAT),
    F.embedding: OpExample(ranks=(2,), params={"weight": (NUM_EMBEDDINGS, W)}, make_input=_indices),
    nn.LSTM: OpExample(args=(W, W), ranks=(3,), output=0),
    nn.GRU: OpExample(args=(W, W), ranks=(3,), output=0),
    nn.LSTMCell: OpExample(args=(W, W), ranks=(2,), output=0),
    nn.GRUCell: OpExample(args=(W, W), ranks=(2,)),
    nn.RNNCell: OpExample(args=(W, W), ranks=(2,)),
    # functions
    **{
        fn: _PLAIN
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
    F.dropout: OpExample(kwargs={"training": False}, derived_args=()),
    F.interpolate: OpExample(kwargs={"scale_factor": 2.0}, ranks=(4, 3)),
    F.pad: OpExample(args=((1, 1),)),
    F.group_norm: OpExample(args=(2,)),
    F.layer_norm: OpExample(
        call=lambda op, m, x: op(x, (W,), m.weight, m.bias),
        params={"weight": (W,), "bias": (W,)},
        derived_args=lambda x: (x.shape[-1:],),
    ),
    F.softmax: OpExample(kwargs={"dim": 1}),
    F.log_softmax: OpExample(kwargs={"dim": 1}),
    F.adaptive_max_pool2d: OpExample(args=(2,), ranks=(4,)),
    torch.channel_shuffle: OpExample(args=(2,)),
    torch.clamp: OpExample(args=(-1.0, 1.0)),
    torch.clip: OpExample(args=(-1.0, 1.0)),
    torch.flatten: OpExample(args=(1,)),
    torch.mean: OpExample(args=(1,), derived_args=()),
    torch.narrow: OpExample(args=(1, 0, 2)),
    torch.chunk: OpExample(args=(2, 1)),
    torch.split: OpExample(args=(2, 1)),
    torch.tile: OpExample(args=_ones),
    torch.repeat_interleave: OpExample(args=(2,), kwargs={"dim": 1}, derived_args=(2, 1)),
    torch.transpose: OpExample(args=(0, 1)),
    torch.unsqueeze: OpExample(args=(0,), derived_args=(1,)),
    torch.permute: OpExample(args=_reversed_dims, ranks=(2,)),
    torch.permute_copy: OpExample(args=_reversed_dims, ranks=(2,)),
    torch.pixel_shuffle: OpExample(args=(2,), ranks=(4,)),
    torch.pixel_unshuffle: OpExample(args=(2,), ranks=(4,)),
    operator.floordiv: OpExample(args=(2,)),
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
        name: _PLAIN
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
            "size",
        )
    },
    "clamp": OpExample(args=(-1.0, 1.0)),
    "mean": OpExample(args=(1,), derived_args=()),
    "unsqueeze": OpExample(args=(0,), derived_args=(1,)),
    "unsqueeze_": OpExample(args=(0,), derived_args=(1,)),
    "transpose": OpExample(args=(0, 1)),
    "permute": OpExample(args=(1, 0), ranks=(2,), derived_args=_reversed_dims),
    "reshape": OpExample(args=(-1,), derived_args=_batch_rows),
    "view": OpExample(args=(-1,), derived_args=_batch_rows),
    "expand": OpExample(args=_same_shape),
    "repeat": OpExample(args=(1, 2), ranks=(2,), derived_args=_ones),
    "repeat_interleave": OpExample(args=(2,), derived_args=(2, 1)),
    "resize_": OpExample(args=(BATCH, W), ranks=(2,), derived_args=_same_shape),
}
