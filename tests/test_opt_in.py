"""An opt-in annotator means one thing on every quantizer (``Annotator.opt_in`` in
``qcore.pt2e.annotation.registry``): the global config leaves it out unless it is enabled by
name, and any scoped config runs it within its scope. The same calls on x86's and
XNNPACK's quantizers give the same answer, read off the converted graph: whether each
quantizer's opt-in op (x86's ``matmul``, XNNPACK's GRU) reads dequantized int8.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import Tensor, nn
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from qcore.pt2e.annotation.registry_quantizer import RegistryQuantizer
from qinductor_x86.quantizer import (
    X86InductorQuantizer,
    get_default_x86_inductor_quantization_config,
)
from qquantizer_xnnpack.quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

aten = torch.ops.aten
DEQUANTIZE = torch.ops.quantized_decomposed.dequantize_per_tensor.default
QUANTIZE = torch.ops.quantized_decomposed.quantize_per_tensor.default

#: quantizer, its config, its opt-in annotator and the op that annotator quantizes
QUANTIZERS = {
    "x86": (X86InductorQuantizer, get_default_x86_inductor_quantization_config, "matmul",
            aten.matmul.default),
    "xnnpack": (XNNPACKQuantizer, get_symmetric_quantization_config, "gru_io_only",
                aten.gru.input),
}  # fmt: skip


class Block(nn.Module):
    """Both quantizers' opt-in patterns: a GRU (returning both outputs, as its annotator
    needs) and a matmul."""

    def __init__(self) -> None:
        super().__init__()
        self.rnn, self.fc = nn.GRU(4, 4), nn.Linear(4, 4)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        y, h = self.rnn(x)
        y = self.fc(y)
        return torch.matmul(y, y.transpose(-1, -2)), h


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = Block()

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        return self.block(x)  # type: ignore[no-any-return]


class ConvPool(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x: Tensor) -> Tensor:
        return nn.functional.max_pool2d(self.conv(x), 2)


def _converted(quantizer: RegistryQuantizer, model: nn.Module, example: Tensor) -> Any:
    gm = torch.export.export(model.eval(), (example,)).module()
    prepared = prepare_pt2e(gm, quantizer)
    prepared(example)
    return convert_pt2e(prepared)


def _reads_int8(converted: Any, op: Any) -> bool:
    """Whether an input of the ``op`` node is dequantized from int8 (its activation is
    quantized)."""
    (node,) = [n for n in converted.graph.nodes if n.target is op]
    return any(arg.target is DEQUANTIZE for arg in node.all_input_nodes)


#: (what the calls do, the calls on a quantizer and its config, whether the opt-in op of
#: that quantizer is quantized)
SCOPES: list[tuple[str, Callable[[RegistryQuantizer, Any, str], Any], bool]] = [
    ("global alone", lambda q, c, name: q.set_global(c), False),
    ("global, enabled by name", lambda q, c, name: q.set_global(c).enable(name), True),
    ("module name", lambda q, c, name: q.set_global(c).set_module_name("block", c), True),
    ("module name, no global", lambda q, c, name: q.set_module_name("block", c), True),
    ("module type", lambda q, c, name: q.set_module_type(Block, c), True),
]


@pytest.mark.parametrize("backend", sorted(QUANTIZERS))
@pytest.mark.parametrize("scope", SCOPES, ids=[s[0] for s in SCOPES])
def test_a_scoped_config_runs_an_opt_in_annotator_on_every_quantizer(
    backend: str, scope: tuple[str, Callable[..., Any], bool]
) -> None:
    quantizer_class, config, name, op = QUANTIZERS[backend]
    _, configure, quantized = scope
    quantizer = quantizer_class()
    configure(quantizer, config(), name)
    converted = _converted(quantizer, Net(), torch.randn(5, 1, 4))
    assert _reads_int8(converted, op) is quantized


@pytest.mark.parametrize("backend", sorted(QUANTIZERS))
def test_an_operator_config_for_max_pool2d_quantizes_it_on_every_quantizer(backend: str) -> None:
    """``max_pool2d`` is opt-in on XNNPACK (ExecuTorch 1.5.1 leaves it to qparam
    propagation) and not on x86: the same operator config quantizes it on both, its
    input and output on the conv's int8 grid."""
    quantizer_class, config, _, _ = QUANTIZERS[backend]
    op = aten.max_pool2d.default
    quantizer = quantizer_class().set_global(config()).set_operator_type(op, config())
    converted = _converted(quantizer, ConvPool(), torch.randn(1, 3, 8, 8))
    assert _reads_int8(converted, op)
    (pool,) = [n for n in converted.graph.nodes if n.target is op]
    assert [u.target for u in pool.users] == [QUANTIZE]
