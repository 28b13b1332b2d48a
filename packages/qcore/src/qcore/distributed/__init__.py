"""Calibration and QAT over ``torch.distributed``: observers reduced over ranks.

torch's observers keep each rank's own statistics, and DDP's ``broadcast_buffers`` copies
rank 0's over the others at every forward. :func:`sync_observers` makes every rank hold
the statistics one process would have computed over all ranks' data, for every observer
and fake quantize of FX and PT2E models (both observer families, any backend), and for
qcore's own calibration state. It uses only collectives (gloo, NCCL alike), a fixed few
per call. Observer classes are described by :mod:`qcore.distributed.rules`; a third party
teaches it its own with :func:`register_sync_rule`.
"""

from qcore.distributed.calibrate import calibrate
from qcore.distributed.rules import SyncRule, register_sync_rule
from qcore.distributed.state import broadcast_state
from qcore.distributed.sync import SyncSummary, sync_observers
from qcore.errors import DistributedSyncError

__all__ = [
    "DistributedSyncError",
    "SyncRule",
    "SyncSummary",
    "broadcast_state",
    "calibrate",
    "register_sync_rule",
    "sync_observers",
]
