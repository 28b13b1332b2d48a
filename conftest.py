"""Every test session: when ``QCORE_TEST_INSTALLED=wheel`` (tox's package envs), the
first-party packages a session imports must come from installed wheels, never from this
source tree or an editable install, so that a package's tests check what users install.
And every session runs torch on one thread (:func:`one_thread`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent


def _load_ci_repo() -> ModuleType:
    """``.ci/repo.py`` (the distributions, read from their pyprojects), by path, so that
    no CI script lands on every test's ``sys.path``."""
    spec = importlib.util.spec_from_file_location("qcore_ci_repo", ROOT / ".ci" / "repo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


repo = _load_ci_repo()


def _not_from_a_wheel(import_name: str, distribution: str) -> str | None:
    spec = importlib.util.find_spec(import_name)
    if spec is None or spec.origin is None:
        return None  # not installed in this env: its tests are not collected here
    origin = Path(spec.origin).resolve()
    if any(origin.is_relative_to(ROOT / folder) for folder in repo.PACKAGE_FOLDERS):
        return f"{import_name} is imported from the source tree ({origin})"
    try:
        direct = metadata.distribution(distribution).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return f"{import_name} ({origin}) belongs to no installed {distribution} distribution"
    if direct and json.loads(direct).get("dir_info", {}).get("editable"):
        return f"{distribution} is an editable install"
    return None


def pytest_sessionstart(session: pytest.Session) -> None:
    if os.environ.get("QCORE_TEST_INSTALLED") != "wheel":
        return
    dists = repo.distributions().values()
    problems = [p for d in dists if (p := _not_from_a_wheel(d.import_name, d.name))]
    if problems:
        raise pytest.UsageError(
            "QCORE_TEST_INSTALLED=wheel, but " + "; ".join(problems)
            + " (install with .ci/wheels.py)"
        )


@pytest.fixture(scope="session", autouse=True)
def one_thread() -> Iterator[None]:
    """torch (OpenMP, oneDNN) on one thread for the session, then as it was, and
    ``OMP_NUM_THREADS=1`` for the fresh interpreters tests start: oneDNN's int8 kernels for
    CPUs without VNNI give different results from run to run on two threads, and the tests
    compare their outputs exactly. tox's envs set the same; plain ``pytest`` on a
    two-core machine must behave as they do. (No torch, as in the ``dist`` env: nothing
    to pin.)"""
    if importlib.util.find_spec("torch") is None:
        yield
        return
    import torch

    threads, variable = torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")
    torch.set_num_threads(1)
    os.environ["OMP_NUM_THREADS"] = "1"
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        if variable is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = variable


@pytest.fixture(scope="session", autouse=True)
def conv_bn_patterns_exported_once() -> Iterator[None]:
    """torchao re-exports its ~100 conv-bn rewrite patterns (strict ``torch.export``, a
    second each) on every QAT ``prepare_qat_pt2e`` / ``convert_pt2e``; a session that
    compares two QAT flows exports each once (``qcore._torch_private.reused_pattern_graphs``,
    which the conformance kit uses too). Where torchao is not installed: nothing to reuse."""
    if importlib.util.find_spec("torchao") is None or importlib.util.find_spec("qcore") is None:
        yield
        return
    from qcore._torch_private import reused_pattern_graphs

    with reused_pattern_graphs():
        yield
