"""``.ci/shared_bytecode.py`` and its hook: the bytecode of third-party modules and of the
standard library is shared by the envs of a run, keyed by the source file's identity (uv
installs every env's copy of torch as hard links of one file), and first-party modules
keep theirs per env (the mutation check deletes it).

Each case installs the hook into a temporary "site-packages" per env, as tox's
commands_pre does, and imports from it in a fresh interpreter started with ``-S`` (so
that only that folder's ``.pth`` runs, not the hook of the env running this test).
"""

from __future__ import annotations

import configparser
import importlib.util
import json
import marshal
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
CI = ROOT / ".ci"
PYC = f"__init__.{sys.implementation.cache_tag}.pyc"


def _installer() -> ModuleType:
    """``.ci/shared_bytecode.py`` by path, its siblings importable for the load only."""
    sys.path.insert(0, str(CI))
    try:
        spec = importlib.util.spec_from_file_location("qcore_ci_shared_bytecode", CI / "shared_bytecode.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(CI))
    return module


def _env(tmp: Path, name: str, value: int = 1, linked: Path | None = None) -> Path:
    """A site-packages with a third-party package (its module a hard link of ``linked``'s,
    as uv installs it, or a file of its own) and a first-party module, the hook in it."""
    site = tmp / name / "site-packages"
    (site / "thirdparty").mkdir(parents=True)
    module = site / "thirdparty" / "__init__.py"
    if linked is not None:
        os.link(linked / "thirdparty" / "__init__.py", module)
    else:
        module.write_text(f"VALUE = {value}\n")
        os.utime(module, (1_700_000_000, 1_700_000_000))
    (site / "ownpkg.py").write_text("VALUE = 7\n")
    _installer().install(site, ["ownpkg"])
    return site


def _run(site: Path, tmp: Path, shared: Path | None) -> dict[str, Any]:
    """Import both modules from ``site`` in a fresh interpreter: their values, and where
    their bytecode went. ``site`` is added twice, the second time through a link, as a
    venv's ``lib64`` (a link to ``lib``) makes ``site`` run its ``.pth`` lines twice."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "QCI_SHARED_BYTECODE")}
    env["PYTHONPYCACHEPREFIX"] = str(tmp / site.parent.name / "prefix")
    if shared is not None:
        env["QCI_SHARED_BYTECODE"] = str(shared)
    code = (
        "import site, sys; before = set(sys.modules);"
        "site.addsitedir(sys.argv[1]); site.addsitedir(sys.argv[2]);"
        "started = sorted(set(sys.modules) - before);"
        "import thirdparty, ownpkg, json;"
        "print(json.dumps({'third': thirdparty.VALUE, 'own': ownpkg.VALUE,"
        " 'hook': '_qci_bytecode_hook' in sys.modules, 'started': started, 'cached': {m.__name__: m.__cached__"
        " for m in (thirdparty, ownpkg, json)}}))"
    )
    alias = site.parent / "lib64-site-packages"
    if not alias.exists():
        alias.symlink_to(site, target_is_directory=True)
    done = subprocess.run(
        [sys.executable, "-S", "-c", code, str(site), str(alias)],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _pycs(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.pyc")) if folder.exists() else []


def _values(run: dict[str, Any]) -> tuple[int, int, bool]:
    return run["third"], run["own"], run["hook"]


def test_two_envs_share_the_pyc_of_one_linked_file_and_keep_first_party_bytecode_apart(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    first = _env(tmp_path, "a")
    second = _env(tmp_path, "b", linked=first)
    run = _run(first, tmp_path, shared)
    assert _values(run) == (1, 7, True)
    source = (first / "thirdparty" / "__init__.py").stat()
    pyc = shared / f"{source.st_dev}-{source.st_ino}-{PYC}"
    assert run["cached"]["thirdparty"] == str(pyc) and pyc.is_file()
    # the hook runs at every interpreter start: it imports nothing more than itself
    assert run["started"] == ["_qci_bytecode_hook"]
    # the standard library's bytecode is shared too; the first-party module's stays under
    # this env's prefix
    assert Path(run["cached"]["json"]).parent == shared
    assert run["cached"]["ownpkg"].startswith(str(tmp_path / "a" / "prefix"))
    assert [p.name for p in _pycs(tmp_path / "a" / "prefix") if "ownpkg" in p.name] == [
        f"ownpkg.{sys.implementation.cache_tag}.pyc"
    ]
    assert not [p for p in _pycs(shared) if "ownpkg" in p.name]

    # the second env reads the first's pyc: a code object planted in it (under the
    # header of the unchanged source) is what its import runs
    data = pyc.read_bytes()
    pyc.write_bytes(data[:16] + marshal.dumps(compile("VALUE = 99\n", "planted", "exec")))
    second_run = _run(second, tmp_path, shared)
    assert second_run["third"] == 99 and second_run["cached"]["thirdparty"] == str(pyc)
    assert not [p for p in _pycs(tmp_path / "b" / "prefix") if "thirdparty" in str(p)]


def test_another_file_of_the_same_path_size_and_mtime_never_reads_its_pyc(tmp_path: Path) -> None:
    """Two envs' own copies (uv copied them): what a pyc keyed by the path inside
    site-packages would confuse, since a timestamp header sees no difference."""
    shared = tmp_path / "shared"
    first, second = _env(tmp_path, "a", value=1), _env(tmp_path, "b", value=2)
    one, two = (site / "thirdparty" / "__init__.py" for site in (first, second))
    assert (one.stat().st_size, one.stat().st_mtime) == (two.stat().st_size, two.stat().st_mtime)
    assert _run(first, tmp_path, shared)["third"] == 1
    assert _run(second, tmp_path, shared)["third"] == 2
    assert _run(first, tmp_path, shared)["third"] == 1
    for source in (one.stat(), two.stat()):
        assert (shared / f"{source.st_dev}-{source.st_ino}-{PYC}").is_file()


def test_without_the_variable_nothing_is_shared(tmp_path: Path) -> None:
    site = _env(tmp_path, "a")
    assert _values(_run(site, tmp_path, None)) == (1, 7, True)
    assert not (tmp_path / "shared").exists()
    prefix = tmp_path / "a" / "prefix"
    # (the hook's own module is compiled before it activates)
    compiled = {p.stem.split(".")[0] for p in _pycs(prefix) if str(site) in str(p)}
    assert compiled == {"__init__", "ownpkg", "_qci_bytecode_hook"}


def test_the_pth_line_activates_the_hook_naming_every_first_party_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sysconfig

    installer = _installer()
    names = {d.import_name for d in installer.repo.distributions().values()}
    assert {"qcore", "qinductor_x86", "qbackend_onednn", "qbackend_example"} <= names
    monkeypatch.setattr(sysconfig, "get_paths", lambda: {"purelib": str(tmp_path)})
    assert installer.main() == 0
    (line,) = (tmp_path / "_qci_bytecode_hook.pth").read_text().splitlines()
    assert line.startswith("import _qci_bytecode_hook; _qci_bytecode_hook.activate(")
    assert set(line.split("'")[1].split(",")) == names
    assert (tmp_path / "_qci_bytecode_hook.py").read_text() == (CI / "bytecode_hook.py").read_text()


def _commands(tox: configparser.ConfigParser, section: str, key: str) -> list[str]:
    """The section's commands, ``{[testenv]...}`` references expanded."""
    raw = tox[section].get(key, tox["testenv"].get(key, "")) if section != "testenv" else tox[section][key]
    reference = "{[testenv]" + key + "}"
    lines: list[str] = []
    for line in (line.strip() for line in raw.strip().splitlines()):
        if line == reference:
            lines += _commands(tox, "testenv", key)
        elif line:
            lines.append(line)
    return lines


def test_every_env_that_installs_wheels_installs_the_hook_first() -> None:
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    hook = "python {toxinidir}/.ci/shared_bytecode.py"
    installing = []
    for section in (s for s in tox.sections() if s.startswith("testenv:")):
        pre = _commands(tox, section, "commands_pre")
        run = _commands(tox, section, "commands")
        if any("wheels.py install" in c or "avx2_kernels.py" in c for c in pre + run):
            installing.append(section)
            assert pre and pre[0] == hook, (section, pre)
    assert {"testenv:x86", "testenv:integration", "testenv:avx2-kernels", "testenv:onednn"} <= set(installing)
