"""The four workloads of issue 27, as ``benchmarks/x86_int8.py`` times them: ResNet-18
(batch 8, 112 px), a MobileNetV2-style net (batch 32, 64 px), a BERT-style encoder layer
(batch 8, seq 128, d 256, 4 heads, ff 1024) and an MLP 512 -> 2048 -> 2048 -> 10 (batch
64). Plain PyTorch, seeded random weights, batch-norm statistics settled on random
batches; four random calibration batches (``calibration``). The benchmark and
``test_budgeted_default.py`` build them from here, so the models timed are the models
tested.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

WORKLOADS = ("resnet18", "mobilenet_v2", "bert", "mlp")


_CALL = re.compile(r"^\s*(?:(\w+) = )?torch\.ops\.onednn\.(qconv|qlinear)\w*\.(\w+)\((.*)\)$", re.M)
_PACKED = re.compile(r"^(_qinductor_x86_packed\d+) = None  # .*? torch\.int8 \(([\d, ]*)\)", re.M)
_SHAPED = re.compile(
    r"(?:^\s*(\w+) = (?:empty_strided_cpu|reinterpret_tensor\(\w+,)|assert_(?:size_stride|tensor_metadata)\((\w+),) \(\(?([\d, ]*)\)",
    re.M,
)
_ALIAS = re.compile(r"^\s*(\w+) = (\w+)(?:;|$)", re.M)


def _sizes(text: str) -> list[int]:
    return [int(s) for s in text.split(",") if s.strip()]


def _arguments(text: str) -> list[str]:
    """A call's top-level arguments, as written."""
    found, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += char in "(["
        depth -= char in ")]"
        if char == "," and depth == 0:
            found.append(text[start:i].strip())
            start = i + 1
    return [*found, text[start:].strip()]


def compiled_int8_macs(code: str) -> tuple[int, int]:
    """(multiply-adds, calls) of the oneDNN int8 kernels in Inductor's generated ``code``
    for this package's lowering: each call's packed weight (a doubled reduction's holds
    twice the input channels) times its output positions. The output is the buffer the
    call returns, or, for an in-place sum, the one it accumulates into, its shape read
    from its allocation, view or size assertion. Raises ``ValueError`` on a kernel whose
    packed weight or output shape the code does not show (torchao's own packing, say)."""
    packed = {name: math.prod(_sizes(shape)) for name, shape in _PACKED.findall(code)}
    shapes: dict[str, list[int]] = {}
    for assigned, asserted, shape in _SHAPED.findall(code):
        shapes.setdefault(assigned or asserted, _sizes(shape))
    aliases = dict(_ALIAS.findall(code))
    total = calls = 0
    for result, kind, overload, args in _CALL.findall(code):
        arguments = _arguments(args)
        weight = arguments[3]
        if weight not in packed:
            raise ValueError(f"{kind}: packed weight {weight} not in the code")
        output = result or arguments[6]  # an in-place sum writes into its accumulator
        view = re.match(r"reinterpret_tensor\((\w+), \(([\d, ]*)\)", output)
        if view:
            sizes = _sizes(view.group(2))
        else:
            while output not in shapes and output in aliases:
                output = aliases[output]
            if output not in shapes:
                raise ValueError(f"{kind}.{overload}: no shape for {output}")
            sizes = shapes[output]
        channels = sizes[1] if kind == "qconv" else sizes[-1]
        total += packed[weight] * math.prod(sizes) // channels
        calls += 1
    return total, calls


def single_depth_macs(model: Any, x: Any) -> int:
    """Multiply-adds of the float ``model``'s convs and linears on ``x``."""
    import torch
    from torch import nn

    macs: list[int] = []

    def count(module: Any, _: Any, out: Any) -> None:
        channels = out.shape[1] if isinstance(module, nn.Conv2d) else out.shape[-1]
        macs.append(module.weight.numel() * out.numel() // channels)

    hooks = [m.register_forward_hook(count) for m in model.modules() if isinstance(m, nn.Conv2d | nn.Linear)]
    with torch.no_grad():
        model(x)
    for hook in hooks:
        hook.remove()
    return sum(macs)


def calibration(x: Any) -> list[Any]:
    """Four random batches shaped like ``x`` (seed 2)."""
    import torch

    generator = torch.Generator().manual_seed(2)
    return [torch.randn(x.shape, generator=generator) for _ in range(4)]


def models() -> dict[str, Callable[[], tuple[Any, Any]]]:
    import torch
    from torch import nn

    def conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1) -> list[nn.Module]:
        return [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]

    class BasicBlock(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.body = nn.Sequential(*conv_bn(cin, cout, 3, stride), nn.ReLU(), *conv_bn(cout, cout, 3))
            self.skip = nn.Sequential(*conv_bn(cin, cout, 1, stride)) if stride != 1 or cin != cout else nn.Identity()
            self.relu = nn.ReLU()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.relu(self.body(x) + self.skip(x))

    def resnet18() -> nn.Module:
        layers: list[nn.Module] = [*conv_bn(3, 64, 7, 2), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
        cin = 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000)]
        return nn.Sequential(*layers)

    class InvertedResidual(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
            super().__init__()
            hidden = cin * expand
            layers: list[nn.Module] = []
            if expand != 1:
                layers += [*conv_bn(cin, hidden, 1), nn.ReLU6()]
            layers += [*conv_bn(hidden, hidden, 3, stride, hidden), nn.ReLU6(), *conv_bn(hidden, cout, 1)]
            self.body = nn.Sequential(*layers)
            self.residual = stride == 1 and cin == cout

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.body(x) if self.residual else self.body(x)

    def mobilenet_v2() -> nn.Module:
        layers: list[nn.Module] = [*conv_bn(3, 32, 3, 2), nn.ReLU6()]
        cin = 32
        for expand, cout, repeats, stride in (
            (1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
            (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1),
        ):
            for i in range(repeats):
                layers.append(InvertedResidual(cin, cout, stride if i == 0 else 1, expand))
                cin = cout
        layers += [*conv_bn(cin, 1280, 1), nn.ReLU6(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(1280, 1000)]
        return nn.Sequential(*layers)

    class EncoderLayer(nn.Module):
        def __init__(self, d: int = 256, heads: int = 4, ff: int = 1024) -> None:
            super().__init__()
            self.heads = heads
            self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
            self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, d = x.shape
            h = self.heads

            def split(y: torch.Tensor) -> torch.Tensor:
                return y.view(b, t, h, d // h).transpose(1, 2)

            q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
            attention = torch.matmul(q, k.transpose(-2, -1)) / (d // h) ** 0.5
            y = torch.matmul(attention.softmax(-1), v).transpose(1, 2).reshape(b, t, d)
            x = self.norm1(x + self.o(y))
            return self.norm2(x + self.ff2(nn.functional.gelu(self.ff1(x))))

    def mlp() -> nn.Module:
        return nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10))

    def settle_batch_norm(model: nn.Module, shape: tuple[int, ...]) -> None:
        """Running statistics from a few random batches, so that activations keep a
        realistic scale through the network (eval-mode batch norm with its initial
        statistics makes a deep random net's output nearly constant)."""
        norms = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
        if not norms:
            return
        for m in norms:
            m.momentum = None  # a plain average over the batches below
        model.train()
        generator = torch.Generator().manual_seed(3)
        with torch.no_grad():
            for _ in range(4):
                model(torch.randn(*shape, generator=generator))

    def make(build: Callable[[], nn.Module], *shape: int) -> Callable[[], tuple[Any, Any]]:
        def made() -> tuple[Any, Any]:
            torch.manual_seed(0)
            model = build()
            settle_batch_norm(model, shape)
            generator = torch.Generator().manual_seed(1)
            return model.eval(), torch.randn(*shape, generator=generator)

        return made

    return {
        "resnet18": make(resnet18, 8, 3, 112, 112),
        "mobilenet_v2": make(mobilenet_v2, 32, 3, 64, 64),
        "bert": make(EncoderLayer, 8, 128, 256),
        "mlp": make(mlp, 64, 512),
    }
