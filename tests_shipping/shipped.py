"""What the shipping tests share: running the deployed side (``deployed.py``) in a fresh
interpreter, and reading what a shipped file computed against its golden pair.

The references come from outside the code under test: int8 codes are read with the scale
and zero point of the dequantize that produces the converted program's output (torchao's
``convert_pt2e`` wrote it), oneDNN int8 kernels are counted in the C++ that AOTInductor
put in the package, and what XNNPACK adds for a float bias is recomputed here from
ExecuTorch's rule (:func:`with_int32_bias`).
"""

from __future__ import annotations

import copy
import re
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from deployed import outputs_path
from torch.fx import GraphModule, Node

from qcore.testing.fresh import RESULT_MARK, run_script

DEPLOYED = Path(__file__).with_name("deployed.py")
DEQUANTIZE_PER_TENSOR = "quantized_decomposed.dequantize_per_tensor.default"
DEQUANTIZE_PER_CHANNEL = "quantized_decomposed.dequantize_per_channel.default"
#: The aten ops (input, weight, bias, ...; any overload) whose float bias ExecuTorch's
#: XNNPACK backend quantizes to int32 when their input and weight are dequantized int8.
WITH_BIAS = frozenset(
    {"linear", "conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d", "convolution"}
)
INT32 = (-(2**31), 2**31 - 1)
#: The ATen C shims AOTInductor's C++ calls oneDNN's int8 conv / linear through.
ONEDNN_INT8_CALL = re.compile(r"\baoti_torch_cpu__(?:qconv|qlinear)\w*\(")


def run_deployed(
    mode: str, files: list[Path], env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """``deployed.py MODE FILES`` in a fresh interpreter on one OpenMP thread (oneDNN's
    AVX2 int8 kernels are deterministic on one only); its report."""
    outcome = run_script(DEPLOYED, RESULT_MARK, mode, *map(str, files), env=env, threads=1)
    assert outcome.ok, outcome.describe()
    report: dict[str, Any] = outcome.result()
    return report


def deployed_outputs(file: Path) -> list[torch.Tensor]:
    outputs: list[torch.Tensor] = torch.load(outputs_path(file))
    return outputs


def golden(file: Path) -> dict[str, Any]:
    pair: dict[str, Any] = torch.load(file.with_suffix(".golden.pt"))
    return pair


def output_qparams(converted: GraphModule) -> list[tuple[float, int]]:
    """(scale, zero point) of the per-tensor dequantize behind each graph output."""
    (output,) = [n for n in converted.graph.nodes if n.op == "output"]
    values = output.args[0]
    found = []
    for value in values if isinstance(values, (tuple, list)) else (values,):
        assert isinstance(value, Node) and str(value.target) == DEQUANTIZE_PER_TENSOR, value
        found.append((float(value.args[1]), int(value.args[2])))
    return found


@dataclass(frozen=True)
class CodeDifference:
    """How the int8 codes of one output differ from the eager converted model's."""

    largest: int
    differing: int
    total: int

    @property
    def fraction(self) -> float:
        return self.differing / self.total


def code_difference(
    eager: torch.Tensor, deployed: torch.Tensor, scale: float, zero_point: int
) -> CodeDifference:
    """Codes read back from two dequantized outputs: round(value / scale) + zero point."""
    codes = [
        torch.round(t.detach().double() / scale).to(torch.int64) + zero_point
        for t in (eager, deployed)
    ]
    gap = (codes[0] - codes[1]).abs()
    return CodeDifference(int(gap.max()), int((gap > 0).sum()), gap.numel())


def with_int32_bias(converted: GraphModule) -> GraphModule:
    """A copy of ``converted`` whose int8 convs and linears add, in place of their float
    bias, what XNNPACK adds to its int32 sums: ExecuTorch's XNNPACK backend quantizes the
    bias to int32 on the grid of the input's scale times each output channel's weight
    scale (``QuantParams.from_bias``: ``round(bias * (1 / scale))``, half to even), here
    put back in float. That moves a requantize's input by up to half of ``input scale x
    weight scale``, a small share of an output step, so an eager value that close to a
    half step may round the other way (by one code; the codes downstream follow);
    otherwise XNNPACK computes what the eager model does (int32 sums, one fp32 scale,
    round half to even), code for code."""
    model = copy.deepcopy(converted)
    for node in model.graph.nodes:
        op = str(node.target).split(".")  # aten.conv2d.padding: namespace, packet, overload
        if node.op != "call_function" or op[0] != "aten" or op[1] not in WITH_BIAS:
            continue
        source, weight, bias = (*node.args, None, None)[:3]
        if not (
            _produced_by(source, DEQUANTIZE_PER_TENSOR)
            and _produced_by(weight, DEQUANTIZE_PER_TENSOR, DEQUANTIZE_PER_CHANNEL)
            and isinstance(bias, Node)
            and bias.op == "get_attr"
        ):
            continue
        weight_scale = torch.as_tensor(_attribute(model, weight.args[1]), dtype=torch.float32)
        scale = weight_scale * float(source.args[1])
        value = _attribute(model, bias)
        assert scale.numel() in (1, value.numel()), node  # one scale per output channel
        with torch.no_grad():
            value.copy_(torch.clamp(torch.round(value * (1.0 / scale)), *INT32) * scale)
    return model


def _produced_by(value: Any, *targets: str) -> bool:
    return isinstance(value, Node) and str(value.target) in targets


def _attribute(model: GraphModule, value: Any) -> Any:
    """``value``, or the tensor a ``get_attr`` node reads."""
    if not (isinstance(value, Node) and value.op == "get_attr"):
        return value
    found: Any = model
    for name in str(value.target).split("."):
        found = getattr(found, name)
    return found


def package_int8_calls(package: Path) -> int:
    """Calls of oneDNN's int8 conv / linear in the C++ wrapper AOTInductor packaged."""
    with zipfile.ZipFile(package) as archive:
        sources = [n for n in archive.namelist() if n.endswith("wrapper.cpp")]
        assert sources, f"{package} holds no generated C++"
        return sum(len(ONEDNN_INT8_CALL.findall(archive.read(n).decode())) for n in sources)
