"""The hosted workflow (.github/workflows/ci.yml) against tox.ini: a job per env, each
running that env and only when a file it depends on changed; and .ci/affected.py's
path filter on changes whose envs are known by hand."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "ci.yml"
ALL_ENVS = {"x86", "integration", "avx2-kernels", "shipping", "reference", "demo", "onednn", "xnnpack", "example", "qcore", "executorch", "dist", "type",
            "lint"}  # fmt: skip
#: the older torch rows: qcore's adapter, the x86 lowering and the demo on each release
ROW_ENVS = {f"{env}-torch{release}" for env in ("x86", "qcore", "demo") for release in ("2.13", "2.14")}


def tox_env_list(root: Path = ROOT) -> list[str]:
    """The env list (the default row) and the envs of the label ``rows``, as tox reads them."""
    import configparser

    parser = configparser.ConfigParser(interpolation=None)
    parser.read(root / "tox.ini")
    (rows,) = [line for line in parser["tox"]["labels"].splitlines() if line.startswith("rows")]
    names = parser["tox"]["env_list"].split(",") + rows.split("=", 1)[1].split(",")
    return [e.strip() for e in names]


def test_every_tox_env_has_a_job_that_runs_it_when_its_files_change() -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    jobs = workflow["jobs"]
    runs = {}
    for job_id, job in jobs.items():
        commands = [step.get("run", "") for step in job["steps"]]
        tox = [c for c in commands if c.startswith("python -m tox run -e ")]
        if tox:
            (command,) = tox
            runs[command.split()[-1]] = (job_id, job)
    assert set(runs) == set(tox_env_list()) == ALL_ENVS | ROW_ENVS
    for env, (_, job) in runs.items():
        assert job["needs"] == "changes"
        assert job["if"] == f"contains(fromJSON(needs.changes.outputs.envs), '{env}')"
        assert job["permissions"] == {"contents": "read"}
    assert workflow["permissions"] == {}


def test_a_tox_env_without_a_job_fails_the_check(tmp_path: Path) -> None:
    for part in (".ci", ".github", "packages", "examples"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("tests*", "src"))
    tox = (ROOT / "tox.ini").read_text().replace("env_list = ", "env_list = newenv, ", 1)
    (tmp_path / "tox.ini").write_text(tox + "\n[testenv:newenv]\ncommands = python -V\n")
    done = subprocess.run(
        [sys.executable, str(tmp_path / ".ci" / "workflow.py"), "--check"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert "tox env 'newenv' has no job" in done.stderr
    unchanged = subprocess.run(
        [sys.executable, str(ROOT / ".ci" / "workflow.py"), "--check"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert unchanged.returncode == 0, unchanged.stderr


@pytest.mark.parametrize(
    ("changed", "envs"),
    [
        # a plugin: its env, the envs that install it, and those that read every package
        ("packages/qbackend-executorch/src/qbackend_executorch/config.py",
         {"executorch", "integration", "shipping", "avx2-kernels", "demo", "dist", "type", "lint",
          "demo-torch2.13", "demo-torch2.14"}),
        ("packages/qquantizer-xnnpack/src/qquantizer_xnnpack/annotators.py",
         {"xnnpack", "reference", "x86", "avx2-kernels", "example",
          "integration", "shipping", "demo", "dist", "type", "lint",
          *ROW_ENVS - {"qcore-torch2.13", "qcore-torch2.14"}}),
        # the core every package requires, and a file every env shares: everything
        ("packages/qcore/src/qcore/plugins/api.py", ALL_ENVS | ROW_ENVS),
        ("constraints.txt", ALL_ENVS | ROW_ENVS),
        ("constraints/torch2.13.txt", ALL_ENVS | ROW_ENVS),
        # a guide the integration tests run as written; the shipping guide, which the
        # shipping env runs (integration's test_docs checks every guide's blocks)
        ("docs/huggingface.md", {"integration"}),
        ("docs/shipping.md", {"integration", "shipping"}),
        # a host-dependent test the avx2-kernels env runs again
        ("tests/test_transformers_compiled.py", {"integration", "avx2-kernels"}),
    ],
)  # fmt: skip
def test_a_change_runs_the_envs_that_depend_on_it(changed: str, envs: set[str]) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / ".ci" / "affected.py"), changed],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    (line,) = done.stdout.splitlines()
    assert line.startswith("envs=")
    assert set(yaml.safe_load(line.removeprefix("envs="))) == envs


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text().splitlines()
    (command,) = [line for line in readme if "tox run-parallel" in line]
    run = (ROOT / ".ci" / "run").read_text()
    assert f"{command} 2>&1 | tee .tox/ci-tox.log" in run
    assert "-c constraints.txt tox tox-uv" in command  # the tools at the versions CI pins


#: What a test module does when it compares a compiled int8 model's output with the eager
#: converted model's: oneDNN's int8 kernels compute that output, and differ by CPU kind.
_COMPARES_COMPILED = ("assert_exact(", "codes_compiled", "sqnr_compiled", "compare_outputs(",
                      "compare_codes(")  # fmt: skip
#: ...and what it does to compile (itself, or in the fresh interpreters of its probes)
_COMPILES = ("torch.compile", "zoo.lower(", "compile_and_run(", "compile_with_lowering(",
             "run_script(", "probes", "measure_held_out(")  # fmt: skip


def _host_dependent_test_modules() -> list[str]:
    found = []
    for path in sorted([*ROOT.glob("tests/test_*.py"), *ROOT.glob("packages/*/tests/test_*.py")]):
        text = path.read_text()
        if path.resolve() != Path(__file__).resolve() and any(m in text for m in _COMPARES_COMPILED) and any(m in text for m in _COMPILES):
            found.append(path.relative_to(ROOT).as_posix())
    return found


def test_every_test_comparing_compiled_int8_outputs_reruns_on_avx2_kernels() -> None:
    """A test module that compiles an int8 model and compares its output with the eager
    model's depends on the CPU's int8 kernels: the ``avx2-kernels`` env must run it again
    on oneDNN's saturating AVX2 kernels, or on a VNNI host its AVX2-route claims rest on the
    lowering's own report."""
    found = _host_dependent_test_modules()
    assert len(found) >= 15, found  # the markers still find the suite's compiling tests
    assert [module for module in found if not _reruns_on_avx2_kernels(module)] == []


def _reruns_on_avx2_kernels(module: str) -> bool:
    sys.path.insert(0, str(ROOT / ".ci"))
    import repo

    rerun = repo.tox_envs()["avx2-kernels"].set_env["QTESTS"].split()
    return any(module == path or module.startswith(path.rstrip("/") + "/") for path in rerun)


def test_every_x86_test_module_reruns_on_avx2_kernels() -> None:
    """The x86 quantizer and lowering read the int8 target nearly everywhere, so each of
    the package's test modules runs again on oneDNN's AVX2 kernels (with the target they
    imply), compiling or not: its conformance check once failed only there."""
    modules = sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("packages/qinductor-x86/tests/test_*.py"))
    assert len(modules) >= 30, modules
    assert [module for module in modules if not _reruns_on_avx2_kernels(module)] == []
