"""Shared fixtures for qcore's tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from qcore.zoo.suite.fakes import FakeDist, fake_distributions

# helper modules next to the tests (sync_scenarios: what spawned ranks import)
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def fake_dist() -> Iterator[FakeDist]:
    """Install fake distributions for one test; see :mod:`qcore.zoo.suite.fakes`."""
    with fake_distributions() as make:
        yield make


# Backends wrapping torch's own oneDNN config and mapping (made safe for the target CPU),
# so qcore's suite tests its flows without a first-party plugin installed.
TORCH_ONEDNN_IMPL = """
import torch.ao.quantization.backend_config.utils
from torch.ao.quantization import get_default_qconfig_mapping
from torch.ao.quantization.backend_config import get_onednn_backend_config
from qcore.int8.weight_ranges import fit_qconfig_mapping

def config():
    return get_onednn_backend_config()

def mapping(is_qat=False, model=None):
    return fit_qconfig_mapping(get_default_qconfig_mapping("onednn"))
"""
TORCH_ONEDNN_DESCRIPTORS = """
from qcore.plugin_api import BackendPlugin
NATIVE = BackendPlugin("fxnative", "fx_fake_impl:config", "fx_fake_impl:mapping")
REFERENCE = BackendPlugin("fxref", "fx_fake_impl:config", "fx_fake_impl:mapping",
                          reference_convert=True)
"""


@pytest.fixture
def torch_onednn_plugins(fake_dist: FakeDist) -> None:
    """Backends ``fxnative`` (``convert_fx``) and ``fxref`` (reference representation),
    both torch's oneDNN config with its default mapping; ``qcore.get_quantizer`` derives a
    PT2E quantizer from either."""
    fake_dist(
        "qcore-fake-fx",
        {"qcore.backends": {"fxnative": "fx_fake_plugin:NATIVE", "fxref": "fx_fake_plugin:REFERENCE"}},
        {"fx_fake_impl": TORCH_ONEDNN_IMPL, "fx_fake_plugin": TORCH_ONEDNN_DESCRIPTORS},
    )
