"""Fixtures of the ``dist`` env: every distribution built once per session, and a
factory of fresh venvs."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from builds import Venv, repo, wheels


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """Every distribution's (wheel, sdist), by distribution name."""
    out = tmp_path_factory.mktemp("dist")
    folders = list(repo.distributions())
    wheel_paths = wheels.build(folders, out, sdist=True)
    result = {}
    for folder, wheel in zip(folders, wheel_paths, strict=True):
        name = repo.distributions()[folder].name
        (sdist,) = out.glob(f"{name.replace('-', '_')}-*.tar.gz")
        result[name] = (wheel, sdist)
    return result


@pytest.fixture
def venv(
    tmp_path: Path, built: dict[str, tuple[Path, Path]]
) -> Iterator[Callable[[str], Venv]]:
    """A factory of fresh venvs under this test's temporary directory."""
    yield lambda name: Venv(tmp_path / name, built)
