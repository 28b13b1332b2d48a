"""Run code in a fresh Python interpreter, and tell how it ended.

Some upstream calls have undefined or host-dependent behaviour: torch's natively converted
FX models under another quantized engine, torch's built-in Inductor passes on graphs they
do not support, oneDNN kernels that race on one CPU and not on another. On one machine such
a call raises, on another it kills the process with a signal, and a test that makes it
in-process takes its whole test run down. Make it here instead: the child runs with
``faulthandler`` on (a crash prints its Python stack), and the parent reads the outcome,
whichever it is, and asserts only what its own code promises.

The child reports values with :func:`emit`; the parent reads them with
:meth:`Outcome.result`::

    outcome = run_fresh("import qcore.testing.fresh as f; f.emit({'answer': 42})")
    assert outcome.ok and outcome.result() == {"answer": 42}

Third-party plugin test suites can use it for the same purpose.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Outcome", "emit", "run_fresh", "run_script"]

#: The prefix of the one stdout line that carries the child's result.
RESULT_MARK = "QCORE-FRESH-RESULT "


def emit(value: Any) -> None:
    """Report ``value`` (JSON-serializable) to the parent; call once, last."""
    print(RESULT_MARK + json.dumps(value), flush=True)


@dataclass(frozen=True)
class Outcome:
    """How a child interpreter ended: its exit status and what it printed."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def signal(self) -> str | None:
        """The signal that killed the child (``"SIGSEGV"``), or None if it exited."""
        if self.returncode >= 0:
            return None
        try:
            return signal.Signals(-self.returncode).name
        except ValueError:
            return f"signal {-self.returncode}"

    def raised(self, name: str) -> bool:
        """Whether the child ended with an uncaught exception of type ``name``."""
        last = [line for line in self.stderr.splitlines() if line.strip()][-1:]
        return self.returncode == 1 and bool(last) and last[0].split(":")[0].endswith(name)

    def result(self) -> Any:
        """The value the child passed to :func:`emit`; an error describing the child's end
        if it never did."""
        for line in reversed(self.stdout.splitlines()):
            if line.startswith(RESULT_MARK):
                return json.loads(line[len(RESULT_MARK) :])
        raise AssertionError(f"the fresh interpreter reported no result; {self.describe()}")

    def describe(self) -> str:
        """One line on how it ended, then the tail of its stderr."""
        how = f"killed by {self.signal}" if self.signal else f"exit status {self.returncode}"
        return f"{how}\n{self.stderr[-4000:]}"


def run_fresh(
    source: str,
    *,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    threads: int | None = None,
    timeout: float = 900.0,
    cwd: Path | None = None,
) -> Outcome:
    """Run ``source`` as ``python -c`` in a new interpreter (``sys.argv[1:]`` = ``args``).

    ``env`` adds to this process's environment; ``threads`` pins OpenMP's thread count
    (oneDNN's int8 kernels for CPUs without VNNI are not deterministic on two threads).
    A child that outlives ``timeout`` seconds is killed and raises ``TimeoutExpired``.
    """
    return _run(["-c", source, *args], env, threads, timeout, cwd)


def run_script(
    path: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    threads: int | None = None,
    timeout: float = 900.0,
) -> Outcome:
    """Run the script at ``path`` in a new interpreter, like :func:`run_fresh`."""
    return _run([str(path), *args], env, threads, timeout, path.parent)


def _run(
    argv: list[str],
    env: Mapping[str, str] | None,
    threads: int | None,
    timeout: float,
    cwd: Path | None,
) -> Outcome:
    child_env = {**os.environ, **(env or {})}
    if threads is not None:
        child_env["OMP_NUM_THREADS"] = str(threads)
    done = subprocess.run(
        [sys.executable, "-X", "faulthandler", *argv],
        capture_output=True,
        text=True,
        check=False,
        env=child_env,
        timeout=timeout,
        cwd=cwd,
    )
    return Outcome(done.returncode, done.stdout, done.stderr)
