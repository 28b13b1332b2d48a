"""qcore: the core of the PyTorch quantization-backend plugin ecosystem.

``import qcore`` is cheap: it imports no plugin, no torchao and no ``torch._inductor``.
Plugins are discovered from entry-point metadata and imported on first use.
"""

import importlib
import warnings
from collections.abc import Callable, Iterable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

from qcore import host
from qcore._version import __version__
from qcore.errors import (
    ExportError,
    MissingExtraError,
    PluginConflictError,
    PluginError,
    PluginNotFoundError,
)
from qcore.plugin_api import PLUGIN_API_VERSION
from qcore.plugins.api import (
    explain_not_quantized,
    get_backend_config,
    get_lowering,
    get_qconfig_mapping,
    get_quantizer,
    list_plugins,
)
from qcore.plugins.renamed import keep_old_names

if TYPE_CHECKING:
    import os

    from torch import nn
    from torch.export import ExportedProgram
    from torch.fx import GraphModule
    from torchao.quantization.pt2e.quantizer import Quantizer

    from qcore.tuning import OpCost, TuneResult

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
    "sensitivity",
    "tune",
]

#: Submodules reachable as attributes without an explicit import (``qcore.fx.prepare``,
#: ``qcore.metrics.sqnr``), by the module each name stands for; each imports torch, so
#: none is imported until used. ``qcore.host`` is imported above: it is cheap.
_LAZY_SUBMODULES = {
    "distributed": "qcore.distributed",
    "fx": "qcore.fx",
    "metrics": "qcore.metrics",
    "testing": "qcore.testing",
    "tuning": "qcore.tuning",
    "int8": "qcore.int8",
}
#: Attributes that once stood for a module under another name, by the module they stand
#: for now; each still resolves, with a DeprecationWarning naming the new spelling.
_RETIRED_ALIASES = {
    "saturation": "qcore.int8.saturation",
    "weight_ranges": "qcore.int8.weight_ranges",
}

#: Modules moved in 0.2 (the layout by flow), by their new names: each old name still
#: imports, as the same module object, with a DeprecationWarning, until 0.3.
MOVED_IN_0_2 = {
    "qcore.annotation": "qcore.pt2e.annotation",
    "qcore.annotation.quantizer": "qcore.pt2e.annotation.registry_quantizer",
    "qcore.api": "qcore.plugins.api",
    "qcore.derived": "qcore.pt2e.derived",
    "qcore.derived.quantizer": "qcore.pt2e.derived.derived_quantizer",
    "qcore.dtypes": "qcore.fx.dtypes",
    "qcore.engine": "qcore.int8.engine",
    "qcore.exporting": "qcore.pt2e.export",
    "qcore.extras": "qcore.plugins.extras",
    "qcore.int8.fx_ranges": "qcore.fx.ranges",
    "qcore.int8.host": "qcore.int8.cpu_profile",
    "qcore.int8.pt2e_graph": "qcore.pt2e.range_graph",
    "qcore.int8.pt2e_plan": "qcore.pt2e.range_plan",
    "qcore.int8.pt2e_ranges": "qcore.pt2e.ranges",
    "qcore.patterns": "qcore.fx.patterns",
    "qcore.testing.architectures": "qcore.zoo.architectures",
    "qcore.testing.backend": "qcore.testing.backend_checks",
    "qcore.testing.derived": "qcore.zoo.suite.derived",
    "qcore.testing.fakes": "qcore.zoo.suite.fakes",
    "qcore.testing.flow": "qcore.zoo.suite.flow",
    "qcore.testing.models": "qcore.zoo.models",
    "qcore.testing.pretrained": "qcore.zoo.pretrained",
    "qcore.testing.pt2e": "qcore.zoo.suite.pt2e",
    "qcore.testing.quantizer": "qcore.testing.quantizer_checks",
    "qcore.testing.trained": "qcore.zoo.trained",
    "qcore.testing.transformers_zoo": "qcore.zoo.huggingface",
    "qcore.testing.world": "qcore.zoo.suite.world",
}
keep_old_names(MOVED_IN_0_2, until="qcore 0.3")


def export(
    model: "nn.Module",
    example_inputs: tuple[Any, ...],
    example_kwargs: Mapping[str, Any] | None = None,
    **options: Any,
) -> "GraphModule":
    """``torch.export.export(model, example_inputs).module()``, ready for ``prepare_pt2e``;
    a model that cannot be exported at these shapes raises :class:`ExportError` naming the
    module and line, and the fix (see :mod:`qcore.pt2e.export`; imports torch on first use)."""
    from qcore.pt2e.export import export as export_

    return export_(model, example_inputs, example_kwargs, **options)


def load_exported(path: "str | os.PathLike[str]", **options: Any) -> "ExportedProgram":
    """``torch.export.load`` for a saved PT2E-quantized program: registers the quantize /
    dequantize ops it calls first, which a fresh process lacks (see
    :func:`qcore.pt2e.export.load_exported`; needs the ``pt2e`` extra, imports torch)."""
    from qcore.pt2e.export import load_exported as load_exported_

    return load_exported_(path, **options)


def sensitivity(
    model: "nn.Module",
    example_inputs: Any,
    calibration: Iterable[Any],
    flow: "str | Quantizer",
    **quantizer_options: Any,
) -> "list[OpCost]":
    """Every op ``flow`` quantizes in ``model``, most harmful first: where it runs, its
    kind, the output SQNR against float with only it quantized (``alone_db``) and the gain
    when only it is left in float (``gain_db``). Prepared and calibrated once; one switch
    per op (see :mod:`qcore.tuning`).

    ``flow``: an FX backend's name (``"onednn"``), a PT2E quantizer's (``"xnnpack"``,
    ``"x86"``, ``"pt2e:onednn"`` for one derived from a backend) or a quantizer object;
    ``calibration``: batches of inputs; the SQNRs are measured on ``example_inputs``.
    """
    from qcore.tuning import sensitivity as sensitivity_

    return sensitivity_(model, example_inputs, calibration, flow, **quantizer_options)


def tune(
    model: "nn.Module",
    example_inputs: Any,
    calibration: Iterable[Any],
    flow: "str | Quantizer",
    *,
    metric: "Callable[[nn.Module], float] | None" = None,
    tolerance: float | None = None,
    target_sqnr_db: float | None = None,
    max_float_fraction: float = 0.1,
    quantizer_options: dict[str, Any] | None = None,
) -> "TuneResult":
    """Quantize ``model`` with ``flow``, leaving the most harmful ops in float, in
    :func:`sensitivity`'s order, until ``metric(model)`` (higher is better) is within
    ``tolerance`` of the float model's, or, without a metric, until the output SQNR
    reaches ``target_sqnr_db``; at most ``max_float_fraction`` of the ops. The result has
    the converted ``model``, ``float_ops``, ``quantizable_ops``, ``score`` and
    ``float_score``, the flow's ``configuration`` (a ``QConfigMapping`` or a configured
    quantizer) and ``report()``; a target it cannot meet sets ``met=False``, says why in
    ``message`` and warns (:class:`qcore.tuning.TuningWarning`).
    """
    from qcore.tuning import tune as tune_

    return tune_(
        model,
        example_inputs,
        calibration,
        flow,
        metric=metric,
        tolerance=tolerance,
        target_sqnr_db=target_sqnr_db,
        max_float_fraction=max_float_fraction,
        quantizer_options=quantizer_options,
    )


def __getattr__(name: str) -> ModuleType:
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(_LAZY_SUBMODULES[name])
    if f"qcore.{name}" in MOVED_IN_0_2:
        return importlib.import_module(f"qcore.{name}")  # the finder warns
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
