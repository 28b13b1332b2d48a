"""Entry-point descriptor. Cheap to import: the ``"module:attribute"`` references are
imported by qcore on first use, so torch is not imported here."""

from qcore.plugin_api import BackendPlugin

PLUGIN = BackendPlugin(
    name="qnnpack",
    backend_config="qbackend_qnnpack.config:build_backend_config",
    qconfig_mapping="qbackend_qnnpack.mapping:build_qconfig_mapping",
    description="torch's QNNPACK (ARM/mobile) FX int8 backend, mirrored",
    # the kernels this config mirrors: qcore.fx.convert packs weights for QNNPACK and the
    # converted model runs under it, as torch's own flow does on the qnnpack engine
    quantized_engine="qnnpack",
    # What torch's default qnnpack mapping leaves in float on a model of the pattern
    # alone, named as `qcore check qnnpack` printed them (its prepare-convert FAIL lines
    # with nothing declared). The kit fails a listed pattern that does get quantized.
    stays_float=(
        # torch's mapping gives reshape its input's qparams: the float model input here
        "'reshape'",
        # dynamic-only patterns: the default (static) mapping does not match them
        "LSTM",
        "GRU",
        "LSTMCell",
        "GRUCell",
        "RNNCell",
        # weight-only patterns (float activations): the static qconfig does not match them
        "Embedding",
        "EmbeddingBag",
        "nnqat.Embedding",
        "nnqat.EmbeddingBag",
    ),
)
