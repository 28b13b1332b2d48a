"""Every first-party PT2E quantizer observes its static activations with qcore's histogram
observer (torchao's, its range search walked faster to the same range:
packages/qcore/tests/test_histogram_search.py) wherever it would build torchao's: x86 and
XNNPACK, and the quantizers derived from the onednn and executorch FX backends."""

from __future__ import annotations

import pytest
import torch
from torchao.quantization.pt2e import HistogramObserver as TorchaoHistogramObserver
from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

import qcore
from qcore import host
from qcore.pt2e.histogram import HistogramObserver


@pytest.mark.parametrize("name", ["x86", "xnnpack", "onednn", "executorch"])
def test_each_quantizer_observes_static_activations_with_it(name: str) -> None:
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Conv2d(4, 4, 1)).eval()
    example = (torch.randn(1, 3, 8, 8),)
    with host.targeting("avx512_vnni"):  # (the budgeted plan's subclass of it elsewhere)
        quantizer = qcore.get_quantizer(name, model=model) if name in ("onednn", "executorch") else qcore.get_quantizer(name)
        prepared = prepare_pt2e(torch.export.export(model, example).module(), quantizer)
    kinds = {type(m) for m in prepared.modules() if isinstance(m, TorchaoHistogramObserver)}
    assert kinds == {HistogramObserver}, kinds
