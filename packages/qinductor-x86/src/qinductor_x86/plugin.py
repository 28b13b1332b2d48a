"""Entry-point descriptors for the x86 quantizer and the x86 Inductor lowering."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from qcore.plugin_api import Lowering, LoweringPlugin, QuantizerPlugin

if TYPE_CHECKING:
    from torchao.quantization.pt2e.quantizer import Quantizer


def _quantizer(**options: Any) -> Quantizer:
    from qinductor_x86.quantizer import make_quantizer

    return make_quantizer(**options)


def _lowering() -> Lowering:
    from qinductor_x86.lowering import make_lowering

    return make_lowering()


QUANTIZER = QuantizerPlugin(
    name="x86",
    factory=_quantizer,
    annotator_namespace="x86",
    description="PT2E quantizer for x86 Inductor (oneDNN)",
)
LOWERING = LoweringPlugin(
    name="x86",
    factory=_lowering,
    description="oneDNN int8 lowerings and weight prepack for TorchInductor",
)
