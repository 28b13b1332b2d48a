"""Shared fixtures for the cross-package tests."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from qcore.testing.fresh import run_fresh
from qcore.zoo.suite.fakes import FakeDist, fake_distributions

# helper modules next to the tests (distributed_flows: what spawned ranks import)
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def quiet_tuning_warnings() -> Iterator[None]:
    """torch's and transformers' deprecation notices, silenced while a test tunes."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=UserWarning, module="torch")
        warnings.filterwarnings("ignore", category=FutureWarning)
        yield


@pytest.fixture
def fake_dist() -> Iterator[FakeDist]:
    """Install fake distributions for one test; see :mod:`qcore.zoo.suite.fakes`."""
    with fake_distributions() as make:
        yield make


@pytest.fixture(scope="session")
def zoo_quantized() -> Callable[..., Any]:
    """``qcore.zoo.huggingface.quantize(name, qcore.get_quantizer(quantizer,
    **options))``, run once per (model, quantizer, options) in a session: the tests that
    read the same converted model (none changes it) share it."""
    import qcore
    from qcore.zoo.huggingface import quantize

    made: dict[tuple[str, str, tuple[tuple[str, Any], ...]], Any] = {}

    def quantized(name: str, quantizer: str, **options: Any) -> Any:
        key = (name, quantizer, tuple(sorted(options.items())))
        if key not in made:
            made[key] = quantize(name, qcore.get_quantizer(quantizer, **options))
        return made[key]

    return quantized


#: What a backend lookup must not import besides its own plugin: the other plugins, torchao
#: and Inductor (``qcore.get_backend_config`` is an FX call).
HEAVY_PREFIXES = ("qbackend_", "qquantizer_", "qinductor_", "torchao", "torch._inductor")

_FRESH_LOOKUP = """
import sys, qcore
patterns = len(qcore.get_backend_config(sys.argv[1]).configs)
imported = sorted(m for m in sys.modules if m.startswith(tuple(sys.argv[2:])))
import qcore.testing.fresh as fresh  # after the look: it is no part of the lookup
fresh.emit({"patterns": patterns, "imported": imported})
"""


@pytest.fixture(scope="session")
def fresh_lookup() -> Callable[[str], dict[str, Any]]:
    """``fresh_lookup(backend)``: ``qcore.get_backend_config(backend)`` in a fresh
    interpreter, once per backend in a session: how many patterns it built, and which
    plugin, torchao and Inductor modules the process had imported then (test_public_api
    and test_plugin_isolation read the same lookup)."""
    done: dict[str, dict[str, Any]] = {}

    def lookup(backend: str) -> dict[str, Any]:
        if backend not in done:
            outcome = run_fresh(_FRESH_LOOKUP, args=[backend, *HEAVY_PREFIXES], timeout=300)
            assert outcome.ok, outcome.describe()
            done[backend] = outcome.result()
        return done[backend]

    return lookup
