"""The ExecuTorch FX backend config, declared as rows of qcore's pattern builder.

Pattern for pattern the same as torch 2.13's ``get_executorch_backend_config()`` (checked
by ``tests/test_parity.py``). ExecuTorch lowers to XNNPACK, so every quantized pattern
offers the symmetric qint8 form first (scale >= 2**-12, weights in [-127, 127]) and the
asymmetric quint8 form second; linear also runs dynamically (quint8, qint8 or fp16).
"""

from __future__ import annotations

import operator

import torch
import torch.nn.functional as F
from torch import nn
from torch.ao.quantization.backend_config import BackendConfig, BackendPatternConfig

from qcore.fx import dtypes
from qcore.fx.patterns import (
    assemble,
    binary_op_configs,
    cat_configs,
    conv_configs,
    embedding_configs,
    linear_configs,
    pattern_config,
    share_qparams_configs,
)
from qcore.pt2e.annotation.ops import fx_forms

WEIGHTED = [dtypes.WEIGHTED_QINT8_SYMMETRIC, dtypes.WEIGHTED_INT8]
LINEAR = [*WEIGHTED, dtypes.DYNAMIC_INT8, dtypes.DYNAMIC_QINT8_SYMMETRIC, dtypes.DYNAMIC_FP16]
OPS = [dtypes.OP_QINT8_SYMMETRIC, dtypes.OP_QUINT8]
#: torch's table gives binary ops the weighted quint8 config as their second choice; the
#: bias/weight entries are unused by ops without weights, so it acts like OP_QUINT8.
BINARY = [dtypes.OP_QINT8_SYMMETRIC, dtypes.WEIGHTED_INT8]

#: Ops ExecuTorch runs on quantized tensors keeping the input's qparams: torch 2.13's
#: table in its order, the value moves among it named by their rows of
#: ``qcore.pt2e.annotation.ops.VALUE_MOVES``.
SHARE_QPARAMS_OPS = (
    *fx_forms("flatten", kind="module"),
    F.adaptive_avg_pool2d, F.elu, F.hardtanh, F.max_pool2d, F.pad, F.relu,
    F.relu6, F.leaky_relu, F.leaky_relu_, nn.AdaptiveAvgPool2d, nn.ConstantPad2d, nn.ELU,
    nn.MaxPool2d, nn.ReLU6, nn.Hardtanh, nn.LeakyReLU, torch.clamp,
    *fx_forms("flatten", kind="function"), torch.mean,
    *fx_forms("permute", "permute_copy", "squeeze", kind="function"), "clamp", "mean",
    *fx_forms("permute", "reshape", kind="method"), "relu", "relu_",
    *fx_forms("squeeze", kind="method"), "leaky_relu",
)  # fmt: skip


def beyond_torch() -> list[BackendPatternConfig]:
    """The patterns this backend runs that torch 2.13's own config lacks, one builder call
    per row: a new pattern goes here, and nowhere else. ``tests/test_parity.py`` holds
    every other pattern equal to torch's and expects exactly these in addition; the
    derived PT2E quantizer (``qcore.get_quantizer(NAME)``) picks them up by itself."""
    return []


def build_backend_config() -> BackendConfig:
    """torch 2.13's ExecuTorch backend config, rebuilt declaratively, and :func:`beyond_torch`."""
    binary_ops = (operator.add, torch.add, operator.sub, torch.sub, operator.mul, torch.mul)
    return assemble(
        "executorch",
        linear_configs(LINEAR, fusions=False),
        conv_configs(WEIGHTED, dims=(2,), transpose=False),
        binary_op_configs(binary_ops, BINARY),
        share_qparams_configs(SHARE_QPARAMS_OPS, OPS),
        [pattern_config(nn.BatchNorm2d, OPS)],
        cat_configs(OPS, ops=(torch.cat, torch.concat, torch.concatenate)),
        embedding_configs([dtypes.WEIGHT_ONLY_QUINT8], functional=True),
        beyond_torch(),
    )
