"""qcore.fx.patterns: shapes derive fusers and getters that behave like torch's own, and the
rows they emit drive torch's FX fusion."""

from __future__ import annotations

import copy
import operator
import re
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.ao.nn.intrinsic as nni
import torch.nn.functional as F
from torch import nn
from torch.ao.quantization.backend_config import DTypeConfig, ObservationType
from torch.ao.quantization.fuser_method_mappings import (
    fuse_conv_bn,
    fuse_conv_bn_relu,
    fuse_convtranspose_bn,
    fuse_linear_bn,
)
from torch.ao.quantization.quantize_fx import fuse_fx
from torch.ao.quantization.utils import MatchAllNode

from qcore.fx import dtypes
from qcore.fx.patterns import (
    BinaryRoot,
    assemble,
    chain,
    conv_configs,
    fixed_qparams_configs,
    fusion,
    pattern_config,
    with_fixed_qparams,
)

DT = [dtypes.WEIGHTED_INT8]


def _random_state(*modules: nn.Module) -> None:
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for module in modules:
            for name, t in module.state_dict().items():
                if t.is_floating_point():
                    v = torch.randn(t.shape, generator=gen)
                    t.copy_(v.abs() + 0.5 if name.endswith("running_var") else v)


def _pair(root: nn.Module, bn: nn.Module, training: bool) -> tuple[nn.Module, nn.Module]:
    _random_state(root, bn)
    return root.train(training), bn.train(training)


CHAIN_CASES: list[tuple[Any, Any, Any, dict[str, Any], Any]] = [
    (nn.Conv2d, nn.BatchNorm2d, (), {"qat_into": nni.ConvBn2d}, fuse_conv_bn),
    (nn.Conv1d, nn.BatchNorm1d, (nn.ReLU,), {"into": nni.ConvReLU1d, "qat_into": nni.ConvBnReLU1d},
     fuse_conv_bn_relu),
    (nn.Linear, nn.BatchNorm1d, (), {"qat_into": nni.LinearBn1d}, fuse_linear_bn),
    (nn.ConvTranspose2d, nn.BatchNorm2d, (), {}, fuse_convtranspose_bn),
]  # fmt: skip


def _build(cls: Any) -> nn.Module:
    if cls is nn.Linear:
        return nn.Linear(4, 4)
    if cls in (nn.BatchNorm1d, nn.BatchNorm2d):
        return cls(4)
    if cls is nn.ReLU:
        return nn.ReLU()
    return cls(4, 4, 3)


@pytest.mark.parametrize(("root", "bn", "post", "kinds", "torch_fuser"), CHAIN_CASES)
def test_chain_fuser_matches_torch_public_fuser(
    root: Any, bn: Any, post: Any, kinds: dict[str, Any], torch_fuser: Any
) -> None:
    config = fusion(chain(root, *post, bn=bn), DT, **kinds)
    assert config.pattern == (root, bn, *post)
    ours = config.fuser_method
    assert ours is not None
    x = (
        torch.randn(2, 4, 6, 6)
        if root is nn.Conv2d or root is nn.ConvTranspose2d
        else (torch.randn(2, 4, 6) if root is nn.Conv1d else torch.randn(3, 4))
    )
    for is_qat in (False, True):
        modules = [_build(root), _build(bn), *(_build(p) for p in post)]
        _random_state(*modules)
        for m in modules:
            m.train(is_qat)
        expected: Any
        try:
            expected = torch_fuser(is_qat, *copy.deepcopy(modules))
        except Exception:  # noqa: BLE001 - torch refuses: ours must refuse too
            with pytest.raises((NotImplementedError, ValueError)):
                ours(is_qat, *modules)
            continue
        got = ours(is_qat, *modules)
        assert type(got) is type(expected)
        assert [type(m) for m in got.modules()] == [type(m) for m in expected.modules()]
        got.eval()
        expected.eval()
        torch.testing.assert_close(got(x), expected(x), rtol=0, atol=0)


def test_long_chain_uses_nested_format_and_folds() -> None:
    shape = chain(nn.Conv2d, nn.ReLU, nn.Dropout, bn=nn.BatchNorm2d)
    config = fusion(shape, DT, into=nn.Sequential)
    assert config.pattern is None
    assert config._pattern_complex_format == (nn.Dropout, (nn.ReLU, (nn.BatchNorm2d, nn.Conv2d)))
    conv, bn = _pair(nn.Conv2d(4, 4, 3), nn.BatchNorm2d(4), training=False)
    relu, drop = nn.ReLU().eval(), nn.Dropout().eval()
    x = torch.randn(1, 4, 5, 5)
    expected = drop(relu(bn(conv(x))))
    assert config.fuser_method is not None
    fused = config.fuser_method(False, drop, (relu, (bn, conv)))
    assert [type(m) for m in fused] == [nn.Conv2d, nn.ReLU, nn.Dropout]
    torch.testing.assert_close(fused(x), expected)


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("with_bn", [True, False])
@pytest.mark.parametrize("post", [None, nn.ReLU])
def test_binary_root_pattern_getters_and_fuser(side: str, with_bn: bool, post: Any) -> None:
    bn_cls = nn.BatchNorm2d if with_bn else None
    into = nni.ConvAddReLU2d if post else nni.ConvAdd2d
    config = fusion(BinaryRoot(torch.add, nn.Conv2d, side, bn=bn_cls, post=post), DT, into=into)  # type: ignore[arg-type]
    rooted: Any = (nn.BatchNorm2d, nn.Conv2d) if with_bn else nn.Conv2d
    binary = (
        (torch.add, rooted, MatchAllNode) if side == "left" else (torch.add, MatchAllNode, rooted)
    )
    expected_pattern = (post, binary) if post else binary
    assert config._pattern_complex_format == expected_pattern
    assert config.fused_module is into

    # getters on a matched-node tree shaped like the pattern
    conv_node, bn_node, add_node, other_node, relu_node = (object() for _ in range(5))
    rooted_nodes: Any = (bn_node, conv_node) if with_bn else conv_node
    bin_nodes = (
        (add_node, rooted_nodes, other_node)
        if side == "left"
        else (add_node, other_node, rooted_nodes)
    )
    nodes = (relu_node, bin_nodes) if post else bin_nodes
    assert config._root_node_getter is not None and config._extra_inputs_getter is not None
    assert config._root_node_getter(nodes) is conv_node
    assert config._extra_inputs_getter(nodes) == [other_node]

    # the fuser, called as torch calls it, computes what the unfused ops compute
    conv, bn = _pair(nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4), training=False)
    relu = nn.ReLU().eval()
    rooted_mods: Any = (bn, conv) if with_bn else conv
    bin_mods = (
        (torch.add, rooted_mods, MatchAllNode)
        if side == "left"
        else (torch.add, MatchAllNode, rooted_mods)
    )
    args = (relu, bin_mods) if post else bin_mods
    assert config.fuser_method is not None
    fused = config.fuser_method(False, *args)
    assert type(fused) is into
    x, y = torch.randn(1, 4, 5, 5), torch.randn(1, 4, 5, 5)
    reference = (bn(conv(x)) if with_bn else conv(x)) + y
    reference = relu(reference) if post else reference
    torch.testing.assert_close(fused(x, y), reference)
    if with_bn:  # folding a bn needs eval; torch has no QAT form of conv-bn-add
        with pytest.raises(NotImplementedError, match="no QAT fusion"):
            config.fuser_method(True, *args)


class _ResidualRight(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3, padding=1)
        self.bn = nn.BatchNorm2d(3)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(operator.add(x, self.bn(self.conv(x))))


def test_binary_root_rows_drive_fx_fusion() -> None:
    """A backend declared only by rows fuses a right-hand conv-bn-add-relu in fuse_fx,
    with the free input passed to the fused module as its extra argument."""
    shape = BinaryRoot(operator.add, nn.Conv2d, "right", bn=nn.BatchNorm2d, post=nn.ReLU)
    backend = assemble("rows-only", [fusion(shape, DT, into=nni.ConvAddReLU2d)])
    model = _ResidualRight().eval()
    _random_state(model.conv, model.bn)
    x = torch.randn(2, 3, 6, 6)
    fused = fuse_fx(copy.deepcopy(model), backend_config=backend)
    kinds = {type(m) for m in fused.modules()}
    assert nni.ConvAddReLU2d in kinds and nn.BatchNorm2d not in kinds
    torch.testing.assert_close(fused(x), model(x))


def test_assemble_rejects_a_pattern_declared_twice() -> None:
    with pytest.raises(ValueError, match=r"pattern \(nn.ReLU, nn.Conv2d\) is declared twice"):
        assemble(
            "dup",
            [fusion(chain(nn.Conv2d, nn.ReLU), DT, into=nni.ConvReLU2d)],
            [fusion(chain(nn.Conv2d, nn.ReLU), DT, into=nni.ConvReLU2d)],
        )


def test_pattern_config_errors_name_the_pattern() -> None:
    with pytest.raises(ValueError, match="forward-order tuple must have 2 or 3 ops"):
        pattern_config((nn.Conv2d, nn.BatchNorm2d, nn.ReLU, nn.Dropout), DT)
    with pytest.raises(ValueError, match=r"pattern nn.Conv2d: needs at least one dtype config"):
        pattern_config(nn.Conv2d, [])
    broken = DTypeConfig(torch.quint8, torch.quint8)
    broken.weight_dtype_with_constraints.quant_min_lower_bound = 3  # no weight dtype
    with pytest.raises(ValueError, match=r"pattern F.linear: dtype_configs\[1\]: weight_dtype"):
        pattern_config(F.linear, [dtypes.WEIGHTED_INT8, broken])


def test_shape_errors() -> None:
    with pytest.raises(ValueError, match="side must be 'left' or 'right'"):
        BinaryRoot(torch.add, nn.Conv2d, "middle")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least the root"):
        chain()
    fuser = fusion(
        chain(nn.Conv2d, nn.ReLU, bn=nn.BatchNorm2d),
        DT,
        into=nni.ConvReLU2d,
        qat_into=nni.ConvBnReLU2d,
    ).fuser_method
    assert fuser is not None
    with pytest.raises(ValueError, match="mix train and eval"):
        fuser(False, nn.Conv2d(4, 4, 3).eval(), nn.BatchNorm2d(4).train(), nn.ReLU())
    with pytest.raises(ValueError, match="BatchNorm2d has 5 features, Conv2d produces 4"):
        fuser(True, nn.Conv2d(4, 4, 3), nn.BatchNorm2d(5), nn.ReLU())
    fold = fusion(chain(nn.GRU, bn=nn.BatchNorm1d), DT).fuser_method
    assert fold is not None
    with pytest.raises(NotImplementedError, match="cannot fold batch norm into GRU"):
        fold(False, nn.GRU(4, 4).eval(), nn.BatchNorm1d(4).eval())


def test_rows_copy_presets_so_patterns_never_alias_them() -> None:
    config = pattern_config(nn.Conv2d, DT)
    assert config.dtype_configs == DT
    config.dtype_configs[0].input_dtype_with_constraints.quant_min_lower_bound = 7
    assert dtypes.WEIGHTED_INT8.input_dtype_with_constraints.quant_min_lower_bound is None


def test_fixed_qparams_take_exact_qparams_without_touching_inputs() -> None:
    rows = fixed_qparams_configs([dtypes.OP_QUINT8], {nn.Tanh: dtypes.FIXED_QPARAMS_NEG1_TO_1})
    (tanh,) = rows
    spec = tanh.dtype_configs[0].output_dtype_with_constraints
    assert (spec.scale_exact_match, spec.zero_point_exact_match) == (2.0 / 256.0, 128)
    assert dtypes.OP_QUINT8.output_dtype_with_constraints.scale_exact_match is None
    # qint8 activations are not the fixed dtype: left as they are
    (untouched,) = with_fixed_qparams([dtypes.OP_QINT8_SYMMETRIC], dtypes.FIXED_QPARAMS_0_TO_1)
    assert untouched == dtypes.OP_QINT8_SYMMETRIC
    scaled = copy.deepcopy(dtypes.OP_QUINT8)
    scaled.input_dtype_with_constraints.scale_min_lower_bound = 0.1
    with pytest.raises(ValueError, match=r"pattern nn.Sigmoid: dtype_configs\[0\].input_dtype"):
        fixed_qparams_configs([scaled], {nn.Sigmoid: dtypes.FIXED_QPARAMS_0_TO_1})


def test_conv_family_sizes_and_observation() -> None:
    one_dim = conv_configs(DT, dims=(2,), transpose=False)
    assert len(one_dim) == 16
    assert len(conv_configs(DT)) == 3 * 19
    diff = ObservationType.OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT
    assert all(c.observation_type is diff for c in one_dim)


def test_private_torch_setters_only_in_the_adapter() -> None:
    """Backends and the builder reach torch's underscore API through _torch_private only."""
    private = re.compile(
        r"_common_operator_config_utils|_sequential_wrapper2|\._set_(root_node_getter|"
        r"extra_inputs_getter|input_type_to_index|pattern_complex_format|"
        r"num_tensor_args_to_observation_type)"
    )
    packages = Path(__file__).resolve().parents[2]
    offenders = [
        str(path.relative_to(packages))
        for path in packages.glob("*/src/**/*.py")
        if path.name != "_torch_private.py" and private.search(path.read_text())
    ]
    assert offenders == []
