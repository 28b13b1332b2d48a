"""Op tables shared by backends: which ops belong to which family in torch's FX flow.

These are facts of torch's quantized op set, not of one backend; backends that differ
declare their own lists (ExecuTorch does for share-qparams ops). Which ops only move
values is declared once for every op space, in ``qcore.pt2e.annotation.ops.VALUE_MOVES``.
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
from qcore.pt2e.annotation.ops import fx_forms

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

#: Ops that run on quantized tensors and keep the input's qparams (pooling, value moves,
#: clamps): one observer serves input and output. torch 2.13's table in its order, the
#: value moves among it named by their rows of ``qcore.pt2e.annotation.ops.VALUE_MOVES``.
SHARE_QPARAMS_OPS: tuple[Op, ...] = (
    nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d,
    nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d,
    nn.Hardtanh, *fx_forms("identity", kind="module"),
    nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d,
    *fx_forms("pixel_shuffle", "pixel_unshuffle", kind="module"), nn.ReLU, nn.ReLU6,
    F.adaptive_avg_pool1d, F.adaptive_avg_pool2d, F.adaptive_avg_pool3d,
    F.hardtanh, F.hardtanh_, F.interpolate,
    F.max_pool1d, F.max_pool2d, F.max_pool3d,
    *fx_forms("pixel_shuffle", "pixel_unshuffle", kind="function"), F.relu, F.relu6,
    F.avg_pool1d, F.avg_pool2d, F.avg_pool3d,
    torch.clamp, *fx_forms("flatten", kind="function"), torch.mean,
    *fx_forms("narrow", "repeat_interleave", "transpose", "squeeze", "stack", "unsqueeze",
              kind="function"),
    operator.floordiv,
    *fx_forms("contiguous", kind="method"), "clamp", *fx_forms("detach", kind="method"), "mean",
    *fx_forms("permute", "repeat", "repeat_interleave", "reshape", "resize_", kind="method"),
    "relu", "relu_",
    *fx_forms("squeeze", "transpose", "unsqueeze", "view", kind="method"),
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
