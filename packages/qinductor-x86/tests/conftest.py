from __future__ import annotations

import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

# the parity helpers (models, annotation text, torchao loader) are plain modules here
sys.path.insert(0, str(Path(__file__).parent))


class Probes:
    """The fresh interpreters of ``probe_modes.py``, one per lowering mode, each running the
    parts of its mode that the collected tests name (``PROBED = ((mode, part), ...)`` at
    module level). All of them start at the first request, two at a time (two side by
    side, as two lowerings' sides always ran); each test waits for the mode it reads."""

    def __init__(self, wanted: dict[str, list[str]]) -> None:
        self.wanted = wanted
        self._pool: ThreadPoolExecutor | None = None
        self._runs: dict[str, Future[Any]] = {}

    def _start(self) -> None:
        import lowering_zoo as zoo

        self._pool = ThreadPoolExecutor(2)
        # the longest first: the standalone interpreter compiles the most
        for mode in sorted(self.wanted, key=("standalone", "reference", "builtins").index):
            self._runs[mode] = self._pool.submit(
                zoo.run_script, "probe_modes.py", mode, *self.wanted[mode]
            )

    def mode(self, mode: str) -> dict[str, Any]:
        """Everything the interpreter of ``mode`` reported."""
        assert mode in self.wanted, f"no collected test module names mode {mode} in PROBED"
        if self._pool is None:
            self._start()
        result: dict[str, Any] = self._runs[mode].result()
        return result

    def result(self, mode: str, part: str) -> Any:
        """What ``part`` measured in the interpreter of ``mode`` (a part that raised fails
        the test that reads it, with the traceback)."""
        assert part in self.wanted.get(mode, ()), f"no collected test module names {(mode, part)}"
        measured = self.mode(mode)[part]
        assert "error" not in measured, measured["error"]
        return measured

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)


@pytest.fixture(scope="session")
def probes(request: pytest.FixtureRequest) -> Iterator[Probes]:
    wanted: dict[str, list[str]] = {}
    for item in request.session.items:
        module = getattr(item, "module", None)
        for mode, part in getattr(module, "PROBED", ()):
            if part not in wanted.setdefault(mode, []):
                wanted[mode].append(part)
    made = Probes(wanted)
    yield made
    made.close()

