"""The declarative ExecuTorch config equals torch 2.13's, field by field."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch.ao.quantization.backend_config.utils  # noqa: F401  (upstream fresh-process bug)
from torch.ao.quantization.backend_config import get_executorch_backend_config

import qcore
from qcore.testing import extensions_disabled
from qcore.testing.fresh import run_fresh
from qcore.testing.fusion import fusion_failures
from qcore.testing.parity import compare_backend_configs


@pytest.fixture
def no_extensions() -> Iterator[None]:
    """Third-party extensions (e.g. examples/qbackend-example) add patterns on purpose."""
    with extensions_disabled("backend-extension", "executorch"):
        yield

def test_identical_to_torch_executorch_config(no_extensions: None) -> None:
    ours = qcore.get_backend_config("executorch")
    reference = get_executorch_backend_config()
    assert compare_backend_configs(ours, reference) == []
    assert ours.name == "executorch"
    assert len(ours.configs) == len(reference.configs) == 84


def test_no_fusion_needs_an_upstream_fuser_bug_exemption(no_extensions: None) -> None:
    """Unlike oneDNN's Linear -> tanh / leaky_relu, every fusion of torch's ExecuTorch
    config runs in torch's own fuse pass, so parity above compares every fuser as is."""
    assert fusion_failures(get_executorch_backend_config()) == {}
    assert fusion_failures(qcore.get_backend_config("executorch")) == {}


def test_builds_in_a_fresh_interpreter() -> None:
    code = "import qcore; print(qcore.get_backend_config('executorch').name)"
    done = run_fresh(code)
    assert done.ok, done.describe()
    assert done.stdout.strip() == "executorch"


def test_extensions_only_add_patterns() -> None:
    """With extensions installed the differences are extra patterns, nothing changed."""
    diffs = compare_backend_configs(
        qcore.get_backend_config("executorch"), get_executorch_backend_config()
    )
    assert all(d.endswith(": extra (not in reference)") for d in diffs), diffs
