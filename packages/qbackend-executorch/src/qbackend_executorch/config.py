"""TEMPORARY stand-in: returns torch's own config until the declarative one lands."""

from __future__ import annotations

from torch.ao.quantization.backend_config import BackendConfig


def build_backend_config() -> BackendConfig:
    import torch.ao.quantization.backend_config.utils  # noqa: F401  (fresh-process hazard)
    from torch.ao.quantization.backend_config import get_executorch_backend_config

    return get_executorch_backend_config()
