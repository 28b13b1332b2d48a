"""Entry-point descriptor. The references are imported on first use, not here."""

from qcore.plugin_api import BackendPlugin

PLUGIN = BackendPlugin(
    name="executorch",
    backend_config="qbackend_executorch.config:build_backend_config",
    qconfig_mapping="qbackend_executorch.mapping:build_qconfig_mapping",
    description="ExecuTorch FX-mode backend (reference representation)",
    reference_convert=True,
    # the backend's one embedding config is weight-only: the mapping gives the embedding
    # modules that qconfig, but the QAT embeddings and F.embedding get the static global
    # one, which does not match it
    stays_float=("nnqat.Embedding", "nnqat.EmbeddingBag", "F.embedding"),
)
