"""What each rank of a 2-process gloo world runs for test_distributed.py (spawned processes
import this module, so it holds only importable functions and no test).

Every rank draws both ranks' data from fixed seeds, so each can also compute the single-
process reference over the union itself. Rank ``r``'s data has its own range (mean 3r,
spread 1 + r): a rank that kept only its own statistics would be visibly wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn
from torch.ao.quantization import fake_quantize as ao_fq
from torch.ao.quantization import observer as ao_obs
from torchao.quantization.pt2e import fake_quantize as pt2e_fq
from torchao.quantization.pt2e import observer as pt2e_obs

import qcore.distributed
from qcore.errors import DistributedSyncError
from qcore.metrics import sqnr

FAMILIES = {"torch.ao": (ao_obs, ao_fq), "torchao": (pt2e_obs, pt2e_fq)}
STEPS = 4


def shard(rank: int, step: int, shape: tuple[int, ...] = (8, 6, 5)) -> Tensor:
    generator = torch.Generator().manual_seed(100 * rank + step)
    return torch.randn(shape, generator=generator) * (1 + rank) + 3 * rank


def _observers(family: str) -> dict[str, Callable[[], nn.Module]]:
    obs, _ = FAMILIES[family]
    return {
        "MinMaxObserver": obs.MinMaxObserver,
        "PerChannelMinMaxObserver": lambda: obs.PerChannelMinMaxObserver(ch_axis=1),
        "HistogramObserver": obs.HistogramObserver,
    }


def _moving(family: str) -> dict[str, tuple[Callable[[], nn.Module], int]]:
    """name -> (factory, the batch axis: one step's batches of all ranks join along it)."""
    obs, fq = FAMILIES[family]
    return {
        "MovingAverageMinMaxObserver": (obs.MovingAverageMinMaxObserver, 0),
        "MovingAveragePerChannelMinMaxObserver": (
            lambda: obs.MovingAveragePerChannelMinMaxObserver(ch_axis=1),
            0,
        ),
        "FakeQuantize": (lambda: fq.FakeQuantize(observer=obs.MovingAverageMinMaxObserver), 0),
        "FusedMovingAvgObsFakeQuantize": (fq.FusedMovingAvgObsFakeQuantize, 0),
        # torch's fused kernel takes channels on axis 0 only
        "FusedMovingAvgObsFakeQuantize-per-channel": (_fused_per_channel(obs, fq), 1),
    }


def _fused_per_channel(obs: Any, fq: Any) -> Callable[[], nn.Module]:
    return lambda: fq.FusedMovingAvgObsFakeQuantize(
        observer=obs.MovingAveragePerChannelMinMaxObserver,
        ch_axis=0,
        dtype=torch.qint8,
        qscheme=torch.per_channel_symmetric,
        quant_min=-128,
        quant_max=127,
    )


def _state(module: nn.Module) -> dict[str, list[float]]:
    return {k: v.flatten().tolist() for k, v in module.state_dict().items()}


def _fake_quantized(observer: nn.Module, x: Tensor) -> Tensor:
    scale, zero_point = observer.calculate_qparams()  # type: ignore[operator]
    return torch.fake_quantize_per_tensor_affine(
        x,
        float(scale),
        int(zero_point),
        observer.quant_min,
        observer.quant_max,  # type: ignore[arg-type]
    )


def calibration(rank: int, world: int) -> dict[str, Any]:
    """Each observer kind calibrated on this rank's shard, synced; with the reference."""
    out: dict[str, Any] = {}
    for family in FAMILIES:
        for name, make in _observers(family).items():
            torch.manual_seed(0)
            synced, union = make(), make()
            for step in range(STEPS):
                synced(shard(rank, step))
                for r in range(world):  # one process, both ranks' data
                    union(shard(r, step))
            before = _state(synced)
            summary = qcore.distributed.sync_observers(synced)
            row: dict[str, Any] = {"state": _state(synced), "union": _state(union)}
            row["before"] = before
            row["collectives"] = summary.collectives
            if name == "HistogramObserver":
                data = torch.cat([shard(r, s) for r in range(world) for s in range(STEPS)])
                row["sqnr"] = sqnr(_fake_quantized(union, data), _fake_quantized(synced, data))
                low, high = float(synced.min_val), float(synced.max_val)
                row["direct"] = torch.histc(data, synced.bins, low, high).tolist()
            out[f"{family}:{name}"] = row
    return out


def moving_averages(rank: int, world: int) -> dict[str, Any]:
    """Moving averages and fake quants synced after every step, as under DDP; the reference
    sees each step's batches of all ranks as one batch."""
    out: dict[str, Any] = {}
    for family in FAMILIES:
        for name, (make, batch_axis) in _moving(family).items():
            synced, union = make(), make()
            steps = []
            for step in range(STEPS):
                synced(shard(rank, step))
                union(torch.cat([shard(r, step) for r in range(world)], dim=batch_axis))
                qcore.distributed.sync_observers(synced)
                steps.append({"state": _state(synced), "union": _state(union)})
            out[f"{family}:{name}"] = steps
    return out


def _model(width: int = 6, extra: bool = False) -> nn.Module:
    layers: dict[str, nn.Module] = {
        "a": pt2e_obs.HistogramObserver(),
        "b": pt2e_obs.PerChannelMinMaxObserver(ch_axis=1),
    }
    if extra:
        layers["c"] = pt2e_obs.MinMaxObserver()
    model = nn.Module()
    for key, layer in layers.items():
        model.add_module(key, layer)
    model.b(torch.randn(2, width))
    return model


def errors(rank: int, world: int) -> dict[str, str]:
    """Ranks with different models: each rank reports what sync_observers raised."""
    found = {}
    cases = {
        "extra_observer": _model(extra=rank == 1),
        "other_width": _model(width=6 if rank == 0 else 7),
    }
    unknown = _model()
    if rank == 1:
        unknown.add_module("z", Unregistered(torch.quint8))
    cases["unknown_on_one_rank"] = unknown
    for case, model in cases.items():
        try:
            qcore.distributed.sync_observers(model)
            found[case] = "no error"
        except (DistributedSyncError, TypeError) as error:
            found[case] = f"{type(error).__name__}: {error}"
    return found


class Unregistered(pt2e_obs.ObserverBase):  # type: ignore[misc]
    """An observer class no sync rule describes."""

    def forward(self, x: Tensor) -> Tensor:
        return x

    def calculate_qparams(self) -> None:
        return None


def idle_rank(rank: int, world: int) -> dict[str, Any]:
    """A rank that observed nothing: its per-channel buffers are empty, its ranges inf."""
    obs = pt2e_obs
    model = nn.Sequential(obs.PerChannelMinMaxObserver(ch_axis=1), obs.HistogramObserver())
    if rank == 0:
        for step in range(STEPS):
            model(shard(0, step))
    reference = nn.Sequential(obs.PerChannelMinMaxObserver(ch_axis=1), obs.HistogramObserver())
    for step in range(STEPS):
        reference(shard(0, step))
    qcore.distributed.sync_observers(model)
    return {"state": _state(model), "reference": _state(reference)}


def many_observers(rank: int, world: int) -> dict[str, int]:
    """Collectives per call do not grow with the number of observers."""
    counts = {}
    for size in (3, 60):
        model = nn.Sequential(*(pt2e_obs.HistogramObserver() for _ in range(size)))
        model(shard(rank, 0))
        counts[str(size)] = qcore.distributed.sync_observers(model).collectives
    return counts


class CountingObserver(nn.Module):
    """A third party's observer: how many values it saw, and their largest magnitude."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros(()))
        self.register_buffer("peak", torch.zeros(()))

    def forward(self, x: Tensor) -> Tensor:
        self.count += x.numel()
        self.peak.copy_(torch.maximum(self.peak, x.abs().max()))
        return x


def custom_rule(rank: int, world: int) -> dict[str, Any]:
    """A class registered with its own rule, and one left unregistered."""
    qcore.distributed.register_sync_rule(
        CountingObserver, qcore.distributed.SyncRule(reduce={"count": "sum", "peak": "max"})
    )
    model = nn.Sequential(CountingObserver())
    model(shard(rank, 0, (rank + 1, 4)))
    qcore.distributed.sync_observers(model)
    return {k: float(v) for k, v in model.state_dict().items()}


def everything(rank: int, world: int) -> dict[str, Any]:
    return {
        "calibration": calibration(rank, world),
        "moving": moving_averages(rank, world),
        "errors": errors(rank, world),
        "idle": idle_rank(rank, world),
        "many": many_observers(rank, world),
        "custom": custom_rule(rank, world),
        "progress": progress(rank, world),
    }


def progress(rank: int, world: int) -> str:
    """What calibrate writes to stderr on this rank (dict batches: keyword arguments)."""
    import contextlib
    import io

    class Keywords(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.observer = pt2e_obs.MinMaxObserver()

        def forward(self, x: Tensor, *, shift: float = 0.0) -> Tensor:
            return self.observer(x + shift)

    model = Keywords()
    written = io.StringIO()
    with contextlib.redirect_stderr(written):
        qcore.distributed.calibrate(model, [{"x": shard(rank, 0), "shift": 1.0}] * 2)
    return f"{written.getvalue()}|max={float(model.observer.max_val)}"
