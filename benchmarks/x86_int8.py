"""x86 int8 inference latency: fp32 eager, fp32 Inductor, torchao's int8 flow, and ours.

Four workloads (ResNet-18 at batch 8 / 112 px, a MobileNetV2-style net at batch 32 / 64 px,
a BERT-style encoder layer at batch 8 / seq 128 / d 256 / 4 heads / ff 1024, and an MLP
512 -> 2048 -> 2048 -> 10 at batch 64), each in a process of its own, the four variants
side by side in it:

* fp32 eager: the float model under ``torch.no_grad()``;
* fp32 Inductor: ``torch.compile`` with freezing;
* torchao int8: torchao 0.18's ``X86InductorQuantizer`` and its Inductor passes (imported
  as users import them, with torch 2.13's own copy registered too, its default);
* ours: ``qcore.get_quantizer("x86")`` and ``qcore.get_lowering("x86")``;
* ours with ``weight_rule="never_overflow"``: on a CPU without VNNI, weights no input can
  overflow, so no op runs on a doubled reduction (the default, ``per_layer``, keeps
  torchao's full range where narrowing costs accuracy; identical on a VNNI target);
* ours with 7-bit activations: the same with ``reduce_range=True``, whose graphs cannot
  saturate any CPU (on a non-VNNI host the default graphs' layers that could are lowered
  as two exact kernels each, which costs time; this row shows the lowering without that).

Latency is the median of ``--runs`` timed calls per variant after warm-up, the variants
interleaved call by call so that load from other processes hits all of them alike. Each
int8 flow also reports its oneDNN int8 kernels (counted in the generated code), its SQNR
against the float model and its relative L2 distance to its own eager converted model.

    python benchmarks/x86_int8.py                 # all four workloads, table on stdout
    python benchmarks/x86_int8.py --runs 50 --workloads mlp bert
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

WORKLOADS = ("resnet18", "mobilenet_v2", "bert", "mlp")
NEVER = "ours int8, never_overflow"
SEVEN = "ours int8, 7-bit activations"
VARIANTS = ("fp32 eager", "fp32 inductor", "torchao int8", "ours int8", NEVER, SEVEN)
#: (variant, quantizer options) of our flow
OURS = (("ours int8", {}), (NEVER, {"weight_rule": "never_overflow"}), (SEVEN, {"reduce_range": True}))


# models (plain PyTorch, seeded) ------------------------------------------------------


def _models() -> dict[str, Callable[[], tuple[Any, Any]]]:
    import torch
    from torch import nn

    def conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1) -> list[nn.Module]:
        return [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]

    class BasicBlock(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.body = nn.Sequential(*conv_bn(cin, cout, 3, stride), nn.ReLU(), *conv_bn(cout, cout, 3))
            self.skip = nn.Sequential(*conv_bn(cin, cout, 1, stride)) if stride != 1 or cin != cout else nn.Identity()
            self.relu = nn.ReLU()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.relu(self.body(x) + self.skip(x))

    def resnet18() -> nn.Module:
        layers: list[nn.Module] = [*conv_bn(3, 64, 7, 2), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
        cin = 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000)]
        return nn.Sequential(*layers)

    class InvertedResidual(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
            super().__init__()
            hidden = cin * expand
            layers: list[nn.Module] = []
            if expand != 1:
                layers += [*conv_bn(cin, hidden, 1), nn.ReLU6()]
            layers += [*conv_bn(hidden, hidden, 3, stride, hidden), nn.ReLU6(), *conv_bn(hidden, cout, 1)]
            self.body = nn.Sequential(*layers)
            self.residual = stride == 1 and cin == cout

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.body(x) if self.residual else self.body(x)

    def mobilenet_v2() -> nn.Module:
        layers: list[nn.Module] = [*conv_bn(3, 32, 3, 2), nn.ReLU6()]
        cin = 32
        for expand, cout, repeats, stride in (
            (1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
            (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1),
        ):
            for i in range(repeats):
                layers.append(InvertedResidual(cin, cout, stride if i == 0 else 1, expand))
                cin = cout
        layers += [*conv_bn(cin, 1280, 1), nn.ReLU6(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(1280, 1000)]
        return nn.Sequential(*layers)

    class EncoderLayer(nn.Module):
        def __init__(self, d: int = 256, heads: int = 4, ff: int = 1024) -> None:
            super().__init__()
            self.heads = heads
            self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
            self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, d = x.shape
            h = self.heads

            def split(y: torch.Tensor) -> torch.Tensor:
                return y.view(b, t, h, d // h).transpose(1, 2)

            q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
            attention = torch.matmul(q, k.transpose(-2, -1)) / (d // h) ** 0.5
            y = torch.matmul(attention.softmax(-1), v).transpose(1, 2).reshape(b, t, d)
            x = self.norm1(x + self.o(y))
            return self.norm2(x + self.ff2(nn.functional.gelu(self.ff1(x))))

    def mlp() -> nn.Module:
        return nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10))

    def settle_batch_norm(model: nn.Module, shape: tuple[int, ...]) -> None:
        """Running statistics from a few random batches, so that activations keep a
        realistic scale through the network (eval-mode batch norm with its initial
        statistics makes a deep random net's output nearly constant)."""
        norms = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
        if not norms:
            return
        for m in norms:
            m.momentum = None  # a plain average over the batches below
        model.train()
        generator = torch.Generator().manual_seed(3)
        with torch.no_grad():
            for _ in range(4):
                model(torch.randn(*shape, generator=generator))

    def make(build: Callable[[], nn.Module], *shape: int) -> Callable[[], tuple[Any, Any]]:
        def made() -> tuple[Any, Any]:
            torch.manual_seed(0)
            model = build()
            settle_batch_norm(model, shape)
            generator = torch.Generator().manual_seed(1)
            return model.eval(), torch.randn(*shape, generator=generator)

        return made

    return {
        "resnet18": make(resnet18, 8, 3, 112, 112),
        "mobilenet_v2": make(mobilenet_v2, 32, 3, 64, 64),
        "bert": make(EncoderLayer, 8, 128, 256),
        "mlp": make(mlp, 64, 512),
    }


# one workload ----------------------------------------------------------------------------


def _quantize(model: Any, x: Any, quantizer: Any, calibration: list[Any]) -> Any:
    import torch
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    prepared = prepare_pt2e(torch.export.export(model, (x,)).module(), quantizer)
    with torch.no_grad():
        for batch in calibration:
            prepared(batch)
    return convert_pt2e(prepared)


def _compiled(model: Any, x: Any) -> tuple[Callable[..., Any], Callable[[], Any], str]:
    """The compiled model, a timed call of it on its own copy of the input (torch's copy
    of the passes can sum in place into a graph input, see the README), and Inductor's
    generated code."""
    import torch
    from torch._inductor.utils import run_and_get_code

    compiled = torch.compile(model)
    own = x.clone()
    with torch.no_grad():
        _, code = run_and_get_code(compiled, x.clone())
    return compiled, lambda: compiled(own), "\n".join(code)


def _checked(model: Any, x: Any) -> tuple[Any, bool]:
    """Output on a fresh copy of ``x``, and whether the call wrote into that copy."""
    import torch

    fresh = x.clone()
    with torch.no_grad():
        out = model(fresh)
    return out, not torch.equal(fresh, x)


def _kernels(code: str) -> int:
    return len(re.findall(r"torch\.ops\.onednn\.(?:qconv|qlinear)\w*\.\w+\(", code))


def run_workload(name: str, runs: int, warmup: int, threads: int) -> dict[str, Any]:
    import torch
    import torch._inductor.config as inductor_config

    if threads:
        torch.set_num_threads(threads)
    import qcore
    from qcore.metrics import sqnr

    inductor_config.freezing = True
    model, x = _models()[name]()
    generator = torch.Generator().manual_seed(2)
    calibration = [torch.randn(x.shape, generator=generator) for _ in range(4)]
    variants: dict[str, Callable[[], Any]] = {}
    info: dict[str, Any] = {}
    with torch.no_grad():
        reference = model(x)
        own = x.clone()
        variants["fp32 eager"] = lambda: model(own)
        _, variants["fp32 inductor"], _ = _compiled(model, x)

        # torchao's flow, imported as users import it (this registers its passes)
        import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer as xiq

        theirs = xiq.X86InductorQuantizer().set_global(xiq.get_default_x86_inductor_quantization_config())
        converted = _quantize(model, x, theirs, calibration)
        eager = converted(x)
        compiled, variants["torchao int8"], code = _compiled(converted, x)
        info["torchao int8"] = _accuracy(
            reference, eager, compiled=compiled, x=x, code=code, sqnr=sqnr
        )

        lowering = qcore.get_lowering("x86")
        for variant, options in OURS:
            ours = _quantize(model, x, qcore.get_quantizer("x86", **options), calibration)
            eager = ours(x)
            with lowering:
                compiled, variants[variant], code = _compiled(ours, x)
            info[variant] = _accuracy(
                reference, eager, compiled=compiled, x=x, code=code, sqnr=sqnr
            )
            info[variant]["doubled"] = sum(
                n for k, n in lowering.report().lowered.items() if "reduction doubled" in k
            )

        times: dict[str, list[float]] = {v: [] for v in variants}
        for _ in range(warmup):
            for fn in variants.values():
                fn()
        for _ in range(runs):
            for variant, fn in variants.items():
                start = time.perf_counter()
                fn()
                times[variant].append(time.perf_counter() - start)
    return {
        "workload": name,
        "median_ms": {v: 1000 * statistics.median(t) for v, t in times.items()},
        "int8": info,
        "host": qcore.host.probe().describe(),
        "isa": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
    }


def _accuracy(
    reference: Any, eager: Any, *, compiled: Any, x: Any, code: str, sqnr: Callable[..., float]
) -> dict[str, Any]:
    out, mutated = _checked(compiled, x)
    relative = float((eager - out).norm() / eager.norm())
    return {
        "kernels": _kernels(code),
        "sqnr_db": sqnr(reference, out),
        "vs_eager": relative,
        "writes_input": mutated,
    }


# driver ------------------------------------------------------------------------------


def _table(results: list[dict[str, Any]]) -> str:
    latency = [
        "| workload | fp32 eager | fp32 Inductor | torchao int8 | ours int8 | ours, never_overflow "
        "| ours, 7-bit act. | ours / torchao | never_overflow / torchao | 7-bit / torchao |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    quality = [
        "| workload | flow | int8 kernels | doubled ops | SQNR vs float (dB) "
        "| rel. L2 to its eager converted model | writes into its input |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for r in results:
        t, i = r["median_ms"], r["int8"]
        base = t["torchao int8"]
        latency.append(
            f"| {r['workload']} | {t['fp32 eager']:.2f} | {t['fp32 inductor']:.2f} "
            f"| {base:.2f} | {t['ours int8']:.2f} | {t[NEVER]:.2f} | {t[SEVEN]:.2f} "
            f"| {t['ours int8'] / base:.2f} | {t[NEVER] / base:.2f} | {t[SEVEN] / base:.2f} |"
        )
        for flow in ("torchao int8", "ours int8", NEVER, SEVEN):
            q = i[flow]
            quality.append(
                f"| {r['workload']} | {flow} | {q['kernels']} | {q.get('doubled', 0)} "
                f"| {q['sqnr_db']:.1f} | {q['vs_eager']:.4f} | {'yes' if q['writes_input'] else 'no'} |"
            )
    return "Median latency (ms)\n\n" + "\n".join(latency) + "\n\nInt8 flows\n\n" + "\n".join(quality)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument(
        "--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)"
    )
    parser.add_argument("--one", choices=WORKLOADS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print("RESULT " + json.dumps(run_workload(args.one, args.runs, args.warmup, args.threads)))
        return
    results = []
    for name in args.workloads:
        command = [
            sys.executable, __file__, "--one", name, "--runs", str(args.runs),
            "--warmup", str(args.warmup), "--threads", str(args.threads),
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False, env=os.environ.copy())
        if done.returncode != 0:
            sys.exit(f"{name} failed:\n{done.stderr[-3000:]}")
        line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
        results.append(json.loads(line.removeprefix("RESULT ")))
        print(f"{name}: {results[-1]['median_ms']}", file=sys.stderr)
    first = results[0]
    print(
        f"host: {first['host']} (torch capability {first['isa']}, {os.cpu_count()} logical "
        f"CPUs, {first['threads']} torch thread(s))"
    )
    print(_table(results))


if __name__ == "__main__":
    main()
