"""The oneDNN FX backend config, declared as rows of qcore's pattern builder.

Pattern for pattern the same as torch 2.13's ``get_onednn_backend_config()`` (checked by
``tests/test_parity.py``): uint8 activations, int8 weights, plus oneDNN's post-op fusions
(conv + add [+ relu] with the add on either side, linear + leaky_relu / tanh).
"""

from __future__ import annotations

import operator
from itertools import product
from typing import Literal

import torch
import torch.ao.nn.intrinsic as nni
import torch.ao.nn.quantized.reference as nnqr
import torch.nn.functional as F
from torch import nn
from torch.ao.quantization.backend_config import BackendConfig, BackendPatternConfig

from qcore.fx import dtypes
from qcore.fx.patterns import (
    SHARE_QPARAMS_OPS,
    BinaryRoot,
    assemble,
    binary_op_configs,
    bn_configs,
    cat_configs,
    chain,
    conv_configs,
    default_op_configs,
    eltwise_fusion_configs,
    embedding_configs,
    fixed_qparams_configs,
    fusion,
    layer_norm_configs,
    linear_configs,
    pattern_config,
    rnn_configs,
    share_qparams_configs,
)

WEIGHTED = [dtypes.WEIGHTED_INT8]
LINEAR = [dtypes.WEIGHTED_INT8, dtypes.DYNAMIC_INT8]
OPS = [dtypes.OP_QUINT8]

#: conv2d + add, the add on either side of the conv, with or without a batch norm
#: folded into the conv; oneDNN runs the add as a post-op of the convolution. In torch's
#: order: left before right, bn before none, torch.add before operator.add.
_SIDES: tuple[Literal["left", "right"], ...] = ("left", "right")
_ADD_VARIANTS = [
    (side, bn, add)
    for side in _SIDES
    for bn, add in product((nn.BatchNorm2d, None), (torch.add, operator.add))
]


def _conv_add(post: type[nn.Module] | None, into: type[nn.Module]) -> list[BackendPatternConfig]:
    rows: list[BackendPatternConfig] = [
        fusion(BinaryRoot(add, nn.Conv2d, side, bn=bn, post=post), WEIGHTED, into=into)
        for side, bn, add in _ADD_VARIANTS
    ]
    rows.append(pattern_config(into, WEIGHTED, root=nn.Conv2d, reference=nnqr.Conv2d))
    return rows


def _linear() -> list[BackendPatternConfig]:
    rows = linear_configs(LINEAR)
    rows += eltwise_fusion_configs(nn.Linear, F.linear, nn.LeakyReLU, F.leaky_relu, LINEAR,
                                   into=nni.LinearLeakyReLU, reference=nnqr.Linear)
    # linear + bn1d + leaky_relu folds in eval; oneDNN has no QAT form of it
    rows.append(fusion(chain(nn.Linear, nn.LeakyReLU, bn=nn.BatchNorm1d), LINEAR,
                       into=nni.LinearLeakyReLU))
    rows += eltwise_fusion_configs(nn.Linear, F.linear, nn.Tanh, torch.tanh, LINEAR,
                                   into=nni.LinearTanh, reference=nnqr.Linear)
    return rows


def beyond_torch() -> list[BackendPatternConfig]:
    """The patterns this backend runs that torch 2.13's own config lacks, one builder call
    per row: a new pattern goes here, and nowhere else. ``tests/test_parity.py`` holds
    every other pattern equal to torch's and expects exactly these in addition; the
    derived PT2E quantizer (``qcore.get_quantizer(NAME)``) picks them up by itself."""
    return []


def build_backend_config() -> BackendConfig:
    """torch 2.13's oneDNN backend config, rebuilt declaratively, and :func:`beyond_torch`;
    safe in a fresh process."""
    return assemble(
        "onednn",
        conv_configs(WEIGHTED),
        _conv_add(None, nni.ConvAdd2d),
        _conv_add(nn.ReLU, nni.ConvAddReLU2d),
        _linear(),
        binary_op_configs((operator.add, torch.add, operator.mul, torch.mul), OPS),
        [pattern_config(torch.matmul, OPS)],
        cat_configs(OPS),
        default_op_configs(OPS),
        fixed_qparams_configs(OPS),
        share_qparams_configs(SHARE_QPARAMS_OPS, OPS),
        bn_configs(OPS),
        layer_norm_configs([dtypes.INPUT_OUTPUT_ONLY_QUINT8]),
        rnn_configs([dtypes.DYNAMIC_INT8]),
        embedding_configs([dtypes.WEIGHT_ONLY_QINT8]),
        beyond_torch(),
    )
