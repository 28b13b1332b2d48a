"""qcore's own calibration state: the inputs recorded for a layer's weight-range choice.

On a saturating target, qcore chooses each layer's weight range from inputs recorded
during calibration (:mod:`qcore.int8.calibration`). After a sync every rank holds what one
process would have kept over the ranks' data in rank order: rank 0's inputs, then rank
1's, up to the same cap. Every rank then makes the same choice.
"""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist
from torch import nn

from qcore.distributed.objects import all_gather_objects
from qcore.fx.flow import input_recorders as fx_recorders
from qcore.int8.calibration import InputRecorder

__all__ = ["gather_recorders", "recorders_in"]


def recorders_in(model: nn.Module) -> dict[str, InputRecorder]:
    """Every recorder qcore keeps for ``model``, by a name that is the same on every rank."""
    found = {f"fx:{name}": r for name, r in fx_recorders(model).items()}
    # PT2E recorders exist only once their module (which needs torchao) has been imported
    pt2e_ranges = sys.modules.get("qcore.pt2e.ranges")
    if pt2e_ranges is not None:
        found.update({f"pt2e:{n}": r for n, r in pt2e_ranges.input_recorders(model).items()})
    return found


def gather_recorders(
    recorders: dict[str, InputRecorder],
    group: dist.ProcessGroup | None,
    world: int,
    device: torch.device,
) -> int:
    """Replace each recorder's inputs by all ranks' in rank order; three collectives."""
    names = sorted(recorders)
    shapes = [[(tuple(t.shape), str(t.dtype)) for t in recorders[n].kept] for n in names]
    per_rank: list[list[list[tuple[tuple[int, ...], str]]]] = all_gather_objects(
        shapes, group, world, device
    )
    dtype = _common_dtype(per_rank)
    lengths = [sum(_numel(shape) for kept in rank for shape, _ in kept) for rank in per_rank]
    mine = [t.to(device=device, dtype=dtype).flatten() for n in names for t in recorders[n].kept]
    local = torch.zeros(max(lengths), dtype=dtype, device=device)
    if mine:
        flat = torch.cat(mine)
        local[: flat.numel()] = flat
    buffers = [torch.empty_like(local) for _ in range(world)]
    dist.all_gather(buffers, local, group=group)
    merged = {name: InputRecorder() for name in names}
    for rank_shapes, buffer in zip(per_rank, buffers, strict=True):
        offset = 0
        for name, kept in zip(names, rank_shapes, strict=True):
            for shape, kept_dtype in kept:
                size = _numel(shape)
                value = buffer[offset : offset + size].reshape(shape)
                merged[name].keep(value.to(getattr(torch, kept_dtype.removeprefix("torch."))))
                offset += size
    for name in names:
        recorders[name].kept, recorders[name].size = merged[name].kept, merged[name].size
    return 3


def _numel(shape: tuple[int, ...]) -> int:
    size = 1
    for dim in shape:
        size *= dim
    return size


def _common_dtype(per_rank: list[list[list[tuple[tuple[int, ...], str]]]]) -> torch.dtype:
    dtypes = {dtype for rank in per_rank for kept in rank for _, dtype in kept}
    common = torch.float32
    for name in dtypes:
        common = torch.promote_types(common, getattr(torch, name.removeprefix("torch.")))
    return common
