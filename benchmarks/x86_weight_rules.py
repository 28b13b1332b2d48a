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
import sys
import time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "packages/qinductor-x86/tests"))
import torch
torch.set_num_threads(1)
import qcore, qcore.host
import qcore.pt2e_ranges as pr
from qcore.metrics import sqnr
from qcore.testing.architectures import architecture_cases
from qinductor_x86 import config
import lowering_zoo as zoo
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

def ours(rule):
    config._default_config.cache_clear()
    config._weight_observer = lambda q, d: pr.weight_observer_ctr(rule=rule, eps=config.EPS)
    return qcore.get_quantizer("x86")

def run(case, quantizer):
    model = case.model(); ex = case.inputs(0)
    gm = torch.export.export(model, ex).module()
    prepared = prepare_pt2e(gm, quantizer)
    with torch.no_grad():
        for b in range(1, 4): prepared(*case.inputs(b))
        conv = convert_pt2e(prepared)
        held = case.inputs(50)
        from qcore.saturation import worst_case_pair_sum
        dq = torch.ops.quantized_decomposed.dequantize_per_channel.default
        ws = [conv.get_buffer(str(n.args[0].target)) for n in conv.graph.nodes if n.target is dq]
        deep = sum(worst_case_pair_sum(w, act_max=255) > 32767 for w in ws)
        return round(sqnr(model(*held), conv(*held)), 2), f"{deep}/{len(ws)}"

names = sys.argv[1:]
with qcore.host.targeting("avx2"):
    for case in architecture_cases():
        if names and case.name not in names: continue
        t = time.time()
        row = {"torchao": run(case, zoo.torchao_quantizer())}
        row["never_overflow"] = run(case, ours("never_overflow"))
        for budget in (0.5, 1.0):
            pr.PER_LAYER_BUDGET_DB = budget
            row[f"per_layer@{budget}"] = run(case, ours("per_layer"))
        print(case.name, row, f"{time.time()-t:.0f}s", flush=True)
