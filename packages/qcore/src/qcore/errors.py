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


class MissingExtraError(PluginError, ImportError):
    """What was asked for needs a module that one of qcore's extras installs, and it is
    not installed (torchao, the ``pt2e`` extra, on an FX-only install).

    An ImportError too, so that code probing for an optional feature with ``except
    ImportError`` sees it as one. ``entry`` is what was asked for, ``need`` the rest of the
    message (what it needs and the command that installs it), ``name`` the missing module
    and ``extra`` the extra that brings it; :mod:`qcore.plugins.extras` writes them.
    """

    def __init__(self, entry: str, need: str, name: str, extra: str) -> None:
        message = f"{entry} {need}"
        super().__init__(message)
        self.msg = message
        self.name = name
        self.entry, self.need, self.extra = entry, need, extra

    def __reduce__(self) -> tuple[type[MissingExtraError], tuple[str, str, str, str]]:
        # the default rebuilds from ``args`` (the message alone), which this __init__ refuses
        return type(self), (self.entry, self.need, self.name or "", self.extra)


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


class FxTraceError(RuntimeError):
    """An FX backend's ``prepare`` could not trace the model symbolically (control flow
    on tensors, or Python that needs real values, as Hugging Face models have). The
    message names the line where tracing stopped and the PT2E flow that takes the model
    instead; ``__cause__`` is what torch.fx raised."""


class UnsupportedTorchError(PluginError):
    """A plugin's adapter does not know the installed torch: a private API it needs is
    missing. The message names the plugin, the torch found, what is missing and the range
    the plugin supports, on one line."""
