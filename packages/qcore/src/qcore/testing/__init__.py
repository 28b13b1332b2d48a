"""Conformance kit: what every backend or quantizer plugin must satisfy.

A plugin's own test suite calls ``assert_conformant("backend", "mychip")``; the
``qcore check`` command runs the same checks. Plugins are loaded through their entry
points, exactly as users load them.
"""

from __future__ import annotations

from collections.abc import Collection

from qcore.int8.engine import quantized_engine
from qcore.plugins.extras import require_pt2e
from qcore.testing.parity import compare_backend_configs
from qcore.testing.result import CheckResult, Progress, no_progress


def check_backend(
    name: str,
    *,
    stays_float: Collection[str] | None = None,
    min_sqnr_db: float | None = None,
    progress: Progress = no_progress,
) -> list[CheckResult]:
    """Every conformance check for FX backend ``name``.

    ``stays_float``: the patterns the backend's default mapping leaves in float (default:
    what the plugin declares, ``BackendPlugin.stays_float``); every other pattern must
    quantize, to at least ``min_sqnr_db`` (default
    :data:`qcore.testing.backend_checks.MIN_SQNR_DB`) against its float model. ``progress``
    is called after each pattern (see :data:`qcore.testing.result.Progress`).
    """
    from qcore.testing.backend_checks import MIN_SQNR_DB
    from qcore.testing.backend_checks import check_backend as run

    floor = MIN_SQNR_DB if min_sqnr_db is None else min_sqnr_db
    return run(name, stays_float=stays_float, min_sqnr_db=floor, progress=progress)


def check_quantizer(name: str, *, progress: Progress = no_progress) -> list[CheckResult]:
    """Every conformance check for PT2E quantizer ``name`` (a plugin, or the quantizer
    derived from backend ``name``); ``progress`` is called after each annotator."""
    require_pt2e(f"qcore.testing.check_quantizer({name!r})")
    from qcore.testing.quantizer_checks import check_quantizer as run

    return run(name, progress)


def assert_conformant(
    kind: str,
    name: str,
    *,
    stays_float: Collection[str] | None = None,
    min_sqnr_db: float | None = None,
) -> list[CheckResult]:
    """Run the checks for ``kind`` (backend or quantizer) ``name``; raise listing failures.

    For a backend, ``stays_float`` and ``min_sqnr_db`` are :func:`check_backend`'s; a
    quantizer's checks take neither (each annotator must quantize its example).
    """
    if kind == "backend":
        results = check_backend(name, stays_float=stays_float, min_sqnr_db=min_sqnr_db)
    elif kind == "quantizer":
        if stays_float is not None or min_sqnr_db is not None:
            raise TypeError("stays_float and min_sqnr_db apply to backends only")
        results = check_quantizer(name)
    else:
        raise ValueError(f"kind must be one of ['backend', 'quantizer'], got {kind!r}")
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
