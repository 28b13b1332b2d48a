"""Latency of the shipped files: the x86 AOTInductor package against ``torch.compile``, and
the int8 ExecuTorch ``.pte`` (XNNPACK delegate) against the float ``.pte``.

The four workloads of ``x86_int8.py`` (ResNet-18 at batch 8 / 112 px, a MobileNetV2-style
net at batch 32 / 64 px, a BERT-style encoder layer at batch 8 / seq 128 / d 256, an MLP
512 -> 2048 -> 2048 -> 10 at batch 64), each in a process of its own:

* x86: the model quantized by ``qcore.get_quantizer("x86")`` (for this host's target),
  then ``torch.compile`` with freezing under ``qcore.get_lowering("x86")``, and the same
  program through ``torch._inductor.aoti_compile_and_package`` under the lowering, loaded
  with ``torch._inductor.aoti_load_package``;
* ExecuTorch: the float model and the model quantized by
  ``qcore.get_quantizer("xnnpack", is_per_channel=True)``, each lowered with
  ``to_edge_transform_and_lower(..., partitioner=[XnnpackPartitioner()])`` and run by
  ExecuTorch's runtime (``executorch.runtime``) from the written ``.pte``.

Latency is the median of ``--runs`` timed calls per variant after warm-up, the variants
of a pair interleaved call by call. Each pair also reports how far its two outputs are
apart (SQNR of the second against the first).

    python benchmarks/shipping.py                     # all four workloads, tables on stdout
    python benchmarks/shipping.py --runs 50 --workloads mlp bert
    ONEDNN_MAX_CPU_ISA=AVX2 python benchmarks/shipping.py --x86-only   # oneDNN's AVX2 kernels

With ``ONEDNN_MAX_CPU_ISA=AVX2`` oneDNN runs its AVX2 int8 kernels (no VNNI) and
``qcore.host`` reads the same cap, so the quantizer and the lowering take the AVX2 route
(doubled reductions where an int16 pair could overflow): on a VNNI host, that route
emulated. ``--x86-only`` skips the ExecuTorch part, which XNNPACK runs whatever oneDNN's cap.

ExecuTorch is a test dependency: ``pip install --no-deps executorch==1.5.1`` and
``pip install ruamel.yaml flatbuffers tabulate`` (versions in ``constraints.txt``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import x86_int8  # the workloads, shared with the x86 int8 benchmark

WORKLOADS = x86_int8.WORKLOADS
LABELS = {
    "resnet18": "ResNet-18, batch 8, 112 px",
    "mobilenet_v2": "MobileNetV2-style, batch 32, 64 px",
    "bert": "BERT-style encoder layer, batch 8, seq 128, d 256",
    "mlp": "MLP 512→2048→2048→10, batch 64",
}


def _timed(variants: dict[str, Callable[[], Any]], runs: int, warmup: int) -> dict[str, float]:
    """Median milliseconds per variant, the variants interleaved call by call."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(warmup):
        for fn in variants.values():
            fn()
    for _ in range(runs):
        for name, fn in variants.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: 1000 * statistics.median(t) for name, t in times.items()}


def run_workload(name: str, runs: int, warmup: int, threads: int, x86_only: bool) -> dict[str, Any]:
    import torch

    import qcore
    from qcore.metrics import sqnr

    if threads:
        torch.set_num_threads(threads)
    model, x = x86_int8._models()[name]()
    generator = torch.Generator().manual_seed(2)
    calibration = [torch.randn(x.shape, generator=generator) for _ in range(4)]
    folder = Path(tempfile.mkdtemp(prefix="qcore-shipping-bench-"))
    result: dict[str, Any] = {"workload": name}
    with torch.no_grad():
        # x86: torch.compile and the AOTInductor package of the same quantized program
        converted = x86_int8._quantize(model, x, qcore.get_quantizer("x86"), calibration)
        with qcore.get_lowering("x86"):
            torch._inductor.config.freezing = True
            compiled = torch.compile(converted)
            compiled(x.clone())
            torch._inductor.config.freezing = False
        with qcore.get_lowering("x86") as lowering:
            path = torch._inductor.aoti_compile_and_package(
                torch.export.export(converted, (x,)),
                package_path=str(folder / f"{name}.pt2"),
                inductor_configs={"freezing": True},
            )
        result["kernels"] = _package_int8_calls(Path(path))
        result["doubled"] = sum(
            n for k, n in lowering.report().lowered.items() if "reduction doubled" in k
        )
        package = torch._inductor.aoti_load_package(path)
        own = x.clone()
        result["x86_ms"] = _timed(
            {"torch.compile": lambda: compiled(own), "AOTInductor package": lambda: package(own)},
            runs, warmup,
        )  # fmt: skip
        result["x86_sqnr"] = sqnr(compiled(x.clone()), package(x.clone()))
        if x86_only:
            return _described(result)
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
        from executorch.exir import to_edge_transform_and_lower
        from executorch.runtime import Runtime

        # ExecuTorch: the float .pte and the int8 one, both with the XNNPACK delegate
        int8 = x86_int8._quantize(
            model, x, qcore.get_quantizer("xnnpack", is_per_channel=True), calibration
        )
        methods = {}
        for label, program in (("float .pte", model), ("int8 .pte", int8)):
            edge = to_edge_transform_and_lower(
                torch.export.export(program, (x,)), partitioner=[XnnpackPartitioner()]
            )
            file = folder / f"{name}-{label.split()[0]}.pte"
            file.write_bytes(edge.to_executorch().buffer)
            methods[label] = Runtime.get().load_program(str(file)).load_method("forward")
        result["pte_ms"] = _timed(
            {label: (lambda m=method: m.execute([x])) for label, method in methods.items()},
            runs,
            warmup,
        )
        float_out, int8_out = (methods[k].execute([x])[0] for k in ("float .pte", "int8 .pte"))
        result["pte_sqnr"] = sqnr(float_out, int8_out)
    return _described(result)


def _package_int8_calls(package: Path) -> int:
    """oneDNN int8 conv / linear calls in the C++ wrapper AOTInductor packaged."""
    with zipfile.ZipFile(package) as archive:
        return sum(
            len(re.findall(r"\baoti_torch_cpu__(?:qconv|qlinear)\w*\(", archive.read(n).decode()))
            for n in archive.namelist()
            if n.endswith("wrapper.cpp")
        )


def _described(result: dict[str, Any]) -> dict[str, Any]:
    import torch

    import qcore

    result["host"] = qcore.host.probe().describe()
    result["isa"] = torch.backends.cpu.get_cpu_capability()
    result["onednn cap"] = os.environ.get("ONEDNN_MAX_CPU_ISA", "")
    result["threads"] = torch.get_num_threads()
    return result


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def _tables(results: list[dict[str, Any]]) -> str:
    x86 = [
        "| workload | int8 kernels (doubled) | torch.compile (ms) | AOTInductor package (ms) | package / compile"
        " | SQNR package vs compile (dB) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    pte = [
        "| workload | float .pte (ms) | int8 .pte (ms) | int8 / float | SQNR int8 vs float (dB) |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in results:
        c, p = r["x86_ms"]["torch.compile"], r["x86_ms"]["AOTInductor package"]
        kernels = f"{r['kernels']} ({r['doubled']})"
        x86.append(
            f"| {LABELS[r['workload']]} | {kernels} | {c:.2f} | {p:.2f} | {p / c:.2f} | {r['x86_sqnr']:.1f} |"
        )
        if "pte_ms" not in r:
            continue
        f, i = r["pte_ms"]["float .pte"], r["pte_ms"]["int8 .pte"]
        pte.append(
            f"| {LABELS[r['workload']]} | {f:.2f} | {i:.2f} | {i / f:.2f} | {r['pte_sqnr']:.1f} |"
        )
    text = (
        "x86 int8: AOTInductor package vs torch.compile (same program, same lowering)\n\n"
        + "\n".join(x86)
    )
    if len(pte) > 2:
        text += "\n\nExecuTorch runtime, XNNPACK delegate: int8 .pte vs float .pte\n\n" + "\n".join(
            pte
        )
    return text


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument(
        "--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)"
    )
    parser.add_argument("--x86-only", action="store_true", help="skip the ExecuTorch .pte part")
    parser.add_argument("--one", choices=WORKLOADS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        result = run_workload(args.one, args.runs, args.warmup, args.threads, args.x86_only)
        print("RESULT " + json.dumps(result))
        return
    results = []
    for name in args.workloads:
        command = [
            sys.executable, __file__, "--one", name, "--runs", str(args.runs),
            "--warmup", str(args.warmup), "--threads", str(args.threads),
            *(["--x86-only"] if args.x86_only else []),
        ]  # fmt: skip
        done = subprocess.run(
            command, capture_output=True, text=True, check=False, env=os.environ.copy()
        )
        if done.returncode != 0:
            sys.exit(f"{name} failed:\n{done.stderr[-3000:]}")
        line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
        results.append(json.loads(line.removeprefix("RESULT ")))
        print(f"{name}: {results[-1]['x86_ms']} {results[-1].get('pte_ms', '')}", file=sys.stderr)
    first = results[0]
    cap = f", ONEDNN_MAX_CPU_ISA={first['onednn cap']}" if first["onednn cap"] else ""
    print(
        f"CPU: {_cpu_model()}, {os.cpu_count()} logical CPUs; torch capability {first['isa']}{cap};"
        f" {first['threads']} torch thread(s)\nint8 target: {first['host']}"
    )
    print(_tables(results))


if __name__ == "__main__":
    main()
