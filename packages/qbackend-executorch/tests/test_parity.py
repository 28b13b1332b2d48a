"""The declarative ExecuTorch config equals torch 2.13's, field by field, and passes
qcore's conformance kit with every pattern exercised (the kit converts with
``convert_to_reference_fx``, what ExecuTorch consumes, which runs on any host)."""

from __future__ import annotations

import qcore
from qbackend_executorch.config import beyond_torch
from qcore.testing import reference as kit
from qcore.testing.fusion import fusion_failures
from qcore.zoo.suite.fakes import fake_distributions, one_plugin

TORCHS = kit.torch_backend_config("executorch")


def test_executorch_is_conformant_and_every_pattern_runs() -> None:
    kit.assert_conformant_covering("executorch", TORCHS)  # torch's 84 patterns at least


def test_identical_to_torch_executorch_config() -> None:
    kit.assert_equals_reference("executorch", TORCHS, patterns=84, beyond=beyond_torch())


def test_no_fusion_needs_an_upstream_fuser_bug_exemption() -> None:
    """Unlike oneDNN's Linear -> tanh / leaky_relu, every fusion of torch's ExecuTorch
    config runs in torch's own fuse pass, so parity above compares every fuser as is."""
    assert fusion_failures(TORCHS) == {}
    with kit.without_extensions("executorch"):
        assert fusion_failures(qcore.get_backend_config("executorch")) == {}


def test_builds_in_a_fresh_interpreter() -> None:
    kit.assert_builds_in_a_fresh_interpreter("executorch")


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

PLUGIN = BackendExtension(name="mish", target="executorch", patterns=patterns)
"""


def test_an_extension_only_adds_its_patterns() -> None:
    """An installed extension's pattern is one more difference from torch's config, and
    the only one; switching extensions off gives torch's config back."""
    before = kit.assert_extensions_only_add_patterns("executorch", TORCHS)
    with fake_distributions() as make:
        one_plugin(
            make, "qext-executorch-mish", "executorch.mish", "qext_executorch_mish", MISH_EXTENSION,
            group="qcore.backend_extensions",
        )  # fmt: skip
        after = kit.assert_extensions_only_add_patterns("executorch", TORCHS)
        kit.assert_equals_reference("executorch", TORCHS, patterns=84, beyond=beyond_torch())
    assert sorted(after) == sorted([*before, "nn.Mish: extra (not in reference)"])
