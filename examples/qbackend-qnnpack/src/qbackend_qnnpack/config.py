"""torch's QNNPACK FX backend config, declared as rows of qcore's pattern builder.

Pattern for pattern, field by field the same as torch 2.13's
``get_qnnpack_backend_config()`` (``tests/test_qnnpack.py`` checks it): each of torch's
``_get_*_configs`` helpers is one qcore family, and each of torch's dtype configs is one
of qcore's named presets. QNNPACK offers every static pattern twice, symmetric qint8 first
(the XNNPACK-compatible form: scale >= 2**-12, weights in [-127, 127]) and asymmetric
quint8 second; linear and the RNNs also run dynamically (int8 or fp16), embeddings with
weight-only quint8 or packed 4-bit weights.
"""

from __future__ import annotations

import operator

import torch
from torch.ao.quantization.backend_config import BackendConfig

from qcore.fx import dtypes
from qcore.fx.patterns import (
    SHARE_QPARAMS_OPS,
    assemble,
    binary_op_configs,
    bn_configs,
    cat_configs,
    conv_configs,
    default_op_configs,
    embedding_configs,
    fixed_qparams_configs,
    linear_configs,
    pattern_config,
    rnn_configs,
    share_qparams_configs,
)

#: torch's conv_dtype_configs: symmetric qint8, then quint8 activations with qint8 weights
WEIGHTED = [dtypes.WEIGHTED_QINT8_SYMMETRIC, dtypes.WEIGHTED_INT8]
#: torch's linear_dtype_configs: the static pair, then dynamic int8 and dynamic fp16
LINEAR = [*WEIGHTED, dtypes.DYNAMIC_INT8, dtypes.DYNAMIC_FP16]
#: torch's binary, default, fixed-qparams and share-qparams op configs (one list in all)
OPS = [dtypes.OP_QINT8_SYMMETRIC, dtypes.OP_QUINT8]
#: torch's rnn_op_dtype_configs
RNN = [dtypes.DYNAMIC_INT8, dtypes.DYNAMIC_FP16]
#: torch's embedding_op_dtype_configs
EMBEDDING = [dtypes.WEIGHT_ONLY_QUINT8, dtypes.WEIGHT_ONLY_QUINT4X2]


def build_backend_config() -> BackendConfig:
    """torch 2.13's QNNPACK backend config, rebuilt in torch's order; safe in a fresh
    process (the builder imports what torch's own config forgets to)."""
    return assemble(
        "qnnpack",
        conv_configs(WEIGHTED),  # 1d/2d/3d, transposed too, with relu/bn fusions and QAT
        linear_configs(LINEAR),
        binary_op_configs((operator.add, torch.add, operator.mul, torch.mul), OPS),
        # torch's binary op helper ends with matmul, which has no relu forms
        [pattern_config(torch.matmul, OPS)],
        cat_configs(OPS),
        default_op_configs(OPS),
        fixed_qparams_configs(OPS),  # the quint8 rows get sigmoid/tanh's exact qparams
        share_qparams_configs(SHARE_QPARAMS_OPS, OPS),
        bn_configs(OPS),
        rnn_configs(RNN),
        embedding_configs(EMBEDDING),
    )
