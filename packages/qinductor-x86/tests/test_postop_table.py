"""Adding an x86 post-op is one row of ``qinductor_x86.postop_table``: the quantizer's
annotators and the lowering's patterns both follow it.

The probe drops the tanh row, then adds it back as a contributor would write it; each
table is read in a fresh interpreter, compiled once.
"""

from __future__ import annotations

from typing import Any

import lowering_zoo as zoo
import pytest


@pytest.fixture(scope="module")
def probes() -> dict[str, dict[str, Any]]:
    return {mode: zoo.run_script("postop_row_probe.py", mode) for mode in ("without", "added")}


def _fused_tanh(result: dict[str, Any]) -> list[str]:
    return [name for name in result["lowered"] if name.startswith("linear + tanh")]


def test_without_the_row_neither_side_fuses_tanh(probes: dict[str, dict[str, Any]]) -> None:
    without = probes["without"]
    assert not without["tanh_annotated"]
    # the kernel's float output runs into tanh, which the lowering would fuse with the row
    assert not _fused_tanh(without), without["lowered"]


def test_one_added_row_reaches_the_quantizer_and_the_lowering(
    probes: dict[str, dict[str, Any]],
) -> None:
    added = probes["added"]
    assert added["shipped_row_is_the_new_row"]
    assert added["tanh_annotated"]
    assert _fused_tanh(added) == ["linear + tanh + quantize (int8 output)"], added["lowered"]
    assert added["relative_l2"] <= 2e-2
