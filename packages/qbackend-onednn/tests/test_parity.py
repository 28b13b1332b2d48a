"""The declarative oneDNN config equals torch 2.13's, field by field, and drives FX alike.

One enumerated deviation: torch's fuser methods for the patterns in
``KNOWN_UPSTREAM_FUSER_BUGS`` crash in torch's own fuse pass (its fuse handler passes the
function ``torch.tanh`` / ``F.leaky_relu`` to ``nni.LinearTanh`` / ``nni.LinearLeakyReLU``,
which assert they get modules). Ours fuses ``torch.tanh`` exactly as ``nn.Tanh`` and
declines ``F.leaky_relu`` with ``qcore.fx.patterns.UnfusablePattern`` (its
``negative_slope`` never reaches a fuser). Every other field of these patterns, and every
field of the other 219, must still be identical. It passes qcore's conformance kit with
every pattern exercised.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
import torch.ao.nn.intrinsic as nni
import torch.ao.nn.intrinsic.quantized as nniq
import torch.nn.functional as F
from torch import nn
from torch.ao.quantization import get_default_qconfig_mapping

import qcore
from qbackend_onednn.config import beyond_torch
from qcore.fx.patterns import UnfusablePattern, pattern_key
from qcore.int8.engine import quantized_engine
from qcore.testing import reference as kit
from qcore.testing.fusion import fuse_pattern, fusion_failures
from qcore.testing.parity import compare_backend_configs
from qcore.zoo.models import ModelCase, sqnr
from qcore.zoo.suite import flow
from qcore.zoo.suite.fakes import fake_distributions, one_plugin

#: Patterns (torch's reversed nested format) whose fuser crashes in torch 2.13's own
#: config, where ours fuses (tanh) or declines clearly (leaky_relu); see the docstring.
KNOWN_UPSTREAM_FUSER_BUGS = frozenset({(torch.tanh, nn.Linear), (F.leaky_relu, nn.Linear)})
TORCHS = kit.torch_backend_config("onednn")


def test_onednn_is_conformant_and_every_pattern_runs() -> None:
    kit.assert_conformant_covering("onednn", TORCHS)  # torch's 221 patterns at least


def test_identical_to_torch_onednn_config() -> None:
    ours = kit.assert_equals_reference(
        "onednn",
        TORCHS,
        patterns=221,
        upstream_fuser_bugs=KNOWN_UPSTREAM_FUSER_BUGS,
        beyond=beyond_torch(),
    )
    # without the exemption, the fuser of a listed pattern is the only difference
    assert sorted(compare_backend_configs(ours, TORCHS)) == sorted(
        [
            "(torch.tanh, nn.Linear): fuser_method(is_qat=False): ours gives LinearTanh "
            "['Linear', 'Tanh'], reference raises AssertionError",
            *kit.added_lines(beyond_torch()),
        ]
    )


def test_known_upstream_fuser_bugs_are_exactly_torchs_crashing_fusions() -> None:
    """torch's own fuse pass crashes on each listed pattern and on no other one, so the
    list can neither go stale nor miss one."""
    crashes = fusion_failures(TORCHS)
    assert set(crashes) == KNOWN_UPSTREAM_FUSER_BUGS
    for message in crashes.values():
        assert message.startswith("AssertionError: Incorrect types for input modules: Linear")


def test_ours_fuses_or_declines_each_known_upstream_fuser_bug() -> None:
    with kit.without_extensions("onednn"):
        ours = qcore.get_backend_config("onednn")
    by_key = {pattern_key(c): c for c in ours.configs}
    assert fusion_failures(ours) == {
        (F.leaky_relu, nn.Linear): "UnfusablePattern: pattern (nn.Linear, F.leaky_relu): "
        "cannot fuse F.leaky_relu exactly: torch's fusion pass gives the fuser the function, "
        "not the arguments of its call (negative_slope), so a fused module would silently "
        "use defaults. Use nn.LeakyReLU(negative_slope=...) in the model instead of calling "
        "F.leaky_relu"
    }
    tanh = by_key[(torch.tanh, nn.Linear)]
    fused = fuse_pattern(ours, tanh)
    assert tanh.fused_module is nni.LinearTanh
    assert [type(m) for m in fused.modules()].count(nni.LinearTanh) == 1
    with pytest.raises(UnfusablePattern):
        fuse_pattern(ours, by_key[(F.leaky_relu, nn.Linear)])


def test_builds_in_a_fresh_interpreter() -> None:
    kit.assert_builds_in_a_fresh_interpreter("onednn")


class _Net(nn.Module):
    """conv-bn-relu, then a conv whose output is added to a residual and relu'd."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.bn1, self.relu1 = (
            nn.Conv2d(3, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
        )
        self.conv2, self.relu2 = nn.Conv2d(8, 8, 3, padding=1), nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.relu1(self.bn1(self.conv1(x)))
        return self.relu2(self.conv2(y) + y)


@pytest.fixture
def onednn_engine() -> Iterator[None]:
    with quantized_engine("onednn"):
        yield


def test_fx_flow_bit_identical_to_torch_config(onednn_engine: object) -> None:
    net = ModelCase("conv_bn_relu_residual", _Net, lambda: (torch.randn(2, 3, 12, 12),))
    with kit.without_extensions("onednn"):
        ours = qcore.get_backend_config("onednn")
    converted = flow.assert_same_outputs(net, get_default_qconfig_mapping("onednn"), ours, TORCHS)
    kinds = {type(m) for m in converted.modules()}
    assert {nniq.ConvReLU2d, nniq.ConvAddReLU2d} <= kinds  # both fusions really happened
    # sanity: it tracks the float model (accuracy is the mapping's job)
    assert sqnr(flow.run(net.model(), net), flow.run(converted, net)) > 15


#: A backend extension adding one pattern that neither torch's config nor ours has,
#: installed as a real distribution: without it, an env with no extension installed
#: compares nothing.
MISH_EXTENSION = """
import torch
from torch.ao.quantization.backend_config import BackendPatternConfig, DTypeConfig
from qcore.plugin_api import BackendExtension

def patterns():
    dtype = DTypeConfig(input_dtype=torch.quint8, output_dtype=torch.quint8)
    return [BackendPatternConfig(torch.nn.Mish).add_dtype_config(dtype)]

PLUGIN = BackendExtension(name="mish", target="onednn", patterns=patterns)
"""


def test_an_extension_only_adds_its_patterns() -> None:
    """An installed extension's pattern is one more difference from torch's config, and
    the only one; switching extensions off gives torch's config back."""
    before = kit.assert_extensions_only_add_patterns(
        "onednn", TORCHS, upstream_fuser_bugs=KNOWN_UPSTREAM_FUSER_BUGS
    )
    with fake_distributions() as make:
        one_plugin(
            make, "qext-onednn-mish", "onednn.mish", "qext_onednn_mish", MISH_EXTENSION,
            group="qcore.backend_extensions",
        )  # fmt: skip
        after = kit.assert_extensions_only_add_patterns(
            "onednn", TORCHS, upstream_fuser_bugs=KNOWN_UPSTREAM_FUSER_BUGS
        )
        kit.assert_equals_reference(
            "onednn",
            TORCHS,
            patterns=221,
            upstream_fuser_bugs=KNOWN_UPSTREAM_FUSER_BUGS,
            beyond=beyond_torch(),
        )
    assert sorted(after) == sorted([*before, "nn.Mish: extra (not in reference)"])
