"""Print one closing line for the whole tox matrix from the envs' JUnit reports."""

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
reports = sorted(Path(sys.argv[1]).glob("*.xml"))
for report in reports:
    root = ET.parse(report).getroot()
    for suite in root.iter("testsuite"):
        for key in totals:
            totals[key] += int(suite.get(key, 0))
failed = totals["failures"] + totals["errors"]
passed = totals["tests"] - failed - totals["skipped"]
print(f"JUnit reports of {len(reports)} tox envs")
print(f"tests: {passed} passed, {failed} failed, {totals['skipped']} skipped")
