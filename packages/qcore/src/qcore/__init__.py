"""qcore: the core of the PyTorch quantization-backend plugin ecosystem.

``import qcore`` is cheap: it imports no plugin, no torchao and no ``torch._inductor``.
Plugins are discovered from entry-point metadata and imported on first use.
"""

from qcore._version import __version__
from qcore.api import (
    explain_not_quantized,
    get_backend_config,
    get_lowering,
    get_qconfig_mapping,
    get_quantizer,
    list_plugins,
)
from qcore.errors import PluginConflictError, PluginError, PluginNotFoundError
from qcore.plugin_api import PLUGIN_API_VERSION

__all__ = [
    "PLUGIN_API_VERSION",
    "PluginConflictError",
    "PluginError",
    "PluginNotFoundError",
    "__version__",
    "explain_not_quantized",
    "get_backend_config",
    "get_lowering",
    "get_qconfig_mapping",
    "get_quantizer",
    "list_plugins",
]
