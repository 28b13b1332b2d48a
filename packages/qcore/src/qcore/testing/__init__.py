"""Conformance kit: what every backend or quantizer plugin must satisfy.

A plugin's own test suite calls ``assert_conformant("backend", "mychip")``; the
``qcore check`` command runs the same checks. Plugins are loaded through their entry
points, exactly as users load them.
"""

from __future__ import annotations

from qcore.engine import quantized_engine
from qcore.extras import require_pt2e
from qcore.testing.parity import compare_backend_configs
from qcore.testing.result import CheckResult


def check_backend(name: str) -> list[CheckResult]:
    """Every conformance check for FX backend ``name``."""
    from qcore.testing.backend import check_backend as run

    return run(name)


def check_quantizer(name: str) -> list[CheckResult]:
    """Every conformance check for PT2E quantizer ``name``."""
    require_pt2e(f"qcore.testing.check_quantizer({name!r})")
    from qcore.testing.quantizer import check_quantizer as run

    return run(name)


def assert_conformant(kind: str, name: str) -> list[CheckResult]:
    """Run the checks for ``kind`` (backend or quantizer) ``name``; raise listing failures."""
    runners = {"backend": check_backend, "quantizer": check_quantizer}
    if kind not in runners:
        raise ValueError(f"kind must be one of {sorted(runners)}, got {kind!r}")
    results = runners[kind](name)
    if not results:
        raise AssertionError(f"{kind} '{name}': the conformance kit ran no check")
    failures = [r for r in results if not r.ok]
    if failures:
        raise AssertionError(
            f"{kind} '{name}' failed {len(failures)} of {len(results)} conformance checks:\n"
            + "\n".join(str(f) for f in failures)
        )
    return results


__all__ = [
    "CheckResult",
    "assert_conformant",
    "check_backend",
    "check_quantizer",
    "compare_backend_configs",
    "quantized_engine",
]
