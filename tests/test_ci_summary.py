"""``.ci/summarize.py``: CI's closing lines name a crashed env's test and count it failed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parent.parent / ".ci" / "summarize.py"

JUNIT = """<?xml version="1.0"?><testsuites><testsuite name="pytest" errors="0" failures="1"
skipped="1" tests="4" time="12.0"><testcase classname="t" name="test_fast" time="0.5"/>
<testcase classname="t" name="test_slow" time="9.0"/><testcase classname="t"
name="test_mid" time="2.0"/><testcase classname="t" name="test_bad" time="0.1"/>
</testsuite></testsuites>"""

LOG = """qcore: OK ✔ in 1 minute 36.31 seconds
onednn: exit -11 (76.60 seconds) /w> python -m pytest --junitxml=/w/.tox/results/onednn.xml pid=1
Fatal Python error: Segmentation fault

Current thread 0x00007fd731402b80 (most recent call first):
  File "/w/site-packages/torch/_ops.py", line 1279 in __call__
  File "/w/packages/qbackend-onednn/tests/test_fx_native.py", line 84 in test_engine
  File "/w/site-packages/_pytest/python.py", line 187 in pytest_pyfunc_call

Extension modules: torch._C (total: 1)
onednn: FAIL ✖ in 2 minutes 1.63 seconds
  demo: OK (149.83=setup[61.37]+cmd[88.46] seconds)
"""


def test_summary_names_the_crashed_test_times_and_counts(tmp_path: Path) -> None:
    (tmp_path / "qcore.xml").write_text(JUNIT)
    (tmp_path / "tox.log").write_text(LOG)
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path), str(tmp_path / "tox.log")],
        capture_output=True, text=True, check=True,
    )
    out = done.stdout
    assert "test_fx_native.py:84 test_engine" in out
    assert "CRASH onednn" in out
    assert "test_slow 9s, test_mid 2s, test_fast" in out
    assert "96s" in out and "122s" in out and "150s" in out  # wall times, setup included
    assert out.splitlines()[-1] == "tests: 2 passed, 2 failed, 1 skipped"
