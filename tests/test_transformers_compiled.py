"""Quantized Hugging Face transformers compiled with the x86 lowering compute what the
eager converted models do (issue 20). Two compiles, the slow part of the zoo's tests:
BERT quantized by the XNNPACK quantizer (signed int8 activations, the model whose
calibration crashed) and GPT-2 by the x86 quantizer (its ``Conv1D`` projections are
``addmm``, taken as linears; their int8 weights are folded from transposed views).

Every linear runs as a oneDNN int8 kernel (counted in Inductor's generated code), the
compiled output is the eager converted model's, code for code (``qcore.testing.codes``),
and >= 25 dB from float. The ``avx2-kernels`` env runs this file again on oneDNN's AVX2
kernels (no VNNI: the doubled-reduction route).

Each model is cut to its first layer before it is quantized: the second layer repeats the
first's ops (the same patterns, the same kernels), so it adds nothing to lower or compare,
but Inductor lowers and schedules every op of it again.
"""

from __future__ import annotations

import copy
import re

import pytest
import torch
from compiled import compile_with_lowering
from torch import nn
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

import qcore
from qcore.metrics import sqnr
from qcore.testing.codes import compare_codes
from qcore.zoo import huggingface as transformers_zoo

MIN_SQNR = 25.0
LINEAR = torch.ops.aten.linear.default
MATMUL = torch.ops.aten.matmul.default
#: What sits between a dequantize and the matmul reading it in BERT's attention.
VIEWS = {getattr(torch.ops.aten, op).default for op in ("view", "permute", "expand", "clone", "dropout")}
VIEWS.add(torch.ops.aten.transpose.int)


def _quantized_first_layer(
    name: str, quantizer: str, options: dict[str, bool], opt_in: tuple[str, ...] = ()
) -> tuple[torch.fx.GraphModule, nn.Module, tuple[torch.Tensor, ...]]:
    """``transformers_zoo.quantize``'s flow (export, calibrate on seeds 1 to 4, convert)
    on the zoo model cut to its first layer, the ``opt_in`` rows enabled: the converted
    model, the float one, the held-out batch."""
    model, inputs = transformers_zoo.build(name)
    model = transformers_zoo.first_layer(model)
    exported = torch.export.export(copy.deepcopy(model), inputs(0)).module()
    prepared = prepare_pt2e(exported, qcore.get_quantizer(quantizer, **options).enable(*opt_in))
    with torch.no_grad():
        for seed in range(1, 5):
            prepared(*inputs(seed))
    return convert_pt2e(prepared), model, inputs(transformers_zoo.HELD_OUT)


@pytest.mark.parametrize(
    ("name", "quantizer", "options"),
    [("bert", "xnnpack", {"is_per_channel": True}), ("gpt2", "x86", {})],
)
def test_compiled_is_exactly_the_eager_converted_model(
    name: str, quantizer: str, options: dict[str, bool]
) -> None:
    converted, model, batch = _quantized_first_layer(name, quantizer, options)
    with torch.no_grad():
        expected = model(*batch)
    compiled = compile_with_lowering(converted, batch)
    linears = sum(1 for n in converted.graph.nodes if n.target == LINEAR)
    assert linears > 0
    ops = [op for op, _ in compiled.kernels]
    assert len(ops) == linears and all(op.startswith("qlinear") for op in ops), ops
    assert compiled.report.int8_kernels == linears, str(compiled.report)
    diff = compare_codes(compiled.eager, compiled.output)
    assert diff.exact, str(diff)
    assert sqnr(expected, compiled.output) >= MIN_SQNR


def _reads_codes(node: object) -> bool:
    """Whether ``node`` is a dequantize's output, through view ops."""
    while isinstance(node, torch.fx.Node) and node.target in VIEWS:
        node = node.args[0]
    return isinstance(node, torch.fx.Node) and "dequantize" in str(node.target)


#: Int8 matmul calls in Inductor's generated code (one per matrix of a batch).
INT_MM_CALL = re.compile(r"_int_mm\((?!.*assert_size_stride)")


def test_bert_attention_runs_in_int8_with_matmul_int8() -> None:
    """The x86 quantizer with ``enable("matmul_int8")`` on BERT's first layer (attention
    through ``F.scaled_dot_product_attention``): every linear a oneDNN int8 kernel, both
    attention matmuls int8 matmuls, one per head and sequence, on a VNNI target (without
    VNNI the row quantizes no matmul and the attention stays whole: the ``avx2-kernels``
    env runs this again), and the compiled output the
    eager converted model's, code for code, the bound of ``qcore.testing.codes`` taking
    the ones fp32 rounding moves (the matmuls' products are exact where eager sums fp32
    products)."""
    converted, model, batch = _quantized_first_layer("bert", "x86", {}, ("matmul_int8",))
    with torch.no_grad():
        expected = model(*batch)
    compiled = compile_with_lowering(converted, batch)
    linears = sum(1 for n in converted.graph.nodes if n.target == LINEAR)
    assert len(compiled.kernels) == linears > 0
    (heads,) = {m.num_attention_heads for m in model.modules() if hasattr(m, "num_attention_heads")}
    sequences = batch[0].shape[0]
    int8_matmuls = INT_MM_CALL.findall(compiled.code)
    if qcore.host.target().saturates_u8s8:  # no VNNI: no matmul operand is quantized
        assert not int8_matmuls
        matmuls = [n for n in converted.graph.nodes if n.target == MATMUL]
        assert matmuls and not any(_reads_codes(a) for n in matmuls for a in n.args)
    else:
        assert len(int8_matmuls) == 2 * heads * sequences, compiled.code
    diff = compare_codes(compiled.eager, compiled.output)
    assert diff.exact, str(diff)
    assert sqnr(expected, compiled.output) >= MIN_SQNR
