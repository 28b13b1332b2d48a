"""Attention's two matmuls in int8 (the x86 quantizer's opt-in ``matmul_int8`` row) against
torchao's flow and our default, side by side in one process per CPU kind.

The workload is ``x86_int8.py``'s BERT-style encoder layer (batch 8, seq 128, d 256, 4
heads, ff 1024; four calibration batches). Variants: fp32 Inductor; torchao 0.18's
``X86InductorQuantizer`` with its passes (its attention stays fp32, which Inductor fuses
into its flash-attention kernel); ours at the default; ours with ``enable("matmul_int8")``,
both compiled under ``qcore.get_lowering("x86")``. Timing, the int8 peak and the shares
are ``x86_int8.py``'s (interleaved calls, medians, per-round ratios to torchao). Each int8
variant also reports its SQNR against float and its distance to its own eager converted
model.

    python benchmarks/x86_attention.py --threads 1
    python benchmarks/x86_attention.py --kinds avx2 --threads 1 --runs 60
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from typing import Any

from x86_int8 import (
    KINDS,
    TORCHAO,
    _compiled,
    _emulated,
    _int8_gemm_peak,
    _quantize,
    calibration,
    interleaved_times,
    models,
    single_depth_macs,
)

WORKLOAD = "bert"
OURS = "ours, default"
INT8_ATTENTION = "ours, matmul_int8"


def run(runs: int, warmup: int, threads: int) -> dict[str, Any]:
    import torch
    import torch._inductor.config as inductor_config

    if threads:
        torch.set_num_threads(threads)
    import qcore
    from qcore.metrics import sqnr

    inductor_config.freezing = True
    model, x = models()[WORKLOAD]()
    batches = calibration(x)
    timed, accuracy = {}, {}
    with torch.no_grad():
        reference = model(x)
        _, timed["fp32 inductor"], _ = _compiled(model, x)
        import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer as xiq

        theirs = xiq.X86InductorQuantizer().set_global(xiq.get_default_x86_inductor_quantization_config())
        flows = {TORCHAO: (theirs, None)}
        lowering = qcore.get_lowering("x86")
        flows[OURS] = (qcore.get_quantizer("x86"), lowering)
        flows[INT8_ATTENTION] = (qcore.get_quantizer("x86").enable("matmul_int8"), lowering)
        for flow, (quantizer, under) in flows.items():
            converted = _quantize(model, x, quantizer, batches)
            if under is None:
                output, timed[flow], _ = _compiled(converted, x)
            else:
                with under:
                    output, timed[flow], _ = _compiled(converted, x)
            eager = converted(x)
            accuracy[flow] = {
                "sqnr_db": sqnr(reference, output),
                "vs_eager": float((eager - output).norm() / eager.norm()),
            }
        matmuls = {k: v for k, v in lowering.report().lowered.items() if "matmul" in k}
        peak = _int8_gemm_peak(theirs, runs, warmup)
        times = interleaved_times(timed, runs, warmup, WORKLOAD)
    median_s = {v: statistics.median(t) for v, t in times.items()}
    single = single_depth_macs(model, x)
    return {
        "median_ms": {v: 1000 * t for v, t in median_s.items()},
        "vs_torchao": {
            v: statistics.median(a / b for a, b in zip(t, times[TORCHAO], strict=True))
            for v, t in times.items()
        },
        "peak_share": {v: single / t / peak for v, t in median_s.items()},
        "accuracy": accuracy,
        "int8_matmuls": matmuls,
        "host": qcore.host.probe().describe(),
        "emulated": _emulated(),
        "threads": torch.get_num_threads(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print("RESULT " + json.dumps(run(args.runs, args.warmup, args.threads)))
        return
    for kind in args.kinds:
        env = {k: v for k, v in os.environ.items() if k not in {"ONEDNN_MAX_CPU_ISA", "QCORE_INT8_TARGET"}}
        if kind == "avx2":
            env["ONEDNN_MAX_CPU_ISA"] = "AVX2"
        command = [
            sys.executable, __file__, "--one", "--runs", str(args.runs),
            "--warmup", str(args.warmup), "--threads", str(args.threads),
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
        if done.returncode != 0:
            sys.exit(f"{kind} failed:\n{done.stderr[-3000:]}")
        line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
        r = json.loads(line.removeprefix("RESULT "))
        emulated = " (emulated: ONEDNN_MAX_CPU_ISA=AVX2)" if r["emulated"] else ""
        print(f"### {kind}{emulated}: {r['host']}, {r['threads']} torch thread(s); {r['int8_matmuls']}\n")
        print("| variant | ms | / torchao | int8 peak share | SQNR vs float (dB) | rel. L2 to its eager model |")
        print("|---|---:|---:|---:|---:|---:|")
        for v, ms in r["median_ms"].items():
            acc = r["accuracy"].get(v)
            cells = f"{acc['sqnr_db']:.2f} | {acc['vs_eager']:.1e}" if acc else "- | -"
            print(f"| {v} | {ms:.2f} | {r['vs_torchao'][v]:.3f} | {100 * r['peak_share'][v]:.0f} % | {cells} |")
        print()


if __name__ == "__main__":
    main()
