"""docs/huggingface.md, run as written (every Python block, in order, in a fresh
interpreter in a temporary folder, as ``qcore.testing.readme`` runs a README), and what it
prints checked: each flow's accuracy against the float model, the int8 kernels of the
compiled x86 model, the export error and the float-kept masks it shows the reader."""

from __future__ import annotations

import re
from pathlib import Path

from qcore.testing.readme import python_blocks, readme_output

GUIDE = Path(__file__).parents[1] / "docs" / "huggingface.md"
MIN_SQNR = 25.0


def _db(output: str, label: str) -> float:
    match = re.search(rf"^{re.escape(label)}: (-?[\d.]+|inf) dB", output, re.MULTILINE)
    assert match, f"no '{label}' line in:\n{output}"
    return float(match[1])


def test_the_guide_runs_as_written_and_every_flow_is_accurate() -> None:
    output = readme_output(GUIDE)  # fails on a block skipped without a reason, too
    assert f"{len(python_blocks(GUIDE))} Python blocks ran" in output
    for label in ("XNNPACK", "x86, compiled", "onednn (derived)", "executorch (derived)"):
        assert _db(output, label) >= MIN_SQNR, label
    kernels = re.search(r"x86, compiled: .* dB, (\d+) int8 kernels", output)
    assert kernels and int(kernels[1]) == 12  # 2 layers x (q, k, v, out, up, down)
    assert "cannot export Sequential at the given shapes" in output
    assert "in '1' (Clipped)" in output and "`if x.max() > 1:" in output
    assert len(re.findall(r"^add_\d+ .*additive mask", output, re.MULTILINE)) == 2
