"""docs/shipping.md, run as written (every Python block, in order, in a fresh interpreter:
the session's ``guide`` fixture), then the files it wrote, each loaded where it is
deployed, in fresh interpreters: the FX model, its state dict (into a model converted
there from the guide's model code) and the PT2E programs with qcore (a plain
``torch.export.load`` of a program is tried there first); the x86 package and the
``.pte`` files with torch and ExecuTorch only (qcore, its plugins and torchao
unimportable), on oneDNN's AVX2 kernels (the session's ``torch_only`` run).

Each file is compared with the golden pair the guide saved next to it: the held-out input
and the output of the converted model the file was made from.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from builds import GUIDE, GUIDE_TORCH_ONLY
from shipped import (
    code_difference,
    deployed_outputs,
    golden,
    output_qparams,
    package_int8_calls,
    run_deployed,
    with_int32_bias,
)

import qcore
from qcore.testing.codes import compare_codes
from qcore.testing.readme import python_blocks

#: Files the deployed side needs qcore for (the first program is also tried with a plain
#: ``torch.export.load``), and the guide's first block: the model's code, for the receiver
#: of the state dict.
WITH_QCORE = ("cnn_xnnpack.pt2", "cnn_x86_program.pt2", "cnn_fx.pt", "cnn_fx.state.pt")
MODEL_CODE = "model.py"
#: Golden pairs the guide saved for one file that hold for another: the state dict's model
#: and the saved x86 program compute what the FX model and the x86 model computed.
SAME_GOLDEN = {"cnn_fx.state.pt": "cnn_fx.pt", "cnn_x86_program.pt2": "cnn_x86.pt2"}
#: The CNN's three convolutions, each one oneDNN int8 kernel in the x86 package.
CNN_CONVS = 3


@pytest.fixture(scope="module")
def with_qcore(guide: tuple[Path, str]) -> dict[str, Any]:
    folder, _ = guide
    (folder / MODEL_CODE).write_text(python_blocks(GUIDE)[0].code)
    for name, source in SAME_GOLDEN.items():
        shutil.copy(golden_path(folder / source), golden_path(folder / name))
    return run_deployed(
        "with-qcore", [folder / MODEL_CODE, *(folder / name for name in WITH_QCORE)]
    )


def golden_path(file: Path) -> Path:
    return file.with_suffix(".golden.pt")


def test_the_guide_runs_as_written(guide: tuple[Path, str]) -> None:
    folder, output = guide
    assert f"{len(python_blocks(GUIDE))} Python blocks ran" in output
    for line in (
        "FX, torch.load: exact",
        "FX, load_state_dict: exact",
        "PT2E, load_exported: exact",
    ):
        assert line in output, output
    assert "derived executorch quantizer, 3-D conv: 0 quantized ops left out" in output
    # built for the AVX2 route: weight ranges, 7-bit inputs or doubled reductions that no
    # 16-bit pair sum can overflow (exactness on those kernels: the package test below)
    assert "target: AVX2 without VNNI" in output, output
    for name in (*WITH_QCORE, *GUIDE_TORCH_ONLY):
        assert (folder / name).is_file(), name


def test_the_fx_model_loads_in_a_fresh_interpreter_exactly(
    guide: tuple[Path, str], with_qcore: dict[str, Any]
) -> None:
    """Exact: ``torch.load`` gives a model whose output equals the saved one's bit for bit."""
    folder, _ = guide
    file = folder / "cnn_fx.pt"
    assert file.name in with_qcore["ran"]
    (output,) = deployed_outputs(file)
    assert torch.equal(output, golden(file)["output"])


def test_the_fx_state_dict_loads_in_a_fresh_interpreter_exactly(
    guide: tuple[Path, str], with_qcore: dict[str, Any]
) -> None:
    """Exact: a model converted there from the guide's model code and one calibration
    batch (its output differed) computes the saved model's output bit for bit once it
    loads the saved state dict."""
    folder, _ = guide
    file = folder / "cnn_fx.state.pt"
    assert file.name in with_qcore["ran"]
    assert with_qcore["state dict changed the output"][file.name]
    (output,) = deployed_outputs(file)
    assert torch.equal(output, golden(file)["output"])


@pytest.mark.parametrize("name", ["cnn_xnnpack.pt2", "cnn_x86_program.pt2"])
def test_the_pt2e_program_needs_the_loader_and_loads_exactly_with_it(
    guide: tuple[Path, str], with_qcore: dict[str, Any], name: str
) -> None:
    """In a fresh interpreter a plain ``torch.export.load`` cannot resolve the quantized
    ops; ``qcore.load_exported`` loads each program (the XNNPACK quantizer's and the x86
    quantizer's) and computes the saved model's output bit for bit."""
    folder, _ = guide
    file = folder / name
    error = with_qcore["plain torch.export.load"]
    assert error is not None and "failed to resolve torch.ops.quantized_decomposed" in error, error
    assert file.name in with_qcore["ran"]
    (output,) = deployed_outputs(file)
    assert torch.equal(output, golden(file)["output"])


def test_the_x86_package_runs_without_qcore_on_avx2_kernels_exactly(
    guide: tuple[Path, str], torch_only: dict[str, Any]
) -> None:
    """Exact, on oneDNN's AVX2 kernels (pairs of products summed in saturating 16-bit
    lanes), where torch alone is importable: the package's int8 output codes are the eager
    converted model's. oneDNN accumulates in int32 exactly (an op whose pairs could
    overflow on a doubled reduction) and requantizes in fp32, the eager model computes in
    fp32 from the same codes: a code may differ only where fp32 rounding breaks a tie the
    other way, by 1, at most 0.1 % of codes (ties that close are rarer than 1 in 10^4).
    Measured on an AVX-512 VNNI host: 7 codes of 32768 differ when the eager model's fp32
    convolutions ran on AVX-512 kernels, none when they ran on AVX2 ones (the package's
    codes are the same both times: the ties are the eager model's)."""
    folder, _ = guide
    file = folder / "cnn_x86.pt2"
    assert file.name in torch_only["ran"] and torch_only["imported"] == []
    assert package_int8_calls(file) == CNN_CONVS
    program = qcore.load_exported(folder / "cnn_x86_program.pt2").module()
    ((scale, zero_point),) = output_qparams(program)
    (output,) = deployed_outputs(file)
    difference = code_difference(golden(file)["output"], output, scale, zero_point)
    assert difference.largest <= 1 and difference.fraction <= 1e-3, difference


def test_the_pte_runs_in_executorchs_runtime_without_qcore_computing_its_eager_codes(
    guide: tuple[Path, str], torch_only: dict[str, Any]
) -> None:
    """Exact, where torch and ExecuTorch alone are importable: the ``.pte``'s int8 output
    codes (read with the qparams of the program the guide saved) are the saved program's
    with its biases rounded to int32 as XNNPACK adds them (``with_int32_bias``: its int8
    convs add an int32 bias on the grid of the input scale times the weight scale, then
    requantize in fp32 as eager does), and within one code of the golden output, the
    program's own: that rounding moves a requantize's input by a small share of a step,
    so the codes it lands near a half step move by one, and the codes after them follow
    (about 3 % of this CNN's output codes)."""
    folder, _ = guide
    file = folder / "cnn_xnnpack.pte"
    assert file.name in torch_only["ran"] and torch_only["imported"] == []
    program = qcore.load_exported(folder / "cnn_xnnpack.pt2").module()
    ((scale, zero_point),) = output_qparams(program)
    (output,) = deployed_outputs(file)
    pair = golden(file)
    with torch.no_grad():
        int32_bias = with_int32_bias(program)(pair["input"])
    difference = compare_codes(int32_bias, output, scale=scale, zero_point=zero_point)
    assert difference.exact, str(difference)
    assert code_difference(pair["output"], output, scale, zero_point).largest <= 1


def test_the_derived_executorch_pte_with_a_3d_conv_computes_its_eager_codes(
    guide: tuple[Path, str], torch_only: dict[str, Any]
) -> None:
    """The guide's 3-D convolution, rewritten as a 2-D one before the derived executorch
    quantizer, runs in ExecuTorch's runtime. Exact: the conv has no bias, so XNNPACK's
    int32 sums and fp32 requantize are the eager converted model's arithmetic, code for
    code. The guide saves no program of this model to read the output's qparams from, so
    the codes are compared on the uint8 grid of the golden output's range (0 included): its
    values and 0 lie on the output's int8 grid, at most 255 of its steps apart, so a step
    of this grid is at most one of the output's and a code off by one is a step off here
    too (as is any value more than a thousandth of a step from the golden one)."""
    folder, _ = guide
    file = folder / "volume_executorch.pte"
    assert file.name in torch_only["ran"]
    (output,) = deployed_outputs(file)
    difference = compare_codes(golden(file)["output"], output)
    assert difference.exact, str(difference)
