"""Annotations on real models equal ExecuTorch 1.5.1's, from the checked-in table that
``make_expected_table.py`` generated with the reference quantizer (no ExecuTorch needed),
except where ``xnnpack_parity_models.DIFFERENCES`` lists a difference and its reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import xnnpack_parity_models as pm

from qcore.zoo.suite.pt2e import differences
from qquantizer_xnnpack.quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

TABLE: dict[str, Any] = json.loads(
    (Path(__file__).parent / "data" / "expected_annotations.json").read_text()
)
CASES = [(m, c) for m in pm.MODELS for c in pm.CONFIGS]


def test_table_covers_every_model_and_config() -> None:
    assert TABLE["_source"] == {"executorch": "1.5.1"}
    assert sorted(k for k in TABLE if k != "_source") == sorted(f"{m}/{c}" for m, c in CASES)


@pytest.mark.parametrize(("model", "config"), CASES)
def test_annotations_match_executorch(model: str, config: str) -> None:
    quantizer = pm.ExecuTorchRows().set_global(
        get_symmetric_quantization_config(**pm.CONFIGS[config])
    )
    ours = pm.annotate_with(quantizer, model)
    diff = differences(TABLE[f"{model}/{config}"], ours, names=("executorch", "ours"))
    listed = pm.expected_differences(model, config)
    assert sorted(diff) == sorted(listed), json.dumps(diff, indent=1)
    for node in listed:  # where we differ, we leave in float what ExecuTorch observes
        assert diff[node]["ours"] is None and diff[node]["executorch"]["annotated"]
    assert any("output" in a or "inputs" in a for a in ours.values())


def test_the_parity_quantizer_runs_executorchs_rows_and_the_quantizer_adds_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The namespace is ExecuTorch's rows, then ``beyond_executorch()``'s; the quantizer the
    parity tests compare runs ExecuTorch's rows only. A row listed in
    ``beyond_executorch()`` (here one of the namespace's own, as a stand-in for a new
    row) drops out of the compared quantizer and stays in the user's."""
    from qquantizer_xnnpack import annotators

    names = [a.name for a in annotators.EXECUTORCH_ANNOTATORS]
    beyond = [a.name for a in annotators.beyond_executorch()]
    assert [a.name for a in XNNPACKQuantizer().annotators()] == names + beyond
    assert [a.name for a in pm.ExecuTorchRows().annotators()] == names
    extra = annotators.EXECUTORCH_ANNOTATORS[-1]
    monkeypatch.setattr(annotators, "beyond_executorch", lambda: (extra,))
    assert [a.name for a in pm.ExecuTorchRows().annotators()] == names[:-1]
    assert [a.name for a in XNNPACKQuantizer().annotators()] == names
