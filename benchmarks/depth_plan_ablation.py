"""What each choice of the ``budgeted`` depth plan costs a replica, measured, next to
what the plan priced it at.

The plan (``qcore.pt2e.range_plan``, ``qcore.int8.depth_plan``) ranks a layer's options
(never-overflow weights, a 7-bit input, a doubled reduction) by a noise estimate made from
the layer alone. This script checks that ranking against the network: for one replica of
``qcore.zoo.architectures``, quantized by default for an ``avx2`` target, and for every
layer the plan leaves on never-overflow weights, it converts the model again with that
one layer doubled, and again with that one layer's input on 7 bits instead, and reports
how much either changes the eager converted model's SQNR against float (mean over
held-out batches), beside the plan's prices and the layer's share of multiply-adds.
Positive: the change helps. torchao 0.18's eager SQNR is the reference line.

    python benchmarks/depth_plan_ablation.py mobilenet_v3 [--batches 8] [--seed 0]

Needs torchao and the x86 package's test helpers (``packages/qinductor-x86/tests``).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "packages/qinductor-x86/tests"))

import lowering_zoo as zoo
import torch

import qcore
from qcore.int8.depth_plan import DepthPlan, LayerPrice
from qcore.metrics import sqnr
from qcore.pt2e import range_plan
from qcore.zoo.architectures import architecture

#: A change to the plan the default made: (the layers as priced, the plan) -> a plan.
Edit = Callable[[list[LayerPrice], DepthPlan], DepthPlan]


class _PlanEditor:
    """Replaces ``range_plan.choose`` (the one place the plan is decided) so that each
    conversion can take the default's plan with one edit, and keeps what it saw."""

    def __init__(self) -> None:
        self.edit: Edit | None = None
        self.prices: list[LayerPrice] = []
        self.plan: DepthPlan | None = None
        self._choose = range_plan.choose
        range_plan.choose = self._chosen  # type: ignore[assignment]

    def _chosen(self, layers: Any, seven_bit_groups: Any, budget: float) -> DepthPlan:
        plan = self._choose(layers, seven_bit_groups, budget)
        self.prices, self.plan = list(layers), plan
        return plan if self.edit is None else self.edit(self.prices, plan)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("name", help="a replica of qcore.zoo.architectures")
    parser.add_argument("--batches", type=int, default=8, help="held-out batches, from 50")
    parser.add_argument("--seed", type=int, default=0, help="the replica's seed (0: the zoo's)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    case = dataclasses.replace(architecture(args.name), seed=args.seed)
    model = case.model()
    calibration = [case.inputs(b) for b in range(1, 4)]
    held_out = [case.inputs(b) for b in range(50, 50 + args.batches)]
    with torch.no_grad():
        floats = [model(*x) for x in held_out]

    def mean_sqnr(converted: torch.fx.GraphModule) -> float:
        with torch.no_grad():
            return statistics.mean(
                float(sqnr(f, converted(*x))) for f, x in zip(floats, held_out, strict=True)
            )

    editor = _PlanEditor()

    def ours(edit: Edit | None) -> float:
        editor.edit = edit
        with qcore.host.targeting("avx2"):
            return mean_sqnr(zoo.quantize(model, case.inputs(0), "x86", calibration))

    torchao = mean_sqnr(zoo.quantize(model, case.inputs(0), "torchao", calibration))
    default = ours(None)
    prices, plan = editor.prices, editor.plan
    assert plan is not None, f"{args.name}: the x86 quantizer made no depth plan"
    total = plan.total_macs
    print(
        f"{args.name}: torchao {torchao:.2f} dB, default {default:.2f} dB ({default - torchao:+.2f}), "
        f"{len(plan.doubled)} layers doubled ({plan.doubled_macs / total:.1%} more multiply-adds), "
        f"{len(plan.seven_bit)} inputs on 7 bits; mean over {args.batches} held-out batches\n"
    )
    print(
        "| layer | multiply-adds | priced: never-overflow | priced: 7-bit | doubled instead (dB) | 7-bit instead (dB) |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    rows = []
    for layer in prices:
        if not layer.can_overflow or layer.key in plan.doubled or layer.group in plan.seven_bit:
            continue

        def doubled(_: list[LayerPrice], p: DepthPlan, key: Any = layer.key) -> DepthPlan:
            return dataclasses.replace(p, doubled=p.doubled | {key})

        def seven(now: list[LayerPrice], p: DepthPlan, key: Any = layer.key) -> DepthPlan:
            # the group is the input observer of this conversion, found by the layer's name
            group = next(x.group for x in now if x.key == key)
            return dataclasses.replace(p, seven_bit=p.seven_bit | {group})

        gains = (ours(doubled) - default, ours(seven) - default)
        share = (layer.macs or 0) / total
        rows.append(
            (
                gains,
                f"| {layer.key} | {share:.1%} | {layer.narrowed:.1e} | {layer.seven_bit:.1e} | "
                f"{gains[0]:+.2f} | {gains[1]:+.2f} |",
            )
        )
    for _, row in sorted(rows, key=lambda r: -max(r[0])):
        print(row, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
