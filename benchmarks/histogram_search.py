"""Time torchao's histogram range search against qcore's (``qcore.pt2e.histogram``) on
the activation observers of the x86 quantizer, calibrated on four batches of each
ImageNet-style replica: both searches on the same observers, one after the other, in one
process, on one thread; and check that every range is the same.

    python benchmarks/histogram_search.py [replica ...]
"""

from __future__ import annotations

import sys
import time

import torch
from torchao.quantization.pt2e import HistogramObserver as TorchaoHistogramObserver
from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

import qcore
from qcore import host
from qcore.zoo.architectures import architecture, architecture_cases


def _observers(name: str) -> list[TorchaoHistogramObserver]:
    case = architecture(name)
    model = case.model().eval()
    with host.targeting("avx512_vnni"):
        exported = torch.export.export(model, case.inputs(0)).module()
        prepared = prepare_pt2e(exported, qcore.get_quantizer("x86"))
    with torch.no_grad():
        for batch in range(4):
            prepared(*case.inputs(batch))
    return [m for m in prepared.modules() if isinstance(m, TorchaoHistogramObserver)]


def _timed(search: object, observers: list[TorchaoHistogramObserver]) -> tuple[float, list[list[float]]]:
    start = time.perf_counter()
    ranges = [[t.item() for t in search(o)] for o in observers]  # type: ignore[operator]
    return time.perf_counter() - start, ranges


def main(names: list[str]) -> None:
    torch.set_num_threads(1)
    print("| replica | observers | torchao's search (s) | qcore's (s) | ratio | same ranges |")
    print("|---|---:|---:|---:|---:|---|")
    for name in names or [c.name for c in architecture_cases()]:
        observers = _observers(name)
        theirs, their_ranges = _timed(TorchaoHistogramObserver._non_linear_param_search, observers)
        ours, our_ranges = _timed(lambda o: o._non_linear_param_search(), observers)
        same = "yes" if our_ranges == their_ranges else "NO"
        print(f"| {name} | {len(observers)} | {theirs:.2f} | {ours:.2f} | {theirs / ours:.1f} | {same} |")


if __name__ == "__main__":
    main(sys.argv[1:])
