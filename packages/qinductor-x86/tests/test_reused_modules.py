"""A module called at several sites quantizes, call site by call site.

torchvision's ResNet ``BasicBlock`` calls one ``self.relu`` twice; torchao 0.18 raises
``ValueError: Input partition has more than one output node`` on it (and on any conv or
conv post-op module called twice). Each such model here has a twin with one module per
call site, same weights and same node names, on which torchao works: ours on the model
must give torchao's annotations and outputs on the twin.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import parity_models as pm
import pytest
import torch
import torchao_reference

import qcore
from qinductor_x86.quantizer import x86_inductor_quantizer as ours

REF = torchao_reference.load()
TABLE: dict[str, Any] = json.loads(
    (Path(__file__).parent / "data" / "expected_annotations.json").read_text()
)


@pytest.fixture(autouse=True)
def vnni_target() -> Iterator[None]:
    with qcore.host.targeting(TABLE["_source"]["target"]):
        yield


@pytest.mark.parametrize("model", ["resnet_reused", "conv_reused"])
def test_torchao_fails_on_a_conv_pattern_module_called_twice(model: str) -> None:
    with pytest.raises(ValueError, match="more than one output node"):
        pm.annotate_with(REF, model, "static")


@pytest.mark.parametrize("config", list(pm.CONFIGS))
def test_reused_relu_resnet_gets_torchaos_annotations_of_its_twin(config: str) -> None:
    """Against the checked-in table: the twin is the zoo's ``resnet``."""
    assert pm.REUSED["resnet_reused"][2] == "resnet"
    assert pm.annotate_with(ours, "resnet_reused", config) == TABLE[f"resnet/{config}"]


@pytest.mark.parametrize("config", ["static", "dynamic"])
def test_reused_relu_resnet_output_is_torchaos_on_its_twin(config: str) -> None:
    mine, ref_float = pm.quantize_with(ours, "resnet_reused", config)
    theirs, _ = pm.quantize_with(REF, "resnet", config)
    assert torch.equal(mine, theirs)
    assert not torch.equal(mine, ref_float)


def test_reused_conv_quantizes_every_call_like_its_tied_twin() -> None:
    mine = pm.annotate_with(ours, "conv_reused", "static")
    convs = [a for n, a in mine.items() if n.startswith("conv2d")]
    relus = [a for n, a in mine.items() if n.startswith("relu")]
    assert len(convs) == 2 and all(len(a["inputs"]) == 3 for a in convs)
    assert len(relus) == 2 and all(a.get("int8_out") for a in relus)
    out_mine, _ = pm.quantize_with(ours, "conv_reused", "static")
    out_twin, _ = pm.quantize_with(REF, "conv_tied_twin", "static")
    assert torch.equal(out_mine, out_twin)


def _specs(annotated: dict[str, Any]) -> dict[str, Any]:
    """Which inputs / outputs are quantized and how (no claim or fusion marks)."""
    return {
        n: {k: v for k, v in a.items() if k in {"inputs", "output"}}
        for n, a in annotated.items()
        if "inputs" in a or "output" in a
    }


def test_a_shared_relu_after_linears_is_fused_at_each_site() -> None:
    """torchao runs here but skips linear + ReLU fusion for a shared ReLU module; the
    fusion only marks the ReLU, so the quantized inputs and the outputs are the same."""
    mine = pm.annotate_with(ours, "relu_reused", "static")
    theirs = pm.annotate_with(REF, "relu_reused", "static")
    assert [n for n, a in mine.items() if n.startswith("relu") and a.get("int8_out")] == [
        "relu",
        "relu_1",
    ]
    assert not any(n.startswith("relu") for n in theirs)
    assert _specs(mine) == _specs(theirs)
    out_mine, _ = pm.quantize_with(ours, "relu_reused", "static")
    out_theirs, _ = pm.quantize_with(REF, "relu_reused", "static")
    assert torch.equal(out_mine, out_theirs)
