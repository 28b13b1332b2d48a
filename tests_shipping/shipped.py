"""What the shipping tests share: running the deployed side (``deployed.py``) in a fresh
interpreter, and reading what a shipped file computed against its golden pair.

The references come from outside the code under test: int8 codes are read with the scale
and zero point of the dequantize that produces the converted program's output (torchao's
``convert_pt2e`` wrote it), and oneDNN int8 kernels are counted in the C++ that
AOTInductor put in the package.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.fx import GraphModule, Node

from qcore.testing.fresh import RESULT_MARK, run_script

DEPLOYED = Path(__file__).with_name("deployed.py")
DEQUANTIZE_PER_TENSOR = "quantized_decomposed.dequantize_per_tensor.default"
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
    outputs: list[torch.Tensor] = torch.load(file.with_suffix(".deployed.pt"))
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


def package_int8_calls(package: Path) -> int:
    """Calls of oneDNN's int8 conv / linear in the C++ wrapper AOTInductor packaged."""
    with zipfile.ZipFile(package) as archive:
        sources = [n for n in archive.namelist() if n.endswith("wrapper.cpp")]
        assert sources, f"{package} holds no generated C++"
        return sum(len(ONEDNN_INT8_CALL.findall(archive.read(n).decode())) for n in sources)
