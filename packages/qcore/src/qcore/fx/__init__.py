"""The FX graph-mode flow: ``prepare`` / ``convert`` / ``quantize`` for a qcore backend,
its pattern builder (``patterns``), dtype configs (``dtypes``) and range rules (``ranges``).

Use these instead of torch's ``prepare_fx`` / ``convert_fx`` when you can: they accept
functional convolutions and linears called with keyword or default arguments, choose
per-layer weight ranges on CPUs without VNNI, and pick the backend's convert (native
kernels, or the reference representation for ExecuTorch). The entry points import torch
on first use, so importing the builder does not import the flow.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from qcore.fx.flow import WEIGHT_RANGES_META, convert, prepare, quantize, weight_ranges
    from qcore.fx.normalize import normalize_functional_calls

#: Each entry point by the module that defines it.
_ENTRY_POINTS = {
    "WEIGHT_RANGES_META": "qcore.fx.flow",
    "convert": "qcore.fx.flow",
    "prepare": "qcore.fx.flow",
    "quantize": "qcore.fx.flow",
    "weight_ranges": "qcore.fx.flow",
    "normalize_functional_calls": "qcore.fx.normalize",
}

__all__ = [
    "WEIGHT_RANGES_META",
    "convert",
    "normalize_functional_calls",
    "prepare",
    "quantize",
    "weight_ranges",
]


def __getattr__(name: str) -> Any:
    if name in _ENTRY_POINTS:
        return getattr(importlib.import_module(_ENTRY_POINTS[name]), name)
    raise AttributeError(f"module 'qcore.fx' has no attribute {name!r}")
