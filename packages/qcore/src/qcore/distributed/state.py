"""One rank's converted model shared with the others, by state dict."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor, nn

from qcore.distributed.objects import broadcast_object
from qcore.errors import DistributedSyncError

__all__ = ["broadcast_state"]


def broadcast_state(module: nn.Module, src: int = 0, group: dist.ProcessGroup | None = None) -> None:
    """Load rank ``src``'s ``state_dict`` into ``module`` on every rank of ``group``.

    For the "convert on one rank" pattern: every rank builds the same converted model
    (after :func:`qcore.distributed.sync_observers`), and rank ``src``'s weights and
    qparams become everyone's. A PT2E graph keeps activation qparams in its code, not its
    state, so sync before converting either way. No-op without a process group.
    """
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size(group) == 1:
        return
    mine = module.state_dict()
    device = next((t.device for t in mine.values() if isinstance(t, Tensor)), torch.device("cpu"))
    state = broadcast_object(mine if dist.get_rank() == src else None, src, group, device)
    missing, extra = sorted(set(mine) - set(state)), sorted(set(state) - set(mine))
    if missing or extra:
        raise DistributedSyncError(
            f"qcore.distributed.broadcast_state: rank {src}'s model differs from this one: "
            f"missing here {extra[:5]}, absent on rank {src} {missing[:5]}"
        )
    module.load_state_dict(state)
