"""The ``onednn`` derived quantizer's converted graphs lower to oneDNN int8 kernels under
the x86 lowering (counted in Inductor's generated code), and the compiled model computes
what the eager converted one does, code for code (``qcore.testing.codes``).
One model: compiling is slow."""

from __future__ import annotations

import torch
from compiled import compile_with_lowering
from torch import nn
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

import qcore
from qcore.metrics import sqnr
from qcore.testing.codes import compare_codes
from qcore.zoo.models import case


def test_onednn_derived_graph_compiles_to_int8_kernels() -> None:
    model_case = case("resnet")  # conv-bn-relu, residual add-relu, max/avg pool, linear
    model = model_case.model()
    # its second residual block repeats the first's ops (the same patterns, the same
    # kernels): it adds nothing to lower or compare, but Inductor lowers it again
    model.layer2 = nn.Identity()
    batches = model_case.calibration_batches()
    exported = torch.export.export(model, batches[0]).module()
    prepared = prepare_pt2e(exported, qcore.get_quantizer("onednn"))
    with torch.no_grad():
        for batch in batches:
            prepared(*batch)
    converted = convert_pt2e(prepared)
    x = model_case.inputs(7)
    compiled = compile_with_lowering(converted, x)
    convs, linears = (
        sum(n.target == op for n in converted.graph.nodes)
        for op in (torch.ops.aten.conv2d.default, torch.ops.aten.linear.default)
    )
    assert (convs, linears) == (3, 1)  # stem, one block of two convs; the classifier
    kinds = [op.startswith("qconv") for op, _ in compiled.kernels]  # else qlinear...
    assert (kinds.count(True), kinds.count(False)) == (convs, linears), compiled.kernels
    assert compiled.report.int8_kernels == convs + linears, str(compiled.report)
    diff = compare_codes(compiled.eager, compiled.output)
    assert diff.exact, str(diff)
    with torch.no_grad():
        assert sqnr(model(*x), compiled.output) >= 30
