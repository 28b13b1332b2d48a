"""Entry-point descriptors. Cheap to import: the factories import torch on first use."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from qcore.plugin_api import BackendExtension, BackendPlugin, QuantizerExtension

if TYPE_CHECKING:
    from torch import nn
    from torch.ao.quantization import QConfigMapping
    from torch.ao.quantization.backend_config import BackendConfig, BackendPatternConfig

    from qcore.annotation.registry import Annotator


def _backend_config() -> BackendConfig:
    from qbackend_example.backend import build_backend_config

    return build_backend_config()


def _qconfig_mapping(is_qat: bool, model: nn.Module | None) -> QConfigMapping:
    from qbackend_example.backend import build_qconfig_mapping

    return build_qconfig_mapping(is_qat, model)


def _onednn_patterns() -> Sequence[BackendPatternConfig]:
    from qbackend_example.backend import silu_patterns

    return silu_patterns()


def _xnnpack_annotators() -> Sequence[Annotator]:
    from qbackend_example.annotators import ANNOTATORS

    return ANNOTATORS


BACKEND = BackendPlugin(
    name="example",
    backend_config=_backend_config,
    qconfig_mapping=_qconfig_mapping,
    description="fictional int8 NPU: conv2d/linear(+relu), add, LUT SiLU",
)
ONEDNN_EXTENSION = BackendExtension(
    name="example",
    target="onednn",
    patterns=_onednn_patterns,
    description="quantized SiLU for oneDNN",
)
XNNPACK_EXTENSION = QuantizerExtension(
    name="example",
    target="xnnpack",
    annotators=_xnnpack_annotators,
    description="quantized SiLU for the XNNPACK quantizer",
)
