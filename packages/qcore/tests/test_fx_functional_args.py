"""qcore.fx.ranges: a functional conv takes a range of its own only when every
argument of its geometry is known when the model is prepared. A stride, a dilation or a
group count computed from the input (a traced value, not an int) leaves the layer at the
safe range: its geometry, and so which pairs overflow, is unknown. On a graph torch's own
``prepare_fx`` made (calls as written: padding strings, a linear without a bias), each
call's geometry is the one its arguments spell."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

import qcore
from qcore.fx.ranges import weighted_layers
from qcore.int8 import cpu_profile as host
from qcore.int8.engine import quantized_engine


@pytest.fixture
def backends(torch_onednn_plugins: None) -> Iterator[None]:
    with quantized_engine("onednn"):
        yield


class Conv(nn.Module):
    """``F.conv2d`` with one geometry argument traced from the input when asked."""

    def __init__(self, traced: str | None) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 4, 1, 1) * 0.3)
        self.traced = traced

    def forward(self, x: Tensor) -> Tensor:
        one = x.shape[1] // 4  # 1, as a traced value
        stride = (one, 1) if self.traced == "stride" else (1, 1)
        dilation = (one, 1) if self.traced == "dilation" else (1, 1)
        groups = one if self.traced == "groups" else 1
        return F.conv2d(x, self.w, None, stride, (0, 0), dilation, groups)


@pytest.mark.parametrize("traced", [None, "stride", "dilation", "groups"])
def test_a_functional_conv_with_a_traced_geometry_argument_keeps_the_safe_range(
    backends: None, traced: str | None
) -> None:
    x = torch.rand(2, 4, 5, 5, generator=torch.Generator().manual_seed(1))
    with host.targeting("avx2"):
        prepared = qcore.fx.prepare(Conv(traced).eval(), "fxnative", x)
    conv = next(n for n in prepared.graph.nodes if n.target is F.conv2d)
    argument = {"stride": 3, "dilation": 5, "groups": 6}.get(traced or "")
    if argument is not None:  # the model really traced that argument
        value = conv.args[argument]
        assert isinstance(value, torch.fx.Node) or any(isinstance(v, torch.fx.Node) for v in value)
    found = [layer.node for layer in weighted_layers(prepared)]
    assert found == ([conv] if traced is None else [])


class RawCalls(nn.Module):
    """Functional calls as torch's own ``prepare_fx`` records them when nothing rewrites
    them first: ``padding`` as the strings ``'same'`` and ``'valid'``, and ``F.linear``
    with two arguments (no bias passed)."""

    def __init__(self) -> None:
        super().__init__()
        self.same = nn.Parameter(torch.full((4, 4, 3, 3), 0.1))
        self.valid = nn.Parameter(torch.full((4, 4, 3, 3), 0.1))
        self.fc = nn.Parameter(torch.full((6, 36), 0.1))

    def forward(self, x: Tensor) -> Tensor:
        y = F.conv2d(x, self.same, None, (1, 1), "same", (1, 1), 1)
        y = F.conv2d(y, self.valid, None, (2, 1), "valid", (1, 2), 1)
        return F.linear(y.flatten(1), self.fc)


def test_torchs_own_prepare_gives_each_call_the_geometry_it_was_written_with() -> None:
    """``weighted_layers`` on a graph torch's ``prepare_fx`` made (no qcore rewrite): each
    call is a layer with its own parameter and the geometry its arguments spell (padding
    strings kept as strings), and a linear called without a bias is a layer too."""
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.backend_config import get_onednn_backend_config
    from torch.ao.quantization.quantize_fx import prepare_fx

    from qcore.int8.saturation import Geometry
    from qcore.int8.weight_ranges import fit_qconfig_mapping

    model = RawCalls().eval()
    x = torch.rand(2, 4, 8, 8, generator=torch.Generator().manual_seed(2))
    with host.targeting("avx2"), quantized_engine("onednn"):
        mapping = fit_qconfig_mapping(get_default_qconfig_mapping("onednn"))
        prepared = prepare_fx(model, mapping, (x,), backend_config=get_onednn_backend_config())
    calls = [n for n in prepared.graph.nodes if n.target in (F.conv2d, F.linear)]
    assert [len(n.args) for n in calls] == [7, 7, 2] and not any(n.kwargs for n in calls)
    params = {id(p): name for name, p in prepared.named_parameters()}
    found = [(layer.node, params.get(id(layer.weight)), layer.geometry) for layer in weighted_layers(prepared)]
    assert found == [
        (calls[0], "same", Geometry("conv", (1, 1), "same", (1, 1), 1)),
        (calls[1], "valid", Geometry("conv", (2, 1), "valid", (1, 2), 1)),
        (calls[2], "fc", Geometry("linear")),
    ]


class KeywordCalls(nn.Module):
    """Functional calls with their geometry in keywords, or left to torch's defaults, a
    single int standing for every spatial dim: ``F.conv2d(x, w, padding=1)`` and the like."""

    def __init__(self) -> None:
        super().__init__()
        self.pad = nn.Parameter(torch.full((4, 4, 3, 3), 0.1))
        self.strided = nn.Parameter(torch.full((4, 4, 3, 3), 0.1))
        self.plain = nn.Parameter(torch.full((4, 4, 3), 0.1))
        self.fc = nn.Parameter(torch.full((6, 16), 0.1))

    def forward(self, x: Tensor) -> Tensor:
        y = F.conv2d(x, self.pad, padding=1)
        y = F.conv2d(y, self.strided, None, stride=2, dilation=(1, 2), groups=1)
        y = F.conv1d(y.flatten(2), self.plain)
        return F.linear(y.flatten(1)[:, :16], self.fc, bias=None)


def test_torchs_own_prepare_reads_keyword_and_default_geometry_arguments() -> None:
    """A graph of torch's ``prepare_fx`` keeps keywords as written: each conv's geometry is
    its keywords', torch's defaults where omitted, and an int repeated per spatial dim."""
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.backend_config import get_onednn_backend_config
    from torch.ao.quantization.quantize_fx import prepare_fx

    from qcore.int8.saturation import Geometry
    from qcore.int8.weight_ranges import fit_qconfig_mapping

    x = torch.rand(2, 4, 8, 8, generator=torch.Generator().manual_seed(3))
    with host.targeting("avx2"), quantized_engine("onednn"):
        mapping = fit_qconfig_mapping(get_default_qconfig_mapping("onednn"))
        prepared = prepare_fx(KeywordCalls().eval(), mapping, (x,), backend_config=get_onednn_backend_config())
    calls = [n for n in prepared.graph.nodes if n.target in (F.conv2d, F.conv1d, F.linear)]
    assert [sorted(n.kwargs) for n in calls] == [["padding"], ["dilation", "groups", "stride"], [], ["bias"]]
    params = {id(p): name for name, p in prepared.named_parameters()}
    found = [(layer.node, params.get(id(layer.weight)), layer.geometry) for layer in weighted_layers(prepared)]
    assert found == [
        (calls[0], "pad", Geometry("conv", (1, 1), (1, 1), (1, 1), 1)),
        (calls[1], "strided", Geometry("conv", (2, 2), (0, 0), (1, 2), 1)),
        (calls[2], "plain", Geometry("conv", (1,), (0,), (1,), 1)),
        (calls[3], "fc", Geometry("linear")),
    ]


class VolumeCall(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.full((3, 2, 1, 3, 3), 0.1))

    def forward(self, x: Tensor) -> Tensor:
        return F.conv3d(x, self.w, None, 1, (0, 1, 1), 1, 1)


def test_a_functional_conv3d_is_a_layer_with_its_three_dimensional_geometry() -> None:
    """``F.conv3d`` in torch's own ``prepare_fx`` graph: a weighted layer like conv1d's and
    conv2d's, with one stride, padding and dilation per spatial dim."""
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.backend_config import get_onednn_backend_config
    from torch.ao.quantization.quantize_fx import prepare_fx

    from qcore.int8.saturation import Geometry
    from qcore.int8.weight_ranges import fit_qconfig_mapping

    x = torch.rand(1, 2, 3, 5, 5, generator=torch.Generator().manual_seed(4))
    with host.targeting("avx2"), quantized_engine("onednn"):
        mapping = fit_qconfig_mapping(get_default_qconfig_mapping("onednn"))
        prepared = prepare_fx(VolumeCall().eval(), mapping, (x,), backend_config=get_onednn_backend_config())
    (call,) = [n for n in prepared.graph.nodes if n.target is F.conv3d]
    found = [(layer.node, layer.geometry) for layer in weighted_layers(prepared)]
    assert found == [(call, Geometry("conv", (1, 1, 1), (0, 1, 1), (1, 1, 1), 1))]


class TwoFunctionalLinears(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(8, 16) * 0.3)
        self.w2 = nn.Parameter(torch.randn(8, 8) * 0.3)

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(torch.relu(F.linear(x, self.w1)), self.w2)


def test_a_functional_layer_left_in_float_is_no_weighted_layer(backends: None) -> None:
    """A functional linear whose weight has no observer (its call left in float by the
    mapping: the weight is read as it is, a ``get_attr``) is no weighted layer; the other
    one, observed, is."""
    x = torch.rand(4, 16, generator=torch.Generator().manual_seed(2))
    with host.targeting("avx2"):  # (the mapping too: its weight observers are the target's)
        mapping = qcore.get_qconfig_mapping("fxnative").set_object_type(F.relu, None)
        mapping.set_module_name_object_type_order("", F.linear, 1, None)
        prepared = qcore.fx.prepare(TwoFunctionalLinears().eval(), "fxnative", x, mapping=mapping)
    linears = [n for n in prepared.graph.nodes if n.target is F.linear]
    assert [n.args[1].op for n in linears] == ["call_module", "get_attr"]  # the second: float
    assert [layer.node for layer in weighted_layers(prepared)] == linears[:1]
