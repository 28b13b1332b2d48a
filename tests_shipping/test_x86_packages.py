"""GPT-2 and BERT from the Hugging Face zoo (``qcore.testing.transformers_zoo``), quantized
by the x86 quantizer and compiled ahead of time by AOTInductor under the x86 lowering,
into one package: it calls oneDNN's int8 kernels, loads in a fresh interpreter where
qcore, its plugins and torchao cannot be imported, and computes what the eager converted
model does. One compile: AOTInductor builds C++, which is slow.

This is the VNNI route (``qcore.host.targeting("avx512_vnni")``: every op on a single-depth
reduction, full-range weights), with 7-bit activations (``reduce_range=True``), which no
CPU's 16-bit pair sums can overflow: the package is exact on any CPU, and the deployed
side runs it on oneDNN's AVX2 kernels to show it. The AVX2 route (doubled reductions) is
``test_shipping_guide.py``'s package.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from shipped import deployed_outputs, package_int8_calls, run_deployed
from torch import nn
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

import qcore
from qcore.metrics import sqnr
from qcore.testing.transformers_zoo import HELD_OUT, build

NAMES = ("gpt2", "bert")
#: The zoo's accuracy bound against the float model (tests/test_transformers_flows.py).
MIN_SQNR_VS_FLOAT = 25.0
#: Against the eager converted model: equal int8 codes leave only fp32 rounding between
#: the two (over 120 dB); a requantize tie broken the other way moves one code by 1, about
#: 60 dB on a hidden state; saturated or misread kernels cost 20 - 30 dB.
MIN_SQNR_VS_EAGER = 40.0
LINEAR = "aten.linear.default"


class Both(nn.Module):
    """GPT-2 and BERT on the same token ids and attention mask: one program, one compile."""

    def __init__(self) -> None:
        super().__init__()
        self.models = nn.ModuleList(build(name)[0] for name in NAMES)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(model(ids, mask) for model in self.models)


def _tokens(seed: int) -> tuple[torch.Tensor, ...]:
    _, inputs = build(NAMES[0])  # both take the zoo's token ids and padded mask
    return inputs(seed)


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("x86")
    model, held_out = Both().eval(), _tokens(HELD_OUT)
    with qcore.host.targeting("avx512_vnni"):
        prepared = prepare_pt2e(
            qcore.export(model, _tokens(0)), qcore.get_quantizer("x86", reduce_range=True)
        )
        with torch.no_grad():
            for seed in range(1, 5):
                prepared(*_tokens(seed))
        converted = convert_pt2e(prepared)
        torch._dynamo.reset()
        with torch.no_grad(), qcore.get_lowering("x86"):
            path = torch._inductor.aoti_compile_and_package(
                torch.export.export(converted, held_out),
                package_path=str(folder / "gpt2_bert.pt2"),
                inductor_configs={"freezing": True, "fx_graph_cache": False},
            )
        torch._dynamo.reset()
    with torch.no_grad():
        eager, reference = converted(*held_out), model(*held_out)
    torch.save({"input": held_out, "output": list(eager)}, folder / "gpt2_bert.golden.pt")
    report = run_deployed("torch-only", [Path(path)], env={"ONEDNN_MAX_CPU_ISA": "AVX2"})
    linears = sum(
        1
        for n in converted.graph.nodes
        if str(n.target) == LINEAR and "dequantize" in str(getattr(n.args[1], "target", ""))
    )
    return {
        "file": Path(path),
        "report": report,
        "eager": list(eager),
        "reference": list(reference),
        "linears": linears,
    }


def test_the_package_calls_a_onednn_int8_kernel_for_every_quantized_linear(package: dict[str, Any]) -> None:
    """Counted in the C++ the package holds, against the converted program's int8 linears
    (GPT-2's ``Conv1D`` projections included: the x86 quantizer takes them as linears)."""
    assert package["linears"] == 20  # GPT-2: 2 layers x 4 projections; BERT: 2 x 6
    assert package_int8_calls(package["file"]) == package["linears"]


@pytest.mark.parametrize("index", range(len(NAMES)), ids=NAMES)
def test_the_package_runs_without_qcore_as_its_eager_model(package: dict[str, Any], index: int) -> None:
    """>= 40 dB against the eager converted model (see MIN_SQNR_VS_EAGER) on oneDNN's AVX2
    kernels, where only torch is importable; >= 25 dB against float."""
    assert package["report"]["imported"] == []
    output = deployed_outputs(package["file"])[index]
    assert sqnr(package["eager"][index], output) >= MIN_SQNR_VS_EAGER
    assert sqnr(package["reference"][index], output) >= MIN_SQNR_VS_FLOAT
