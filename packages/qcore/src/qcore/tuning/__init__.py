"""Accuracy-driven tuning: which ops int8 hurts, and the fewest to leave in float.

``qcore.sensitivity`` ranks every op a flow quantizes by what its quantization costs;
``qcore.tune`` leaves the most harmful in float until a metric is met, and returns the
flow's own configuration for the choice. Any flow works, first- or third-party: an FX
backend by name, a PT2E quantizer by name or object (see :mod:`qcore.tuning.flows`).
"""

from qcore.tuning.sensitivity import OpCost, sensitivity
from qcore.tuning.switches import QuantizedOp
from qcore.tuning.tune import DEFAULT_TARGET_SQNR_DB, TuneResult, TuningWarning, tune

__all__ = [
    "DEFAULT_TARGET_SQNR_DB",
    "OpCost",
    "QuantizedOp",
    "TuneResult",
    "TuningWarning",
    "sensitivity",
    "tune",
]
