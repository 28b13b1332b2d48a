"""The ``onednn`` derived quantizer's converted graphs lower to oneDNN int8 kernels under
the x86 lowering, and the compiled model computes what the eager converted one does.
One model: compiling is slow."""

from __future__ import annotations

import torch
from torch._inductor import config as inductor_config
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

import qcore
from qcore.metrics import sqnr
from qcore.testing.models import case


def test_onednn_derived_graph_compiles_to_int8_kernels() -> None:
    model_case = case("resnet")  # conv-bn-relu, residual add-relu, max/avg pool, linear
    model = model_case.model()
    batches = model_case.calibration_batches()
    exported = torch.export.export(model, batches[0]).module()
    prepared = prepare_pt2e(exported, qcore.get_quantizer("onednn"))
    with torch.no_grad():
        for batch in batches:
            prepared(*batch)
    converted = convert_pt2e(prepared)
    x = model_case.inputs(7)
    with torch.no_grad():
        eager = converted(*x)
    torch._dynamo.reset()
    with (
        inductor_config.patch(freezing=True, fx_graph_cache=False),
        torch.no_grad(),
        qcore.get_lowering("x86") as lowering,
    ):
        compiled = torch.compile(converted)(*x)
    weighted = sum(
        n.target in (torch.ops.aten.conv2d.default, torch.ops.aten.linear.default)
        for n in converted.graph.nodes
    )
    assert weighted == 6  # stem, two blocks of two convs, the classifier
    assert lowering.report().int8_kernels == weighted, str(lowering.report())
    assert sqnr(eager, compiled) >= 40
    assert sqnr(model(*x), compiled) >= 30
