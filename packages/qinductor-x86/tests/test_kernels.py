"""The typed kernel descriptions (``lowering/kernels.py``) match torch's schemas: one field
per argument, each at the position of the schema argument of that meaning."""

from __future__ import annotations

from dataclasses import fields

import pytest
import torch

from qinductor_x86.lowering.kernels import KERNELS, Convolution, KernelArgs

#: Field -> the names torch's schemas give the argument it describes.
SCHEMA_NAMES = {
    "x": {"qx"},
    "input": {"input"},
    "weight": {"weight"},
    "x_scale": {"x_scale"},
    "x_zp": {"x_zero_point"},
    "w": {"qw"},
    "w_scale": {"w_scale"},
    "w_zp": {"w_zero_point"},
    "accum": {"qaccum"},
    "other": {"other"},
    "bias": {"bias"},
    "stride": {"stride"},
    "padding": {"padding"},
    "dilation": {"dilation"},
    "groups": {"groups"},
    "transposed": {"transposed"},
    "output_padding": {"output_padding"},
    "o_scale": {"output_scale"},
    "o_zp": {"output_zero_point"},
    "o_dtype": {"output_dtype"},
    "accum_scale": {"accum_scale"},
    "accum_zp": {"accum_zero_point"},
    "other_scale": {"other_scale"},
    "other_zp": {"other_zp"},
    "binary_attr": {"binary_attr", "binary_post_op"},
    "alpha": {"alpha", "binary_alpha"},
    "attr": {"attr", "post_op_name"},
    "scalars": {"scalars", "post_op_args"},
    "algorithm": {"algorithm", "post_op_algorithm"},
    "unary_attr": {"unary_attr", "unary_post_op"},
    "unary_scalars": {"unary_scalars", "unary_post_op_args"},
    "unary_algorithm": {"unary_algorithm", "unary_post_op_algorithm"},
}

CASES = [(op, kernel.args) for op, kernel in KERNELS.items()] + [
    (torch.ops.aten.convolution.default, Convolution)
]


@pytest.mark.parametrize(("op", "args"), CASES, ids=[str(op) for op, _ in CASES])
def test_fields_are_the_schemas_arguments_in_order(op: object, args: type[KernelArgs]) -> None:
    schema = [a.name for a in op._schema.arguments]  # type: ignore[attr-defined]
    mine = [f.name for f in fields(args)]
    assert len(mine) == len(schema)
    assert [(m, s) for m, s in zip(mine, schema, strict=True) if s not in SCHEMA_NAMES[m]] == []
