"""A model zoo for parity with torchao 0.18's X86InductorQuantizer and the configurations
compared; their annotations as text (``qcore.zoo.suite.pt2e``) are checked in as a table.

The models are built from modules, as the x86 recipe recognises layers by their module,
and none calls one module instance at two sites (torchao fails on those; see
``test_reused_modules.py``). Annotations are recorded inside ``prepare_pt2e`` /
``prepare_qat_pt2e``, right after ``annotate``, so both quantizers see exactly the graph
users give them (batch norm folded for PTQ, kept for QAT).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from qcore.zoo.suite import pt2e

# -- models ------------------------------------------------------------------------------


class BasicBlock(nn.Module):
    """torchvision's ResNet block. With ``reuse_relu`` it calls its one ``self.relu`` at
    both sites, exactly as torchvision does; otherwise each site has its own ReLU."""

    def __init__(self, cin: int, cout: int, stride: int = 1, reuse_relu: bool = False) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu2 = None if reuse_relu else nn.ReLU(inplace=True)
        self.downsample = (
            nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            if stride != 1 or cin != cout
            else None
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += identity
        if self.relu2 is None:
            return self.relu(out)  # type: ignore[no-any-return]
        return self.relu2(out)  # type: ignore[no-any-return]


class ResNet(nn.Module):
    def __init__(self, reuse_relu: bool = False) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(2)
        self.layer1 = BasicBlock(8, 8, reuse_relu=reuse_relu)
        self.layer2 = BasicBlock(8, 16, stride=2, reuse_relu=reuse_relu)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer2(self.layer1(x))
        return self.fc(torch.flatten(self.avgpool(x), 1))  # type: ignore[no-any-return]


class InvertedResidual(nn.Module):
    """MobileNetV2 / V3 block: expand, depthwise, squeeze-excite, project, residual."""

    def __init__(self, c: int, act: type[nn.Module]) -> None:
        super().__init__()
        self.expand = nn.Sequential(
            nn.Conv2d(c, 2 * c, 1, bias=False), nn.BatchNorm2d(2 * c), act()
        )
        self.dw = nn.Sequential(
            nn.Conv2d(2 * c, 2 * c, 3, 1, 1, groups=2 * c, bias=False), nn.BatchNorm2d(2 * c), act()
        )
        self.se_pool = nn.AdaptiveAvgPool2d(1)
        self.se_fc1 = nn.Conv2d(2 * c, 4, 1)
        self.se_relu = nn.ReLU()
        self.se_fc2 = nn.Conv2d(4, 2 * c, 1)
        self.se_gate = nn.Hardsigmoid()
        self.project = nn.Sequential(nn.Conv2d(2 * c, c, 1, bias=False), nn.BatchNorm2d(c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dw(self.expand(x))
        y = y * self.se_gate(self.se_fc2(self.se_relu(self.se_fc1(self.se_pool(y)))))
        return x + self.project(y)  # the conv is the add's second input


class MobileNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.Hardswish()
        )
        self.block1 = InvertedResidual(8, nn.ReLU6)
        self.block2 = InvertedResidual(8, nn.SiLU)
        self.head = nn.Sequential(nn.Conv2d(8, 16, 1), nn.Hardtanh(-2.0, 2.0))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(
            nn.Linear(16, 12), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(12, 5)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.head(self.block2(self.block1(self.stem(x))))
        return self.classifier(torch.flatten(self.pool(x), 1))  # type: ignore[no-any-return]


class Inception(nn.Module):
    """Branches joined by cat, pooling before and after it."""

    def __init__(self) -> None:
        super().__init__()
        self.b1 = nn.Sequential(nn.Conv2d(4, 4, 1), nn.ReLU())
        self.b2 = nn.Sequential(
            nn.Conv2d(4, 4, 1), nn.ReLU(), nn.Conv2d(4, 6, 3, padding=1), nn.ReLU()
        )
        self.b3_pool = nn.MaxPool2d(3, 1, 1)
        self.b3 = nn.Sequential(nn.Conv2d(4, 2, 1), nn.ReLU())
        self.b4_pool = nn.AvgPool2d(3, 1, 1)
        self.b4 = nn.Conv2d(4, 4, 1)
        self.pool = nn.MaxPool2d(2)
        self.avg = nn.AvgPool2d(2)
        self.conv = nn.Conv2d(16, 8, 3, padding=1)
        self.relu = nn.ReLU()
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.cat(
            [self.b1(x), self.b2(x), self.b3(self.b3_pool(x)), self.b4(self.b4_pool(x))], dim=1
        )
        y = self.relu(self.conv(self.avg(self.pool(y))))
        return self.fc(torch.flatten(self.gap(y), 1))  # type: ignore[no-any-return]


class Transformer(nn.Module):
    """Attention (two matmuls), a GELU MLP, a gated branch (mul), residual adds."""

    def __init__(self, d: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(4 * d, d)
        self.gate = nn.Linear(d, d)
        self.value = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, -1).transpose(1, 2) for z in (q, k, v))
        att = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * 0.35, dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)  # linear as the add's second input
        x = self.fc2(self.act(self.fc1(self.ln2(x)))) + x
        return self.gate(x) * self.value(x)


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.act1 = nn.Linear(20, 32), nn.ReLU()
        self.fc2, self.act2 = nn.Linear(32, 32), nn.LeakyReLU(0.1)
        self.fc3, self.act3 = nn.Linear(32, 32), nn.Tanh()
        self.fc4, self.act4 = nn.Linear(32, 32), nn.ReLU()
        self.out = nn.Linear(32, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.act2(self.fc2(self.act1(self.fc1(x))))
        h = self.act4(self.fc4(self.act3(self.fc3(h))) + h)
        return self.out(h)  # type: ignore[no-any-return]


class Conv1dNet(nn.Module):
    """conv1d → ReLU is a pattern; a lone conv1d and conv1d → BatchNorm1d are not."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.r1 = nn.Conv1d(4, 8, 3, padding=1), nn.ReLU()
        self.c2 = nn.Conv1d(8, 8, 3, padding=1)
        self.c3, self.bn3, self.r3 = nn.Conv1d(8, 8, 1), nn.BatchNorm1d(8), nn.ReLU()
        self.fc = nn.Linear(8 * 10, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.r3(self.bn3(self.c3(self.c2(self.r1(self.c1(x))))))
        return self.fc(torch.flatten(y, 1))  # type: ignore[no-any-return]


class Functional(nn.Module):
    """Functional layers and post-ops, which the recipe (like torchao 0.18 on torch 2.13)
    does not recognise, next to module ones."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(6, 3, 3, 3) * 0.2)
        self.conv = nn.Conv2d(6, 6, 3, padding=1)
        self.conv2 = nn.Conv2d(6, 6, 1)
        self.fc = nn.Linear(6, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(F.conv2d(x, self.w, padding=1))
        y = torch.relu(self.conv(y))
        y = F.relu(self.conv2(y))
        z = F.adaptive_avg_pool2d(y, 1).flatten(1)
        return F.linear(z, self.fc.weight, self.fc.bias) + self.fc(z)


#: The parity zoo: name -> (model factory, example-input factory by seed)
MODELS: pt2e.Zoo = {
    "resnet": (ResNet, pt2e.seeded_inputs(2, 3, 16, 16)),
    "mobilenet": (MobileNet, pt2e.seeded_inputs(2, 3, 16, 16)),
    "inception": (Inception, pt2e.seeded_inputs(2, 4, 12, 12)),
    "transformer": (Transformer, pt2e.seeded_inputs(2, 6, 16)),
    "mlp": (MLP, pt2e.seeded_inputs(4, 20)),
    "conv1d": (Conv1dNet, pt2e.seeded_inputs(2, 4, 10)),
    "functional": (Functional, pt2e.seeded_inputs(2, 3, 8, 8)),
}


class ReusedConv(nn.Module):
    """One conv and one ReLU module, each called at two sites (a weight-tied stack)."""

    def __init__(self, tied_twin: bool = False) -> None:
        super().__init__()
        self.conv, self.relu = nn.Conv2d(4, 4, 3, padding=1), nn.ReLU()
        if tied_twin:  # the same computation with one module per site
            self.conv2, self.relu2 = copy.deepcopy(self.conv), nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.relu(self.conv(x))
        if hasattr(self, "conv2"):
            return self.relu2(self.conv2(y))  # type: ignore[no-any-return]
        return self.relu(self.conv(y))  # type: ignore[no-any-return]


class ReusedReLU(nn.Module):
    """Linears sharing one ReLU module."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(12, 16), nn.Linear(16, 16), nn.Linear(16, 4)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(self.relu(self.fc2(self.relu(self.fc1(x)))))  # type: ignore[no-any-return]


#: Models calling one module at several sites, each with its twin: the same computation
#: and weights with one module per call site (node names equal, so annotations compare).
REUSED: dict[str, tuple[Callable[[], nn.Module], pt2e.InputsBySeed, str]] = {
    "resnet_reused": (lambda: ResNet(reuse_relu=True), MODELS["resnet"][1], "resnet"),
    "conv_reused": (ReusedConv, pt2e.seeded_inputs(2, 4, 8, 8), "conv_tied_twin"),
    "relu_reused": (ReusedReLU, pt2e.seeded_inputs(4, 12), "relu_reused"),
}
TWINS = {"conv_tied_twin": (lambda: ReusedConv(tied_twin=True), pt2e.seeded_inputs(2, 4, 8, 8))}


def lookup(name: str) -> tuple[Callable[[], nn.Module], pt2e.InputsBySeed]:
    """The parity zoo, the reused-module models and their twins, by name."""
    reused = {n: (factory, inputs) for n, (factory, inputs, _) in REUSED.items()}
    return {**MODELS, **reused, **TWINS}[name]


#: config name -> (quantizer configuration, QAT?). ``configure(module, quantizer)`` takes
#: the module holding ``get_default_x86_inductor_quantization_config`` (torchao's or
#: ours), so both quantizers are configured by the same code.
Configure = Callable[[Any, Any], Any]


def _default(**options: bool) -> Configure:
    return lambda m, q: q.set_global(m.get_default_x86_inductor_quantization_config(**options))


def _with_matmul(m: Any, q: Any) -> Any:
    config = m.get_default_x86_inductor_quantization_config()
    return q.set_global(config).set_function_type_qconfig(torch.matmul, config)


CONFIGS: dict[str, tuple[Configure, bool]] = {
    "static": (_default(), False),
    "static_matmul": (_with_matmul, False),
    "static_reduce_range": (_default(reduce_range=True), False),
    "dynamic": (_default(is_dynamic=True), False),
    "qat": (_default(is_qat=True), True),
}


def build(name: str, train: bool = False) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    factory, inputs = lookup(name)
    return factory().train(train), inputs(0)


def quantizer_for(module: Any, config: str) -> Any:
    configure, _ = CONFIGS[config]
    return configure(module, module.X86InductorQuantizer())


def _ends_int8_pattern(annotation: Any) -> bool:
    """torchao's ``_is_output_of_quantized_pattern``, ours ``quantized_output``."""
    return bool(
        getattr(annotation, "_is_output_of_quantized_pattern", False)
        or getattr(annotation, "quantized_output", False)
    )


#: The x86 recipes' own mark: the node ends a pattern that runs in int8.
FLAGS = {"int8_out": _ends_int8_pattern}


def recorded(quantizer: Any, name: str, qat: bool = False) -> dict[str, Any]:
    """The annotations ``quantizer`` writes on model ``name`` inside prepare.

    For QAT without the prepare: ``prepare_qat_pt2e`` runs ``transform_for_annotation``
    and ``annotate`` on the exported graph as it is, and folds conv-bn only afterwards
    (seconds per model with a batch norm), so the same two calls on the same graph record
    the same annotations (tests_reference/ checks it on the models it prepares for QAT)."""
    model, example = build(name, train=qat)
    if qat:
        return pt2e.annotate(quantizer, pt2e.exported(model, example), FLAGS)
    return pt2e.recorded_annotations(quantizer, model, example, qat=qat, flags=FLAGS)


def annotate_with(module: Any, name: str, config: str) -> dict[str, Any]:
    """The annotations ``module``'s quantizer writes on model ``name`` under ``config``."""
    return recorded(quantizer_for(module, config), name, CONFIGS[config][1])


def quantize_with(
    module: Any, name: str, config: str, calib_batches: int = 4
) -> tuple[torch.Tensor, torch.Tensor]:
    """(quantized output, float output) of model ``name`` quantized by ``module``'s
    quantizer under ``config``."""
    return quantize(quantizer_for(module, config), name, CONFIGS[config][1], calib_batches)


def quantize_recorded(
    module: Any, name: str, config: str, calib_batches: int = 4
) -> tuple[tuple[torch.Tensor, torch.Tensor], dict[str, Any]]:
    """:func:`quantize_with`, and the annotations its quantizer wrote inside that prepare
    (what :func:`annotate_with` records in a prepare of its own)."""
    recording = pt2e.Recording(quantizer_for(module, config), FLAGS)
    outputs = quantize(recording, name, CONFIGS[config][1], calib_batches)
    assert recording.seen is not None, "prepare never called annotate"
    return outputs, recording.seen


def quantize(
    quantizer: Any, name: str, qat: bool = False, calib_batches: int = 4
) -> tuple[torch.Tensor, torch.Tensor]:
    """(quantized output, float output) on a held-out batch after calibration (for QAT:
    a few training-mode passes, then eval)."""
    model, _ = build(name, train=qat)
    return pt2e.quantized_outputs(
        quantizer, model, lookup(name)[1], qat=qat, calibration=calib_batches
    )
