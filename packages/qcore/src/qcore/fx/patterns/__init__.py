"""Declarative builder for torch FX ``BackendConfig``s.

A backend is a list of rows: op families (``conv_configs``, ``binary_op_configs``, ...)
for the standard groups, ``fusion(shape, ...)`` for fused patterns, ``pattern_config``
for anything else, and ``assemble(name, ...)`` to make the ``BackendConfig``. Fusion
shapes (:class:`Chain`, :class:`BinaryRoot`) derive the fuser method and the root-node
and extra-input getters, so no backend writes those functions by hand. A derived fuser
that cannot build a fusion exactly raises :class:`UnfusablePattern`.
"""

from qcore.fx.patterns.families import (
    ConvKinds,
    binary_op_configs,
    bn_configs,
    cat_configs,
    conv_configs,
    default_op_configs,
    eltwise_fusion_configs,
    embedding_configs,
    fixed_qparams_configs,
    layer_norm_configs,
    linear_configs,
    qat_pair,
    rnn_configs,
    share_qparams_configs,
    with_fixed_qparams,
)
from qcore.fx.patterns.ops import (
    BINARY_OP_OBSERVATION,
    DEFAULT_OPS,
    FIXED_QPARAMS_OPS,
    NORM_FUNCTIONALS,
    RELU_FORMS,
    SHARE_QPARAMS_OPS,
)
from qcore.fx.patterns.postops import (
    EXACT_MODULE_FORMS,
    PARAMETERIZED_FORMS,
    UnfusablePattern,
    post_op_module,
)
from qcore.fx.patterns.rows import (
    WEIGHT_1_BIAS_2,
    Op,
    Pattern,
    assemble,
    describe,
    pattern_config,
    pattern_key,
    rows,
)
from qcore.fx.patterns.shapes import BinaryRoot, Chain, Shape, chain, fusion, make_fuser

__all__ = [
    "BINARY_OP_OBSERVATION",
    "DEFAULT_OPS",
    "EXACT_MODULE_FORMS",
    "FIXED_QPARAMS_OPS",
    "NORM_FUNCTIONALS",
    "PARAMETERIZED_FORMS",
    "RELU_FORMS",
    "SHARE_QPARAMS_OPS",
    "WEIGHT_1_BIAS_2",
    "BinaryRoot",
    "Chain",
    "ConvKinds",
    "Op",
    "Pattern",
    "Shape",
    "UnfusablePattern",
    "assemble",
    "binary_op_configs",
    "bn_configs",
    "cat_configs",
    "chain",
    "conv_configs",
    "default_op_configs",
    "describe",
    "eltwise_fusion_configs",
    "embedding_configs",
    "fixed_qparams_configs",
    "fusion",
    "layer_norm_configs",
    "linear_configs",
    "make_fuser",
    "pattern_config",
    "pattern_key",
    "post_op_module",
    "qat_pair",
    "rnn_configs",
    "rows",
    "share_qparams_configs",
    "with_fixed_qparams",
]
