"""qcore.distributed on every observer kind of both families, in a real 2-process gloo
world; each rank computes the single-process reference over both ranks' data itself
(see sync_scenarios.py)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from sync_scenarios import FAMILIES, shard
from torch import nn
from torchao.quantization.pt2e import observer as pt2e_obs

import qcore.distributed
from qcore.distributed.histogram import rebin
from qcore.zoo.suite.world import RankError, run_world


@pytest.fixture(scope="module")
def ranks() -> list[dict[str, Any]]:
    import sync_scenarios

    results = run_world(sync_scenarios.everything, timeout=180)
    errors = [r for r in results if isinstance(r, RankError)]
    assert not errors, errors
    return results


def _both(ranks: list[dict[str, Any]], *keys: str) -> list[Any]:
    found = []
    for rank in ranks:
        value = rank
        for key in keys:
            value = value[key]
        found.append(value)
    return found


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("name", ["MinMaxObserver", "PerChannelMinMaxObserver"])
def test_min_max_equals_one_process_over_the_union_exactly(
    ranks: list[dict[str, Any]], family: str, name: str
) -> None:
    zero, one = _both(ranks, "calibration", f"{family}:{name}")
    assert zero["before"] != one["before"]  # each rank alone holds its own shard's range
    assert zero["state"] == one["state"] == zero["union"]
    assert zero["collectives"] <= 2


@pytest.mark.parametrize("family", FAMILIES)
def test_histograms_merge_within_their_resolution(
    ranks: list[dict[str, Any]], family: str
) -> None:
    zero, one = _both(ranks, "calibration", f"{family}:HistogramObserver")
    assert zero["before"] != one["before"]
    assert zero["state"] == one["state"]
    # qparams from the merged histogram quantize all the data as one process's do
    assert zero["sqnr"] >= 35
    merged = torch.tensor(zero["state"]["histogram"], dtype=torch.float64)
    direct = torch.tensor(zero["direct"], dtype=torch.float64)  # all the data, binned once
    assert float(merged.sum()) == pytest.approx(float(direct.sum()))
    # where the data lies: the cumulative counts agree within 1 % of all values
    assert float((merged.cumsum(0) - direct.cumsum(0)).abs().max()) <= 0.01 * float(direct.sum())


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(
    "name",
    [
        "MovingAverageMinMaxObserver",
        "MovingAveragePerChannelMinMaxObserver",
        "FakeQuantize",
        "FusedMovingAvgObsFakeQuantize",
        "FusedMovingAvgObsFakeQuantize-per-channel",
    ],
)
def test_moving_averages_synced_each_step_equal_one_process_on_the_global_batch(
    ranks: list[dict[str, Any]], family: str, name: str
) -> None:
    zero, one = _both(ranks, "moving", f"{family}:{name}")
    for step, (mine, other) in enumerate(zip(zero, one, strict=True)):
        assert mine["state"] == other["state"], f"ranks differ after step {step}"
        for key, value in mine["union"].items():
            if "Fused" in name and key == "scale":
                # observer's formula vs the fused kernel's: the same synced statistics
                assert mine["state"][key] == pytest.approx(value, rel=1e-2), step
            else:
                assert mine["state"][key] == value, (step, key)


def test_models_that_differ_name_the_observer_on_every_rank(
    ranks: list[dict[str, Any]],
) -> None:
    zero, one = _both(ranks, "errors")
    # the rank that cannot describe its model says why; the other names that rank
    assert one["unknown_on_one_rank"].startswith("TypeError: qcore.distributed: no sync rule")
    assert zero["unknown_on_one_rank"].startswith(
        "DistributedSyncError: qcore.distributed.sync_observers: rank 1: qcore.distributed: "
        "no sync rule for observer 'z'"
    )
    for found in (zero, one):
        assert "rank 1 has observer 'c'" in found["extra_observer"]
        assert "observer 'b'" in found["other_width"]
        assert "rank 0: [6], rank 1: [7]" in found["other_width"]


def test_a_rank_that_observed_nothing_adds_nothing(ranks: list[dict[str, Any]]) -> None:
    for idle in _both(ranks, "idle"):
        assert idle["state"] == idle["reference"]


def test_collectives_per_call_do_not_grow_with_observers(ranks: list[dict[str, Any]]) -> None:
    for counts in _both(ranks, "many"):
        assert counts["3"] == counts["60"] <= 3


def test_a_registered_rule_reduces_a_third_party_observer(ranks: list[dict[str, Any]]) -> None:
    largest = max(float(shard(r, 0, (r + 1, 4)).abs().max()) for r in range(2))
    for state in _both(ranks, "custom"):
        assert state == {"0.count": 4.0 + 8.0, "0.peak": largest}


def test_calibrate_reports_progress_on_rank_0_only(ranks: list[dict[str, Any]]) -> None:
    zero, one = _both(ranks, "progress")
    largest = max(float(shard(r, 0).max()) + 1.0 for r in range(2))  # keyword batches
    assert zero.startswith("qcore calibrate: 2 batches on rank 0")
    assert "1 observers synced over 2 ranks" in zero
    assert one.startswith("|")  # rank 1 writes nothing
    assert zero.endswith(f"max={largest}") and one.endswith(f"max={largest}")


def test_without_a_process_group_it_is_a_no_op() -> None:
    observer = pt2e_obs.MinMaxObserver()
    observer(torch.arange(5.0))
    summary = qcore.distributed.sync_observers(nn.Sequential(observer))
    assert (summary.world_size, summary.observers, summary.collectives) == (1, 1, 0)
    assert (float(observer.min_val), float(observer.max_val)) == (0.0, 4.0)


def test_an_observer_without_a_rule_is_named() -> None:
    class Unknown(pt2e_obs.ObserverBase):  # type: ignore[misc]
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x

        def calculate_qparams(self) -> None:
            return None

    class WithExtraState(pt2e_obs.MinMaxObserver):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("seen", torch.zeros(()))

    with pytest.raises(TypeError, match=r"no sync rule for observer '0' \(.*Unknown\)"):
        qcore.distributed.sync_observers(nn.Sequential(Unknown(torch.quint8)))
    with pytest.raises(TypeError, match=r"'1' .*WithExtraState.* holds state \['seen'\]"):
        qcore.distributed.sync_observers(nn.Sequential(nn.ReLU(), WithExtraState()))


def test_rebinning_keeps_every_count_and_the_shape_of_the_data() -> None:
    data = torch.randn(20000, generator=torch.Generator().manual_seed(0))
    low, high = float(data.min()), float(data.max())
    counts = torch.histc(data, bins=256, min=low, max=high)
    moved = rebin(counts, low, high, low - 1.5, high + 3.0)
    direct = torch.histc(data, bins=256, min=low - 1.5, max=high + 3.0).double()
    assert float(moved.sum()) == pytest.approx(float(counts.sum()))
    # where the data falls differs by less than one source bin's count
    assert float((moved.cumsum(0) - direct.cumsum(0)).abs().max()) <= float(counts.max())
    assert rebin(torch.zeros(8), float("inf"), float("-inf"), 0.0, 1.0).sum() == 0
