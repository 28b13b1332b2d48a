"""Time ``annotate()`` on generated graphs of growing size, ours vs ExecuTorch 1.5.1's.

Each layer is ``linear → relu``, ``conv → relu`` or ``x * 0.5 + y`` in turn, so
every annotator family sees work. Graphs are exported once per size; each quantizer
annotates a fresh copy. Reports the median of ``--repeat`` runs and the ratio.

    python -m venv --system-site-packages /tmp/etvenv
    /tmp/etvenv/bin/pip install --no-deps executorch==1.5.1
    /tmp/etvenv/bin/python benchmarks/annotate_scaling.py --sizes 250 1000 4000

``--derived`` times the quantizers qcore derives from the ``onednn`` and ``executorch``
FX backends (``qcore.get_quantizer(backend)``, one annotator per backend pattern) next to
the hand-written XNNPACK quantizer instead:

    python benchmarks/annotate_scaling.py --derived --sizes 250 1000 4000
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).parents[1] / "packages/qquantizer-xnnpack/tests"))


class Stack(nn.Module):
    def __init__(self, layers: int) -> None:
        super().__init__()
        self.linears = nn.ModuleList(nn.Linear(8, 8) for _ in range(layers // 3 + 1))
        self.convs = nn.ModuleList(nn.Conv2d(2, 2, 1) for _ in range(layers // 3 + 1))
        self.layers = layers

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i in range(self.layers):
            if i % 3 == 0:
                x = torch.relu(self.linears[i // 3](x))
            elif i % 3 == 1:
                x = torch.relu(self.convs[i // 3](x.reshape(1, 2, 2, 2))).reshape(1, 8)
            else:
                x = x * 0.5 + x
        return x


def _time(quantizer: Any, gm: torch.fx.GraphModule, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        g = quantizer.transform_for_annotation(copy.deepcopy(gm))
        start = time.perf_counter()
        quantizer.annotate(g)
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[250, 1000, 4000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--derived", action="store_true", help="derived onednn/executorch vs xnnpack"
    )
    args = parser.parse_args()
    if args.derived:
        derived_table(args.sizes, args.repeat)
        return

    from qquantizer_xnnpack.quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

    ours = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    try:
        import et_reference

        ref = et_reference.load()
        theirs = ref.XNNPACKQuantizer().set_global(
            ref.get_symmetric_quantization_config(is_per_channel=True)
        )
    except Exception as exc:  # noqa: BLE001 - the comparison is optional
        print(f"ExecuTorch reference unavailable ({exc}); timing ours only")
        theirs = None

    print("| layers | graph nodes | qcore xnnpack (s) | ExecuTorch 1.5.1 (s) | ratio |")
    print("|---:|---:|---:|---:|---:|")
    for size in args.sizes:
        gm = torch.export.export(Stack(size).eval(), (torch.randn(1, 8),)).module()
        nodes = len(gm.graph.nodes)
        t_ours = _time(ours, gm, args.repeat)
        if theirs is not None:
            t_theirs = _time(theirs, gm, args.repeat)
            print(f"| {size} | {nodes} | {t_ours:.3f} | {t_theirs:.3f} | {t_ours / t_theirs:.2f} |")
        else:
            print(f"| {size} | {nodes} | {t_ours:.3f} | - | - |")
        sys.stdout.flush()


def derived_table(sizes: list[int], repeat: int) -> None:
    """Annotate time of the derived quantizers and of the hand-written XNNPACK one."""
    import qcore

    quantizers = {
        "xnnpack (hand-written)": qcore.get_quantizer("xnnpack", is_per_channel=True),
        # built (patterns derived, annotators registered) here, once, not timed
        "onednn (derived)": qcore.get_quantizer("onednn"),
        "executorch (derived)": qcore.get_quantizer("executorch"),
    }
    names = list(quantizers)
    print("| layers | graph nodes | " + " | ".join(f"{n} (s)" for n in names) + " |")
    print("|---:|---:|" + "---:|" * len(names))
    for size in sizes:
        gm = torch.export.export(Stack(size).eval(), (torch.randn(1, 8),)).module()
        times = [_time(quantizers[n], gm, repeat) for n in names]
        cells = " | ".join(f"{t:.3f}" for t in times)
        print(f"| {size} | {len(gm.graph.nodes)} | {cells} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
