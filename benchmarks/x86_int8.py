"""x86 int8 inference on both kinds of CPU: fp32 Inductor, torchao's int8 flow, and ours
with each weight rule, side by side.

Four workloads: ResNet-18 at batch 8 / 112 px, a MobileNetV2-style net at batch 32 / 64 px,
a BERT-style encoder layer at batch 8 / seq 128 / d 256 / 4 heads / ff 1024, and an MLP
512 -> 2048 -> 2048 -> 10 at batch 64 (seeded random weights, batch-norm statistics
settled on random batches, four random calibration batches). Each workload runs in a
process of its own per CPU kind, all variants side by side in it:

* fp32 Inductor: ``torch.compile`` with freezing;
* torchao int8: torchao 0.18's ``X86InductorQuantizer`` and its Inductor passes (imported
  as users import them, next to torch 2.13's own copy, registered by default);
* ours, for each ``weight_rule`` of ``qcore.get_quantizer("x86")``, compiled under
  ``qcore.get_lowering("x86")``: ``budgeted`` (the default), ``never_overflow`` and
  ``per_layer`` (accuracy first). On a VNNI target the three are one model (torchao's).

Each workload's process also measures oneDNN's int8 peak as two large layers reach it
(`_peak_models`) and reports every variant's share of it.

The CPU kinds: this machine as it is, and the same machine with oneDNN capped at AVX2
(``ONEDNN_MAX_CPU_ISA=AVX2``: oneDNN's saturating int8 kernels without VNNI, and
``qcore.host`` then targets such a CPU). Which passes are registered is process-wide
and permanent (torchao's at import, torch's at the first compile): ours run before
freezing, where both register theirs, so they find nothing left of our graphs, and
torchao's graph meets only torch's and torchao's passes (outside ``with lowering``).

Latency is the median of ``--runs`` calls per variant after ``--warmup`` rounds, the
variants interleaved call by call, in a shuffled order each round, so that load from
other processes hits all alike; the ratios to torchao are the medians over rounds of each
round's own ratio (robust to load that changes between rounds);
``--threads`` torch threads (0: torch's default, every core, as a user gets it). Each int8
variant also reports its oneDNN int8 kernels and the multiply-adds they run over the
single-depth model's (both read from Inductor's generated code: a doubled reduction's
packed weight holds twice the input channels), its SQNR against float, and its distance
to its own eager converted model; a timed call that compiles anything anew (so would run
other code than the code read) stops the run. The run fails (exit 1) when the default is
slower than ``--regression`` (1.0) x torchao's latency on either kind of CPU: when more
rounds ran slower than that than a level pair of flows would give one time in a hundred
(a sign test on the rounds' ratios; :func:`slower_than`); where several rules quantize one
model (all three on a VNNI target), a round's default latency is the median of their
compiles (:func:`default_rounds`).

    python benchmarks/x86_int8.py                       # both kinds, all workloads
    python benchmarks/x86_int8.py --kinds avx2 --workloads mlp bert --threads 1
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# the workloads live beside the x86 package's tests, which check the same models
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "packages/qinductor-x86/tests"))

from workloads import WORKLOADS, calibration, compiled_int8_macs, models, single_depth_macs

KINDS = ("vnni", "avx2")
RULES = ("budgeted", "never_overflow", "per_layer")
TORCHAO = "torchao int8"
VARIANTS = ("fp32 inductor", TORCHAO, *(f"ours, {rule}" for rule in RULES))
DEFAULT = "ours, budgeted"
#: The regression check's sign test: the chance of failing a default exactly at the limit.
SIGNIFICANCE = 0.01


# one workload ---------------------------------------------------------------------------


def _quantize(model: Any, x: Any, quantizer: Any, calibration: list[Any]) -> Any:
    import torch
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    prepared = prepare_pt2e(torch.export.export(model, (x,)).module(), quantizer)
    with torch.no_grad():
        for batch in calibration:
            prepared(batch)
    return convert_pt2e(prepared)


def _compiled(model: Any, x: Any) -> tuple[Any, Callable[[], Any], str]:
    """The compiled model's output, a timed call of it on its own copy of the input
    (torch's copy of the passes can sum in place into a graph input), and Inductor's code.

    Not ``torch._inductor.utils.run_and_get_code``: it resets Dynamo, which drops every
    model compiled before, so that their first timed call compiled them anew, outside
    ``with lowering``, under torch's passes. That is how an earlier version of this script
    timed torch's single-depth kernels under our rules' names (benchmarks/README.md)."""
    from unittest import mock

    import torch
    from torch._inductor.graph import GraphLowering

    code: list[str] = []
    compiled = torch.compile(model)
    with torch.no_grad(), mock.patch.object(GraphLowering, "save_output_code", code.append):
        output = compiled(x.clone())
    own = x.clone()
    return output, lambda: compiled(own), "\n".join(code)


_KERNEL = re.compile(r"torch\.ops\.onednn\.(?:qconv|qlinear)\w*\.\w+\(")


def _peak_models() -> list[tuple[Any, Any, int]]:
    """oneDNN's int8 peak here, as two large layers reach it: a linear (batch 256, 4096 ->
    4096) and a ResNet's deep 3x3 conv (256 -> 256 channels, batch 8 at 28 x 28); each
    (model, input, multiply-adds)."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    linear = nn.Sequential(nn.Linear(4096, 4096)).eval(), torch.randn(256, 4096), 256 * 4096 * 4096
    conv = nn.Sequential(nn.Conv2d(256, 256, 3, padding=1)).eval(), torch.randn(8, 256, 28, 28)
    return [linear, (*conv, 8 * 28 * 28 * 256 * 256 * 9)]


def _int8_gemm_peak(quantizer: Any, runs: int, warmup: int) -> float:
    """Multiply-adds per second of oneDNN's int8 kernels on :func:`_peak_models` (the
    faster of the two), quantized by ``quantizer`` (torchao's: single depth on every CPU)
    and compiled in this process, each its median over ``runs`` calls. A workload's share
    of it is its convs' and linears' single-depth multiply-adds per second: a doubled
    reduction's extra work, attention's float matmuls and the glue all count as time
    without int8 GEMM work."""
    rates = []
    for model, x, macs in _peak_models():
        _, call, code = _compiled(_quantize(model, x, quantizer, calibration(x)), x)
        if len(_KERNEL.findall(code)) != 1:
            raise RuntimeError("a peak layer did not compile to one oneDNN int8 kernel")
        for _ in range(warmup):
            call()
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        rates.append(macs / statistics.median(times))
    return max(rates)


def interleaved_times(
    timed: dict[str, Callable[[], Any]], runs: int, warmup: int, name: str
) -> dict[str, list[float]]:
    """Each variant's ``runs`` call times, after ``warmup`` rounds: one call of each per
    round, in a shuffled order each round (no variant always follows the same one), so
    that load from other processes hits all alike. What is timed must be what was
    measured before: a call that compiles anything anew (under other passes than the ones
    that made the code read) stops the run."""
    from torch._dynamo.utils import counters

    compiled_graphs = counters["stats"]["unique_graphs"]
    times: dict[str, list[float]] = {v: [] for v in timed}
    for _ in range(warmup):
        for fn in timed.values():
            fn()
    order = list(timed)
    shuffle = random.Random(0).shuffle
    for _ in range(runs):
        shuffle(order)
        for variant in order:
            start = time.perf_counter()
            timed[variant]()
            times[variant].append(time.perf_counter() - start)
    if counters["stats"]["unique_graphs"] != compiled_graphs:
        raise RuntimeError(f"{name}: a timed call compiled a graph anew")
    return times


def run_workload(name: str, runs: int, warmup: int, threads: int) -> dict[str, Any]:
    import torch
    import torch._inductor.config as inductor_config

    if threads:
        torch.set_num_threads(threads)
    import qcore
    from qcore.metrics import sqnr

    inductor_config.freezing = True
    model, x = models()[name]()
    batches = calibration(x)
    single = single_depth_macs(model, x)
    timed: dict[str, Callable[[], Any]] = {}
    info: dict[str, Any] = {}
    with torch.no_grad():
        reference = model(x)
        _, timed["fp32 inductor"], _ = _compiled(model, x)

        # torchao's flow, imported as users import it (this registers its passes)
        import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer as xiq

        theirs = xiq.X86InductorQuantizer().set_global(xiq.get_default_x86_inductor_quantization_config())
        converted = _quantize(model, x, theirs, batches)
        output, timed[TORCHAO], code = _compiled(converted, x)
        info[TORCHAO] = _accuracy(reference, converted(x), output, code, single=single, sqnr=sqnr)
        peak = _int8_gemm_peak(theirs, runs, warmup)

        lowering = qcore.get_lowering("x86")
        quantized: dict[str, Any] = {}
        for rule in RULES:
            ours = quantized[f"ours, {rule}"] = _quantize(model, x, qcore.get_quantizer("x86", weight_rule=rule), batches)
            with lowering:
                output, timed[f"ours, {rule}"], code = _compiled(ours, x)
            info[f"ours, {rule}"] = _accuracy(reference, ours(x), output, code, single=single, sqnr=sqnr)

        # what is timed is what was measured above: no call may compile anew (under other
        # passes than the ones that made the code read above)
        times = interleaved_times(timed, runs, warmup, name)
    median_s = {v: statistics.median(t) for v, t in times.items()}
    return {
        "workload": name,
        "median_ms": {v: 1000 * t for v, t in median_s.items()},
        "int8_peak_gmacs": peak / 1e9,
        # (fp32 Inductor's too, against the int8 peak: how far int8 is from free)
        "peak_share": {v: single / t / peak for v, t in median_s.items()},
        # each round's calls ran within milliseconds of each other, under the same load
        "vs_torchao": {
            v: statistics.median(a / b for a, b in zip(t, times[TORCHAO], strict=True))
            for v, t in times.items()
        },
        # each round's ratio of the default, for the regression check's sign test
        "default_rounds": default_rounds(
            times, [v for v, model in quantized.items() if same_model(model, quantized[DEFAULT])]
        ),
        "int8": info,
        "host": qcore.host.probe().describe(),
        "isa": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "emulated": _emulated(),
    }


def default_rounds(times: dict[str, list[float]], same_model: list[str]) -> list[float]:
    """Each round's latency of the default over torchao's. ``same_model``: the variants
    whose rule quantized the default's model (all three on a VNNI target; on a CPU without
    VNNI, those whose choices came out the same for this model). Two compiles of one
    model can run 2 % apart for a whole run (memory placement, not the rules), so the
    default's latency in a round is the median of those compiles' there."""
    per_round = zip(*(times[v] for v in same_model), strict=True)
    return [statistics.median(calls) / theirs for calls, theirs in zip(per_round, times[TORCHAO], strict=True)]


def same_model(a: Any, b: Any) -> bool:
    """Whether two converted models are one: the same graph, with equal constants."""
    import torch

    def constants(gm: Any) -> list[Any]:
        return [_attribute(gm, str(n.target)) for n in gm.graph.nodes if n.op == "get_attr"]

    if str(a.graph) != str(b.graph):
        return False
    return all(torch.equal(x, y) for x, y in zip(constants(a), constants(b), strict=True))


def _attribute(gm: Any, target: str) -> Any:
    for part in target.split("."):
        gm = getattr(gm, part)
    return gm


def _emulated() -> bool:
    """Whether oneDNN is capped below this CPU's own int8 kernels: AVX2 on a CPU with VNNI
    or AMX (the kernels are a real AVX2 CPU's; the clock, caches and cores are this one's)."""
    if os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper() != "AVX2":
        return False
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False
    return any(flag in flags for flag in ("avx512_vnni", "avx_vnni", "amx_int8"))


def _accuracy(
    reference: Any, eager: Any, output: Any, code: str, *, single: int, sqnr: Callable[..., float]
) -> dict[str, Any]:
    try:
        macs: int | None = compiled_int8_macs(code)[0]
    except ValueError:  # torchao's flow: its packed weights are not in the code
        macs = None
    return {
        "kernels": len(_KERNEL.findall(code)),
        "extra_macs": None if macs is None else macs / single - 1,
        "sqnr_db": sqnr(reference, output),
        "eager_sqnr_db": sqnr(reference, eager),
        "vs_eager": float((eager - output).norm() / eager.norm()),
    }


# driver ------------------------------------------------------------------------------


def _tables(results: dict[str, list[dict[str, Any]]]) -> str:
    lines = []
    for kind, rows in results.items():
        first = rows[0]
        emulated = " (emulated: ONEDNN_MAX_CPU_ISA=AVX2 on a VNNI CPU)" if first["emulated"] else ""
        lines += [
            f"### {kind}{emulated}: {first['host']} (torch capability {first['isa']}, "
            f"{first['threads']} torch thread(s))",
            "",
            "| workload | fp32 Inductor | torchao int8 | ours, budgeted (default) | ours, never_overflow "
            "| ours, per_layer | budgeted / torchao | never_overflow / torchao | per_layer / torchao |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in rows:
            t = r["median_ms"]
            ratios = " | ".join(f"{r['vs_torchao'][f'ours, {rule}']:.2f}" for rule in RULES)
            cells = " | ".join(f"{t[v]:.2f}" for v in VARIANTS)
            lines.append(f"| {r['workload']} | {cells} | {ratios} |")
        lines += [
            "",
            "| workload | flow | int8 kernels | extra multiply-adds | SQNR vs float (dB) "
            "| eager converted (dB) | rel. L2 to its eager model |",
            "|---|---|---:|---:|---:|---:|---:|",
        ]
        for r in rows:
            for flow in VARIANTS[1:]:
                q = r["int8"][flow]
                extra = "n/a" if q["extra_macs"] is None else f"{100 * q['extra_macs']:.1f} %"
                lines.append(
                    f"| {r['workload']} | {flow} | {q['kernels']} | {extra} | {q['sqnr_db']:.1f} "
                    f"| {q['eager_sqnr_db']:.1f} | {q['vs_eager']:.4f} |"
                )
        lines += [
            "",
            "Share of the int8 GEMM peak (the faster of a large int8 linear and conv, "
            "`_peak_models`; each workload's single-depth conv and linear multiply-adds per second):",
            "",
            "| workload | peak (GMAC/s) | " + " | ".join(VARIANTS) + " |",
            "|---|---:|" + "---:|" * len(VARIANTS),
        ]
        for r in rows:
            shares = " | ".join(f"{100 * r['peak_share'][v]:.0f} %" for v in VARIANTS)
            lines.append(f"| {r['workload']} | {r['int8_peak_gmacs']:.0f} | {shares} |")
        lines.append("")
    return "\n".join(lines)


def slower_than(rounds: list[float], limit: float, alpha: float = SIGNIFICANCE) -> bool:
    """Whether the paired per-round ratios say the default runs slower than ``limit`` x
    torchao's latency: a one-sided sign test, rounds above ``limit`` against rounds below
    (ties dropped), with ``alpha`` the chance of failing a default that is at ``limit``.
    A median alone flips on noise when the two flows are level."""
    above = sum(r > limit for r in rounds)
    below = sum(r < limit for r in rounds)
    n = above + below
    if n == 0:
        return False
    # P(at least ``above`` of n fair coin flips): the chance of this many rounds above
    p_value = sum(math.comb(n, k) for k in range(above, n + 1)) / 2**n
    return bool(p_value < alpha)


def _regressions(results: dict[str, list[dict[str, Any]]], limit: float) -> list[str]:
    """Every (kind, workload) where the default is slower than ``limit`` x torchao's (see
    :func:`slower_than`)."""
    found = []
    for kind, rows in results.items():
        for r in rows:
            if slower_than(r["default_rounds"], limit):
                ratio = r["vs_torchao"][DEFAULT]
                found.append(f"{kind} / {r['workload']}: the default at {ratio:.2f}x torchao's latency")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    parser.add_argument(
        "--regression", type=float, default=1.0,
        help="fail when the default is significantly slower than this x torchao's latency",
    )  # fmt: skip
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--one", choices=WORKLOADS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print("RESULT " + json.dumps(run_workload(args.one, args.runs, args.warmup, args.threads)))
        return
    results: dict[str, list[dict[str, Any]]] = {}
    for kind in args.kinds:
        env = {k: v for k, v in os.environ.items() if k not in {"ONEDNN_MAX_CPU_ISA", "QCORE_INT8_TARGET"}}
        if kind == "avx2":
            env["ONEDNN_MAX_CPU_ISA"] = "AVX2"
        for name in args.workloads:
            command = [
                sys.executable, __file__, "--one", name, "--runs", str(args.runs),
                "--warmup", str(args.warmup), "--threads", str(args.threads),
            ]  # fmt: skip
            done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
            if done.returncode != 0:
                sys.exit(f"{kind} / {name} failed:\n{done.stderr[-3000:]}")
            line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
            results.setdefault(kind, []).append(json.loads(line.removeprefix("RESULT ")))
            print(f"{kind} / {name}: {results[kind][-1]['median_ms']}", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    print(_tables(results))
    regressions = _regressions(results, args.regression)
    for line in regressions:
        print(f"REGRESSION: {line} (limit {args.regression}x)")
    sys.exit(1 if regressions else 0)


if __name__ == "__main__":
    main()
