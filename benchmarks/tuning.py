"""What ``qcore.sensitivity`` costs as a model grows: forward passes and time, per flow.

Models: a stack of ``N`` blocks ``linear -> relu`` (width 32) whose input carries an
outlier feature, so that ``N`` sets the number of quantized ops. For each size and flow:
the ops found, the time to prepare, calibrate (4 batches) and build the switchable
reference model once, the forward passes the measurement ran (counted by a hook on the
reference model), its time, and that time in forward passes of the reference model with
every op quantized (timed on its own). The last column times a whole ``qcore.tune`` to a
target out of reach, so that it walks to its budget (10 % of the ops) and builds the
result for real. A linear cost is a constant number of forward
passes per op, whatever ``N``; each pass itself costs more in a larger model.

    OMP_NUM_THREADS=1 python benchmarks/tuning.py --sizes 20 40 80 160 --flows xnnpack onednn
"""

from __future__ import annotations

import argparse
import time
import warnings
from typing import Any

import torch
from torch import nn

import qcore
from qcore.tuning.sensitivity import Session


class Stack(nn.Module):
    def __init__(self, blocks: int) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            *(m for _ in range(blocks) for m in (nn.Linear(32, 32), nn.ReLU()))
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def _inputs(generator: torch.Generator) -> torch.Tensor:
    x = torch.randn(64, 32, generator=generator)
    x[:, 0] *= 100
    return x


def measure(blocks: int, flow: str) -> dict[str, Any]:
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    model = Stack(blocks).eval()
    calibration = [_inputs(generator) for _ in range(4)]
    example = (_inputs(generator),)
    start = time.perf_counter()
    session = Session(model, example, calibration, flow)
    setup = time.perf_counter() - start
    passes = 0

    def count(*_: Any) -> None:
        nonlocal passes
        passes += 1

    handle = session.board.model.register_forward_pre_hook(count)
    start = time.perf_counter()
    session.costs()
    measuring = time.perf_counter() - start
    handle.remove()
    quantized = session.board.quantize_all_but(())
    with torch.no_grad():
        quantized(*example)
        start = time.perf_counter()
        for _ in range(10):
            quantized(*example)
        one = (time.perf_counter() - start) / 10
    ops = len(session.ops)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the target is out of reach on purpose
        qcore.tune(model, example, calibration, flow, target_sqnr_db=200.0)
    tuning = time.perf_counter() - start
    return {
        "tune": tuning,
        "blocks": blocks,
        "flow": flow,
        "ops": ops,
        "setup": setup,
        "passes": passes,
        "measure": measuring,
        "in_passes": measuring / one,
        "per_op": measuring / one / ops,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 40, 80, 160])
    parser.add_argument("--flows", nargs="+", default=["xnnpack", "onednn"])
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    for flow in args.flows:
        measure(min(args.sizes), flow)  # imports and first-call costs, not timed below
    print(
        "| flow | blocks | ops | prepare + calibrate + switches (s) | forward passes | "
        "measure (s) | measure in forward passes | forward passes per op | "
        "qcore.tune, 10 % in float (s) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for flow in args.flows:
        for blocks in args.sizes:
            r = measure(blocks, flow)
            print(
                f"| {r['flow']} | {r['blocks']} | {r['ops']} | {r['setup']:.2f} | "
                f"{r['passes']} | {r['measure']:.2f} | {r['in_passes']:.0f} | "
                f"{r['per_op']:.2f} | {r['tune']:.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
