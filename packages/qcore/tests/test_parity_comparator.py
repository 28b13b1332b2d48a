"""qcore.testing.parity: the comparator finds every kind of difference it claims to.

The reference is torch's own oneDNN config; "ours" is a deep copy of it with one thing
changed, so each test knows exactly which line the comparator must report.
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.ao.nn.intrinsic as nni
import torch.ao.quantization.backend_config.utils
from torch import nn
from torch.ao.quantization.backend_config import (
    BackendConfig,
    BackendPatternConfig,
    ObservationType,
    get_onednn_backend_config,
)
from torch.ao.quantization.utils import MatchAllNode

from qcore.fx import dtypes
from qcore.fx.patterns import pattern_key
from qcore.testing.parity import compare_backend_configs

CONV_BN_ADD_LEFT = (torch.add, (nn.BatchNorm2d, nn.Conv2d), MatchAllNode)
CONV_ADD_RIGHT = (operator.add, MatchAllNode, nn.Conv2d)
CONV_BN_ADD_RIGHT = (torch.add, MatchAllNode, (nn.BatchNorm2d, nn.Conv2d))


@pytest.fixture(scope="module")
def reference() -> BackendConfig:
    return get_onednn_backend_config()


def _copy(
    reference: BackendConfig,
    edit: Callable[[dict[Any, BackendPatternConfig]], None],
    name: str | None = None,
) -> BackendConfig:
    configs = {pattern_key(c): copy.deepcopy(c) for c in reference.configs}
    edit(configs)
    out = BackendConfig(reference.name if name is None else name)
    return out.set_backend_pattern_configs(list(configs.values()))


def test_identical_configs_have_no_difference(reference: BackendConfig) -> None:
    assert compare_backend_configs(_copy(reference, lambda c: None), reference) == []


def test_reports_missing_and_extra_patterns(reference: BackendConfig) -> None:
    def edit(configs: dict[Any, BackendPatternConfig]) -> None:
        del configs[nn.GRU]
        configs["gelu"] = BackendPatternConfig("gelu").set_dtype_configs([dtypes.OP_QUINT8])

    assert compare_backend_configs(_copy(reference, edit), reference) == [
        "nn.GRU: missing (in reference only)",
        "'gelu': extra (not in reference)",
    ]


def test_reports_name(reference: BackendConfig) -> None:
    assert compare_backend_configs(_copy(reference, lambda c: None, "x86"), reference) == [
        "backend name: ours 'x86', reference 'onednn'"
    ]


def _one(
    reference: BackendConfig, key: Any, change: Callable[[BackendPatternConfig], Any]
) -> list[str]:
    return compare_backend_configs(_copy(reference, lambda c: change(c[key])), reference)


def test_reports_a_changed_dtype_config(reference: BackendConfig) -> None:
    diffs = _one(reference, nn.Linear, lambda c: c.set_dtype_configs([dtypes.WEIGHTED_INT8]))
    assert len(diffs) == 1 and diffs[0].startswith("nn.Linear: dtype_configs: ours [")
    nudged = _one(reference, nn.Linear, lambda c: setattr(c.dtype_configs[1], "is_dynamic", False))
    assert len(nudged) == 1 and "dtype_configs" in nudged[0]


@pytest.mark.parametrize(
    ("key", "change", "field"),
    [
        (
            nn.Linear,
            lambda c: c.set_observation_type(ObservationType.OUTPUT_SHARE_OBSERVER_WITH_INPUT),
            "observation_type",
        ),
        (nn.Linear, lambda c: c.set_root_module(nn.Conv2d), "root_module"),
        (nn.Linear, lambda c: c.set_qat_module(nn.Linear), "qat_module"),
        (
            nn.Linear,
            lambda c: c.set_reference_quantized_module(nn.Linear),
            "reference_quantized_module_for_root",
        ),
        ((nn.ReLU, nn.Conv2d), lambda c: c.set_fused_module(nni.ConvBnReLU2d), "fused_module"),
        (
            torch.nn.functional.linear,
            lambda c: c._set_input_type_to_index({"weight": 2}),
            "input_type_to_index",
        ),
        (
            operator.add,
            lambda c: c._set_num_tensor_args_to_observation_type({}),
            "num_tensor_args_to_observation_type",
        ),
    ],
)
def test_reports_each_plain_field(
    reference: BackendConfig, key: Any, change: Callable[[BackendPatternConfig], Any], field: str
) -> None:
    diffs = _one(reference, key, change)
    assert len(diffs) == 1 and f": {field}: ours " in diffs[0], diffs


def test_reports_a_fuser_returning_another_module(reference: BackendConfig) -> None:
    def sequential(is_qat: bool, linear: nn.Module, relu: nn.Module) -> nn.Module:
        return nn.Sequential(linear, relu)

    diffs = _one(reference, (nn.ReLU, nn.Linear), lambda c: c.set_fuser_method(sequential))
    assert diffs == [
        "(nn.ReLU, nn.Linear): fuser_method(is_qat=False): ours gives Sequential "
        "['Linear', 'ReLU'], reference LinearReLU ['Linear', 'ReLU']"
    ]


def test_reports_a_fuser_that_forgets_to_fold_bn(reference: BackendConfig) -> None:
    """Same module type, different weights: only the state comparison can see it."""

    def no_fold(is_qat: bool, add: Any, bn_conv: Any, other: Any) -> nn.Module:
        return nni.ConvAdd2d(bn_conv[1], add)

    diffs = _one(reference, CONV_BN_ADD_LEFT, lambda c: c.set_fuser_method(no_fold))
    assert len(diffs) == 1 and "fuser_method(is_qat=False)" in diffs[0]


def test_reports_swapped_fusers_and_getters(reference: BackendConfig) -> None:
    right = next(c for c in reference.configs if pattern_key(c) == CONV_BN_ADD_RIGHT)

    def swap_fuser(c: BackendPatternConfig) -> None:
        c.set_fuser_method(right.fuser_method)  # type: ignore[arg-type]

    assert _one(reference, CONV_BN_ADD_LEFT, swap_fuser)[0].startswith(
        "(torch.add, (nn.BatchNorm2d, nn.Conv2d), MatchAllNode): fuser_method(is_qat=False)"
    )
    roots = _one(
        reference, CONV_BN_ADD_LEFT, lambda c: c._set_root_node_getter(right._root_node_getter)
    )  # type: ignore[arg-type]
    assert roots == [
        "(torch.add, (nn.BatchNorm2d, nn.Conv2d), MatchAllNode): root_node_getter: ours "
        "returns raises TypeError, reference node nn.Conv2d at 11"
    ]
    extra = _one(
        reference,
        CONV_BN_ADD_LEFT,
        lambda c: c._set_extra_inputs_getter(right._extra_inputs_getter),
    )  # type: ignore[arg-type]
    assert extra == [
        "(torch.add, (nn.BatchNorm2d, nn.Conv2d), MatchAllNode): extra_inputs_getter: ours "
        "returns [['node nn.BatchNorm2d at 10', 'node nn.Conv2d at 11']], "
        "reference ['node MatchAllNode at 2']"
    ]


def test_reports_a_dropped_getter(reference: BackendConfig) -> None:
    diffs = _one(reference, CONV_ADD_RIGHT, lambda c: c._set_root_node_getter(None))  # type: ignore[arg-type]
    assert diffs == [
        "(operator.add, MatchAllNode, nn.Conv2d): root_node_getter: ours unset, reference set"
    ]


def test_reports_order(reference: BackendConfig) -> None:
    configs = list(reference.configs)
    configs[0], configs[1] = configs[1], configs[0]
    swapped = BackendConfig("onednn").set_backend_pattern_configs(configs)
    assert compare_backend_configs(swapped, reference) == [
        "order: shared pattern #0 is nnqat.Conv1d in ours, nn.Conv1d in reference"
    ]


# upstream_fuser_bugs: a narrow, self-checking exemption ---------------------------------

LINEAR_TANH = (torch.tanh, nn.Linear)


def _working_tanh_fuser(is_qat: bool, linear: nn.Module, tanh: Any) -> nn.Module:
    return nni.LinearTanh(linear, nn.Tanh().train(linear.training))  # type: ignore[no-untyped-call]


def test_a_listed_upstream_fuser_bug_exempts_the_reference_crash(reference: BackendConfig) -> None:
    diffs = _one(reference, LINEAR_TANH, lambda c: c.set_fuser_method(_working_tanh_fuser))
    assert diffs == [
        "(torch.tanh, nn.Linear): fuser_method(is_qat=False): ours gives LinearTanh "
        "['Linear', 'Tanh'], reference raises AssertionError"
    ]
    def edit(configs: dict[Any, BackendPatternConfig]) -> None:
        configs[LINEAR_TANH].set_fuser_method(_working_tanh_fuser)

    fixed = _copy(reference, edit)
    assert compare_backend_configs(fixed, reference, upstream_fuser_bugs={LINEAR_TANH}) == []


def test_a_listed_bug_hides_no_other_fuser_difference(reference: BackendConfig) -> None:
    def sequential(is_qat: bool, linear: nn.Module, relu: nn.Module) -> nn.Module:
        return nn.Sequential(linear, relu)

    def edit(configs: dict[Any, BackendPatternConfig]) -> None:
        configs[LINEAR_TANH].set_fuser_method(_working_tanh_fuser)
        configs[(nn.ReLU, nn.Linear)].set_fuser_method(sequential)

    ours = _copy(reference, edit)
    assert compare_backend_configs(ours, reference, upstream_fuser_bugs={LINEAR_TANH}) == [
        "(nn.ReLU, nn.Linear): fuser_method(is_qat=False): ours gives Sequential "
        "['Linear', 'ReLU'], reference LinearReLU ['Linear', 'ReLU']"
    ]


def test_stale_upstream_fuser_bug_entries_are_reported(reference: BackendConfig) -> None:
    identical = _copy(reference, lambda c: None)
    listed = [(nn.ReLU, nn.Linear), (torch.sigmoid, nn.Linear)]
    assert compare_backend_configs(identical, reference, upstream_fuser_bugs=listed) == [
        "(torch.sigmoid, nn.Linear): listed as an upstream fuser bug, but not in reference",
        "(nn.ReLU, nn.Linear): listed as an upstream fuser bug, but the reference fuser runs",
    ]
