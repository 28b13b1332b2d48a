"""Plugins: the public lookups (``api``), entry-point discovery (``discovery``), the check
that names a missing extra (``extras``) and old module names kept for one release
(``renamed``). The descriptors plugins publish are in :mod:`qcore.plugin_api`."""

import importlib
import warnings
from typing import Any


def __getattr__(name: str) -> Any:
    # ``qcore.plugins`` was the discovery module until 0.2; its names still resolve.
    if name.startswith("__"):
        raise AttributeError(name)
    discovery = importlib.import_module("qcore.plugins.discovery")
    if not hasattr(discovery, name):
        raise AttributeError(f"module 'qcore.plugins' has no attribute {name!r}")
    warnings.warn(
        f"qcore.plugins.{name} moved to qcore.plugins.discovery.{name}; the old name goes in 0.3",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(discovery, name)
