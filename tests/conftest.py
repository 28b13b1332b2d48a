"""Shared fixtures for the cross-package tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from qcore.testing.fakes import FakeDist, fake_distributions


@pytest.fixture
def fake_dist() -> Iterator[FakeDist]:
    """Install fake distributions for one test; see :mod:`qcore.testing.fakes`."""
    with fake_distributions() as make:
        yield make
