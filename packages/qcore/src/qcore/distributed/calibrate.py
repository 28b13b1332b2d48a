"""Calibration split over ranks: each rank runs its own batches, then one sync."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Sized
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from qcore.distributed.sync import SyncSummary, sync_observers

__all__ = ["calibrate"]


def _run(model: nn.Module, batch: Any) -> None:
    if isinstance(batch, dict):
        model(**batch)
    elif isinstance(batch, (tuple, list)):
        model(*batch)
    else:
        model(batch)


def _rank(group: dist.ProcessGroup | None) -> int:
    initialized = dist.is_available() and dist.is_initialized()
    return dist.get_rank(group) if initialized else 0


class _Progress:
    """A one-line progress bar on stderr (redrawn in place on a terminal)."""

    def __init__(self, total: int | None, shown: bool) -> None:
        self.total, self.shown, self.start = total, shown, time.monotonic()
        self.live = shown and sys.stderr.isatty()

    def update(self, done: int) -> None:
        if self.live:
            of = f"/{self.total}" if self.total is not None else ""
            sys.stderr.write(f"\rqcore calibrate: {done}{of} batches")
            sys.stderr.flush()

    def close(self, done: int, summary: SyncSummary) -> None:
        if self.shown:
            took = time.monotonic() - self.start
            sys.stderr.write(
                f"{chr(13) if self.live else ''}qcore calibrate: {done} batches on rank 0 in "
                f"{took:.1f} s, {summary.observers} observers synced over "
                f"{summary.world_size} ranks\n"
            )


def calibrate(
    prepared: nn.Module,
    batches: Iterable[Any],
    group: dist.ProcessGroup | None = None,
    *,
    progress: bool = True,
) -> SyncSummary:
    """Run this rank's calibration ``batches`` through ``prepared``, then
    :func:`qcore.distributed.sync_observers` over ``group``.

    Each batch is a tensor, a tuple of positional arguments or a dict of keyword
    arguments. Rank 0 shows its progress on stderr (``progress=False``: silent).
    """
    total = len(batches) if isinstance(batches, Sized) else None
    bar = _Progress(total, progress and _rank(group) == 0)
    done = 0
    with torch.no_grad():
        for batch in batches:
            _run(prepared, batch)
            done += 1
            bar.update(done)
    summary = sync_observers(prepared, group)
    bar.close(done, summary)
    return summary
