"""Calibration of one fixed dataset: one process vs two processes with one thread each.

FX ``onednn`` flow (histogram activation observers), two models: a ResNet-style CNN
(conv-BN-ReLU stem, residual blocks) and a transformer encoder (4 pre-norm layers). The
dataset is split in two shards; each rank calibrates its shard, then
``qcore.distributed.sync_observers``. Wall time is from a barrier to the end of the sync
(the slower rank), against the single process calibrating everything, median of
``--repeats`` runs, in one invocation.

    python benchmarks/distributed_calibration.py [--batches 32] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

import qcore.distributed
import qcore.fx
from qcore.zoo.architectures import EncoderBlock
from qcore.zoo.suite.world import RankError, run_world


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(width, width, 3, padding=1), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = nn.Conv2d(width, width, 3, padding=1), nn.BatchNorm2d(width)

    def forward(self, x: Tensor) -> Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + x)


class ResNetStyle(nn.Module):
    def __init__(self, width: int = 32, blocks: int = 4) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU())
        self.blocks = nn.Sequential(*(Block(width) for _ in range(blocks)))
        self.head = nn.Linear(width, 10)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.blocks(self.stem(x)).mean((2, 3)))


MODELS = {
    "resnet-style CNN": (ResNetStyle, (16, 3, 32, 32)),
    "transformer encoder": (lambda: nn.Sequential(*(EncoderBlock(128, 4, 64, 512)
                                                    for _ in range(4))), (16, 64, 128)),
}  # fmt: skip


def dataset(name: str, batches: int) -> list[Tensor]:
    generator = torch.Generator().manual_seed(0)
    return [torch.randn(MODELS[name][1], generator=generator) for _ in range(batches)]


def prepared(name: str) -> nn.Module:
    torch.manual_seed(0)
    model = MODELS[name][0]().eval()
    return qcore.fx.prepare(model, "onednn", dataset(name, 1)[0])


def one_process(name: str, batches: int) -> float:
    model, data = prepared(name), dataset(name, batches)
    start = time.perf_counter()
    qcore.distributed.calibrate(model, data, progress=False)
    return time.perf_counter() - start


def rank_time(rank: int, world: int, name: str, batches: int) -> tuple[float, float]:
    """This rank's calibration wall time, and the median time of one more sync (the cost
    of syncing after every QAT step)."""
    model, data = prepared(name), dataset(name, batches)
    shard = data[rank::world]
    dist.barrier()
    start = time.perf_counter()
    qcore.distributed.calibrate(model, shard, progress=False)
    took = time.perf_counter() - start
    syncs = []
    for _ in range(5):
        dist.barrier()
        start = time.perf_counter()
        qcore.distributed.sync_observers(model)
        syncs.append(time.perf_counter() - start)
    return took, statistics.median(syncs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print("| model | 1 process, 1 thread (s) | 1 process, 2 threads (s) "
          "| 2 processes, 1 thread each (s) | speedup vs 1 thread | one sync (ms) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in MODELS:
        single, threaded, pair, sync = [], [], [], []
        for _ in range(args.repeats):
            torch.set_num_threads(1)
            single.append(one_process(name, args.batches))
            torch.set_num_threads(2)
            threaded.append(one_process(name, args.batches))
            ranks = run_world(rank_time, name, args.batches, timeout=1200)
            assert not any(isinstance(r, RankError) for r in ranks), ranks
            pair.append(max(took for took, _ in ranks))
            sync.append(max(one_sync for _, one_sync in ranks))
        one, two, both, once = (statistics.median(t) for t in (single, threaded, pair, sync))
        print(f"| {name} | {one:.2f} | {two:.2f} | {both:.2f} | {one / both:.2f}x "
              f"| {once * 1000:.1f} |", flush=True)


if __name__ == "__main__":
    main()
