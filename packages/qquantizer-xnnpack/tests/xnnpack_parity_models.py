"""Real-model shapes for parity with ExecuTorch 1.5.1; their annotations as text
(``qcore.zoo.suite.pt2e``) compare two quantizers and are checked in as a table."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from qcore.pt2e.annotation.registry import Annotator
from qcore.zoo.suite import pt2e
from qquantizer_xnnpack import annotators
from qquantizer_xnnpack.quantizer import XNNPACKQuantizer


class ResNetish(nn.Module):
    """conv-bn-relu stem, two residual blocks sharing one ReLU module, pooling head."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.conv1 = nn.Conv2d(8, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for _ in range(2):
            y = self.relu(self.bn1(self.conv1(x)))
            x = self.relu(self.bn2(self.conv2(y)) + x)
        x = self.pool(x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


class MobileNetish(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU6(),
            nn.Conv2d(16, 16, 3, padding=1, groups=16),
            nn.BatchNorm2d(16),
            nn.ReLU6(),
            nn.Conv2d(16, 24, 1),
            nn.BatchNorm2d(24),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.drop = nn.Dropout(0.1)
        self.classifier = nn.Linear(24, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.features(x))
        return self.classifier(self.drop(torch.flatten(x, 1)))


class TransformerBlock(nn.Module):
    def __init__(self, d: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln1 = nn.LayerNorm(d)
        self.ln2 = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.ReLU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        q = q.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-2, -1) * (d // self.heads) ** -0.5, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.ff(self.ln2(x))


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(20, 32),
            nn.ReLU(),
            nn.Dropout(0.0),
            nn.Linear(32, 32),
            nn.ReLU(),
            nn.Linear(32, 5),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class RNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(8, 12, batch_first=True)
        self.head = nn.Linear(12, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.gru(x)
        return self.head(torch.relu(out[:, -1]))


class Functional(nn.Module):
    """Functional convs and linears, scalar math, cat, mul, transposed convs, 1D conv."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 4, 3, 3) * 0.2)
        self.b = nn.Parameter(torch.randn(8) * 0.1)
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.up_grouped = nn.ConvTranspose2d(8, 8, 2, stride=2, groups=2)
        self.c1 = nn.Conv1d(4, 6, 3)
        self.lw = nn.Parameter(torch.randn(5, 6) * 0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(F.conv2d(x, self.w, self.b, padding=1))
        y = y * 0.5 + 1.0
        z = torch.cat([y, F.max_pool2d(y, 1)], dim=1)
        u = F.relu(self.up(z[:, :8]))
        g = self.up_grouped(z[:, 8:])
        m = (u.mean(dim=(2, 3)) * g.mean(dim=(2, 3))[:, :4]).unsqueeze(-1).repeat(1, 1, 5)
        s = self.c1(m).transpose(1, 2)
        return F.linear(s, self.lw) + s.sum(dim=-1, keepdim=True)


class MaskedAttention(nn.Module):
    """Attention with a padding mask built as Hugging Face's transformers build theirs:
    integer positions (``arange(n) + 0``) index the mask, which becomes additive
    (``where(keep, 0, finfo.min)``). ExecuTorch 1.5.1's quantizer lifts the ``+ 0`` to a
    float tensor, so calibration crashes in ``aten.index``; see :data:`DIFFERENCES`."""

    def __init__(self, d: int = 16) -> None:
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        n = x.shape[1]
        rows = torch.arange(n) + 0
        keep = mask.bool()[:, None, :].expand(-1, n, -1)[:, rows][:, :, rows]
        additive = torch.where(keep, torch.zeros(()), torch.finfo(torch.float32).min)
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(1, 2) * 0.25 + additive
        return x + self.proj(scores.softmax(-1) @ v)


def _masked_inputs(seed: int) -> tuple[torch.Tensor, ...]:
    x = torch.randn(2, 6, 16, generator=torch.Generator().manual_seed(seed))
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[1, -2:] = 0  # the second sequence is padded
    return x, mask


#: name -> (model factory, example-input factory by seed)
MODELS: pt2e.Zoo = {
    "resnet": (ResNetish, pt2e.seeded_inputs(2, 3, 16, 16)),
    "mobilenet": (MobileNetish, pt2e.seeded_inputs(2, 3, 16, 16)),
    "transformer": (TransformerBlock, pt2e.seeded_inputs(2, 6, 16)),
    "mlp": (MLP, pt2e.seeded_inputs(4, 20)),
    "rnn": (RNN, pt2e.seeded_inputs(2, 5, 8)),
    "functional": (Functional, pt2e.seeded_inputs(2, 4, 8, 8)),
    "masked_attention": (MaskedAttention, _masked_inputs),
}

#: Why an additive mask stays in float (the difference listed below).
MASK_REASON = (
    "an add reading an additive attention mask (where(keep, 0, finfo.min), from the "
    "model's mask input) stays in float: observed, its int8 scale (~1e36) rounds every "
    "attention score to zero. ExecuTorch 1.5.1 observes it, and cannot calibrate these "
    "graphs anyway: its scalar lifting makes the mask's integer indices float"
)
#: Where this quantizer's annotations differ from ExecuTorch 1.5.1's, by design:
#: model -> {node: why}, in static configs (dynamic ones annotate no add). On every other
#: model and config, and on every graph ExecuTorch's quantizer can calibrate, the two are
#: identical. Outside the annotations, one more difference, in transform_for_annotation:
#: a Python scalar of an op with a non-float result is lifted to a tensor of the result's
#: dtype (ExecuTorch: float32, which promotes ``int64 + 0`` to float32).
DIFFERENCES: dict[str, dict[str, str]] = {"masked_attention": {"add_1": MASK_REASON}}
#: The models ExecuTorch 1.5.1's quantizer cannot calibrate (the lifted-scalar crash).
REFERENCE_CANNOT_CALIBRATE = frozenset({"masked_attention"})


def expected_differences(model: str, config: str) -> dict[str, str]:
    """The listed differences of ``model`` under ``config``."""
    return {} if CONFIGS[config].get("is_dynamic") else DIFFERENCES.get(model, {})
#: config name -> get_symmetric_quantization_config options
CONFIGS: dict[str, dict[str, bool]] = {
    "static_per_channel": {"is_per_channel": True},
    "static_per_tensor": {},
    "dynamic_per_channel": {"is_per_channel": True, "is_dynamic": True},
}


def build(name: str) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    factory, inputs = MODELS[name]
    return factory().eval(), inputs(0)


def annotate_with(quantizer: Any, name: str) -> dict[str, Any]:
    return pt2e.annotate(quantizer, pt2e.exported(*build(name)))


def quantize_with(
    quantizer: Any, name: str, calib_batches: int = 4
) -> tuple[torch.Tensor, torch.Tensor]:
    """(quantized output, float output) on a held-out batch after calibration."""
    return pt2e.quantized_outputs(
        quantizer, build(name)[0], MODELS[name][1], calibration=calib_batches
    )


class ExecuTorchRows(XNNPACKQuantizer):
    """This package's quantizer without the rows of ``annotators.beyond_executorch()``:
    what the parity tests hold equal to ExecuTorch 1.5.1's quantizer (the deliberate
    extras are checked by the conformance kit, like every annotator's example)."""

    def annotators(self) -> list[Annotator]:
        beyond = {a.name for a in annotators.beyond_executorch()}
        return [a for a in super().annotators() if a.name not in beyond]
