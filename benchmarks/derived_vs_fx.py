"""The derived PT2E flow against the FX flow on the ImageNet-style architectures.

For each backend (``onednn``, ``executorch``) and each compact replica of
``qcore.zoo.architectures``: ``qcore.fx`` (prepare, calibrate on 4 batches, convert)
and the derived PT2E flow (``torch.export``, ``prepare_pt2e`` with
``qcore.get_quantizer(backend)``, the same batches, ``convert_pt2e``); SQNR of each
against float, of the two against each other, and whether they quantize the same ops
kind by kind (``qcore.zoo.suite.derived.quantized_kinds``; batch norms that ``prepare_pt2e``
folds and FX keeps are not compared).

    python benchmarks/derived_vs_fx.py [NAME ...]
"""

from __future__ import annotations

import sys
import warnings
from collections import Counter

from qcore.metrics import sqnr
from qcore.zoo.architectures import architecture, architecture_cases
from qcore.zoo.suite.derived import run_derived, run_fx


def _same_ops(fx: Counter[str], derived: Counter[str], graph_has_bn: bool) -> bool:
    kept = Counter({k: v for k, v in fx.items() if graph_has_bn or "batch" not in k})
    return kept == derived


def main(names: list[str]) -> None:
    warnings.filterwarnings("ignore")
    names = names or [c.name for c in architecture_cases()]
    print("| backend | model | FX SQNR (dB) | derived SQNR (dB) | FX vs derived (dB) | same ops |")
    print("|---|---|---:|---:|---:|---|")
    for backend in ("onednn", "executorch"):
        for name in names:
            fx = run_fx(architecture(name), backend)
            derived = run_derived(architecture(name), backend)
            has_bn = any("batch_norm" in str(n.target) for n in derived.converted.graph.nodes)
            same = _same_ops(fx.kinds, derived.kinds, has_bn)
            print(
                f"| {backend} | {name} | {fx.sqnr:.1f} | {derived.sqnr:.1f} | "
                f"{sqnr(fx.output, derived.output):.1f} | {'yes' if same else 'no'} |"
            )
            sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
