"""The x86 benchmark's regression check (``benchmarks/x86_int8.py``): it fails an int8
default slower than torchao's, and not one level with it.

The per-round ratios here are made up, as a run on a loaded host would give them; the
benchmark itself is not run (it takes minutes per workload)."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("x86_int8_bench", ROOT / "benchmarks/x86_int8.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rounds(median: float, spread: float, n: int = 40, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [median * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


def test_a_default_a_few_percent_slower_in_most_rounds_fails(bench: ModuleType) -> None:
    assert bench.slower_than(_rounds(1.04, 0.03), 1.0)


def test_a_default_level_with_torchao_passes_however_noisy(bench: ModuleType) -> None:
    # on many seeds: the check may fail a level default about one run in a hundred
    failed = sum(bench.slower_than(_rounds(1.0, 0.2, seed=s), 1.0) for s in range(200))
    assert failed <= 6, failed


def test_a_faster_default_passes(bench: ModuleType) -> None:
    assert not bench.slower_than(_rounds(0.9, 0.05), 1.0)


def test_the_boundary_of_the_sign_test(bench: ModuleType) -> None:
    """Of 20 untied rounds, 16 above the limit has p = 0.0059, 15 above p = 0.021 (the
    binomial tail, by hand): the first fails at 1 %, the second does not."""
    assert bench.slower_than([1.1] * 16 + [0.9] * 4, 1.0)
    assert not bench.slower_than([1.1] * 15 + [0.9] * 5, 1.0)
    assert not bench.slower_than([1.0] * 10, 1.0)  # ties only: no evidence either way


def test_the_check_reads_the_defaults_rounds(bench: ModuleType) -> None:
    row = {"workload": "mlp", "vs_torchao": {bench.DEFAULT: 1.05}, "default_rounds": [1.05] * 30}
    level = {**row, "default_rounds": [1.05, 0.95] * 15}
    assert bench._regressions({"avx2": [row]}, 1.0) == ["avx2 / mlp: the default at 1.05x torchao's latency"]
    assert bench._regressions({"avx2": [level]}, 1.0) == []
    assert bench._regressions({"avx2": [row]}, 1.1) == []


def test_one_model_compiled_three_times_is_judged_by_its_median_compile(bench: ModuleType) -> None:
    """Where the rules quantize one model (a VNNI target), a round's default latency is the
    median of its compiles; where only some do, of theirs; elsewhere the default's own."""
    times = {
        bench.TORCHAO: [10.0, 10.0],
        "ours, budgeted": [10.2, 9.0],  # the default: one slow compile, then one fast
        "ours, never_overflow": [9.9, 10.5],
        "ours, per_layer": [9.8, 10.1],
    }
    assert bench.default_rounds(times, list(times)[1:]) == pytest.approx([0.99, 1.01])
    assert bench.default_rounds(times, list(times)[1:3]) == pytest.approx([1.005, 0.975])
    assert bench.default_rounds(times, [bench.DEFAULT]) == pytest.approx([1.02, 0.9])


def test_two_models_are_one_when_graph_and_constants_agree(bench: ModuleType) -> None:
    import copy

    import torch

    class Scaled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("scale", torch.ones(3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.scale

    model = torch.fx.symbolic_trace(Scaled())
    twin, other = copy.deepcopy(model), copy.deepcopy(model)
    other.scale[0] = 2.0
    assert bench.same_model(model, twin)
    assert not bench.same_model(model, other)
