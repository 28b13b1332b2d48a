"""A small ``torch.distributed`` world on this machine, for tests: one process per rank.

``run_world(fn, *args)`` starts ``world`` spawned processes, joins them into one gloo
group and calls ``fn(rank, world, *args)`` in each; it returns each rank's return value
(picklable) or the error it raised, as text. A rank that hangs or dies never hangs the
caller: past ``timeout`` every rank is killed and :class:`WorldTimeout` names the ranks
still running; a rank killed by a signal is reported with it. ``fn`` must be importable
(a module-level function), as ``torch.multiprocessing`` spawn requires.
"""

from __future__ import annotations

import os
import queue
import socket
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

__all__ = ["RankError", "WorldTimeout", "run_world"]


@dataclass(frozen=True)
class RankError:
    """What a rank raised (its type and message), or how its process ended."""

    rank: int
    error: str


class WorldTimeout(AssertionError):
    """Some rank did not finish in time (a hang); they were all killed."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass(frozen=True)
class _Job:
    world: int
    port: int
    timeout: float
    fn: Callable[..., Any]
    args: tuple[Any, ...]


def _rank_main(rank: int, job: _Job, results: Any) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(job.port))
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", rank=rank, world_size=job.world, timeout=timedelta(seconds=job.timeout)
    )
    try:
        results.put((rank, True, job.fn(rank, job.world, *job.args)))
    except Exception as error:  # noqa: BLE001  # the parent decides what a rank's error means
        where = traceback.extract_tb(error.__traceback__)[-1]
        at = f" (at {Path(where.filename).name}:{where.lineno})"
        results.put((rank, False, f"{type(error).__name__}: {error}{at}"))
    finally:
        dist.destroy_process_group()


def run_world(
    fn: Callable[..., Any], *args: Any, world: int = 2, timeout: float = 120.0
) -> list[Any]:
    """Each rank's ``fn(rank, world, *args)`` result, or a :class:`RankError`, by rank.

    ``timeout`` bounds the whole run and each collective (gloo's own timeout)."""
    context = mp.get_context("spawn")
    results = context.Queue()
    job = _Job(world, _free_port(), timeout, fn, args)
    processes = [
        context.Process(target=_rank_main, args=(rank, job, results)) for rank in range(world)
    ]
    for process in processes:
        process.start()
    found: dict[int, Any] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(found) < world:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorldTimeout(
                    f"ranks {sorted(set(range(world)) - set(found))} did not finish within "
                    f"{timeout:.0f} s"
                )
            try:
                rank, ok, value = results.get(timeout=min(left, 1.0))
            except queue.Empty:
                for rank, process in enumerate(processes):
                    if rank not in found and process.exitcode not in (None, 0):
                        found[rank] = RankError(rank, f"process died (exit {process.exitcode})")
                continue
            found[rank] = value if ok else RankError(rank, value)
    finally:
        for process in processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
                process.join()
    return [found[rank] for rank in range(world)]
