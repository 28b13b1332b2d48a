"""qcore.distributed through every backend's flow, in a real 2-process gloo world: each rank
calibrates (or trains) on its own shard, with deliberately different input ranges.

See distributed_flows.py for what each rank runs; the single-process reference over both
shards is computed inside the world, by one rank, and every rank's synced model is
compared with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from distributed_flows import PTQ_CASES

from qcore.metrics import sqnr
from qcore.testing.fresh import run_fresh
from qcore.testing.readme import python_blocks
from qcore.zoo.suite.world import RankError, run_world

QAT_STEPS = 3


@pytest.fixture(scope="module")
def world() -> list[dict[str, Any]]:
    """One 2-process world runs every flow (QAT first, then PTQ, whose last case makes
    both ranks raise): each rank imports torch and torchao once."""
    import distributed_flows

    results = run_world(distributed_flows.qat_then_ptq, QAT_STEPS, timeout=600)
    errors = [r for r in results if isinstance(r, RankError)]
    assert not errors, errors
    return results


@pytest.fixture(scope="module")
def ptq(world: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [rank["ptq"] for rank in world]


@pytest.fixture(scope="module")
def qat(world: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [rank["qat"] for rank in world]


CASE_IDS = ["-".join(c) for c in PTQ_CASES]


@pytest.mark.parametrize("observers", ["histogram", "min_max"])
@pytest.mark.parametrize("case", PTQ_CASES, ids=CASE_IDS)
def test_synced_ranks_convert_to_identical_models(
    ptq: list[dict[str, Any]], case: tuple[str, str, str], observers: str
) -> None:
    zero, one = (rank["|".join(case)][observers] for rank in ptq)
    assert zero["unsynced_digest"] != one["unsynced_digest"]  # without a sync they differ
    assert zero["synced_digest"] == one["synced_digest"]
    assert zero["synced_output"] == one["synced_output"]


def _union(ptq: list[dict[str, Any]], case: tuple[str, str, str], observers: str) -> Any:
    """The one-process result over every shard (one rank computes it, UNION_RANK)."""
    results = [rank["|".join(case)][observers] for rank in ptq]
    (union,) = [result for result in results if "union_digest" in result]
    return union


@pytest.mark.parametrize("case", PTQ_CASES, ids=CASE_IDS)
def test_min_max_equals_one_process_over_the_union_exactly(
    ptq: list[dict[str, Any]], case: tuple[str, str, str]
) -> None:
    union = _union(ptq, case, "min_max")
    for rank in ptq:
        result = rank["|".join(case)]["min_max"]
        assert result["synced_output"] == union["union_output"]
        assert result["synced_digest"] == union["union_digest"]


@pytest.mark.parametrize("case", PTQ_CASES, ids=CASE_IDS)
def test_histograms_match_one_process_over_the_union(
    ptq: list[dict[str, Any]], case: tuple[str, str, str]
) -> None:
    union = torch.tensor(_union(ptq, case, "histogram")["union_output"])
    for rank in ptq:
        result = rank["|".join(case)]["histogram"]
        assert sqnr(union, torch.tensor(result["synced_output"])) >= 35


def test_saturating_targets_merge_recorded_calibration_inputs(
    ptq: list[dict[str, Any]],
) -> None:
    for rank in ptq:
        assert rank["fx-onednn|cnn|avx2"]["min_max"]["recorders"] > 0
        assert rank["fx-onednn|cnn|avx512_vnni"]["min_max"]["recorders"] == 0


@pytest.mark.parametrize("observers", ["histogram", "min_max"])
@pytest.mark.parametrize("case", PTQ_CASES, ids=CASE_IDS)
def test_rank_0_converts_and_broadcasts_its_state(
    ptq: list[dict[str, Any]], case: tuple[str, str, str], observers: str
) -> None:
    zero, one = (rank["|".join(case)][observers] for rank in ptq)
    # rank 1's converted model had its floats wiped before it took rank 0's state
    assert one["broadcast_digest"] == zero["broadcast_digest"] == zero["synced_digest"]


def test_models_that_differ_raise_the_named_error_on_both_ranks(
    ptq: list[dict[str, Any]],
) -> None:
    for rank in ptq:
        assert "the ranks' models differ" in rank["mismatched"]
        # the extra Linear's input observer, and the value it observes
        assert "; rank 1 has observer 'activation_post_process_" in rank["mismatched"]
        assert "observing 'mlp_3'" in rank["mismatched"]


@pytest.mark.parametrize("flow", ["fx-onednn", "pt2e-xnnpack"])
def test_qat_under_ddp_keeps_qparams_identical_after_every_step(
    qat: list[dict[str, Any]], flow: str
) -> None:
    zero, one = (rank[flow] for rank in qat)
    assert len(zero["synced"]["qparams"]) == QAT_STEPS
    for step in range(QAT_STEPS):
        assert zero["synced"]["qparams"][step] == one["synced"]["qparams"][step], step
        # DDP's broadcast_buffers alone does not: each rank observes its own data
        assert zero["unsynced"]["qparams"][step] != one["unsynced"]["qparams"][step], step
    assert zero["synced"]["digest"] == one["synced"]["digest"]
    assert zero["unsynced"]["digest"] != one["unsynced"]["digest"]


def test_the_readme_example_runs_under_torchrun(tmp_path: Path) -> None:
    """The root README's block, as written, on 2 ranks launched by torchrun: both convert
    to the same model."""
    readme = Path(__file__).resolve().parent.parent / "README.md"
    block = next(b for b in python_blocks(readme) if "qcore.distributed.calibrate(" in b.code)
    script = tmp_path / "calibrate.py"
    script.write_text(block.code + _WRITE_DIGEST.format(out=repr(str(tmp_path))))
    outcome = run_fresh(
        "import sys; from torch.distributed.run import main; main(sys.argv[1:])",
        args=["--standalone", "--nproc-per-node", "2", str(script)],
        threads=1,
        timeout=300,
    )
    assert outcome.ok, outcome.describe()
    digests = [(tmp_path / f"rank{rank}.txt").read_text() for rank in range(2)]
    assert digests[0] == digests[1] and len(digests[0]) == 64


_WRITE_DIGEST = """
import hashlib, pathlib
with torch.no_grad():
    probe = converted(torch.linspace(-4, 4, 4 * 3 * 16 * 16).reshape(4, 3, 16, 16))
digest = hashlib.sha256(repr(probe.flatten().tolist()).encode()).hexdigest()
pathlib.Path({out}, f"rank{{dist.get_rank()}}.txt").write_text(digest)
"""
