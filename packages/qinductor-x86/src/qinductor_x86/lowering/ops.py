"""The torch operators the lowering reads and writes, named by the role they play."""

from __future__ import annotations

import torch

from qinductor_x86 import _torch_private as private

aten = torch.ops.aten
prims = torch.ops.prims
onednn = torch.ops.onednn
quantized = torch.ops.quantized
qd = private.quantized_decomposed_ops()

QUANTIZE = (qd.quantize_per_tensor.default, qd.quantize_per_tensor.tensor)
DEQUANTIZE = (qd.dequantize_per_tensor.default, qd.dequantize_per_tensor.tensor)
DEQUANTIZE_PER_CHANNEL = qd.dequantize_per_channel.default
#: Every quantize / dequantize a PT2E graph can hold: what report() accounts for.
Q_DQ = frozenset(
    (*QUANTIZE, *DEQUANTIZE, DEQUANTIZE_PER_CHANNEL, qd.quantize_per_channel.default)
)

QCONV = onednn.qconv_pointwise.default
QCONV_BINARY = onednn.qconv2d_pointwise.binary
QLINEAR = onednn.qlinear_pointwise.default
QLINEAR_TENSOR = onednn.qlinear_pointwise.tensor
QLINEAR_BINARY = onednn.qlinear_pointwise.binary
QLINEAR_BINARY_TENSOR = onednn.qlinear_pointwise.binary_tensor
#: The oneDNN int8 kernels this lowering emits (and torch's copy emits): what "lowered" means.
INT8_KERNELS = frozenset(
    {
        QCONV,
        onednn.qconv_pointwise.tensor,
        QCONV_BINARY,
        onednn.qconv2d_pointwise.binary_tensor,
        QLINEAR,
        QLINEAR_TENSOR,
        QLINEAR_BINARY,
        QLINEAR_BINARY_TENSOR,
    }
)
#: ATen's int8 weight-only matmul (no oneDNN prepack; the weight stays a plain int8 tensor).
WEIGHT_ONLY = aten._weight_int8pack_mm.default
#: Kernels a post-op can still be fused into: the plain forms weight prepack emits.
FUSABLE = {QCONV: "conv", QLINEAR: "linear", QLINEAR_TENSOR: "linear"}

CONVERT = prims.convert_element_type.default
#: Float computations whose weights can be prepacked, and what they are.
COMPUTE = {
    aten.convolution.default: "conv",
    aten.mm.default: "linear",
    aten.addmm.default: "linear",
    aten.bmm.default: "linear",
}
#: Ops that only move data: lifting a quantize over them, or reading through them, is exact.
VIEWS = frozenset(
    {
        aten.view.default,
        aten.reshape.default,
        aten.permute.default,
        aten.transpose.int,
        aten._unsafe_view.default,
    }
)
