"""Shared fixtures for the cross-package tests."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from qcore.testing.fakes import FakeDist, fake_distributions

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
    """Install fake distributions for one test; see :mod:`qcore.testing.fakes`."""
    with fake_distributions() as make:
        yield make


@pytest.fixture(scope="session")
def zoo_quantized() -> Callable[..., Any]:
    """``qcore.testing.transformers_zoo.quantize(name, qcore.get_quantizer(quantizer,
    **options))``, run once per (model, quantizer, options) in a session: the tests that
    read the same converted model (none changes it) share it."""
    import qcore
    from qcore.testing.transformers_zoo import quantize

    made: dict[tuple[str, str, tuple[tuple[str, Any], ...]], Any] = {}

    def quantized(name: str, quantizer: str, **options: Any) -> Any:
        key = (name, quantizer, tuple(sorted(options.items())))
        if key not in made:
            made[key] = quantize(name, qcore.get_quantizer(quantizer, **options))
        return made[key]

    return quantized
