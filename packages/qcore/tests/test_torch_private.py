"""The private torch/torchao facts qcore spells itself in ``qcore._torch_private`` still
hold in the torch and torchao installed (a torch upgrade that moves one fails here)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torchao.quantization.pt2e.quantizer.quantizer import Q_ANNOTATION_KEY as TORCHAO_KEY

from qcore import _torch_private as private
from qcore._torch_private import Q_ANNOTATION_KEY, reused_pattern_graphs


def test_the_annotation_key_is_torchaos() -> None:
    assert Q_ANNOTATION_KEY == TORCHAO_KEY


class _Wrapper(torch.nn.Module):
    """A pattern function as torchao hands it to its exporter: wrapped in a module."""

    def __init__(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x)


def _pattern_with(relu: bool, scale: float = 2.0) -> _Wrapper:
    def pattern(x: torch.Tensor) -> torch.Tensor:
        y = x * scale
        return torch.relu(y) if relu else y

    return _Wrapper(pattern)


def test_reused_pattern_graphs_exports_each_pattern_once_and_hands_out_copies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Within the block a pattern (same code, closure and input shapes) is traced once,
    and every caller gets its own copy of the graph; a pattern differing in its closure or
    its inputs' shapes is traced again; after the block, torchao's own exporter is back,
    in every module that bound it by name."""
    from torchao.quantization.pt2e import qat_utils, utils

    original = utils._get_aten_graph_module_for_pattern
    original_in_qat_utils = qat_utils._get_aten_graph_module_for_pattern
    traced = private._traced_pattern
    calls: list[object] = []

    def counting(pattern: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        calls.append(pattern)
        return traced(pattern, inputs, kwargs)

    monkeypatch.setattr(private, "_traced_pattern", counting)
    monkeypatch.setattr(private, "_EXPORTED_PATTERNS", {})
    with reused_pattern_graphs():
        assert qat_utils._get_aten_graph_module_for_pattern is utils._get_aten_graph_module_for_pattern
        assert utils._get_aten_graph_module_for_pattern is not original
        export = utils._get_aten_graph_module_for_pattern
        first = export(_pattern_with(True), (torch.randn(2, 3),))
        second = export(_pattern_with(True), (torch.randn(2, 3),))  # a new closure, same cells
        other = export(_pattern_with(False), (torch.randn(2, 3),))
        scaled = export(_pattern_with(True, 3.0), (torch.randn(2, 3),))
        reshaped = export(_pattern_with(True), (torch.randn(4, 3),))
    assert len(calls) == 4  # the second is the first's graph
    assert second is not first and second.code == first.code
    assert "relu" in first.code and "relu" not in other.code
    assert "2.0" in first.code and "3.0" in scaled.code
    assert reshaped is not first
    assert utils._get_aten_graph_module_for_pattern is original
    assert qat_utils._get_aten_graph_module_for_pattern is original_in_qat_utils


def _signature(graph: torch.fx.GraphModule) -> list[tuple[Any, ...]]:
    """The graph's nodes in order: kind, target, and arguments (other nodes by position,
    every literal by its repr); names and metadata left out, as subgraph matching does."""
    position = {node: index for index, node in enumerate(graph.graph.nodes)}

    def argument(value: Any) -> Any:
        if isinstance(value, torch.fx.Node):
            return ("node", position[value])
        if isinstance(value, (list, tuple)):
            return tuple(argument(v) for v in value)
        if isinstance(value, dict):
            return tuple(sorted((k, argument(v)) for k, v in value.items()))
        return repr(value)

    return [
        (n.op, "" if n.op == "placeholder" else str(n.target), argument(n.args), argument(n.kwargs))
        for n in graph.graph.nodes
    ]


def test_every_pattern_of_a_conv_bn_qat_flow_is_torchaos_graph(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each pattern a QAT prepare and convert of a conv-bn-relu traces (the fuse and fold
    rewrites: every bias, per-channel and training variant) gives the graph torchao's own
    exporter (strict ``torch.export``) gives, node for node and argument for argument.
    (The whole flow, torchao's own against the reused patterns: qquantizer-xnnpack's
    test_qat.py.)"""
    from torchao.quantization.pt2e import utils
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_qat_pt2e
    from torchao.testing.pt2e._xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )

    # torchao's own, also where the session's block already replaced it (conftest.py)
    torchaos = inspect.unwrap(utils._get_aten_graph_module_for_pattern)
    assert torchaos.__code__.co_filename == utils.__file__
    traced = private._traced_pattern
    requested: list[tuple[Any, tuple[Any, ...], dict[str, Any], torch.fx.GraphModule]] = []

    def recording(pattern: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        graph = traced(pattern, inputs, kwargs)
        requested.append((pattern, inputs, kwargs, graph))
        return graph

    monkeypatch.setattr(private, "_traced_pattern", recording)
    monkeypatch.setattr(private, "_EXPORTED_PATTERNS", {})
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
    inputs = (torch.randn(2, 3, 8, 8),)
    quantizer = XNNPACKQuantizer().set_global(
        get_symmetric_quantization_config(is_per_channel=True, is_qat=True)
    )
    with reused_pattern_graphs():
        prepared = prepare_qat_pt2e(torch.export.export(model.train(), inputs).module(), quantizer)
        prepared(*inputs)
        convert_pt2e(prepared)
    assert len(requested) >= 16  # the fold's 16 variants at least
    for pattern, example, kwargs, graph in requested:
        assert _signature(graph) == _signature(torchaos(pattern, example, False, **kwargs))
