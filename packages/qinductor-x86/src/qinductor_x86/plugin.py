"""Entry-point descriptors for the x86 quantizer and the x86 Inductor lowering.

The references are imported on first use, so loading these imports no Inductor code.
"""

from qcore.plugin_api import LoweringPlugin, QuantizerPlugin

QUANTIZER = QuantizerPlugin(
    name="x86",
    factory="qinductor_x86.quantizer.x86_inductor_quantizer:make_quantizer",
    annotator_namespace="x86",
    description="PT2E quantizer for x86 Inductor (oneDNN)",
)
LOWERING = LoweringPlugin(
    name="x86",
    factory="qinductor_x86.lowering:make_lowering",
    description="oneDNN int8 lowerings and weight prepack for TorchInductor",
)
