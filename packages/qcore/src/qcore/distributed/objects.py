"""Small Python objects over collectives, without numpy.

torch's ``all_gather_object`` and ``broadcast_object_list`` decode through numpy, which
torch does not depend on: on a machine without it they fail after the collective. These
pickle into a byte tensor and read it back with ``ctypes``. Two collectives each: the
sizes, then the padded bytes.
"""

from __future__ import annotations

import ctypes
import pickle
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

__all__ = ["all_gather_objects", "broadcast_object"]


def _encode(value: Any, device: torch.device) -> Tensor:
    raw = pickle.dumps(value)
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).to(device)


def _decode(data: Tensor, size: int) -> Any:
    host = data[:size].cpu().contiguous()
    return pickle.loads(ctypes.string_at(host.data_ptr(), size))  # only our own ranks send these bytes


def _padded(data: Tensor, length: int) -> Tensor:
    out = torch.zeros(length, dtype=torch.uint8, device=data.device)
    out[: data.numel()] = data
    return out


def all_gather_objects(
    value: Any, group: dist.ProcessGroup | None, world: int, device: torch.device
) -> list[Any]:
    """Every rank's ``value``, by rank."""
    data = _encode(value, device)
    size = torch.tensor([data.numel()], dtype=torch.int64, device=device)
    sizes = [torch.empty_like(size) for _ in range(world)]
    dist.all_gather(sizes, size, group=group)
    longest = int(max(int(s) for s in sizes))
    buffers = [torch.empty(longest, dtype=torch.uint8, device=device) for _ in range(world)]
    dist.all_gather(buffers, _padded(data, longest), group=group)
    return [_decode(b, int(s)) for b, s in zip(buffers, sizes, strict=True)]


def broadcast_object(
    value: Any, src: int, group: dist.ProcessGroup | None, device: torch.device
) -> Any:
    """Rank ``src``'s ``value`` on every rank (the others pass anything, e.g. None)."""
    data = _encode(value, device) if dist.get_rank() == src else None
    size = torch.tensor([data.numel() if data is not None else 0], dtype=torch.int64, device=device)
    dist.broadcast(size, src=src, group=group)
    buffer = data if data is not None else torch.empty(int(size), dtype=torch.uint8, device=device)
    dist.broadcast(buffer, src=src, group=group)
    return _decode(buffer, int(size))
