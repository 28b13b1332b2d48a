"""qcore.tune drives the example plugin through the registry alone: its FX backend by
name, and the PT2E quantizer qcore derives from it, on a transformer trained in the
fixture (``qcore.zoo.trained``) whose int8 model loses accuracy."""

from __future__ import annotations

import warnings

import pytest
import torch

import qcore
from qcore.zoo.trained import outlier_transformer

TOLERANCE = 0.02


@pytest.mark.parametrize("flow", ["example", "pt2e:example"])
def test_the_example_backend_tunes_to_within_tolerance(flow: str) -> None:
    torch.manual_seed(0)
    case = outlier_transformer()
    float_accuracy = case.accuracy(case.model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        result = qcore.tune(
            case.model, case.example_inputs, case.calibration, flow,
            metric=case.validation_accuracy, tolerance=TOLERANCE,
        )  # fmt: skip
    assert result.int8_score < result.float_score - TOLERANCE  # int8 loses accuracy
    assert result.met, result.message
    assert [op.module_path for op in result.float_ops] == ["embed"]
    assert len(result.float_ops) <= 0.1 * len(result.quantizable_ops)
    assert case.accuracy(result.model) >= float_accuracy - TOLERANCE  # never seen by tune
