"""``qcore.tune`` on trained weights shipped inside a wheel: MTCNN's ONet (facenet-pytorch),
as ``qcore.zoo.pretrained.onet_crops`` builds it (the package itself, which pins an
old torch, is installed without its dependencies and never imported: only its weights
file is read). No face crops ship with it, so the measure is the output SQNR against
float on smooth random 48x48 crops, normalised as MTCNN normalises its input; the
held-out column is the worst of four batches other than the calibration and example ones.

    pip install --no-deps facenet-pytorch==2.6.0
    OMP_NUM_THREADS=1 python benchmarks/tuning_onet.py --target 38
"""

from __future__ import annotations

import argparse
import warnings

import torch

import qcore
from qcore.zoo.pretrained import onet_crops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--flows", nargs="+", default=["xnnpack", "x86", "onednn", "executorch"])
    parser.add_argument("--target", type=float, default=30.0)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    case = onet_crops()
    print("| flow | ops | int8 (dB) | tuned (dB) | held-out tuned, worst batch (dB) | in float | met |")
    print("|---|---:|---:|---:|---:|---|---|")
    for flow in args.flows:
        result = qcore.tune(case.model, case.example_inputs, case.calibration, flow,
                            target_sqnr_db=args.target)  # fmt: skip
        floating = ", ".join(op.module_path for op in result.float_ops) or "none"
        print(f"| {flow} | {len(result.quantizable_ops)} | {result.int8_score:.1f} | "
              f"{result.score:.1f} | {case.heldout_sqnr(result.model):.1f} | {floating} | "
              f"{'yes' if result.met else 'no: ' + result.message} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
