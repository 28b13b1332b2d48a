"""Compact replicas of well-known ImageNet architectures, for int8 accuracy studies.

Each model keeps the *block structure* of its torchvision namesake (the same layer kinds
in the same order: bottlenecks with projection shortcuts, inception branches joined by
``cat``, dense blocks, grouped bottlenecks with squeeze-excitation, inverted residuals
with depthwise convs, channel split and shuffle, fire modules, ConvNeXt and Swin blocks,
a ViT encoder) and the *weight initialisation* torchvision gives it, because what an
int8 kernel does with a layer depends on how its weights are distributed. Width, depth
and resolution are reduced so that torch's FX prepare, calibration and convert take a
few seconds on two CPU cores; each docstring says what was reduced. Inputs are batches
of four 64x64 images with ImageNet-normalised statistics (standard normal).

Departures from torchvision, all deliberate:

* batch norms get non-trivial running statistics and affine parameters (through
  :class:`qcore.zoo.models.ModelCase`), so conv-bn folding changes the weights;
* ConvNeXt's layer scale starts at 0.1, not 1e-6: with 1e-6 a randomly initialised
  ConvNeXt is its stem and downsampling layers, and its blocks' int8 arithmetic never
  reaches the output;
* the ViT head is not zero-initialised (a zero head makes every output zero), and its
  class token is standard normal, not zero: a zero class token is fifty times smaller
  than the patch tokens it is quantized with, per-tensor int8 rounds it away, and even
  exact int8 arithmetic reaches only 8 dB on the logits;
* attention is written out with ``nn.Linear`` projections (torchvision's ViT uses
  ``nn.MultiheadAttention``, which FX quantization leaves in float), and shapes are fixed
  at construction so every model traces with ``torch.fx`` and ``prepare_fx``; only the
  batch size is free.

Every case is seeded like the rest of the zoo: building a model or its inputs never
touches the caller's RNG, and two builds are identical.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from qcore.zoo.models import Inputs, ModelCase

__all__ = ["architecture", "architecture_cases"]

_CLASSES = 100
"""Classifier width of every replica (ImageNet's 1000, reduced like everything else)."""


# ------------------------------------------------------------------------- shared parts


def _make_divisible(value: float, divisor: int = 8) -> int:
    """torchvision's channel rounding: to a multiple of ``divisor``, never below 90 %."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def _conv_bn(
    c_in: int,
    c_out: int,
    kernel: int,
    stride: int = 1,
    *,
    groups: int = 1,
    act: Callable[[], nn.Module] | None = nn.ReLU,
    eps: float = 1e-5,
) -> nn.Sequential:
    """Conv (no bias) -> BatchNorm -> optional activation, torchvision's Conv2dNormActivation."""
    layers: list[nn.Module] = [
        nn.Conv2d(c_in, c_out, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
        nn.BatchNorm2d(c_out, eps=eps),
    ]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


class _SqueezeExcitation(nn.Module):
    """torchvision.ops.SqueezeExcitation: pool, 1x1 conv, act, 1x1 conv, gate, multiply."""

    def __init__(
        self,
        channels: int,
        squeeze: int,
        act: Callable[[], nn.Module] = nn.ReLU,
        gate: Callable[[], nn.Module] = nn.Sigmoid,
    ) -> None:
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.activation = act()
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.scale_activation = gate()

    def forward(self, x: Tensor) -> Tensor:
        scale = self.scale_activation(self.fc2(self.activation(self.fc1(self.avgpool(x)))))
        out: Tensor = scale * x
        return out


def _imagenet_stem(c_out: int) -> nn.Sequential:
    """The 7x7/2 conv (no bias), batch norm, ReLU and 3x3/2 max-pool of ResNet and DenseNet."""
    return nn.Sequential(
        nn.Conv2d(3, c_out, 7, 2, 3, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(),
        nn.MaxPool2d(3, 2, 1),
    )


class _InvertedResidual(nn.Module):
    """MobileNetV2-family inverted residual: 1x1 expand (when it widens), depthwise kxk
    (which carries the stride), optional squeeze-excitation ``se`` = (squeeze width,
    activation, gate), 1x1 project without activation; residual when the shape is kept.
    MobileNetV3, MnasNet and EfficientNet differ only in activation, SE and BN eps."""

    def __init__(
        self,
        c_in: int,
        mid: int,
        c_out: int,
        kernel: int,
        stride: int,
        *,
        act: Callable[[], nn.Module],
        se: tuple[int, Callable[[], nn.Module], Callable[[], nn.Module]] | None = None,
        eps: float = 1e-5,
    ) -> None:
        super().__init__()
        self.use_residual = stride == 1 and c_in == c_out
        layers: list[nn.Module] = []
        if mid != c_in:
            layers.append(_conv_bn(c_in, mid, 1, act=act, eps=eps))
        layers.append(_conv_bn(mid, mid, kernel, stride, groups=mid, act=act, eps=eps))
        if se is not None:
            layers.append(_SqueezeExcitation(mid, *se))
        layers.append(_conv_bn(mid, c_out, 1, act=None, eps=eps))
        self.block = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        out: Tensor = self.block(x)
        return out + x if self.use_residual else out


def _zero_bias(m: nn.Conv2d | nn.Linear) -> None:
    if m.bias is not None:
        nn.init.zeros_(m.bias)


# ---------------------------------------------------------------------------- ResNet-50


class _Bottleneck(nn.Module):
    """ResNet v1.5 bottleneck: 1x1 reduce, 3x3 (carries the stride), 1x1 expand x4."""

    expansion = 4

    def __init__(self, c_in: int, planes: int, stride: int) -> None:
        super().__init__()
        c_out = planes * self.expansion
        self.conv1 = nn.Conv2d(c_in, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.relu2 = nn.ReLU()
        self.conv3 = nn.Conv2d(planes, c_out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(c_out)
        self.downsample: nn.Module | None = None
        if stride != 1 or c_in != c_out:
            self.downsample = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out)
            )
        self.relu3 = nn.ReLU()

    def forward(self, x: Tensor) -> Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.relu2(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        result: Tensor = self.relu3(out + identity)
        return result


class ResNet50(nn.Module):
    """ResNet-50: 7x7/2 stem, max-pool, four bottleneck stages, pool, fc.

    Reduced: stem and stage widths halved (32; planes 32..256, outputs 128..1024),
    blocks per stage (2, 2, 2, 1) instead of (3, 4, 6, 3). torchvision's init: convs
    Kaiming-normal (fan-out, ReLU), fc PyTorch default.
    """

    def __init__(
        self,
        *,
        stem: int = 32,
        planes: Sequence[int] = (32, 64, 128, 256),
        blocks: Sequence[int] = (2, 2, 2, 1),
        classes: int = _CLASSES,
    ) -> None:
        super().__init__()
        self.stem = _imagenet_stem(stem)
        stages: list[nn.Module] = []
        c_in = stem
        for index, (width, count) in enumerate(zip(planes, blocks, strict=True)):
            layers = []
            for block in range(count):
                stride = 2 if index > 0 and block == 0 else 1
                layers.append(_Bottleneck(c_in, width, stride))
                c_in = width * _Bottleneck.expansion
            stages.append(nn.Sequential(*layers))
        self.layers = nn.Sequential(*stages)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(c_in, classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: Tensor) -> Tensor:
        x = self.layers(self.stem(x))
        logits: Tensor = self.fc(torch.flatten(self.avgpool(x), 1))
        return logits


# ----------------------------------------------------------------------------- GoogLeNet


class _BasicConv(nn.Sequential):
    """GoogLeNet's BasicConv2d: conv (no bias), batch norm (eps 1e-3), ReLU."""

    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int = 1) -> None:
        super().__init__(
            nn.Conv2d(c_in, c_out, kernel, stride, (kernel - 1) // 2, bias=False),
            nn.BatchNorm2d(c_out, eps=0.001),
            nn.ReLU(),
        )


class _Inception(nn.Module):
    """Four branches joined by ``cat``: 1x1; 1x1 -> 3x3; 1x1 -> 3x3; max-pool -> 1x1.

    (torchvision's third branch is 3x3 too, not the paper's 5x5.)
    """

    def __init__(self, c_in: int, row: tuple[int, int, int, int, int, int]) -> None:
        super().__init__()
        c1, c3_reduce, c3, c5_reduce, c5, pool = row
        self.branch1 = _BasicConv(c_in, c1, 1)
        self.branch2 = nn.Sequential(_BasicConv(c_in, c3_reduce, 1), _BasicConv(c3_reduce, c3, 3))
        self.branch3 = nn.Sequential(_BasicConv(c_in, c5_reduce, 1), _BasicConv(c5_reduce, c5, 3))
        self.branch4 = nn.Sequential(
            nn.MaxPool2d(3, 1, 1, ceil_mode=True), _BasicConv(c_in, pool, 1)
        )
        self.out_channels = c1 + c3 + c5 + pool

    def forward(self, x: Tensor) -> Tensor:
        branches = [self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)]
        return torch.cat(branches, 1)


#: torchvision's inception rows (c1, c3_reduce, c3, c5_reduce, c5, pool) by name.
_INCEPTION_ROWS = {
    "3a": (64, 96, 128, 16, 32, 32),
    "3b": (128, 128, 192, 32, 96, 64),
    "4a": (192, 96, 208, 16, 48, 64),
    "4b": (160, 112, 224, 24, 64, 64),
    "4e": (256, 160, 320, 32, 128, 128),
    "5a": (256, 160, 320, 32, 128, 128),
    "5b": (384, 192, 384, 48, 128, 128),
}


class GoogLeNet(nn.Module):
    """GoogLeNet (Inception v1): stem convs and pools, inception stages, pool, fc.

    Reduced: every width halved, inception modules 3a 3b | 4a 4b 4e | 5a 5b (4c and 4d
    dropped), no auxiliary heads (eval mode has none). torchvision's init: convs and fc
    truncated normal, std 0.01.
    """

    def __init__(self, *, classes: int = _CLASSES, divisor: int = 2) -> None:
        super().__init__()

        def w(c: int) -> int:
            return c // divisor

        self.stem = nn.Sequential(
            _BasicConv(3, w(64), 7, 2),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            _BasicConv(w(64), w(64), 1),
            _BasicConv(w(64), w(192), 3),
            nn.MaxPool2d(3, 2, ceil_mode=True),
        )
        c_in = w(192)
        stages: list[nn.Module] = []
        for group in (("3a", "3b"), ("4a", "4b", "4e"), ("5a", "5b")):
            if stages:
                stages.append(nn.MaxPool2d(3, 2, ceil_mode=True))
            for name in group:
                row = _INCEPTION_ROWS[name]
                module = _Inception(
                    c_in, (w(row[0]), w(row[1]), w(row[2]), w(row[3]), w(row[4]), w(row[5]))
                )
                stages.append(module)
                c_in = module.out_channels
        self.inception = nn.Sequential(*stages)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(0.2)
        self.fc = nn.Linear(c_in, classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d | nn.Linear):
                nn.init.trunc_normal_(m.weight, mean=0.0, std=0.01, a=-2, b=2)

    def forward(self, x: Tensor) -> Tensor:
        x = self.inception(self.stem(x))
        x = self.dropout(torch.flatten(self.avgpool(x), 1))
        logits: Tensor = self.fc(x)
        return logits


# --------------------------------------------------------------------------- DenseNet-121


class _DenseLayer(nn.Module):
    """Pre-activation bottleneck on the concatenation of every earlier feature map:
    BN -> ReLU -> 1x1 conv (4 x growth) -> BN -> ReLU -> 3x3 conv (growth)."""

    def __init__(self, c_in: int, growth: int, bn_size: int) -> None:
        super().__init__()
        self.norm1 = nn.BatchNorm2d(c_in)
        self.relu1 = nn.ReLU()
        self.conv1 = nn.Conv2d(c_in, bn_size * growth, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth)
        self.relu2 = nn.ReLU()
        self.conv2 = nn.Conv2d(bn_size * growth, growth, 3, 1, 1, bias=False)

    def forward(self, features: list[Tensor]) -> Tensor:
        x = torch.cat(features, 1)
        x = self.conv1(self.relu1(self.norm1(x)))
        out: Tensor = self.conv2(self.relu2(self.norm2(x)))
        return out


class _DenseBlock(nn.Module):
    def __init__(self, layers: int, c_in: int, growth: int, bn_size: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            _DenseLayer(c_in + i * growth, growth, bn_size) for i in range(layers)
        )
        self.out_channels = c_in + layers * growth

    def forward(self, x: Tensor) -> Tensor:
        features = [x]
        for layer in self.layers:
            features.append(layer(features))
        return torch.cat(features, 1)


class _Transition(nn.Sequential):
    """BN -> ReLU -> 1x1 conv halving the channels -> 2x2 average pool."""

    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__(
            nn.BatchNorm2d(c_in),
            nn.ReLU(),
            nn.Conv2d(c_in, c_out, 1, bias=False),
            nn.AvgPool2d(2, 2),
        )


class DenseNet121(nn.Module):
    """DenseNet-121: 7x7/2 stem, max-pool, four dense blocks with transitions, BN, fc.

    Reduced: growth rate 16 (not 32), 32 initial features (not 64), (3, 4, 6, 3) layers
    per block instead of (6, 12, 24, 16); bottleneck factor 4 and compression 0.5 as in
    the original. torchvision's init: convs Kaiming-normal (fan-in), fc bias zero.
    """

    def __init__(
        self,
        *,
        growth: int = 16,
        blocks: Sequence[int] = (3, 4, 6, 3),
        init_features: int = 32,
        bn_size: int = 4,
        classes: int = _CLASSES,
    ) -> None:
        super().__init__()
        self.stem = _imagenet_stem(init_features)
        stages: list[nn.Module] = []
        channels = init_features
        for index, count in enumerate(blocks):
            block = _DenseBlock(count, channels, growth, bn_size)
            stages.append(block)
            channels = block.out_channels
            if index != len(blocks) - 1:
                stages.append(_Transition(channels, channels // 2))
                channels //= 2
        self.features = nn.Sequential(*stages)
        self.norm = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(channels, classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight)
            elif isinstance(m, nn.Linear):
                _zero_bias(m)

    def forward(self, x: Tensor) -> Tensor:
        x = self.relu(self.norm(self.features(self.stem(x))))
        logits: Tensor = self.classifier(torch.flatten(self.avgpool(x), 1))
        return logits


# ------------------------------------------------------------------------------- RegNet


class _RegNetBlock(nn.Module):
    """RegNet's ResBottleneckBlock: 1x1, grouped 3x3 (stride), squeeze-excitation, 1x1;
    projection shortcut when the shape changes; ReLU after the add."""

    def __init__(
        self, c_in: int, c_out: int, stride: int, group_width: int, se_ratio: float | None
    ) -> None:
        super().__init__()
        self.proj: nn.Module | None = None
        if c_in != c_out or stride != 1:
            self.proj = _conv_bn(c_in, c_out, 1, stride, act=None)
        groups = c_out // group_width
        self.a = _conv_bn(c_in, c_out, 1)
        self.b = _conv_bn(c_out, c_out, 3, stride, groups=groups)
        self.se: nn.Module | None = None
        if se_ratio:
            self.se = _SqueezeExcitation(c_out, round(se_ratio * c_in))
        self.c = _conv_bn(c_out, c_out, 1, act=None)
        self.activation = nn.ReLU()

    def forward(self, x: Tensor) -> Tensor:
        f = self.b(self.a(x))
        if self.se is not None:
            f = self.se(f)
        f = self.c(f)
        shortcut = x if self.proj is None else self.proj(x)
        out: Tensor = self.activation(shortcut + f)
        return out


class RegNet(nn.Module):
    """RegNetY-400MF: 3x3/2 stem, four stages of grouped bottlenecks with SE, pool, fc.

    Reduced: widths (24, 56, 104, 208) instead of (48, 104, 208, 440), stem 16 (not 32),
    depths (1, 1, 2, 1) instead of (1, 3, 6, 6); group width 8 and SE ratio 0.25 as in
    the original (``se_ratio=None`` gives a RegNetX). torchvision's init: convs normal
    with std sqrt(2 / fan-out), fc normal std 0.01 and bias zero.
    """

    def __init__(
        self,
        *,
        widths: Sequence[int] = (24, 56, 104, 208),
        depths: Sequence[int] = (1, 1, 2, 1),
        stem: int = 16,
        group_width: int = 8,
        se_ratio: float | None = 0.25,
        classes: int = _CLASSES,
    ) -> None:
        super().__init__()
        self.stem = _conv_bn(3, stem, 3, 2)
        blocks: list[nn.Module] = []
        c_in = stem
        for width, depth in zip(widths, depths, strict=True):
            for index in range(depth):
                blocks.append(
                    _RegNetBlock(c_in, width, 2 if index == 0 else 1, group_width, se_ratio)
                )
                c_in = width
        self.trunk = nn.Sequential(*blocks)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(c_in, classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                fan_out = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                nn.init.normal_(m.weight, mean=0.0, std=math.sqrt(2.0 / fan_out))
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, mean=0.0, std=0.01)
                _zero_bias(m)

    def forward(self, x: Tensor) -> Tensor:
        x = self.trunk(self.stem(x))
        logits: Tensor = self.fc(torch.flatten(self.avgpool(x), 1))
        return logits


# -------------------------------------------------------------------------- MobileNetV3


#: MobileNetV3-Small's rows: input, kernel, expanded, output, SE, hardswish, stride.
_MOBILENET_V3_SMALL = (
    (16, 3, 16, 16, True, False, 2),
    (16, 3, 72, 24, False, False, 2),
    (24, 3, 88, 24, False, False, 1),
    (24, 5, 96, 40, True, True, 2),
    (40, 5, 240, 40, True, True, 1),
    (40, 5, 240, 40, True, True, 1),
    (40, 5, 120, 48, True, True, 1),
    (48, 5, 144, 48, True, True, 1),
    (48, 5, 288, 96, True, True, 2),
    (96, 5, 576, 96, True, True, 1),
    (96, 5, 576, 96, True, True, 1),
)


class MobileNetV3(nn.Module):
    """MobileNetV3-Small: hardswish stem, inverted residuals, 1x1 conv, pool,
    linear -> hardswish -> linear.

    Reduced: width multiplier 0.5 (channels rounded by torchvision's rule), last
    channel 512 (not 1024); all eleven blocks kept. torchvision's init: convs
    Kaiming-normal (fan-out), linears normal std 0.01 and bias zero.
    """

    def __init__(
        self, *, width_mult: float = 0.5, last_channel: int = 512, classes: int = _CLASSES
    ) -> None:
        super().__init__()

        def ch(c: int) -> int:
            return _make_divisible(c * width_mult)

        first = ch(16)
        layers: list[nn.Module] = [_conv_bn(3, first, 3, 2, act=nn.Hardswish, eps=0.001)]
        c_out = first
        for c_in, kernel, expanded, out, se, hs, stride in _MOBILENET_V3_SMALL:
            c_out = ch(out)
            mid = ch(expanded)
            layers.append(
                _InvertedResidual(
                    ch(c_in),
                    mid,
                    c_out,
                    kernel,
                    stride,
                    act=nn.Hardswish if hs else nn.ReLU,
                    se=(_make_divisible(mid // 4), nn.ReLU, nn.Hardsigmoid) if se else None,
                    eps=0.001,
                )
            )
        last_conv = 6 * c_out
        layers.append(_conv_bn(c_out, last_conv, 1, act=nn.Hardswish, eps=0.001))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(
            nn.Linear(last_conv, last_channel),
            nn.Hardswish(),
            nn.Dropout(0.2),
            nn.Linear(last_channel, classes),
        )
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
                _zero_bias(m)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                _zero_bias(m)

    def forward(self, x: Tensor) -> Tensor:
        x = torch.flatten(self.avgpool(self.features(x)), 1)
        logits: Tensor = self.classifier(x)
        return logits


# ------------------------------------------------------------------------------- MnasNet


class MnasNet(nn.Module):
    """MnasNet-B1 (torchvision's mnasnet): 3x3/2 stem, separable conv, six inverted
    residual stacks, 1x1 conv to 1280, pool, fc.

    Reduced: depth multiplier 0.5 (torchvision's mnasnet0_5 widths), repeats
    (2, 2, 2, 1, 2, 1) instead of (3, 3, 3, 2, 4, 1), last conv 640 (not 1280).
    torchvision's init: convs Kaiming-normal (fan-out, ReLU), fc Kaiming-uniform
    (fan-out, sigmoid) with bias zero.
    """

    def __init__(
        self,
        *,
        alpha: float = 0.5,
        repeats: Sequence[int] = (2, 2, 2, 1, 2, 1),
        last: int = 640,
        classes: int = _CLASSES,
    ) -> None:
        super().__init__()
        depths = [_make_divisible(d * alpha) for d in (32, 16, 24, 40, 80, 96, 192, 320)]
        layers: list[nn.Module] = [
            _conv_bn(3, depths[0], 3, 2),
            _conv_bn(depths[0], depths[0], 3, groups=depths[0]),
            _conv_bn(depths[0], depths[1], 1, act=None),
        ]
        stacks = ((3, 2, 3), (5, 2, 3), (5, 2, 6), (3, 1, 6), (5, 2, 6), (3, 1, 6))
        for index, ((kernel, stride, expansion), count) in enumerate(
            zip(stacks, repeats, strict=True)
        ):
            c_in, c_out = depths[index + 1], depths[index + 2]
            for r in range(count):
                c_block = c_in if r == 0 else c_out
                layers.append(
                    _InvertedResidual(
                        c_block,
                        c_block * expansion,
                        c_out,
                        kernel,
                        stride if r == 0 else 1,
                        act=nn.ReLU,
                    )
                )
        layers.append(_conv_bn(depths[-1], last, 1))
        self.layers = nn.Sequential(*layers)
        self.dropout = nn.Dropout(0.2)
        self.classifier = nn.Linear(last, classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.Linear):
                nn.init.kaiming_uniform_(m.weight, mode="fan_out", nonlinearity="sigmoid")
                _zero_bias(m)

    def forward(self, x: Tensor) -> Tensor:
        x = self.layers(x).mean([2, 3])
        logits: Tensor = self.classifier(self.dropout(x))
        return logits


# -------------------------------------------------------------------------- EfficientNet


#: EfficientNet-B0's stages: expand ratio, kernel, stride, input, output, layers.
_EFFICIENTNET_B0 = (
    (1, 3, 1, 32, 16, 1),
    (6, 3, 2, 16, 24, 2),
    (6, 5, 2, 24, 40, 2),
    (6, 3, 2, 40, 80, 3),
    (6, 5, 1, 80, 112, 3),
    (6, 5, 2, 112, 192, 4),
    (6, 3, 1, 192, 320, 1),
)


class EfficientNet(nn.Module):
    """EfficientNet-B0: SiLU stem, seven MBConv stages, 1x1 conv, pool, fc.

    Reduced: width multiplier 0.5, layers per stage (1, 2, 1, 2, 1, 1, 1) instead of
    (1, 2, 2, 3, 3, 4, 1), so four blocks keep their residual. torchvision's init: convs
    Kaiming-normal (fan-out), fc uniform within 1 / sqrt(classes), bias zero.
    """

    def __init__(
        self,
        *,
        width_mult: float = 0.5,
        layers: Sequence[int] = (1, 2, 1, 2, 1, 1, 1),
        classes: int = _CLASSES,
    ) -> None:
        super().__init__()

        def ch(c: int) -> int:
            return _make_divisible(c * width_mult)

        stem = ch(32)
        blocks: list[nn.Module] = [_conv_bn(3, stem, 3, 2, act=nn.SiLU, eps=0.001)]
        c_out = stem
        for (expand, kernel, stride, c_in, out, _), count in zip(
            _EFFICIENTNET_B0, layers, strict=True
        ):
            c_out = ch(out)
            for r in range(count):
                c_block = ch(c_in) if r == 0 else c_out
                blocks.append(
                    _InvertedResidual(
                        c_block,
                        c_block * expand,
                        c_out,
                        kernel,
                        stride if r == 0 else 1,
                        act=nn.SiLU,
                        se=(max(1, c_block // 4), nn.SiLU, nn.Sigmoid),
                        eps=0.001,
                    )
                )
        last = 4 * c_out
        blocks.append(_conv_bn(c_out, last, 1, act=nn.SiLU, eps=0.001))
        self.features = nn.Sequential(*blocks)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(0.2)
        self.classifier = nn.Linear(last, classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
                _zero_bias(m)
            elif isinstance(m, nn.Linear):
                bound = 1.0 / math.sqrt(m.out_features)
                nn.init.uniform_(m.weight, -bound, bound)
                _zero_bias(m)

    def forward(self, x: Tensor) -> Tensor:
        x = torch.flatten(self.avgpool(self.features(x)), 1)
        logits: Tensor = self.classifier(self.dropout(x))
        return logits


# --------------------------------------------------------------------------- ShuffleNetV2


def _channel_shuffle(x: Tensor, channels: int, groups: int = 2) -> Tensor:
    """Interleave ``groups`` channel groups; the channel count is static so FX traces."""
    x = torch.unflatten(x, 1, (groups, channels // groups))
    return torch.flatten(torch.transpose(x, 1, 2), 1, 2)


class _ShuffleBlock(nn.Module):
    """ShuffleNetV2 unit. Stride 1: split the channels, transform one half (1x1, dw 3x3,
    1x1), concatenate, shuffle. Stride 2: both halves see the whole input (dw 3x3/2 ->
    1x1 on the left branch), concatenate, shuffle."""

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.stride = stride
        self.c_out = c_out
        half = c_out // 2
        self.branch1: nn.Module | None = None
        if stride > 1:
            self.branch1 = nn.Sequential(
                _conv_bn(c_in, c_in, 3, stride, groups=c_in, act=None),
                _conv_bn(c_in, half, 1),
            )
        c_branch = c_in if stride > 1 else half
        self.branch2 = nn.Sequential(
            _conv_bn(c_branch, half, 1),
            _conv_bn(half, half, 3, stride, groups=half, act=None),
            _conv_bn(half, half, 1),
        )

    def forward(self, x: Tensor) -> Tensor:
        if self.branch1 is None:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), dim=1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
        return _channel_shuffle(out, self.c_out)


class ShuffleNetV2(nn.Module):
    """ShuffleNetV2 x0.5: 3x3/2 stem, max-pool, three shuffle stages, 1x1 conv,
    spatial mean, fc.

    Reduced: repeats (2, 3, 2) instead of (4, 8, 4), last conv 512 (not 1024); x0.5
    stage widths (48, 96, 192) as in torchvision. PyTorch's default init, as torchvision.
    """

    def __init__(
        self,
        *,
        repeats: Sequence[int] = (2, 3, 2),
        widths: Sequence[int] = (24, 48, 96, 192, 512),
        classes: int = _CLASSES,
    ) -> None:
        super().__init__()
        self.conv1 = _conv_bn(3, widths[0], 3, 2)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        blocks: list[nn.Module] = []
        c_in = widths[0]
        for count, c_out in zip(repeats, widths[1:4], strict=True):
            blocks.append(_ShuffleBlock(c_in, c_out, 2))
            blocks.extend(_ShuffleBlock(c_out, c_out, 1) for _ in range(count - 1))
            c_in = c_out
        self.stages = nn.Sequential(*blocks)
        self.conv5 = _conv_bn(c_in, widths[-1], 1)
        self.fc = nn.Linear(widths[-1], classes)

    def forward(self, x: Tensor) -> Tensor:
        x = self.conv5(self.stages(self.maxpool(self.conv1(x))))
        logits: Tensor = self.fc(x.mean([2, 3]))
        return logits


# ---------------------------------------------------------------------------- SqueezeNet


class _Fire(nn.Module):
    """Fire module: 1x1 squeeze (ReLU), then 1x1 and 3x3 expands (ReLU) joined by cat."""

    def __init__(self, c_in: int, squeeze: int, expand1x1: int, expand3x3: int) -> None:
        super().__init__()
        self.squeeze = nn.Conv2d(c_in, squeeze, 1)
        self.squeeze_activation = nn.ReLU()
        self.expand1x1 = nn.Conv2d(squeeze, expand1x1, 1)
        self.expand1x1_activation = nn.ReLU()
        self.expand3x3 = nn.Conv2d(squeeze, expand3x3, 3, padding=1)
        self.expand3x3_activation = nn.ReLU()
        self.out_channels = expand1x1 + expand3x3

    def forward(self, x: Tensor) -> Tensor:
        x = self.squeeze_activation(self.squeeze(x))
        return torch.cat(
            [
                self.expand1x1_activation(self.expand1x1(x)),
                self.expand3x3_activation(self.expand3x3(x)),
            ],
            1,
        )


class SqueezeNet(nn.Module):
    """SqueezeNet 1.1: 3x3/2 conv, max-pools between fire modules, 1x1 conv classifier,
    global average pool. No batch norm, like the original.

    Reduced: every width halved, six fire modules instead of eight (the last two
    dropped). torchvision's init: convs Kaiming-uniform with bias zero, the final
    conv normal std 0.01.
    """

    def __init__(self, *, classes: int = _CLASSES) -> None:
        super().__init__()
        fires = [
            (32, 8, 32, 32),
            (64, 8, 32, 32),
            None,
            (64, 16, 64, 64),
            (128, 16, 64, 64),
            None,
            (128, 24, 96, 96),
            (192, 24, 96, 96),
        ]
        layers: list[nn.Module] = [
            nn.Conv2d(3, 32, 3, 2),
            nn.ReLU(),
            nn.MaxPool2d(3, 2, ceil_mode=True),
        ]
        c_in = 32
        for row in fires:
            if row is None:
                layers.append(nn.MaxPool2d(3, 2, ceil_mode=True))
                continue
            fire = _Fire(*row)
            layers.append(fire)
            c_in = fire.out_channels
        self.features = nn.Sequential(*layers)
        self.final_conv = nn.Conv2d(c_in, classes, 1)
        self.classifier = nn.Sequential(
            nn.Dropout(0.5), self.final_conv, nn.ReLU(), nn.AdaptiveAvgPool2d(1)
        )
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                if m is self.final_conv:
                    nn.init.normal_(m.weight, mean=0.0, std=0.01)
                else:
                    nn.init.kaiming_uniform_(m.weight)
                _zero_bias(m)

    def forward(self, x: Tensor) -> Tensor:
        x = self.classifier(self.features(x))
        return torch.flatten(x, 1)


# ------------------------------------------------------------------------------ ConvNeXt


class _LayerNorm2d(nn.LayerNorm):
    """LayerNorm over the channels of an NCHW tensor, via permutes (as torchvision)."""

    def forward(self, x: Tensor) -> Tensor:
        x = x.permute(0, 2, 3, 1)
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class _CNBlock(nn.Module):
    """ConvNeXt block: depthwise 7x7, permute to channels-last, LayerNorm, Linear x4,
    GELU, Linear back, per-channel layer scale, permute back, residual add."""

    def __init__(self, dim: int, layer_scale: float) -> None:
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(4 * dim, dim)
        self.layer_scale = nn.Parameter(torch.full((dim, 1, 1), layer_scale))

    def forward(self, x: Tensor) -> Tensor:
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.fc2(self.act(self.fc1(self.norm(y)))).permute(0, 3, 1, 2)
        out: Tensor = x + self.layer_scale * y
        return out


class ConvNeXt(nn.Module):
    """ConvNeXt-T: 4x4/4 patchify stem with LayerNorm, four stages of ConvNeXt blocks,
    LayerNorm + 2x2/2 conv between stages, pool, LayerNorm, fc.

    Reduced: dims (32, 64, 128, 256) instead of (96, 192, 384, 768), depths
    (1, 1, 2, 1) instead of (3, 3, 9, 3), layer scale 0.1 (see the module docstring).
    torchvision's init: convs and linears truncated normal std 0.02, biases zero.
    """

    def __init__(
        self,
        *,
        dims: Sequence[int] = (32, 64, 128, 256),
        depths: Sequence[int] = (1, 1, 2, 1),
        layer_scale: float = 0.1,
        classes: int = _CLASSES,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = [
            nn.Sequential(nn.Conv2d(3, dims[0], 4, 4), _LayerNorm2d(dims[0], eps=1e-6))
        ]
        for index, (dim, depth) in enumerate(zip(dims, depths, strict=True)):
            if index > 0:
                layers.append(
                    nn.Sequential(
                        _LayerNorm2d(dims[index - 1], eps=1e-6),
                        nn.Conv2d(dims[index - 1], dim, 2, 2),
                    )
                )
            layers.extend(_CNBlock(dim, layer_scale) for _ in range(depth))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.norm = _LayerNorm2d(dims[-1], eps=1e-6)
        self.classifier = nn.Linear(dims[-1], classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d | nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                _zero_bias(m)

    def forward(self, x: Tensor) -> Tensor:
        x = self.norm(self.avgpool(self.features(x)))
        logits: Tensor = self.classifier(torch.flatten(x, 1))
        return logits


# ------------------------------------------------------------------------ Swin and ViT


def _attention(qkv: Tensor, heads: int, tokens: int, dim: int) -> Tensor:
    """Multi-head attention from a fused ``qkv`` projection ``(B', tokens, 3 * dim)``."""
    head_dim = dim // heads
    qkv = qkv.reshape(-1, tokens, 3, heads, head_dim).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    scores = torch.matmul(q * head_dim**-0.5, k.transpose(-2, -1))
    attn = torch.matmul(F.softmax(scores, dim=-1), v)
    return attn.transpose(1, 2).reshape(-1, tokens, dim)


class _Mlp(nn.Sequential):
    """Linear, GELU, Linear (dropout is the identity at inference)."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))


def _relative_position_index(window: int) -> Tensor:
    coords = torch.stack(torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij"))
    flat = torch.flatten(coords, 1)
    relative = (flat[:, :, None] - flat[:, None, :]).permute(1, 2, 0) + (window - 1)
    return (relative[:, :, 0] * (2 * window - 1) + relative[:, :, 1]).flatten()


def _shift_mask(size: int, window: int, shift: int) -> Tensor:
    """Swin's attention mask for shifted windows: ``(windows, W*W, W*W)``, -100 apart."""
    regions = torch.zeros(size, size)
    bounds = ((0, size - window), (size - window, size - shift), (size - shift, size))
    count = 0
    for h0, h1 in bounds:
        for w0, w1 in bounds:
            regions[h0:h1, w0:w1] = count
            count += 1
    regions = regions.view(size // window, window, size // window, window)
    regions = regions.permute(0, 2, 1, 3).reshape(-1, window * window)
    diff = regions.unsqueeze(1) - regions.unsqueeze(2)
    return torch.where(diff != 0, torch.tensor(-100.0), torch.tensor(0.0))


class _WindowAttention(nn.Module):
    """Swin's (shifted) window attention on a channels-last ``(B, H, W, C)`` map, with a
    learned relative position bias; ``qkv`` and ``proj`` are ``nn.Linear``."""

    relative_position_index: Tensor
    attn_mask: Tensor

    def __init__(self, dim: int, heads: int, size: int, window: int, shift: int) -> None:
        super().__init__()
        self.dim, self.heads, self.size, self.window = dim, heads, size, window
        self.shift = shift if window < size else 0
        self.windows = (size // window) ** 2
        self.tokens = window * window
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.relative_position_bias_table = nn.Parameter(torch.zeros((2 * window - 1) ** 2, heads))
        self.register_buffer("relative_position_index", _relative_position_index(window))
        mask = _shift_mask(size, window, self.shift) if self.shift else torch.zeros(1, 1, 1)
        self.register_buffer("attn_mask", mask)

    def _position_bias(self) -> Tensor:
        bias = self.relative_position_bias_table[self.relative_position_index]
        return bias.view(self.tokens, self.tokens, self.heads).permute(2, 0, 1).unsqueeze(0)

    def forward(self, x: Tensor) -> Tensor:
        s, w, c = self.size, self.window, self.dim
        if self.shift:
            x = torch.roll(x, shifts=(-self.shift, -self.shift), dims=(1, 2))
        x = (
            x.view(-1, s // w, w, s // w, w, c)
            .permute(0, 1, 3, 2, 4, 5)
            .reshape(-1, self.tokens, c)
        )
        bias = self._position_bias()
        if self.shift:
            bias = self.attn_mask.unsqueeze(1) + bias
        out = self._windowed_attention(self.qkv(x), bias)
        x = self.proj(out)
        x = x.view(-1, s // w, s // w, w, w, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, s, s, c)
        if self.shift:
            x = torch.roll(x, shifts=(self.shift, self.shift), dims=(1, 2))
        return x

    def _windowed_attention(self, qkv: Tensor, bias: Tensor) -> Tensor:
        """Attention within each window; ``bias``: ``(1 or windows, heads, T, T)``."""
        c, t, h = self.dim, self.tokens, self.heads
        parts = qkv.reshape(-1, self.windows, t, 3, h, c // h).permute(3, 0, 1, 4, 2, 5)
        q, k, v = parts[0], parts[1], parts[2]
        scores = torch.matmul(q * (c // h) ** -0.5, k.transpose(-2, -1)) + bias
        attn = torch.matmul(F.softmax(scores, dim=-1), v)
        return attn.permute(0, 1, 3, 2, 4).reshape(-1, t, c)


class _SwinBlock(nn.Module):
    """Pre-norm Swin block: x + attn(LN(x)), then x + MLP(LN(x))."""

    def __init__(self, dim: int, heads: int, size: int, window: int, shift: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = _WindowAttention(dim, heads, size, window, shift)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = _Mlp(dim, 4 * dim)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.norm1(x))
        out: Tensor = x + self.mlp(self.norm2(x))
        return out


class _PatchMerging(nn.Module):
    """Concatenate each 2x2 neighbourhood (4C), LayerNorm, Linear to 2C (no bias)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(4 * dim)
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        x0 = x[:, 0::2, 0::2, :]
        x1 = x[:, 1::2, 0::2, :]
        x2 = x[:, 0::2, 1::2, :]
        x3 = x[:, 1::2, 1::2, :]
        out: Tensor = self.reduction(self.norm(torch.cat([x0, x1, x2, x3], -1)))
        return out


class Swin(nn.Module):
    """Swin-T: 4x4/4 patch-embedding conv + LayerNorm, four stages of (shifted) window
    attention blocks with patch merging between, LayerNorm, pool, fc.

    Reduced: embedding 32 (not 96), depths (2, 2, 2, 2) instead of (2, 2, 6, 2), heads
    (1, 2, 4, 8), window 4 (not 7) on a 16x16 token map; a window as large as its map
    is not shifted, as in torchvision. torchvision's init: linears truncated normal std
    0.02 with bias zero, position-bias table truncated normal std 0.02.
    """

    def __init__(
        self,
        *,
        image: int = 64,
        embed: int = 32,
        depths: Sequence[int] = (2, 2, 2, 2),
        heads: Sequence[int] = (1, 2, 4, 8),
        window: int = 4,
        classes: int = _CLASSES,
    ) -> None:
        super().__init__()
        self.patch_embed = nn.Conv2d(3, embed, 4, 4)
        self.patch_norm = nn.LayerNorm(embed)
        size, dim = image // 4, embed
        layers: list[nn.Module] = []
        for index, (depth, head) in enumerate(zip(depths, heads, strict=True)):
            if index > 0:
                layers.append(_PatchMerging(dim))
                size, dim = size // 2, dim * 2
            win = min(window, size)
            for block in range(depth):
                layers.append(_SwinBlock(dim, head, size, win, 0 if block % 2 == 0 else win // 2))
        self.features = nn.Sequential(*layers)
        self.norm = nn.LayerNorm(dim)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(dim, classes)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                _zero_bias(m)
            elif isinstance(m, _WindowAttention):
                nn.init.trunc_normal_(m.relative_position_bias_table, std=0.02)

    def forward(self, x: Tensor) -> Tensor:
        x = self.patch_norm(self.patch_embed(x).permute(0, 2, 3, 1))
        x = self.norm(self.features(x)).permute(0, 3, 1, 2)
        logits: Tensor = self.head(torch.flatten(self.avgpool(x), 1))
        return logits


class _GlobalAttention(nn.Module):
    """Global multi-head self-attention over all tokens, ``nn.Linear`` qkv and proj."""

    def __init__(self, dim: int, heads: int, tokens: int) -> None:
        super().__init__()
        self.dim, self.heads, self.tokens = dim, heads, tokens
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: Tensor) -> Tensor:
        out: Tensor = self.proj(_attention(self.qkv(x), self.heads, self.tokens, self.dim))
        return out


class EncoderBlock(nn.Module):
    """Pre-norm ViT encoder block: x + attn(LN(x)), then x + MLP(LN(x)). Public: a
    transformer encoder layer for tests and benchmarks (FX-traceable and exportable)."""

    def __init__(self, dim: int, heads: int, tokens: int, mlp: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim, eps=1e-6)
        self.self_attention = _GlobalAttention(dim, heads, tokens)
        self.ln_2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = _Mlp(dim, mlp)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.self_attention(self.ln_1(x))
        out: Tensor = x + self.mlp(self.ln_2(x))
        return out


class ViT(nn.Module):
    """ViT-B/16: patch-embedding conv, class token, position embedding, pre-norm encoder
    blocks with global attention, LayerNorm, linear head on the class token.

    Reduced: 8x8 patches on 64 px (64 tokens + class token), width 64 (not 768), 4 heads
    (not 12), 4 blocks (not 12), MLP 256 (not 3072). torchvision's init: patch conv
    truncated normal std sqrt(1 / fan-in), position embedding normal std 0.02, MLP
    linears Xavier-uniform with bias normal std 1e-6, attention Xavier-uniform; the head
    is truncated normal std 0.02 and the class token standard normal (torchvision
    zeroes both; see the module docstring).
    """

    def __init__(
        self,
        *,
        image: int = 64,
        patch: int = 8,
        dim: int = 64,
        heads: int = 4,
        depth: int = 4,
        mlp: int = 256,
        classes: int = _CLASSES,
    ) -> None:
        super().__init__()
        self.dim = dim
        self.patches = (image // patch) ** 2
        tokens = self.patches + 1
        self.conv_proj = nn.Conv2d(3, dim, patch, patch)
        self.class_token = nn.Parameter(torch.randn(1, 1, dim))
        self.pos_embedding = nn.Parameter(torch.empty(1, tokens, dim).normal_(std=0.02))
        self.encoder = nn.Sequential(
            *(EncoderBlock(dim, heads, tokens, mlp) for _ in range(depth))
        )
        self.ln = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, classes)
        fan_in = 3 * patch * patch
        nn.init.trunc_normal_(self.conv_proj.weight, std=math.sqrt(1 / fan_in))
        _zero_bias(self.conv_proj)
        for block in self.encoder:
            assert isinstance(block, EncoderBlock)
            for m in block.mlp:
                if isinstance(m, nn.Linear):
                    nn.init.xavier_uniform_(m.weight)
                    nn.init.normal_(m.bias, std=1e-6)
            nn.init.xavier_uniform_(block.self_attention.qkv.weight)
            _zero_bias(block.self_attention.qkv)
            _zero_bias(block.self_attention.proj)
        nn.init.trunc_normal_(self.head.weight, std=0.02)
        _zero_bias(self.head)

    def forward(self, x: Tensor) -> Tensor:
        x = self.conv_proj(x).reshape(-1, self.dim, self.patches).permute(0, 2, 1)
        cls = self.class_token.expand(x.shape[0], -1, -1)
        x = torch.cat([cls, x], dim=1) + self.pos_embedding
        x = self.ln(self.encoder(x))
        logits: Tensor = self.head(x[:, 0])
        return logits


# ------------------------------------------------------------------------------ registry


def _images(size: int, batch: int = 4) -> Callable[[], Inputs]:
    """ImageNet-like inputs: normalised pixels, roughly zero mean and unit variance."""
    return lambda: (torch.randn(batch, 3, size, size),)


def _cases() -> list[ModelCase]:
    conv = {"conv2d", "bn", "relu", "add"}
    mobile = {"conv2d", "bn", "depthwise"}
    attention = {"conv2d", "layernorm", "linear", "matmul", "softmax", "gelu", "add"}
    rows: list[tuple[str, Callable[[], nn.Module], set[str]]] = [
        ("resnet50", ResNet50, conv | {"maxpool"}),
        ("googlenet", GoogLeNet, {"conv2d", "bn", "relu", "cat", "maxpool"}),
        ("densenet121", DenseNet121, {"conv2d", "bn", "relu", "cat", "avgpool"}),
        ("regnet", RegNet, conv | {"group_conv", "se", "sigmoid", "mul"}),
        ("mobilenet_v3", MobileNetV3, mobile | {"hardswish", "hardsigmoid", "se", "add", "linear"}),
        ("mnasnet", MnasNet, mobile | {"relu", "add", "mean"}),
        ("efficientnet", EfficientNet, mobile | {"silu", "se", "sigmoid", "mul", "add"}),
        ("shufflenet_v2", ShuffleNetV2, mobile | {"relu", "chunk", "cat", "shuffle"}),
        ("squeezenet", SqueezeNet, {"conv2d", "relu", "cat", "maxpool"}),
        (
            "convnext",
            ConvNeXt,
            {"conv2d", "depthwise", "layernorm", "permute", "gelu", "linear", "mul", "add"},
        ),
        ("swin", partial(Swin, image=64), attention | {"roll"}),
        ("vit", partial(ViT, image=64), attention | {"cat"}),
    ]
    return [
        ModelCase(name, build, _images(64), frozenset(families)) for name, build, families in rows
    ]


def architecture_cases() -> list[ModelCase]:
    """Every replica, in the order the issue lists them (ResNet-50 first, ViT last)."""
    return _cases()


def architecture(name: str) -> ModelCase:
    """The replica called ``name``; a ``KeyError`` lists the known names otherwise."""
    cases = {c.name: c for c in _cases()}
    if name not in cases:
        raise KeyError(f"no architecture {name!r}; known: {', '.join(cases)}")
    return cases[name]
