"""The XNNPACK quantizer on Hugging Face transformers (``qcore.testing.transformers_zoo``)
against ExecuTorch 1.5.1's, live (issue 20).

Wherever ExecuTorch's quantizer runs (ViT, Whisper's encoder) the two write identical
annotations and convert to bit-identical outputs. On the models with a padding mask
(BERT, DistilBERT, GPT-2) ExecuTorch's calibration crashes (its scalar lifting makes the
mask's integer indices float) and the annotations differ only where listed: the adds
reading the additive mask, which ours leaves in float (``parity_models.MASK_REASON``).
"""

from __future__ import annotations

from typing import Any

import et_reference
import parity_models as pm
import pytest
import torch

from qcore.testing import pt2e
from qcore.testing.transformers_zoo import MODELS, build, quantize
from qquantizer_xnnpack.quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

REF = et_reference.load()
#: model -> the nodes whose annotations differ from ExecuTorch's, each an add of the
#: attention scores and the additive mask (one per layer; transformers is pinned)
DIFFERENCES: dict[str, dict[str, str]] = {
    "bert": dict.fromkeys(("add_4", "add_7"), pm.MASK_REASON),
    "distilbert": dict.fromkeys(("add_3", "add_6"), pm.MASK_REASON),
    "gpt2": dict.fromkeys(("add_4", "add_9"), pm.MASK_REASON),
}
REFERENCE_RUNS = sorted(set(MODELS) - set(DIFFERENCES))


def _pair() -> tuple[Any, XNNPACKQuantizer]:
    theirs = REF.XNNPACKQuantizer().set_global(
        REF.get_symmetric_quantization_config(is_per_channel=True)
    )
    ours = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    return theirs, ours


def _annotations(quantizer: Any, name: str) -> dict[str, Any]:
    model, inputs = build(name)
    return pt2e.annotate(quantizer, pt2e.exported(model, inputs(0)))


@pytest.mark.parametrize("name", MODELS)
def test_annotations_identical_but_for_the_listed_masks(name: str) -> None:
    theirs, ours = _pair()
    diff = pt2e.differences(_annotations(theirs, name), _annotations(ours, name))
    listed = DIFFERENCES.get(name, {})
    assert sorted(diff) == sorted(listed), diff
    for node in listed:
        assert diff[node]["ours"] is None
        assert "where" in diff[node]["reference"]["inputs"]  # ExecuTorch observes the mask


@pytest.mark.parametrize("name", REFERENCE_RUNS)
def test_converted_outputs_bit_identical_where_the_reference_runs(name: str) -> None:
    theirs, ours = _pair()
    q_theirs, _, batch = quantize(name, theirs)
    q_ours, model, _ = quantize(name, ours)
    with torch.no_grad():
        out = q_ours(*batch)
        assert torch.equal(out, q_theirs(*batch))
        assert not torch.equal(out, model(*batch))  # something was quantized


@pytest.mark.parametrize("name", sorted(DIFFERENCES))
def test_the_reference_cannot_calibrate_the_masked_models(name: str) -> None:
    theirs, _ = _pair()
    with pytest.raises((IndexError, RuntimeError), match="indices"):
        quantize(name, theirs)
