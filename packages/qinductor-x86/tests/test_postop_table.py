"""Adding an x86 post-op is one row of ``qinductor_x86.postop_table``: the quantizer's
annotators and the lowering's patterns both follow it.

The probe drops the tanh row, then adds it back as a contributor would write it; each
table is read in a fresh interpreter, compiled once.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import lowering_zoo as zoo
import pytest


@pytest.fixture(scope="module")
def row_probes() -> dict[str, dict[str, Any]]:
    with ThreadPoolExecutor(2) as pool:  # two interpreters side by side
        runs = {
            m: pool.submit(zoo.run_script, "postop_row_probe.py", m) for m in ("without", "added")
        }
        return {mode: run.result() for mode, run in runs.items()}


def _fused_tanh(result: dict[str, Any]) -> list[str]:
    return [name for name in result["lowered"] if name.startswith("linear + tanh")]


def test_without_the_row_neither_side_fuses_tanh(row_probes: dict[str, dict[str, Any]]) -> None:
    without = row_probes["without"]
    assert not without["tanh_annotated"]
    # the kernel's float output runs into tanh, which the lowering would fuse with the row
    assert not _fused_tanh(without), without["lowered"]


def test_one_added_row_reaches_the_quantizer_and_the_lowering(
    row_probes: dict[str, dict[str, Any]],
) -> None:
    added = row_probes["added"]
    assert added["shipped_row_is_the_new_row"]
    assert added["tanh_annotated"]
    assert _fused_tanh(added) == ["linear + tanh + quantize (int8 output)"], added["lowered"]
    assert added["relative_l2"] <= 2e-2
