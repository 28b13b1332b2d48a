"""PT2E XNNPACK quantizer for qcore. Use ``qcore.get_quantizer("xnnpack", ...)``.

``XNNPACKQuantizer`` and ``get_symmetric_quantization_config`` are importable from here;
they load torchao on first access, so importing the package does nothing.
"""

from __future__ import annotations

from typing import Any

from qquantizer_xnnpack._version import __version__

__all__ = ["XNNPACKQuantizer", "__version__", "get_symmetric_quantization_config"]


def __getattr__(name: str) -> Any:
    if name in {"XNNPACKQuantizer", "get_symmetric_quantization_config"}:
        from qquantizer_xnnpack import quantizer

        return getattr(quantizer, name)
    raise AttributeError(f"module 'qquantizer_xnnpack' has no attribute {name!r}")
