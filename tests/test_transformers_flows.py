"""Hugging Face transformers through every PT2E quantizer, eager converted (issue 20).

The zoo (``qcore.zoo.huggingface``: BERT, DistilBERT, GPT-2, ViT, Whisper's
encoder, random weights, eager attention, a padded attention mask) goes through the
XNNPACK quantizer, the x86 quantizer and the quantizers derived from the ``onednn`` and
``executorch`` backends: export, prepare, four calibration batches, convert. Each lands
>= 25 dB SQNR against the float model's last hidden state on a held-out batch, with
its linear layers quantized (the transformer's compute; XNNPACK, like ExecuTorch's
quantizer, has no annotator for GPT-2's ``addmm`` projections, and ``explain`` says so).
Compiling is slow: ``test_transformers_compiled.py`` compiles two of these.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.fx import GraphModule

import qcore
from qcore.metrics import sqnr
from qcore.testing.fresh import run_fresh
from qcore.zoo.huggingface import MODELS, build

#: quantizer name -> its options: XNNPACK per channel, as ExecuTorch's examples use it
QUANTIZERS: dict[str, dict[str, Any]] = {
    "xnnpack": {"is_per_channel": True},
    "x86": {},
    "onednn": {},
    "executorch": {},
}
MIN_SQNR = 25.0

LINEAR = torch.ops.aten.linear.default


def quantized_linears(converted: GraphModule) -> int:
    """Linears whose weight comes dequantized from int8 codes."""
    return sum(
        1
        for n in converted.graph.nodes
        if n.target == LINEAR and "dequantize" in str(getattr(n.args[1], "target", ""))
    )


@pytest.mark.parametrize("quantizer", QUANTIZERS)
@pytest.mark.parametrize("name", MODELS)
def test_zoo_model_quantizes_to_25_db(
    zoo_quantized: Callable[..., Any], name: str, quantizer: str
) -> None:
    converted, model, batch = zoo_quantized(name, quantizer, **QUANTIZERS[quantizer])
    with torch.no_grad():
        expected, output = model(*batch), converted(*batch)
    assert torch.isfinite(output).all()
    assert sqnr(expected, output) >= MIN_SQNR
    linears = sum(1 for n in converted.graph.nodes if n.target == LINEAR)
    if name == "gpt2" and quantizer != "x86":
        assert linears == 0  # GPT-2's Conv1D is an addmm: only the x86 quantizer takes it
    else:
        assert linears > 0 and quantized_linears(converted) == linears


def test_what_stays_float_in_gpt2_says_why() -> None:
    """XNNPACK leaves GPT-2's Conv1D (``addmm``) in float, as ExecuTorch's quantizer does,
    and the attention mask's additive ``finfo.min`` too; the report names both."""
    model, inputs = build("gpt2")
    exported = torch.export.export(model, inputs(0)).module()
    quantizer = qcore.get_quantizer("xnnpack", is_per_channel=True)
    reasons = {str(f) for f in qcore.explain_not_quantized(exported, quantizer)}
    assert any("addmm" in r and "no annotator" in r for r in reasons), reasons
    assert any("additive mask" in r for r in reasons), reasons


_TORCHAO_ON_BERT = """
import traceback
import torch
from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e
from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
    X86InductorQuantizer, get_default_x86_inductor_quantization_config)
from qcore.testing.fresh import emit
from qcore.zoo.huggingface import build

model, inputs = build("bert")
quantizer = X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config())
try:
    prepare_pt2e(torch.export.export(model, inputs(0)).module(), quantizer)
    emit({"raised": None})
except Exception as error:
    frames = traceback.extract_tb(error.__traceback__)
    emit({"raised": type(error).__name__, "in": frames[-1].name})
"""


def test_the_x86_quantizer_takes_bert_where_torchaos_raises(
    zoo_quantized: Callable[..., Any],
) -> None:
    """torchao 0.18's X86InductorQuantizer raises annotating BERT (``IndexError`` in
    ``_get_output_nodes_of_partitions``, the issue's report), in a fresh interpreter
    (importing it registers torchao's Inductor passes). Ours quantizes every linear of the
    same model."""
    outcome = run_fresh(_TORCHAO_ON_BERT)
    assert outcome.ok, outcome.describe()
    assert outcome.result() == {"raised": "IndexError", "in": "_get_output_nodes_of_partitions"}
    converted, model, batch = zoo_quantized("bert", "x86")
    linears = sum(1 for n in converted.graph.nodes if n.target == LINEAR)
    assert linears == 12 and quantized_linears(converted) == linears
    with torch.no_grad():
        assert sqnr(model(*batch), converted(*batch)) >= MIN_SQNR
