"""Every observer's statistics reduced over a process group, in a fixed few collectives.

The plan, whatever the number of observers:

1. an 8-byte digest of the model's observer layout (names, classes, buffers, shapes),
   all-gathered: cheap, and it stops before any large collective when ranks differ (the
   layouts are then gathered to name the first observer that differs, on every rank);
2. one all-reduce (max) of every ``min``/``max`` statistic and every histogram's range
   (mins travel negated, so one reduction serves both);
3. one all-reduce (sum) of every ``sum`` statistic and every histogram, each moved onto
   the common range first;
4. only when qcore recorded calibration inputs for a weight-range choice: their shapes,
   then their values, gathered in rank order.

A rank that observed nothing (``inf`` ranges, empty per-channel buffers) contributes the
reduction's identity. Fake quants' qparams are recomputed from the synced statistics.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.fx import GraphModule, Node

from qcore.distributed.histogram import rebin
from qcore.distributed.objects import all_gather_objects
from qcore.distributed.recorders import gather_recorders, recorders_in
from qcore.distributed.rules import SyncRule, rule_for, syncable
from qcore.errors import DistributedSyncError

__all__ = ["SyncSummary", "sync_observers"]

ProcessGroup = dist.ProcessGroup


@dataclass(frozen=True)
class SyncSummary:
    """What one :func:`sync_observers` call did on this rank."""

    world_size: int
    observers: int
    recorders: int
    collectives: int


@dataclass
class _Slot:
    """One statistic buffer and how it reduces (``hist`` for a histogram)."""

    owner: str
    module: nn.Module
    buffer: str
    reduction: str
    #: min_val/max_val of a histogram observer: stored only after its histogram moved
    of_histogram: bool = False

    @property
    def value(self) -> Tensor:
        held: Tensor = getattr(self.module, self.buffer)
        return held


@dataclass
class _Layout:
    entries: list[tuple[str, nn.Module, SyncRule]] = field(default_factory=list)
    slots: list[_Slot] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    recorder_lines: list[str] = field(default_factory=list)
    shapes: list[tuple[int, ...]] = field(default_factory=list)


def _observed_values(model: nn.Module) -> dict[str, str]:
    """Observer path -> the graph value it observes, for errors a user can place."""
    found = {}
    for prefix, module in model.named_modules():
        if isinstance(module, GraphModule):
            for node in module.graph.nodes:
                if node.op == "call_module" and node.args and isinstance(node.args[0], Node):
                    path = f"{prefix}.{node.target}" if prefix else str(node.target)
                    found[path] = f", observing {node.args[0].name!r}"
    return found


def _layout(model: nn.Module, recorder_names: list[str]) -> _Layout:
    layout = _Layout()
    observed = _observed_values(model)
    for name, module in model.named_modules():
        if not syncable(module):
            continue
        rule = rule_for(name, module)
        layout.entries.append((name, module, rule))
        reductions: dict[str, str] = dict(rule.reduce)
        if rule.histogram:
            reductions.update(min_val="min", max_val="max", histogram="hist")
        cls = type(module)
        where = observed.get(name, "")
        layout.lines.append(f"observer {name!r} ({cls.__module__}.{cls.__qualname__}{where})")
        for buffer in sorted(reductions):
            slot = _Slot(name, module, buffer, reductions[buffer], rule.histogram)
            layout.slots.append(slot)
            layout.shapes.append(tuple(slot.value.shape))
            layout.lines.append(f"  {buffer}: {slot.value.dtype}, reduced by {slot.reduction}")
    layout.recorder_lines = [f"recorded inputs of {name!r}" for name in recorder_names]
    return layout


def _digest(layout: _Layout) -> Tensor:
    text = "\n".join(layout.lines + layout.recorder_lines) + "\n" + repr(layout.shapes)
    raw = hashlib.sha256(text.encode()).digest()
    return torch.tensor(
        [int.from_bytes(raw[:8], "little", signed=True), len(layout.lines)], dtype=torch.int64
    )


def _agreed_shapes(layout: _Layout, gathered: list[list[tuple[int, ...]]]) -> list[tuple[int, ...]]:
    """Per slot, the one non-empty shape the ranks agree on ((0,) where none observed)."""
    agreed = []
    for index, slot in enumerate(layout.slots):
        shapes = {shapes[index] for shapes in gathered if 0 not in shapes[index]}
        if len(shapes) > 1:
            ranks = ", ".join(f"rank {r}: {list(s[index])}" for r, s in enumerate(gathered))
            raise DistributedSyncError(
                f"qcore.distributed.sync_observers: observer {slot.owner!r} holds "
                f"{slot.buffer} of different shapes on different ranks ({ranks}); every rank "
                "must prepare the same model"
            )
        agreed.append(shapes.pop() if shapes else slot.value.shape)
    return [tuple(shape) for shape in agreed]


def _first_difference(all_lines: list[list[str]]) -> str:
    longest = max(len(lines) for lines in all_lines)
    for index in range(longest):
        seen = [lines[index] if index < len(lines) else "nothing" for lines in all_lines]
        if len(set(seen)) > 1:
            return "; ".join(f"rank {rank} has {line}" for rank, line in enumerate(seen))
    return "the same layout, yet different digests"


def _check_layouts(
    layout: _Layout, group: ProcessGroup | None, world: int, problem: TypeError | None
) -> tuple[list[tuple[int, ...]], int]:
    """The agreed shape of every slot, and the collectives it took; raises on every rank
    when the ranks' layouts differ, or when one rank could not describe its model (its
    ``problem``: the others would otherwise wait for it until the group times out)."""
    digest = _digest(layout) if problem is None else torch.tensor([0, -1])
    digest = digest.to(_device(layout))
    digests = [torch.empty_like(digest) for _ in range(world)]
    dist.all_gather(digests, digest, group=group)
    trouble = any(int(d[1]) == -1 for d in digests)
    if not trouble and all(torch.equal(d, digests[0]) for d in digests):
        return layout.shapes, 1
    # rare: some rank observed nothing yet (empty per-channel buffers) or the models differ
    said = None if problem is None else str(problem)
    mine = (layout.lines, layout.recorder_lines, layout.shapes, said)
    gathered = all_gather_objects(mine, group, world, _device(layout))
    if problem is not None:
        raise problem
    for rank, item in enumerate(gathered):
        if item[3] is not None:
            raise DistributedSyncError(f"qcore.distributed.sync_observers: rank {rank}: {item[3]}")
    for part in (0, 1):  # observers first: the recorders follow from them
        all_lines = [list(item[part]) for item in gathered]
        if any(lines != all_lines[0] for lines in all_lines):
            raise DistributedSyncError(
                "qcore.distributed.sync_observers: the ranks' models differ, so their "
                f"observers cannot be reduced: {_first_difference(all_lines)}. Every rank "
                "must prepare the same model with the same quantizer or mapping"
            )
    return _agreed_shapes(layout, [list(item[2]) for item in gathered]), 3


def _device(layout: _Layout) -> torch.device:
    return layout.slots[0].value.device if layout.slots else torch.device("cpu")


def _filled(slot: _Slot, shape: tuple[int, ...], identity: float) -> Tensor:
    value = slot.value.detach().to(torch.float64)
    if value.numel() == 0 and 0 not in shape:
        return torch.full(shape, identity, dtype=torch.float64, device=value.device)
    return value


def _store(slot: _Slot, value: Tensor) -> None:
    held = slot.value
    if held.shape != value.shape:
        setattr(slot.module, slot.buffer, value.to(held.dtype).clone())
    else:
        held.copy_(value.to(held.dtype))


def _sizes(parts: list[Tensor]) -> list[int]:
    return [part.numel() for part in parts]


def _reduce(layout: _Layout, shapes: list[tuple[int, ...]], group: ProcessGroup | None) -> int:
    """Steps 2 and 3 of the plan; the number of collectives they took."""
    slots = list(zip(layout.slots, shapes, strict=True))
    extremes = [(s, shape) for s, shape in slots if s.reduction in ("min", "max")]
    sums = [(s, shape) for s, shape in slots if s.reduction in ("sum", "hist")]
    ranges = _reduce_extremes(extremes, group) if extremes else {}
    if sums:
        _reduce_sums(sums, ranges, group)
    return bool(extremes) + bool(sums)


def _reduce_extremes(
    extremes: list[tuple[_Slot, tuple[int, ...]]], group: ProcessGroup | None
) -> dict[tuple[str, str], Tensor]:
    """All-reduce every min and max; a histogram's range is returned, not stored, since
    its histogram must first move onto it."""
    parts = []
    for slot, shape in extremes:
        value = _filled(slot, shape, float("inf") if slot.reduction == "min" else float("-inf"))
        parts.append(-value.flatten() if slot.reduction == "min" else value.flatten())
    flat = torch.cat(parts)
    dist.all_reduce(flat, op=dist.ReduceOp.MAX, group=group)
    ranges: dict[tuple[str, str], Tensor] = {}
    for (slot, shape), part in zip(extremes, torch.split(flat, _sizes(parts)), strict=True):
        reduced = (-part if slot.reduction == "min" else part).reshape(shape)
        if slot.of_histogram:
            ranges[(slot.owner, slot.buffer)] = reduced
        else:
            _store(slot, reduced)
    return ranges


def _reduce_sums(
    sums: list[tuple[_Slot, tuple[int, ...]]],
    ranges: Mapping[tuple[str, str], Tensor],
    group: ProcessGroup | None,
) -> None:
    parts = []
    for slot, shape in sums:
        if slot.reduction == "sum":
            parts.append(_filled(slot, shape, 0.0).flatten())
            continue
        low = float(_Slot(slot.owner, slot.module, "min_val", "min").value)
        high = float(_Slot(slot.owner, slot.module, "max_val", "max").value)
        new_low = float(ranges[(slot.owner, "min_val")])
        new_high = float(ranges[(slot.owner, "max_val")])
        parts.append(rebin(slot.value, low, high, new_low, new_high))
    flat = torch.cat(parts)
    dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=group)
    for (slot, shape), reduced in zip(sums, torch.split(flat, _sizes(parts)), strict=True):
        if slot.reduction == "hist":
            common_low = ranges[(slot.owner, "min_val")]
            common_high = ranges[(slot.owner, "max_val")]
            if float(common_low) > float(common_high):
                continue  # no rank observed anything: the observer stays empty
            _store(_Slot(slot.owner, slot.module, "min_val", "min"), common_low)
            _store(_Slot(slot.owner, slot.module, "max_val", "max"), common_high)
        _store(slot, reduced.reshape(shape))


def sync_observers(prepared: nn.Module, group: ProcessGroup | None = None) -> SyncSummary:
    """Reduce every observer's and fake quantize's statistics in ``prepared`` over ``group``.

    ``prepared``: any prepared model (``qcore.fx.prepare``, ``prepare_fx``/``prepare_qat_fx``,
    ``prepare_pt2e``/``prepare_qat_pt2e``), or a module holding one (DDP). Afterwards every
    rank holds the statistics one process would have computed over all ranks' data: exact
    for min/max (per-tensor, per-channel; moving averages when synced after every step),
    within a bin for histograms. Every rank must call it. Without an initialized process
    group it is a no-op (a world of one). Raises :class:`qcore.errors.DistributedSyncError`
    on every rank when the ranks' models differ.
    """
    recorders = recorders_in(prepared)
    alone = not (dist.is_available() and dist.is_initialized()) or dist.get_world_size(group) == 1
    try:
        layout, problem = _layout(prepared, sorted(recorders)), None
    except TypeError as error:  # an observer without a rule: tell the other ranks first
        if alone:
            raise
        layout, problem = _Layout(), error
    if alone:
        return SyncSummary(1, len(layout.entries), len(recorders), 0)
    world = dist.get_world_size(group)
    shapes, collectives = _check_layouts(layout, group, world, problem)
    with torch.no_grad():
        collectives += _reduce(layout, shapes, group)
        if recorders:
            collectives += gather_recorders(recorders, group, world, _device(layout))
        for _, module, rule in layout.entries:
            if rule.refresh is not None:
                rule.refresh(module)
    return SyncSummary(world, len(layout.entries), len(recorders), collectives)
