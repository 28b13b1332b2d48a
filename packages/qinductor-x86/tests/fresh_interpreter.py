"""Run a measuring script of this folder in a fresh interpreter and read its JSON.

Which x86 int8 passes exist is process-wide and permanent (torch registers its copy at
the first compile, torchao at import), so each lowering mode is measured in a process of
its own: ``python SCRIPT *ARGS OUT.json``.

The scripts run on one thread: oneDNN's int8 kernels for CPUs without VNNI give
different results from run to run with two threads (seen with ``ONEDNN_MAX_CPU_ISA=AVX2``
on torch 2.13: the same ResNet compiled by torch's own passes came out 0.3 % or 3.5 % off
its eager model, for torchao's quantizer and ours alike), and a test must not depend on
that race. One thread is deterministic on both kinds of CPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent


def run_json(script: str, *args: str, out: Path) -> dict[str, Any]:
    run = subprocess.run(
        [sys.executable, str(HERE / script), *args, str(out)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert run.returncode == 0, run.stderr[-4000:]
    results: dict[str, Any] = json.loads(out.read_text())
    return results
