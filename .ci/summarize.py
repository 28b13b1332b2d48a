"""The closing summary of a tox matrix: per env its wall time, outcome and three slowest
tests; envs that left no report (a crash) with the test that was running; then one
closing line with the counts of every env.

    python .ci/summarize.py RESULTS_DIR [TOX_LOG]

RESULTS_DIR holds each env's JUnit report (``{env_name}.xml``); TOX_LOG is tox's output,
read for the envs tox ran, their wall times (setup included) and faulthandler's stacks.
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ENV_LINE = re.compile(r"^\s*([\w.-]+): (OK|FAIL) \S+ in (.+?)\s*$", re.M)
# tox's closing report: "  x86: FAIL code 1 (755.34=setup[0.02]+cmd[755.32] seconds)"
REPORT_LINE = re.compile(r"^\s+([\w.-]+): (OK|FAIL)[^(\n]*\(([\d.]+)=", re.M)
# "exit -11 (76.60 seconds) /path> python -m pytest ... --junitxml=.../results/NAME.xml"
CRASH_LINE = re.compile(r"exit (-\d+) .*?results/([\w.-]+)\.xml")
# faulthandler's stack: the innermost frame in a test module names the test
TEST_FRAME = re.compile(r'File "([^"]*?(?:tests?\w*)/[^"]*\.py)", line (\d+) in (test_\w+)')


def seconds(text: str) -> float:
    total = 0.0
    for amount, unit in re.findall(r"([\d.]+) (hour|minute|second)", text):
        total += float(amount) * {"hour": 3600, "minute": 60, "second": 1}[unit]
    return total


def main(results: Path, log_path: Path | None) -> int:
    log = log_path.read_text(errors="replace") if log_path and log_path.exists() else ""
    walls = {name: (status, seconds(t)) for name, status, t in ENV_LINE.findall(log)}
    walls |= {name: (status, float(t)) for name, status, t in REPORT_LINE.findall(log)}
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    reports = {p.stem: p for p in sorted(results.glob("*.xml"))}
    rows = []
    for name in sorted(set(walls) | set(reports), key=lambda n: -walls.get(n, ("", 0.0))[1]):
        status, wall = walls.get(name, ("?", 0.0))
        slowest = ""
        if name in reports:
            root = ET.parse(reports[name]).getroot()
            for suite in root.iter("testsuite"):
                for key in totals:
                    totals[key] += int(suite.get(key, 0))
            cases = sorted(root.iter("testcase"), key=lambda c: -float(c.get("time", 0)))[:3]
            slowest = ", ".join(f"{c.get('name')} {float(c.get('time', 0)):.0f}s" for c in cases)
        rows.append(f"  {name:<18} {status:<4} {wall:7.0f}s  {slowest}")
    print("tox envs by wall time (setup included), with their three slowest tests:")
    print("\n".join(rows))
    passed = totals["tests"] - totals["failures"] - totals["errors"] - totals["skipped"]
    for code, name in CRASH_LINE.findall(log):
        if name in reports:
            continue
        after = log[log.find(f"results/{name}.xml") :]
        frames = TEST_FRAME.findall(after[: after.find("Extension modules")])
        where = f"{frames[0][0]}:{frames[0][1]} {frames[0][2]}" if frames else "no stack in the log"
        print(f"CRASH {name}: pytest died with status {code}, no report; running: {where}")
        totals["errors"] += 1
    failed = totals["failures"] + totals["errors"]
    print(f"JUnit reports of {len(reports)} tox envs")
    print(f"tests: {passed} passed, {failed} failed, {totals['skipped']} skipped")
    return 0


if __name__ == "__main__":
    args = [Path(a) for a in sys.argv[1:]]
    sys.exit(main(args[0], args[1] if len(args) > 1 else None))
