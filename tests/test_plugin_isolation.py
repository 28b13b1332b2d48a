"""Fake distributions next to the real first-party plugins: isolation and conflicts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

import qcore
from qcore.errors import PluginConflictError, PluginError
from qcore.metrics import sqnr
from qcore.zoo.suite.fakes import FakeDist


def test_missing_module_leaves_first_party_plugins_working(fake_dist: FakeDist) -> None:
    from qbackend_executorch.config import beyond_torch as executorch_beyond_torch
    from qbackend_onednn.config import beyond_torch as onednn_beyond_torch

    fake_dist("qbackend-broken", {"qcore.backends": {"broken": "qbroken_int.plugin:PLUGIN"}})
    with pytest.raises(PluginError, match=r"distribution qbackend-broken 1\.0.*qbroken_int"):
        qcore.get_backend_config("broken")
    assert len(qcore.get_backend_config("onednn").configs) >= 221 + len(onednn_beyond_torch())
    assert len(qcore.get_backend_config("executorch").configs) == 84 + len(executorch_beyond_torch())
    _assert_quantizes_a_linear(qcore.get_quantizer("xnnpack"))
    status = {(p.name, p.distribution): p.status for p in qcore.list_plugins()}
    assert status[("broken", "qbackend-broken")] == "error"
    assert status[("onednn", "qbackend-onednn")] == "loaded"


def _assert_quantizes_a_linear(quantizer: object) -> None:
    """The quantizer works: a linear layer comes out of PT2E with int8 weights and
    activations, close to float."""
    torch.manual_seed(0)
    model, x = nn.Linear(16, 8).eval(), torch.randn(4, 16)
    prepared = prepare_pt2e(torch.export.export(model, (x,)).module(), quantizer)
    prepared(x)
    converted = convert_pt2e(prepared)
    targets = [str(n.target) for n in converted.graph.nodes]
    assert any("quantize_per_tensor" in t for t in targets), targets
    assert sqnr(model(x), converted(x)) >= 30


def test_a_second_distribution_claiming_onednn_names_both(fake_dist: FakeDist) -> None:
    fake_dist(
        "qbackend-impostor",
        {"qcore.backends": {"onednn": "qimpostor.plugin:PLUGIN"}},
        {"qimpostor.plugin": "raise RuntimeError('must never be imported')"},
    )
    from qbackend_executorch.config import beyond_torch as executorch_beyond_torch

    with pytest.raises(PluginConflictError) as info:
        qcore.get_backend_config("onednn")
    assert "qbackend-onednn" in str(info.value)
    assert "qbackend-impostor" in str(info.value)
    assert len(qcore.get_backend_config("executorch").configs) == 84 + len(executorch_beyond_torch())


def test_backend_lookup_imports_only_that_plugin(
    fresh_lookup: Callable[[str], dict[str, Any]],
) -> None:
    """In a fresh interpreter, the onednn lookup imports onednn's plugin (and extensions
    to it, if installed) and no other first-party plugin, nor torchao or Inductor."""
    imported = fresh_lookup("onednn")["imported"]
    assert any(m.startswith("qbackend_onednn") for m in imported), imported  # the probe sees
    others = ("qbackend_executorch", "qquantizer_", "qinductor_", "torchao", "torch._inductor")
    assert [m for m in imported if m.startswith(others)] == []
