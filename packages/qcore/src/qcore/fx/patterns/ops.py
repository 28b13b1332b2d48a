"""Op tables shared by backends: which ops belong to which family in torch's FX flow.

These are facts of torch's quantized op set, not of one backend; backends that differ
declare their own lists (ExecuTorch does for share-qparams ops).
"""

from __future__ import annotations

import operator
from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import nn
from torch.ao.quantization.backend_config import DTypeWithConstraints, ObservationType

from qcore.fx.dtypes import FIXED_QPARAMS_0_TO_1, FIXED_QPARAMS_NEG1_TO_1
from qcore.fx.patterns.rows import Op

_DIFFERENT = ObservationType.OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT
_SHARED = ObservationType.OUTPUT_SHARE_OBSERVER_WITH_INPUT

#: Binary ops: with two tensors (or none) the output gets its own observer; with one
#: tensor and a scalar the quantized kernel keeps the tensor's qparams, so they share.
BINARY_OP_OBSERVATION: Mapping[int, ObservationType] = {0: _DIFFERENT, 1: _SHARED, 2: _DIFFERENT}

#: The activations a binary op may be fused with (module, functional, torch op).
RELU_FORMS: tuple[Op, ...] = (nn.ReLU, F.relu, torch.relu)

#: Ops whose output range is fixed, mapped to the exact qparams that range needs.
FIXED_QPARAMS_OPS: Mapping[Op, DTypeWithConstraints] = {
    nn.Hardsigmoid: FIXED_QPARAMS_0_TO_1,
    F.hardsigmoid: FIXED_QPARAMS_0_TO_1,
    "hardsigmoid": FIXED_QPARAMS_0_TO_1,
    "hardsigmoid_": FIXED_QPARAMS_0_TO_1,
    nn.Sigmoid: FIXED_QPARAMS_0_TO_1,
    torch.sigmoid: FIXED_QPARAMS_0_TO_1,
    "sigmoid": FIXED_QPARAMS_0_TO_1,
    "sigmoid_": FIXED_QPARAMS_0_TO_1,
    nn.Softmax: FIXED_QPARAMS_0_TO_1,
    nn.Tanh: FIXED_QPARAMS_NEG1_TO_1,
    torch.tanh: FIXED_QPARAMS_NEG1_TO_1,
    "tanh": FIXED_QPARAMS_NEG1_TO_1,
    "tanh_": FIXED_QPARAMS_NEG1_TO_1,
}

#: Ops that run on quantized tensors and keep the input's qparams (pooling, views,
#: clamps): one observer serves input and output.
SHARE_QPARAMS_OPS: tuple[Op, ...] = (
    nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d,
    nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d,
    nn.Hardtanh, nn.Identity,
    nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d,
    nn.PixelShuffle, nn.PixelUnshuffle, nn.ReLU, nn.ReLU6,
    F.adaptive_avg_pool1d, F.adaptive_avg_pool2d, F.adaptive_avg_pool3d,
    F.hardtanh, F.hardtanh_, F.interpolate,
    F.max_pool1d, F.max_pool2d, F.max_pool3d,
    F.pixel_shuffle, F.pixel_unshuffle, F.relu, F.relu6,
    F.avg_pool1d, F.avg_pool2d, F.avg_pool3d,
    torch.clamp, torch.flatten, torch.mean, torch.narrow, torch.repeat_interleave,
    torch.transpose, torch.squeeze, torch.stack, torch.unsqueeze, operator.floordiv,
    "contiguous", "clamp", "detach", "detach_", "mean", "permute", "repeat",
    "repeat_interleave", "reshape", "resize_", "relu", "relu_", "squeeze", "squeeze_",
    "transpose", "unsqueeze", "unsqueeze_", "view",
)  # fmt: skip

#: Ops with their own output observer and nothing else to configure.
DEFAULT_OPS: tuple[Op, ...] = (
    nn.ELU, nn.LeakyReLU, nn.Hardswish,
    nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d,
    nn.Dropout, nn.PReLU,
    F.elu, F.hardswish, F.leaky_relu, F.dropout,
)  # fmt: skip

#: Functional norms and where their weight and bias arguments sit.
NORM_FUNCTIONALS: Mapping[Op, Mapping[str, int]] = {
    F.group_norm: {"weight": 2, "bias": 3},
    F.instance_norm: {"weight": 3, "bias": 4},
}
