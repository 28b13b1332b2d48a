"""Conformance kit: what every backend or quantizer plugin must satisfy.

A plugin's own test suite calls ``assert_conformant("backend", "mychip")``; the
``qcore check`` command runs the same checks. Plugins are loaded through their entry
points, exactly as users load them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from qcore.api import get_backend_config
from qcore.engine import quantized_engine
from qcore.plugins import DISABLE_ENV, REGISTRY
from qcore.testing.parity import compare_backend_configs
from qcore.testing.result import CheckResult


def check_backend(name: str) -> list[CheckResult]:
    """Every conformance check for FX backend ``name``."""
    from qcore.testing.backend import check_backend as run

    return run(name)


def check_quantizer(name: str) -> list[CheckResult]:
    """Every conformance check for PT2E quantizer ``name``."""
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


def assert_backend_conformant(name: str) -> list[CheckResult]:
    """:func:`assert_conformant` for backend ``name``, and every one of its patterns (its
    installed extensions' too) went through prepare and convert."""
    results = assert_conformant("backend", name)
    runs = [r for r in results if r.check == "prepare-convert"]
    patterns = get_backend_config(name).configs
    if len(runs) != len(patterns):
        raise AssertionError(f"backend '{name}': {len(runs)} of {len(patterns)} patterns ran")
    return results


@contextmanager
def extensions_disabled(kind: str, target: str) -> Iterator[None]:
    """Inside the block, plugin ``target`` is used without the installed extensions of
    ``kind`` (``backend-extension``, ``quantizer-extension``) that add to it: to compare
    a backend with the upstream config it mirrors while a third party extends it."""
    names = [n for n in REGISTRY.names(kind) if n.startswith(f"{target}.")]
    before = os.environ.get(DISABLE_ENV)
    os.environ[DISABLE_ENV] = ",".join(filter(None, [before, *names]))
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(DISABLE_ENV, None)
        else:
            os.environ[DISABLE_ENV] = before


__all__ = [
    "CheckResult",
    "assert_backend_conformant",
    "assert_conformant",
    "check_backend",
    "check_quantizer",
    "compare_backend_configs",
    "extensions_disabled",
    "quantized_engine",
]
