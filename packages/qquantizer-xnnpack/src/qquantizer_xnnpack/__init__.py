"""PT2E XNNPACK quantizer for qcore. Use ``qcore.get_quantizer("xnnpack", ...)``."""

from qquantizer_xnnpack._version import __version__

__all__ = ["__version__"]
