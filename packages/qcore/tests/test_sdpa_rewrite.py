"""``sdpa_as_matmuls``: scaled-dot-product attention spelled out as its two matmuls around
a softmax, the same function in float, so that a quantizer can quantize both products;
what it cannot spell out the same way it leaves alone."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from qcore.pt2e.annotation.transforms import sdpa_as_matmuls

aten = torch.ops.aten


class Attention(nn.Module):
    def __init__(self, **options: Any) -> None:
        super().__init__()
        self.options = options

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *mask: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, *mask, **self.options)


def _inputs(mask: str | None) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 8, generator=gen) for _ in range(3))
    if mask is None:
        return q, k, v
    if mask == "bool":
        keep = torch.ones(2, 1, 5, 5, dtype=torch.bool)
        keep[1, ..., 3:] = False  # the second sequence's last two keys are padding
        return q, k, v, keep
    additive = torch.zeros(2, 1, 1, 5)
    additive[0, ..., 4] = -1e4
    return q, k, v, additive


def _reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Any, scale: float) -> torch.Tensor:
    """The attention by its definition, in float64."""
    scores = (q.double() @ k.double().transpose(-2, -1)) * scale
    if mask is not None and mask.dtype == torch.bool:
        scores = scores.masked_fill(~mask, -math.inf)
    elif mask is not None:
        scores = scores + mask.double()
    return scores.softmax(-1) @ v.double()


@pytest.mark.parametrize("mask", [None, "bool", "additive"])
@pytest.mark.parametrize("scale", [None, 0.5])
def test_the_rewrite_is_two_matmuls_around_a_softmax_computing_the_same(mask: str | None, scale: float | None) -> None:
    inputs = _inputs(mask)
    gm = torch.export.export(Attention(scale=scale), inputs).module()
    rewritten = sdpa_as_matmuls(gm)
    targets = [n.target for n in rewritten.graph.nodes if n.op == "call_function"]
    assert aten.scaled_dot_product_attention.default not in targets
    assert targets.count(aten.matmul.default) == 2 and targets.count(aten.softmax.int) == 1
    expected = _reference(*inputs[:3], inputs[3] if mask else None, scale or 8**-0.5)
    assert torch.allclose(rewritten(*inputs).double(), expected, atol=1e-6)
    # every new node has the value later passes read
    assert all("val" in n.meta for n in rewritten.graph.nodes if n.op == "call_function")


@pytest.mark.parametrize("options", [{"is_causal": True}, {"dropout_p": 0.1}, {"enable_gqa": True}])
def test_dropout_causal_and_grouped_attention_are_left_alone(options: dict[str, Any]) -> None:
    inputs = _inputs(None)
    gm = torch.export.export(Attention(**options), inputs).module()
    targets = [n.target for n in sdpa_as_matmuls(gm).graph.nodes]
    assert aten.scaled_dot_product_attention.default in targets
    assert aten.matmul.default not in targets
