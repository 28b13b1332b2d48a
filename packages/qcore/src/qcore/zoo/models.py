"""A small zoo of FX-traceable float models for end-to-end quantization tests.

Two kinds of case:

* *real* models shaped like the networks people quantize (a ResNet block stack, a
  MobileNet-style inverted-residual net, a transformer block, LSTM/GRU sequence models,
  a functional-op model with scalar math), and
* *family* models, one per op family a backend declares (conv 1d/2d/3d with bn/relu
  fusions, conv-add-relu on either side, linear eltwise fusions, binary ops with tensors
  and scalars, cat, layernorm, embedding, rnn, share-qparams ops, ...).

Every case is deterministic: building it seeds a private RNG, so the weights, the batch
norm statistics and the inputs are the same in every process, and building one case never
disturbs the caller's global RNG. Everything is sized to run in milliseconds on a CPU.

Batch norms get non-trivial statistics: with the identity statistics a freshly built
``BatchNorm`` has, conv-bn folding would be a no-op and a broken fuser would go unnoticed.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from qcore.metrics import sqnr

Inputs = tuple[Tensor, ...]

__all__ = [
    "ModelCase",
    "all_cases",
    "case",
    "family_cases",
    "functional_keyword_cases",
    "mixed_layer_cases",
    "real_cases",
    "sqnr",
]


@dataclass(frozen=True)
class ModelCase:
    """One model of the zoo: how to build it, how to make its inputs, what it covers.

    ``build`` and ``make_inputs`` take no global state: call :meth:`model` and
    :meth:`inputs` for seeded, reproducible instances.
    """

    name: str
    build: Callable[[], nn.Module]
    make_inputs: Callable[[], Inputs]
    families: frozenset[str] = field(default_factory=frozenset)
    seed: int = 0

    def model(self) -> nn.Module:
        """A fresh float model in eval mode, with seeded weights."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            module = self.build()
            _randomize_batch_norms(module)
        return module.eval()

    def inputs(self, batch: int = 0) -> Inputs:
        """Input batch number ``batch``; batch 0 is the example input used for tracing."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(1_000 + 7919 * self.seed + batch)
            return self.make_inputs()

    def calibration_batches(self, count: int = 4) -> list[Inputs]:
        """The example batch and ``count - 1`` more from the same distribution.

        The example batch is included so that an SQNR measured on it reflects rounding,
        not the clipping of values that a small calibration set happened not to reach.
        """
        return [self.inputs(batch) for batch in range(count)]


def train_toward_float(
    prepared: nn.Module, float_model: nn.Module, batches: Iterable[Inputs], lr: float = 1e-3
) -> None:
    """A few FX QAT steps as the flow tests take them: batch-norm statistics frozen
    (they were calibrated already), SGD on the MSE to the float model's outputs."""
    from torch.ao.nn.intrinsic.qat import freeze_bn_stats

    prepared.apply(freeze_bn_stats)
    optimizer = torch.optim.SGD(prepared.parameters(), lr=lr)
    for batch in batches:
        with torch.no_grad():
            target = float_model(*batch)
        optimizer.zero_grad()
        loss: Tensor = F.mse_loss(prepared(*batch), target)
        torch.autograd.backward(loss)
        optimizer.step()


def _randomize_batch_norms(module: nn.Module) -> None:
    for child in module.modules():
        if isinstance(child, nn.modules.batchnorm._BatchNorm):
            assert child.running_mean is not None and child.running_var is not None
            n = child.num_features
            child.running_mean.copy_(torch.randn(n) * 0.1)
            child.running_var.copy_(torch.rand(n) * 0.5 + 0.75)
            with torch.no_grad():
                child.weight.copy_(torch.rand(n) * 0.5 + 0.75)
                child.bias.copy_(torch.randn(n) * 0.1)


# --------------------------------------------------------------------------- real models


class _BasicBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.relu2 = nn.ReLU()

    def forward(self, x: Tensor) -> Tensor:
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        result: Tensor = self.relu2(out + x)
        return result


class TinyResNet(nn.Module):
    """Stem conv-bn-relu, two residual basic blocks, max-pool, global pool, classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU()
        )
        self.pool = nn.MaxPool2d(2)
        self.layer1 = _BasicBlock(8)
        self.layer2 = _BasicBlock(8)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x: Tensor) -> Tensor:
        x = self.pool(self.stem(x))
        x = self.layer2(self.layer1(x))
        logits: Tensor = self.fc(torch.flatten(self.avgpool(x), 1))
        return logits


class _InvertedResidual(nn.Module):
    def __init__(self, channels: int, expand: int) -> None:
        super().__init__()
        hidden = channels * expand
        self.expand = nn.Sequential(
            nn.Conv2d(channels, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6()
        )
        self.depthwise = nn.Sequential(
            nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden, bias=False),
            nn.BatchNorm2d(hidden),
            nn.Hardswish(),
        )
        self.project = nn.Sequential(
            nn.Conv2d(hidden, channels, 1, bias=False), nn.BatchNorm2d(channels)
        )

    def forward(self, x: Tensor) -> Tensor:
        residual: Tensor = self.project(self.depthwise(self.expand(x)))
        return x + residual


class TinyMobileNet(nn.Module):
    """Conv-bn-relu6 stem, inverted residuals with depthwise conv and hardswish, pool, fc."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU6()
        )
        self.block1 = _InvertedResidual(8, 2)
        self.block2 = _InvertedResidual(8, 2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.classifier = nn.Linear(8, 10)

    def forward(self, x: Tensor) -> Tensor:
        x = self.block2(self.block1(self.stem(x)))
        logits: Tensor = self.classifier(self.flatten(self.pool(x)))
        return logits


class TransformerBlock(nn.Module):
    """Pre-norm self-attention and a ReLU feed-forward, each with a residual add."""

    def __init__(self, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.ff1 = nn.Linear(dim, 2 * dim)
        self.ff_act = nn.ReLU()
        self.ff2 = nn.Linear(2 * dim, dim)

    def forward(self, x: Tensor) -> Tensor:
        batch, seq, dim = x.shape
        qkv = self.qkv(self.norm1(x)).reshape(batch, seq, 3, self.heads, self.head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        scores = torch.matmul(q, k.transpose(-2, -1)) * (self.head_dim**-0.5)
        attn = torch.matmul(F.softmax(scores, dim=-1), v)
        x = x + self.proj(attn.transpose(1, 2).reshape(batch, seq, dim))
        ff: Tensor = self.ff2(self.ff_act(self.ff1(self.norm2(x))))
        return x + ff


class SequenceRNN(nn.Module):
    """A one-layer LSTM or GRU over a sequence, then a linear head on its outputs."""

    def __init__(self, cell: type[nn.LSTM] | type[nn.GRU]) -> None:
        super().__init__()
        self.rnn = cell(input_size=8, hidden_size=16, batch_first=True)
        self.head = nn.Linear(16, 4)

    def forward(self, x: Tensor) -> Tensor:
        out, _ = self.rnn(x)
        result: Tensor = self.head(out)
        return result


class FunctionalOps(nn.Module):
    """Two linear branches joined by tensor add/mul, scalar add/mul/sub, relu and cat."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)
        self.out = nn.Linear(16, 4)

    def forward(self, x: Tensor) -> Tensor:
        a, b = self.a(x), self.b(x)
        s = torch.add(a, b)
        p = torch.mul(a, b) * 0.5
        s = F.relu(s + 1.0)
        p = p - 0.25
        result: Tensor = self.out(torch.cat([s, p], dim=1))
        return result


class FunctionalKeywords(nn.Module):
    """Functional convolutions and a linear called the way people write them: keyword
    arguments (``padding=1``, ``bias=``, ``weight=``), defaults left out, ``'same'``.

    torch's FX lowering reads these calls positionally; ``qcore.fx`` normalizes them.
    """

    def __init__(self) -> None:
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(8, 3, 3, 3) * 0.3)
        self.b1 = nn.Parameter(torch.randn(8) * 0.1)
        self.w2 = nn.Parameter(torch.randn(8, 8, 3, 3) * 0.2)
        self.w3 = nn.Parameter(torch.randn(8, 8, 3) * 0.2)
        self.w4 = nn.Parameter(torch.randn(4, 8, 1, 1, 1) * 0.3)
        self.w5 = nn.Parameter(torch.randn(10, 64) * 0.2)
        self.b5 = nn.Parameter(torch.randn(10) * 0.1)

    def forward(self, x: Tensor) -> Tensor:
        y = F.relu(F.conv2d(x, self.w1, self.b1, padding=1))
        y = F.relu(F.conv2d(y, weight=self.w2, stride=2, padding=1))
        z = F.relu(F.conv1d(y.flatten(2), self.w3, padding="same", dilation=1))
        v = F.conv3d(z.reshape(z.shape[0], 8, 4, 2, 2), self.w4, bias=None)
        out: Tensor = F.linear(v.flatten(1), weight=self.w5, bias=self.b5)
        return out


class MixedLayers(nn.Module):
    """Layers of every kind in one small net, as a held-out model mixes them: ``F.conv2d``
    on a weight parameter with keyword padding, ``nn.Conv1d`` and ``nn.ConvTranspose1d``
    reading a quantized tensor (a mean), ``nn.Conv3d`` on a second, volume input,
    hardswish, ``cat``, ``nn.ConvTranspose2d``, a scalar ``mul`` and ``add``, sigmoid
    gates and means.

    Each op here is alone in the zoo's other models; together they put a scalar op after
    a float one, a float 1-D convolution after a quantized op, and a float op and a float
    3-D convolution (through a mean) before ``cat``: where the ExecuTorch backend keeps
    layers in float, FX shares observers across them in ways a single-op model never
    shows."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 3, 3, 3) * 0.3)
        self.b = nn.Parameter(torch.randn(8) * 0.1)
        self.conv1d = nn.Conv1d(8, 8, 3, padding=1)
        self.up1d = nn.ConvTranspose1d(8, 8, 3, padding=1)
        self.conv3d = nn.Conv3d(2, 8, 3, padding=1)
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.head = nn.Conv2d(8, 4, 1)

    def forward(self, x: Tensor, volume: Tensor) -> Tensor:
        n = x.shape[0]
        v = self.conv3d(volume).mean(2)
        y = F.relu(F.conv2d(x, self.w, self.b, padding=1))
        rows = y.mean(3)
        gate = torch.sigmoid(self.conv1d(rows) + self.up1d(rows))
        y = y * gate.reshape(n, 8, 8, 1)
        z = F.hardswish(self.up(torch.cat([y, v], dim=1)))
        z = z * 0.5 + 1.0
        z = z * torch.sigmoid(z.mean((2, 3), keepdim=True))
        out: Tensor = self.head(z).mean((2, 3))
        return out


# ------------------------------------------------------------------------- family models


_CONV = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}
_BN = {1: nn.BatchNorm1d, 2: nn.BatchNorm2d, 3: nn.BatchNorm3d}
_SPATIAL = {1: (16,), 2: (8, 8), 3: (4, 6, 6)}


def _chain(*layers: nn.Module | None) -> nn.Sequential:
    """The present layers back to back: an ``Identity`` between two would block fusion."""
    return nn.Sequential(*(layer for layer in layers if layer is not None))


def conv_block(dim: int, bn: bool, act: nn.Module | None) -> nn.Sequential:
    """``conv{dim}d``, optionally followed by batch norm and an activation module."""
    return _chain(_CONV[dim](3, 8, 3, padding=1), _BN[dim](8) if bn else None, act)


class ConvAdd(nn.Module):
    """``conv(-bn)`` added to another tensor, conv on the ``left`` or right of the add."""

    def __init__(
        self, dim: int, bn: bool, left: bool, relu: bool, add: Callable[[Tensor, Tensor], Tensor]
    ) -> None:
        super().__init__()
        self.conv = _CONV[dim](3, 8, 3, padding=1)
        self.bn = _BN[dim](8) if bn else None
        self.other = _CONV[dim](3, 8, 1)
        self.relu = nn.ReLU() if relu else None
        self.left = left
        self.add = add

    def forward(self, x: Tensor) -> Tensor:
        y = self.conv(x)
        if self.bn is not None:
            y = self.bn(y)
        other = self.other(x)
        out = self.add(y, other) if self.left else self.add(other, y)
        return self.relu(out) if self.relu is not None else out


def linear_block(act: nn.Module | None, bn: bool = False) -> nn.Sequential:
    """``linear``, optionally followed by ``BatchNorm1d`` and an activation module."""
    return _chain(nn.Linear(16, 12), nn.BatchNorm1d(12) if bn else None, act)


class BinaryOps(nn.Module):
    """Quantized producers feeding ``op`` with a tensor or a scalar, optionally then relu."""

    def __init__(
        self, op: Callable[[Tensor, Tensor | float], Tensor], scalar: bool, relu: str | None
    ) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)
        self.op = op
        self.scalar = scalar
        self.relu_kind = relu
        self.relu = nn.ReLU()
        self.out = nn.Linear(8, 4)

    def forward(self, x: Tensor) -> Tensor:
        y = self.op(self.a(x), 0.5) if self.scalar else self.op(self.a(x), self.b(x))
        if self.relu_kind == "module":
            y = self.relu(y)
        elif self.relu_kind == "functional":
            y = F.relu(y)
        elif self.relu_kind == "torch":
            y = torch.relu(y)
        out: Tensor = self.out(y)
        return out


class Concat(nn.Module):
    """Two quantized branches joined by ``torch.cat`` (or its aliases)."""

    def __init__(self, cat: Callable[..., Tensor]) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 4, 3, padding=1)
        self.b = nn.Conv2d(3, 4, 1)
        self.cat = cat
        self.out = nn.Conv2d(8, 4, 1)

    def forward(self, x: Tensor) -> Tensor:
        out: Tensor = self.out(self.cat([self.a(x), self.b(x)], dim=1))
        return out


class LayerNormModel(nn.Module):
    """Linear, then layer norm as a module and as ``F.layer_norm``, then linear."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 16)
        self.norm = nn.LayerNorm(16)
        self.weight = nn.Parameter(torch.rand(16) + 0.5)
        self.bias = nn.Parameter(torch.randn(16) * 0.1)
        self.fc2 = nn.Linear(16, 8)

    def forward(self, x: Tensor) -> Tensor:
        x = self.norm(self.fc1(x))
        out: Tensor = self.fc2(F.layer_norm(x, (16,), self.weight, self.bias))
        return out


class EmbeddingModel(nn.Module):
    """``nn.Embedding`` lookup summed over the sequence."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(50, 16)

    def forward(self, indices: Tensor) -> Tensor:
        out: Tensor = self.embedding(indices).sum(dim=1)
        return out


class EmbeddingBagModel(nn.Module):
    """``nn.EmbeddingBag`` (mean mode) over fixed-length bags."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.EmbeddingBag(50, 16, mode="mean")

    def forward(self, indices: Tensor) -> Tensor:
        out: Tensor = self.embedding(indices)
        return out


class ShareQParamsOps(nn.Module):
    """A conv feeding the ops whose output reuses the input's quantization parameters."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.maxpool = nn.MaxPool2d(2)
        self.pad = nn.ConstantPad2d(1, 0.0)
        self.elu = nn.ELU()
        self.pool = nn.AdaptiveAvgPool2d(2)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(32, 8)

    def forward(self, x: Tensor) -> Tensor:
        x = self.maxpool(self.conv(x))
        x = F.max_pool2d(self.pad(x), 2)
        x = torch.clamp(self.elu(x), -1.0, 4.0)
        x = F.adaptive_avg_pool2d(F.pad(x, (1, 1, 1, 1)), 4)
        x = self.pool(x).permute(0, 1, 3, 2).reshape(x.shape[0], -1, 2, 2)
        x = torch.flatten(x, 1).unsqueeze(1).squeeze(1)
        out: Tensor = self.fc(F.leaky_relu(x.view(-1, 32), 0.1))
        return out


class ConvTransposeModel(nn.Module):
    """A conv, then a strided ``ConvTranspose2d`` upsampling (decoder style)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)

    def forward(self, x: Tensor) -> Tensor:
        out: Tensor = self.up(self.conv(x))
        return out


class ConvClamp(nn.Module):
    """``Conv2d`` followed by a clamping activation (ReLU6 or Hardtanh)."""

    def __init__(self, act: nn.Module) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.act = act

    def forward(self, x: Tensor) -> Tensor:
        out: Tensor = self.act(self.conv(x))
        return out


# ------------------------------------------------------------------------------ registry


def _image(*spatial: int, channels: int = 3, batch: int = 4) -> Callable[[], Inputs]:
    return lambda: (torch.randn(batch, channels, *spatial),)


def _features(width: int, batch: int = 16) -> Callable[[], Inputs]:
    return lambda: (torch.randn(batch, width),)


def _sequence(batch: int, length: int, width: int) -> Callable[[], Inputs]:
    return lambda: (torch.randn(batch, length, width),)


def _indices(shape: tuple[int, ...], high: int = 50) -> Callable[[], Inputs]:
    return lambda: (torch.randint(0, high, shape),)


def _real() -> list[ModelCase]:
    return [
        ModelCase("resnet", TinyResNet, _image(16, 16), frozenset({"conv2d", "bn", "add"})),
        ModelCase("mobilenet", TinyMobileNet, _image(16, 16), frozenset({"conv2d", "hardswish"})),
        ModelCase(
            "transformer",
            TransformerBlock,
            _sequence(2, 6, 16),
            frozenset({"linear", "layernorm", "softmax", "matmul"}),
        ),
        ModelCase("lstm", partial(SequenceRNN, nn.LSTM), _sequence(2, 5, 8), frozenset({"rnn"})),
        ModelCase("gru", partial(SequenceRNN, nn.GRU), _sequence(2, 5, 8), frozenset({"rnn"})),
        ModelCase("functional", FunctionalOps, _features(8), frozenset({"binary", "cat"})),
    ]


def _conv_block_case(dim: int, bn: bool, relu: bool) -> nn.Module:
    return conv_block(dim, bn, nn.ReLU() if relu else None)


def _linear_block_case(act: Callable[[], nn.Module | None]) -> nn.Module:
    return linear_block(act())


def _conv_cases() -> Iterable[ModelCase]:
    for dim in (1, 2, 3):
        for bn in (False, True):
            for relu in (False, True):
                suffix = ("_bn" if bn else "") + ("_relu" if relu else "")
                yield ModelCase(
                    f"conv{dim}d{suffix}",
                    partial(_conv_block_case, dim, bn, relu),
                    _image(*_SPATIAL[dim], batch=2),
                    frozenset({f"conv{dim}d", "conv"} | ({"bn"} if bn else set())),
                )


def _conv_add_cases() -> Iterable[ModelCase]:
    adds: dict[str, Callable[[Tensor, Tensor], Tensor]] = {
        "torch_add": torch.add,
        "operator_add": operator.add,
    }
    for add_name, add in adds.items():
        for bn in (False, True):
            for left in (True, False):
                for relu in (False, True):
                    name = (
                        f"conv{'_bn' if bn else ''}_{add_name}{'_relu' if relu else ''}"
                        f"_{'left' if left else 'right'}"
                    )
                    yield ModelCase(
                        name,
                        partial(ConvAdd, 2, bn, left, relu, add),
                        _image(8, 8, batch=2),
                        frozenset({"conv_add"}),
                    )


def _linear_cases() -> Iterable[ModelCase]:
    acts: dict[str, Callable[[], nn.Module | None]] = {
        "linear": lambda: None,
        "linear_relu": nn.ReLU,
        "linear_leaky_relu": lambda: nn.LeakyReLU(0.1),
        "linear_tanh": nn.Tanh,
    }
    for name, act in acts.items():
        yield ModelCase(
            name, partial(_linear_block_case, act), _features(16), frozenset({"linear"})
        )
    yield ModelCase(
        "linear_tanh_mixed",
        lambda: _chain(nn.Linear(16, 12), nn.Tanh(), nn.Linear(12, 8), nn.ReLU(), nn.Tanh()),
        _features(16),
        frozenset({"linear", "fixed_qparams"}),
    )
    yield ModelCase(
        "linear_bn1d_leaky_relu",
        lambda: linear_block(nn.LeakyReLU(0.1), bn=True),
        _features(16),
        frozenset({"linear", "bn"}),
    )


def _binary_cases() -> Iterable[ModelCase]:
    ops: dict[str, Callable[[Tensor, Tensor | float], Tensor]] = {
        "add": torch.add,
        "sub": torch.sub,
        "mul": torch.mul,
        "op_add": operator.add,
        "op_sub": operator.sub,
        "op_mul": operator.mul,
    }
    relus = (None, "module", "functional", "torch")
    for index, (op_name, op) in enumerate(ops.items()):
        for scalar in (False, True):
            relu = relus[index % len(relus)] if scalar else relus[(index + 1) % len(relus)]
            kind = "scalar" if scalar else "tensor"
            name = f"{op_name}_{kind}" + (f"_relu_{relu}" if relu else "")
            yield ModelCase(
                name,
                partial(BinaryOps, op, scalar, relu),
                _features(8),
                frozenset({"binary"}),
            )


def _other_cases() -> Iterable[ModelCase]:
    cats = {"cat": torch.cat, "concat": torch.concat, "concatenate": torch.concatenate}
    for name, cat in cats.items():
        yield ModelCase(name, partial(Concat, cat), _image(8, 8, batch=2), frozenset({"cat"}))
    yield ModelCase("layernorm", LayerNormModel, _features(16), frozenset({"layernorm"}))
    yield ModelCase("embedding", EmbeddingModel, _indices((4, 6)), frozenset({"embedding"}))
    yield ModelCase("embedding_bag", EmbeddingBagModel, _indices((4, 6)), frozenset({"embedding"}))
    yield ModelCase("share_qparams", ShareQParamsOps, _image(16, 16, batch=2), frozenset({"share"}))
    yield ModelCase(
        "conv_transpose2d", ConvTransposeModel, _image(8, 8, batch=2), frozenset({"conv_transpose"})
    )
    yield ModelCase(
        "conv2d_relu6", lambda: ConvClamp(nn.ReLU6()), _image(16, 16), frozenset({"clamp"})
    )
    yield ModelCase(
        "conv2d_hardtanh", lambda: ConvClamp(nn.Hardtanh()), _image(16, 16), frozenset({"clamp"})
    )


def functional_keyword_cases() -> list[ModelCase]:
    """Models whose functional calls use keywords and defaults: torch's raw FX convert
    fails on them, ``qcore.fx`` must not. Not part of :func:`all_cases`."""
    return [
        ModelCase(
            "functional_keywords", FunctionalKeywords, _image(8, 8), frozenset({"conv2d", "linear"})
        )
    ]


def mixed_layer_cases() -> list[ModelCase]:
    """:class:`MixedLayers`, on an image and a two-channel volume. Not part of
    :func:`all_cases`."""
    return [
        ModelCase(
            "mixed_layers",
            MixedLayers,
            lambda: (torch.randn(2, 3, 8, 8), torch.randn(2, 2, 4, 8, 8)),
            frozenset({"conv1d", "conv2d", "conv3d", "conv_transpose", "cat", "binary"}),
        )
    ]


def real_cases() -> list[ModelCase]:
    """The realistic models: ResNet-, MobileNet-, transformer-, RNN-style, functional ops."""
    return _real()


def family_cases() -> list[ModelCase]:
    """One small model per op family (and per fusion shape) a backend declares."""
    return [*_conv_cases(), *_conv_add_cases(), *_linear_cases(), *_binary_cases(), *_other_cases()]


def all_cases() -> list[ModelCase]:
    """Real and family models together; names are unique."""
    return [*real_cases(), *family_cases()]


def case(name: str) -> ModelCase:
    """The case called ``name``; a ``KeyError`` lists the known names otherwise."""
    cases = {c.name: c for c in [*all_cases(), *functional_keyword_cases()]}
    if name not in cases:
        raise KeyError(f"no model case {name!r}; known: {', '.join(sorted(cases))}")
    return cases[name]
