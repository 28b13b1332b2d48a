"""Entry-point descriptor. The reference is imported on first use, so torchao is too."""

from qcore.plugin_api import QuantizerPlugin

PLUGIN = QuantizerPlugin(
    name="xnnpack",
    factory="qquantizer_xnnpack.quantizer:make_quantizer",
    annotator_namespace="xnnpack",
    description="PT2E quantizer for XNNPACK / ExecuTorch",
)
