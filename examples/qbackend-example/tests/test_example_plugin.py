"""The example plugin, installed like a third-party distribution, plugs in everywhere."""

from __future__ import annotations

import copy
import os
import subprocess
import sys

import pytest
import torch
from torch import nn
from torch.ao.quantization.quantize_fx import convert_to_reference_fx, prepare_fx

import qcore
import qcore.testing
from qcore.metrics import sqnr


class ConvLinearSiLU(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.relu = nn.ReLU()
        self.fc = nn.Linear(8 * 6 * 6, 16)
        self.silu = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.flatten(self.relu(self.conv(x)), 1)
        return self.silu(self.fc(y))


@pytest.fixture
def model_and_input() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return ConvLinearSiLU().eval(), torch.randn(8, 3, 8, 8)


def _fx_reference(backend: str, model: nn.Module, x: torch.Tensor) -> torch.fx.GraphModule:
    config = qcore.get_backend_config(backend)
    mapping = qcore.get_qconfig_mapping(backend, model=model)
    prepared = prepare_fx(copy.deepcopy(model), mapping, (x,), backend_config=config)
    prepared(x)
    return convert_to_reference_fx(prepared, backend_config=config)


def _quantized_ops(gm: torch.fx.GraphModule) -> list[str]:
    """Targets of the nodes that consume a dequantize and feed a quantize_per_tensor."""
    found = []
    for node in gm.graph.nodes:
        feeds_quant = any(u.target == torch.quantize_per_tensor for u in node.users)
        reads_dequant = any(getattr(a, "target", None) == "dequantize" for a in node.args)
        if feeds_quant and reads_dequant:
            found.append(str(node.target))
    return found


def test_own_backend_passes_the_conformance_kit() -> None:
    results = qcore.testing.assert_conformant("backend", "example")
    assert {r.check for r in results} >= {"well-formed", "fuser-method", "prepare-convert"}


def test_own_backend_quantizes_a_model_accurately(
    model_and_input: tuple[nn.Module, torch.Tensor],
) -> None:
    model, x = model_and_input
    with torch.no_grad():
        assert sqnr(model(x), _fx_reference("example", model, x)(x)) >= 30


def test_onednn_extension_adds_silu_patterns_to_onednn() -> None:
    from torch.ao.quantization.backend_config import get_onednn_backend_config

    reference = {repr(c.pattern) for c in get_onednn_backend_config().configs}
    ours = qcore.get_backend_config("onednn")
    added = [c for c in ours.configs if repr(c.pattern) not in reference]
    assert sorted(repr(c.pattern) for c in added) == sorted(
        [repr(nn.SiLU), repr(torch.nn.functional.silu)]
    )
    assert len(ours.configs) == len(get_onednn_backend_config().configs) + 2


def test_onednn_extension_makes_silu_run_quantized(
    model_and_input: tuple[nn.Module, torch.Tensor],
) -> None:
    model, x = model_and_input
    converted = _fx_reference("onednn", model, x)
    assert "silu" in _quantized_ops(converted)
    with torch.no_grad():
        assert sqnr(model(x), converted(x)) >= 30


def test_disabling_the_extension_removes_it() -> None:
    env = {**os.environ, "QCORE_DISABLE_PLUGINS": "onednn.example"}
    code = "import qcore; print(len(qcore.get_backend_config('onednn').configs))"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    from torch.ao.quantization.backend_config import get_onednn_backend_config

    assert int(out.stdout) == len(get_onednn_backend_config().configs)


def test_xnnpack_extension_annotates_silu(model_and_input: tuple[nn.Module, torch.Tensor]) -> None:
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from torchao.quantization.pt2e.quantizer.quantizer import Q_ANNOTATION_KEY

    model, x = model_and_input
    quantizer = qcore.get_quantizer("xnnpack")
    exported = torch.export.export(model, (x,)).module()
    annotated = quantizer.annotate(copy.deepcopy(exported))
    silu = [n for n in annotated.graph.nodes if n.target == torch.ops.aten.silu.default]
    assert len(silu) == 1
    annotation = silu[0].meta.get(Q_ANNOTATION_KEY)
    assert annotation is not None and annotation.output_qspec is not None

    prepared = prepare_pt2e(exported, qcore.get_quantizer("xnnpack"))
    prepared(x)
    converted = convert_pt2e(prepared)
    silu_nodes = [n for n in converted.graph.nodes if n.target == torch.ops.aten.silu.default]
    assert "dequantize" in str(silu_nodes[0].args[0].target)
    with torch.no_grad():
        assert sqnr(model(x), converted(x)) >= 25


def test_only_quantizers_built_by_get_quantizer_run_extensions(
    model_and_input: tuple[nn.Module, torch.Tensor],
) -> None:
    """A quantizer class constructed directly runs its own annotators only, also after
    ``qcore.get_quantizer`` installed the extension in this process: what a quantizer does
    never depends on what ran before."""
    from torchao.quantization.pt2e.quantizer.quantizer import Q_ANNOTATION_KEY

    from qquantizer_xnnpack import XNNPACKQuantizer, get_symmetric_quantization_config

    model, x = model_and_input
    exported = torch.export.export(model, (x,)).module()

    def silu_annotated(quantizer: object) -> bool:
        annotated = quantizer.annotate(copy.deepcopy(exported))  # type: ignore[attr-defined]
        silu = [n for n in annotated.graph.nodes if n.target == torch.ops.aten.silu.default]
        return Q_ANNOTATION_KEY in silu[0].meta

    config = get_symmetric_quantization_config()
    assert not silu_annotated(XNNPACKQuantizer().set_global(config))
    assert silu_annotated(qcore.get_quantizer("xnnpack").set_global(config))
    assert not silu_annotated(XNNPACKQuantizer().set_global(config))
    assert "silu" not in {a.name for a in XNNPACKQuantizer().annotators()}


def test_xnnpack_lists_the_extension_annotator() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "qcore.cli", "show", "xnnpack"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert any(line.split()[:1] == ["silu"] for line in out.stdout.splitlines())


def test_derived_quantizer_passes_the_conformance_kit() -> None:
    """No quantizer code in this distribution: qcore derives one from the backend."""
    results = qcore.testing.assert_conformant("quantizer", "example")
    checked = {r.subject for r in results if r.check == "prepare-convert"}
    assert {"conv2d_relu", "linear", "op_add", "silu"} <= checked


def test_showing_the_derived_quantizer_prints_no_upstream_warning() -> None:
    """Reading this backend's observers (``reduce_range``) makes torch warn; nobody running
    ``qcore show`` can act on that, so it stays out of the output."""
    shown = subprocess.run(
        [sys.executable, "-m", "qcore.cli", "show", "quantizer:example"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert "derived from backend example" in shown.stdout
    assert "Warning" not in shown.stderr, shown.stderr
