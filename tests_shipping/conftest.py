"""The session's shipped files, each built once (``builds.py``, and the guide's), and the
deployed side run once on all of those that must run with torch alone: one fresh
interpreter imports ExecuTorch's runtime and AOTInductor's loader, not one per test file.
Selecting any test that needs the deployed side builds every file first.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch

# the deployed-side script, the builders and the shared checks are plain modules here
sys.path.insert(0, str(Path(__file__).parent))

import builds
import functional
from shipped import run_deployed

import qcore
from qcore.testing.readme import readme_output


@pytest.fixture(scope="session")
def guide(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """docs/shipping.md run as written in a fresh interpreter: its folder and output."""
    folder = tmp_path_factory.mktemp("guide")
    return folder, readme_output(builds.GUIDE, cwd=folder)


@pytest.fixture(scope="session")
def functional_converted() -> torch.fx.GraphModule:
    """The functional convolutions, converted by the XNNPACK quantizer (per-channel)."""
    return functional.quantize(qcore.get_quantizer("xnnpack", is_per_channel=True))


@pytest.fixture(scope="session")
def x86_packages(
    tmp_path_factory: pytest.TempPathFactory, functional_converted: torch.fx.GraphModule
) -> dict[str, builds.Package]:
    folder = tmp_path_factory.mktemp("x86")
    return {
        "zoo": builds.zoo_package(folder),
        "functional": builds.functional_package(folder, functional_converted),
    }


@pytest.fixture(scope="session")
def zoo_program(tmp_path_factory: pytest.TempPathFactory) -> builds.Program:
    return builds.zoo_program(tmp_path_factory.mktemp("zoo"))


@pytest.fixture(scope="session")
def functional_programs(
    tmp_path_factory: pytest.TempPathFactory, functional_converted: torch.fx.GraphModule
) -> builds.FunctionalPrograms:
    return builds.functional_programs(tmp_path_factory.mktemp("functional"), functional_converted)


@pytest.fixture(scope="session")
def derived_program(tmp_path_factory: pytest.TempPathFactory) -> builds.DerivedProgram:
    return builds.derived_program(tmp_path_factory.mktemp("derived"))


@pytest.fixture(scope="session")
def torch_only(
    guide: tuple[Path, str],
    x86_packages: dict[str, builds.Package],
    zoo_program: builds.Program,
    functional_programs: builds.FunctionalPrograms,
    derived_program: builds.DerivedProgram,
) -> dict[str, Any]:
    """Every AOTInductor package and ``.pte`` of the session, run by ``deployed.py`` in
    one fresh interpreter where qcore, its plugins and torchao cannot be imported, with
    oneDNN capped at its AVX2 kernels (no VNNI) on any host: the packages were built for
    them (XNNPACK, in ExecuTorch's runtime, ignores the cap). Its report: the names of the
    files it ran and the modules of ``deployed.NOT_DEPLOYED`` it imported (none)."""
    folder, _ = guide
    files = [
        *(folder / name for name in builds.GUIDE_TORCH_ONLY),
        *(package.file for package in x86_packages.values()),
        zoo_program.file,
        functional_programs.ours.file,
        derived_program.program.file,
    ]
    assert all(file is not None for file in files)
    report = run_deployed("torch-only", files, env={"ONEDNN_MAX_CPU_ISA": "AVX2"})
    assert report["ran"] == [file.name for file in files], report
    return report
