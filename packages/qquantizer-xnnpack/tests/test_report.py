"""The "why was this not quantized" report names each float compute node with a reason."""

from __future__ import annotations

import torch
from torch import nn

from qcore.pt2e.annotation.report import explain_not_quantized
from qquantizer_xnnpack.quantizer import XNNPACKQuantizer, get_symmetric_quantization_config


class Mixed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)
        self.up = nn.ConvTranspose2d(4, 4, 2, groups=2)

    def forward(self, x: torch.Tensor, idx: torch.Tensor, img: torch.Tensor) -> torch.Tensor:
        y = self.a(x) @ self.b(x).t()  # matmul: no annotator
        z = idx + 1  # integer add: input not quantizable
        w = y * 1e20  # scalar beyond what the histogram observer can take
        g = self.up(img)  # grouped transposed conv: XNNPACK declines it
        return w.sum() + z.sum() + g.sum()


def test_report_lists_each_float_compute_node_with_its_reason() -> None:
    inputs = (torch.randn(3, 8), torch.arange(4), torch.randn(1, 4, 5, 5))
    q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config())
    q.set_module_name("b", None)
    report = {r.node: r for r in explain_not_quantized(Mixed().eval(), q, inputs)}
    assert report["matmul"].reason == "no annotator for the op"
    assert report["linear_1"].reason == "excluded by scope or filter"
    assert report["linear_1"].module == "b"
    assert report["add"].reason == "input not quantizable"
    assert "int64" in report["add"].detail
    assert report["mul"].reason == "input not quantizable"
    assert "too large" in report["mul"].detail
    assert report["conv_transpose2d"].reason == "annotator declined"
    assert "2 groups" in report["conv_transpose2d"].detail
    assert "linear" not in report  # quantized nodes are not reported
    for entry in report.values():
        assert entry.detail and str(entry).startswith(entry.node)


def test_report_in_dynamic_mode_names_static_only_annotators() -> None:
    q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_dynamic=True))
    inputs = (torch.randn(3, 8), torch.arange(4), torch.randn(1, 4, 5, 5))
    report = {r.node: r for r in explain_not_quantized(Mixed().eval(), q, inputs)}
    assert report["add_1"].reason == "no annotator for the op"
    assert "dynamic" in report["add_1"].detail
    assert "linear" not in report


def test_report_needs_inputs_for_an_eager_module() -> None:
    q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config())
    try:
        explain_not_quantized(Mixed(), q)
    except ValueError as exc:
        assert "example_inputs" in str(exc)
    else:
        raise AssertionError("expected ValueError")
