"""Time upstream's histogram range search against qcore's on the same calibrated
observers, and check that every range is the same: PT2E, torchao's search against
``qcore.pt2e.histogram``'s on the x86 quantizer's activation observers; FX (``--fx``),
torch.ao's against ``qcore.fx.histogram``'s on those of torch's default oneDNN mapping
(``prepare_fx`` with torch's oneDNN backend config). Each ImageNet-style replica is
calibrated on four batches; both searches run one after the other, in one process, on
one thread.

    python benchmarks/histogram_search.py [--fx] [replica ...]

``--kit`` times instead the conformance kit (``check_backend_config``) on torch's oneDNN
backend config with torch's oneDNN mapping, which it calibrates with the FX twin: once with
the twin searching as torch.ao does (its method put back), once as it ships.

    python benchmarks/histogram_search.py --kit
"""

from __future__ import annotations

import sys
import time
from typing import Any

import torch
from torch.ao.quantization import get_default_qconfig_mapping
from torch.ao.quantization.backend_config import get_onednn_backend_config
from torch.ao.quantization.observer import HistogramObserver as TorchHistogramObserver
from torch.ao.quantization.quantize_fx import prepare_fx
from torchao.quantization.pt2e import HistogramObserver as TorchaoHistogramObserver
from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

import qcore
from qcore import host
from qcore.fx.histogram import with_faster_histograms
from qcore.int8.engine import quantized_engine
from qcore.zoo.architectures import architecture, architecture_cases


def _prepared(name: str, fx: bool) -> torch.nn.Module:
    case = architecture(name)
    model = case.model().eval()
    if fx:
        mapping = with_faster_histograms(get_default_qconfig_mapping("onednn"))
        with quantized_engine("onednn"):
            prepared = prepare_fx(model, mapping, case.inputs(0), backend_config=get_onednn_backend_config())
    else:
        with host.targeting("avx512_vnni"):
            exported = torch.export.export(model, case.inputs(0)).module()
            prepared = prepare_pt2e(exported, qcore.get_quantizer("x86"))
    with torch.no_grad():
        for batch in range(4):
            prepared(*case.inputs(batch))
    return prepared


def _observers(name: str, upstream: type[Any], fx: bool) -> list[Any]:
    return [m for m in _prepared(name, fx).modules() if isinstance(m, upstream)]


def _timed(search: object, observers: list[Any]) -> tuple[float, list[list[float]]]:
    start = time.perf_counter()
    ranges = [[t.item() for t in search(o)] for o in observers]  # type: ignore[operator]
    return time.perf_counter() - start, ranges


def kit() -> None:
    from qcore._torch_private import ensure_backend_config_utils
    from qcore.fx.histogram import HistogramObserver
    from qcore.testing.backend_checks import check_backend_config

    ensure_backend_config_utils()
    ours = HistogramObserver._non_linear_param_search
    print("| search | patterns | kit (s) | passed |")
    print("|---|---:|---:|---:|")
    for label, search in (("torch.ao's", TorchHistogramObserver._non_linear_param_search), ("qcore's", ours)):
        HistogramObserver._non_linear_param_search = search  # type: ignore[method-assign]
        start = time.perf_counter()
        results = check_backend_config(
            get_onednn_backend_config(), lambda model, is_qat: get_default_qconfig_mapping("onednn"), engine="onednn"
        )
        took = time.perf_counter() - start
        print(f"| {label} | {len(get_onednn_backend_config().configs)} | {took:.1f} | {sum(r.ok for r in results)} of {len(results)} |")
    HistogramObserver._non_linear_param_search = ours  # type: ignore[method-assign]


def main(args: list[str]) -> None:
    torch.set_num_threads(1)
    if "--kit" in args:
        kit()
        return
    fx = "--fx" in args
    names = [a for a in args if a != "--fx"]
    upstream = TorchHistogramObserver if fx else TorchaoHistogramObserver
    print(f"| replica | observers | {'torch.ao' if fx else 'torchao'}'s search (s) | qcore's (s) | ratio | same ranges |")
    print("|---|---:|---:|---:|---:|---|")
    for name in names or [c.name for c in architecture_cases()]:
        observers = _observers(name, upstream, fx)
        assert observers and all(type(o) is not upstream for o in observers)  # qcore's twins
        theirs, their_ranges = _timed(upstream._non_linear_param_search, observers)
        ours, our_ranges = _timed(lambda o: o._non_linear_param_search(), observers)
        same = "yes" if our_ranges == their_ranges else "NO"
        print(f"| {name} | {len(observers)} | {theirs:.2f} | {ours:.2f} | {theirs / ours:.1f} | {same} |")


if __name__ == "__main__":
    main(sys.argv[1:])
