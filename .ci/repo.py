"""What the repository holds, read from its own files: the distributions (their
``pyproject.toml``) and the tox envs (``tox.ini``). The CI scripts next to this one
(wheels, workflow, affected) read these facts here instead of repeating them.
"""

from __future__ import annotations

import configparser
import fnmatch
import re
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Where the distributions live: every folder here with a pyproject.toml is one.
PACKAGE_FOLDERS = ("packages", "examples")
#: Files every env depends on: a change to one of them runs every job.
SHARED_FILES = (
    "tox.ini", "constraints.txt", "constraints/**", "pyproject.toml", "conftest.py", ".ci/**",
    ".github/workflows/**",
)  # fmt: skip
_EXTRAS = re.compile(r"\[[^\]]*\]$")


@dataclass(frozen=True)
class Distribution:
    """One installable distribution of this repository."""

    folder: str  # relative to the root, e.g. "packages/qcore"
    name: str  # as published, e.g. "qcore-torch"
    import_name: str
    requires: frozenset[str]  # names of the first-party distributions it depends on


@dataclass(frozen=True)
class ToxEnv:
    """One tox env: what it installs from this repository and which files it reads.

    Both come from its ``set_env``: ``QPACKAGES`` (folders, with extras, whose wheels
    ``.ci/wheels.py`` installs), ``QTESTS`` (what pytest runs) and ``QREADS`` (other files
    its tests read, such as the docs they run); scripts are the ``{toxinidir}/.ci/...``
    files its commands name. An env that installs no wheel (type, lint, dist) reads every
    distribution.
    """

    name: str
    installs: tuple[str, ...]  # folders, e.g. "packages/qcore"
    reads: tuple[str, ...]  # paths relative to the root
    set_env: dict[str, str]


def _requirement_name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;@]", requirement, maxsplit=1)[0].lower()


@cache
def distributions() -> dict[str, Distribution]:
    """Every distribution of the repository, by folder."""
    found: dict[str, tuple[str, str, list[str]]] = {}
    for group in PACKAGE_FOLDERS:
        for pyproject in sorted((ROOT / group).glob("*/pyproject.toml")):
            data = tomllib.loads(pyproject.read_text())
            wheel = data["tool"]["hatch"]["build"]["targets"]["wheel"]
            # the first listed folder is the import package; qcore-torch lists siblings after it
            wheel_dirs = wheel.get("packages") or wheel["only-include"]
            folder = pyproject.parent.relative_to(ROOT).as_posix()
            found[folder] = (
                data["project"]["name"],
                Path(wheel_dirs[0]).name,
                [_requirement_name(r) for r in data["project"].get("dependencies", [])],
            )
    names = {name for name, _, _ in found.values()}
    return {
        folder: Distribution(folder, name, import_name, frozenset(set(reqs) & names))
        for folder, (name, import_name, reqs) in found.items()
    }


def by_name() -> dict[str, Distribution]:
    return {d.name: d for d in distributions().values()}


def closure(folders: list[str]) -> set[str]:
    """The folders of ``folders`` and of every first-party distribution they require."""
    names = by_name()
    todo = [distributions()[f] for f in folders]
    seen: set[str] = set()
    while todo:
        dist = todo.pop()
        if dist.folder not in seen:
            seen.add(dist.folder)
            todo += [names[n] for n in dist.requires]
    return seen


def strip_extras(spec: str) -> str:
    """``packages/qcore[pt2e]`` -> ``packages/qcore``."""
    return _EXTRAS.sub("", spec)


def _tox() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(ROOT / "tox.ini")
    return parser


def _names(raw: str) -> list[str]:
    return [name.strip() for name in re.split(r"[,\s]+", raw) if name.strip()]


def env_names() -> list[str]:
    """Every tox env, in order: the env list (the default torch row, which the README's
    test command runs), then the other rows' envs (tox's label ``rows``)."""
    return [*default_env_names(), *row_env_names()]


def default_env_names() -> list[str]:
    """tox's env list: every env on the default (newest) torch row."""
    return _names(_tox()["tox"]["env_list"])


def row_env_names() -> list[str]:
    """The envs of the older torch rows, named ``<env>-torch<release>`` (tox's label ``rows``)."""
    labels = _tox()["tox"].get("labels", "")
    rows = re.search(r"^\s*rows\s*=\s*((?:.*\\\n)*.*)$", labels, re.M)
    return _names(rows[1].replace("\\", " ")) if rows else []


def _raw(parser: configparser.ConfigParser, section: str, key: str) -> str:
    """A key of a section (else of the first of its ``base`` sections that has it, else
    ``[testenv]``'s), with
    ``{[section]key}`` expanded."""
    bases = _names(parser[section].get("base", "")) if parser.has_section(section) else []
    if parser.has_option(section, key):
        value = parser[section][key]
    elif any(parser.has_option(base, key) for base in bases):
        value = next(_raw(parser, base, key) for base in bases if parser.has_option(base, key))
    else:
        value = parser["testenv"].get(key, "")
    return re.sub(r"\{\[([^\]]+)\](\w+)\}", lambda m: _raw(parser, m[1], m[2]), value)


def _value(parser: configparser.ConfigParser, section: str, key: str) -> str:
    """:func:`_raw`, with its factor-conditional lines (``torch2.14: KEY = ...``,
    ``!torch2.13-!torch2.14: command``) kept, unconditioned, only where the env's name
    meets every factor of the condition, as tox reads them."""
    factors = set(section.removeprefix("testenv:").split("-"))
    lines = []
    for line in _raw(parser, section, key).splitlines():
        condition = re.match(r"\s*(!?[\w.]+(?:-!?[\w.]+)*):\s+(.*)$", line)
        if condition is None:
            lines.append(line)
        elif all(
            (f[1:] not in factors) if f.startswith("!") else (f in factors)
            for f in condition[1].split("-")
        ):
            lines.append(condition[2])
    return "\n".join(lines)


def _set_env(text: str) -> dict[str, str]:
    text = re.sub(r"\\\s*\n\s*", " ", text)  # tox's line continuation
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line)
    return {k.strip(): v.strip() for k, v in pairs if not k.strip().startswith("#")}


@cache
def tox_envs() -> dict[str, ToxEnv]:
    """Every env of tox's env list, in its order."""
    parser = _tox()
    samples = mutation_samples()
    envs: dict[str, ToxEnv] = {}
    for name in env_names():
        section = f"testenv:{name}"
        set_env = _set_env(_value(parser, section, "set_env"))
        commands = _value(parser, section, "commands_pre") + _value(parser, section, "commands")
        tests = set_env.get("QTESTS", "").split()
        scripts = re.findall(r"\{toxinidir\}/(\.ci/[\w.-]+)", commands)
        if name in samples:  # CI's mutation sample runs in it after its tests
            scripts += [".ci/sample_mutants", ".ci/mutants.py", ".ci/mutants.toml", ".ci/mutants_equivalent.toml"]
        envs[name] = ToxEnv(
            name=name,
            installs=tuple(strip_extras(s) for s in set_env.get("QPACKAGES", "").split()),
            reads=tuple(dict.fromkeys([*tests, *set_env.get("QREADS", "").split(), *scripts])),
            set_env=set_env,
        )
    return envs


def mutation_samples() -> dict[str, list[str]]:
    """env -> the arguments of CI's mutation sample in it (``.ci/sample_mutants``'s case
    arms: ``--sample N`` and its ``--target`` patterns)."""
    text = (ROOT / ".ci" / "sample_mutants").read_text()
    return {
        env: [a.strip("'") for a in args.split()]
        for env, args in re.findall(r"^\s+(\w+)\) sample=\(([^)]*)\)", text, re.M)
    }


def affected(changed: list[str]) -> list[str]:
    """The envs that a change of ``changed`` (paths relative to the root) must run, in
    tox's order: an env runs when a file it installs (a distribution it needs, directly
    or through a dependency), reads or shares with every env changed."""
    envs = tox_envs()
    result = []
    for env in envs.values():
        folders = closure(list(env.installs)) if env.installs else set(distributions())
        watched = [*folders, *env.reads]
        if any(_matches(path, watched) for path in changed):
            result.append(env.name)
    return result


def _matches(path: str, watched: list[str]) -> bool:
    if any(fnmatch.fnmatch(path, pattern) for pattern in SHARED_FILES):
        return True
    return any(path == w or path.startswith(w.rstrip("/") + "/") for w in watched)
