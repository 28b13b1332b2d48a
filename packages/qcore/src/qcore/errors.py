"""Errors raised by plugin discovery and the public API; each names its culprit."""

from __future__ import annotations


class PluginError(RuntimeError):
    """A plugin could not be used: failed import, wrong type, API mismatch, disabled."""


class PluginNotFoundError(PluginError, LookupError):
    """No plugin of that kind and name is installed; the message lists the known names."""


class PluginConflictError(PluginError):
    """Two distributions claim one plugin name; the message names both."""


class ForeignQcoreError(PluginError):
    """The importable ``qcore`` is the unrelated PyPI library of the same name."""


class DistributedSyncError(RuntimeError):
    """Ranks hold models whose observers differ; raised on every rank, naming the first."""


class ExportError(RuntimeError):
    """``qcore.export`` could not export a model at the given shapes. The message names
    the module and line that stopped the trace and the fix; ``torch_error`` is what
    ``torch.export`` raised, ``torch_output`` what it printed meanwhile, ``module_name``
    the module's name in the model (``""``: the model itself; None: not found)."""

    torch_error: BaseException | None = None
    torch_output: str = ""
    module_name: str | None = None
