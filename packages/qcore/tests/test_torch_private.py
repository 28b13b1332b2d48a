"""The private torch/torchao facts qcore spells itself in ``qcore._torch_private`` still
hold in the torch and torchao installed (a torch upgrade that moves one fails here)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torchao.quantization.pt2e.quantizer.quantizer import Q_ANNOTATION_KEY as TORCHAO_KEY

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


def test_reused_pattern_graphs_exports_each_pattern_once_and_hands_out_copies() -> None:
    """Within the block a pattern (same code, closure and input shapes) is exported once,
    and every caller gets its own copy of torchao's graph; a pattern differing in its
    closure or its inputs' shapes is exported again; after the block, torchao's own
    exporter is back, in every module that bound it by name."""
    from torchao.quantization.pt2e import qat_utils, utils

    original = utils._get_aten_graph_module_for_pattern
    original_in_qat_utils = qat_utils._get_aten_graph_module_for_pattern
    calls: list[object] = []

    def counting(pattern: object, inputs: tuple[object, ...], is_cuda: bool = False, **kw: object) -> object:
        calls.append(pattern)
        return original(pattern, inputs, is_cuda, **kw)

    utils._get_aten_graph_module_for_pattern = counting
    try:
        with reused_pattern_graphs():
            assert qat_utils._get_aten_graph_module_for_pattern is utils._get_aten_graph_module_for_pattern
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
        assert utils._get_aten_graph_module_for_pattern is counting
    finally:
        utils._get_aten_graph_module_for_pattern = original
    assert qat_utils._get_aten_graph_module_for_pattern is original_in_qat_utils
