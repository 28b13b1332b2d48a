"""The ``dist`` env's helpers: this repository's CI scripts, uv, and fresh virtual
environments to install the built distributions into, as a user's machine would."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def _ci_module(name: str) -> ModuleType:
    """A script of ``.ci/`` by path (``wheels`` imports ``repo`` as a sibling)."""
    sys.path.insert(0, str(ROOT / ".ci"))
    try:
        spec = importlib.util.spec_from_file_location(name, ROOT / ".ci" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / ".ci"))


repo = _ci_module("repo")
wheels = _ci_module("wheels")


def uv(*args: str, python: Path | None = None) -> subprocess.CompletedProcess[str]:
    """uv (this env's, from its ``uv`` package), with tox's constraints and find-links."""
    from uv import find_uv_bin

    command = [find_uv_bin(), *args, *(["--python", str(python)] if python else [])]
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=os.environ)
    assert done.returncode == 0, f"{' '.join(command)}\n{done.stdout}{done.stderr}"
    return done


class Venv:
    """A fresh virtual environment; ``install`` adds wheels (dependencies from the index)."""

    def __init__(self, path: Path, built: dict[str, tuple[Path, Path]]) -> None:
        self.path, self._built = path, built
        uv("venv", "--quiet", str(path))
        self.python = path / "bin" / "python"

    def install(self, *names: str) -> None:
        """Install these distributions' wheels (``name`` or ``name[extra]``)."""
        requirements = []
        for spec in names:
            name, _, extra = spec.partition("[")
            wheel = self._built[name][0]
            requirements.append(f"{name}{'[' + extra if extra else ''} @ {wheel.as_uri()}")
        uv("pip", "install", "--quiet", *requirements, python=self.python)

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """A command of this venv (``qcore``, ``python``), in a clean working directory."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("QCORE_")}
        env["PATH"] = f"{self.path / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        done = subprocess.run(
            [str(self.path / "bin" / args[0]), *args[1:]],
            capture_output=True, text=True, check=False, env=env, cwd=self.path,
        )  # fmt: skip
        if check:
            assert done.returncode == 0, f"{args}: {done.stdout}{done.stderr}"
        return done

    def install_from_index(self, *requirements: str) -> None:
        """Install from the package index alone, without dependencies."""
        uv("pip", "install", "--quiet", "--no-deps", *requirements, python=self.python)
