"""The XNNPACK quantizer on Hugging Face transformers (``qcore.zoo.huggingface``)
against ExecuTorch 1.5.1's, live (issue 20).

Wherever ExecuTorch's quantizer runs (ViT, Whisper's encoder) the two write identical
annotations and convert to bit-identical outputs. On the models with a padding mask
(BERT, DistilBERT, GPT-2) ExecuTorch's calibration crashes (its scalar lifting makes the
mask's integer indices float) and the annotations differ only where listed: the adds
reading the additive mask, which ours leaves in float (``xnnpack_parity_models.MASK_REASON``).
"""

from __future__ import annotations

from typing import Any

import et_reference
import pytest
import torch
import xnnpack_parity_models as pm

from qcore.zoo.huggingface import MODELS, build, quantize
from qcore.zoo.suite import pt2e
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
    ours = pm.ExecuTorchRows().set_global(get_symmetric_quantization_config(is_per_channel=True))
    return theirs, ours


def _annotations(quantizer: Any, name: str) -> dict[str, Any]:
    model, inputs = build(name)
    return pt2e.annotate(quantizer, pt2e.exported(model, inputs(0)))


def _assert_differences_are_the_listed_masks(
    theirs: dict[str, Any], ours: dict[str, Any], name: str
) -> None:
    diff = pt2e.differences(theirs, ours)
    listed = DIFFERENCES.get(name, {})
    assert sorted(diff) == sorted(listed), diff
    for node in listed:
        assert diff[node]["ours"] is None
        assert "where" in diff[node]["reference"]["inputs"]  # ExecuTorch observes the mask


# Each model's annotations are compared in the prepare its flow runs anyway (``quantize``
# exports the model at ``inputs(0)``, as ``_annotations`` does, and prepare_pt2e annotates
# that graph as it is: these models have no batch norm to fold). ExecuTorch's annotate
# exports its conv-bn patterns anew at every call.


@pytest.mark.parametrize("name", REFERENCE_RUNS)
def test_annotations_and_converted_outputs_bit_identical_where_the_reference_runs(
    name: str,
) -> None:
    theirs, ours = (pt2e.Recording(q) for q in _pair())
    q_theirs, _, batch = quantize(name, theirs)
    q_ours, model, _ = quantize(name, ours)
    assert theirs.seen is not None and ours.seen is not None
    _assert_differences_are_the_listed_masks(theirs.seen, ours.seen, name)
    with torch.no_grad():
        out = q_ours(*batch)
        assert torch.equal(out, q_theirs(*batch))
        assert not torch.equal(out, model(*batch))  # something was quantized


@pytest.mark.parametrize("name", sorted(DIFFERENCES))
def test_the_reference_cannot_calibrate_the_masked_models_whose_annotations_differ_at_the_masks(
    name: str,
) -> None:
    """ExecuTorch's calibration crashes; the annotations it wrote in that prepare, before
    the crash, differ from ours only at the listed mask adds."""
    theirs, ours = _pair()
    recording = pt2e.Recording(theirs)
    with pytest.raises((IndexError, RuntimeError), match="indices"):
        quantize(name, recording)
    assert recording.seen is not None
    _assert_differences_are_the_listed_masks(recording.seen, _annotations(ours, name), name)


def test_every_model_is_compared() -> None:
    assert sorted([*REFERENCE_RUNS, *DIFFERENCES]) == sorted(MODELS)
    assert not any(
        isinstance(m, torch.nn.modules.batchnorm._BatchNorm)
        for name in MODELS
        for m in build(name)[0].modules()
    )
