"""Entry-point descriptor. The references are imported on first use, not here."""

from qcore.plugin_api import BackendPlugin

PLUGIN = BackendPlugin(
    name="onednn",
    backend_config="qbackend_onednn.config:build_backend_config",
    qconfig_mapping="qbackend_onednn.mapping:build_qconfig_mapping",
    description="oneDNN (x86) FX-mode int8 backend",
    quantized_engine="onednn",
    stays_float=(
        # the mapping keeps transposed convs in float (see mapping.py, difference 1)
        *(
            f"{form}{dims}d{tail}"
            for dims in (1, 2, 3)
            for form, tail in (
                ("ConvTranspose", ""),
                ("ConvTranspose", f" → BatchNorm{dims}d"),
                ("torch.conv_transpose", ""),
            )
        ),
        # torch's mapping gives reshape its input's qparams: the float model input here
        "'reshape'",
        # dynamic-only patterns: the default (static) mapping does not match them
        "LSTM",
        "GRU",
        "LSTMCell",
        "GRUCell",
        "RNNCell",
        # weight-only qint8 patterns: the static global qconfig does not match them
        "Embedding",
        "EmbeddingBag",
        "nnqat.Embedding",
        "nnqat.EmbeddingBag",
    ),
)
