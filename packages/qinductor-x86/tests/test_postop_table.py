"""Adding an x86 post-op is one row of ``qinductor_x86.postop_table``: the quantizer's
annotators and the lowering's patterns both follow it, a scalar argument and a clamp's
bounds included.

The probe drops the rows, then adds them back as a contributor would write them; each
table is read in a fresh interpreter (two: without the rows, with them added), each row's
model compiled once. Fusion is read in Inductor's generated code: the oneDNN kernel call
that takes the post-op by name and writes the post-op's quantized output itself. Rows: tanh after a linear; leaky_relu after a
linear (a scalar argument: the kernel must get the module's slope); hardtanh after a conv
with 7-bit activations (clamp-like: the narrower output range merges with its bounds into
the kernel's one hardtanh).
"""

from __future__ import annotations

import re
from typing import Any

import lowering_zoo as zoo
import pytest

ROWS = ("tanh", "leaky_relu", "hardtanh")
#: Row -> the kernel it fuses into, as the report names the fusion with an int8 output.
FUSED = {
    "tanh": "linear + tanh + quantize (int8 output)",
    "leaky_relu": "linear + leaky_relu + quantize (int8 output)",
    "hardtanh": "conv + hardtanh + quantize (int8 output)",
}


@pytest.fixture(scope="module")
def row_probes() -> dict[tuple[str, str], dict[str, Any]]:
    # one interpreter after the other: the second finds the kernels both compile (each
    # row's layer, its quantize and dequantize) in the run's Inductor cache
    runs = {mode: zoo.run_script("postop_row_probe.py", mode, *ROWS) for mode in ("without", "added")}
    return {(row, mode): run[row] for mode, run in runs.items() for row in ROWS}


def _fused(result: dict[str, Any], row: str) -> list[str]:
    """What the lowering's report says it fused with ``row``."""
    return [name for name in result["lowered"] if f" + {row}" in name]


def _int8_output_calls(result: dict[str, Any], row: str) -> list[str]:
    """The generated code's oneDNN kernel calls that apply ``row`` and write uint8 codes
    with the post-op's output quantize parameters: the quantize fused too."""
    scale, zero_point, _, _ = result["output_qparams"]
    written = f"{scale!r}, {zero_point}, torch.uint8, '{row}', "
    return [line for line in result["kernel_lines"] if written in line]


def _post_op_in_kernels(result: dict[str, Any], attr: str) -> list[list[float]]:
    """The scalars of each generated oneDNN kernel call that fuses post-op ``attr``."""
    found = []
    for line in result["kernel_lines"]:
        match = re.search(rf"'{attr}', \[([^\]]*)\]", line)
        if match:
            found.append([float(v) for v in match.group(1).split(",") if v.strip()])
    return found


@pytest.mark.parametrize("row", ROWS)
def test_without_the_row_neither_side_fuses_it(
    row_probes: dict[tuple[str, str], dict[str, Any]], row: str
) -> None:
    without = row_probes[row, "without"]
    assert not without["annotated"]
    # the kernel's float output runs into the post-op, which the lowering would fuse (the
    # probe switches torch 2.13's own copy of the passes off: the code is this lowering's)
    assert not _fused(without, row), without["lowered"]
    assert not any(f"'{row}'" in line for line in without["kernel_lines"]), without["kernel_lines"]


@pytest.mark.parametrize("row", ROWS)
def test_one_added_row_reaches_the_quantizer_and_the_lowering(
    row_probes: dict[tuple[str, str], dict[str, Any]], row: str
) -> None:
    added = row_probes[row, "added"]
    assert added["shipped_row_is_the_new_row"]
    assert added["annotated"]
    assert _fused(added, row) == [FUSED[row]], added["lowered"]
    assert len(_int8_output_calls(added, row)) == 1, added["kernel_lines"]
    # the fused post-op computes what the eager model's does, code for code
    zoo.assert_exact(added["codes"])


def test_a_scalar_argument_reaches_the_kernel(
    row_probes: dict[tuple[str, str], dict[str, Any]],
) -> None:
    """The generated code calls the kernel with the module's slope (``nn.LeakyReLU(0.2)``)."""
    added = row_probes["leaky_relu", "added"]
    assert _post_op_in_kernels(added, "leaky_relu") == [[0.2]], added["kernel_lines"]


def test_a_clamp_like_row_takes_the_narrow_output_range(
    row_probes: dict[tuple[str, str], dict[str, Any]],
) -> None:
    """``nn.Hardtanh(-0.5, 0.75)`` before a quantize to ``[0, 127]``: one kernel hardtanh on
    the intersection of the two ranges, ``(q - zp) * scale`` for the quantize's bounds
    (without it, the kernel would take the module's bounds and a clamp of its codes)."""
    added = row_probes["hardtanh", "added"]
    scale, zero_point, qmin, qmax = added["output_qparams"]
    assert qmax == 127  # 7-bit activations: narrower than the kernel's uint8 output
    expected = [max((qmin - zero_point) * scale, -0.5), min((qmax - zero_point) * scale, 0.75)]
    (bounds,) = _post_op_in_kernels(added, "hardtanh")
    assert bounds == pytest.approx(expected, rel=1e-12), added["kernel_lines"]
    assert bounds != [-0.5, 0.75]  # the quantize's range did narrow the module's
