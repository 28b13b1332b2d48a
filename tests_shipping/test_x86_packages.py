"""x86 AOTInductor packages built under the x86 lowering (``builds.py``), one per route,
run by the session's deployed side where qcore, its plugins and torchao cannot be
imported, on oneDNN's AVX2 kernels (no VNNI) on any host:

* GPT-2 and BERT from the Hugging Face zoo (each cut to its first layer: ``builds.py``), by
  the x86 quantizer, VNNI route, 7-bit activations (no CPU's 16-bit pair sums can
  overflow them): a oneDNN int8 kernel for every quantized linear, the eager converted
  model's outputs on AVX2 kernels;
* the functional convolutions (1-d, 3-d, transposed), by the XNNPACK quantizer, AVX2
  route: each int8 conv on a doubled reduction (one kernel, a zero weight in each int16
  pair), which must survive packaging: the package computes the eager converted model's
  int8 codes on the kernels whose pair sums saturate. (The guide's CNN is a third
  package on the AVX2 route, ``test_shipping_guide.py``.)
"""

from __future__ import annotations

from typing import Any

import pytest
from builds import ZOO_X86, Package
from shipped import code_difference, deployed_outputs, package_int8_calls

from qcore.metrics import sqnr
from qcore.testing.codes import compare_codes

#: The zoo's accuracy bound against the float model (tests/test_transformers_flows.py).
MIN_SQNR_VS_FLOAT = 25.0


@pytest.fixture(scope="module")
def zoo(x86_packages: dict[str, Package], torch_only: dict[str, Any]) -> Package:
    assert torch_only["imported"] == []
    return x86_packages["zoo"]


@pytest.fixture(scope="module")
def functional(x86_packages: dict[str, Package], torch_only: dict[str, Any]) -> Package:
    assert torch_only["imported"] == []
    return x86_packages["functional"]


def test_the_zoo_package_calls_a_onednn_int8_kernel_for_every_quantized_linear(
    zoo: Package,
) -> None:
    """Counted in the C++ the package holds, against the converted program's int8 linears
    (GPT-2's ``Conv1D`` projections included: the x86 quantizer takes them as linears);
    none doubled on the VNNI route."""
    assert zoo.quantized_ops == 10  # GPT-2's layer: 4 projections; BERT's: 6 linears
    assert package_int8_calls(zoo.file) == zoo.quantized_ops
    assert zoo.doubled == 0


@pytest.mark.parametrize("index", range(len(ZOO_X86)), ids=ZOO_X86)
def test_the_zoo_package_runs_without_qcore_computing_its_eager_codes(
    zoo: Package, index: int
) -> None:
    """Exact, on oneDNN's AVX2 kernels, where only torch is importable. The output (the
    last hidden state) is float: a layer norm after the last int8 linear, which oneDNN
    writes in fp32, so it holds no codes to read. ``qcore.testing.codes`` puts it on the
    uint8 grid of the eager output's range and counts a value more than a thousandth of a
    step from eager's as a step off: with equal int8 codes inside, only fp32 summation
    order lies between the two (within 3e-5 of a step), while one int8 code of a linear's
    input that differs moves the values after it by a share of a step. At most 0.1 % of
    values may be a step off (a requantize tie that fp32 breaks the other way). >= 25 dB
    against float."""
    output = deployed_outputs(zoo.file)[index]
    difference = compare_codes(zoo.eager[index], output)
    assert difference.exact, str(difference)
    assert sqnr(zoo.reference[index], output) >= MIN_SQNR_VS_FLOAT


def test_every_functional_conv_is_one_doubled_onednn_kernel_in_the_package(
    functional: Package,
) -> None:
    """The 2-d conv, the 1-d one and the 3-d one (a 2-d conv over depth-stacked slices):
    three oneDNN int8 kernels in the package's C++, each on a doubled reduction (their
    int16 pair sums could overflow on AVX2; the lowering's report says so). The
    transposed conv has no oneDNN int8 lowering and runs in float between its quantize
    and dequantize."""
    assert functional.quantized_ops == 3
    assert package_int8_calls(functional.file) == functional.quantized_ops
    assert functional.doubled == functional.quantized_ops


def test_the_functional_package_computes_its_eager_int8_codes_on_avx2_kernels(
    functional: Package,
) -> None:
    """On oneDNN's AVX2 kernels, where torch alone is importable: every output's int8
    codes are the eager converted model's, but where fp32 rounding breaks a requantize tie
    the other way (by 1, at most 0.1 % of codes); a saturated pair sum would move codes by
    far more. >= 25 dB against float."""
    assert functional.qparams is not None
    outputs = deployed_outputs(functional.file)
    pairs = zip(functional.eager, outputs, functional.reference, functional.qparams, strict=True)
    for eager, deployed, reference, (scale, zero_point) in pairs:
        difference = code_difference(eager, deployed, scale, zero_point)
        assert difference.largest <= 1 and difference.fraction <= 1e-3, difference
        assert sqnr(reference, deployed) >= MIN_SQNR_VS_FLOAT
