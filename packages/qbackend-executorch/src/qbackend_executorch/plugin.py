"""Entry-point descriptor: cheap to import, the factories import the heavy parts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from qcore.plugin_api import BackendPlugin

if TYPE_CHECKING:
    from torch import nn
    from torch.ao.quantization import QConfigMapping
    from torch.ao.quantization.backend_config import BackendConfig


def _backend_config() -> BackendConfig:
    from qbackend_executorch.config import build_backend_config

    return build_backend_config()


def _qconfig_mapping(is_qat: bool, model: nn.Module | None) -> QConfigMapping:
    from qbackend_executorch.mapping import build_qconfig_mapping

    return build_qconfig_mapping(is_qat=is_qat, model=model)


PLUGIN = BackendPlugin(
    name="executorch",
    backend_config=_backend_config,
    qconfig_mapping=_qconfig_mapping,
    description="ExecuTorch FX-mode backend (reference representation)",
)
