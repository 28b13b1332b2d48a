"""``qcore demo``: every installed flow on a real task, in one comparison table.

A compact CNN is trained on scikit-learn's bundled 8x8 digits (cached after the first
run), then quantized by each flow the installed plugins provide (:mod:`qcore.demo.flows`)
and measured on the held-out split: top-1 float and int8, SQNR of the logits, median
latency, what was quantized and what stayed in float. ``--json`` writes the same numbers,
``--plot`` a per-layer error chart. Needs the ``qcore[demo]`` extra.
"""

from __future__ import annotations

import copy
import statistics
import textwrap
import time
import warnings
from collections.abc import Callable, Collection
from pathlib import Path

import torch
from torch import Tensor, nn

from qcore.demo.digits import (
    DATASET,
    EVAL_BATCH,
    STAGE_NAMES,
    Digits,
    load_digits,
    logits,
    top1,
    trained_model,
)
from qcore.demo.flows import Flow, compile_frozen, discover_flows
from qcore.demo.output import FlowResult, render, write_json, write_plot
from qcore.errors import PluginError
from qcore.metrics import sqnr

__all__ = ["MAX_TOP1_DROP", "run_demo"]

#: An int8 flow may lose at most this many top-1 points on the held-out split.
MAX_TOP1_DROP = 1.0
LATENCY_RUNS = 30


def _median_ms(model: Callable[[Tensor], Tensor], batch: Tensor) -> float:
    times = []
    with torch.no_grad():
        for _ in range(3):
            model(batch)
        for _ in range(LATENCY_RUNS):
            start = time.perf_counter()
            model(batch)
            times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def _layer_sqnr(flow: Flow, model: nn.Sequential, data: Digits) -> dict[str, float]:
    """SQNR of each stage's output: the float prefix up to that stage, quantized alone."""
    batches = data.calibration_batches()
    scores = {}
    for end, name in enumerate(STAGE_NAMES, start=1):
        prefix = copy.deepcopy(model[:end]).eval()
        quantized = flow.quantize(copy.deepcopy(prefix), batches, False)
        expected = logits(prefix, data.test_x)
        scores[name] = sqnr(expected, logits(quantized.model, data.test_x))
    return scores


class _FloatLatency:
    """Float latencies, measured once per kind (eager, compiled) and shared by the rows."""

    def __init__(self, model: nn.Module, batch: Tensor) -> None:
        self.model, self.batch = model, batch
        self.measured: dict[bool, float] = {}

    def ms(self, compiled: bool) -> float:
        if compiled not in self.measured:
            runner: Callable[[Tensor], Tensor] = self.model
            if compiled:  # compare compiled with compiled
                runner = compile_frozen(copy.deepcopy(self.model), self.batch)
            self.measured[compiled] = _median_ms(runner, self.batch)
        return self.measured[compiled]


def _run_flow(flow: Flow, model: nn.Sequential, data: Digits, float_latency: _FloatLatency,
              per_layer: bool) -> FlowResult:
    float_logits = logits(model, data.test_x)
    result = FlowResult(flow.label, flow.plugin, flow.distribution,
                        float_top1=top1(float_logits, data.test_y))
    try:
        quantized = flow.quantize(copy.deepcopy(model), data.calibration_batches(), True)
        int8_logits = logits(quantized.model, data.test_x)
        result.int8_top1 = top1(int8_logits, data.test_y)
        result.sqnr_db = sqnr(float_logits, int8_logits)
        result.float_ms = float_latency.ms(flow.compiles)
        result.int8_ms = _median_ms(quantized.model, float_latency.batch)
        result.lowered, result.left_in_float = quantized.lowered, quantized.left_in_float
        result.note = quantized.note
        if per_layer:
            result.layer_sqnr_db = _layer_sqnr(flow, model, data)
    except PluginError as exc:  # a broken plugin: the registry names it, others go on
        result.error, result.plugin_failed = str(exc).splitlines()[0][:200], True
    except Exception as exc:  # noqa: BLE001 - the demo reports any flow's failure and goes on
        result.error = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
    return result


def _print_host() -> None:
    """The host's int8 capability, once, when it limits accuracy or speed."""
    from qcore.int8.cpu_profile import probe, target

    here, chosen = probe(), target()
    notes = []
    if here.saturates_u8s8 or not here.x86:
        notes.append(f"Note: {here.describe()}.")
    if chosen != here:
        notes.append(f"Building for another CPU ({chosen.source}): {chosen.describe()}.")
    for note in notes:
        print(textwrap.fill(note, width=78) + "\n")


def run_demo(
    plot: Path | None = None,
    json_path: Path | None = None,
    retrain: bool = False,
    only: Collection[str] = (),
) -> int:
    """Run every installed flow (or, given ``only``, those of the plugins it names); 0 when
    each runs and keeps top-1 within 1 point."""
    flows = [f for f in discover_flows() if not only or f.plugin in only]
    _print_host()
    print(f"Data: {DATASET}; a compact CNN.")
    data = load_digits()
    started = time.perf_counter()
    model, cached = trained_model(data, retrain=retrain)
    took = "loaded from cache" if cached else f"trained in {time.perf_counter() - started:.0f} s"
    float_top1 = top1(logits(model, data.test_x), data.test_y)
    print(f"Float model {took}: {float_top1:.1f}% top-1 on {len(data.test_y)} held-out digits.")
    print(f"Quantizing with {len(flows)} installed flow(s)...\n")
    with warnings.catch_warnings():
        # every warning here is a third party's notice about its own internals
        warnings.simplefilter("ignore")
        latency = _FloatLatency(model, data.test_x[:EVAL_BATCH])
        results = [_run_flow(f, model, data, latency, plot is not None) for f in flows]
    print(render(results))
    failed = [
        r
        for r in results
        if (r.error and not r.plugin_failed) or float_top1 - r.int8_top1 > MAX_TOP1_DROP
    ]
    for r in results:
        if r.plugin_failed:
            print(textwrap.fill(f"\nSKIPPED {r.flow}: {r.error}", width=78))
    for r in failed:
        reason = r.error or f"lost {float_top1 - r.int8_top1:.1f} top-1 points"
        print(textwrap.fill(f"\nFAILED {r.flow} ({r.distribution}): {reason}", width=78))
    if json_path is not None:
        write_json(json_path, DATASET, results)
        print(f"\nWrote {json_path}")
    if plot is not None:
        write_plot(plot, STAGE_NAMES, results)
        print(f"Wrote {plot}")
    return 1 if failed else 0
