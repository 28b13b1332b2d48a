"""TEMPORARY stand-in: torch's default mapping until the backend's own lands."""

from __future__ import annotations

from torch import nn
from torch.ao.quantization import QConfigMapping, get_default_qat_qconfig_mapping, get_default_qconfig_mapping


def build_qconfig_mapping(*, is_qat: bool, model: nn.Module | None = None) -> QConfigMapping:
    backend = "onednn"
    return get_default_qat_qconfig_mapping(backend) if is_qat else get_default_qconfig_mapping(backend)
