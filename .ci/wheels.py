"""Build this repository's distributions and install them the way a user gets them.

    python .ci/wheels.py install packages/qcore[pt2e] packages/qbackend-onednn
    python .ci/wheels.py build --sdist --out DIR [FOLDER ...]

``install`` builds a wheel of each folder (hatchling, hatch's build backend) and installs
the wheels, not the source tree, into the running interpreter's environment; their
dependencies come from the package index (torch and torchao as pinned by
``constraints.txt`` through ``PIP_CONSTRAINT``/``UV_CONSTRAINT``). The wheels are rebuilt
and reinstalled on every call, so a reused env never tests a stale copy of the tree.
``build`` writes wheels (and sdists) to DIR, every distribution when no folder is named.
uv installs when it is importable in this environment (tox-uv's envs), pip otherwise.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import repo


def build(folders: list[str], out: Path, *, sdist: bool = False) -> list[Path]:
    """Wheels (and sdists) of ``folders`` in ``out``, one per folder, in that order."""
    out.mkdir(parents=True, exist_ok=True)
    targets = ["-t", "wheel", *(["-t", "sdist"] if sdist else [])]
    built = []
    for folder in folders:
        name = repo.distributions()[folder].name.replace("-", "_")
        for old in out.glob(f"{name}-*"):
            old.unlink()
        done = subprocess.run(
            [sys.executable, "-m", "hatchling", "build", *targets, "-d", str(out)],
            cwd=repo.ROOT / folder, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode:
            sys.exit(f"wheels.py: building {folder} failed:\n{done.stdout}{done.stderr}")
        (wheel,) = out.glob(f"{name}-*.whl")
        built.append(wheel)
    return built


def _installer() -> list[str]:
    try:
        from uv import find_uv_bin
    except ImportError:
        return [sys.executable, "-m", "pip", "install", "--quiet"]
    return [find_uv_bin(), "pip", "install", "--quiet", "--python", sys.executable]


def install(specs: list[str]) -> None:
    """Build and install ``specs`` (folders, with extras: ``packages/qcore[pt2e]``)."""
    folders = [repo.strip_extras(spec) for spec in specs]
    unknown = [f for f in folders if f not in repo.distributions()]
    if unknown:
        sys.exit(f"wheels.py: not a distribution of this repository: {', '.join(unknown)}")
    with tempfile.TemporaryDirectory(prefix="qcore-wheels-") as tmp:
        wheels = build(folders, Path(tmp))
        names = [repo.distributions()[f].name for f in folders]
        requirements = [
            f"{name}{spec[len(folder):]} @ {wheel.as_uri()}"
            for name, spec, folder, wheel in zip(names, specs, folders, wheels, strict=True)
        ]
        command = _installer()
        # a wheel of the same version is already installed in a reused env: replace it
        if "uv" in Path(command[0]).name:
            command += [arg for name in names for arg in ("--reinstall-package", name)]
        else:
            subprocess.run(
                [sys.executable, "-m", "pip", "uninstall", "--yes", "--quiet", *names],
                check=False,
            )
        subprocess.run([*command, *requirements], check=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="wheels.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    inst = sub.add_parser("install")
    inst.add_argument("specs", nargs="+")
    bld = sub.add_parser("build")
    bld.add_argument("folders", nargs="*")
    bld.add_argument("--out", type=Path, required=True)
    bld.add_argument("--sdist", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "install":
        install(args.specs)
    else:
        if args.out.exists():
            shutil.rmtree(args.out)
        for path in build(args.folders or list(repo.distributions()), args.out, sdist=args.sdist):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
