"""QAT on a conv-bn-relu network: prepare_qat_pt2e, training steps, eval, convert,
within 1 dB SQNR of PTQ on the same data.

The procedure, and why each step matters:

1. The float model's batch-norm running statistics are those of the data (one train-mode
   pass with a cumulative average, as a trained model would have). The QAT graph keeps
   batch norm in training mode, so every training step moves the running statistics
   toward the data's; PTQ keeps the float model's as they are. With statistics that are
   still converging (e.g. a few momentum-0.1 passes from the initial variance of 1), QAT
   measures the statistics drift rather than quantization error: that setup gave about
   32 dB against PTQ's 39.5 after 30 steps even with lr=0, and ExecuTorch 1.5.1's
   quantizer gives the same numbers, bit for bit.
2. PTQ calibrates on the data and converts.
3. QAT: prepare_qat_pt2e with the QAT config, a few SGD steps (small lr) toward the float
   model's outputs on the same data, move_exported_model_to_eval, convert_pt2e.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn
from torchao.quantization.pt2e import move_exported_model_to_eval
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e, prepare_qat_pt2e

from qcore.metrics import sqnr
from qquantizer_xnnpack.quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

STEPS = 5


def _net() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
        nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4),
    )  # fmt: skip


def _settle_batch_norm(model: nn.Module, data: list[torch.Tensor]) -> None:
    """Running statistics = the cumulative average over ``data``; then eval mode."""
    norms = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    for bn in norms:
        bn.reset_running_stats()
        bn.momentum = None
    with torch.no_grad():
        for x in data:
            model.train()(x)
    for bn in norms:
        bn.momentum = 0.1  # the exported QAT graph keeps torch's default update
    model.eval()


def train_qat(
    model: nn.Module, data: list[torch.Tensor], quantizer: Any, steps: int = STEPS
) -> torch.fx.GraphModule:
    """prepare_qat_pt2e, then a few SGD steps toward the float model's own outputs."""
    qat = prepare_qat_pt2e(
        torch.export.export(copy.deepcopy(model).train(), (data[0],)).module(), quantizer
    )
    optimizer = torch.optim.SGD(qat.parameters(), lr=1e-4)
    for x in data * steps:
        optimizer.zero_grad()
        loss = (qat(x) - model(x).detach()).pow(2).mean()
        loss.backward()
        optimizer.step()
    return qat


def test_qat_close_to_ptq() -> None:
    torch.manual_seed(0)
    model = _net()
    data = [torch.rand(8, 3, 12, 12) for _ in range(6)]
    _settle_batch_norm(model, data)
    held_out = torch.rand(8, 3, 12, 12)
    with torch.no_grad():
        ref = model(held_out)

    ptq = prepare_pt2e(
        torch.export.export(copy.deepcopy(model), (data[0],)).module(),
        XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True)),
    )
    for x in data:
        ptq(x)
    ptq_sqnr = sqnr(ref, convert_pt2e(ptq)(held_out))

    qat = train_qat(
        model,
        data,
        XNNPACKQuantizer().set_global(
            get_symmetric_quantization_config(is_per_channel=True, is_qat=True)
        ),
    )
    assert any("conv2d" in str(n.target) for n in qat.graph.nodes)
    for i in (1, 4):  # training-mode batch norm kept the statistics the float model has
        drift = qat.get_buffer(f"{i}.running_var") / model[i].running_var - 1
        assert drift.abs().max() < 0.03, (i, drift)
    move_exported_model_to_eval(qat)
    qat_sqnr = sqnr(ref, convert_pt2e(qat)(held_out))

    assert ptq_sqnr > 35, ptq_sqnr
    assert qat_sqnr >= ptq_sqnr - 1, (qat_sqnr, ptq_sqnr)


#: The conv-bn[-relu] model and its QAT flow, run by torchao as it is in a fresh
#: interpreter and under ``reused_pattern_graphs`` here (the same source both times).
_CONV_BN_FLOW = """
import copy, torch
from torch import nn
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_qat_pt2e
import qcore

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 4, 1),
                      nn.BatchNorm2d(4)).train()
inputs = (torch.randn(2, 3, 8, 8),)

def flow():
    exported = torch.export.export(copy.deepcopy(model), inputs).module()
    prepared = prepare_qat_pt2e(exported, qcore.get_quantizer("xnnpack", is_qat=True))
    prepared(*inputs)
    converted = convert_pt2e(prepared)
    ops = sorted(str(n.target) for n in converted.graph.nodes if n.op == "call_function")
    return ops, converted(*inputs)
"""
_TORCHAOS_OWN = _CONV_BN_FLOW + """
from qcore.testing.fresh import emit

ops, output = flow()
emit({"ops": ops, "output": output.tolist()})
"""


def test_the_conv_bn_rewrites_give_torchaos_graph_when_patterns_are_reused() -> None:
    """``qcore._torch_private.reused_pattern_graphs`` (every test session and the
    conformance kit run QAT under it) skips torchao's rewrites for conv functions the graph
    never calls and exports each pattern once: the converted model is torchao's own, op for
    op and bit for bit. torchao's own is computed in a fresh interpreter where nothing is
    patched (its float32 outputs come back exactly: JSON writes each as the shortest
    decimal that reads back to the same double); batch norm is folded away."""
    from qcore._torch_private import reused_pattern_graphs
    from qcore.testing.fresh import run_fresh

    outcome = run_fresh(_TORCHAOS_OWN)
    assert outcome.ok, outcome.describe()
    torchaos = outcome.result()
    namespace: dict[str, Any] = {}
    exec(_CONV_BN_FLOW, namespace)  # this module's own source, above
    with reused_pattern_graphs():
        ops, output = namespace["flow"]()
    assert not any("batch_norm" in op for op in torchaos["ops"])
    assert ops == torchaos["ops"]
    assert torch.equal(output, torch.tensor(torchaos["output"], dtype=output.dtype))
