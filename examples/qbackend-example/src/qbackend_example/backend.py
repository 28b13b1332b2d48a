"""Patterns of the fictional "example" NPU, declared with qcore's builder.

The chip runs uint8 conv2d and linear with a fused ReLU, uint8 adds, and SiLU through a
lookup table. The same SiLU rows are what this distribution adds to the oneDNN backend,
as a hardware team would when its SiLU kernel also serves x86 servers.
"""

from __future__ import annotations

import operator

import torch
import torch.nn.functional as F
from torch import nn
from torch.ao.quantization import QConfigMapping, get_default_qat_qconfig_mapping
from torch.ao.quantization.backend_config import BackendConfig, BackendPatternConfig
from torch.ao.quantization.qconfig_mapping import get_default_qconfig_mapping

from qcore.fx import dtypes
from qcore.fx.patterns import assemble, binary_op_configs, conv_configs, linear_configs, rows

WEIGHTED = [dtypes.WEIGHTED_INT8]
OPS = [dtypes.OP_QUINT8]


def silu_patterns() -> list[BackendPatternConfig]:
    """SiLU as a quantized op with its own output observer (a LUT kernel)."""
    return rows((nn.SiLU, F.silu), OPS)


def build_backend_config() -> BackendConfig:
    return assemble(
        "example",
        conv_configs(WEIGHTED, dims=(2,), transpose=False),
        linear_configs(WEIGHTED),
        binary_op_configs((operator.add, torch.add), OPS),
        silu_patterns(),
    )


def build_qconfig_mapping(*, is_qat: bool, model: nn.Module | None = None) -> QConfigMapping:
    """uint8 activations with a reduced range and per-channel int8 weights, fbgemm-style."""
    del model  # the chip's fusions agree with one qconfig per module type
    if is_qat:
        return get_default_qat_qconfig_mapping("fbgemm")
    return get_default_qconfig_mapping("fbgemm")
