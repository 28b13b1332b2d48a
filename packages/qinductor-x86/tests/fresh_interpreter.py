"""Run a measuring script of this folder in a fresh interpreter and read its JSON.

Which x86 int8 passes exist is process-wide and permanent (torch registers its copy at
the first compile, torchao at import), so each lowering mode is measured in a process of
its own: ``python SCRIPT *ARGS OUT.json`` (through ``qcore.testing.fresh``, faulthandler on).

The scripts run on one thread: oneDNN's int8 kernels for CPUs without VNNI give
different results from run to run with two threads (seen with ``ONEDNN_MAX_CPU_ISA=AVX2``
on torch 2.13: the same ResNet compiled by torch's own passes came out 0.3 % or 3.5 % off
its eager model, for torchao's quantizer and ours alike), and a test must not depend on
that race. One thread is deterministic on both kinds of CPU.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from qcore.testing.fresh import Outcome, run_script

HERE = Path(__file__).parent


def run(script: str, *args: str) -> Outcome:
    """Run ``script`` on one thread; the outcome, whatever it is (for upstream code that
    may raise or crash depending on the CPU)."""
    return run_script(HERE / script, *args, threads=1)


def run_json(script: str, *args: str, out: Path) -> dict[str, Any]:
    outcome = run(script, *args, str(out))
    assert outcome.ok, outcome.describe()
    results: dict[str, Any] = json.loads(out.read_text())
    return results
