from __future__ import annotations

import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

# the parity helpers (models, annotation text, torchao loader) are plain modules here
sys.path.insert(0, str(Path(__file__).parent))


#: Seconds a mode's interpreter may take: it compiles what several scripts of 900 s each
#: compiled (the standalone one ~50 graphs), on a slow host next to another tox env.
TIMEOUT = 3600.0


class Probes:
    """The fresh interpreters of ``probe_modes.py``, one per lowering mode (two modes that
    set up the same passes share one: ``lowering_zoo.probe_interpreter``), each running the
    parts of its modes that the collected tests name (``PROBED = ((mode, part), ...)`` at
    module level). They start at the first request and run one after the other, in the
    background of the test session: the standalone one first, then the others in the order
    the tests first read them; each test waits for the mode it reads. One at a time, as
    the two sides compile many of the same kernels: the second finds them in the run's
    Inductor cache (``TORCHINDUCTOR_CACHE_DIR``, which tox sets per env) instead of
    compiling them again next to the first."""

    def __init__(self, wanted: dict[str, list[str]]) -> None:
        self.wanted = wanted
        self._pool: ThreadPoolExecutor | None = None
        self._runs: dict[str, Future[Any]] = {}

    def _start(self) -> None:
        import lowering_zoo as zoo

        self._pool = ThreadPoolExecutor(1)
        interpreters: dict[str, list[str]] = {}
        for mode in sorted(self.wanted, key=lambda mode: mode != "standalone"):
            interpreters.setdefault(zoo.probe_interpreter(mode), []).extend(
                f"{mode}:{part}" for part in self.wanted[mode]
            )
        for key, parts in interpreters.items():
            self._runs[key] = self._pool.submit(zoo.run_script, "probe_modes.py", *parts, timeout=TIMEOUT)

    def mode(self, mode: str) -> dict[str, Any]:
        """Everything the interpreter of ``mode`` reported for it."""
        import lowering_zoo as zoo

        assert mode in self.wanted, f"no collected test module names mode {mode} in PROBED"
        if self._pool is None:
            self._start()
        result: dict[str, Any] = self._runs[zoo.probe_interpreter(mode)].result()[mode]
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


#: One fresh interpreter that imports this package the ways users reach it, step by step,
#: and names the Inductor hooks each step changed (``!=`` the value before the first):
#: the package and its entry-point descriptors; then the quantizer through qcore (and
#: which of torchao's x86 modules, which register passes, got imported); then the lowering.
_IMPORT_CENSUS = """
import sys
import torch._inductor.config as c
hooks = ("pre_grad_custom_pass", "joint_custom_pre_pass", "joint_custom_post_pass",
         "post_grad_custom_pre_pass", "post_grad_custom_post_pass")
before = [getattr(c, n) for n in hooks]
def changed():
    return [n for n, b in zip(hooks, before) if getattr(c, n) != b]
import qinductor_x86, qinductor_x86.plugin
package = changed()
import qcore
quantizer = qcore.get_quantizer("x86")
after_quantizer = changed()
torchaos = [m for m in sys.modules if m.startswith((
    "torchao.quantization.pt2e.quantizer.x86_inductor_quantizer",
    "torchao.quantization.pt2e.inductor_passes.x86"))]
import qinductor_x86.lowering
lowering = qcore.get_lowering("x86")
import qcore.testing.fresh as f
f.emit({"package": package, "quantizer": after_quantizer, "quantizer_type": type(quantizer).__name__,
        "torchao_x86_modules": torchaos, "lowering": changed()})
"""


@pytest.fixture(scope="session")
def import_census() -> dict[str, Any]:
    """What importing this package changes in Inductor, step by step (see above)."""
    from qcore.testing.fresh import run_fresh

    outcome = run_fresh(_IMPORT_CENSUS)
    assert outcome.ok, outcome.describe()
    result: dict[str, Any] = outcome.result()
    return result
