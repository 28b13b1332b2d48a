"""ExecuTorch FX-mode quantization backend for qcore.

Importing this package changes nothing; use ``qcore.get_backend_config("executorch")``.
"""

from qbackend_executorch._version import __version__

__all__ = ["__version__"]
