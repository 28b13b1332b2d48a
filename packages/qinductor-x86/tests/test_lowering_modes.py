"""The lowering alone (torch 2.13's copy switched off), and next to torchao's copy.

Next to torch's own copy (torch's default) is every other test module of this suite.
Each mode is process-wide and permanent, so each runs in an interpreter of its own
(lowering_probe.py).
"""

from __future__ import annotations

from typing import Any

import lowering_zoo as zoo


def _probe(mode: str) -> dict[str, Any]:
    return zoo.run_script("lowering_probe.py", mode)  # type: ignore[no-any-return]


def _prepacked(lowered: dict[str, int]) -> int:
    return sum(n for name, n in lowered.items() if "weight prepack" in name)


def test_standalone_with_torchs_copy_switched_off() -> None:
    probe = _probe("standalone")
    # torch registered nothing, even after compiling
    assert not any(probe["other_passes"].values()), probe["other_passes"]
    for name, result in probe["results"].items():
        lowered = result["lowered"]
        assert _prepacked(lowered) == 5 if "conv" in name else 3, (name, lowered)
        assert result["kernels"] == result["reported_kernels"] == _prepacked(lowered)
        assert result["relative_l2"] <= 2e-2, name
        # the counters come from this lowering alone here
        prepack_key = "qconv_weight_prepack_matcher_count" if "conv" in name else "qlinear_weight_prepack_matcher_count"
        assert result["counters"][prepack_key] == _prepacked(lowered)
    # torch 2.13 renamed the seed's qconv2d_unary_matcher; alone, both keys count the same
    conv = probe["results"]["conv, x86 quantizer"]["counters"]
    assert conv["qconv2d_unary_matcher_count"] == conv["qconv_unary_matcher_count"] == 4


def test_next_to_torchaos_passes_without_double_rewrites() -> None:
    probe = _probe("torchao")
    assert probe["other_passes"]["torchao weight prepack and fusion"]
    assert probe["theirs_kept_in_chain"] and probe["theirs_restored"]
    result = probe["result"]
    lowered = result["lowered"]
    assert _prepacked(lowered) == 5
    assert result["kernels"] == result["reported_kernels"] == 5
    # torchao's freezing patterns bump the same counters: they found nothing left to do
    assert result["counters"]["qconv_weight_prepack_matcher_count"] == 5
    assert result["relative_l2"] <= 2e-2
