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
