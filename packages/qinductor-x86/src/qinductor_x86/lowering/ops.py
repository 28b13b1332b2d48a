"""The torch operators the lowering reads and writes, named by the role they play."""

from __future__ import annotations

import torch

import qcore.pt2e.annotation.ops as shared
from qinductor_x86 import _torch_private as private

aten = torch.ops.aten
prims = torch.ops.prims
onednn = torch.ops.onednn
quantized = torch.ops.quantized
qd = private.quantized_decomposed_ops()

QUANTIZE = (qd.quantize_per_tensor.default, qd.quantize_per_tensor.tensor)
DEQUANTIZE = (qd.dequantize_per_tensor.default, qd.dequantize_per_tensor.tensor)
DEQUANTIZE_PER_CHANNEL = qd.dequantize_per_channel.default
#: Dynamic quantization's symmetric qparams of an activation, computed at run time.
CHOOSE_SYMMETRIC = qd.choose_qparams_symmetric.tensor
#: Every quantize / dequantize a PT2E graph can hold: what report() accounts for.
Q_DQ = frozenset(
    (*QUANTIZE, *DEQUANTIZE, DEQUANTIZE_PER_CHANNEL, qd.quantize_per_channel.default)
)

QCONV = onednn.qconv_pointwise.default
QCONV_TENSOR = onednn.qconv_pointwise.tensor
QCONV_BINARY = onednn.qconv2d_pointwise.binary
QCONV_BINARY_TENSOR = onednn.qconv2d_pointwise.binary_tensor
QLINEAR = onednn.qlinear_pointwise.default
QLINEAR_TENSOR = onednn.qlinear_pointwise.tensor
QLINEAR_BINARY = onednn.qlinear_pointwise.binary
QLINEAR_BINARY_TENSOR = onednn.qlinear_pointwise.binary_tensor
#: oneDNN's fp16 dynamic linear (and with a fused relu) on a prepacked fp16 weight.
LINEAR_DYNAMIC_FP16 = onednn.linear_dynamic_fp16.default
LINEAR_RELU_DYNAMIC_FP16 = onednn.linear_relu_dynamic_fp16.default
#: ATen's int8 weight-only matmul (no oneDNN prepack; the weight stays a plain int8 tensor).
WEIGHT_ONLY = aten._weight_int8pack_mm.default
CONVERT = prims.convert_element_type.default
#: Float computations whose weights can be prepacked, and what they are.
COMPUTE = {
    aten.convolution.default: "conv",
    aten.mm.default: "linear",
    aten.addmm.default: "linear",
    aten.bmm.default: "linear",
}
#: The value-moving sets, declared once for every package (qcore's PT2E ops): views
#: (lifting a quantize over one, or reading a value through one, is exact) and the moves
#: (any per-value map of int8 codes, ``+ 128``, commutes with them).
VIEWS = shared.VIEWS
MOVES = shared.MOVES
#: What a dequantized value flows through unchanged on its way to the op that computes
#: with it: views, a clone or broadcast (moves that keep every value where a conv or
#: matmul finds it), and a dtype cast (int8-mixed-bf16 graphs cast it to bf16 there).
TO_COMPUTE = frozenset({*VIEWS, aten.clone.default, aten.expand.default, CONVERT})
