"""Annotations on the model zoo equal torchao 0.18's, from the checked-in table that
``make_expected_table.py`` generated with the reference quantizer on a VNNI target."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import parity_models as pm
import pytest

import qcore
from qcore.zoo.suite.pt2e import differences
from qinductor_x86.quantizer import x86_inductor_quantizer as ours

TABLE: dict[str, Any] = json.loads(
    (Path(__file__).parent / "data" / "expected_annotations.json").read_text()
)
CASES = [(m, c) for m in pm.MODELS for c in pm.CONFIGS]


def test_table_covers_every_model_and_config() -> None:
    assert TABLE["_source"] == {"torchao": "0.18.0", "target": "avx512_vnni"}
    assert sorted(k for k in TABLE if k != "_source") == sorted(f"{m}/{c}" for m, c in CASES)


@pytest.mark.parametrize(("model", "config"), CASES)
def test_annotations_match_torchao(model: str, config: str) -> None:
    with qcore.host.targeting(TABLE["_source"]["target"]):
        mine = pm.annotate_with(ours, model, config)
    diff = differences(TABLE[f"{model}/{config}"], mine, names=("torchao", "ours"))
    assert not diff, json.dumps(diff, indent=1)
    assert any("inputs" in a for a in mine.values())
