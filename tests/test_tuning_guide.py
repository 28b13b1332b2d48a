"""docs/tuning.md, run as written (every Python block, in order, in a fresh interpreter in
a temporary folder), and what it shows the reader checked: the outlier layer ranked first,
the tuned model back within the tolerance on held-out data with one op in float, the
configuration rebuilding it, and the out-of-reach target reported and warned."""

from __future__ import annotations

import re
from pathlib import Path

from qcore.testing.readme import python_blocks, readme_output

GUIDE = Path(__file__).parents[1] / "docs" / "tuning.md"


def _number(output: str, label: str) -> float:
    match = re.search(rf"{re.escape(label)}:? (-?[\d.]+)", output)
    assert match, f"no '{label}' in:\n{output}"
    return float(match[1])


def test_the_tuning_guide_runs_as_written_and_shows_what_it_says() -> None:
    output = readme_output(GUIDE)
    assert f"{len(python_blocks(GUIDE))} Python blocks ran" in output
    float_accuracy = _number(output, "float accuracy")
    assert float_accuracy >= 0.99
    ranked = [line.split()[1] for line in output.splitlines() if re.match(r"^linear\S* ", line)]
    assert ranked[0] == "embed", output
    assert _number(output, "int8") < float_accuracy - 0.01  # int8 loses accuracy
    assert "in float: ['embed'] of" in output
    assert _number(output, "held-out accuracy of the tuned model") >= float_accuracy - 0.01
    assert _number(output, "rebuilt held-out accuracy") >= float_accuracy - 0.01
    assert "onednn mapping keeps in float: ['embed']" in output
    assert "False | target 80 NOT met" in output
    assert re.search(r"qcore\.tune \(xnnpack\): target 80 NOT met", output), output
