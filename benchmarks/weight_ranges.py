"""SQNR of the oneDNN FX flow on compact ImageNet architectures: torch's ranges vs ours.

For every replica in ``qcore.zoo.architectures`` (random weights, seeded), on this
host with ``torch.backends.quantized.engine = "onednn"``, the SQNR of the quantized
model's logits against the float model's, on held-out batches (never seen in
calibration), for four flows:

* **torch default**: ``get_default_qconfig_mapping("onednn")``, ``prepare_fx`` /
  ``convert_fx`` with ``qcore.get_backend_config("onednn")``;
* **blanket 7-bit**: the same with every per-channel weight observer narrowed to
  ``[-64, 63]``, which cannot saturate anywhere;
* **ours**: ``qcore.fx.quantize(model, "onednn", calibration_batches)``, which picks each
  layer's weight range for the target CPU (``qcore.host.target()``);
* **reference ceiling**: torch's mapping converted with ``convert_to_reference_fx``:
  exact int8 arithmetic, so no saturation whatever the CPU.

``channels narrowed / total``: from ``qcore.fx.weight_ranges(converted)``, the output
channels given a narrower-than-full weight range, out of all channels of the layers
decided per layer.

    /work/venv/bin/python benchmarks/weight_ranges.py            # every architecture
    /work/venv/bin/python benchmarks/weight_ranges.py resnet50 swin --threads 2
    /work/venv/bin/python benchmarks/weight_ranges.py --seed 1 --calibration 1
    /work/venv/bin/python benchmarks/weight_ranges.py --target avx512_vnni   # ours == torch
"""

from __future__ import annotations

import argparse
import contextlib
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import torch
from torch import Tensor, nn
from torch.ao.quantization import QConfig, QConfigMapping, get_default_qconfig_mapping
from torch.ao.quantization.observer import PerChannelMinMaxObserver
from torch.ao.quantization.quantize_fx import convert_fx, convert_to_reference_fx, prepare_fx

import qcore
import qcore.fx
from qcore.int8.cpu_profile import probe, target, targeting
from qcore.int8.engine import quantized_engine
from qcore.int8.weight_ranges import map_qconfigs
from qcore.metrics import sqnr
from qcore.zoo.architectures import architecture, architecture_cases
from qcore.zoo.models import Inputs, ModelCase

#: Held-out batches: far from the calibration batches (0, 1, ...), 16 images in all.
HELD_OUT = range(100, 104)

SEVEN_BIT_WEIGHT = PerChannelMinMaxObserver.with_args(
    dtype=torch.qint8, qscheme=torch.per_channel_symmetric, quant_min=-64, quant_max=63
)


def torch_mapping() -> QConfigMapping:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's "may have accuracy issues" (non-VNNI)
        return get_default_qconfig_mapping("onednn")


def seven_bit_mapping() -> QConfigMapping:
    """torch's mapping with each per-channel qint8 weight observer narrowed to [-64, 63]."""

    def narrow(qconfig: QConfig | None) -> QConfig | None:
        if qconfig is None or qconfig.weight is None:
            return qconfig
        weight = qconfig.weight()
        if isinstance(weight, PerChannelMinMaxObserver) and weight.dtype == torch.qint8:
            return QConfig(activation=qconfig.activation, weight=SEVEN_BIT_WEIGHT)  # type: ignore[no-untyped-call]
        return qconfig

    return map_qconfigs(torch_mapping(), narrow)


def torch_flow(
    case: ModelCase,
    mapping: QConfigMapping,
    convert: Callable[..., nn.Module],
    calibration: int,
) -> nn.Module:
    """``prepare_fx`` -> calibrate -> ``convert`` with qcore's onednn backend config."""
    config = qcore.get_backend_config("onednn")
    batches = case.calibration_batches(calibration)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prepared = prepare_fx(case.model(), mapping, batches[0], backend_config=config)
        with torch.no_grad():
            for batch in batches:
                prepared(*batch)
        return convert(prepared, backend_config=config)


def ours(case: ModelCase, calibration: int) -> nn.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return qcore.fx.quantize(case.model(), "onednn", case.calibration_batches(calibration))


def held_out(case: ModelCase) -> Inputs:
    batches = [case.inputs(b) for b in HELD_OUT]
    return tuple(torch.cat(parts) for parts in zip(*batches, strict=True))


@dataclass
class Row:
    name: str
    torch_default: float
    seven_bit: float
    ours: float
    reference: float
    narrowed: int
    channels: int
    layers: int
    seconds: float

    def markdown(self) -> str:
        return (
            f"| {self.name} | {self.torch_default:.1f} | {self.seven_bit:.1f} | {self.ours:.1f} "
            f"| {self.ours - self.torch_default:+.1f} | {self.reference:.1f} "
            f"| {self.narrowed} / {self.channels} ({self.layers} layers) |"
        )


def measure(case: ModelCase, calibration: int = 4) -> Row:
    start = time.perf_counter()
    inputs = held_out(case)
    with torch.no_grad():
        expected: Tensor = case.model()(*inputs)

    def score(model: nn.Module) -> float:
        with torch.no_grad():
            return sqnr(expected, model(*inputs))

    with quantized_engine("onednn"):
        default = score(torch_flow(case, torch_mapping(), convert_fx, calibration))
        seven = score(torch_flow(case, seven_bit_mapping(), convert_fx, calibration))
        converted = ours(case, calibration)
        mine = score(converted)
        reference = score(torch_flow(case, torch_mapping(), convert_to_reference_fx, calibration))
    ranges = qcore.fx.weight_ranges(converted)  # type: ignore[arg-type]
    return Row(
        case.name,
        default,
        seven,
        mine,
        reference,
        sum(c.narrowed for c in ranges.values()),
        sum(len(c.half_ranges) for c in ranges.values()),
        len(ranges),
        time.perf_counter() - start,
    )


HEADER = (
    "| model | torch default | blanket 7-bit | ours | ours - torch default "
    "| reference ceiling | channels narrowed / total |\n"
    "|---|---:|---:|---:|---:|---:|---:|"
)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="architectures (default: all)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--seed", type=int, default=0, help="weights and inputs (default 0)")
    parser.add_argument(
        "--target", default=None, help="int8 target for ours, e.g. avx512_vnni (default: host)"
    )
    parser.add_argument(
        "--calibration", type=int, default=4, help="calibration batches of 4 images (default 4)"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    cases = [architecture(n) for n in args.names] if args.names else architecture_cases()
    cases = [replace(c, seed=args.seed) for c in cases]
    with contextlib.ExitStack() as stack:
        if args.target:
            stack.enter_context(targeting(args.target))
        _run(cases, args.seed, args.calibration)


def _run(cases: list[ModelCase], seed: int, calibration: int) -> None:
    print(f"host: {probe().describe()}")
    print(f"target: {target().isa} ({target().source}); torch {torch.__version__}")
    print(
        f"SQNR (dB) of the logits against float on held-out batches, engine onednn, "
        f"seed {seed}, {calibration} calibration batches\n"
    )
    print(HEADER, flush=True)
    rows = []
    for case in cases:
        row = measure(case, calibration)
        rows.append(row)
        print(row.markdown(), flush=True)
    worst = min(rows, key=lambda r: r.ours - r.torch_default)
    print(
        f"\nworst ours - torch default: {worst.ours - worst.torch_default:+.2f} dB ({worst.name}); "
        f"total {sum(r.seconds for r in rows):.0f} s"
    )


if __name__ == "__main__":
    main()
