"""Checks for an FX backend that re-declares a reference BackendConfig (torch's own).

This project's ``onednn`` and ``executorch`` backends rebuild torch's configs with the
declarative builder; a plugin that rebuilds another one (``fbgemm``, ``qnnpack``, or a
vendor's) proves the same things with the same calls:

* :func:`assert_conformant_covering`: the conformance kit passes and exercises every
  pattern, at least as many as the reference declares;
* :func:`assert_equals_reference`: field by field equal to the reference (with the
  extensions installed for it switched off, which add patterns on purpose);
* :func:`assert_extensions_only_add_patterns`: with its extensions, nothing changed;
* :func:`assert_builds_in_a_fresh_interpreter`: ``qcore.get_backend_config`` works in a
  new process, whatever was imported before.

:func:`torch_backend_config` gives torch's own config for a name.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from torch.ao.quantization.backend_config import BackendConfig, BackendPatternConfig

import qcore
from qcore.fx.patterns.rows import describe, pattern_key
from qcore.plugin_api import resolve
from qcore.plugins.discovery import DISABLE_ENV, REGISTRY
from qcore.testing import assert_conformant
from qcore.testing.fresh import run_fresh
from qcore.testing.parity import compare_backend_configs
from qcore.testing.result import CheckResult

__all__ = [
    "assert_builds_in_a_fresh_interpreter",
    "assert_conformant_covering",
    "assert_equals_reference",
    "assert_extensions_only_add_patterns",
    "config_pair",
    "torch_backend_config",
    "without_extensions",
]

#: Every check the backend kit runs on a backend whose patterns all fuse or convert.
_BACKEND_CHECKS = {"load", "engine", "well-formed", "fuser-method", "prepare-convert"}


def torch_backend_config(name: str) -> BackendConfig:
    """torch's own ``get_<name>_backend_config()``. torch 2.13's configs fail in a fresh
    process unless ``backend_config.utils`` was imported first, so it is, here."""
    importlib.import_module("torch.ao.quantization.backend_config.utils")
    module = importlib.import_module("torch.ao.quantization.backend_config")
    config: BackendConfig = getattr(module, f"get_{name}_backend_config")()
    return config


def config_pair(name: str) -> tuple[BackendConfig, BackendConfig]:
    """(``qcore.get_backend_config(name)``, torch's own config of that name)."""
    return qcore.get_backend_config(name), torch_backend_config(name)


@contextmanager
def without_extensions(name: str) -> Iterator[None]:
    """The installed extensions of backend ``name`` disabled for the block (by the
    plugin loader's environment variable, restored afterwards)."""
    extensions = [n for n in REGISTRY.names("backend-extension") if n.startswith(f"{name}.")]
    before = os.environ.get(DISABLE_ENV)
    os.environ[DISABLE_ENV] = ",".join(filter(None, [before, *extensions]))
    try:
        yield
    finally:
        if before is None:
            del os.environ[DISABLE_ENV]
        else:
            os.environ[DISABLE_ENV] = before


def assert_conformant_covering(name: str, reference: BackendConfig) -> list[CheckResult]:
    """The conformance kit passes on backend ``name``, runs every check kind, and runs
    ``prepare-convert`` on every pattern: all of the reference's, and any extension's."""
    results = assert_conformant("backend", name)
    runs = [r for r in results if r.check == "prepare-convert"]
    patterns = qcore.get_backend_config(name).configs
    assert len(runs) == len(patterns), f"{len(runs)} of {len(patterns)} patterns were run"
    assert len(patterns) >= len(reference.configs), "fewer patterns than the reference"
    assert {r.check for r in results} == _BACKEND_CHECKS
    return results


def assert_equals_reference(
    name: str,
    reference: BackendConfig,
    *,
    patterns: int,
    upstream_fuser_bugs: Collection[Any] = frozenset(),
    beyond: Sequence[BackendPatternConfig] = (),
) -> BackendConfig:
    """Backend ``name``, its extensions switched off, equals ``reference`` field by field
    (but for the reference's listed fuser crashes) and for the patterns ``beyond`` it
    declares in addition (its ``config.beyond_torch()``); ``reference`` has ``patterns``
    patterns. Returns the backend's config."""
    with without_extensions(name):
        ours = qcore.get_backend_config(name)
    differences = compare_backend_configs(ours, reference, upstream_fuser_bugs=upstream_fuser_bugs)
    assert sorted(differences) == sorted(added_lines(beyond))
    assert ours.name == name
    assert len(reference.configs) == patterns
    assert len(ours.configs) == patterns + len(beyond)
    return ours


def added_lines(configs: Iterable[BackendPatternConfig]) -> list[str]:
    """How :func:`~qcore.testing.parity.compare_backend_configs` names each of ``configs``
    when the reference lacks it."""
    return [f"{describe(pattern_key(config))}: extra (not in reference)" for config in configs]


def assert_extensions_only_add_patterns(
    name: str, reference: BackendConfig, *, upstream_fuser_bugs: Collection[Any] = frozenset()
) -> list[str]:
    """With the installed extensions, the differences from the reference are exactly one
    "extra" line per pattern those extensions add: they added, and changed nothing.
    Returns the differences (empty when no extension is installed)."""
    diffs = compare_backend_configs(
        qcore.get_backend_config(name), reference, upstream_fuser_bugs=upstream_fuser_bugs
    )
    added = added_lines(
        config
        for _, extension in REGISTRY.extensions("backend-extension", name)
        for config in resolve(extension.patterns)()
    )
    assert sorted(diffs) == sorted(added), f"differences {diffs}, extensions add {added}"
    return diffs


def assert_builds_in_a_fresh_interpreter(name: str) -> None:
    """``qcore.get_backend_config(name)`` in a new interpreter, nothing imported before."""
    outcome = run_fresh(
        f"import qcore\nname = qcore.get_backend_config({name!r}).name\n"
        # only now: qcore.testing imports torch's backend_config modules itself
        "import qcore.testing.fresh as f\nf.emit(name)"
    )
    assert outcome.ok, outcome.describe()
    assert outcome.result() == name
