"""torch's QNNPACK FX backend, mirrored as a qcore plugin. Importing it changes nothing;
use ``qcore.get_backend_config("qnnpack")``."""

from qbackend_qnnpack._version import __version__

__all__ = ["__version__"]
