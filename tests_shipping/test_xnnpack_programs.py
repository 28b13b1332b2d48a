"""The XNNPACK quantizer's output as ExecuTorch programs: every model of the Hugging Face
zoo (``qcore.testing.transformers_zoo``) and a model of functional convolutions go
through ExecuTorch 1.5.1's ``to_edge_transform_and_lower`` with the ``XnnpackPartitioner``
to a ``.pte``, which ExecuTorch's runtime runs in a fresh interpreter where qcore, its
plugins and torchao cannot be imported. ExecuTorch's own quantizer is compared on the
functional convolutions: its program cannot be built.

What the delegate took is counted in the lowered program by the test (the quantize and
dequantize ops left outside XNNPACK's delegate calls), and the delegation report
(``qquantizer_xnnpack.delegation``) must say the same, with ExecuTorch's reasons.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
    XNNPACKQuantizer,
    get_symmetric_quantization_config,
)
from executorch.exir import to_edge_transform_and_lower
from shipped import code_difference, deployed_outputs, output_qparams, run_deployed
from torch import nn
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

import qcore
from qcore.metrics import sqnr
from qcore.testing.transformers_zoo import MODELS, quantize
from qquantizer_xnnpack.delegation import DelegationReport, watch

#: The zoo's accuracy bound against the float model (tests/test_transformers_flows.py).
MIN_SQNR_VS_FLOAT = 25.0
#: Against the eager converted model: XNNPACK's int8 kernels add an int32 bias and
#: requantize in their own arithmetic, which can move a code near a rounding boundary by
#: 1; a 1-code difference on every value of an int8 tensor costs about 35 dB, a wrong
#: kernel, layout or scale far more.
MIN_SQNR_VS_EAGER = 40.0
DELEGATE_CALL = "executorch_call_delegate"


@dataclass
class Shipped:
    """A converted model lowered to a ``.pte``: the report, what the test counted in the
    lowered program, the expected outputs and what the deployed side computed."""

    report: DelegationReport
    delegate_calls: int
    quantized_outside: list[str]
    eager: list[torch.Tensor]
    reference: list[torch.Tensor]
    deployed: list[torch.Tensor] | None = None


def _tuple(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def _lower(converted: torch.fx.GraphModule, inputs: tuple[torch.Tensor, ...]) -> tuple[Any, Shipped]:
    with watch() as coverage:
        edge = to_edge_transform_and_lower(
            torch.export.export(converted, inputs), partitioner=[XnnpackPartitioner()]
        )
    graph = edge.exported_program().graph
    calls = [n for n in graph.nodes if n.op == "call_function" and str(n.target) == DELEGATE_CALL]
    outside = [
        n.name for n in graph.nodes if n.op == "call_function" and "quantized_decomposed" in str(n.target)
    ]
    with torch.no_grad():
        eager = list(_tuple(converted(*inputs)))
    return edge, Shipped(coverage.report(edge), len(calls), outside, eager, [])


def _write(edge: Any, inputs: tuple[torch.Tensor, ...], shipped: Shipped, path: Path) -> Path:
    path.write_bytes(edge.to_executorch().buffer)
    torch.save({"input": inputs, "output": shipped.eager}, path.with_suffix(".golden.pt"))
    return path


# the Hugging Face zoo --------------------------------------------------------------------


def _zoo(folder: Path) -> tuple[dict[str, Shipped], list[Path]]:
    shipped, files = {}, []
    for name in MODELS:
        converted, model, batch = quantize(name, qcore.get_quantizer("xnnpack", is_per_channel=True))
        edge, shipped[name] = _lower(converted, batch)
        with torch.no_grad():
            shipped[name].reference = [model(*batch)]
        files.append(_write(edge, batch, shipped[name], folder / f"{name}.pte"))
    return shipped, files


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The zoo's programs and the functional convolutions', written as ``.pte`` files and
    run by the deployed side in one fresh interpreter."""
    folder = tmp_path_factory.mktemp("programs")
    zoo, files = _zoo(folder)
    functional, file = _functional(folder)
    report = run_deployed("torch-only", [*files, file])
    assert report["imported"] == [] and len(report["ran"]) == len(files) + 1
    for name, zoo_file in zip(MODELS, files, strict=True):
        zoo[name].deployed = deployed_outputs(zoo_file)
    functional["ours"].deployed = deployed_outputs(file)
    return {"zoo": zoo, "functional": functional}


@pytest.fixture(scope="module")
def zoo(programs: dict[str, Any]) -> dict[str, Shipped]:
    shipped: dict[str, Shipped] = programs["zoo"]
    return shipped


@pytest.mark.parametrize("name", list(MODELS))
def test_every_zoo_model_runs_as_a_pte_within_25_db_of_float(zoo: dict[str, Shipped], name: str) -> None:
    """>= 25 dB against the float model, >= 40 dB against the eager converted model."""
    shipped = zoo[name]
    assert shipped.deployed is not None
    (output,) = shipped.deployed
    assert sqnr(shipped.reference[0], output) >= MIN_SQNR_VS_FLOAT
    assert sqnr(shipped.eager[0], output) >= MIN_SQNR_VS_EAGER


@pytest.mark.parametrize("name", list(MODELS))
def test_xnnpack_takes_every_quantized_op_of_the_zoo(zoo: dict[str, Shipped], name: str) -> None:
    """No quantize or dequantize is left outside XNNPACK's delegate calls (counted in the
    lowered program), and the delegation report says so; what it leaves to the portable
    runtime is float (embeddings, layer norms, the attention mask's integer ops)."""
    shipped = zoo[name]
    assert shipped.delegate_calls > 0 and shipped.quantized_outside == []
    assert shipped.report.delegate_calls == shipped.delegate_calls
    assert shipped.report.quantized_left_out == []
    assert any(kind.endswith("(int8)") for kind in shipped.report.taken)


# functional convolutions: ours against ExecuTorch's quantizer ----------------------------


class FunctionalConvs(nn.Module):
    """``F.conv2d`` (padding "same") then ``F.conv_transpose2d``, and ``F.conv1d`` and
    ``F.conv3d`` on inputs of their own, on weight parameters."""

    def __init__(self) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(0)

        def weight(*shape: int) -> nn.Parameter:
            return nn.Parameter(torch.randn(*shape, generator=generator) * 0.2)

        self.w2, self.b2 = weight(8, 4, 3, 3), weight(8)
        self.wt = weight(8, 8, 3, 3)
        self.w1 = weight(6, 4, 3)
        self.w3 = weight(4, 4, 3, 3, 3)

    def forward(
        self, x: torch.Tensor, x1: torch.Tensor, x3: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        y = F.relu(F.conv2d(x, self.w2, self.b2, padding="same"))
        y = F.conv_transpose2d(y, self.wt, padding=1)
        return y, F.conv1d(x1, self.w1, padding=1), F.conv3d(x3, self.w3, padding=1)


def _functional_inputs(seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(2, 4, 8, 8, generator=g), torch.randn(2, 4, 10, generator=g),
            torch.randn(1, 4, 4, 5, 5, generator=g))  # fmt: skip


def _quantize_functional(quantizer: Any) -> torch.fx.GraphModule:
    prepared = prepare_pt2e(torch.export.export(FunctionalConvs().eval(), _functional_inputs(0)).module(), quantizer)
    with torch.no_grad():
        for seed in range(1, 4):
            prepared(*_functional_inputs(seed))
    return convert_pt2e(prepared)


def _functional(folder: Path) -> tuple[dict[str, Any], Path]:
    held_out = _functional_inputs(100)
    ours = _quantize_functional(qcore.get_quantizer("xnnpack", is_per_channel=True))
    edge, shipped = _lower(ours, held_out)
    with torch.no_grad():
        shipped.reference = list(FunctionalConvs().eval()(*held_out))
    file = _write(edge, held_out, shipped, folder / "functional_convs.pte")

    theirs = _quantize_functional(
        XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    )
    their_edge, their_shipped = _lower(theirs, held_out)
    try:
        their_edge.to_executorch()
        their_error = None
    except RuntimeError as error:
        their_error = str(error)
    found = {"ours": shipped, "qparams": output_qparams(ours), "theirs": their_shipped, "their error": their_error}
    return found, file


@pytest.fixture(scope="module")
def functional(programs: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = programs["functional"]
    return found


def test_functional_convs_run_as_a_pte_within_one_code_of_eager(functional: dict[str, Any]) -> None:
    """The 1-d, 3-d and transposed convolutions all run: every output within 1 code of the
    eager converted model (see MIN_SQNR_VS_EAGER), >= 40 dB against it, >= 25 dB against
    float (the 3-D conv's rewrite as a 2-D one computes the same function)."""
    shipped: Shipped = functional["ours"]
    assert shipped.deployed is not None
    outputs = zip(shipped.eager, shipped.deployed, shipped.reference, functional["qparams"], strict=True)
    for eager, deployed, reference, (scale, zero_point) in outputs:
        assert code_difference(eager, deployed, scale, zero_point).largest <= 1
        assert sqnr(eager, deployed) >= MIN_SQNR_VS_EAGER
        assert sqnr(reference, deployed) >= MIN_SQNR_VS_FLOAT


def test_functional_convs_are_one_xnnpack_delegate_call(functional: dict[str, Any]) -> None:
    shipped: Shipped = functional["ours"]
    assert shipped.delegate_calls == 1 and shipped.quantized_outside == []
    assert shipped.report.delegate_calls == 1 and shipped.report.quantized_left_out == []


def test_executorchs_quantizer_cannot_build_them_and_the_report_says_why(functional: dict[str, Any]) -> None:
    """ExecuTorch's own quantizer quantizes the 3-D conv, which XNNPACK does not take, and
    ``to_executorch`` fails on its weight's per-channel dequantize, left outside. The
    report names both, with the partitioner's reason, before ``to_executorch``."""
    assert "Missing out variants: {'quantized_decomposed::dequantize_per_channel'}" in functional["their error"]
    theirs: Shipped = functional["theirs"]
    assert theirs.quantized_outside  # the weight's dequantize, counted in the program
    left = {op.op: op for op in theirs.report.quantized_left_out}
    assert "Only support 1D + 2D Conv" in left["aten.convolution.default"].reason
    weight = left["quantized_decomposed.dequantize_per_channel.default"]
    assert weight.kind == "dequantize (weight)" and "read by aten.convolution.default" in weight.reason
    assert {op.node for op in theirs.report.quantized_left_out} >= set(theirs.quantized_outside)
