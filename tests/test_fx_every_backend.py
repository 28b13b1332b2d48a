"""``qcore.fx`` quantizes functional calls with keywords and defaults with every installed
backend, first-party or not: the normalization lives in qcore, not in a backend."""

from __future__ import annotations

import pytest
import torch

import qcore
import qcore.fx
from qcore.int8.engine import quantized_engine
from qcore.zoo.models import functional_keyword_cases, sqnr

BACKENDS = sorted(p.name for p in qcore.list_plugins() if p.kind == "backend")


def test_every_first_party_backend_is_installed_here() -> None:
    assert {"onednn", "executorch"} <= set(BACKENDS)


@pytest.mark.parametrize("backend", BACKENDS)
def test_functional_keywords_quantize_with_every_backend(backend: str) -> None:
    (model_case,) = functional_keyword_cases()
    with quantized_engine("onednn"):
        converted = qcore.fx.quantize(
            model_case.model(), backend, model_case.calibration_batches()
        )
        with torch.no_grad():
            out = converted(*model_case.inputs(0))
            expected = model_case.model()(*model_case.inputs(0))
    quantized_weights = sum(
        "quantize_per_channel" in str(n.target) or "packed" in str(n.target)
        for n in converted.graph.nodes
    )
    assert quantized_weights >= 3, "the conv2d calls and the linear must get int8 weights"
    assert sqnr(expected, out) >= 25
