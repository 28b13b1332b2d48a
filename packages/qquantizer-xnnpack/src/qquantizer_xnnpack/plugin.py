"""Entry-point descriptor: cheap to import; the factory imports torchao on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from qcore.plugin_api import QuantizerPlugin

if TYPE_CHECKING:
    from torchao.quantization.pt2e.quantizer import Quantizer


def _factory(**options: Any) -> Quantizer:
    from qquantizer_xnnpack.quantizer import make_quantizer

    return make_quantizer(**options)


PLUGIN = QuantizerPlugin(
    name="xnnpack",
    factory=_factory,
    annotator_namespace="xnnpack",
    description="PT2E quantizer for XNNPACK / ExecuTorch",
)
