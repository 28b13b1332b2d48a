"""The x86 quantizer reorders a linear's input channels for a CPU without VNNI only, and
only after training (``transform_for_annotation``; the rewrite itself:
``packages/qcore/tests/test_pairing.py``)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import qcore
from qcore.pt2e.annotation.channel_order import REORDERED
from qinductor_x86.quantizer.x86_inductor_quantizer import (
    X86InductorQuantizer,
    get_default_x86_inductor_quantization_config,
)


class Classifier(nn.Module):
    """A hidden layer and a head of ten classes whose full-range weights can overflow an
    int16 pair in this order (Gaussian: few large weights, so another order exists)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.body, self.head = nn.Linear(16, 512), nn.Linear(512, 10)
        nn.init.normal_(self.head.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.body(x)))


def _reordered(target: str, is_qat: bool) -> list[str]:
    exported = torch.export.export(Classifier(), (torch.randn(2, 16),)).module()
    config = get_default_x86_inductor_quantization_config(is_qat=is_qat)
    with qcore.host.targeting(target):
        model = X86InductorQuantizer().set_global(config).transform_for_annotation(exported)
    return [str(n.name) for n in model.graph.nodes if REORDERED in n.meta]


@pytest.mark.parametrize(
    ("target", "is_qat", "reordered"),
    [("avx2", False, True), ("avx2", True, False), ("avx512_vnni", False, False)],
    ids=["avx2", "avx2, QAT", "VNNI"],
)
def test_only_a_saturating_post_training_target_reorders(target: str, is_qat: bool, reordered: bool) -> None:
    """For avx2, post-training: the head. In QAT the weights the order was chosen for
    change in training; a VNNI target sums in 32 bits and keeps torchao's graph."""
    assert _reordered(target, is_qat) == (["linear_1"] if reordered else [])
