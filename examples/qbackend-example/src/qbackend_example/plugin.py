"""Entry-point descriptors. Cheap to import: the ``"module:attribute"`` references are
imported by qcore on first use, so torch is not imported here."""

from qcore.plugin_api import BackendExtension, BackendPlugin, QuantizerExtension

BACKEND = BackendPlugin(
    name="example",
    backend_config="qbackend_example.backend:build_backend_config",
    qconfig_mapping="qbackend_example.backend:build_qconfig_mapping",
    reference_convert=True,  # its compiler lowers the reference representation
    description="fictional int8 NPU: conv2d/linear(+relu), add, LUT SiLU",
)
ONEDNN_EXTENSION = BackendExtension(
    name="example",
    target="onednn",
    patterns="qbackend_example.backend:silu_patterns",
    description="quantized SiLU for oneDNN",
)
XNNPACK_EXTENSION = QuantizerExtension(
    name="example",
    target="xnnpack",
    annotators="qbackend_example.annotators:annotator_list",
    description="quantized SiLU for the XNNPACK quantizer",
)
