"""Eager accuracy and doubled work of the x86 quantizer's weight rules on a CPU without
VNNI, against torchao's.

For every replica in ``qcore.zoo.architectures`` (seeded random weights), quantized for
an ``avx2`` target with three calibration batches: torchao 0.18's ``X86InductorQuantizer``
(full-range weights) and ours with ``never_overflow``, ``budgeted`` (the default) and
``per_layer`` (accuracy first). Each cell is the eager converted model's SQNR against
float on held-out batch 50 (what the x86 lowering computes exactly; the mean over batches
50-53 in the second table, the four as one tensor in the third: test_budgeted_default.py's
measure), and the multiply-adds the lowering would add by doubling the
ops that can still overflow an int16 pair, in percent of the model's int8 multiply-adds
(read from the converted graph: int8 weight codes and each input's quant_max, pair sums
brute-forced), with how many inputs took 7 bits.

    python benchmarks/x86_weight_rules.py [ARCHITECTURE ...]
    python benchmarks/x86_weight_rules.py --torchvision --rules budgeted   # torchvision's models

Needs torchao and the x86 package's test helpers (``packages/qinductor-x86/tests``).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "packages/qinductor-x86/tests"))

import lowering_zoo as zoo
import torch
from test_lowering_saturation import INT16_MAX, brute_force_worst_pair
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

import qcore
from qcore.metrics import sqnr
from qcore.zoo.architectures import architecture_cases
from qcore.zoo.models import ModelCase

RULES = ("never_overflow", "budgeted", "per_layer")
HELD_OUT = (50, 51, 52, 53)
_WEIGHTED = (torch.ops.aten.conv1d.default, torch.ops.aten.conv2d.default, torch.ops.aten.linear.default)
_DEQUANTIZE = torch.ops.quantized_decomposed.dequantize_per_channel.default


def doubled_work(converted: torch.fx.GraphModule) -> tuple[float, int]:
    """(doubled multiply-adds / int8 multiply-adds, inputs on 7 bits) of a converted graph."""
    total = doubled = 0
    seven = set()
    for node in converted.graph.nodes:
        weight = node.args[1] if node.target in _WEIGHTED else None
        if getattr(weight, "target", None) is not _DEQUANTIZE:
            continue
        codes = converted.get_buffer(str(weight.args[0].target))
        source = node.args[0]
        qmax = int(source.args[4]) if "dequantize_per_tensor" in str(source.target) else 255
        if qmax < 255:
            seven.add(source.args[0])
        macs = math.prod(node.meta["val"].shape[1:]) * math.prod(codes.shape[1:])
        total += macs
        doubled += macs if brute_force_worst_pair(codes, qmax) > INT16_MAX else 0
    return doubled / total, len(seven)


def measure(case: ModelCase, quantizer: Any) -> dict[str, Any]:
    model = case.model()
    prepared = prepare_pt2e(torch.export.export(model, case.inputs(0)).module(), quantizer)
    with torch.no_grad():
        for batch in range(1, 4):
            prepared(*case.inputs(batch))
        converted = convert_pt2e(prepared)
        floats = [model(*case.inputs(b)) for b in HELD_OUT]
        outputs = [converted(*case.inputs(b)) for b in HELD_OUT]
    errors = [sqnr(f, o) for f, o in zip(floats, outputs, strict=True)]
    joined = sqnr(torch.cat(floats), torch.cat(outputs))
    extra, seven = doubled_work(converted)
    return {"sqnr": errors[0], "mean": statistics.mean(errors), "joined": joined, "extra": extra, "seven": seven}


#: torchvision's own architectures (``--torchvision``): 12 of its small models, the two that
#: issue 38 found below torchao among them; random init, batch-norm statistics randomized
#: as for the replicas.
TORCHVISION = (
    "resnet18", "resnet50", "googlenet", "densenet121", "regnet_y_400mf", "mobilenet_v2",
    "mobilenet_v3_small", "mobilenet_v3_large", "mnasnet0_5", "efficientnet_b0",
    "shufflenet_v2_x0_5", "squeezenet1_1",
)  # fmt: skip


class _CallSiteReLU(torch.nn.Module):
    """``F.relu`` in a module of its own: each call is a partition of its own for torchao's
    annotators, which raise on a ReLU module called twice (torchvision's ResNet blocks)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.relu(x)


def _relus_per_call_site(model: torch.nn.Module) -> torch.nn.Module:
    for parent in list(model.modules()):
        for child_name, child in parent.named_children():
            if type(child) is torch.nn.ReLU:
                setattr(parent, child_name, _CallSiteReLU())
    return model


def torchvision_cases(size: int = 112) -> list[ModelCase]:
    from torchvision import models

    def build(name: str) -> Callable[[], torch.nn.Module]:
        options = {"aux_logits": False, "init_weights": True} if name == "googlenet" else {}
        return lambda: _relus_per_call_site(getattr(models, name)(weights=None, **options))

    return [
        ModelCase(name, build(name), lambda: (torch.randn(2, 3, size, size),)) for name in TORCHVISION
    ]


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="architectures (default: all)")
    parser.add_argument("--torchvision", action="store_true", help="torchvision's own models, not the replicas")
    parser.add_argument("--rules", nargs="+", choices=RULES, default=list(RULES))
    parser.add_argument("--size", type=int, default=112, help="torchvision's models: input height and width")
    parser.add_argument("--seed", type=int, default=0, help="the replicas' seed (weights and inputs; 0: the zoo's)")
    args = parser.parse_args(argv)
    names, rules = args.names, args.rules
    torch.set_num_threads(1)
    rows = []
    with qcore.host.targeting("avx2"):
        cases = torchvision_cases(args.size) if args.torchvision else architecture_cases()
        for case in (dataclasses.replace(c, seed=args.seed) for c in cases):
            if names and case.name not in names:
                continue
            start = time.time()
            row = {"torchao": measure(case, zoo.torchao_quantizer())}
            for rule in rules:
                row[rule] = measure(case, qcore.get_quantizer("x86", weight_rule=rule))
            rows.append((case.name, row))
            print(case.name, row, f"{time.time() - start:.0f}s", file=sys.stderr, flush=True)
    tables = (("sqnr", "held-out batch 50"), ("mean", "mean of batches 50-53"), ("joined", "batches 50-53 as one"))
    for key, title in tables:
        print(f"\nSQNR against float (dB), {title}; in brackets: doubled multiply-adds, 7-bit inputs\n")
        print(f"| architecture | torchao | {' | '.join(f'`{rule}`' for rule in rules)} | budgeted - torchao |")
        print(f"|---|---:|{'---:|' * len(rules)}---:|")
        for name, row in rows:
            cells = [f"{row['torchao'][key]:.2f}"]
            for rule in rules:
                r = row[rule]
                cells.append(f"{r[key]:.2f} ({100 * r['extra']:.1f} %, {r['seven']})")
            delta = f"{row['budgeted'][key] - row['torchao'][key]:+.2f}" if "budgeted" in row else "n/a"
            print(f"| {name} | {' | '.join(cells)} | {delta} |")


if __name__ == "__main__":
    main(sys.argv[1:])
