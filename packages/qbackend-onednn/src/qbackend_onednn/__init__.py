"""oneDNN FX-mode quantization backend for qcore.

Importing this package changes nothing; use ``qcore.get_backend_config("onednn")``.
"""

from qbackend_onednn._version import __version__

__all__ = ["__version__"]
