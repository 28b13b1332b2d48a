"""FX graph-mode entry points: ``prepare`` / ``convert`` / ``quantize`` for a qcore backend.

Use these instead of torch's ``prepare_fx`` / ``convert_fx`` when you can: they accept
functional convolutions and linears called with keyword or default arguments, choose
per-layer weight ranges on CPUs without VNNI, and pick the backend's convert (native
kernels, or the reference representation for ExecuTorch). Importing this imports torch.
"""

from qcore.fx.flow import WEIGHT_RANGES_META, convert, prepare, quantize, weight_ranges
from qcore.fx.normalize import normalize_functional_calls

__all__ = [
    "WEIGHT_RANGES_META",
    "convert",
    "normalize_functional_calls",
    "prepare",
    "quantize",
    "weight_ranges",
]
