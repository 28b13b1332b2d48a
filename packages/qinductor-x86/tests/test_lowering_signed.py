"""Signed-int8 graphs (XNNPACK's quantizer: int8 activations) compile to oneDNN's int8
kernels once each activation quantize is re-based to uint8 (zero point + 128), exactly."""

from __future__ import annotations

import lowering_zoo as zoo
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import qcore
import qcore.host
from qcore.metrics import sqnr
from qinductor_x86.lowering import signed
from qinductor_x86.lowering.context import CompileContext

qd = torch.ops.quantized_decomposed


def test_rebasing_int8_activations_to_uint8_changes_no_value() -> None:
    def signed_graph(x: torch.Tensor) -> torch.Tensor:
        q = qd.quantize_per_tensor.default(x, 0.05, -7, -128, 127, torch.int8)
        return torch.relu(qd.dequantize_per_tensor.default(q, 0.05, -7, -128, 127, torch.int8))

    x = torch.linspace(-9, 9, 997)  # past both ends of the int8 range, every code on the way
    gm = make_fx(signed_graph, tracing_mode="fake")(x)
    expected = gm(x)
    signed.to_unsigned(CompileContext(gm, qcore.host.parse_target("avx2"), {}))
    gm.recompile()
    dtypes = {n.args[5] for n in gm.graph.nodes if n.target in (qd.quantize_per_tensor.default, qd.dequantize_per_tensor.default)}
    assert dtypes == {torch.uint8}
    assert torch.equal(gm(x), expected)


def test_xnnpack_quantized_models_compile_to_int8_kernels_and_match_eager() -> None:
    model, inputs = zoo.PoolCat(), (zoo.example(2, 4, 16, 16),)
    converted = zoo.quantize(model, inputs, "xnnpack")
    assert any(n.args[5] is torch.int8 for n in converted.graph.nodes if n.target is qd.quantize_per_tensor.default)
    with torch.no_grad():
        expected, reference = converted(*inputs), model(*inputs)
    lowering = qcore.get_lowering("x86")
    with zoo.fresh_compile(), lowering:
        output, code = zoo.compile_and_run(converted, inputs)
    report = lowering.report()
    kernels = zoo.int8_kernel_calls(code)
    assert report.lowered["int8 activation re-based to uint8 (zero point + 128)"] > 0
    # every conv and linear lowered, one kernel each
    prepacked = sum(n for name, n in report.lowered.items() if "weight prepack" in name)
    assert prepacked == 4 and len(kernels) == prepacked
    assert zoo.relative_l2(expected, output) <= 2e-2
    assert sqnr(reference, output) >= sqnr(reference, expected) - 0.1
