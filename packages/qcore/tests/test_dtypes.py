"""qcore.fx.dtypes: presets equal the configs torch's own backends declare; bad ones raise."""

from __future__ import annotations

import math

import pytest
import torch
import torch.ao.quantization.backend_config.executorch as torch_executorch
import torch.ao.quantization.backend_config.onednn as torch_onednn
import torch.ao.quantization.backend_config.qnnpack as torch_qnnpack
from torch.ao.quantization.backend_config import DTypeConfig, DTypeWithConstraints

from qcore.fx import dtypes
from qcore.fx.dtypes import constraints, dtype_config, validate_dtype_config

# Each preset against the upstream constant it stands for (an independent reference).
UPSTREAM = [
    (dtypes.WEIGHTED_INT8, torch_onednn.onednn_weighted_op_int8_dtype_config),
    (dtypes.WEIGHTED_INT8, torch_executorch.executorch_weighted_op_int8_dtype_config),
    (dtypes.OP_QUINT8, torch_onednn.onednn_op_quint8_dtype_config),
    (dtypes.OP_QUINT8, torch_executorch.executorch_default_op_quint8_dtype_config),
    (dtypes.DYNAMIC_INT8, torch_onednn.onednn_dynamic_int8_dtype_config),
    (dtypes.DYNAMIC_INT8, torch_executorch.executorch_default_dynamic_quint8_dtype_config),
    (
        dtypes.DYNAMIC_QINT8_SYMMETRIC,
        torch_executorch.executorch_default_dynamic_qint8_dtype_config,
    ),
    (dtypes.DYNAMIC_FP16, torch_executorch.executorch_default_dynamic_float16_dtype_config),
    (dtypes.DYNAMIC_FP16, torch_qnnpack.qnnpack_default_dynamic_float16_dtype_config),
    (dtypes.OP_FP16, torch_qnnpack.qnnpack_default_op_fp16_dtype_config),
    (dtypes.WEIGHT_ONLY_QINT8, torch_onednn.onednn_weight_only_qint8_dtype_config),
    (dtypes.WEIGHT_ONLY_QUINT8, torch_executorch.executorch_weight_only_quint8_dtype_config),
    (dtypes.WEIGHT_ONLY_QUINT4X2, torch_qnnpack.qnnpack_weight_only_quint4x2_dtype_config),
    (dtypes.INPUT_OUTPUT_ONLY_QUINT8, torch_onednn.onednn_input_output_only_quint8_dtype_config),
    (
        dtypes.WEIGHTED_QINT8_SYMMETRIC,
        torch_qnnpack.qnnpack_weighted_op_qint8_symmetric_dtype_config,
    ),
    (dtypes.OP_QINT8_SYMMETRIC, torch_qnnpack.qnnpack_default_op_qint8_symmetric_dtype_config),
]


@pytest.mark.parametrize(("preset", "upstream"), UPSTREAM)
def test_preset_equals_upstream(preset: DTypeConfig, upstream: DTypeConfig) -> None:
    assert preset == upstream


def test_constraint_presets_equal_upstream() -> None:
    assert torch_qnnpack.qnnpack_act_qint8_scale_min_2_neg_12 == dtypes.ACT_QINT8_SCALE_MIN_2_NEG_12
    assert (
        torch_qnnpack.qnnpack_weight_qint8_neg_127_to_127_scale_min_2_neg_12
        == dtypes.WEIGHT_QINT8_SYMMETRIC_127
    )
    assert dtypes.WEIGHT_QINT8_SYMMETRIC_127.quant_min_lower_bound == -127
    assert dtypes.SCALE_MIN_2_NEG_12 == 1 / 4096
    assert dtypes.FIXED_QPARAMS_NEG1_TO_1.zero_point_exact_match == 128


def test_every_preset_is_valid_and_in_all() -> None:
    presets = [getattr(dtypes, n) for n in dtypes.__all__ if n.isupper()]
    assert len(presets) >= 17
    for preset in presets:
        if isinstance(preset, DTypeConfig):
            assert validate_dtype_config(preset) is preset


def test_factory_builds_what_dtypeconfig_builds() -> None:
    built = dtype_config(torch.quint8, torch.float, torch.qint8, torch.float, is_dynamic=True)
    assert built == DTypeConfig(torch.quint8, torch.float, torch.qint8, torch.float, True)


BAD_CONSTRAINTS = [
    (dict(quant_min=10, quant_max=5), "quant_min_lower_bound=10 > .*quant_max_upper_bound=5"),
    (dict(quant_min=-129), "quant_min_lower_bound=-129 lies outside"),
    (dict(quant_max=128), "quant_max_upper_bound=128 lies outside"),
    (dict(scale_min=0.0), "scale_min_lower_bound must be a positive"),
    (dict(scale_min=-1.0), "scale_min_lower_bound must be a positive"),
    (dict(scale_max=0.0), "scale_max_upper_bound must be a positive"),
    (dict(scale=math.nan), "scale_exact_match must be a positive"),
    (dict(scale_min=0.5, scale_max=0.25), "scale_min_lower_bound=0.5 > .*scale_max_upper_bound"),
    (dict(zero_point=200), "zero_point_exact_match=200 is not representable"),
    (dict(quant_min=-10, quant_max=10, zero_point=11), "zero_point_exact_match=11"),
]


@pytest.mark.parametrize(("kwargs", "message"), BAD_CONSTRAINTS)
def test_impossible_constraints_raise_naming_the_field(
    kwargs: dict[str, float], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        constraints(torch.qint8, **kwargs)  # type: ignore[arg-type]


def test_quant_range_on_float_dtype_raises() -> None:
    with pytest.raises(ValueError, match=r"quant_min_lower_bound is set but torch.float16"):
        constraints(torch.float16, quant_min=0)


def test_constraints_without_dtype_raise() -> None:
    bare = DTypeWithConstraints(quant_min_lower_bound=0)
    with pytest.raises(
        ValueError, match=r"weight_dtype.quant_min_lower_bound is set but weight_dtype has no dtype"
    ):
        dtype_config(torch.quint8, torch.quint8, bare)


def test_error_names_the_dtype_config_field() -> None:
    wide_weight = DTypeWithConstraints(torch.qint8, quant_min_lower_bound=-200)
    with pytest.raises(ValueError, match=r"^weight_dtype\.quant_min_lower_bound=-200"):
        dtype_config(torch.quint8, torch.quint8, wide_weight, torch.float)
    bad_input = DTypeWithConstraints(torch.quint8, scale_min_lower_bound=0)
    with pytest.raises(ValueError, match=r"^input_dtype\.scale_min_lower_bound"):
        validate_dtype_config(DTypeConfig(bad_input, torch.quint8))
    bad_output = DTypeWithConstraints(torch.quint8, quant_min_lower_bound=300)
    with pytest.raises(ValueError, match=r"^output_dtype\.quant_min_lower_bound=300"):
        validate_dtype_config(DTypeConfig(torch.quint8, bad_output))


def test_dynamic_must_output_float_and_have_an_input() -> None:
    with pytest.raises(ValueError, match=r"output_dtype=torch.quint8 with is_dynamic=True"):
        dtype_config(torch.quint8, torch.quint8, torch.qint8, is_dynamic=True)
    with pytest.raises(ValueError, match="input_dtype must be set when is_dynamic=True"):
        dtype_config(None, torch.float, torch.qint8, is_dynamic=True)


def test_wrong_types_raise() -> None:
    with pytest.raises(ValueError, match=r"bias_dtype must be a torch.dtype"):
        dtype_config(torch.quint8, torch.quint8, torch.qint8, "float")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"input_dtype.dtype must be a torch.dtype"):
        validate_dtype_config(DTypeConfig(DTypeWithConstraints("quint8")))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="is_dynamic must be a bool"):
        dtype_config(torch.quint8, torch.float, torch.qint8, is_dynamic=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="expected a DTypeConfig"):
        validate_dtype_config({"input_dtype": torch.quint8})  # type: ignore[arg-type]
