"""Functional post-ops in fusions: exact module forms fuse bit-identically to the module
spelling of the model; parameterized ones are declined with a clear error.

The reference for every fused result is the module-form model (or the fused module built
by hand from torch's classes), never the code under test.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
import torch.ao.nn.intrinsic as nni
import torch.nn.functional as F
from torch import nn
from torch.ao.quantization.quantize_fx import fuse_fx
from torch.ao.quantization.utils import MatchAllNode

from qcore.fx import dtypes
from qcore.fx.patterns import (
    EXACT_MODULE_FORMS,
    PARAMETERIZED_FORMS,
    BinaryRoot,
    UnfusablePattern,
    assemble,
    chain,
    fusion,
)

DT = [dtypes.WEIGHTED_INT8]


def _call(op: Any, x: torch.Tensor) -> torch.Tensor:
    out: torch.Tensor = getattr(x, op)() if isinstance(op, str) else op(x)
    return out


@pytest.mark.parametrize(("op", "module"), list(EXACT_MODULE_FORMS.items()), ids=str)
def test_exact_forms_compute_what_the_call_computes(op: Any, module: type[nn.Module]) -> None:
    x = torch.randn(4096, generator=torch.Generator().manual_seed(0)) * 6
    instance = module()
    assert not list(instance.parameters()) and not list(instance.buffers())
    assert torch.equal(instance(x.clone()), _call(op, x.clone()))


#: Non-default values for every parameter PARAMETERIZED_FORMS names.
_NON_DEFAULT = {"negative_slope": 0.3, "min_val": -0.5, "max_val": 0.5, "alpha": 0.4,
                "approximate": "tanh", "beta": 2.0, "threshold": 3.0}  # fmt: skip


@pytest.mark.parametrize(("op", "form"), list(PARAMETERIZED_FORMS.items()), ids=str)
def test_parameterized_forms_need_their_parameters(
    op: Any, form: tuple[type[nn.Module], tuple[str, ...]]
) -> None:
    """The call's parameters change its result (a default module would be wrong), and
    the suggested module with those parameters computes the call exactly."""
    module, params = form
    kwargs = {name: _NON_DEFAULT[name] for name in params}
    x = torch.randn(4096, generator=torch.Generator().manual_seed(0)) * 6
    called = op(x.clone(), **kwargs)
    assert not torch.equal(called, module()(x.clone()))
    assert torch.equal(called, module(**kwargs)(x.clone()))


def _linear(training: bool) -> nn.Linear:
    torch.manual_seed(0)
    return nn.Linear(8, 6).train(training)


@pytest.mark.parametrize(
    ("post", "into", "module"),
    [
        (torch.tanh, nni.LinearTanh, nn.Tanh),
        ("tanh", nni.LinearTanh, nn.Tanh),
        (F.tanh, nni.LinearTanh, nn.Tanh),
        (torch.relu, nni.LinearReLU, nn.ReLU),
        ("relu", nni.LinearReLU, nn.ReLU),
    ],
)
@pytest.mark.parametrize("is_qat", [False, True])
def test_functional_post_op_fuses_like_its_module(
    post: Any, into: Any, module: type[nn.Module], is_qat: bool
) -> None:
    fuser = fusion(chain(nn.Linear, post), DT, into=into).fuser_method
    assert fuser is not None
    linear = _linear(is_qat)
    fused = fuser(is_qat, copy.deepcopy(linear), post)  # what torch's fuse handler passes
    expected = into(copy.deepcopy(linear), module().train(is_qat))
    assert [type(m) for m in fused.modules()] == [type(m) for m in expected.modules()]
    assert all(m.training is is_qat for m in fused.children())  # the root's mode
    assert [m.training for m in fused.modules()] == [m.training for m in expected.modules()]
    x = torch.randn(5, 8)
    assert torch.equal(fused(x), expected(x))


class _Fn(nn.Module):
    def __init__(self, call: Any) -> None:
        super().__init__()
        self.fc = _linear(False)
        self.call = call

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.call(self.fc(x))
        return out


class _TanhMethod(_Fn):
    def __init__(self) -> None:
        super().__init__(None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.fc(x).tanh()
        return out


def test_torch_fuse_pass_gives_the_module_form_result() -> None:
    """Through torch's own fuse handler: functional, method and module spellings of
    Linear -> tanh fuse to the same LinearTanh with the same outputs."""
    config = assemble(
        "postops",
        [fusion(chain(nn.Linear, act), DT, into=nni.LinearTanh)
         for act in (nn.Tanh, torch.tanh, "tanh")],
    )
    module_form = nn.Sequential()
    module_form.fc = _linear(False)
    module_form.act = nn.Tanh()
    expected_model = fuse_fx(module_form.eval(), backend_config=config)
    assert isinstance(expected_model.fc, nni.LinearTanh)
    x = torch.randn(7, 8)
    for model in (_Fn(torch.tanh), _TanhMethod()):
        fused = fuse_fx(model.eval(), backend_config=config)
        assert isinstance(fused.fc, nni.LinearTanh)
        assert torch.equal(fused(x), expected_model(x))


def test_parameterized_post_op_is_declined_naming_pattern_and_fix() -> None:
    config = fusion(chain(nn.Linear, F.leaky_relu), DT, into=nni.LinearLeakyReLU)
    assert config.fuser_method is not None
    with pytest.raises(UnfusablePattern) as info:
        config.fuser_method(False, _linear(False), F.leaky_relu)
    message = str(info.value)
    assert "pattern (nn.Linear, F.leaky_relu)" in message
    assert "nn.LeakyReLU(negative_slope=...)" in message
    assert isinstance(info.value, NotImplementedError)
    # torch's real fuse pass surfaces the same refusal, not an AssertionError
    backend = assemble("leaky", [config])
    with pytest.raises(UnfusablePattern, match=r"\(nn\.Linear, F\.leaky_relu\)"):
        fuse_fx(_Fn(lambda y: F.leaky_relu(y, 0.2)).eval(), backend_config=backend)


def test_unknown_functional_post_op_is_declined() -> None:
    fuser = fusion(chain(nn.Linear, torch.exp), DT, into=nn.Sequential).fuser_method
    assert fuser is not None
    with pytest.raises(UnfusablePattern, match=r"torch\.exp: qcore knows no parameter-free"):
        fuser(False, _linear(False), torch.exp)


def test_binary_root_keeps_the_binary_function_and_converts_the_post_op() -> None:
    config = fusion(
        BinaryRoot(torch.add, nn.Conv2d, "left", post="relu"), DT, into=nni.ConvAddReLU2d
    )
    assert config.fuser_method is not None
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 3, 3, padding=1).eval()
    fused = config.fuser_method(False, "relu", (torch.add, conv, MatchAllNode))
    assert isinstance(fused, nni.ConvAddReLU2d)
    assert [type(m) for m in fused.children()] == [nn.Conv2d, nn.ReLU]
    x1, x2 = torch.randn(1, 3, 5, 5), torch.randn(1, 3, 5, 5)
    assert torch.equal(fused(x1, x2), torch.relu(conv(x1) + x2))


def test_fusion_failures_runs_torch_fuse_pass() -> None:
    from torch.ao.quantization.backend_config import get_onednn_backend_config

    from qcore.testing.fusion import fusion_failures

    ours = assemble(
        "postops",
        [fusion(chain(nn.Linear, torch.tanh), DT, into=nni.LinearTanh),
         fusion(chain(nn.Linear, F.leaky_relu), DT, into=nni.LinearLeakyReLU)],
    )
    failures = fusion_failures(ours)
    assert list(failures) == [(F.leaky_relu, nn.Linear)]
    assert failures[(F.leaky_relu, nn.Linear)].startswith("UnfusablePattern: pattern (nn.Linear")
    theirs = fusion_failures(get_onednn_backend_config())  # torch's own, upstream bug
    assert set(theirs) == {(F.leaky_relu, nn.Linear), (torch.tanh, nn.Linear)}
    assert all(m.startswith("AssertionError: Incorrect types") for m in theirs.values())
