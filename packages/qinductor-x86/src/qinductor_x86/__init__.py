"""x86 TorchInductor int8 lowerings and the x86 PT2E quantizer for qcore.

Importing this package changes nothing: passes are installed only by
``qcore.get_lowering("x86").install()`` (or its context manager).
"""

from qinductor_x86._version import __version__

__all__ = ["__version__"]
