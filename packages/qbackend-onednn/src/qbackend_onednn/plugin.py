"""Entry-point descriptor. The references are imported on first use, not here."""

from qcore.plugin_api import BackendPlugin

PLUGIN = BackendPlugin(
    name="onednn",
    backend_config="qbackend_onednn.config:build_backend_config",
    qconfig_mapping="qbackend_onednn.mapping:build_qconfig_mapping",
    description="oneDNN (x86) FX-mode int8 backend",
    quantized_engine="onednn",
)
