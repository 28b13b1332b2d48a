"""Eager SQNR of the x86 quantizer's weight rules on a CPU without VNNI, against torchao's.

For every replica in ``qcore.testing.architectures`` (seeded random weights), quantized for
an ``avx2`` target: torchao 0.18's ``X86InductorQuantizer`` (full-range weights), ours with
``never_overflow`` weights, and ours with ``per_layer`` at two budgets. Each cell is the
eager converted model's SQNR against float on a held-out batch (what the x86 lowering
computes exactly) and how many weighted layers can overflow an int16 pair, i.e. run on a
doubled reduction under the lowering.

    python benchmarks/x86_weight_rules.py [ARCHITECTURE ...]

Needs torchao and the x86 package's test helpers (``packages/qinductor-x86/tests``).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "packages/qinductor-x86/tests"))

import lowering_zoo as zoo
import torch
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

import qcore
import qcore.int8.pt2e_ranges
from qcore.int8.saturation import INT16_MAX, worst_case_pair_sum
from qcore.metrics import sqnr
from qcore.testing.architectures import architecture_cases
from qcore.testing.models import ModelCase

BUDGETS = (0.5, 1.0)


def ours(rule: qcore.int8.pt2e_ranges.RangeRule) -> Any:
    return qcore.get_quantizer("x86", weight_rule=rule)


def measure(case: ModelCase, quantizer: Any) -> tuple[float, str]:
    """(SQNR in dB, "layers that can overflow / weighted layers")."""
    model = case.model()
    prepared = prepare_pt2e(torch.export.export(model, case.inputs(0)).module(), quantizer)
    with torch.no_grad():
        for batch in range(1, 4):
            prepared(*case.inputs(batch))
        converted = convert_pt2e(prepared)
        held_out = case.inputs(50)
        error = sqnr(model(*held_out), converted(*held_out))
    dequantize = torch.ops.quantized_decomposed.dequantize_per_channel.default
    weights = [
        converted.get_buffer(str(n.args[0].target))
        for n in converted.graph.nodes
        if n.target is dequantize
    ]
    deep = sum(worst_case_pair_sum(w, act_max=255) > INT16_MAX for w in weights)
    return round(error, 2), f"{deep}/{len(weights)}"


def main(names: list[str]) -> None:
    torch.set_num_threads(1)
    with qcore.host.targeting("avx2"):
        for case in architecture_cases():
            if names and case.name not in names:
                continue
            start = time.time()
            row = {"torchao": measure(case, zoo.torchao_quantizer())}
            row["never_overflow"] = measure(case, ours("never_overflow"))
            default = qcore.int8.pt2e_ranges.PER_LAYER_BUDGET_DB
            for budget in BUDGETS:
                qcore.int8.pt2e_ranges.PER_LAYER_BUDGET_DB = budget
                row[f"per_layer@{budget}"] = measure(case, ours("per_layer"))
            qcore.int8.pt2e_ranges.PER_LAYER_BUDGET_DB = default
            print(case.name, row, f"{time.time() - start:.0f}s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
