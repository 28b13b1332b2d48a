"""qcore: the core of the PyTorch quantization-backend plugin ecosystem.

``import qcore`` is cheap: it imports no plugin, no torchao and no ``torch._inductor``.
Plugins are discovered from entry-point metadata and imported on first use.
"""

import importlib
import warnings
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

from qcore import host
from qcore._version import __version__
from qcore.api import (
    explain_not_quantized,
    get_backend_config,
    get_lowering,
    get_qconfig_mapping,
    get_quantizer,
    list_plugins,
)
from qcore.errors import (
    ExportError,
    MissingExtraError,
    PluginConflictError,
    PluginError,
    PluginNotFoundError,
)
from qcore.plugin_api import PLUGIN_API_VERSION

if TYPE_CHECKING:
    import os

    from torch import nn
    from torch.export import ExportedProgram
    from torch.fx import GraphModule

__all__ = [
    "PLUGIN_API_VERSION",
    "ExportError",
    "MissingExtraError",
    "PluginConflictError",
    "PluginError",
    "PluginNotFoundError",
    "__version__",
    "explain_not_quantized",
    "export",
    "get_backend_config",
    "get_lowering",
    "get_qconfig_mapping",
    "get_quantizer",
    "host",
    "list_plugins",
    "load_exported",
]

#: Submodules reachable as attributes without an explicit import (``qcore.fx.prepare``,
#: ``qcore.metrics.sqnr``), by the module each name stands for; each imports torch, so
#: none is imported until used. ``qcore.host`` is imported above: it is cheap.
_LAZY_SUBMODULES = {
    "distributed": "qcore.distributed",
    "fx": "qcore.fx",
    "metrics": "qcore.metrics",
    "testing": "qcore.testing",
    "int8": "qcore.int8",
}
#: Attributes that once stood for a module under another name, by the module they stand
#: for now; each still resolves, with a DeprecationWarning naming the new spelling.
_RETIRED_ALIASES = {
    "saturation": "qcore.int8.saturation",
    "weight_ranges": "qcore.int8.weight_ranges",
}


def export(
    model: "nn.Module",
    example_inputs: tuple[Any, ...],
    example_kwargs: Mapping[str, Any] | None = None,
    **options: Any,
) -> "GraphModule":
    """``torch.export.export(model, example_inputs).module()``, ready for ``prepare_pt2e``;
    a model that cannot be exported at these shapes raises :class:`ExportError` naming the
    module and line, and the fix (see :mod:`qcore.exporting`; imports torch on first use)."""
    from qcore.exporting import export as export_

    return export_(model, example_inputs, example_kwargs, **options)


def load_exported(path: "str | os.PathLike[str]", **options: Any) -> "ExportedProgram":
    """``torch.export.load`` for a saved PT2E-quantized program: registers the quantize /
    dequantize ops it calls first, which a fresh process lacks (see
    :func:`qcore.exporting.load_exported`; needs the ``pt2e`` extra, imports torch)."""
    from qcore.exporting import load_exported as load_exported_

    return load_exported_(path, **options)


def __getattr__(name: str) -> ModuleType:
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(_LAZY_SUBMODULES[name])
    if name in _RETIRED_ALIASES:
        warnings.warn(
            f"qcore.{name} is retired; import {_RETIRED_ALIASES[name]} instead",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(_RETIRED_ALIASES[name])
    raise AttributeError(f"module 'qcore' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY_SUBMODULES})
