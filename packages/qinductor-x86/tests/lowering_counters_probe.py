"""Compile every graph of the counter zoo once and record torch's counters, on one side,
in the interpreter of its mode (``probe_modes.py``; which x86 int8 passes exist is
process-wide and permanent):

* torch's side (mode ``reference``): torch 2.13's built-in passes, with torchao's x86
  quantizer module imported as users import it (it registers torchao's passes too); no
  lowering of ours;
* ours (mode ``standalone``): torch's copy switched off before the first compile, torchao's
  quantizer module never imported with side effects; this package's lowering installed.

Both sides quantize the same models with this package's x86 quantizer, weights narrowed
to [-64, 64] (``lowering_zoo.narrow_weights``) so that nothing can saturate and nothing
is split on any CPU. Per graph: ``counters["inductor"]`` after the compile, the oneDNN
kernels Inductor's generated code calls, the compiled output against the eager one, and
whether the compiled model left its inputs as they were.
"""

from __future__ import annotations

import copy
import re
import traceback
from collections.abc import Callable
from typing import Any

import lowering_zoo as zoo
import torch
import torch.nn.functional as F
from torch import nn

from qcore._torch_private import reused_pattern_graphs
from qcore.metrics import sqnr
from qinductor_x86.quantizer.x86_inductor_quantizer import (
    X86InductorQuantizer,
    get_default_x86_inductor_quantization_config,
    get_x86_inductor_linear_dynamic_fp16_config,
)

#: Every oneDNN kernel (int8 and fp16 alike) and int8 weight-only matmul Inductor's
#: generated code calls.
_KERNEL_CALL = re.compile(r"torch\.ops\.onednn\.(\w+)\.\w+\(|(_weight_int8pack_mm)\(")


# graphs ------------------------------------------------------------------------------


class ConvUnary(nn.Module):
    """conv -> unary -> conv (no bias) -> unary: an int8-output fusion, then a float one
    (torchao's ``_qconv2d_unary_test_helper`` shape)."""

    def __init__(self, unary: Callable[[], nn.Module], dims: int = 2) -> None:
        super().__init__()
        conv = nn.Conv2d if dims == 2 else nn.Conv1d
        self.conv, self.conv2 = conv(3, 8, 3), conv(8, 8, 3, bias=False)
        self.u1, self.u2 = unary(), unary()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.u2(self.conv2(self.u1(self.conv(x))))


class ConvAdd(nn.Module):
    """Two residual adds of conv outputs, the first optionally followed by relu."""

    def __init__(self, relu: bool) -> None:
        super().__init__()
        self.c1, self.c2, self.c3, self.c4 = (nn.Conv2d(c, 8, 3, padding=1) for c in (3, 3, 8, 8))
        self.relu = relu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.c1(x) + self.c2(x)
        y = F.relu(y) if self.relu else y
        z = self.c3(y) + self.c4(y)
        return F.relu(z) if self.relu else z


class ConvBn(nn.Module):
    """conv -> bn -> relu -> conv -> bn, quantized for QAT (the folded bn leaves a clone)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8)
        self.conv2, self.bn2 = nn.Conv2d(8, 8, 3), nn.BatchNorm2d(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn2(self.conv2(F.relu(self.bn(self.conv(x)))))


class SharedActivation(nn.Module):
    """A quantized activation read by two convs (dequant promotion), summed."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 6, 2, stride=2)
        self.c2, self.c3 = nn.Conv2d(6, 6, 2, stride=2), nn.Conv2d(6, 6, 2, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.c1(x)
        return self.c2(y) + self.c3(y)


class ConvCat(nn.Module):
    """Two convs concatenated, then a third conv."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.c2, self.c3 = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(3, 8, 1), nn.Conv2d(16, 8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c3(torch.cat([self.c1(x), self.c2(x)], 1))


class ConvMaxPool(nn.Module):
    """conv -> relu -> max-pool -> conv (torchao's ``test_qmaxpool2d`` shape)."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c2(F.max_pool2d(F.relu(self.c1(x)), 3, 2, 1))


class LinearUnary(nn.Module):
    """linear -> unary -> linear -> unary."""

    def __init__(self, unary: Callable[[], nn.Module], bias: bool = True) -> None:
        super().__init__()
        self.l1, self.l2 = nn.Linear(16, 16, bias=bias), nn.Linear(16, 16, bias=bias)
        self.u1, self.u2 = unary(), unary()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.u2(self.l2(self.u1(self.l1(x))))


class LinearAddLinear(nn.Module):
    """Two linear outputs added (neither a residual input), then relu and a linear."""

    def __init__(self) -> None:
        super().__init__()
        self.l1, self.l2, self.l3 = (nn.Linear(16, 16) for _ in range(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.l3(F.relu(self.l1(x) + self.l2(x)))


class SideBySide(nn.Module):
    """Graphs of one family on the same input, each with its own output: one compile for
    several patterns, each still in a chain of its own (the input's dequantize, read by
    each, is promoted to every reader, as for any activation read twice)."""

    def __init__(self, *graphs: nn.Module) -> None:
        super().__init__()
        self.graphs = nn.ModuleList(graphs)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(graph(x) for graph in self.graphs)


def _x(*shape: int) -> tuple[torch.Tensor, ...]:
    return (zoo.example(*shape, shift=0.5),)


#: name -> (model factory, inputs, quantizer config name)
GRAPHS: dict[str, tuple[Callable[[], nn.Module], tuple[torch.Tensor, ...], str]] = {
    "conv + relu, relu6, hardtanh, hardswish, silu": (
        lambda: SideBySide(*(ConvUnary(u) for u in (nn.ReLU, nn.ReLU6, nn.Hardtanh, nn.Hardswish, nn.SiLU))),
        _x(1, 3, 10, 10),
        "static",
    ),
    "conv1d + relu": (lambda: ConvUnary(nn.ReLU, dims=1), _x(2, 3, 16), "static"),
    "conv + add (+ relu)": (lambda: SideBySide(ConvAdd(relu=False), ConvAdd(relu=True)), _x(1, 3, 8, 8), "static"),
    "QAT conv + bn + relu": (ConvBn, _x(2, 3, 10, 10), "qat"),
    "dequant promotion": (SharedActivation, _x(1, 3, 16, 16), "static"),
    "conv + cat": (ConvCat, _x(1, 3, 8, 8), "static"),
    "conv + maxpool": (ConvMaxPool, _x(1, 3, 10, 10), "static"),
    "pool, cat, flatten (zoo)": (zoo.PoolCat, _x(2, 4, 16, 16), "static"),
    "conv stem (zoo)": (zoo.ConvStem, _x(2, 3, 12, 12), "static"),
    "linear + relu, gelu": (
        lambda: SideBySide(LinearUnary(nn.ReLU), LinearUnary(nn.GELU, bias=False)), _x(4, 16), "static"
    ),
    "linear + add (+ relu)": (zoo.LinearResidual, _x(4, 24), "static"),
    "linear + linear + relu": (LinearAddLinear, _x(4, 16), "static"),
    "linear, 3-D inputs": (zoo.Linear3D, _x(2, 3, 16), "static"),
    "attention block": (zoo.Attention, _x(2, 5, 32), "static"),
    "MLP, dynamic": (zoo.MLP, _x(8, 32), "dynamic"),
    # (3-D: torch 2.13 has no weight-only pattern for a linear on a 2-D input)
    "int8 weight-only linear, 3-D": (
        zoo.WeightOnlyLinear,
        (zoo.example(2, 3, 32).to(torch.bfloat16),),
        "none",
    ),
    "fp16 dynamic linear + relu": (lambda: LinearUnary(nn.ReLU), _x(4, 16), "fp16"),
    "fp16 dynamic linear, 3-D": (zoo.Linear3D, _x(2, 3, 16), "fp16"),
}


def _quantizer(config: str) -> X86InductorQuantizer:
    quantizer = X86InductorQuantizer()
    if config == "fp16":
        quantizer.set_module_type_qconfig(nn.Linear, get_x86_inductor_linear_dynamic_fp16_config())
    else:
        quantizer.set_global(
            get_default_x86_inductor_quantization_config(
                is_qat=config == "qat", is_dynamic=config == "dynamic"
            )
        )
    return quantizer


def quantize(model: nn.Module, inputs: tuple[torch.Tensor, ...], config: str) -> Any:
    """The PT2E flow as torchao's fusion tests run it (QAT: prepare_qat_pt2e on the model in
    training mode, then moved to eval)."""
    from torchao.quantization.pt2e import move_exported_model_to_eval
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_qat_pt2e

    if config != "qat":
        return zoo.quantize(model, inputs, _quantizer(config))
    # torchao's conv-bn rewrites export their patterns for every conv function; only the
    # conv2d ones can match here (as in every test session: the root conftest.py)
    with reused_pattern_graphs():
        exported = torch.export.export(model.train(), inputs).module()
        prepared = prepare_qat_pt2e(exported, _quantizer(config))
        prepared(*inputs)
        move_exported_model_to_eval(prepared)
        return convert_pt2e(prepared)


def torchs_lift_ups(converted: torch.fx.GraphModule) -> int:
    """How many quantizes torch's own pre-grad lift-up moves on this graph (torchao's copy,
    which runs first in the compile, lifts the same ones without counting)."""
    from torch._dynamo.utils import counters
    from torch._inductor.fx_passes.quantization import quant_lift_up

    before = counters["inductor"]["quant_lift_up_count"]
    quant_lift_up(copy.deepcopy(converted))
    return counters["inductor"]["quant_lift_up_count"] - before


#: What our lowering targets, alternating over the graphs so that both of its routes are
#: taken in one run (narrowed weights split on neither; torch's side ignores it).
TARGETS = ("avx2", "avx512_vnni")


def measure(name: str, ours: bool) -> dict[str, Any]:
    factory, inputs, config = GRAPHS[name]
    torch.manual_seed(0)
    converted = factory().eval()
    if config != "none":  # (a model that holds its int8 weights itself)
        converted = zoo.narrow_weights(quantize(converted, inputs, config))
    lift_ups = torchs_lift_ups(converted) if not ours and config != "none" else None
    target = TARGETS[list(GRAPHS).index(name) % len(TARGETS)] if ours else None
    used = tuple(t.clone() for t in inputs)
    result = zoo.lower(converted, used, target=target, lowered=ours)
    return {
        # (torch's copy writes into a linear's residual input, for linear + x)
        "inputs_unchanged": all(torch.equal(a, b) for a, b in zip(inputs, used, strict=True)),
        "target": target,
        "lowered": dict(result.report.lowered) if ours else None,
        "reported_kernels": result.report.int8_kernels if ours else None,
        "counters": result.counters,
        "kernels": sorted("".join(groups) for groups in _KERNEL_CALL.findall(result.code)),
        "codes": result.codes_json(),
        "sqnr_vs_eager": min(
            sqnr(eager, output)
            for eager, output in zip(zoo.as_tuple(result.eager), zoo.as_tuple(result.output), strict=True)
        ),
        "torchs_lift_ups": lift_ups,
    }


def measure_all(ours: bool) -> dict[str, Any]:
    """Every graph, compiled by this package's lowering (``ours``) or by the passes the
    process registered (torch's and torchao's); an error is reported as the graph's result."""
    results: dict[str, Any] = {}
    for name in GRAPHS:
        try:
            results[name] = measure(name, ours)
        except Exception:  # noqa: BLE001 - upstream passes may raise on graphs they do not support
            results[name] = {"error": traceback.format_exc()[-3000:]}
    return results
