"""The names ``qcore.pt2e.annotation.common`` held before it was split by concern; plugins and
pages written against it keep working. New code imports from the module that owns a name:

- :mod:`qcore.pt2e.annotation.ops`: the operator sets (``CONV``, ``LINEAR``, ``SHARE_QPARAMS``...);
- :mod:`qcore.pt2e.annotation.claims`: claiming nodes and asking the scope (``is_annotated``,
  ``mark_annotated``, ``passes``, ``set_annotation``...);
- :mod:`qcore.pt2e.annotation.observable`: whether a tensor can be observed (``is_float_tensor``,
  ``non_quantizable_reason``...);
- :mod:`qcore.pt2e.annotation.common_annotators`: the annotators and the ``COMMON`` table;
- :mod:`qcore.pt2e.annotation.transforms`: rewrites before annotation (``conv3d_as_conv2d``...).

Importing this module registers nothing (the registry defines ``"common"`` on first use);
it warns (DeprecationWarning) that the names moved, once per process.
Here the operator-set names mean the operator sets, as they did; the annotators of the
same names are ``common_annotators.CONV`` and so on.
"""

import warnings

from qcore.pt2e.annotation.claims import (
    Filter,
    Partitions,
    computing,
    is_annotated,
    is_op,
    mark_annotated,
    passes,
    set_annotation,
    sole_user,
)
from qcore.pt2e.annotation.common_annotators import (
    COMMON,
    annotate_adaptive_avg_pool2d,
    annotate_cat,
    annotate_gru_io_only,
    annotate_linear,
    annotate_linear_relu,
    annotate_max_pool2d,
    binary_annotator,
    conv_annotators,
    conv_bn_annotator,
    conv_transpose_groups,
    propagate_shared_qparams,
    reject_grouped_transpose,
    weight_spec_for_transpose,
)
from qcore.pt2e.annotation.observable import (
    HISTC_UPPER_BOUND,
    additive_mask_value,
    is_float_tensor,
    non_float_quantized,
    non_quantizable_reason,
)
from qcore.pt2e.annotation.ops import (
    ADAPTIVE_AVG_POOL2D,
    ADD,
    CAT,
    CONV,
    CONV3D,
    CONV_TRANSPOSE,
    LINEAR,
    MAX_POOL2D,
    MUL,
    RELU,
    SHARE_QPARAMS,
    aten,
)
from qcore.pt2e.annotation.transforms import (
    addmm_to_linear,
    conv3d_as_conv2d,
    scalars_to_attrs,
)

__all__ = [
    "ADAPTIVE_AVG_POOL2D",
    "ADD",
    "CAT",
    "COMMON",
    "CONV",
    "CONV3D",
    "CONV_TRANSPOSE",
    "Filter",
    "HISTC_UPPER_BOUND",
    "LINEAR",
    "MAX_POOL2D",
    "MUL",
    "Partitions",
    "RELU",
    "SHARE_QPARAMS",
    "additive_mask_value",
    "addmm_to_linear",
    "annotate_adaptive_avg_pool2d",
    "annotate_cat",
    "annotate_gru_io_only",
    "annotate_linear",
    "annotate_linear_relu",
    "annotate_max_pool2d",
    "aten",
    "binary_annotator",
    "computing",
    "conv3d_as_conv2d",
    "conv_annotators",
    "conv_bn_annotator",
    "conv_transpose_groups",
    "is_annotated",
    "is_float_tensor",
    "is_op",
    "mark_annotated",
    "non_float_quantized",
    "non_quantizable_reason",
    "passes",
    "propagate_shared_qparams",
    "reject_grouped_transpose",
    "scalars_to_attrs",
    "set_annotation",
    "sole_user",
    "weight_spec_for_transpose",
]

warnings.warn(
    "qcore.pt2e.annotation.common is split by concern: import from qcore.pt2e.annotation.ops, "
    "claims, observable, common_annotators or transforms (its docstring says which)",
    DeprecationWarning,
    stacklevel=2,
)
