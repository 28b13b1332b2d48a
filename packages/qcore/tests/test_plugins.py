"""Plugin discovery: laziness, failure isolation, conflicts, disabling, foreign qcore."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import qcore
from qcore.errors import ForeignQcoreError, PluginConflictError, PluginError, PluginNotFoundError
from qcore.testing.fresh import run_fresh
from qcore.zoo.suite.fakes import one_plugin

FakeDist = Callable[..., Path]

# A minimal valid backend a fake distribution can point at: one linear pattern.
GOOD_BACKEND = """
from qcore.plugin_api import BackendPlugin

def _config():
    import torch
    from torch.ao.quantization.backend_config import BackendConfig, BackendPatternConfig, DTypeConfig
    dtype = DTypeConfig(input_dtype=torch.quint8, output_dtype=torch.quint8)
    return BackendConfig("tiny").set_backend_pattern_config(
        BackendPatternConfig(torch.nn.ReLU).add_dtype_config(dtype))

PLUGIN = BackendPlugin(name="tiny", backend_config=_config, reference_convert=True)
"""
OTHER_BACKEND = GOOD_BACKEND.replace('"tiny"', '"other"')


def statuses() -> dict[tuple[str, str, str], str]:
    return {(p.kind, p.name, p.distribution): p.status for p in qcore.list_plugins()}


def test_missing_module_is_isolated_and_names_the_distribution(fake_dist: FakeDist) -> None:
    one_plugin(fake_dist, "qbackend-broken", "broken", "qbroken_missing.plugin")
    one_plugin(fake_dist, "qbackend-tiny", "tiny", "qtiny_ok.plugin", GOOD_BACKEND)
    assert statuses()[("backend", "broken", "qbackend-broken")] == "available"

    with pytest.raises(PluginError, match=r"qbackend-broken 1\.0.*qbroken_missing") as info:
        qcore.get_backend_config("broken")
    assert "ModuleNotFoundError" in str(info.value)

    # the others keep working, before and after the failure
    assert len(qcore.get_backend_config("tiny").configs) == 1
    rows = {(p.name, p.distribution): p for p in qcore.list_plugins()}
    assert rows[("broken", "qbackend-broken")].status == "error"
    assert "qbroken_missing" in rows[("broken", "qbackend-broken")].reason
    assert rows[("tiny", "qbackend-tiny")].status == "loaded"


def test_two_distributions_claiming_one_name_is_an_error_naming_both(
    fake_dist: FakeDist,
) -> None:
    one_plugin(fake_dist, "qbackend-tiny", "tiny", "qtiny_a.plugin", GOOD_BACKEND)
    one_plugin(fake_dist, "qbackend-copycat", "tiny", "qtiny_b.plugin", GOOD_BACKEND)
    one_plugin(fake_dist, "qbackend-other", "other", "qother.plugin", OTHER_BACKEND)
    with pytest.raises(PluginConflictError) as info:
        qcore.get_backend_config("tiny")
    assert "qbackend-tiny" in str(info.value) and "qbackend-copycat" in str(info.value)
    assert "qtiny_a" not in sys.modules and "qtiny_b" not in sys.modules
    conflicted = {d: s for (k, n, d), s in statuses().items() if (k, n) == ("backend", "tiny")}
    assert conflicted == {"qbackend-tiny": "conflict", "qbackend-copycat": "conflict"}
    assert len(qcore.get_backend_config("other").configs) == 1


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("PLUGIN = 42", r"is a int, expected a qcore\.plugin_api\.BackendPlugin"),
        (
            "from qcore.plugin_api import QuantizerPlugin\n"
            "PLUGIN = QuantizerPlugin(name='odd', factory=object)",
            r"is a QuantizerPlugin, expected a qcore\.plugin_api\.BackendPlugin",
        ),
        (
            GOOD_BACKEND.replace(
                "backend_config=_config", "backend_config=_config, api_version=99"
            ).replace('"tiny"', '"odd"'),
            r"targets plugin API version 99, this qcore provides version 1",
        ),
        (GOOD_BACKEND, r"descriptor is named 'tiny', but the entry point is named 'odd'"),
        (
            "from qcore.plugin_api import BackendPlugin\n"
            "PLUGIN = BackendPlugin(name='odd', backend_config=lambda: {'not': 'a config'})",
            r"returned a dict for its BackendConfig",
        ),
        (
            "from qcore.plugin_api import BackendPlugin\n"
            "def _boom(): raise RuntimeError('no such chip')\n"
            "PLUGIN = BackendPlugin(name='odd', backend_config=_boom)",
            r"failed to build its BackendConfig: RuntimeError: no such chip",
        ),
        (
            "from qcore.plugin_api import BackendPlugin\n"
            "PLUGIN = BackendPlugin(name='odd', backend_config='qodd.nowhere:build')",
            r"failed to build its BackendConfig: ModuleNotFoundError: .*qodd.nowhere",
        ),
        (
            "from qcore.plugin_api import BackendPlugin\n"
            "PLUGIN = BackendPlugin(name='odd', backend_config='qodd_build_without_colon')",
            r"failed to build its BackendConfig: ValueError: factory reference .* 'module:attribute'",
        ),
        (
            GOOD_BACKEND.replace('"tiny"', '"odd"').replace(
                ".add_dtype_config(dtype)", ".set_dtype_configs([{'input_dtype': 1}])"
            ),
            r"pattern config #0 \(<class 'torch.nn.modules.activation.ReLU'>\) is malformed",
        ),
    ],
    ids=[
        "not-a-descriptor",
        "wrong-kind",
        "api-version",
        "name-mismatch",
        "wrong-return",
        "factory-raises",
        "reference-missing",
        "reference-malformed",
        "dtype-config-not-a-DTypeConfig",
    ],
)
def test_bad_plugins_are_reported_with_distribution_and_reason(
    fake_dist: FakeDist, source: str, expected: str
) -> None:
    one_plugin(fake_dist, "qbackend-odd", "odd", "qodd.plugin", source)
    with pytest.raises(PluginError, match=expected) as info:
        qcore.get_backend_config("odd")
    assert "qbackend-odd 1.0" in str(info.value)
    row = next(p for p in qcore.list_plugins() if p.name == "odd")
    assert row.status == "error" and "qbackend-odd" in row.reason
    # the failure is remembered, not retried with a different outcome
    with pytest.raises(PluginError, match=expected):
        qcore.get_backend_config("odd")


def test_unknown_name_lists_known_names(fake_dist: FakeDist) -> None:
    one_plugin(fake_dist, "qbackend-tiny", "tiny", "qtiny_c.plugin")
    with pytest.raises(
        PluginNotFoundError, match=r"no backend plugin named 'mychip' \(known: .*tiny"
    ):
        qcore.get_backend_config("mychip")


@pytest.fixture
def two_backends(fake_dist: FakeDist) -> FakeDist:
    """Backends ``tiny`` (qbackend-tiny) and ``other`` (qbackend-other), both valid."""
    one_plugin(fake_dist, "qbackend-tiny", "tiny", "qtwo_tiny.plugin", GOOD_BACKEND)
    one_plugin(fake_dist, "qbackend-other", "other", "qtwo_other.plugin", OTHER_BACKEND)
    return fake_dist


@pytest.mark.parametrize("spec", ["tiny", "backend:tiny", " xnnpack , tiny "])
def test_disable_by_environment(
    two_backends: FakeDist, monkeypatch: pytest.MonkeyPatch, spec: str
) -> None:
    monkeypatch.setenv("QCORE_DISABLE_PLUGINS", spec)
    assert statuses()[("backend", "tiny", "qbackend-tiny")] == "disabled"
    assert statuses()[("backend", "other", "qbackend-other")] == "available"
    with pytest.raises(PluginError, match="disabled by QCORE_DISABLE_PLUGINS"):
        qcore.get_backend_config("tiny")
    assert len(qcore.get_backend_config("other").configs) == 1


def test_disabling_another_kind_leaves_the_backend_alone(
    two_backends: FakeDist, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QCORE_DISABLE_PLUGINS", "quantizer:tiny")
    assert len(qcore.get_backend_config("tiny").configs) == 1


def test_foreign_qcore_distribution_is_named(two_backends: FakeDist) -> None:
    # The unrelated PyPI "qcore": same distribution name, none of our marker entry points.
    two_backends("qcore")
    with pytest.raises(
        ForeignQcoreError,
        match=r"unrelated PyPI library.*pip uninstall qcore && pip install --force-reinstall qcore-torch",
    ):
        qcore.get_backend_config("tiny")
    row = next(p for p in qcore.list_plugins() if p.name == "tiny")
    assert row.status == "error" and "unrelated" in row.reason


def test_our_own_install_under_the_old_name_is_not_foreign(two_backends: FakeDist) -> None:
    # Before the rename to qcore-torch, ours published as "qcore" with the marker entry point.
    two_backends("qcore", {"qcore.core": {"plugin_api": "qcore.plugin_api:PLUGIN_API_VERSION"}})
    assert len(qcore.get_backend_config("tiny").configs) == 1


EXTENSION = """
import torch
from torch.ao.quantization.backend_config import BackendPatternConfig, DTypeConfig
from qcore.plugin_api import BackendExtension
dtype = DTypeConfig(input_dtype=torch.quint8, output_dtype=torch.quint8)
def _patterns():
    return [BackendPatternConfig(OP).add_dtype_config(dtype)]
EXT = BackendExtension(name="NAME", target="tiny", patterns=_patterns)
"""


def _extend(make: FakeDist, distribution: str, entry: str, module: str, op: str) -> None:
    """A distribution whose backend extension ``entry`` (``target.name``) adds ``op``."""
    source = EXTENSION.replace("OP", op).replace("NAME", entry.split(".")[1])
    make(distribution, {"qcore.backend_extensions": {entry: f"{module}:EXT"}}, {module: source})


def test_backend_extension_adds_patterns_and_conflicts_name_both(two_backends: FakeDist) -> None:
    import torch

    _extend(two_backends, "qext-new", "tiny.extra", "qext_new.ext", "torch.nn.Mish")
    config = qcore.get_backend_config("tiny")
    assert [c.pattern for c in config.configs] == [torch.nn.ReLU, torch.nn.Mish]
    assert len(qcore.get_backend_config("other").configs) == 1
    assert "qext_new" in sys.modules

    _extend(two_backends, "qext-clash", "tiny.clash", "qext_clash.ext", "torch.nn.ReLU")
    with pytest.raises(PluginConflictError, match=r"qext-clash 1\.0.*qbackend-tiny 1\.0"):
        qcore.get_backend_config("tiny")


def test_extensions_of_other_targets_are_not_imported(two_backends: FakeDist) -> None:
    _extend(two_backends, "qext-new", "tiny.extra", "qext_lazy.ext", "torch.nn.Mish")
    assert len(qcore.get_backend_config("other").configs) == 1
    assert "qext_lazy" not in sys.modules


def test_extension_entry_point_and_descriptor_must_agree_on_target(two_backends: FakeDist) -> None:
    _extend(two_backends, "qext-lost", "other.lost", "qext_lost.ext", "torch.nn.Mish")
    with pytest.raises(PluginError, match=r"qext-lost.*target 'other'.*targets 'tiny'"):
        qcore.get_backend_config("other")


def test_import_qcore_and_list_plugins_import_no_plugin_and_no_torch() -> None:
    code = (
        "import sys, qcore\n"
        "qcore.list_plugins()\n"
        "heavy = [m for m in sys.modules if m.startswith(('qbackend_', 'qquantizer_', "
        "'qinductor_', 'torchao', 'torch'))]\n"
        "import qcore.testing.fresh as f; f.emit(heavy)"
    )
    assert run_fresh(code).result() == []
