"""The default QConfigMapping: torch's own for QNNPACK, unchanged.

A mirror keeps torch's mapping so that quantizing through qcore gives the numbers torch's
native QNNPACK flow gives. It fits this config as it is (no fusion needs a shared
qconfig, and QNNPACK kernels do not saturate int8 products, so no weight range needs
fitting to the CPU); the patterns it leaves in float are listed in ``plugin.py``.
"""

from __future__ import annotations

from torch import nn
from torch.ao.quantization import (
    QConfigMapping,
    get_default_qat_qconfig_mapping,
    get_default_qconfig_mapping,
)


def build_qconfig_mapping(*, is_qat: bool, model: nn.Module | None = None) -> QConfigMapping:
    """``get_default_qconfig_mapping("qnnpack")``, or its QAT twin with ``is_qat``."""
    del model  # one qconfig per module type suits every fusion of this config
    if is_qat:
        return get_default_qat_qconfig_mapping("qnnpack")
    return get_default_qconfig_mapping("qnnpack")
