"""Shared fixtures for the cross-package tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from qcore.testing.fakes import FakeDist, fake_distributions

# helper modules next to the tests (distributed_flows: what spawned ranks import)
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def fake_dist() -> Iterator[FakeDist]:
    """Install fake distributions for one test; see :mod:`qcore.testing.fakes`."""
    with fake_distributions() as make:
        yield make
