"""``qcore.fx`` with the ExecuTorch backend: the reference representation, no host kernels,
and functional calls with keywords and defaults."""

from __future__ import annotations

import pytest
import torch

import qcore
import qcore.fx
from qcore.zoo.models import ModelCase, case, functional_keyword_cases, sqnr
from qcore.zoo.suite.flow import ptq, run


@pytest.mark.parametrize("name", ["resnet", "mobilenet", "transformer", "functional"])
def test_qcore_fx_is_torchs_reference_flow(name: str) -> None:
    model_case = case(name)
    ours = qcore.fx.quantize(model_case.model(), "executorch", model_case.calibration_batches())
    mapping = qcore.get_qconfig_mapping("executorch", model=model_case.model())
    reference = ptq(
        model_case, mapping, qcore.get_backend_config("executorch"), convert="reference"
    )
    assert torch.equal(run(ours, model_case), run(reference, model_case))
    assert not any("quantized." in str(n.target) for n in ours.graph.nodes)


@pytest.mark.parametrize("model_case", functional_keyword_cases(), ids=lambda c: c.name)
def test_functional_keywords_quantize_accurately(model_case: ModelCase) -> None:
    converted = qcore.fx.quantize(
        model_case.model(), "executorch", model_case.calibration_batches()
    )
    # both conv2d calls and the linear (torch's ExecuTorch config has no conv1d/conv3d)
    assert _weights_quantized(converted) == 3
    assert sqnr(run(model_case.model(), model_case), run(converted, model_case)) >= 30


def _weights_quantized(model: torch.fx.GraphModule) -> int:
    return sum("quantize_per_channel" in str(n.target) for n in model.graph.nodes)
