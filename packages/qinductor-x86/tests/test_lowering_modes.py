"""The lowering alone (torch 2.13's copy switched off), and next to torchao's copy.

Next to torch's own copy (torch's default) is every other test module of this suite.
Each mode is process-wide and permanent, so each runs in the interpreter of its own
(``probe_modes.py``). Alone: the models the standalone interpreter compiles for the
counters and the held-out models (a conv stem quantized by the x86 quantizer, weights
narrowed; an MLP quantized by the XNNPACK quantizer, full-range weights) are checked here
for what this lowering alone must do, and torch must have registered nothing after every
compile of that interpreter.
"""

from __future__ import annotations

from typing import Any

import parity_models as pm
from torch import nn

PROBED = (("standalone", "counters"), ("standalone", "models"), ("reference", "chained"))


def _prepacked(lowered: dict[str, int]) -> int:
    return sum(n for name, n in lowered.items() if "weight prepack" in name)


def test_standalone_with_torchs_copy_switched_off(probes: Any) -> None:
    # torch registered nothing, even after compiling every model of the interpreter (after
    # each part it ran, the last included)
    parts = {k: v for k, v in probes.mode("standalone").items() if not k.startswith("_")}
    assert {"counters", "models"} <= set(parts)
    for part, measured in parts.items():
        assert not any(measured["_other_passes"].values()), (part, measured["_other_passes"])

    conv = probes.result("standalone", "counters")["conv stem (zoo)"]  # x86 quantizer
    assert _prepacked(conv["lowered"]) == 5, conv["lowered"]
    assert len(conv["kernels"]) == conv["reported_kernels"] == 5
    assert conv["relative_l2"] <= 2e-2
    # the counters come from this lowering alone here
    assert conv["counters"]["qconv_weight_prepack_matcher_count"] == 5
    # torch 2.13 renamed the seed's qconv2d_unary_matcher; alone, both keys count the same
    assert conv["counters"]["qconv2d_unary_matcher_count"] == conv["counters"]["qconv_unary_matcher_count"] == 4

    mlp = probes.result("standalone", "models")["mlp"]["xnnpack"]  # XNNPACK's quantizer
    linears = sum(isinstance(m, nn.Linear) for m in pm.build("mlp")[0].modules())
    assert _prepacked(mlp["lowered"]) == linears, mlp["lowered"]
    assert mlp["kernels"] == mlp["reported_kernels"] == linears
    assert mlp["rel_l2_compiled_vs_eager"] <= 2e-2
    assert mlp["counters"]["qlinear_weight_prepack_matcher_count"] == linears


def test_next_to_torchaos_passes_without_double_rewrites(probes: Any) -> None:
    result = probes.result("reference", "chained")
    assert result["_other_passes"]["torchao weight prepack and fusion"]
    assert result["theirs_kept_in_chain"] and result["theirs_restored"]
    lowered = result["lowered"]
    assert _prepacked(lowered) == 5
    assert result["kernels"] == result["reported_kernels"] == 5
    # torchao's freezing patterns bump the same counters: they found nothing left to do
    assert result["counters"]["qconv_weight_prepack_matcher_count"] == 5
    assert result["relative_l2"] <= 2e-2
